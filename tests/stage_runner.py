"""What the stage tests (test_pipeline_stages.py, test_graph_rewrite_stages.py) share: a profile's options, a
module run through compiler/pipeline.py's STAGES up to one stage and then that stage alone, and a batch-matmul
module both compile. Call them inside an MLIR context (the tests' autouse fixture)."""

from __future__ import annotations

from portable import profiles
from portable.compiler.pipeline import STAGES, Compilation, Dumper, run_stages
from portable.ir import weights
from portable.ir.mlir import ir


def options_for(name: str, **changes) -> profiles.Options:
    return profiles.codegen_options(profiles.all_profiles()[name]).replace(**changes)


def op_names(module: ir.Module) -> list[str]:
    out: list[str] = []

    def visit(op):
        out.append(op.name)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return out


def at_stage(text: str, name: str, options: profiles.Options, targets=("vulkan", "opencl")):
    """A Compilation of `text` with every stage before `name` run; then `name` itself: (before, after, changed)."""
    i = [s.name for s in STAGES].index(name)
    c = Compilation(weights.parse(text), options, targets, Dumper("0" * 16))
    run_stages(c, STAGES[:i])
    before = op_names(c.module)
    c.stage = name
    changed = STAGES[i].run(c)
    c.module.operation.verify()
    return before, c, changed


def batch_matmul(weight_first: bool) -> str:
    """A batch of matmuls sharing one operand, as ONNX MatMul (3-d x 2-d, weight second) and a batched 1x1
    convolution (weight first) become: the shared operand has no batch dim."""
    a, b = ("tensor<64x32xf32>", "tensor<2x32x64xf32>") if weight_first else ("tensor<2x64x32xf32>",
                                                                                "tensor<32x64xf32>")
    amap, bmap = (("(d1, d3)", "(d0, d3, d2)") if weight_first else ("(d0, d1, d3)", "(d3, d2)"))
    return f"""
func.func @main(%a: {a}, %b: {b}) -> tensor<2x64x64xf32> {{
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x64x64xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<2x64x64xf32>) -> tensor<2x64x64xf32>
  %m = linalg.generic {{indexing_maps = [affine_map<(d0, d1, d2, d3) -> {amap}>,
                                        affine_map<(d0, d1, d2, d3) -> {bmap}>,
                                        affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>],
                       iterator_types = ["parallel", "parallel", "parallel", "reduction"]}}
      ins(%a, %b : {a}, {b}) outs(%f : tensor<2x64x64xf32>) {{
    ^bb0(%x: f32, %y: f32, %o: f32):
      %p = arith.mulf %x, %y : f32
      %s = arith.addf %o, %p : f32
      linalg.yield %s : f32
  }} -> tensor<2x64x64xf32>
  return %m : tensor<2x64x64xf32>
}}
"""
