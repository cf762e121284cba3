#map = affine_map<(d0) -> (d0)>
#map1 = affine_map<(d0, d1) -> (d0, d1)>
#map2 = affine_map<(d0, d1) -> (d1)>
#map3 = affine_map<(d0, d1) -> (d0, 0)>
#map4 = affine_map<(d0, d1) -> (0, d1)>
#map5 = affine_map<(d0, d1) -> ()>
#map6 = affine_map<(d0, d1) -> (0)>
#map7 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3, d4)>
#map8 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>
#map9 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#map10 = affine_map<(d0, d1, d2, d3) -> (d3)>
#map11 = affine_map<(d0, d1, d2, d3) -> (0)>
#map12 = affine_map<(d0, d1, d2, d3) -> (d2, d3)>
#map13 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#map14 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>
#map15 = affine_map<(d0, d1) -> (d0)>
#map16 = affine_map<(d0, d1, d2, d3) -> (d2, 0)>
module {
  func.func @test_attention_bidirectional_window_expanded(%arg0: tensor<1x1x5x1xf32>, %arg1: tensor<1x1x5x1xf32>, %arg2: tensor<1x1x5x1xf32>) -> tensor<1x1x5x1xf32> {
    %c0_i64 = arith.constant 0 : i64
    %cst = arith.constant 0.000000e+00 : f32
    %cst_0 = arith.constant 0xFF800000 : f32
    %cst_1 = arith.constant dense<0.000000e+00> : tensor<5x5xf32>
    %cst_2 = arith.constant dense<0.000000e+00> : tensor<1xf32>
    %cst_3 = arith.constant dense<0xFF800000> : tensor<1xf32>
    %cst_4 = arith.constant dense<1.000000e+00> : tensor<1xf32>
    %cst_5 = arith.constant dense<2> : tensor<i64>
    %cst_6 = arith.constant dense<1> : tensor<i64>
    %cst_7 = arith.constant dense<0> : tensor<1xi64>
    %0 = tensor.empty() : tensor<1xf32>
    %1 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%cst_4 : tensor<1xf32>) outs(%0 : tensor<1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %50 = math.sqrt %in : f32
      linalg.yield %50 : f32
    } -> tensor<1xf32>
    %2 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel"]} ins(%cst_4, %1 : tensor<1xf32>, tensor<1xf32>) outs(%0 : tensor<1xf32>) {
    ^bb0(%in: f32, %in_17: f32, %out: f32):
      %50 = arith.divf %in, %in_17 : f32
      linalg.yield %50 : f32
    } -> tensor<1xf32>
    %3 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%2 : tensor<1xf32>) outs(%0 : tensor<1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %50 = math.sqrt %in : f32
      linalg.yield %50 : f32
    } -> tensor<1xf32>
    %4 = tensor.empty() : tensor<5xi64>
    %5 = linalg.generic {indexing_maps = [#map], iterator_types = ["parallel"]} outs(%4 : tensor<5xi64>) {
    ^bb0(%out: i64):
      %50 = linalg.index 0 : index
      %51 = arith.index_cast %50 : index to i64
      linalg.yield %51 : i64
    } -> tensor<5xi64>
    %expanded = tensor.expand_shape %5 [[0, 1]] output_shape [5, 1] : tensor<5xi64> into tensor<5x1xi64>
    %expanded_8 = tensor.expand_shape %5 [[0, 1]] output_shape [1, 5] : tensor<5xi64> into tensor<1x5xi64>
    %6 = tensor.empty() : tensor<5x1xi64>
    %7 = linalg.generic {indexing_maps = [#map1, #map2, #map1], iterator_types = ["parallel", "parallel"]} ins(%expanded, %cst_7 : tensor<5x1xi64>, tensor<1xi64>) outs(%6 : tensor<5x1xi64>) {
    ^bb0(%in: i64, %in_17: i64, %out: i64):
      %50 = arith.addi %in, %in_17 : i64
      linalg.yield %50 : i64
    } -> tensor<5x1xi64>
    %8 = tensor.empty() : tensor<5x5xi64>
    %9 = linalg.generic {indexing_maps = [#map3, #map4, #map1], iterator_types = ["parallel", "parallel"]} ins(%7, %expanded_8 : tensor<5x1xi64>, tensor<1x5xi64>) outs(%8 : tensor<5x5xi64>) {
    ^bb0(%in: i64, %in_17: i64, %out: i64):
      %50 = arith.subi %in, %in_17 : i64
      linalg.yield %50 : i64
    } -> tensor<5x5xi64>
    %10 = tensor.empty() : tensor<5x5xi1>
    %11 = linalg.generic {indexing_maps = [#map1, #map5, #map1], iterator_types = ["parallel", "parallel"]} ins(%9, %cst_6 : tensor<5x5xi64>, tensor<i64>) outs(%10 : tensor<5x5xi1>) {
    ^bb0(%in: i64, %in_17: i64, %out: i1):
      %50 = arith.cmpi sle, %in, %in_17 : i64
      linalg.yield %50 : i1
    } -> tensor<5x5xi1>
    %12 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel"]} ins(%9 : tensor<5x5xi64>) outs(%8 : tensor<5x5xi64>) {
    ^bb0(%in: i64, %out: i64):
      %50 = arith.sitofp %in : i64 to f32
      %51 = arith.negf %50 : f32
      %52 = arith.fptosi %51 : f32 to i64
      linalg.yield %52 : i64
    } -> tensor<5x5xi64>
    %13 = linalg.generic {indexing_maps = [#map1, #map5, #map1], iterator_types = ["parallel", "parallel"]} ins(%12, %cst_5 : tensor<5x5xi64>, tensor<i64>) outs(%10 : tensor<5x5xi1>) {
    ^bb0(%in: i64, %in_17: i64, %out: i1):
      %50 = arith.cmpi sle, %in, %in_17 : i64
      linalg.yield %50 : i1
    } -> tensor<5x5xi1>
    %14 = linalg.generic {indexing_maps = [#map1, #map1, #map1], iterator_types = ["parallel", "parallel"]} ins(%11, %13 : tensor<5x5xi1>, tensor<5x5xi1>) outs(%10 : tensor<5x5xi1>) {
    ^bb0(%in: i1, %in_17: i1, %out: i1):
      %50 = arith.andi %in, %in_17 : i1
      linalg.yield %50 : i1
    } -> tensor<5x5xi1>
    %15 = tensor.empty() : tensor<5x5xf32>
    %16 = linalg.generic {indexing_maps = [#map1, #map6, #map6, #map1], iterator_types = ["parallel", "parallel"]} ins(%14, %cst_2, %cst_3 : tensor<5x5xi1>, tensor<1xf32>, tensor<1xf32>) outs(%15 : tensor<5x5xf32>) {
    ^bb0(%in: i1, %in_17: f32, %in_18: f32, %out: f32):
      %50 = arith.select %in, %in_17, %in_18 : f32
      linalg.yield %50 : f32
    } -> tensor<5x5xf32>
    %17 = linalg.generic {indexing_maps = [#map1, #map1, #map1], iterator_types = ["parallel", "parallel"]} ins(%cst_1, %16 : tensor<5x5xf32>, tensor<5x5xf32>) outs(%15 : tensor<5x5xf32>) {
    ^bb0(%in: f32, %in_17: f32, %out: f32):
      %50 = arith.addf %in, %in_17 : f32
      linalg.yield %50 : f32
    } -> tensor<5x5xf32>
    %18 = tensor.empty() : tensor<1x1x1x5x1xf32>
    %19 = linalg.generic {indexing_maps = [#map7, #map8], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%arg1 : tensor<1x1x5x1xf32>) outs(%18 : tensor<1x1x1x5x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    } -> tensor<1x1x1x5x1xf32>
    %20 = linalg.generic {indexing_maps = [#map7, #map8], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%arg2 : tensor<1x1x5x1xf32>) outs(%18 : tensor<1x1x1x5x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    } -> tensor<1x1x1x5x1xf32>
    %collapsed = tensor.collapse_shape %19 [[0], [1], [2, 3], [4]] : tensor<1x1x1x5x1xf32> into tensor<1x1x5x1xf32>
    %21 = tensor.empty() : tensor<1x1x1x5xf32>
    %transposed = linalg.transpose ins(%collapsed : tensor<1x1x5x1xf32>) outs(%21 : tensor<1x1x1x5xf32>) permutation = [0, 1, 3, 2] 
    %22 = tensor.empty() : tensor<1x1x5x1xf32>
    %23 = linalg.generic {indexing_maps = [#map9, #map10, #map9], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%arg0, %3 : tensor<1x1x5x1xf32>, tensor<1xf32>) outs(%22 : tensor<1x1x5x1xf32>) {
    ^bb0(%in: f32, %in_17: f32, %out: f32):
      %50 = arith.mulf %in, %in_17 : f32
      linalg.yield %50 : f32
    } -> tensor<1x1x5x1xf32>
    %24 = linalg.generic {indexing_maps = [#map9, #map11, #map9], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%transposed, %3 : tensor<1x1x1x5xf32>, tensor<1xf32>) outs(%21 : tensor<1x1x1x5xf32>) {
    ^bb0(%in: f32, %in_17: f32, %out: f32):
      %50 = arith.mulf %in, %in_17 : f32
      linalg.yield %50 : f32
    } -> tensor<1x1x1x5xf32>
    %collapsed_9 = tensor.collapse_shape %23 [[0, 1], [2], [3]] : tensor<1x1x5x1xf32> into tensor<1x5x1xf32>
    %collapsed_10 = tensor.collapse_shape %24 [[0, 1], [2], [3]] : tensor<1x1x1x5xf32> into tensor<1x1x5xf32>
    %25 = tensor.empty() : tensor<1x5x5xf32>
    %26 = linalg.fill ins(%cst : f32) outs(%25 : tensor<1x5x5xf32>) -> tensor<1x5x5xf32>
    %27 = linalg.batch_matmul ins(%collapsed_9, %collapsed_10 : tensor<1x5x1xf32>, tensor<1x1x5xf32>) outs(%26 : tensor<1x5x5xf32>) -> tensor<1x5x5xf32>
    %expanded_11 = tensor.expand_shape %27 [[0, 1], [2], [3]] output_shape [1, 1, 5, 5] : tensor<1x5x5xf32> into tensor<1x1x5x5xf32>
    %28 = tensor.empty() : tensor<1x1x5x5xf32>
    %29 = linalg.generic {indexing_maps = [#map9, #map12, #map9], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%expanded_11, %17 : tensor<1x1x5x5xf32>, tensor<5x5xf32>) outs(%28 : tensor<1x1x5x5xf32>) {
    ^bb0(%in: f32, %in_17: f32, %out: f32):
      %50 = arith.addf %in, %in_17 : f32
      linalg.yield %50 : f32
    } -> tensor<1x1x5x5xf32>
    %30 = tensor.empty() : tensor<1x1x5xi64>
    %31 = linalg.fill ins(%c0_i64 : i64) outs(%30 : tensor<1x1x5xi64>) -> tensor<1x1x5xi64>
    %32 = tensor.empty() : tensor<1x1x5xf32>
    %33 = linalg.fill ins(%cst_0 : f32) outs(%32 : tensor<1x1x5xf32>) -> tensor<1x1x5xf32>
    %34:2 = linalg.generic {indexing_maps = [#map9, #map13, #map13], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%29 : tensor<1x1x5x5xf32>) outs(%33, %31 : tensor<1x1x5xf32>, tensor<1x1x5xi64>) {
    ^bb0(%in: f32, %out: f32, %out_17: i64):
      %50 = linalg.index 3 : index
      %51 = arith.index_cast %50 : index to i64
      %52 = arith.maximumf %in, %out : f32
      %53 = arith.cmpf ogt, %in, %out : f32
      %54 = arith.select %53, %51, %out_17 : i64
      linalg.yield %52, %54 : f32, i64
    } -> (tensor<1x1x5xf32>, tensor<1x1x5xi64>)
    %expanded_12 = tensor.expand_shape %34#0 [[0], [1], [2, 3]] output_shape [1, 1, 5, 1] : tensor<1x1x5xf32> into tensor<1x1x5x1xf32>
    %35 = linalg.generic {indexing_maps = [#map9, #map14, #map9], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%29, %expanded_12 : tensor<1x1x5x5xf32>, tensor<1x1x5x1xf32>) outs(%28 : tensor<1x1x5x5xf32>) {
    ^bb0(%in: f32, %in_17: f32, %out: f32):
      %50 = arith.subf %in, %in_17 : f32
      linalg.yield %50 : f32
    } -> tensor<1x1x5x5xf32>
    %36 = linalg.generic {indexing_maps = [#map9, #map9], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%35 : tensor<1x1x5x5xf32>) outs(%28 : tensor<1x1x5x5xf32>) {
    ^bb0(%in: f32, %out: f32):
      %50 = math.exp %in : f32
      linalg.yield %50 : f32
    } -> tensor<1x1x5x5xf32>
    %37 = linalg.fill ins(%cst : f32) outs(%22 : tensor<1x1x5x1xf32>) -> tensor<1x1x5x1xf32>
    %38 = linalg.generic {indexing_maps = [#map9, #map14], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%36 : tensor<1x1x5x5xf32>) outs(%37 : tensor<1x1x5x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %50 = arith.addf %in, %out : f32
      linalg.yield %50 : f32
    } -> tensor<1x1x5x1xf32>
    %39 = linalg.generic {indexing_maps = [#map9, #map14, #map9], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%36, %38 : tensor<1x1x5x5xf32>, tensor<1x1x5x1xf32>) outs(%28 : tensor<1x1x5x5xf32>) {
    ^bb0(%in: f32, %in_17: f32, %out: f32):
      %50 = arith.divf %in, %in_17 : f32
      linalg.yield %50 : f32
    } -> tensor<1x1x5x5xf32>
    %40 = linalg.fill ins(%c0_i64 : i64) outs(%4 : tensor<5xi64>) -> tensor<5xi64>
    %41 = tensor.empty() : tensor<5xf32>
    %42 = linalg.fill ins(%cst_0 : f32) outs(%41 : tensor<5xf32>) -> tensor<5xf32>
    %43:2 = linalg.generic {indexing_maps = [#map1, #map15, #map15], iterator_types = ["parallel", "reduction"]} ins(%17 : tensor<5x5xf32>) outs(%42, %40 : tensor<5xf32>, tensor<5xi64>) {
    ^bb0(%in: f32, %out: f32, %out_17: i64):
      %50 = linalg.index 1 : index
      %51 = arith.index_cast %50 : index to i64
      %52 = arith.maximumf %in, %out : f32
      %53 = arith.cmpf ogt, %in, %out : f32
      %54 = arith.select %53, %51, %out_17 : i64
      linalg.yield %52, %54 : f32, i64
    } -> (tensor<5xf32>, tensor<5xi64>)
    %expanded_13 = tensor.expand_shape %43#0 [[0, 1]] output_shape [5, 1] : tensor<5xf32> into tensor<5x1xf32>
    %44 = tensor.empty() : tensor<5x1xi1>
    %45 = linalg.generic {indexing_maps = [#map1, #map2, #map1], iterator_types = ["parallel", "parallel"]} ins(%expanded_13, %cst_3 : tensor<5x1xf32>, tensor<1xf32>) outs(%44 : tensor<5x1xi1>) {
    ^bb0(%in: f32, %in_17: f32, %out: i1):
      %50 = arith.cmpf oeq, %in, %in_17 : f32
      linalg.yield %50 : i1
    } -> tensor<5x1xi1>
    %46 = linalg.generic {indexing_maps = [#map16, #map11, #map9, #map9], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%45, %cst_2, %39 : tensor<5x1xi1>, tensor<1xf32>, tensor<1x1x5x5xf32>) outs(%28 : tensor<1x1x5x5xf32>) {
    ^bb0(%in: i1, %in_17: f32, %in_18: f32, %out: f32):
      %50 = arith.select %in, %in_17, %in_18 : f32
      linalg.yield %50 : f32
    } -> tensor<1x1x5x5xf32>
    %collapsed_14 = tensor.collapse_shape %46 [[0, 1], [2], [3]] : tensor<1x1x5x5xf32> into tensor<1x5x5xf32>
    %collapsed_15 = tensor.collapse_shape %20 [[0, 1], [2, 3], [4]] : tensor<1x1x1x5x1xf32> into tensor<1x5x1xf32>
    %47 = tensor.empty() : tensor<1x5x1xf32>
    %48 = linalg.fill ins(%cst : f32) outs(%47 : tensor<1x5x1xf32>) -> tensor<1x5x1xf32>
    %49 = linalg.batch_matmul ins(%collapsed_14, %collapsed_15 : tensor<1x5x5xf32>, tensor<1x5x1xf32>) outs(%48 : tensor<1x5x1xf32>) -> tensor<1x5x1xf32>
    %expanded_16 = tensor.expand_shape %49 [[0, 1], [2], [3]] output_shape [1, 1, 5, 1] : tensor<1x5x1xf32> into tensor<1x1x5x1xf32>
    return %expanded_16 : tensor<1x1x5x1xf32>
  }
}
