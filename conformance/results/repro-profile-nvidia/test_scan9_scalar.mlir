#map = affine_map<() -> ()>
module {
  func.func @test_scan9_scalar(%arg0: tensor<f32>, %arg1: tensor<5xf32>) -> (tensor<f32>, tensor<5xf32>) {
    %c0_i64 = arith.constant 0 : i64
    %c5_i64 = arith.constant 5 : i64
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %cst = arith.constant dense<0.000000e+00> : tensor<5xf32>
    %c5 = arith.constant 5 : index
    %0:2 = scf.for %arg2 = %c0 to %c5 step %c1 iter_args(%arg3 = %arg0, %arg4 = %cst) -> (tensor<f32>, tensor<5xf32>) {
      %1 = arith.index_cast %arg2 : index to i64
      %2 = arith.cmpi slt, %1, %c0_i64 : i64
      %3 = arith.extui %2 : i1 to i64
      %4 = arith.muli %3, %c5_i64 : i64
      %5 = arith.addi %1, %4 : i64
      %6 = arith.addi %5, %c5_i64 : i64
      %7 = arith.cmpi sge, %5, %c0_i64 : i64
      %8 = arith.select %7, %5, %6 : i64
      %9 = arith.maxsi %8, %c0_i64 : i64
      %10 = arith.minsi %9, %c5_i64 : i64
      %11 = arith.index_cast %10 : i64 to index
      %extracted_slice = tensor.extract_slice %arg1[%11] [1] [1] : tensor<5xf32> to tensor<1xf32>
      %collapsed = tensor.collapse_shape %extracted_slice [] : tensor<1xf32> into tensor<f32>
      %12 = tensor.empty() : tensor<f32>
      %13 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = []} ins(%arg3, %collapsed : tensor<f32>, tensor<f32>) outs(%12 : tensor<f32>) {
      ^bb0(%in: f32, %in_0: f32, %out: f32):
        %20 = arith.addf %in, %in_0 : f32
        linalg.yield %20 : f32
      } -> tensor<f32>
      %expanded = tensor.expand_shape %13 [] output_shape [1] : tensor<f32> into tensor<1xf32>
      %14 = arith.addi %1, %c5_i64 : i64
      %15 = arith.cmpi sge, %1, %c0_i64 : i64
      %16 = arith.select %15, %1, %14 : i64
      %17 = arith.maxsi %16, %c0_i64 : i64
      %18 = arith.minsi %17, %c5_i64 : i64
      %19 = arith.index_cast %18 : i64 to index
      %inserted_slice = tensor.insert_slice %expanded into %arg4[%19] [1] [1] : tensor<1xf32> into tensor<5xf32>
      scf.yield %13, %inserted_slice : tensor<f32>, tensor<5xf32>
    }
    return %0#0, %0#1 : tensor<f32>, tensor<5xf32>
  }
}
