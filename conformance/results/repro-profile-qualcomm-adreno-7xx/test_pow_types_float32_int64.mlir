#map = affine_map<(d0) -> (d0)>
module {
  func.func @test_pow_types_float32_int64(%arg0: tensor<3xf32>, %arg1: tensor<3xi64>) -> tensor<3xf32> {
    %0 = tensor.empty() : tensor<3xf32>
    %1 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel"]} ins(%arg0, %arg1 : tensor<3xf32>, tensor<3xi64>) outs(%0 : tensor<3xf32>) {
    ^bb0(%in: f32, %in_0: i64, %out: f32):
      %2 = arith.extf %in : f32 to f64
      %3 = arith.sitofp %in_0 : i64 to f64
      %4 = math.powf %2, %3 : f64
      %5 = arith.truncf %4 : f64 to f32
      linalg.yield %5 : f32
    } -> tensor<3xf32>
    return %1 : tensor<3xf32>
  }
}
