"""The groups' part of the transform script runs on functions of a few groups each (schedule/chunks.py): outlining
and putting back leave the module as it was, and the kernels a compile makes are the same with and without."""

from __future__ import annotations

import hashlib

import pytest

from portable import profiles
from portable.compiler.pipeline import STAGES, Compilation, Dumper, compile_module, run_stages
from portable.compiler.schedule import chunks
from portable.ir.mlir import ir
from portable.ir.util import find_ops

ID = "affine_map<(i, j) -> (i, j)>"


def _layers(n: int, early_producer: bool = False) -> str:
    """n layers of relu(x @ w_i) on 32x32; with `early_producer`, the last layer's weight is scaled by an op the
    graph computes first (as a frontend places a position embedding's broadcast far ahead of its use)."""
    t = "tensor<32x32xf32>"
    args = ", ".join(f"%w{i}: {t}" for i in range(n))
    lines = ["  %z = arith.constant 0.0 : f32", "  %two = arith.constant 2.0 : f32", f"  %e = tensor.empty() : {t}"]
    last = f"%w{n - 1}"
    if early_producer:
        lines.append(f"""  %s = linalg.generic {{indexing_maps = [{ID}, {ID}],
                       iterator_types = ["parallel", "parallel"]}} ins(%w{n - 1} : {t}) outs(%e : {t}) {{
    ^bb0(%a: f32, %o: f32):
      %y = arith.mulf %a, %two : f32
      linalg.yield %y : f32
  }} -> {t}""")
        last = "%s"
    x = "%x"
    for i in range(n):
        w = last if i == n - 1 else f"%w{i}"
        lines.append(f"""  %f{i} = linalg.fill ins(%z : f32) outs(%e : {t}) -> {t}
  %m{i} = linalg.matmul ins({x}, {w} : {t}, {t}) outs(%f{i} : {t}) -> {t}
  %r{i} = linalg.generic {{indexing_maps = [{ID}, {ID}],
                       iterator_types = ["parallel", "parallel"]}} ins(%m{i} : {t}) outs(%e : {t}) {{
    ^bb0(%a: f32, %o: f32):
      %y = arith.maximumf %a, %z : f32
      linalg.yield %y : f32
  }} -> {t}""")
        x = f"%r{i}"
    return f"func.func @main(%x: {t}, {args}) -> {t} {{\n" + "\n".join(lines) + f"\n  return {x} : {t}\n}}\n"


def _at_tile_and_map(text: str, profile: str, targets: tuple[str, ...]) -> Compilation:
    options = profiles.codegen_options(profiles.all_profiles()[profile])
    c = Compilation(ir.Module.parse(text), options, targets, Dumper("0" * 16))
    run_stages(c, STAGES[:[s.name for s in STAGES].index("tile-and-map")])
    return c


@pytest.mark.parametrize("early", [False, True])
def test_outline_and_restore_leave_the_module_as_it_was(monkeypatch, early):
    monkeypatch.setattr(chunks, "GROUPS_PER_CHUNK", 1)
    with ir.Context(), ir.Location.unknown():
        c = _at_tile_and_map(_layers(4, early), "pocl", ("opencl",))
        chunks._sink_producers(c.func)  # the one move outline makes that restore keeps (fusion takes the op anyway)
        before = str(c.module)
        parts = chunks.outline(c.func)
        assert len(parts) >= 2
        funcs = find_ops(c.module.operation, ("func.func",))
        assert len(funcs) == len(parts) + 1 and len(find_ops(c.module.operation, ("func.call",))) == len(parts)
        c.module.operation.verify()
        chunks.restore(parts)
        c.module.operation.verify()
        assert str(c.module) == before


def test_a_producer_far_ahead_of_its_group_moves_down_to_it(monkeypatch):
    monkeypatch.setattr(chunks, "GROUPS_PER_CHUNK", 1)
    with ir.Context(), ir.Location.unknown():
        c = _at_tile_and_map(_layers(4, early_producer=True), "pocl", ("opencl",))
        ops = [op.operation for op in c.func.regions[0].blocks[0].operations][:-1]
        spans_before = chunks._spans(ops)
        chunks._sink_producers(c.func)
        ops = [op.operation for op in c.func.regions[0].blocks[0].operations][:-1]
        assert len(chunks._spans(ops)) > len(spans_before)


def _kernels(exe) -> tuple:
    ks = sorted(hashlib.sha256((k.spirv or b"") + (k.opencl or "").encode()).hexdigest() for k in exe.kernels)
    grids = sorted((exe.kernels[d.kernel].key(), d.grid) for d in exe.dispatches)
    return ks, grids


@pytest.mark.parametrize("profile, targets", [("lavapipe", ("vulkan",)), ("pocl", ("opencl",)),
                                             ("nvidia", ("vulkan", "opencl"))])
def test_chunked_compile_makes_the_same_kernels(monkeypatch, profile, targets):
    text = _layers(5, early_producer=True)
    options = profiles.codegen_options(profiles.all_profiles()[profile])
    monkeypatch.setattr(chunks, "GROUPS_PER_CHUNK", 1)
    chunked = _kernels(compile_module(text, options, targets))
    monkeypatch.setattr(chunks, "outline", lambda main: [])
    whole = _kernels(compile_module(text, options, targets))
    assert chunked == whole
