"""The SPIR-V serializer's boundary (codegen_spirv/serialize.py): it takes the kernel's gpu.module as an operation,
in the compile's own context (no printed kernel parsed again), and leaves that gpu.module as it was."""

from __future__ import annotations

from portable import profiles
from portable.codegen_spirv import spirv_from_gpu_module
from portable.compiler import plan
from portable.compiler.pipeline import STAGES, Compilation, Dumper, run_stages
from portable.ir.mlir import ir
from portable.ir.util import find_ops

SCALE = """
func.func @main(%a: tensor<256xf32>) -> tensor<256xf32> {
  %c = arith.constant 2.0 : f32
  %e = tensor.empty() : tensor<256xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                       iterator_types = ["parallel"]} ins(%a : tensor<256xf32>) outs(%e : tensor<256xf32>) {
    ^bb0(%x: f32, %o: f32):
      %y = arith.mulf %x, %c : f32
      linalg.yield %y : f32
  } -> tensor<256xf32>
  return %r : tensor<256xf32>
}
"""


def test_serializer_takes_the_gpu_module():
    """The words for a gpu.module of the compile, its module untouched, the same words each time, and the words
    the codegen stage made for that kernel."""
    with ir.Context(), ir.Location.unknown():
        options = profiles.codegen_options(profiles.all_profiles()["nvidia"])
        c = Compilation(ir.Module.parse(SCALE), options, ("vulkan",), Dumper("0" * 16))
        run_stages(c, STAGES[:[s.name for s in STAGES].index("codegen")])
        (gm,) = find_ops(c.module.operation, ("gpu.module",))
        fn = find_ops(gm, ("gpu.func",))[0]
        wg = tuple(int(x) for x in ir.DenseI32ArrayAttr(fn.attributes["known_block_size"]))
        access = plan.kernel_access(fn)
        before = str(c.module)
        words, texels = spirv_from_gpu_module(gm, wg, c.options, access=access)
        assert str(c.module) == before
        assert words[:4] == (0x07230203).to_bytes(4, "little") and texels == ()
        assert spirv_from_gpu_module(gm, wg, c.options, access=access) == (words, texels)
        run_stages(c, STAGES[-1:])  # (no lanes rewrite for this profile: target_codegen.codegen)
        assert c.kernels[0].spirv == words


def test_block_types_of_kernels_sharing_the_context_keep_their_names():
    """A read-only buffer that shares a written one's block type gets one of its own, named for its variable
    (codegen_spirv/serialize.py, _decorate_buffers). The context uniques named struct types by name, and two kernels
    of one compile name their arguments alike: a second kernel's block type of another shape must not clash with
    the first's, and each binary still names it `<variable>_block`."""
    import portable
    from portable.codegen_spirv import disassemble
    from portable.compiler.pipeline import compile_module

    g = portable.Graph("two_residuals")
    x, w1, r1 = g.input((64, 1024)), g.input((1024, 384)), g.input((64, 384))
    w2, r2 = g.input((384, 256)), g.input((64, 256))
    g.output(g.add(g.matmul(g.add(g.matmul(x, w1), r1), w2), r2))
    options = dict(profiles.codegen_options(profiles.all_profiles()["nvidia"]), fill_threads=0)
    exe = compile_module(g.to_mlir(), options, ("vulkan",))
    blocks = [[line.split()[0] for line in disassemble(k.spirv).splitlines() if "_block = OpTypeStruct" in line]
              for k in exe.kernels]
    named = [b for b in blocks if b]
    assert len(named) >= 2, blocks
    assert all(b.startswith("%") and b.endswith("_block") and "_arg_" in b for k in named for b in k), named
