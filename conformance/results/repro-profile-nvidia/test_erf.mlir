#map = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
module {
  func.func @test_erf(%arg0: tensor<1x3x32x32xf32>) -> tensor<1x3x32x32xf32> {
    %0 = tensor.empty() : tensor<1x3x32x32xf32>
    %1 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%arg0 : tensor<1x3x32x32xf32>) outs(%0 : tensor<1x3x32x32xf32>) {
    ^bb0(%in: f32, %out: f32):
      %2 = math.erf %in : f32
      linalg.yield %2 : f32
    } -> tensor<1x3x32x32xf32>
    return %1 : tensor<1x3x32x32xf32>
  }
}
