#map = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>
module {
  func.func @test_averagepool_3d_dilations_large_count_include_pad_is_1_ceil_mode_is_True(%arg0: tensor<1x1x32x32x32xf32>) -> tensor<1x1x9x9x9xf32> {
    %cst = arith.constant 0.000000e+00 : f32
    %c2_i64 = arith.constant 2 : i64
    %c3_i64 = arith.constant 3 : i64
    %c32_i64 = arith.constant 32 : i64
    %c9_i64 = arith.constant 9 : i64
    %c0_i64 = arith.constant 0 : i64
    %padded = tensor.pad %arg0 low[0, 0, 0, 0, 0] high[0, 0, 1, 1, 1] {
    ^bb0(%arg1: index, %arg2: index, %arg3: index, %arg4: index, %arg5: index):
      tensor.yield %cst : f32
    } : tensor<1x1x32x32x32xf32> to tensor<1x1x33x33x33xf32>
    %0 = tensor.empty() : tensor<5x5x5xf32>
    %1 = tensor.empty() : tensor<1x33x33x33x1xf32>
    %transposed = linalg.transpose ins(%padded : tensor<1x1x33x33x33xf32>) outs(%1 : tensor<1x33x33x33x1xf32>) permutation = [0, 2, 3, 4, 1] 
    %2 = tensor.empty() : tensor<1x9x9x9x1xf32>
    %3 = linalg.fill ins(%cst : f32) outs(%2 : tensor<1x9x9x9x1xf32>) -> tensor<1x9x9x9x1xf32>
    %4 = linalg.pooling_ndhwc_sum {dilations = dense<2> : vector<3xi64>, strides = dense<3> : vector<3xi64>} ins(%transposed, %0 : tensor<1x33x33x33x1xf32>, tensor<5x5x5xf32>) outs(%3 : tensor<1x9x9x9x1xf32>) -> tensor<1x9x9x9x1xf32>
    %5 = tensor.empty() : tensor<1x1x9x9x9xf32>
    %transposed_0 = linalg.transpose ins(%4 : tensor<1x9x9x9x1xf32>) outs(%5 : tensor<1x1x9x9x9xf32>) permutation = [0, 4, 1, 2, 3] 
    %6 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%transposed_0 : tensor<1x1x9x9x9xf32>) outs(%5 : tensor<1x1x9x9x9xf32>) {
    ^bb0(%in: f32, %out: f32):
      %7 = linalg.index 2 : index
      %8 = arith.index_cast %7 : index to i64
      %9 = arith.muli %8, %c3_i64 : i64
      %10 = arith.addi %9, %c9_i64 : i64
      %11 = arith.minsi %10, %c32_i64 : i64
      %12 = arith.subi %11, %9 : i64
      %13 = arith.ceildivsi %12, %c2_i64 : i64
      %14 = arith.maxsi %13, %c0_i64 : i64
      %15 = linalg.index 3 : index
      %16 = arith.index_cast %15 : index to i64
      %17 = arith.muli %16, %c3_i64 : i64
      %18 = arith.addi %17, %c9_i64 : i64
      %19 = arith.minsi %18, %c32_i64 : i64
      %20 = arith.subi %19, %17 : i64
      %21 = arith.ceildivsi %20, %c2_i64 : i64
      %22 = arith.maxsi %21, %c0_i64 : i64
      %23 = arith.muli %14, %22 : i64
      %24 = linalg.index 4 : index
      %25 = arith.index_cast %24 : index to i64
      %26 = arith.muli %25, %c3_i64 : i64
      %27 = arith.addi %26, %c9_i64 : i64
      %28 = arith.minsi %27, %c32_i64 : i64
      %29 = arith.subi %28, %26 : i64
      %30 = arith.ceildivsi %29, %c2_i64 : i64
      %31 = arith.maxsi %30, %c0_i64 : i64
      %32 = arith.muli %23, %31 : i64
      %33 = arith.sitofp %32 : i64 to f32
      %34 = arith.divf %in, %33 : f32
      linalg.yield %34 : f32
    } -> tensor<1x1x9x9x9xf32>
    return %6 : tensor<1x1x9x9x9xf32>
  }
}
