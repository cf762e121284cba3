#map = affine_map<(d0, d1, d2) -> (d2)>
#map1 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#map2 = affine_map<(d0, d1) -> (d0, d1)>
#map3 = affine_map<(d0, d1) -> ()>
#map4 = affine_map<(d0, d1, d2) -> (d0, d1, 0)>
#map5 = affine_map<(d0, d1, d2) -> ()>
#map6 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>
#map7 = affine_map<(d0, d1, d2, d3) -> (d0, d1, 0, d3)>
#map8 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#map9 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
module {
  func.func @test_gridsample_bicubic_align_corners_1_additional_1(%arg0: tensor<1x1x3x2xf32>, %arg1: tensor<1x2x4x2xf32>) -> tensor<1x1x2x4xf32> {
    %cst = arith.constant 0.000000e+00 : f32
    %c6 = arith.constant 6 : index
    %cst_0 = arith.constant dense<1.000000e+00> : tensor<f32>
    %cst_1 = arith.constant dense<2.000000e+00> : tensor<f32>
    %cst_2 = arith.constant dense<[-1.000000e+00, 0.000000e+00, 1.000000e+00, 2.000000e+00]> : tensor<4xf32>
    %cst_3 = arith.constant dense<1.250000e+00> : tensor<f32>
    %cst_4 = arith.constant dense<2.250000e+00> : tensor<f32>
    %cst_5 = arith.constant dense<-7.500000e-01> : tensor<f32>
    %cst_6 = arith.constant dense<-3.750000e+00> : tensor<f32>
    %cst_7 = arith.constant dense<-6.000000e+00> : tensor<f32>
    %cst_8 = arith.constant dense<-3.000000e+00> : tensor<f32>
    %cst_9 = arith.constant dense<0.000000e+00> : tensor<f32>
    %c0 = arith.constant 0 : index
    %c0_i64 = arith.constant 0 : i64
    %c6_i64 = arith.constant 6 : i64
    %cst_10 = arith.constant dense<0> : tensor<1xi64>
    %cst_11 = arith.constant dense<1> : tensor<1xi64>
    %cst_12 = arith.constant dense<1> : tensor<i64>
    %cst_13 = arith.constant dense<2> : tensor<i64>
    %collapsed = tensor.collapse_shape %arg1 [[0], [1, 2], [3]] : tensor<1x2x4x2xf32> into tensor<1x8x2xf32>
    %0 = tensor.empty() : tensor<1x8x1xf32>
    %1 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%cst_11 : tensor<1xi64>) outs(%0 : tensor<1x8x1xf32>) {
    ^bb0(%in: i64, %out: f32):
      %78 = arith.index_cast %in : i64 to index
      %79 = linalg.index 1 : index
      %extracted = tensor.extract %collapsed[%c0, %79, %78] : tensor<1x8x2xf32>
      linalg.yield %extracted : f32
    } -> tensor<1x8x1xf32>
    %collapsed_14 = tensor.collapse_shape %1 [[0], [1, 2]] : tensor<1x8x1xf32> into tensor<1x8xf32>
    %2 = tensor.empty() : tensor<1x8xf32>
    %3 = linalg.generic {indexing_maps = [#map2, #map3, #map2], iterator_types = ["parallel", "parallel"]} ins(%collapsed_14, %cst_0 : tensor<1x8xf32>, tensor<f32>) outs(%2 : tensor<1x8xf32>) {
    ^bb0(%in: f32, %in_32: f32, %out: f32):
      %78 = arith.addf %in, %in_32 : f32
      linalg.yield %78 : f32
    } -> tensor<1x8xf32>
    %4 = linalg.generic {indexing_maps = [#map2, #map3, #map2], iterator_types = ["parallel", "parallel"]} ins(%3, %cst_1 : tensor<1x8xf32>, tensor<f32>) outs(%2 : tensor<1x8xf32>) {
    ^bb0(%in: f32, %in_32: f32, %out: f32):
      %78 = arith.divf %in, %in_32 : f32
      linalg.yield %78 : f32
    } -> tensor<1x8xf32>
    %5 = linalg.generic {indexing_maps = [#map2, #map3, #map2], iterator_types = ["parallel", "parallel"]} ins(%4, %cst_1 : tensor<1x8xf32>, tensor<f32>) outs(%2 : tensor<1x8xf32>) {
    ^bb0(%in: f32, %in_32: f32, %out: f32):
      %78 = arith.mulf %in, %in_32 : f32
      linalg.yield %78 : f32
    } -> tensor<1x8xf32>
    %expanded = tensor.expand_shape %5 [[0], [1, 2]] output_shape [1, 8, 1] : tensor<1x8xf32> into tensor<1x8x1xf32>
    %6 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%expanded : tensor<1x8x1xf32>) outs(%0 : tensor<1x8x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %78 = math.floor %in : f32
      linalg.yield %78 : f32
    } -> tensor<1x8x1xf32>
    %7 = tensor.empty() : tensor<1x8x4xf32>
    %8 = linalg.generic {indexing_maps = [#map4, #map, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%6, %cst_2 : tensor<1x8x1xf32>, tensor<4xf32>) outs(%7 : tensor<1x8x4xf32>) {
    ^bb0(%in: f32, %in_32: f32, %out: f32):
      %78 = arith.addf %in, %in_32 : f32
      linalg.yield %78 : f32
    } -> tensor<1x8x4xf32>
    %9 = linalg.generic {indexing_maps = [#map4, #map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%expanded, %8 : tensor<1x8x1xf32>, tensor<1x8x4xf32>) outs(%7 : tensor<1x8x4xf32>) {
    ^bb0(%in: f32, %in_32: f32, %out: f32):
      %78 = arith.subf %in, %in_32 : f32
      linalg.yield %78 : f32
    } -> tensor<1x8x4xf32>
    %10 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%9 : tensor<1x8x4xf32>) outs(%7 : tensor<1x8x4xf32>) {
    ^bb0(%in: f32, %out: f32):
      %78 = math.absf %in : f32
      linalg.yield %78 : f32
    } -> tensor<1x8x4xf32>
    %11 = linalg.generic {indexing_maps = [#map1, #map5, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%10, %cst_3 : tensor<1x8x4xf32>, tensor<f32>) outs(%7 : tensor<1x8x4xf32>) {
    ^bb0(%in: f32, %in_32: f32, %out: f32):
      %78 = arith.mulf %in, %in_32 : f32
      linalg.yield %78 : f32
    } -> tensor<1x8x4xf32>
    %12 = linalg.generic {indexing_maps = [#map1, #map5, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%11, %cst_4 : tensor<1x8x4xf32>, tensor<f32>) outs(%7 : tensor<1x8x4xf32>) {
    ^bb0(%in: f32, %in_32: f32, %out: f32):
      %78 = arith.subf %in, %in_32 : f32
      linalg.yield %78 : f32
    } -> tensor<1x8x4xf32>
    %13 = linalg.generic {indexing_maps = [#map1, #map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%12, %10 : tensor<1x8x4xf32>, tensor<1x8x4xf32>) outs(%7 : tensor<1x8x4xf32>) {
    ^bb0(%in: f32, %in_32: f32, %out: f32):
      %78 = arith.mulf %in, %in_32 : f32
      linalg.yield %78 : f32
    } -> tensor<1x8x4xf32>
    %14 = linalg.generic {indexing_maps = [#map1, #map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%13, %10 : tensor<1x8x4xf32>, tensor<1x8x4xf32>) outs(%7 : tensor<1x8x4xf32>) {
    ^bb0(%in: f32, %in_32: f32, %out: f32):
      %78 = arith.mulf %in, %in_32 : f32
      linalg.yield %78 : f32
    } -> tensor<1x8x4xf32>
    %15 = linalg.generic {indexing_maps = [#map1, #map5, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%14, %cst_0 : tensor<1x8x4xf32>, tensor<f32>) outs(%7 : tensor<1x8x4xf32>) {
    ^bb0(%in: f32, %in_32: f32, %out: f32):
      %78 = arith.addf %in, %in_32 : f32
      linalg.yield %78 : f32
    } -> tensor<1x8x4xf32>
    %16 = linalg.generic {indexing_maps = [#map1, #map5, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%10, %cst_5 : tensor<1x8x4xf32>, tensor<f32>) outs(%7 : tensor<1x8x4xf32>) {
    ^bb0(%in: f32, %in_32: f32, %out: f32):
      %78 = arith.mulf %in, %in_32 : f32
      linalg.yield %78 : f32
    } -> tensor<1x8x4xf32>
    %17 = linalg.generic {indexing_maps = [#map1, #map5, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%16, %cst_6 : tensor<1x8x4xf32>, tensor<f32>) outs(%7 : tensor<1x8x4xf32>) {
    ^bb0(%in: f32, %in_32: f32, %out: f32):
      %78 = arith.subf %in, %in_32 : f32
      linalg.yield %78 : f32
    } -> tensor<1x8x4xf32>
    %18 = linalg.generic {indexing_maps = [#map1, #map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%17, %10 : tensor<1x8x4xf32>, tensor<1x8x4xf32>) outs(%7 : tensor<1x8x4xf32>) {
    ^bb0(%in: f32, %in_32: f32, %out: f32):
      %78 = arith.mulf %in, %in_32 : f32
      linalg.yield %78 : f32
    } -> tensor<1x8x4xf32>
    %19 = linalg.generic {indexing_maps = [#map1, #map5, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%18, %cst_7 : tensor<1x8x4xf32>, tensor<f32>) outs(%7 : tensor<1x8x4xf32>) {
    ^bb0(%in: f32, %in_32: f32, %out: f32):
      %78 = arith.addf %in, %in_32 : f32
      linalg.yield %78 : f32
    } -> tensor<1x8x4xf32>
    %20 = linalg.generic {indexing_maps = [#map1, #map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%19, %10 : tensor<1x8x4xf32>, tensor<1x8x4xf32>) outs(%7 : tensor<1x8x4xf32>) {
    ^bb0(%in: f32, %in_32: f32, %out: f32):
      %78 = arith.mulf %in, %in_32 : f32
      linalg.yield %78 : f32
    } -> tensor<1x8x4xf32>
    %21 = linalg.generic {indexing_maps = [#map1, #map5, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%20, %cst_8 : tensor<1x8x4xf32>, tensor<f32>) outs(%7 : tensor<1x8x4xf32>) {
    ^bb0(%in: f32, %in_32: f32, %out: f32):
      %78 = arith.subf %in, %in_32 : f32
      linalg.yield %78 : f32
    } -> tensor<1x8x4xf32>
    %22 = tensor.empty() : tensor<1x8x4xi1>
    %23 = linalg.generic {indexing_maps = [#map1, #map5, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%10, %cst_0 : tensor<1x8x4xf32>, tensor<f32>) outs(%22 : tensor<1x8x4xi1>) {
    ^bb0(%in: f32, %in_32: f32, %out: i1):
      %78 = arith.cmpf ole, %in, %in_32 : f32
      linalg.yield %78 : i1
    } -> tensor<1x8x4xi1>
    %24 = linalg.generic {indexing_maps = [#map1, #map1, #map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%23, %15, %21 : tensor<1x8x4xi1>, tensor<1x8x4xf32>, tensor<1x8x4xf32>) outs(%7 : tensor<1x8x4xf32>) {
    ^bb0(%in: i1, %in_32: f32, %in_33: f32, %out: f32):
      %78 = arith.select %in, %in_32, %in_33 : f32
      linalg.yield %78 : f32
    } -> tensor<1x8x4xf32>
    %25 = linalg.generic {indexing_maps = [#map1, #map5, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%8, %cst_9 : tensor<1x8x4xf32>, tensor<f32>) outs(%22 : tensor<1x8x4xi1>) {
    ^bb0(%in: f32, %in_32: f32, %out: i1):
      %78 = arith.cmpf oge, %in, %in_32 : f32
      linalg.yield %78 : i1
    } -> tensor<1x8x4xi1>
    %26 = linalg.generic {indexing_maps = [#map1, #map5, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%8, %cst_1 : tensor<1x8x4xf32>, tensor<f32>) outs(%22 : tensor<1x8x4xi1>) {
    ^bb0(%in: f32, %in_32: f32, %out: i1):
      %78 = arith.cmpf ole, %in, %in_32 : f32
      linalg.yield %78 : i1
    } -> tensor<1x8x4xi1>
    %27 = linalg.generic {indexing_maps = [#map1, #map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%25, %26 : tensor<1x8x4xi1>, tensor<1x8x4xi1>) outs(%22 : tensor<1x8x4xi1>) {
    ^bb0(%in: i1, %in_32: i1, %out: i1):
      %78 = arith.andi %in, %in_32 : i1
      linalg.yield %78 : i1
    } -> tensor<1x8x4xi1>
    %28 = linalg.generic {indexing_maps = [#map1, #map5, #map5, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%8, %cst_9, %cst_1 : tensor<1x8x4xf32>, tensor<f32>, tensor<f32>) outs(%7 : tensor<1x8x4xf32>) {
    ^bb0(%in: f32, %in_32: f32, %in_33: f32, %out: f32):
      %78 = arith.cmpf ult, %in, %in_32 : f32
      %79 = arith.select %78, %in_32, %in : f32
      %80 = arith.cmpf ugt, %79, %in_33 : f32
      %81 = arith.select %80, %in_33, %79 : f32
      linalg.yield %81 : f32
    } -> tensor<1x8x4xf32>
    %29 = tensor.empty() : tensor<1x8x4xi64>
    %30 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%28 : tensor<1x8x4xf32>) outs(%29 : tensor<1x8x4xi64>) {
    ^bb0(%in: f32, %out: i64):
      %78 = arith.fptosi %in : f32 to i64
      linalg.yield %78 : i64
    } -> tensor<1x8x4xi64>
    %31 = linalg.generic {indexing_maps = [#map1, #map5, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%30, %cst_13 : tensor<1x8x4xi64>, tensor<i64>) outs(%29 : tensor<1x8x4xi64>) {
    ^bb0(%in: i64, %in_32: i64, %out: i64):
      %78 = arith.muli %in, %in_32 : i64
      linalg.yield %78 : i64
    } -> tensor<1x8x4xi64>
    %expanded_15 = tensor.expand_shape %31 [[0], [1], [2, 3]] output_shape [1, 8, 4, 1] : tensor<1x8x4xi64> into tensor<1x8x4x1xi64>
    %expanded_16 = tensor.expand_shape %24 [[0], [1], [2, 3]] output_shape [1, 8, 4, 1] : tensor<1x8x4xf32> into tensor<1x8x4x1xf32>
    %expanded_17 = tensor.expand_shape %27 [[0], [1], [2, 3]] output_shape [1, 8, 4, 1] : tensor<1x8x4xi1> into tensor<1x8x4x1xi1>
    %32 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%cst_10 : tensor<1xi64>) outs(%0 : tensor<1x8x1xf32>) {
    ^bb0(%in: i64, %out: f32):
      %78 = arith.index_cast %in : i64 to index
      %79 = linalg.index 1 : index
      %extracted = tensor.extract %collapsed[%c0, %79, %78] : tensor<1x8x2xf32>
      linalg.yield %extracted : f32
    } -> tensor<1x8x1xf32>
    %collapsed_18 = tensor.collapse_shape %32 [[0], [1, 2]] : tensor<1x8x1xf32> into tensor<1x8xf32>
    %33 = linalg.generic {indexing_maps = [#map2, #map3, #map2], iterator_types = ["parallel", "parallel"]} ins(%collapsed_18, %cst_0 : tensor<1x8xf32>, tensor<f32>) outs(%2 : tensor<1x8xf32>) {
    ^bb0(%in: f32, %in_32: f32, %out: f32):
      %78 = arith.addf %in, %in_32 : f32
      linalg.yield %78 : f32
    } -> tensor<1x8xf32>
    %34 = linalg.generic {indexing_maps = [#map2, #map3, #map2], iterator_types = ["parallel", "parallel"]} ins(%33, %cst_1 : tensor<1x8xf32>, tensor<f32>) outs(%2 : tensor<1x8xf32>) {
    ^bb0(%in: f32, %in_32: f32, %out: f32):
      %78 = arith.divf %in, %in_32 : f32
      linalg.yield %78 : f32
    } -> tensor<1x8xf32>
    %35 = linalg.generic {indexing_maps = [#map2, #map3, #map2], iterator_types = ["parallel", "parallel"]} ins(%34, %cst_0 : tensor<1x8xf32>, tensor<f32>) outs(%2 : tensor<1x8xf32>) {
    ^bb0(%in: f32, %in_32: f32, %out: f32):
      %78 = arith.mulf %in, %in_32 : f32
      linalg.yield %78 : f32
    } -> tensor<1x8xf32>
    %expanded_19 = tensor.expand_shape %35 [[0], [1, 2]] output_shape [1, 8, 1] : tensor<1x8xf32> into tensor<1x8x1xf32>
    %36 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%expanded_19 : tensor<1x8x1xf32>) outs(%0 : tensor<1x8x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %78 = math.floor %in : f32
      linalg.yield %78 : f32
    } -> tensor<1x8x1xf32>
    %37 = linalg.generic {indexing_maps = [#map4, #map, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%36, %cst_2 : tensor<1x8x1xf32>, tensor<4xf32>) outs(%7 : tensor<1x8x4xf32>) {
    ^bb0(%in: f32, %in_32: f32, %out: f32):
      %78 = arith.addf %in, %in_32 : f32
      linalg.yield %78 : f32
    } -> tensor<1x8x4xf32>
    %38 = linalg.generic {indexing_maps = [#map4, #map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%expanded_19, %37 : tensor<1x8x1xf32>, tensor<1x8x4xf32>) outs(%7 : tensor<1x8x4xf32>) {
    ^bb0(%in: f32, %in_32: f32, %out: f32):
      %78 = arith.subf %in, %in_32 : f32
      linalg.yield %78 : f32
    } -> tensor<1x8x4xf32>
    %39 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%38 : tensor<1x8x4xf32>) outs(%7 : tensor<1x8x4xf32>) {
    ^bb0(%in: f32, %out: f32):
      %78 = math.absf %in : f32
      linalg.yield %78 : f32
    } -> tensor<1x8x4xf32>
    %40 = linalg.generic {indexing_maps = [#map1, #map5, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%39, %cst_3 : tensor<1x8x4xf32>, tensor<f32>) outs(%7 : tensor<1x8x4xf32>) {
    ^bb0(%in: f32, %in_32: f32, %out: f32):
      %78 = arith.mulf %in, %in_32 : f32
      linalg.yield %78 : f32
    } -> tensor<1x8x4xf32>
    %41 = linalg.generic {indexing_maps = [#map1, #map5, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%40, %cst_4 : tensor<1x8x4xf32>, tensor<f32>) outs(%7 : tensor<1x8x4xf32>) {
    ^bb0(%in: f32, %in_32: f32, %out: f32):
      %78 = arith.subf %in, %in_32 : f32
      linalg.yield %78 : f32
    } -> tensor<1x8x4xf32>
    %42 = linalg.generic {indexing_maps = [#map1, #map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%41, %39 : tensor<1x8x4xf32>, tensor<1x8x4xf32>) outs(%7 : tensor<1x8x4xf32>) {
    ^bb0(%in: f32, %in_32: f32, %out: f32):
      %78 = arith.mulf %in, %in_32 : f32
      linalg.yield %78 : f32
    } -> tensor<1x8x4xf32>
    %43 = linalg.generic {indexing_maps = [#map1, #map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%42, %39 : tensor<1x8x4xf32>, tensor<1x8x4xf32>) outs(%7 : tensor<1x8x4xf32>) {
    ^bb0(%in: f32, %in_32: f32, %out: f32):
      %78 = arith.mulf %in, %in_32 : f32
      linalg.yield %78 : f32
    } -> tensor<1x8x4xf32>
    %44 = linalg.generic {indexing_maps = [#map1, #map5, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%43, %cst_0 : tensor<1x8x4xf32>, tensor<f32>) outs(%7 : tensor<1x8x4xf32>) {
    ^bb0(%in: f32, %in_32: f32, %out: f32):
      %78 = arith.addf %in, %in_32 : f32
      linalg.yield %78 : f32
    } -> tensor<1x8x4xf32>
    %45 = linalg.generic {indexing_maps = [#map1, #map5, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%39, %cst_5 : tensor<1x8x4xf32>, tensor<f32>) outs(%7 : tensor<1x8x4xf32>) {
    ^bb0(%in: f32, %in_32: f32, %out: f32):
      %78 = arith.mulf %in, %in_32 : f32
      linalg.yield %78 : f32
    } -> tensor<1x8x4xf32>
    %46 = linalg.generic {indexing_maps = [#map1, #map5, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%45, %cst_6 : tensor<1x8x4xf32>, tensor<f32>) outs(%7 : tensor<1x8x4xf32>) {
    ^bb0(%in: f32, %in_32: f32, %out: f32):
      %78 = arith.subf %in, %in_32 : f32
      linalg.yield %78 : f32
    } -> tensor<1x8x4xf32>
    %47 = linalg.generic {indexing_maps = [#map1, #map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%46, %39 : tensor<1x8x4xf32>, tensor<1x8x4xf32>) outs(%7 : tensor<1x8x4xf32>) {
    ^bb0(%in: f32, %in_32: f32, %out: f32):
      %78 = arith.mulf %in, %in_32 : f32
      linalg.yield %78 : f32
    } -> tensor<1x8x4xf32>
    %48 = linalg.generic {indexing_maps = [#map1, #map5, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%47, %cst_7 : tensor<1x8x4xf32>, tensor<f32>) outs(%7 : tensor<1x8x4xf32>) {
    ^bb0(%in: f32, %in_32: f32, %out: f32):
      %78 = arith.addf %in, %in_32 : f32
      linalg.yield %78 : f32
    } -> tensor<1x8x4xf32>
    %49 = linalg.generic {indexing_maps = [#map1, #map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%48, %39 : tensor<1x8x4xf32>, tensor<1x8x4xf32>) outs(%7 : tensor<1x8x4xf32>) {
    ^bb0(%in: f32, %in_32: f32, %out: f32):
      %78 = arith.mulf %in, %in_32 : f32
      linalg.yield %78 : f32
    } -> tensor<1x8x4xf32>
    %50 = linalg.generic {indexing_maps = [#map1, #map5, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%49, %cst_8 : tensor<1x8x4xf32>, tensor<f32>) outs(%7 : tensor<1x8x4xf32>) {
    ^bb0(%in: f32, %in_32: f32, %out: f32):
      %78 = arith.subf %in, %in_32 : f32
      linalg.yield %78 : f32
    } -> tensor<1x8x4xf32>
    %51 = linalg.generic {indexing_maps = [#map1, #map5, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%39, %cst_0 : tensor<1x8x4xf32>, tensor<f32>) outs(%22 : tensor<1x8x4xi1>) {
    ^bb0(%in: f32, %in_32: f32, %out: i1):
      %78 = arith.cmpf ole, %in, %in_32 : f32
      linalg.yield %78 : i1
    } -> tensor<1x8x4xi1>
    %52 = linalg.generic {indexing_maps = [#map1, #map1, #map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%51, %44, %50 : tensor<1x8x4xi1>, tensor<1x8x4xf32>, tensor<1x8x4xf32>) outs(%7 : tensor<1x8x4xf32>) {
    ^bb0(%in: i1, %in_32: f32, %in_33: f32, %out: f32):
      %78 = arith.select %in, %in_32, %in_33 : f32
      linalg.yield %78 : f32
    } -> tensor<1x8x4xf32>
    %53 = linalg.generic {indexing_maps = [#map1, #map5, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%37, %cst_9 : tensor<1x8x4xf32>, tensor<f32>) outs(%22 : tensor<1x8x4xi1>) {
    ^bb0(%in: f32, %in_32: f32, %out: i1):
      %78 = arith.cmpf oge, %in, %in_32 : f32
      linalg.yield %78 : i1
    } -> tensor<1x8x4xi1>
    %54 = linalg.generic {indexing_maps = [#map1, #map5, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%37, %cst_0 : tensor<1x8x4xf32>, tensor<f32>) outs(%22 : tensor<1x8x4xi1>) {
    ^bb0(%in: f32, %in_32: f32, %out: i1):
      %78 = arith.cmpf ole, %in, %in_32 : f32
      linalg.yield %78 : i1
    } -> tensor<1x8x4xi1>
    %55 = linalg.generic {indexing_maps = [#map1, #map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%53, %54 : tensor<1x8x4xi1>, tensor<1x8x4xi1>) outs(%22 : tensor<1x8x4xi1>) {
    ^bb0(%in: i1, %in_32: i1, %out: i1):
      %78 = arith.andi %in, %in_32 : i1
      linalg.yield %78 : i1
    } -> tensor<1x8x4xi1>
    %56 = linalg.generic {indexing_maps = [#map1, #map5, #map5, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%37, %cst_9, %cst_0 : tensor<1x8x4xf32>, tensor<f32>, tensor<f32>) outs(%7 : tensor<1x8x4xf32>) {
    ^bb0(%in: f32, %in_32: f32, %in_33: f32, %out: f32):
      %78 = arith.cmpf ult, %in, %in_32 : f32
      %79 = arith.select %78, %in_32, %in : f32
      %80 = arith.cmpf ugt, %79, %in_33 : f32
      %81 = arith.select %80, %in_33, %79 : f32
      linalg.yield %81 : f32
    } -> tensor<1x8x4xf32>
    %57 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%56 : tensor<1x8x4xf32>) outs(%29 : tensor<1x8x4xi64>) {
    ^bb0(%in: f32, %out: i64):
      %78 = arith.fptosi %in : f32 to i64
      linalg.yield %78 : i64
    } -> tensor<1x8x4xi64>
    %58 = linalg.generic {indexing_maps = [#map1, #map5, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%57, %cst_12 : tensor<1x8x4xi64>, tensor<i64>) outs(%29 : tensor<1x8x4xi64>) {
    ^bb0(%in: i64, %in_32: i64, %out: i64):
      %78 = arith.muli %in, %in_32 : i64
      linalg.yield %78 : i64
    } -> tensor<1x8x4xi64>
    %expanded_20 = tensor.expand_shape %58 [[0], [1], [2, 3]] output_shape [1, 8, 1, 4] : tensor<1x8x4xi64> into tensor<1x8x1x4xi64>
    %59 = tensor.empty() : tensor<1x8x4x4xi64>
    %60 = linalg.generic {indexing_maps = [#map6, #map7, #map8], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%expanded_15, %expanded_20 : tensor<1x8x4x1xi64>, tensor<1x8x1x4xi64>) outs(%59 : tensor<1x8x4x4xi64>) {
    ^bb0(%in: i64, %in_32: i64, %out: i64):
      %78 = arith.addi %in, %in_32 : i64
      linalg.yield %78 : i64
    } -> tensor<1x8x4x4xi64>
    %expanded_21 = tensor.expand_shape %52 [[0], [1], [2, 3]] output_shape [1, 8, 1, 4] : tensor<1x8x4xf32> into tensor<1x8x1x4xf32>
    %61 = tensor.empty() : tensor<1x8x4x4xf32>
    %62 = linalg.generic {indexing_maps = [#map6, #map7, #map8], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%expanded_16, %expanded_21 : tensor<1x8x4x1xf32>, tensor<1x8x1x4xf32>) outs(%61 : tensor<1x8x4x4xf32>) {
    ^bb0(%in: f32, %in_32: f32, %out: f32):
      %78 = arith.mulf %in, %in_32 : f32
      linalg.yield %78 : f32
    } -> tensor<1x8x4x4xf32>
    %expanded_22 = tensor.expand_shape %55 [[0], [1], [2, 3]] output_shape [1, 8, 1, 4] : tensor<1x8x4xi1> into tensor<1x8x1x4xi1>
    %63 = tensor.empty() : tensor<1x8x4x4xi1>
    %64 = linalg.generic {indexing_maps = [#map6, #map7, #map8], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%expanded_17, %expanded_22 : tensor<1x8x4x1xi1>, tensor<1x8x1x4xi1>) outs(%63 : tensor<1x8x4x4xi1>) {
    ^bb0(%in: i1, %in_32: i1, %out: i1):
      %78 = arith.andi %in, %in_32 : i1
      linalg.yield %78 : i1
    } -> tensor<1x8x4x4xi1>
    %collapsed_23 = tensor.collapse_shape %60 [[0], [1, 2, 3]] : tensor<1x8x4x4xi64> into tensor<1x128xi64>
    %expanded_24 = tensor.expand_shape %collapsed_23 [[0], [1, 2]] output_shape [1, 1, 128] : tensor<1x128xi64> into tensor<1x1x128xi64>
    %collapsed_25 = tensor.collapse_shape %arg0 [[0], [1], [2, 3]] : tensor<1x1x3x2xf32> into tensor<1x1x6xf32>
    %65 = tensor.empty() : tensor<1x1x128xi64>
    %66 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%expanded_24 : tensor<1x1x128xi64>) outs(%65 : tensor<1x1x128xi64>) {
    ^bb0(%in: i64, %out: i64):
      %78 = arith.addi %in, %c6_i64 : i64
      linalg.yield %78 : i64
    } -> tensor<1x1x128xi64>
    %67 = tensor.empty() : tensor<1x1x128xi1>
    %68 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%expanded_24 : tensor<1x1x128xi64>) outs(%67 : tensor<1x1x128xi1>) {
    ^bb0(%in: i64, %out: i1):
      %78 = arith.cmpi slt, %in, %c0_i64 : i64
      linalg.yield %78 : i1
    } -> tensor<1x1x128xi1>
    %69 = linalg.generic {indexing_maps = [#map1, #map1, #map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%68, %66, %expanded_24 : tensor<1x1x128xi1>, tensor<1x1x128xi64>, tensor<1x1x128xi64>) outs(%65 : tensor<1x1x128xi64>) {
    ^bb0(%in: i1, %in_32: i64, %in_33: i64, %out: i64):
      %78 = arith.select %in, %in_32, %in_33 : i64
      linalg.yield %78 : i64
    } -> tensor<1x1x128xi64>
    %70 = tensor.empty() : tensor<1x1x128xf32>
    %71 = linalg.fill ins(%cst : f32) outs(%70 : tensor<1x1x128xf32>) -> tensor<1x1x128xf32>
    %72 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%69 : tensor<1x1x128xi64>) outs(%71 : tensor<1x1x128xf32>) {
    ^bb0(%in: i64, %out: f32):
      %78 = arith.index_cast %in : i64 to index
      %79 = arith.cmpi slt, %78, %c6 : index
      cf.assert %79, "index must be smaller than dim size"
      %80 = arith.cmpi sge, %in, %c0_i64 : i64
      cf.assert %80, "index must be larger or equal to 0"
      %extracted = tensor.extract %collapsed_25[%c0, %c0, %78] : tensor<1x1x6xf32>
      linalg.yield %extracted : f32
    } -> tensor<1x1x128xf32>
    %collapsed_26 = tensor.collapse_shape %64 [[0], [1, 2, 3]] : tensor<1x8x4x4xi1> into tensor<1x128xi1>
    %expanded_27 = tensor.expand_shape %collapsed_26 [[0], [1, 2]] output_shape [1, 1, 128] : tensor<1x128xi1> into tensor<1x1x128xi1>
    %73 = linalg.generic {indexing_maps = [#map1, #map1, #map5, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%expanded_27, %72, %cst_9 : tensor<1x1x128xi1>, tensor<1x1x128xf32>, tensor<f32>) outs(%70 : tensor<1x1x128xf32>) {
    ^bb0(%in: i1, %in_32: f32, %in_33: f32, %out: f32):
      %78 = arith.select %in, %in_32, %in_33 : f32
      linalg.yield %78 : f32
    } -> tensor<1x1x128xf32>
    %collapsed_28 = tensor.collapse_shape %62 [[0], [1, 2, 3]] : tensor<1x8x4x4xf32> into tensor<1x128xf32>
    %expanded_29 = tensor.expand_shape %collapsed_28 [[0], [1, 2]] output_shape [1, 1, 128] : tensor<1x128xf32> into tensor<1x1x128xf32>
    %74 = linalg.generic {indexing_maps = [#map1, #map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%73, %expanded_29 : tensor<1x1x128xf32>, tensor<1x1x128xf32>) outs(%70 : tensor<1x1x128xf32>) {
    ^bb0(%in: f32, %in_32: f32, %out: f32):
      %78 = arith.mulf %in, %in_32 : f32
      linalg.yield %78 : f32
    } -> tensor<1x1x128xf32>
    %expanded_30 = tensor.expand_shape %74 [[0], [1], [2, 3]] output_shape [1, 1, 8, 16] : tensor<1x1x128xf32> into tensor<1x1x8x16xf32>
    %75 = tensor.empty() : tensor<1x1x8xf32>
    %76 = linalg.fill ins(%cst : f32) outs(%75 : tensor<1x1x8xf32>) -> tensor<1x1x8xf32>
    %77 = linalg.generic {indexing_maps = [#map8, #map9], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%expanded_30 : tensor<1x1x8x16xf32>) outs(%76 : tensor<1x1x8xf32>) {
    ^bb0(%in: f32, %out: f32):
      %78 = arith.addf %in, %out : f32
      linalg.yield %78 : f32
    } -> tensor<1x1x8xf32>
    %expanded_31 = tensor.expand_shape %77 [[0], [1], [2, 3]] output_shape [1, 1, 2, 4] : tensor<1x1x8xf32> into tensor<1x1x2x4xf32>
    return %expanded_31 : tensor<1x1x2x4xf32>
  }
}
