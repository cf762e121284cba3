module {
  func.func @test_einsum_transpose_bfloat16(%arg0: tensor<3x4xbf16>) -> tensor<4x3xbf16> {
    %0 = tensor.empty() : tensor<4x3xbf16>
    %transposed = linalg.transpose ins(%arg0 : tensor<3x4xbf16>) outs(%0 : tensor<4x3xbf16>) permutation = [1, 0] 
    return %transposed : tensor<4x3xbf16>
  }
}
