#map = affine_map<(d0) -> (d0)>
#map1 = affine_map<(d0) -> ()>
module {
  func.func @test_celu_float16(%arg0: tensor<5xf16>) -> tensor<5xf16> {
    %cst = arith.constant dense<0.000000e+00> : tensor<f16>
    %cst_0 = arith.constant 2.000000e+00 : f16
    %cst_1 = arith.constant 1.000000e+00 : f16
    %0 = tensor.empty() : tensor<5xf16>
    %1 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%arg0 : tensor<5xf16>) outs(%0 : tensor<5xf16>) {
    ^bb0(%in: f16, %out: f16):
      %8 = arith.divf %in, %cst_0 : f16
      linalg.yield %8 : f16
    } -> tensor<5xf16>
    %2 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%1 : tensor<5xf16>) outs(%0 : tensor<5xf16>) {
    ^bb0(%in: f16, %out: f16):
      %8 = math.exp %in : f16
      linalg.yield %8 : f16
    } -> tensor<5xf16>
    %3 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%2 : tensor<5xf16>) outs(%0 : tensor<5xf16>) {
    ^bb0(%in: f16, %out: f16):
      %8 = arith.subf %in, %cst_1 : f16
      linalg.yield %8 : f16
    } -> tensor<5xf16>
    %4 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%3 : tensor<5xf16>) outs(%0 : tensor<5xf16>) {
    ^bb0(%in: f16, %out: f16):
      %8 = arith.mulf %in, %cst_0 : f16
      linalg.yield %8 : f16
    } -> tensor<5xf16>
    %5 = linalg.generic {indexing_maps = [#map1, #map, #map], iterator_types = ["parallel"]} ins(%cst, %4 : tensor<f16>, tensor<5xf16>) outs(%0 : tensor<5xf16>) {
    ^bb0(%in: f16, %in_2: f16, %out: f16):
      %8 = arith.cmpf olt, %in, %in_2 : f16
      %9 = arith.select %8, %in, %in_2 : f16
      linalg.yield %9 : f16
    } -> tensor<5xf16>
    %6 = linalg.generic {indexing_maps = [#map1, #map, #map], iterator_types = ["parallel"]} ins(%cst, %arg0 : tensor<f16>, tensor<5xf16>) outs(%0 : tensor<5xf16>) {
    ^bb0(%in: f16, %in_2: f16, %out: f16):
      %8 = arith.cmpf ogt, %in, %in_2 : f16
      %9 = arith.select %8, %in, %in_2 : f16
      linalg.yield %9 : f16
    } -> tensor<5xf16>
    %7 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel"]} ins(%6, %5 : tensor<5xf16>, tensor<5xf16>) outs(%0 : tensor<5xf16>) {
    ^bb0(%in: f16, %in_2: f16, %out: f16):
      %8 = arith.addf %in, %in_2 : f16
      linalg.yield %8 : f16
    } -> tensor<5xf16>
    return %7 : tensor<5xf16>
  }
}
