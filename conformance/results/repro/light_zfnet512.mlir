#map = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#map1 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>
#map2 = affine_map<(d0, d1) -> (d0, d1)>
#map3 = affine_map<(d0, d1) -> (d1)>
#map4 = affine_map<(d0, d1) -> (d0)>
#map5 = affine_map<(d0, d1) -> (d0, 0)>
module {
  func.func @zfnet512(%arg0: tensor<1x3x224x224xf32>) -> tensor<1x1000xf32> {
    %c0_i64 = arith.constant 0 : i64
    %cst = arith.constant 0.000000e+00 : f32
    %cst_0 = arith.constant 0xFF800000 : f32
    %cst_1 = arith.constant dense<2.000000e-02> : tensor<96x3x7x7xf32>
    %cst_2 = arith.constant dense<2.000000e-02> : tensor<256x96x5x5xf32>
    %cst_3 = arith.constant dense<2.000000e-02> : tensor<512x256x3x3xf32>
    %cst_4 = arith.constant dense<2.000000e-02> : tensor<512x512x3x3xf32>
    %cst_5 = arith.constant dense<2.000000e-02> : tensor<4096xf32>
    %cst_6 = arith.constant dense<2.000000e-02> : tensor<1024xf32>
    %cst_7 = arith.constant dense<2.000000e-02> : tensor<1000xf32>
    %cst_8 = arith.constant dense<2.000000e-02> : tensor<1x96x109x109xf32>
    %cst_9 = arith.constant 5.000000e+00 : f32
    %cst_10 = arith.constant 5.000000e-04 : f32
    %cst_11 = arith.constant 2.000000e+00 : f32
    %cst_12 = arith.constant 7.500000e-01 : f32
    %cst_13 = arith.constant dense<2.000000e-02> : tensor<1x256x25x25xf32>
    %cst_14 = arith.constant dense<2.000000e-02> : tensor<1x512x12x12xf32>
    %cst_15 = arith.constant dense<2.000000e-02> : tensor<18432x4096xf32>
    %cst_16 = arith.constant dense<2.000000e-02> : tensor<4096x1024xf32>
    %cst_17 = arith.constant dense<2.000000e-02> : tensor<1024x1000xf32>
    %0 = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>} ins(%arg0, %cst_1 : tensor<1x3x224x224xf32>, tensor<96x3x7x7xf32>) outs(%cst_8 : tensor<1x96x109x109xf32>) -> tensor<1x96x109x109xf32>
    %1 = tensor.empty() : tensor<1x96x109x109xf32>
    %2 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%0 : tensor<1x96x109x109xf32>) outs(%1 : tensor<1x96x109x109xf32>) {
    ^bb0(%in: f32, %out: f32):
      %72 = arith.cmpf ugt, %in, %cst : f32
      %73 = arith.select %72, %in, %cst : f32
      linalg.yield %73 : f32
    } -> tensor<1x96x109x109xf32>
    %3 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%2, %2 : tensor<1x96x109x109xf32>, tensor<1x96x109x109xf32>) outs(%1 : tensor<1x96x109x109xf32>) {
    ^bb0(%in: f32, %in_29: f32, %out: f32):
      %72 = arith.mulf %in, %in_29 : f32
      linalg.yield %72 : f32
    } -> tensor<1x96x109x109xf32>
    %expanded = tensor.expand_shape %3 [[0], [1, 2], [3], [4]] output_shape [1, 1, 96, 109, 109] : tensor<1x96x109x109xf32> into tensor<1x1x96x109x109xf32>
    %padded = tensor.pad %expanded low[0, 0, 2, 0, 0] high[0, 0, 2, 0, 0] {
    ^bb0(%arg1: index, %arg2: index, %arg3: index, %arg4: index, %arg5: index):
      tensor.yield %cst : f32
    } : tensor<1x1x96x109x109xf32> to tensor<1x1x100x109x109xf32>
    %4 = tensor.empty() : tensor<5x1x1xf32>
    %5 = tensor.empty() : tensor<1x100x109x109x1xf32>
    %transposed = linalg.transpose ins(%padded : tensor<1x1x100x109x109xf32>) outs(%5 : tensor<1x100x109x109x1xf32>) permutation = [0, 2, 3, 4, 1] 
    %6 = tensor.empty() : tensor<1x96x109x109x1xf32>
    %7 = linalg.fill ins(%cst : f32) outs(%6 : tensor<1x96x109x109x1xf32>) -> tensor<1x96x109x109x1xf32>
    %8 = linalg.pooling_ndhwc_sum {dilations = dense<1> : vector<3xi64>, strides = dense<1> : vector<3xi64>} ins(%transposed, %4 : tensor<1x100x109x109x1xf32>, tensor<5x1x1xf32>) outs(%7 : tensor<1x96x109x109x1xf32>) -> tensor<1x96x109x109x1xf32>
    %9 = tensor.empty() : tensor<1x1x96x109x109xf32>
    %transposed_18 = linalg.transpose ins(%8 : tensor<1x96x109x109x1xf32>) outs(%9 : tensor<1x1x96x109x109xf32>) permutation = [0, 4, 1, 2, 3] 
    %10 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%transposed_18 : tensor<1x1x96x109x109xf32>) outs(%9 : tensor<1x1x96x109x109xf32>) {
    ^bb0(%in: f32, %out: f32):
      %72 = arith.divf %in, %cst_9 : f32
      linalg.yield %72 : f32
    } -> tensor<1x1x96x109x109xf32>
    %collapsed = tensor.collapse_shape %10 [[0, 1], [2], [3], [4]] : tensor<1x1x96x109x109xf32> into tensor<1x96x109x109xf32>
    %11 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%collapsed : tensor<1x96x109x109xf32>) outs(%1 : tensor<1x96x109x109xf32>) {
    ^bb0(%in: f32, %out: f32):
      %72 = arith.mulf %in, %cst_10 : f32
      linalg.yield %72 : f32
    } -> tensor<1x96x109x109xf32>
    %12 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%11 : tensor<1x96x109x109xf32>) outs(%1 : tensor<1x96x109x109xf32>) {
    ^bb0(%in: f32, %out: f32):
      %72 = arith.addf %in, %cst_11 : f32
      linalg.yield %72 : f32
    } -> tensor<1x96x109x109xf32>
    %13 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%12 : tensor<1x96x109x109xf32>) outs(%1 : tensor<1x96x109x109xf32>) {
    ^bb0(%in: f32, %out: f32):
      %72 = math.powf %in, %cst_12 : f32
      linalg.yield %72 : f32
    } -> tensor<1x96x109x109xf32>
    %14 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%2, %13 : tensor<1x96x109x109xf32>, tensor<1x96x109x109xf32>) outs(%1 : tensor<1x96x109x109xf32>) {
    ^bb0(%in: f32, %in_29: f32, %out: f32):
      %72 = arith.divf %in, %in_29 : f32
      linalg.yield %72 : f32
    } -> tensor<1x96x109x109xf32>
    %15 = tensor.empty() : tensor<1x96x54x54xf32>
    %16 = linalg.fill ins(%cst_0 : f32) outs(%15 : tensor<1x96x54x54xf32>) -> tensor<1x96x54x54xf32>
    %17 = tensor.empty() : tensor<3x3xf32>
    %18 = linalg.pooling_nchw_max {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>} ins(%14, %17 : tensor<1x96x109x109xf32>, tensor<3x3xf32>) outs(%16 : tensor<1x96x54x54xf32>) -> tensor<1x96x54x54xf32>
    %19 = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>} ins(%18, %cst_2 : tensor<1x96x54x54xf32>, tensor<256x96x5x5xf32>) outs(%cst_13 : tensor<1x256x25x25xf32>) -> tensor<1x256x25x25xf32>
    %20 = tensor.empty() : tensor<1x256x25x25xf32>
    %21 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%19 : tensor<1x256x25x25xf32>) outs(%20 : tensor<1x256x25x25xf32>) {
    ^bb0(%in: f32, %out: f32):
      %72 = arith.cmpf ugt, %in, %cst : f32
      %73 = arith.select %72, %in, %cst : f32
      linalg.yield %73 : f32
    } -> tensor<1x256x25x25xf32>
    %22 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%21, %21 : tensor<1x256x25x25xf32>, tensor<1x256x25x25xf32>) outs(%20 : tensor<1x256x25x25xf32>) {
    ^bb0(%in: f32, %in_29: f32, %out: f32):
      %72 = arith.mulf %in, %in_29 : f32
      linalg.yield %72 : f32
    } -> tensor<1x256x25x25xf32>
    %expanded_19 = tensor.expand_shape %22 [[0], [1, 2], [3], [4]] output_shape [1, 1, 256, 25, 25] : tensor<1x256x25x25xf32> into tensor<1x1x256x25x25xf32>
    %padded_20 = tensor.pad %expanded_19 low[0, 0, 2, 0, 0] high[0, 0, 2, 0, 0] {
    ^bb0(%arg1: index, %arg2: index, %arg3: index, %arg4: index, %arg5: index):
      tensor.yield %cst : f32
    } : tensor<1x1x256x25x25xf32> to tensor<1x1x260x25x25xf32>
    %23 = tensor.empty() : tensor<1x260x25x25x1xf32>
    %transposed_21 = linalg.transpose ins(%padded_20 : tensor<1x1x260x25x25xf32>) outs(%23 : tensor<1x260x25x25x1xf32>) permutation = [0, 2, 3, 4, 1] 
    %24 = tensor.empty() : tensor<1x256x25x25x1xf32>
    %25 = linalg.fill ins(%cst : f32) outs(%24 : tensor<1x256x25x25x1xf32>) -> tensor<1x256x25x25x1xf32>
    %26 = linalg.pooling_ndhwc_sum {dilations = dense<1> : vector<3xi64>, strides = dense<1> : vector<3xi64>} ins(%transposed_21, %4 : tensor<1x260x25x25x1xf32>, tensor<5x1x1xf32>) outs(%25 : tensor<1x256x25x25x1xf32>) -> tensor<1x256x25x25x1xf32>
    %27 = tensor.empty() : tensor<1x1x256x25x25xf32>
    %transposed_22 = linalg.transpose ins(%26 : tensor<1x256x25x25x1xf32>) outs(%27 : tensor<1x1x256x25x25xf32>) permutation = [0, 4, 1, 2, 3] 
    %28 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%transposed_22 : tensor<1x1x256x25x25xf32>) outs(%27 : tensor<1x1x256x25x25xf32>) {
    ^bb0(%in: f32, %out: f32):
      %72 = arith.divf %in, %cst_9 : f32
      linalg.yield %72 : f32
    } -> tensor<1x1x256x25x25xf32>
    %collapsed_23 = tensor.collapse_shape %28 [[0, 1], [2], [3], [4]] : tensor<1x1x256x25x25xf32> into tensor<1x256x25x25xf32>
    %29 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%collapsed_23 : tensor<1x256x25x25xf32>) outs(%20 : tensor<1x256x25x25xf32>) {
    ^bb0(%in: f32, %out: f32):
      %72 = arith.mulf %in, %cst_10 : f32
      linalg.yield %72 : f32
    } -> tensor<1x256x25x25xf32>
    %30 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%29 : tensor<1x256x25x25xf32>) outs(%20 : tensor<1x256x25x25xf32>) {
    ^bb0(%in: f32, %out: f32):
      %72 = arith.addf %in, %cst_11 : f32
      linalg.yield %72 : f32
    } -> tensor<1x256x25x25xf32>
    %31 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%30 : tensor<1x256x25x25xf32>) outs(%20 : tensor<1x256x25x25xf32>) {
    ^bb0(%in: f32, %out: f32):
      %72 = math.powf %in, %cst_12 : f32
      linalg.yield %72 : f32
    } -> tensor<1x256x25x25xf32>
    %32 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%21, %31 : tensor<1x256x25x25xf32>, tensor<1x256x25x25xf32>) outs(%20 : tensor<1x256x25x25xf32>) {
    ^bb0(%in: f32, %in_29: f32, %out: f32):
      %72 = arith.divf %in, %in_29 : f32
      linalg.yield %72 : f32
    } -> tensor<1x256x25x25xf32>
    %33 = tensor.empty() : tensor<1x256x12x12xf32>
    %34 = linalg.fill ins(%cst_0 : f32) outs(%33 : tensor<1x256x12x12xf32>) -> tensor<1x256x12x12xf32>
    %35 = linalg.pooling_nchw_max {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>} ins(%32, %17 : tensor<1x256x25x25xf32>, tensor<3x3xf32>) outs(%34 : tensor<1x256x12x12xf32>) -> tensor<1x256x12x12xf32>
    %padded_24 = tensor.pad %35 low[0, 0, 1, 1] high[0, 0, 1, 1] {
    ^bb0(%arg1: index, %arg2: index, %arg3: index, %arg4: index):
      tensor.yield %cst : f32
    } : tensor<1x256x12x12xf32> to tensor<1x256x14x14xf32>
    %36 = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%padded_24, %cst_3 : tensor<1x256x14x14xf32>, tensor<512x256x3x3xf32>) outs(%cst_14 : tensor<1x512x12x12xf32>) -> tensor<1x512x12x12xf32>
    %37 = tensor.empty() : tensor<1x512x12x12xf32>
    %38 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%36 : tensor<1x512x12x12xf32>) outs(%37 : tensor<1x512x12x12xf32>) {
    ^bb0(%in: f32, %out: f32):
      %72 = arith.cmpf ugt, %in, %cst : f32
      %73 = arith.select %72, %in, %cst : f32
      linalg.yield %73 : f32
    } -> tensor<1x512x12x12xf32>
    %padded_25 = tensor.pad %38 low[0, 0, 1, 1] high[0, 0, 1, 1] {
    ^bb0(%arg1: index, %arg2: index, %arg3: index, %arg4: index):
      tensor.yield %cst : f32
    } : tensor<1x512x12x12xf32> to tensor<1x512x14x14xf32>
    %39 = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%padded_25, %cst_4 : tensor<1x512x14x14xf32>, tensor<512x512x3x3xf32>) outs(%cst_14 : tensor<1x512x12x12xf32>) -> tensor<1x512x12x12xf32>
    %40 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%39 : tensor<1x512x12x12xf32>) outs(%37 : tensor<1x512x12x12xf32>) {
    ^bb0(%in: f32, %out: f32):
      %72 = arith.cmpf ugt, %in, %cst : f32
      %73 = arith.select %72, %in, %cst : f32
      linalg.yield %73 : f32
    } -> tensor<1x512x12x12xf32>
    %padded_26 = tensor.pad %40 low[0, 0, 1, 1] high[0, 0, 1, 1] {
    ^bb0(%arg1: index, %arg2: index, %arg3: index, %arg4: index):
      tensor.yield %cst : f32
    } : tensor<1x512x12x12xf32> to tensor<1x512x14x14xf32>
    %41 = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%padded_26, %cst_4 : tensor<1x512x14x14xf32>, tensor<512x512x3x3xf32>) outs(%cst_14 : tensor<1x512x12x12xf32>) -> tensor<1x512x12x12xf32>
    %42 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%41 : tensor<1x512x12x12xf32>) outs(%37 : tensor<1x512x12x12xf32>) {
    ^bb0(%in: f32, %out: f32):
      %72 = arith.cmpf ugt, %in, %cst : f32
      %73 = arith.select %72, %in, %cst : f32
      linalg.yield %73 : f32
    } -> tensor<1x512x12x12xf32>
    %43 = tensor.empty() : tensor<1x512x6x6xf32>
    %44 = linalg.fill ins(%cst_0 : f32) outs(%43 : tensor<1x512x6x6xf32>) -> tensor<1x512x6x6xf32>
    %45 = tensor.empty() : tensor<2x2xf32>
    %46 = linalg.pooling_nchw_max {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>} ins(%42, %45 : tensor<1x512x12x12xf32>, tensor<2x2xf32>) outs(%44 : tensor<1x512x6x6xf32>) -> tensor<1x512x6x6xf32>
    %collapsed_27 = tensor.collapse_shape %46 [[0], [1, 2, 3]] : tensor<1x512x6x6xf32> into tensor<1x18432xf32>
    %47 = tensor.empty() : tensor<1x4096xf32>
    %48 = linalg.fill ins(%cst : f32) outs(%47 : tensor<1x4096xf32>) -> tensor<1x4096xf32>
    %49 = linalg.matmul ins(%collapsed_27, %cst_15 : tensor<1x18432xf32>, tensor<18432x4096xf32>) outs(%48 : tensor<1x4096xf32>) -> tensor<1x4096xf32>
    %50 = linalg.generic {indexing_maps = [#map2, #map3, #map2], iterator_types = ["parallel", "parallel"]} ins(%49, %cst_5 : tensor<1x4096xf32>, tensor<4096xf32>) outs(%47 : tensor<1x4096xf32>) {
    ^bb0(%in: f32, %in_29: f32, %out: f32):
      %72 = arith.addf %in, %in_29 : f32
      linalg.yield %72 : f32
    } -> tensor<1x4096xf32>
    %51 = linalg.generic {indexing_maps = [#map2, #map2], iterator_types = ["parallel", "parallel"]} ins(%50 : tensor<1x4096xf32>) outs(%47 : tensor<1x4096xf32>) {
    ^bb0(%in: f32, %out: f32):
      %72 = arith.cmpf ugt, %in, %cst : f32
      %73 = arith.select %72, %in, %cst : f32
      linalg.yield %73 : f32
    } -> tensor<1x4096xf32>
    %52 = tensor.empty() : tensor<1x1024xf32>
    %53 = linalg.fill ins(%cst : f32) outs(%52 : tensor<1x1024xf32>) -> tensor<1x1024xf32>
    %54 = linalg.matmul ins(%51, %cst_16 : tensor<1x4096xf32>, tensor<4096x1024xf32>) outs(%53 : tensor<1x1024xf32>) -> tensor<1x1024xf32>
    %55 = linalg.generic {indexing_maps = [#map2, #map3, #map2], iterator_types = ["parallel", "parallel"]} ins(%54, %cst_6 : tensor<1x1024xf32>, tensor<1024xf32>) outs(%52 : tensor<1x1024xf32>) {
    ^bb0(%in: f32, %in_29: f32, %out: f32):
      %72 = arith.addf %in, %in_29 : f32
      linalg.yield %72 : f32
    } -> tensor<1x1024xf32>
    %56 = linalg.generic {indexing_maps = [#map2, #map2], iterator_types = ["parallel", "parallel"]} ins(%55 : tensor<1x1024xf32>) outs(%52 : tensor<1x1024xf32>) {
    ^bb0(%in: f32, %out: f32):
      %72 = arith.cmpf ugt, %in, %cst : f32
      %73 = arith.select %72, %in, %cst : f32
      linalg.yield %73 : f32
    } -> tensor<1x1024xf32>
    %57 = tensor.empty() : tensor<1x1000xf32>
    %58 = linalg.fill ins(%cst : f32) outs(%57 : tensor<1x1000xf32>) -> tensor<1x1000xf32>
    %59 = linalg.matmul ins(%56, %cst_17 : tensor<1x1024xf32>, tensor<1024x1000xf32>) outs(%58 : tensor<1x1000xf32>) -> tensor<1x1000xf32>
    %60 = linalg.generic {indexing_maps = [#map2, #map3, #map2], iterator_types = ["parallel", "parallel"]} ins(%59, %cst_7 : tensor<1x1000xf32>, tensor<1000xf32>) outs(%57 : tensor<1x1000xf32>) {
    ^bb0(%in: f32, %in_29: f32, %out: f32):
      %72 = arith.addf %in, %in_29 : f32
      linalg.yield %72 : f32
    } -> tensor<1x1000xf32>
    %61 = tensor.empty() : tensor<1xi64>
    %62 = linalg.fill ins(%c0_i64 : i64) outs(%61 : tensor<1xi64>) -> tensor<1xi64>
    %63 = tensor.empty() : tensor<1xf32>
    %64 = linalg.fill ins(%cst_0 : f32) outs(%63 : tensor<1xf32>) -> tensor<1xf32>
    %65:2 = linalg.generic {indexing_maps = [#map2, #map4, #map4], iterator_types = ["parallel", "reduction"]} ins(%60 : tensor<1x1000xf32>) outs(%64, %62 : tensor<1xf32>, tensor<1xi64>) {
    ^bb0(%in: f32, %out: f32, %out_29: i64):
      %72 = linalg.index 1 : index
      %73 = arith.index_cast %72 : index to i64
      %74 = arith.maximumf %in, %out : f32
      %75 = arith.cmpf ogt, %in, %out : f32
      %76 = arith.select %75, %73, %out_29 : i64
      linalg.yield %74, %76 : f32, i64
    } -> (tensor<1xf32>, tensor<1xi64>)
    %expanded_28 = tensor.expand_shape %65#0 [[0, 1]] output_shape [1, 1] : tensor<1xf32> into tensor<1x1xf32>
    %66 = linalg.generic {indexing_maps = [#map2, #map5, #map2], iterator_types = ["parallel", "parallel"]} ins(%60, %expanded_28 : tensor<1x1000xf32>, tensor<1x1xf32>) outs(%57 : tensor<1x1000xf32>) {
    ^bb0(%in: f32, %in_29: f32, %out: f32):
      %72 = arith.subf %in, %in_29 : f32
      linalg.yield %72 : f32
    } -> tensor<1x1000xf32>
    %67 = linalg.generic {indexing_maps = [#map2, #map2], iterator_types = ["parallel", "parallel"]} ins(%66 : tensor<1x1000xf32>) outs(%57 : tensor<1x1000xf32>) {
    ^bb0(%in: f32, %out: f32):
      %72 = math.exp %in : f32
      linalg.yield %72 : f32
    } -> tensor<1x1000xf32>
    %68 = tensor.empty() : tensor<1x1xf32>
    %69 = linalg.fill ins(%cst : f32) outs(%68 : tensor<1x1xf32>) -> tensor<1x1xf32>
    %70 = linalg.generic {indexing_maps = [#map2, #map5], iterator_types = ["parallel", "reduction"]} ins(%67 : tensor<1x1000xf32>) outs(%69 : tensor<1x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %72 = arith.addf %in, %out : f32
      linalg.yield %72 : f32
    } -> tensor<1x1xf32>
    %71 = linalg.generic {indexing_maps = [#map2, #map5, #map2], iterator_types = ["parallel", "parallel"]} ins(%67, %70 : tensor<1x1000xf32>, tensor<1x1xf32>) outs(%57 : tensor<1x1000xf32>) {
    ^bb0(%in: f32, %in_29: f32, %out: f32):
      %72 = arith.divf %in, %in_29 : f32
      linalg.yield %72 : f32
    } -> tensor<1x1000xf32>
    return %71 : tensor<1x1000xf32>
  }
}
