#map = affine_map<(d0, d1) -> (d0)>
#map1 = affine_map<(d0, d1) -> (d0, d1)>
module {
  func.func @test_compress_bfloat16(%arg0: tensor<3x2xbf16>) -> tensor<2x2xbf16> {
    %cst = arith.constant dense<[1, 2]> : tensor<2xi64>
    %0 = tensor.empty() : tensor<2x2xbf16>
    %1 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "parallel"]} ins(%cst : tensor<2xi64>) outs(%0 : tensor<2x2xbf16>) {
    ^bb0(%in: i64, %out: bf16):
      %2 = arith.index_cast %in : i64 to index
      %3 = linalg.index 1 : index
      %extracted = tensor.extract %arg0[%2, %3] : tensor<3x2xbf16>
      linalg.yield %extracted : bf16
    } -> tensor<2x2xbf16>
    return %1 : tensor<2x2xbf16>
  }
}
