// scf.for with iter_args (incl. a swap and an scf.if yielding a value), scf.while, scf.if without results.
gpu.module @loops {
  gpu.func @loops(%x: memref<64x16xf32>, %n: memref<64xi32>, %out: memref<4x64xf32>, %cnt: memref<3x64xi32>) kernel attributes {known_block_size = array<i32: 32, 1, 1>, known_grid_size = array<i32: 2, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %c16 = arith.constant 16 : index
    %zero = arith.constant 0.0 : f32
    %one = arith.constant 1.0 : f32
    %ninf = arith.constant 0xFF800000 : f32
    %i0 = arith.constant 0 : i32
    %i1 = arith.constant 1 : i32
    %r = gpu.global_id x
    %res:5 = scf.for %j = %c0 to %c16 step %c1 iter_args(%sum = %zero, %mx = %ninf, %pos = %i0, %p = %zero, %q = %one) -> (f32, f32, i32, f32, f32) {
      %v = memref.load %x[%r, %j] : memref<64x16xf32>
      %s2 = arith.addf %sum, %v : f32
      %m2 = arith.maximumf %mx, %v : f32
      %gt = arith.cmpf ogt, %v, %zero : f32
      %pos2 = scf.if %gt -> (i32) {
        %inc = arith.addi %pos, %i1 : i32
        scf.yield %inc : i32
      } else {
        scf.yield %pos : i32
      }
      scf.yield %s2, %m2, %pos2, %q, %p : f32, f32, i32, f32, f32
    }
    memref.store %res#0, %out[%c0, %r] : memref<4x64xf32>
    memref.store %res#1, %out[%c1, %r] : memref<4x64xf32>
    memref.store %res#3, %out[%c2, %r] : memref<4x64xf32>
    memref.store %res#4, %out[%c3, %r] : memref<4x64xf32>
    memref.store %res#2, %cnt[%c0, %r] : memref<3x64xi32>
    %nv = memref.load %n[%r] : memref<64xi32>
    %an = math.absi %nv : i32
    %w:2 = scf.while (%v = %an, %c = %i0) : (i32, i32) -> (i32, i32) {
      %nz = arith.cmpi ne, %v, %i0 : i32
      scf.condition(%nz) %v, %c : i32, i32
    } do {
    ^bb0(%v2: i32, %k: i32):
      %sh = arith.shrui %v2, %i1 : i32
      %k2 = arith.addi %k, %i1 : i32
      scf.yield %sh, %k2 : i32, i32
    }
    memref.store %w#1, %cnt[%c1, %r] : memref<3x64xi32>
    %odd = arith.andi %nv, %i1 : i32
    %isodd = arith.cmpi ne, %odd, %i0 : i32
    scf.if %isodd {
      memref.store %nv, %cnt[%c2, %r] : memref<3x64xi32>
    }
    gpu.return
  }
}
