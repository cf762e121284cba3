module {
  func.func @test_einsum_transpose(%arg0: tensor<3x4xf64>) -> tensor<4x3xf64> {
    %0 = tensor.empty() : tensor<4x3xf64>
    %transposed = linalg.transpose ins(%arg0 : tensor<3x4xf64>) outs(%0 : tensor<4x3xf64>) permutation = [1, 0] 
    return %transposed : tensor<4x3xf64>
  }
}
