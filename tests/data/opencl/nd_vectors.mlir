// 2-D vectors as rows of C vectors: a vector<2x4xf32> iter_arg, in-bounds transfers (contiguous rows and a
// strided vector<4x1xf32> column), broadcast, extract/insert of rows and elements, per-row elementwise ops,
// shape_cast and to_elements.
gpu.module @nd {
  gpu.func @nd_vectors(%x: memref<16x8xf32>, %out: memref<16x8xf32>, %outs: memref<16x2xf32>) kernel attributes {known_block_size = array<i32: 8, 1, 1>, known_grid_size = array<i32: 1, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c4 = arith.constant 4 : index
    %c8 = arith.constant 8 : index
    %pad = ub.poison : f32
    %t = gpu.thread_id x
    %r = arith.muli %t, %c2 : index
    %zero = arith.constant dense<0.0> : vector<2x4xf32>
    %acc = scf.for %j = %c0 to %c8 step %c4 iter_args(%a = %zero) -> (vector<2x4xf32>) {
      %blk = vector.transfer_read %x[%r, %j], %pad {in_bounds = [true, true]} : memref<16x8xf32>, vector<2x4xf32>
      %s = arith.addf %a, %blk : vector<2x4xf32>
      scf.yield %s : vector<2x4xf32>
    }
    %two = arith.constant 2.0 : f32
    %b2 = vector.broadcast %two : f32 to vector<2x4xf32>
    %m = arith.mulf %acc, %b2 : vector<2x4xf32>
    %row1 = vector.extract %m[1] : vector<4xf32> from vector<2x4xf32>
    %e = vector.extract %m[0, 3] : f32 from vector<2x4xf32>
    %rowb = vector.broadcast %row1 : vector<4xf32> to vector<2x4xf32>
    %ins = vector.insert %e, %rowb[1, 0] : f32 into vector<2x4xf32>
    %gt = arith.cmpf ogt, %m, %ins : vector<2x4xf32>
    %sel = arith.select %gt, %m, %ins : vector<2x4xi1>, vector<2x4xf32>
    vector.transfer_write %sel, %out[%r, %c0] {in_bounds = [true, true]} : vector<2x4xf32>, memref<16x8xf32>
    %flat = vector.shape_cast %sel : vector<2x4xf32> to vector<8xf32>
    %sum = vector.reduction <add>, %flat : vector<8xf32> into f32
    %col = vector.transfer_read %x[%c0, %t], %pad {in_bounds = [true, true]} : memref<16x8xf32>, vector<4x1xf32>
    %colf = vector.shape_cast %col : vector<4x1xf32> to vector<4xf32>
    %csum = vector.reduction <add>, %colf : vector<4xf32> into f32
    memref.store %sum, %outs[%r, %c0] : memref<16x2xf32>
    memref.store %csum, %outs[%r, %c1] : memref<16x2xf32>
    %els:8 = vector.to_elements %sel : vector<2x4xf32>
    %p = arith.mulf %els#0, %els#7 : f32
    %r1 = arith.addi %r, %c1 : index
    memref.store %p, %outs[%r1, %c0] : memref<16x2xf32>
    %lt = arith.cmpi ult, %t, %c4 : index
    scf.if %lt {
      %three = arith.constant dense<3.0> : vector<4x1xf32>
      %col3 = arith.mulf %col, %three : vector<4x1xf32>
      %ct = arith.addi %t, %c4 : index
      vector.transfer_write %col3, %out[%c0, %ct] {in_bounds = [true, true]} : vector<4x1xf32>, memref<16x8xf32>
    }
    gpu.return
  }
}
