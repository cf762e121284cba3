#map = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
module {
  func.func @test_resize_downsample_scales_linear_half_pixel_symmetric(%arg0: tensor<1x1x1x4xf32>) -> tensor<1x1x1x2xf32> {
    %cst = arith.constant 1.000000e+00 : f32
    %cst_0 = arith.constant 5.000000e-01 : f32
    %cst_1 = arith.constant 0.000000e+00 : f32
    %cst_2 = arith.constant 6.000000e-01 : f32
    %c0 = arith.constant 0 : index
    %cst_3 = arith.constant 0.333333373 : f32
    %cst_4 = arith.constant 3.000000e+00 : f32
    %0 = tensor.empty() : tensor<1x1x1x2xf32>
    %1 = linalg.generic {indexing_maps = [#map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs(%0 : tensor<1x1x1x2xf32>) {
    ^bb0(%out: f32):
      %2 = linalg.index 3 : index
      %3 = arith.index_cast %2 : index to i64
      %4 = arith.sitofp %3 : i64 to f32
      %5 = arith.addf %4, %cst_0 : f32
      %6 = arith.divf %5, %cst_2 : f32
      %7 = arith.subf %6, %cst_0 : f32
      %8 = arith.addf %7, %cst_3 : f32
      %9 = arith.maximumf %8, %cst_1 : f32
      %10 = arith.minimumf %9, %cst_4 : f32
      %11 = math.floor %10 : f32
      %12 = arith.addf %10, %cst : f32
      %13 = math.floor %12 : f32
      %14 = arith.fptosi %11 : f32 to i64
      %15 = arith.index_cast %14 : i64 to index
      %16 = arith.minimumf %12, %cst_4 : f32
      %17 = arith.fptosi %16 : f32 to i64
      %18 = arith.index_cast %17 : i64 to index
      %extracted = tensor.extract %arg0[%c0, %c0, %c0, %15] : tensor<1x1x1x4xf32>
      %extracted_5 = tensor.extract %arg0[%c0, %c0, %c0, %18] : tensor<1x1x1x4xf32>
      %19 = arith.subf %13, %10 : f32
      %20 = arith.subf %10, %11 : f32
      %21 = arith.mulf %19, %extracted : f32
      %22 = arith.mulf %20, %extracted_5 : f32
      %23 = arith.addf %21, %22 : f32
      %24 = arith.mulf %23, %cst_1 : f32
      %25 = arith.addf %23, %24 : f32
      linalg.yield %25 : f32
    } -> tensor<1x1x1x2xf32>
    return %1 : tensor<1x1x1x2xf32>
  }
}
