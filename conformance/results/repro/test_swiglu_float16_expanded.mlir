#map = affine_map<(d0, d1) -> ()>
#map1 = affine_map<(d0, d1) -> (d0, d1)>
module {
  func.func @test_swiglu_float16_expanded(%arg0: tensor<2x4xf16>, %arg1: tensor<2x4xf16>) -> tensor<2x4xf16> {
    %cst = arith.constant 1.000000e+00 : f16
    %cst_0 = arith.constant dense<1.000000e+00> : tensor<f16>
    %0 = tensor.empty() : tensor<2x4xf16>
    %1 = linalg.generic {indexing_maps = [#map, #map1, #map1], iterator_types = ["parallel", "parallel"]} ins(%cst_0, %arg0 : tensor<f16>, tensor<2x4xf16>) outs(%0 : tensor<2x4xf16>) {
    ^bb0(%in: f16, %in_1: f16, %out: f16):
      %5 = arith.mulf %in, %in_1 : f16
      linalg.yield %5 : f16
    } -> tensor<2x4xf16>
    %2 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel"]} ins(%1 : tensor<2x4xf16>) outs(%0 : tensor<2x4xf16>) {
    ^bb0(%in: f16, %out: f16):
      %5 = arith.negf %in : f16
      %6 = math.exp %5 : f16
      %7 = arith.addf %6, %cst : f16
      %8 = arith.divf %cst, %7 : f16
      linalg.yield %8 : f16
    } -> tensor<2x4xf16>
    %3 = linalg.generic {indexing_maps = [#map1, #map1, #map1], iterator_types = ["parallel", "parallel"]} ins(%arg0, %2 : tensor<2x4xf16>, tensor<2x4xf16>) outs(%0 : tensor<2x4xf16>) {
    ^bb0(%in: f16, %in_1: f16, %out: f16):
      %5 = arith.mulf %in, %in_1 : f16
      linalg.yield %5 : f16
    } -> tensor<2x4xf16>
    %4 = linalg.generic {indexing_maps = [#map1, #map1, #map1], iterator_types = ["parallel", "parallel"]} ins(%3, %arg1 : tensor<2x4xf16>, tensor<2x4xf16>) outs(%0 : tensor<2x4xf16>) {
    ^bb0(%in: f16, %in_1: f16, %out: f16):
      %5 = arith.mulf %in, %in_1 : f16
      linalg.yield %5 : f16
    } -> tensor<2x4xf16>
    return %4 : tensor<2x4xf16>
  }
}
