#map = affine_map<(d0) -> (d0)>
#map1 = affine_map<(d0) -> ()>
module {
  func.func @test_nonmaxsuppression_single_box(%arg0: tensor<1x1x4xf32>, %arg1: tensor<1x1x1xf32>, %arg2: tensor<1xi64>, %arg3: tensor<1xf32>, %arg4: tensor<1xf32>) -> tensor<1x3xi64> {
    %c0 = arith.constant 0 : index
    %cst = arith.constant 0x7F800000 : f32
    %cst_0 = arith.constant dense<0> : tensor<1x2xi64>
    %cst_1 = arith.constant dense<0> : tensor<1x1xi64>
    %collapsed = tensor.collapse_shape %arg1 [[0, 1, 2]] : tensor<1x1x1xf32> into tensor<1xf32>
    %extracted = tensor.extract %arg4[%c0] : tensor<1xf32>
    %0 = arith.extf %extracted : f32 to f64
    %1 = tensor.empty() : tensor<f32>
    %2 = linalg.fill ins(%cst : f32) outs(%1 : tensor<f32>) -> tensor<f32>
    %3 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["reduction"]} ins(%collapsed : tensor<1xf32>) outs(%2 : tensor<f32>) {
    ^bb0(%in: f32, %out: f32):
      %6 = arith.minimumf %in, %out : f32
      linalg.yield %6 : f32
    } -> tensor<f32>
    %extracted_2 = tensor.extract %3[] : tensor<f32>
    %4 = arith.extf %extracted_2 : f32 to f64
    %5 = arith.cmpf uge, %4, %0 : f64
    cf.assert %5, "unimplemented: score_threshold should be <= min(scores)"
    %concat = tensor.concat dim(1) %cst_0, %cst_1 : (tensor<1x2xi64>, tensor<1x1xi64>) -> tensor<1x3xi64>
    return %concat : tensor<1x3xi64>
  }
}
