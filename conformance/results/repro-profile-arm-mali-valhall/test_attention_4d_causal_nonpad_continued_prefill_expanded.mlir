#map = affine_map<(d0) -> (d0)>
#map1 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#map2 = affine_map<(d0, d1, d2, d3) -> (d0, d1, 0, d3)>
#map3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>
#map4 = affine_map<(d0, d1, d2, d3) -> (0)>
#map5 = affine_map<(d0, d1, d2, d3) -> (d2, d3)>
#map6 = affine_map<(d0, d1) -> (d1)>
#map7 = affine_map<(d0, d1) -> (d0, 0)>
#map8 = affine_map<(d0, d1) -> (d0, d1)>
#map9 = affine_map<(d0, d1) -> (0)>
#map10 = affine_map<(d0, d1, d2, d3) -> (d0, 0, d2, d3)>
#map11 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#map12 = affine_map<(d0, d1, d2, d3) -> (d3)>
#map13 = affine_map<(d0, d1, d2, d3) -> (d0, 0, d2, 0)>
module {
  func.func @test_attention_4d_causal_nonpad_continued_prefill_expanded(%arg0: tensor<1x2x2x8xf32>, %arg1: tensor<1x2x4x8xf32>, %arg2: tensor<1x2x4x8xf32>, %arg3: tensor<1xi64>) -> tensor<1x2x2x8xf32> {
    %c0_i64 = arith.constant 0 : i64
    %cst = arith.constant 0.000000e+00 : f32
    %cst_0 = arith.constant 0xFF800000 : f32
    %cst_1 = arith.constant dense<0.594603539> : tensor<1xf32>
    %cst_2 = arith.constant dense<0.000000e+00> : tensor<2x4xf32>
    %cst_3 = arith.constant dense<0xFF800000> : tensor<1xf32>
    %cst_4 = arith.constant dense<0.000000e+00> : tensor<1xf32>
    %cst_5 = arith.constant dense<2> : tensor<1xi64>
    %cst_6 = arith.constant dense<[[[[0], [1]]]]> : tensor<1x1x2x1xi64>
    %cst_7 = arith.constant dense<[[[[0, 1, 2, 3]]]]> : tensor<1x1x1x4xi64>
    %cst_8 = arith.constant dense<[0, 1, 2, 3]> : tensor<4xi64>
    %0 = tensor.empty() : tensor<1xi64>
    %1 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel"]} ins(%arg3, %cst_5 : tensor<1xi64>, tensor<1xi64>) outs(%0 : tensor<1xi64>) {
    ^bb0(%in: i64, %in_18: i64, %out: i64):
      %45 = arith.subi %in, %in_18 : i64
      linalg.yield %45 : i64
    } -> tensor<1xi64>
    %expanded = tensor.expand_shape %1 [[0, 1, 2, 3]] output_shape [1, 1, 1, 1] : tensor<1xi64> into tensor<1x1x1x1xi64>
    %2 = tensor.empty() : tensor<1x1x2x1xi64>
    %3 = linalg.generic {indexing_maps = [#map1, #map2, #map1], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%cst_6, %expanded : tensor<1x1x2x1xi64>, tensor<1x1x1x1xi64>) outs(%2 : tensor<1x1x2x1xi64>) {
    ^bb0(%in: i64, %in_18: i64, %out: i64):
      %45 = arith.addi %in, %in_18 : i64
      linalg.yield %45 : i64
    } -> tensor<1x1x2x1xi64>
    %4 = tensor.empty() : tensor<1x1x2x4xi1>
    %5 = linalg.generic {indexing_maps = [#map3, #map2, #map1], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%3, %cst_7 : tensor<1x1x2x1xi64>, tensor<1x1x1x4xi64>) outs(%4 : tensor<1x1x2x4xi1>) {
    ^bb0(%in: i64, %in_18: i64, %out: i1):
      %45 = arith.cmpi slt, %in, %in_18 : i64
      linalg.yield %45 : i1
    } -> tensor<1x1x2x4xi1>
    %6 = tensor.empty() : tensor<1x1x2x4xf32>
    %7 = linalg.generic {indexing_maps = [#map1, #map4, #map4, #map1], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%5, %cst_3, %cst_4 : tensor<1x1x2x4xi1>, tensor<1xf32>, tensor<1xf32>) outs(%6 : tensor<1x1x2x4xf32>) {
    ^bb0(%in: i1, %in_18: f32, %in_19: f32, %out: f32):
      %45 = arith.select %in, %in_18, %in_19 : f32
      linalg.yield %45 : f32
    } -> tensor<1x1x2x4xf32>
    %8 = linalg.generic {indexing_maps = [#map5, #map1, #map1], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%cst_2, %7 : tensor<2x4xf32>, tensor<1x1x2x4xf32>) outs(%6 : tensor<1x1x2x4xf32>) {
    ^bb0(%in: f32, %in_18: f32, %out: f32):
      %45 = arith.addf %in, %in_18 : f32
      linalg.yield %45 : f32
    } -> tensor<1x1x2x4xf32>
    %expanded_9 = tensor.expand_shape %arg3 [[0, 1]] output_shape [1, 1] : tensor<1xi64> into tensor<1x1xi64>
    %9 = tensor.empty() : tensor<1x4xi1>
    %10 = linalg.generic {indexing_maps = [#map6, #map7, #map8], iterator_types = ["parallel", "parallel"]} ins(%cst_8, %expanded_9 : tensor<4xi64>, tensor<1x1xi64>) outs(%9 : tensor<1x4xi1>) {
    ^bb0(%in: i64, %in_18: i64, %out: i1):
      %45 = arith.cmpi slt, %in, %in_18 : i64
      linalg.yield %45 : i1
    } -> tensor<1x4xi1>
    %11 = tensor.empty() : tensor<1x4xf32>
    %12 = linalg.generic {indexing_maps = [#map8, #map9, #map9, #map8], iterator_types = ["parallel", "parallel"]} ins(%10, %cst_4, %cst_3 : tensor<1x4xi1>, tensor<1xf32>, tensor<1xf32>) outs(%11 : tensor<1x4xf32>) {
    ^bb0(%in: i1, %in_18: f32, %in_19: f32, %out: f32):
      %45 = arith.select %in, %in_18, %in_19 : f32
      linalg.yield %45 : f32
    } -> tensor<1x4xf32>
    %expanded_10 = tensor.expand_shape %12 [[0], [1, 2, 3]] output_shape [1, 1, 1, 4] : tensor<1x4xf32> into tensor<1x1x1x4xf32>
    %13 = linalg.generic {indexing_maps = [#map1, #map2, #map1], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%8, %expanded_10 : tensor<1x1x2x4xf32>, tensor<1x1x1x4xf32>) outs(%6 : tensor<1x1x2x4xf32>) {
    ^bb0(%in: f32, %in_18: f32, %out: f32):
      %45 = arith.addf %in, %in_18 : f32
      linalg.yield %45 : f32
    } -> tensor<1x1x2x4xf32>
    %14 = tensor.empty() : tensor<1x2x8x4xf32>
    %transposed = linalg.transpose ins(%arg1 : tensor<1x2x4x8xf32>) outs(%14 : tensor<1x2x8x4xf32>) permutation = [0, 1, 3, 2] 
    %15 = tensor.empty() : tensor<1x2x2x8xf32>
    %16 = linalg.generic {indexing_maps = [#map1, #map4, #map1], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%arg0, %cst_1 : tensor<1x2x2x8xf32>, tensor<1xf32>) outs(%15 : tensor<1x2x2x8xf32>) {
    ^bb0(%in: f32, %in_18: f32, %out: f32):
      %45 = arith.mulf %in, %in_18 : f32
      linalg.yield %45 : f32
    } -> tensor<1x2x2x8xf32>
    %17 = linalg.generic {indexing_maps = [#map1, #map4, #map1], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%transposed, %cst_1 : tensor<1x2x8x4xf32>, tensor<1xf32>) outs(%14 : tensor<1x2x8x4xf32>) {
    ^bb0(%in: f32, %in_18: f32, %out: f32):
      %45 = arith.mulf %in, %in_18 : f32
      linalg.yield %45 : f32
    } -> tensor<1x2x8x4xf32>
    %collapsed = tensor.collapse_shape %16 [[0, 1], [2], [3]] : tensor<1x2x2x8xf32> into tensor<2x2x8xf32>
    %collapsed_11 = tensor.collapse_shape %17 [[0, 1], [2], [3]] : tensor<1x2x8x4xf32> into tensor<2x8x4xf32>
    %18 = tensor.empty() : tensor<2x2x4xf32>
    %19 = linalg.fill ins(%cst : f32) outs(%18 : tensor<2x2x4xf32>) -> tensor<2x2x4xf32>
    %20 = linalg.batch_matmul ins(%collapsed, %collapsed_11 : tensor<2x2x8xf32>, tensor<2x8x4xf32>) outs(%19 : tensor<2x2x4xf32>) -> tensor<2x2x4xf32>
    %expanded_12 = tensor.expand_shape %20 [[0, 1], [2], [3]] output_shape [1, 2, 2, 4] : tensor<2x2x4xf32> into tensor<1x2x2x4xf32>
    %21 = tensor.empty() : tensor<1x2x2x4xf32>
    %22 = linalg.generic {indexing_maps = [#map1, #map10, #map1], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%expanded_12, %13 : tensor<1x2x2x4xf32>, tensor<1x1x2x4xf32>) outs(%21 : tensor<1x2x2x4xf32>) {
    ^bb0(%in: f32, %in_18: f32, %out: f32):
      %45 = arith.addf %in, %in_18 : f32
      linalg.yield %45 : f32
    } -> tensor<1x2x2x4xf32>
    %23 = tensor.empty() : tensor<1x2x2xi64>
    %24 = linalg.fill ins(%c0_i64 : i64) outs(%23 : tensor<1x2x2xi64>) -> tensor<1x2x2xi64>
    %25 = tensor.empty() : tensor<1x2x2xf32>
    %26 = linalg.fill ins(%cst_0 : f32) outs(%25 : tensor<1x2x2xf32>) -> tensor<1x2x2xf32>
    %27:2 = linalg.generic {indexing_maps = [#map1, #map11, #map11], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%22 : tensor<1x2x2x4xf32>) outs(%26, %24 : tensor<1x2x2xf32>, tensor<1x2x2xi64>) {
    ^bb0(%in: f32, %out: f32, %out_18: i64):
      %45 = linalg.index 3 : index
      %46 = arith.index_cast %45 : index to i64
      %47 = arith.maximumf %in, %out : f32
      %48 = arith.cmpf ogt, %in, %out : f32
      %49 = arith.select %48, %46, %out_18 : i64
      linalg.yield %47, %49 : f32, i64
    } -> (tensor<1x2x2xf32>, tensor<1x2x2xi64>)
    %expanded_13 = tensor.expand_shape %27#0 [[0], [1], [2, 3]] output_shape [1, 2, 2, 1] : tensor<1x2x2xf32> into tensor<1x2x2x1xf32>
    %28 = linalg.generic {indexing_maps = [#map1, #map3, #map1], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%22, %expanded_13 : tensor<1x2x2x4xf32>, tensor<1x2x2x1xf32>) outs(%21 : tensor<1x2x2x4xf32>) {
    ^bb0(%in: f32, %in_18: f32, %out: f32):
      %45 = arith.subf %in, %in_18 : f32
      linalg.yield %45 : f32
    } -> tensor<1x2x2x4xf32>
    %29 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%28 : tensor<1x2x2x4xf32>) outs(%21 : tensor<1x2x2x4xf32>) {
    ^bb0(%in: f32, %out: f32):
      %45 = math.exp %in : f32
      linalg.yield %45 : f32
    } -> tensor<1x2x2x4xf32>
    %30 = tensor.empty() : tensor<1x2x2x1xf32>
    %31 = linalg.fill ins(%cst : f32) outs(%30 : tensor<1x2x2x1xf32>) -> tensor<1x2x2x1xf32>
    %32 = linalg.generic {indexing_maps = [#map1, #map3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%29 : tensor<1x2x2x4xf32>) outs(%31 : tensor<1x2x2x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %45 = arith.addf %in, %out : f32
      linalg.yield %45 : f32
    } -> tensor<1x2x2x1xf32>
    %33 = linalg.generic {indexing_maps = [#map1, #map3, #map1], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%29, %32 : tensor<1x2x2x4xf32>, tensor<1x2x2x1xf32>) outs(%21 : tensor<1x2x2x4xf32>) {
    ^bb0(%in: f32, %in_18: f32, %out: f32):
      %45 = arith.divf %in, %in_18 : f32
      linalg.yield %45 : f32
    } -> tensor<1x2x2x4xf32>
    %34 = tensor.empty() : tensor<1x1x2xi64>
    %35 = linalg.fill ins(%c0_i64 : i64) outs(%34 : tensor<1x1x2xi64>) -> tensor<1x1x2xi64>
    %36 = tensor.empty() : tensor<1x1x2xf32>
    %37 = linalg.fill ins(%cst_0 : f32) outs(%36 : tensor<1x1x2xf32>) -> tensor<1x1x2xf32>
    %38:2 = linalg.generic {indexing_maps = [#map1, #map11, #map11], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%13 : tensor<1x1x2x4xf32>) outs(%37, %35 : tensor<1x1x2xf32>, tensor<1x1x2xi64>) {
    ^bb0(%in: f32, %out: f32, %out_18: i64):
      %45 = linalg.index 3 : index
      %46 = arith.index_cast %45 : index to i64
      %47 = arith.maximumf %in, %out : f32
      %48 = arith.cmpf ogt, %in, %out : f32
      %49 = arith.select %48, %46, %out_18 : i64
      linalg.yield %47, %49 : f32, i64
    } -> (tensor<1x1x2xf32>, tensor<1x1x2xi64>)
    %expanded_14 = tensor.expand_shape %38#0 [[0], [1], [2, 3]] output_shape [1, 1, 2, 1] : tensor<1x1x2xf32> into tensor<1x1x2x1xf32>
    %39 = tensor.empty() : tensor<1x1x2x1xi1>
    %40 = linalg.generic {indexing_maps = [#map1, #map12, #map1], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%expanded_14, %cst_3 : tensor<1x1x2x1xf32>, tensor<1xf32>) outs(%39 : tensor<1x1x2x1xi1>) {
    ^bb0(%in: f32, %in_18: f32, %out: i1):
      %45 = arith.cmpf oeq, %in, %in_18 : f32
      linalg.yield %45 : i1
    } -> tensor<1x1x2x1xi1>
    %41 = linalg.generic {indexing_maps = [#map13, #map4, #map1, #map1], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%40, %cst_4, %33 : tensor<1x1x2x1xi1>, tensor<1xf32>, tensor<1x2x2x4xf32>) outs(%21 : tensor<1x2x2x4xf32>) {
    ^bb0(%in: i1, %in_18: f32, %in_19: f32, %out: f32):
      %45 = arith.select %in, %in_18, %in_19 : f32
      linalg.yield %45 : f32
    } -> tensor<1x2x2x4xf32>
    %collapsed_15 = tensor.collapse_shape %41 [[0, 1], [2], [3]] : tensor<1x2x2x4xf32> into tensor<2x2x4xf32>
    %collapsed_16 = tensor.collapse_shape %arg2 [[0, 1], [2], [3]] : tensor<1x2x4x8xf32> into tensor<2x4x8xf32>
    %42 = tensor.empty() : tensor<2x2x8xf32>
    %43 = linalg.fill ins(%cst : f32) outs(%42 : tensor<2x2x8xf32>) -> tensor<2x2x8xf32>
    %44 = linalg.batch_matmul ins(%collapsed_15, %collapsed_16 : tensor<2x2x4xf32>, tensor<2x4x8xf32>) outs(%43 : tensor<2x2x8xf32>) -> tensor<2x2x8xf32>
    %expanded_17 = tensor.expand_shape %44 [[0, 1], [2], [3]] output_shape [1, 2, 2, 8] : tensor<2x2x8xf32> into tensor<1x2x2x8xf32>
    return %expanded_17 : tensor<1x2x2x8xf32>
  }
}
