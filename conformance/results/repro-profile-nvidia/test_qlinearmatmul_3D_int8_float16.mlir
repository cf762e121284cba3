#map = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
module {
  func.func @test_qlinearmatmul_3D_int8_float16(%arg0: tensor<2x2x4xi8>, %arg1: tensor<2x4x3xi8>) -> tensor<2x2x3xi8> {
    %c0_i32 = arith.constant 0 : i32
    %cst = arith.constant -1.280000e+02 : f32
    %cst_0 = arith.constant 1.270000e+02 : f32
    %cst_1 = arith.constant 4.65230551E-5 : f32
    %cst_2 = arith.constant 0.0106964111 : f32
    %cst_3 = arith.constant -9.000000e+00 : f32
    %0 = tensor.empty() : tensor<2x2x3xi32>
    %1 = linalg.fill ins(%c0_i32 : i32) outs(%0 : tensor<2x2x3xi32>) -> tensor<2x2x3xi32>
    %2 = linalg.batch_matmul ins(%arg0, %arg1 : tensor<2x2x4xi8>, tensor<2x4x3xi8>) outs(%1 : tensor<2x2x3xi32>) -> tensor<2x2x3xi32>
    %3 = tensor.empty() : tensor<2x2x3xf32>
    %4 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%2 : tensor<2x2x3xi32>) outs(%3 : tensor<2x2x3xf32>) {
    ^bb0(%in: i32, %out: f32):
      %7 = arith.sitofp %in : i32 to f32
      %8 = arith.mulf %7, %cst_1 : f32
      linalg.yield %8 : f32
    } -> tensor<2x2x3xf32>
    %5 = tensor.empty() : tensor<2x2x3xi8>
    %6 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%4 : tensor<2x2x3xf32>) outs(%5 : tensor<2x2x3xi8>) {
    ^bb0(%in: f32, %out: i8):
      %7 = arith.divf %in, %cst_2 : f32
      %8 = math.roundeven %7 : f32
      %9 = arith.addf %8, %cst_3 : f32
      %10 = arith.maximumf %9, %cst : f32
      %11 = arith.minimumf %10, %cst_0 : f32
      %12 = arith.fptosi %11 : f32 to i8
      linalg.yield %12 : i8
    } -> tensor<2x2x3xi8>
    return %6 : tensor<2x2x3xi8>
  }
}
