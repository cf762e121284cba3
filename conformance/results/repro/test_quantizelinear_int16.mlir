#map = affine_map<(d0) -> (d0)>
module {
  func.func @test_quantizelinear_int16(%arg0: tensor<16xf32>) -> tensor<16xi16> {
    %cst = arith.constant -3.276800e+04 : f32
    %cst_0 = arith.constant 3.276700e+04 : f32
    %cst_1 = arith.constant 2.000000e+00 : f32
    %cst_2 = arith.constant 2.560000e+02 : f32
    %0 = tensor.empty() : tensor<16xi16>
    %1 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%arg0 : tensor<16xf32>) outs(%0 : tensor<16xi16>) {
    ^bb0(%in: f32, %out: i16):
      %2 = arith.divf %in, %cst_1 : f32
      %3 = math.roundeven %2 : f32
      %4 = arith.addf %3, %cst_2 : f32
      %5 = arith.maximumf %4, %cst : f32
      %6 = arith.minimumf %5, %cst_0 : f32
      %7 = arith.fptosi %6 : f32 to i16
      linalg.yield %7 : i16
    } -> tensor<16xi16>
    return %1 : tensor<16xi16>
  }
}
