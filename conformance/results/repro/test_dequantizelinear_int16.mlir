#map = affine_map<(d0) -> (d0)>
module {
  func.func @test_dequantizelinear_int16(%arg0: tensor<4xi16>) -> tensor<4xf32> {
    %c-1024_i64 = arith.constant -1024 : i64
    %cst = arith.constant 2.000000e+00 : f32
    %0 = tensor.empty() : tensor<4xf32>
    %1 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%arg0 : tensor<4xi16>) outs(%0 : tensor<4xf32>) {
    ^bb0(%in: i16, %out: f32):
      %2 = arith.extsi %in : i16 to i64
      %3 = arith.subi %2, %c-1024_i64 : i64
      %4 = arith.sitofp %3 : i64 to f32
      %5 = arith.mulf %4, %cst : f32
      linalg.yield %5 : f32
    } -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
}
