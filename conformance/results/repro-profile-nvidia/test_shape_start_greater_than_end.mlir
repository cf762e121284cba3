module {
  func.func @test_shape_start_greater_than_end(%arg0: tensor<3x4x5xf32>) -> tensor<0xi64> {
    %cst = arith.constant dense<[3, 4, 5]> : tensor<3xi64>
    %extracted_slice = tensor.extract_slice %cst[2] [0] [1] : tensor<3xi64> to tensor<0xi64>
    return %extracted_slice : tensor<0xi64>
  }
}
