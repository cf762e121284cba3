module {
  func.func @test_maxpool_2d_same_lower(%arg0: tensor<1x3x32x32xf32>) -> tensor<1x3x32x32xf32> {
    %cst = arith.constant 0xFF800000 : f32
    %cst_0 = arith.constant -1.7976931348623157E+308 : f64
    %0 = arith.truncf %cst_0 : f64 to f32
    %padded = tensor.pad %arg0 low[0, 0, 1, 1] high[0, 0, 0, 0] {
    ^bb0(%arg1: index, %arg2: index, %arg3: index, %arg4: index):
      tensor.yield %0 : f32
    } : tensor<1x3x32x32xf32> to tensor<1x3x33x33xf32>
    %1 = tensor.empty() : tensor<1x3x32x32xf32>
    %2 = linalg.fill ins(%cst : f32) outs(%1 : tensor<1x3x32x32xf32>) -> tensor<1x3x32x32xf32>
    %3 = tensor.empty() : tensor<2x2xf32>
    %4 = linalg.pooling_nchw_max {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%padded, %3 : tensor<1x3x33x33xf32>, tensor<2x2xf32>) outs(%2 : tensor<1x3x32x32xf32>) -> tensor<1x3x32x32xf32>
    return %4 : tensor<1x3x32x32xf32>
  }
}
