module {
  func.func @test_constant_pad(%arg0: tensor<1x3x4x5xf32>, %arg1: tensor<f32>) -> tensor<1x3x7x12xf32> {
    %extracted = tensor.extract %arg1[] : tensor<f32>
    %padded = tensor.pad %arg0 low[0, 0, 1, 3] high[0, 0, 2, 4] {
    ^bb0(%arg2: index, %arg3: index, %arg4: index, %arg5: index):
      tensor.yield %extracted : f32
    } : tensor<1x3x4x5xf32> to tensor<1x3x7x12xf32>
    return %padded : tensor<1x3x7x12xf32>
  }
}
