#map = affine_map<(d0, d1) -> (d0, d1)>
#map1 = affine_map<(d0, d1) -> (0, d1)>
#map2 = affine_map<(d0, d1) -> ()>
#map3 = affine_map<(d0, d1) -> (d0)>
module {
  func.func @test_cumsum_1d(%arg0: tensor<5xf64>) -> tensor<5xf64> {
    %cst = arith.constant 0.000000e+00 : f64
    %cst_0 = arith.constant dense<[[true, false, false, false, false], [true, true, false, false, false], [true, true, true, false, false], [true, true, true, true, false], [true, true, true, true, true]]> : tensor<5x5xi1>
    %cst_1 = arith.constant dense<0.000000e+00> : tensor<f64>
    %expanded = tensor.expand_shape %arg0 [[0, 1]] output_shape [1, 5] : tensor<5xf64> into tensor<1x5xf64>
    %0 = tensor.empty() : tensor<5x5xf64>
    %1 = linalg.generic {indexing_maps = [#map, #map1, #map2, #map], iterator_types = ["parallel", "parallel"]} ins(%cst_0, %expanded, %cst_1 : tensor<5x5xi1>, tensor<1x5xf64>, tensor<f64>) outs(%0 : tensor<5x5xf64>) {
    ^bb0(%in: i1, %in_2: f64, %in_3: f64, %out: f64):
      %5 = arith.select %in, %in_2, %in_3 : f64
      linalg.yield %5 : f64
    } -> tensor<5x5xf64>
    %2 = tensor.empty() : tensor<5xf64>
    %3 = linalg.fill ins(%cst : f64) outs(%2 : tensor<5xf64>) -> tensor<5xf64>
    %4 = linalg.generic {indexing_maps = [#map, #map3], iterator_types = ["parallel", "reduction"]} ins(%1 : tensor<5x5xf64>) outs(%3 : tensor<5xf64>) {
    ^bb0(%in: f64, %out: f64):
      %5 = arith.addf %in, %out : f64
      linalg.yield %5 : f64
    } -> tensor<5xf64>
    return %4 : tensor<5xf64>
  }
}
