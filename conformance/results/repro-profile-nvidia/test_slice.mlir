module {
  func.func @test_slice(%arg0: tensor<20x10x5xf32>) -> tensor<3x10x5xf32> {
    %extracted_slice = tensor.extract_slice %arg0[0, 0, 0] [3, 10, 5] [1, 1, 1] : tensor<20x10x5xf32> to tensor<3x10x5xf32>
    return %extracted_slice : tensor<3x10x5xf32>
  }
}
