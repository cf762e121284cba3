#map = affine_map<(d0) -> (d0)>
#map1 = affine_map<(d0) -> (0)>
#map2 = affine_map<()[s0, s1] -> (s0 + s1 + 20)>
#map3 = affine_map<()[s0, s1] -> (s0 + s1 + 8)>
module {
  func.func @test_center_crop_pad_crop_axes_chw_expanded(%arg0: tensor<3x20x8xf32>, %arg1: tensor<2xi64>) -> tensor<3x10x9xf32> {
    %c0 = arith.constant 0 : index
    %c-1 = arith.constant -1 : index
    %cst = arith.constant 0.000000e+00 : f32
    %c0_i64 = arith.constant 0 : i64
    %cst_0 = arith.constant dense<1> : tensor<1xi64>
    %cst_1 = arith.constant dense<0> : tensor<1xi64>
    %cst_2 = arith.constant dense<[20, 8]> : tensor<2xi64>
    %cst_3 = arith.constant dense<2> : tensor<1xi64>
    %0 = tensor.empty() : tensor<2xi64>
    %1 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel"]} ins(%cst_2, %arg1 : tensor<2xi64>, tensor<2xi64>) outs(%0 : tensor<2xi64>) {
    ^bb0(%in: i64, %in_15: i64, %out: i64):
      %41 = arith.maxsi %in, %in_15 : i64
      linalg.yield %41 : i64
    } -> tensor<2xi64>
    %2 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel"]} ins(%1, %cst_2 : tensor<2xi64>, tensor<2xi64>) outs(%0 : tensor<2xi64>) {
    ^bb0(%in: i64, %in_15: i64, %out: i64):
      %41 = arith.subi %in, %in_15 : i64
      linalg.yield %41 : i64
    } -> tensor<2xi64>
    %3 = linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel"]} ins(%2, %cst_3 : tensor<2xi64>, tensor<1xi64>) outs(%0 : tensor<2xi64>) {
    ^bb0(%in: i64, %in_15: i64, %out: i64):
      %41 = arith.divsi %in, %in_15 : i64
      linalg.yield %41 : i64
    } -> tensor<2xi64>
    %4 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel"]} ins(%2, %3 : tensor<2xi64>, tensor<2xi64>) outs(%0 : tensor<2xi64>) {
    ^bb0(%in: i64, %in_15: i64, %out: i64):
      %41 = arith.subi %in, %in_15 : i64
      linalg.yield %41 : i64
    } -> tensor<2xi64>
    %concat = tensor.concat dim(0) %3, %4 : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
    %extracted_slice = tensor.extract_slice %concat[0] [1] [1] : tensor<4xi64> to tensor<1xi64>
    %extracted = tensor.extract %extracted_slice[%c0] : tensor<1xi64>
    %extracted_slice_4 = tensor.extract_slice %concat[1] [1] [1] : tensor<4xi64> to tensor<1xi64>
    %extracted_5 = tensor.extract %extracted_slice_4[%c0] : tensor<1xi64>
    %extracted_slice_6 = tensor.extract_slice %concat[2] [1] [1] : tensor<4xi64> to tensor<1xi64>
    %extracted_7 = tensor.extract %extracted_slice_6[%c0] : tensor<1xi64>
    %extracted_slice_8 = tensor.extract_slice %concat[3] [1] [1] : tensor<4xi64> to tensor<1xi64>
    %extracted_9 = tensor.extract %extracted_slice_8[%c0] : tensor<1xi64>
    %5 = arith.index_cast %extracted : i64 to index
    %6 = arith.index_cast %extracted_7 : i64 to index
    %7 = arith.index_cast %extracted_5 : i64 to index
    %8 = arith.index_cast %extracted_9 : i64 to index
    %padded = tensor.pad %arg0 low[0, %5, %7] high[0, %6, %8] {
    ^bb0(%arg2: index, %arg3: index, %arg4: index):
      tensor.yield %cst : f32
    } : tensor<3x20x8xf32> to tensor<3x?x?xf32>
    %9 = affine.apply #map2()[%5, %6]
    %10 = arith.index_cast %9 : index to i64
    %11 = affine.apply #map3()[%7, %8]
    %12 = arith.index_cast %11 : index to i64
    %from_elements = tensor.from_elements %10, %12 : tensor<2xi64>
    %13 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel"]} ins(%from_elements, %arg1 : tensor<2xi64>, tensor<2xi64>) outs(%0 : tensor<2xi64>) {
    ^bb0(%in: i64, %in_15: i64, %out: i64):
      %41 = arith.subi %in, %in_15 : i64
      linalg.yield %41 : i64
    } -> tensor<2xi64>
    %14 = linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel"]} ins(%13, %cst_3 : tensor<2xi64>, tensor<1xi64>) outs(%0 : tensor<2xi64>) {
    ^bb0(%in: i64, %in_15: i64, %out: i64):
      %41 = arith.divsi %in, %in_15 : i64
      linalg.yield %41 : i64
    } -> tensor<2xi64>
    %15 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel"]} ins(%14, %arg1 : tensor<2xi64>, tensor<2xi64>) outs(%0 : tensor<2xi64>) {
    ^bb0(%in: i64, %in_15: i64, %out: i64):
      %41 = arith.addi %in, %in_15 : i64
      linalg.yield %41 : i64
    } -> tensor<2xi64>
    %16 = tensor.empty() : tensor<1xi64>
    %17 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%cst_1 : tensor<1xi64>) outs(%16 : tensor<1xi64>) {
    ^bb0(%in: i64, %out: i64):
      %41 = arith.index_cast %in : i64 to index
      %extracted_15 = tensor.extract %14[%41] : tensor<2xi64>
      linalg.yield %extracted_15 : i64
    } -> tensor<1xi64>
    %extracted_10 = tensor.extract %17[%c0] : tensor<1xi64>
    %18 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%cst_1 : tensor<1xi64>) outs(%16 : tensor<1xi64>) {
    ^bb0(%in: i64, %out: i64):
      %41 = arith.index_cast %in : i64 to index
      %extracted_15 = tensor.extract %15[%41] : tensor<2xi64>
      linalg.yield %extracted_15 : i64
    } -> tensor<1xi64>
    %extracted_11 = tensor.extract %18[%c0] : tensor<1xi64>
    %19 = arith.addi %extracted_10, %10 : i64
    %20 = arith.cmpi sge, %extracted_10, %c0_i64 : i64
    %21 = arith.select %20, %extracted_10, %19 : i64
    %22 = arith.maxsi %21, %c0_i64 : i64
    %23 = arith.minsi %22, %10 : i64
    %24 = arith.index_cast %23 : i64 to index
    %25 = arith.index_cast %extracted_11 : i64 to index
    %26 = arith.cmpi slt, %25, %c0 : index
    %27 = arith.addi %25, %9 : index
    %28 = arith.select %26, %27, %25 : index
    %29 = arith.cmpi slt, %28, %c0 : index
    %30 = arith.select %29, %c-1, %28 : index
    %31 = arith.minsi %30, %9 : index
    %32 = arith.subi %31, %24 : index
    %33 = arith.maxsi %32, %c0 : index
    %extracted_slice_12 = tensor.extract_slice %padded[0, %24, 0] [3, %33, %11] [1, 1, 1] : tensor<3x?x?xf32> to tensor<3x?x?xf32>
    %34 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%cst_0 : tensor<1xi64>) outs(%16 : tensor<1xi64>) {
    ^bb0(%in: i64, %out: i64):
      %41 = arith.index_cast %in : i64 to index
      %extracted_15 = tensor.extract %14[%41] : tensor<2xi64>
      linalg.yield %extracted_15 : i64
    } -> tensor<1xi64>
    %extracted_13 = tensor.extract %34[%c0] : tensor<1xi64>
    %35 = arith.addi %extracted_13, %12 : i64
    %36 = arith.cmpi sge, %extracted_13, %c0_i64 : i64
    %37 = arith.select %36, %extracted_13, %35 : i64
    %38 = arith.maxsi %37, %c0_i64 : i64
    %39 = arith.minsi %38, %12 : i64
    %40 = arith.index_cast %39 : i64 to index
    %extracted_slice_14 = tensor.extract_slice %extracted_slice_12[0, 0, %40] [3, 10, 9] [1, 1, 1] : tensor<3x?x?xf32> to tensor<3x10x9xf32>
    return %extracted_slice_14 : tensor<3x10x9xf32>
  }
}
