#map = affine_map<(d0, d1, d2) -> (d0, 0, d2)>
#map1 = affine_map<(d0, d1, d2) -> (d0, d1, 0)>
#map2 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#map3 = affine_map<(d0, d1, d2) -> (d1, d2)>
#map4 = affine_map<(d0, d1, d2) -> (d0, d1)>
#map5 = affine_map<(d0, d1, d2) -> (d1, 0)>
#map6 = affine_map<(d0, d1, d2) -> (d2)>
#map7 = affine_map<(d0, d1, d2) -> ()>
#map8 = affine_map<(d0, d1) -> (d0, d1)>
module {
  func.func @test_top_k(%arg0: tensor<3x4xf32>) -> (tensor<3x3xf32>, tensor<3x3xi64>) {
    %c4 = arith.constant 4 : index
    %true = arith.constant true
    %cst = arith.constant 0.000000e+00 : f32
    %cst_0 = arith.constant dense<[[false, false, false, false], [true, false, false, false], [true, true, false, false], [true, true, true, false]]> : tensor<4x4xi1>
    %c4_i64 = arith.constant 4 : i64
    %c0_i64 = arith.constant 0 : i64
    %cst_1 = arith.constant dense<[[0], [1], [2]]> : tensor<3x1xi64>
    %cst_2 = arith.constant dense<[0, 1, 2, 3]> : tensor<4xi64>
    %cst_3 = arith.constant dense<0> : tensor<i64>
    %expanded = tensor.expand_shape %arg0 [[0], [1, 2]] output_shape [3, 4, 1] : tensor<3x4xf32> into tensor<3x4x1xf32>
    %expanded_4 = tensor.expand_shape %arg0 [[0], [1, 2]] output_shape [3, 1, 4] : tensor<3x4xf32> into tensor<3x1x4xf32>
    %0 = tensor.empty() : tensor<3x4x4xi1>
    %1 = linalg.generic {indexing_maps = [#map, #map1, #map2], iterator_types = ["parallel", "parallel", "parallel"]} ins(%expanded_4, %expanded : tensor<3x1x4xf32>, tensor<3x4x1xf32>) outs(%0 : tensor<3x4x4xi1>) {
    ^bb0(%in: f32, %in_6: f32, %out: i1):
      %33 = arith.cmpf ogt, %in, %in_6 : f32
      linalg.yield %33 : i1
    } -> tensor<3x4x4xi1>
    %2 = linalg.generic {indexing_maps = [#map, #map1, #map2], iterator_types = ["parallel", "parallel", "parallel"]} ins(%expanded_4, %expanded : tensor<3x1x4xf32>, tensor<3x4x1xf32>) outs(%0 : tensor<3x4x4xi1>) {
    ^bb0(%in: f32, %in_6: f32, %out: i1):
      %33 = arith.cmpf oeq, %in, %in_6 : f32
      linalg.yield %33 : i1
    } -> tensor<3x4x4xi1>
    %3 = tensor.empty() : tensor<3x4x1xi1>
    %4 = linalg.generic {indexing_maps = [#map2, #map2, #map2], iterator_types = ["parallel", "parallel", "parallel"]} ins(%expanded, %expanded : tensor<3x4x1xf32>, tensor<3x4x1xf32>) outs(%3 : tensor<3x4x1xi1>) {
    ^bb0(%in: f32, %in_6: f32, %out: i1):
      %33 = arith.cmpf une, %in, %in_6 : f32
      linalg.yield %33 : i1
    } -> tensor<3x4x1xi1>
    %5 = tensor.empty() : tensor<3x1x4xi1>
    %6 = linalg.generic {indexing_maps = [#map2, #map2, #map2], iterator_types = ["parallel", "parallel", "parallel"]} ins(%expanded_4, %expanded_4 : tensor<3x1x4xf32>, tensor<3x1x4xf32>) outs(%5 : tensor<3x1x4xi1>) {
    ^bb0(%in: f32, %in_6: f32, %out: i1):
      %33 = arith.cmpf une, %in, %in_6 : f32
      linalg.yield %33 : i1
    } -> tensor<3x1x4xi1>
    %7 = linalg.generic {indexing_maps = [#map2, #map2], iterator_types = ["parallel", "parallel", "parallel"]} ins(%4 : tensor<3x4x1xi1>) outs(%3 : tensor<3x4x1xi1>) {
    ^bb0(%in: i1, %out: i1):
      %33 = arith.xori %in, %true : i1
      linalg.yield %33 : i1
    } -> tensor<3x4x1xi1>
    %8 = linalg.generic {indexing_maps = [#map, #map1, #map2], iterator_types = ["parallel", "parallel", "parallel"]} ins(%6, %7 : tensor<3x1x4xi1>, tensor<3x4x1xi1>) outs(%0 : tensor<3x4x4xi1>) {
    ^bb0(%in: i1, %in_6: i1, %out: i1):
      %33 = arith.andi %in, %in_6 : i1
      linalg.yield %33 : i1
    } -> tensor<3x4x4xi1>
    %9 = linalg.generic {indexing_maps = [#map2, #map2, #map2], iterator_types = ["parallel", "parallel", "parallel"]} ins(%1, %8 : tensor<3x4x4xi1>, tensor<3x4x4xi1>) outs(%0 : tensor<3x4x4xi1>) {
    ^bb0(%in: i1, %in_6: i1, %out: i1):
      %33 = arith.ori %in, %in_6 : i1
      linalg.yield %33 : i1
    } -> tensor<3x4x4xi1>
    %10 = linalg.generic {indexing_maps = [#map1, #map, #map2], iterator_types = ["parallel", "parallel", "parallel"]} ins(%4, %6 : tensor<3x4x1xi1>, tensor<3x1x4xi1>) outs(%0 : tensor<3x4x4xi1>) {
    ^bb0(%in: i1, %in_6: i1, %out: i1):
      %33 = arith.andi %in, %in_6 : i1
      linalg.yield %33 : i1
    } -> tensor<3x4x4xi1>
    %11 = linalg.generic {indexing_maps = [#map2, #map2, #map2], iterator_types = ["parallel", "parallel", "parallel"]} ins(%2, %10 : tensor<3x4x4xi1>, tensor<3x4x4xi1>) outs(%0 : tensor<3x4x4xi1>) {
    ^bb0(%in: i1, %in_6: i1, %out: i1):
      %33 = arith.ori %in, %in_6 : i1
      linalg.yield %33 : i1
    } -> tensor<3x4x4xi1>
    %12 = linalg.generic {indexing_maps = [#map2, #map3, #map2], iterator_types = ["parallel", "parallel", "parallel"]} ins(%11, %cst_0 : tensor<3x4x4xi1>, tensor<4x4xi1>) outs(%0 : tensor<3x4x4xi1>) {
    ^bb0(%in: i1, %in_6: i1, %out: i1):
      %33 = arith.andi %in, %in_6 : i1
      linalg.yield %33 : i1
    } -> tensor<3x4x4xi1>
    %13 = linalg.generic {indexing_maps = [#map2, #map2, #map2], iterator_types = ["parallel", "parallel", "parallel"]} ins(%9, %12 : tensor<3x4x4xi1>, tensor<3x4x4xi1>) outs(%0 : tensor<3x4x4xi1>) {
    ^bb0(%in: i1, %in_6: i1, %out: i1):
      %33 = arith.ori %in, %in_6 : i1
      linalg.yield %33 : i1
    } -> tensor<3x4x4xi1>
    %14 = tensor.empty() : tensor<3x4x4xi64>
    %15 = linalg.generic {indexing_maps = [#map2, #map2], iterator_types = ["parallel", "parallel", "parallel"]} ins(%13 : tensor<3x4x4xi1>) outs(%14 : tensor<3x4x4xi64>) {
    ^bb0(%in: i1, %out: i64):
      %33 = arith.extui %in : i1 to i64
      linalg.yield %33 : i64
    } -> tensor<3x4x4xi64>
    %16 = tensor.empty() : tensor<3x4xi64>
    %17 = linalg.fill ins(%c0_i64 : i64) outs(%16 : tensor<3x4xi64>) -> tensor<3x4xi64>
    %18 = linalg.generic {indexing_maps = [#map2, #map4], iterator_types = ["parallel", "parallel", "reduction"]} ins(%15 : tensor<3x4x4xi64>) outs(%17 : tensor<3x4xi64>) {
    ^bb0(%in: i64, %out: i64):
      %33 = arith.addi %in, %out : i64
      linalg.yield %33 : i64
    } -> tensor<3x4xi64>
    %expanded_5 = tensor.expand_shape %18 [[0], [1, 2]] output_shape [3, 1, 4] : tensor<3x4xi64> into tensor<3x1x4xi64>
    %19 = tensor.empty() : tensor<3x3x4xi1>
    %20 = linalg.generic {indexing_maps = [#map, #map5, #map2], iterator_types = ["parallel", "parallel", "parallel"]} ins(%expanded_5, %cst_1 : tensor<3x1x4xi64>, tensor<3x1xi64>) outs(%19 : tensor<3x3x4xi1>) {
    ^bb0(%in: i64, %in_6: i64, %out: i1):
      %33 = arith.cmpi eq, %in, %in_6 : i64
      linalg.yield %33 : i1
    } -> tensor<3x3x4xi1>
    %21 = tensor.empty() : tensor<3x3x4xi64>
    %22 = linalg.generic {indexing_maps = [#map2, #map6, #map7, #map2], iterator_types = ["parallel", "parallel", "parallel"]} ins(%20, %cst_2, %cst_3 : tensor<3x3x4xi1>, tensor<4xi64>, tensor<i64>) outs(%21 : tensor<3x3x4xi64>) {
    ^bb0(%in: i1, %in_6: i64, %in_7: i64, %out: i64):
      %33 = arith.select %in, %in_6, %in_7 : i64
      linalg.yield %33 : i64
    } -> tensor<3x3x4xi64>
    %23 = tensor.empty() : tensor<3x3xi64>
    %24 = linalg.fill ins(%c0_i64 : i64) outs(%23 : tensor<3x3xi64>) -> tensor<3x3xi64>
    %25 = linalg.generic {indexing_maps = [#map2, #map4], iterator_types = ["parallel", "parallel", "reduction"]} ins(%22 : tensor<3x3x4xi64>) outs(%24 : tensor<3x3xi64>) {
    ^bb0(%in: i64, %out: i64):
      %33 = arith.addi %in, %out : i64
      linalg.yield %33 : i64
    } -> tensor<3x3xi64>
    %26 = linalg.generic {indexing_maps = [#map8, #map8], iterator_types = ["parallel", "parallel"]} ins(%25 : tensor<3x3xi64>) outs(%23 : tensor<3x3xi64>) {
    ^bb0(%in: i64, %out: i64):
      %33 = arith.addi %in, %c4_i64 : i64
      linalg.yield %33 : i64
    } -> tensor<3x3xi64>
    %27 = tensor.empty() : tensor<3x3xi1>
    %28 = linalg.generic {indexing_maps = [#map8, #map8], iterator_types = ["parallel", "parallel"]} ins(%25 : tensor<3x3xi64>) outs(%27 : tensor<3x3xi1>) {
    ^bb0(%in: i64, %out: i1):
      %33 = arith.cmpi slt, %in, %c0_i64 : i64
      linalg.yield %33 : i1
    } -> tensor<3x3xi1>
    %29 = linalg.generic {indexing_maps = [#map8, #map8, #map8, #map8], iterator_types = ["parallel", "parallel"]} ins(%28, %26, %25 : tensor<3x3xi1>, tensor<3x3xi64>, tensor<3x3xi64>) outs(%23 : tensor<3x3xi64>) {
    ^bb0(%in: i1, %in_6: i64, %in_7: i64, %out: i64):
      %33 = arith.select %in, %in_6, %in_7 : i64
      linalg.yield %33 : i64
    } -> tensor<3x3xi64>
    %30 = tensor.empty() : tensor<3x3xf32>
    %31 = linalg.fill ins(%cst : f32) outs(%30 : tensor<3x3xf32>) -> tensor<3x3xf32>
    %32 = linalg.generic {indexing_maps = [#map8, #map8], iterator_types = ["parallel", "parallel"]} ins(%29 : tensor<3x3xi64>) outs(%31 : tensor<3x3xf32>) {
    ^bb0(%in: i64, %out: f32):
      %33 = linalg.index 0 : index
      %34 = arith.index_cast %in : i64 to index
      %35 = arith.cmpi slt, %34, %c4 : index
      cf.assert %35, "index must be smaller than dim size"
      %36 = arith.cmpi sge, %in, %c0_i64 : i64
      cf.assert %36, "index must be larger or equal to 0"
      %extracted = tensor.extract %arg0[%33, %34] : tensor<3x4xf32>
      linalg.yield %extracted : f32
    } -> tensor<3x3xf32>
    return %32, %25 : tensor<3x3xf32>, tensor<3x3xi64>
  }
}
