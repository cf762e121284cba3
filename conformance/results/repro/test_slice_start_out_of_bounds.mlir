module {
  func.func @test_slice_start_out_of_bounds(%arg0: tensor<20x10x5xf32>) -> tensor<20x0x5xf32> {
    %c10 = arith.constant 10 : index
    %extracted_slice = tensor.extract_slice %arg0[0, %c10, 0] [20, 0, 5] [1, 1, 1] : tensor<20x10x5xf32> to tensor<20x0x5xf32>
    return %extracted_slice : tensor<20x0x5xf32>
  }
}
