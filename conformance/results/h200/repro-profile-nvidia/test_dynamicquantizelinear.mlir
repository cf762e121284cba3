#map = affine_map<(d0) -> (d0)>
#map1 = affine_map<(d0) -> ()>
#map2 = affine_map<() -> ()>
module {
  func.func @test_dynamicquantizelinear(%arg0: tensor<6xf32>) -> (tensor<6xi8>, tensor<f32>, tensor<i8>) {
    %cst = arith.constant 0xFF800000 : f32
    %cst_0 = arith.constant 0x7F800000 : f32
    %cst_1 = arith.constant 0.000000e+00 : f32
    %cst_2 = arith.constant 2.550000e+02 : f32
    %cst_3 = arith.constant dense<2.550000e+02> : tensor<f32>
    %cst_4 = arith.constant dense<0.000000e+00> : tensor<f32>
    %0 = tensor.empty() : tensor<f32>
    %1 = linalg.fill ins(%cst : f32) outs(%0 : tensor<f32>) -> tensor<f32>
    %2 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["reduction"]} ins(%arg0 : tensor<6xf32>) outs(%1 : tensor<f32>) {
    ^bb0(%in: f32, %out: f32):
      %18 = arith.maximumf %in, %out : f32
      linalg.yield %18 : f32
    } -> tensor<f32>
    %3 = linalg.fill ins(%cst_0 : f32) outs(%0 : tensor<f32>) -> tensor<f32>
    %4 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["reduction"]} ins(%arg0 : tensor<6xf32>) outs(%3 : tensor<f32>) {
    ^bb0(%in: f32, %out: f32):
      %18 = arith.minimumf %in, %out : f32
      linalg.yield %18 : f32
    } -> tensor<f32>
    %5 = linalg.generic {indexing_maps = [#map2, #map2, #map2], iterator_types = []} ins(%2, %cst_4 : tensor<f32>, tensor<f32>) outs(%0 : tensor<f32>) {
    ^bb0(%in: f32, %in_6: f32, %out: f32):
      %18 = arith.cmpf ogt, %in, %in_6 : f32
      %19 = arith.select %18, %in, %in_6 : f32
      linalg.yield %19 : f32
    } -> tensor<f32>
    %6 = linalg.generic {indexing_maps = [#map2, #map2, #map2], iterator_types = []} ins(%4, %cst_4 : tensor<f32>, tensor<f32>) outs(%0 : tensor<f32>) {
    ^bb0(%in: f32, %in_6: f32, %out: f32):
      %18 = arith.cmpf olt, %in, %in_6 : f32
      %19 = arith.select %18, %in, %in_6 : f32
      linalg.yield %19 : f32
    } -> tensor<f32>
    %7 = linalg.generic {indexing_maps = [#map2, #map2, #map2], iterator_types = []} ins(%5, %6 : tensor<f32>, tensor<f32>) outs(%0 : tensor<f32>) {
    ^bb0(%in: f32, %in_6: f32, %out: f32):
      %18 = arith.subf %in, %in_6 : f32
      linalg.yield %18 : f32
    } -> tensor<f32>
    %8 = linalg.generic {indexing_maps = [#map2, #map2, #map2], iterator_types = []} ins(%7, %cst_3 : tensor<f32>, tensor<f32>) outs(%0 : tensor<f32>) {
    ^bb0(%in: f32, %in_6: f32, %out: f32):
      %18 = arith.divf %in, %in_6 : f32
      linalg.yield %18 : f32
    } -> tensor<f32>
    %9 = linalg.generic {indexing_maps = [#map2, #map2, #map2], iterator_types = []} ins(%4, %8 : tensor<f32>, tensor<f32>) outs(%0 : tensor<f32>) {
    ^bb0(%in: f32, %in_6: f32, %out: f32):
      %18 = arith.divf %in, %in_6 : f32
      linalg.yield %18 : f32
    } -> tensor<f32>
    %10 = linalg.generic {indexing_maps = [#map2, #map2, #map2], iterator_types = []} ins(%cst_4, %9 : tensor<f32>, tensor<f32>) outs(%0 : tensor<f32>) {
    ^bb0(%in: f32, %in_6: f32, %out: f32):
      %18 = arith.subf %in, %in_6 : f32
      linalg.yield %18 : f32
    } -> tensor<f32>
    %11 = linalg.generic {indexing_maps = [#map2, #map2], iterator_types = []} ins(%10 : tensor<f32>) outs(%0 : tensor<f32>) {
    ^bb0(%in: f32, %out: f32):
      %18 = arith.cmpf ult, %in, %cst_1 : f32
      %19 = arith.select %18, %cst_1, %in : f32
      %20 = arith.cmpf ugt, %19, %cst_2 : f32
      %21 = arith.select %20, %cst_2, %19 : f32
      linalg.yield %21 : f32
    } -> tensor<f32>
    %12 = linalg.generic {indexing_maps = [#map2, #map2], iterator_types = []} ins(%11 : tensor<f32>) outs(%0 : tensor<f32>) {
    ^bb0(%in: f32, %out: f32):
      %18 = math.roundeven %in : f32
      linalg.yield %18 : f32
    } -> tensor<f32>
    %13 = tensor.empty() : tensor<i8>
    %14 = linalg.generic {indexing_maps = [#map2, #map2], iterator_types = []} ins(%12 : tensor<f32>) outs(%13 : tensor<i8>) {
    ^bb0(%in: f32, %out: i8):
      %18 = arith.fptosi %in : f32 to i8
      linalg.yield %18 : i8
    } -> tensor<i8>
    %extracted = tensor.extract %14[] : tensor<i8>
    %15 = arith.extui %extracted : i8 to i64
    %extracted_5 = tensor.extract %8[] : tensor<f32>
    %16 = tensor.empty() : tensor<6xi8>
    %17 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%arg0 : tensor<6xf32>) outs(%16 : tensor<6xi8>) {
    ^bb0(%in: f32, %out: i8):
      %18 = arith.sitofp %15 : i64 to f32
      %19 = arith.divf %in, %extracted_5 : f32
      %20 = math.roundeven %19 : f32
      %21 = arith.addf %20, %18 : f32
      %22 = arith.maximumf %21, %cst_1 : f32
      %23 = arith.minimumf %22, %cst_2 : f32
      %24 = arith.fptoui %23 : f32 to i8
      linalg.yield %24 : i8
    } -> tensor<6xi8>
    return %17, %8, %14 : tensor<6xi8>, tensor<f32>, tensor<i8>
  }
}
