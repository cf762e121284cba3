#map = affine_map<(d0, d1) -> (d0, d1)>
module {
  func.func @test_nllloss_NC_expanded(%arg0: tensor<3x5xf32>, %arg1: tensor<3xi64>) -> tensor<3xf32> {
    %c5_i64 = arith.constant 5 : i64
    %c0_i64 = arith.constant 0 : i64
    %cst = arith.constant 0.000000e+00 : f32
    %c5 = arith.constant 5 : index
    %expanded = tensor.expand_shape %arg1 [[0, 1]] output_shape [3, 1] : tensor<3xi64> into tensor<3x1xi64>
    %0 = tensor.empty() : tensor<3x1xi64>
    %1 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%expanded : tensor<3x1xi64>) outs(%0 : tensor<3x1xi64>) {
    ^bb0(%in: i64, %out: i64):
      %9 = arith.addi %in, %c5_i64 : i64
      linalg.yield %9 : i64
    } -> tensor<3x1xi64>
    %2 = tensor.empty() : tensor<3x1xi1>
    %3 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%expanded : tensor<3x1xi64>) outs(%2 : tensor<3x1xi1>) {
    ^bb0(%in: i64, %out: i1):
      %9 = arith.cmpi slt, %in, %c0_i64 : i64
      linalg.yield %9 : i1
    } -> tensor<3x1xi1>
    %4 = linalg.generic {indexing_maps = [#map, #map, #map, #map], iterator_types = ["parallel", "parallel"]} ins(%3, %1, %expanded : tensor<3x1xi1>, tensor<3x1xi64>, tensor<3x1xi64>) outs(%0 : tensor<3x1xi64>) {
    ^bb0(%in: i1, %in_0: i64, %in_1: i64, %out: i64):
      %9 = arith.select %in, %in_0, %in_1 : i64
      linalg.yield %9 : i64
    } -> tensor<3x1xi64>
    %5 = tensor.empty() : tensor<3x1xf32>
    %6 = linalg.fill ins(%cst : f32) outs(%5 : tensor<3x1xf32>) -> tensor<3x1xf32>
    %7 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%4 : tensor<3x1xi64>) outs(%6 : tensor<3x1xf32>) {
    ^bb0(%in: i64, %out: f32):
      %9 = linalg.index 0 : index
      %10 = arith.index_cast %in : i64 to index
      %11 = arith.cmpi slt, %10, %c5 : index
      cf.assert %11, "index must be smaller than dim size"
      %12 = arith.cmpi sge, %in, %c0_i64 : i64
      cf.assert %12, "index must be larger or equal to 0"
      %extracted = tensor.extract %arg0[%9, %10] : tensor<3x5xf32>
      linalg.yield %extracted : f32
    } -> tensor<3x1xf32>
    %8 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%7 : tensor<3x1xf32>) outs(%5 : tensor<3x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %9 = arith.negf %in : f32
      linalg.yield %9 : f32
    } -> tensor<3x1xf32>
    %collapsed = tensor.collapse_shape %8 [[0, 1]] : tensor<3x1xf32> into tensor<3xf32>
    return %collapsed : tensor<3xf32>
  }
}
