#map = affine_map<(d0, d1, d2, d3) -> (d0, d2, d3, 0)>
#map1 = affine_map<(d0, d1, d2, d3) -> (d0, d2, d3, 1)>
#map2 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
module {
  func.func @test_gridsample_zeros_padding(%arg0: tensor<1x1x3x2xf32>, %arg1: tensor<1x2x4x2xf32>) -> tensor<1x1x2x4xf32> {
    %c0_i64 = arith.constant 0 : i64
    %cst = arith.constant 0.000000e+00 : f32
    %cst_0 = arith.constant 1.000000e+00 : f32
    %cst_1 = arith.constant 2.000000e+00 : f32
    %c1_i64 = arith.constant 1 : i64
    %c2_i64 = arith.constant 2 : i64
    %cst_2 = arith.constant 5.000000e-01 : f32
    %c0 = arith.constant 0 : index
    %0 = tensor.empty() : tensor<1x1x2x4xf32>
    %1 = linalg.generic {indexing_maps = [#map, #map1, #map2], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%arg1, %arg1 : tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) outs(%0 : tensor<1x1x2x4xf32>) {
    ^bb0(%in: f32, %in_3: f32, %out: f32):
      %2 = arith.divf %in_3, %cst_1 : f32
      %3 = arith.divf %in, %cst_1 : f32
      %4 = arith.addf %in_3, %cst_0 : f32
      %5 = arith.addf %in, %cst_0 : f32
      %6 = arith.mulf %5, %cst_2 : f32
      %7 = arith.addf %4, %2 : f32
      %8 = arith.addf %6, %3 : f32
      %9 = arith.cmpf olt, %7, %cst : f32
      %10 = arith.cmpf olt, %8, %cst : f32
      %11 = arith.fptosi %7 : f32 to i64
      %12 = arith.fptosi %8 : f32 to i64
      %13 = arith.subi %11, %c1_i64 : i64
      %14 = arith.subi %12, %c1_i64 : i64
      %15 = arith.select %9, %13, %11 : i64
      %16 = arith.select %10, %14, %12 : i64
      %17 = arith.select %9, %c0_i64, %11 : i64
      %18 = arith.select %10, %c0_i64, %12 : i64
      %19 = arith.addi %15, %c1_i64 : i64
      %20 = arith.addi %16, %c1_i64 : i64
      %21 = arith.cmpi sgt, %19, %c2_i64 : i64
      %22 = arith.cmpi sgt, %20, %c1_i64 : i64
      %23 = arith.select %21, %15, %19 : i64
      %24 = arith.select %22, %16, %20 : i64
      %25 = arith.index_cast %17 : i64 to index
      %26 = arith.index_cast %18 : i64 to index
      %27 = arith.index_cast %23 : i64 to index
      %28 = arith.index_cast %24 : i64 to index
      %extracted = tensor.extract %arg0[%c0, %c0, %25, %26] : tensor<1x1x3x2xf32>
      %29 = arith.select %9, %cst, %extracted : f32
      %30 = arith.select %10, %cst, %29 : f32
      %extracted_4 = tensor.extract %arg0[%c0, %c0, %25, %28] : tensor<1x1x3x2xf32>
      %31 = arith.select %22, %cst, %extracted_4 : f32
      %32 = arith.select %9, %cst, %31 : f32
      %extracted_5 = tensor.extract %arg0[%c0, %c0, %27, %26] : tensor<1x1x3x2xf32>
      %33 = arith.select %21, %cst, %extracted_5 : f32
      %34 = arith.select %10, %cst, %33 : f32
      %extracted_6 = tensor.extract %arg0[%c0, %c0, %27, %28] : tensor<1x1x3x2xf32>
      %35 = arith.select %21, %cst, %extracted_6 : f32
      %36 = arith.select %22, %cst, %35 : f32
      %37 = arith.sitofp %15 : i64 to f32
      %38 = arith.sitofp %16 : i64 to f32
      %39 = arith.subf %7, %37 : f32
      %40 = arith.subf %8, %38 : f32
      %41 = arith.subf %cst_0, %40 : f32
      %42 = arith.mulf %30, %41 : f32
      %43 = arith.mulf %32, %40 : f32
      %44 = arith.addf %42, %43 : f32
      %45 = arith.mulf %34, %41 : f32
      %46 = arith.mulf %36, %40 : f32
      %47 = arith.addf %45, %46 : f32
      %48 = arith.subf %cst_0, %39 : f32
      %49 = arith.mulf %44, %48 : f32
      %50 = arith.mulf %47, %39 : f32
      %51 = arith.addf %49, %50 : f32
      linalg.yield %51 : f32
    } -> tensor<1x1x2x4xf32>
    return %1 : tensor<1x1x2x4xf32>
  }
}
