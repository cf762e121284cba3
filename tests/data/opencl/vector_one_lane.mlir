// One-lane vectors (vector<1xf32>, vector<1x4xf32>) are C scalars / plain C vectors; shape_cast and unit-dim
// extracts print nothing.
gpu.module @x {
  gpu.func @vector_one_lane(%a: memref<8x4xf32>, %m: memref<8xi1>) kernel attributes {known_block_size = array<i32: 8, 1, 1>} {
    %i = gpu.thread_id x
    %c0 = arith.constant 0 : index
    %v = vector.load %a[%i, %c0] : memref<8x4xf32>, vector<1xf32>
    %w = vector.load %a[%i, %c0] : memref<8x4xf32>, vector<4xf32>
    %w2 = vector.shape_cast %w : vector<4xf32> to vector<1x4xf32>
    %w3 = vector.extract %w2[0] : vector<4xf32> from vector<1x4xf32>
    %one = arith.constant dense<1.0> : vector<1xf32>
    %s = arith.addf %v, %one : vector<1xf32>
    %e = vector.extract %s[0] : f32 from vector<1xf32>
    %b = vector.broadcast %e : f32 to vector<4xf32>
    %b1 = vector.broadcast %s : vector<1xf32> to vector<4xf32>
    %sum = arith.addf %b, %b1 : vector<4xf32>
    %sum2 = arith.addf %sum, %w3 : vector<4xf32>
    %ins = vector.insert %e, %w2[0, 3] : f32 into vector<1x4xf32>
    %r = vector.reduction <add>, %s : vector<1xf32> into f32
    %c = arith.cmpf olt, %s, %one : vector<1xf32>
    %ci = vector.extract %c[0] : i1 from vector<1xi1>
    %sel = arith.select %c, %s, %one : vector<1xi1>, vector<1xf32>
    vector.store %sel, %a[%i, %c0] : memref<8x4xf32>, vector<1xf32>
    vector.store %sum2, %a[%i, %c0] : memref<8x4xf32>, vector<4xf32>
    %ins2 = vector.shape_cast %ins : vector<1x4xf32> to vector<4xf32>
    vector.store %ins2, %a[%i, %c0] : memref<8x4xf32>, vector<4xf32>
    memref.store %r, %a[%i, %c0] : memref<8x4xf32>
    memref.store %ci, %m[%i] : memref<8xi1>
    gpu.return
  }
}
