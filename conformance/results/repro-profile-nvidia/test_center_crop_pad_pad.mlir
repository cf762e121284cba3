module {
  func.func @test_center_crop_pad_pad(%arg0: tensor<10x7x3xf32>) -> tensor<20x10x3xf32> {
    %cst = arith.constant dense<0.000000e+00> : tensor<20x10x3xf32>
    %cst_0 = arith.constant dense<0.000000e+00> : tensor<20x7x3xf32>
    %inserted_slice = tensor.insert_slice %arg0 into %cst_0[5, 0, 0] [10, 7, 3] [1, 1, 1] : tensor<10x7x3xf32> into tensor<20x7x3xf32>
    %inserted_slice_1 = tensor.insert_slice %inserted_slice into %cst[0, 1, 0] [20, 7, 3] [1, 1, 1] : tensor<20x7x3xf32> into tensor<20x10x3xf32>
    return %inserted_slice_1 : tensor<20x10x3xf32>
  }
}
