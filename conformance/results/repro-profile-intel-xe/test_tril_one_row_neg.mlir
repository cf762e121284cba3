#map = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
module {
  func.func @test_tril_one_row_neg(%arg0: tensor<3x1x5xi64>) -> tensor<3x1x5xi64> {
    %c0_i64 = arith.constant 0 : i64
    %0 = tensor.empty() : tensor<3x1x5xi64>
    %1 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%arg0 : tensor<3x1x5xi64>) outs(%0 : tensor<3x1x5xi64>) {
    ^bb0(%in: i64, %out: i64):
      %2 = linalg.index 2 : index
      %3 = arith.index_cast %2 : index to i64
      %4 = arith.cmpi sle, %3, %c0_i64 : i64
      %5 = arith.select %4, %in, %c0_i64 : i64
      linalg.yield %5 : i64
    } -> tensor<3x1x5xi64>
    return %1 : tensor<3x1x5xi64>
  }
}
