#map = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
module {
  func.func @test_einsum_batch_matmul_bfloat16(%arg0: tensor<5x2x3xbf16>, %arg1: tensor<5x3x4xbf16>) -> tensor<5x2x4xbf16> {
    %cst = arith.constant 0.000000e+00 : f32
    %0 = tensor.empty() : tensor<5x2x4xf32>
    %1 = linalg.fill ins(%cst : f32) outs(%0 : tensor<5x2x4xf32>) -> tensor<5x2x4xf32>
    %2 = linalg.batch_matmul ins(%arg0, %arg1 : tensor<5x2x3xbf16>, tensor<5x3x4xbf16>) outs(%1 : tensor<5x2x4xf32>) -> tensor<5x2x4xf32>
    %3 = tensor.empty() : tensor<5x2x4xbf16>
    %4 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%2 : tensor<5x2x4xf32>) outs(%3 : tensor<5x2x4xbf16>) {
    ^bb0(%in: f32, %out: bf16):
      %5 = arith.truncf %in : f32 to bf16
      linalg.yield %5 : bf16
    } -> tensor<5x2x4xbf16>
    return %4 : tensor<5x2x4xbf16>
  }
}
