// Golden only (f16): wider vectors, unsigned and i1 reductions, vector casts/masks, lanes past 9, an i32
// scf.for, a scalar-condition select of vectors.
gpu.module @x {
  gpu.func @vector_misc(%a: memref<64xf32>, %b: memref<64xi8>, %c: memref<64xi16>, %h: memref<64xf16>) kernel attributes {known_block_size = array<i32: 8, 1, 1>} {
    %i = gpu.thread_id x
    %c8 = arith.constant 8 : index
    %o = arith.muli %i, %c8 : index
    %v8 = vector.load %a[%o] : memref<64xf32>, vector<8xf32>
    %r8 = vector.reduction <minimumf>, %v8 : vector<8xf32> into f32
    %r8b = vector.reduction <minnumf>, %v8 : vector<8xf32> into f32
    %bits = arith.bitcast %v8 : vector<8xf32> to vector<8xi32>
    %u = arith.uitofp %bits : vector<8xi32> to vector<8xf32>
    %fu = arith.fptoui %u : vector<8xf32> to vector<8xi32>
    %ru = vector.reduction <minui>, %fu : vector<8xi32> into i32
    %cd = arith.ceildivui %fu, %bits : vector<8xi32>
    %sh = arith.shli %cd, %fu : vector<8xi32>
    %ad = arith.addi %sh, %cd : vector<8xi32>
    %tr = arith.trunci %ad : vector<8xi32> to vector<8xi1>
    %ex = arith.extsi %tr : vector<8xi1> to vector<8xi64>
    %tr8 = arith.trunci %ad : vector<8xi32> to vector<8xi8>
    %e16 = arith.extui %tr8 : vector<8xi8> to vector<8xi16>
    %sel = arith.select %tr, %e16, %e16 : vector<8xi1>, vector<8xi16>
    %v16 = vector.load %b[%c8] : memref<64xi8>, vector<16xi8>
    %l15 = vector.extract %v16[15] : i8 from vector<16xi8>
    %mx = vector.reduction <maxui>, %v16 : vector<16xi8> into i8
    %sum = arith.addi %l15, %mx : i8
    %xv = vector.reduction <xor>, %ex : vector<8xi64> into i64
    %t = arith.trunci %xv : i64 to i32
    %w = arith.addi %t, %ru : i32
    %hv = vector.load %h[%o] : memref<64xf16>, vector<4xf16>
    %hn = math.isnan %hv : vector<4xf16>
    %hany = vector.reduction <or>, %hn : vector<4xi1> into i1
    %fl = vector.from_elements %r8, %r8b, %r8, %r8b : vector<4xf32>
    %sh2 = vector.shuffle %fl, %fl [7, 0, 1] : vector<4xf32>, vector<4xf32>
    %e2 = vector.extract %sh2[0] : f32 from vector<3xf32>
    %sv = arith.select %hany, %fl, %fl : vector<4xf32>
    %sv2 = vector.reduction <mul>, %sv, %e2 : vector<4xf32> into f32
    %ci = arith.constant 3 : i32
    %ix = arith.index_castui %ci : i32 to index
    %res:2 = scf.for %k = %ci to %w step %ci iter_args(%acc = %e2, %n = %sum) -> (f32, i8) : i32 {
      %kf = arith.sitofp %k : i32 to f32
      %a2 = arith.addf %acc, %kf : f32
      %n2 = arith.muli %n, %n : i8
      scf.yield %a2, %n2 : f32, i8
    }
    %x = scf.if %hany -> (f32) {
      scf.yield %res#0 : f32
    } else {
      %z = arith.constant 0x7FC00000 : f32
      scf.yield %z : f32
    }
    memref.store %x, %a[%ix] : memref<64xf32>
    memref.store %sv2, %a[%i] : memref<64xf32>
    memref.store %res#1, %b[%i] : memref<64xi8>
    vector.store %sel, %c[%i] : memref<64xi16>, vector<8xi16>
    gpu.return
  }
}
