// Tree sum of 64 values per workgroup in workgroup memory with barriers, times a scalar argument.
// The i32 argument sits between the buffers: it becomes the trailing `int p0`.
gpu.module @wg {
  gpu.func @workgroup_sum(%x: memref<1024xf32>, %scale: i32, %out: memref<16xf32>) workgroup(%lm : memref<64xf32, #gpu.address_space<workgroup>>) private(%pv : memref<2xf32, #gpu.address_space<private>>) kernel attributes {known_block_size = array<i32: 64, 1, 1>, known_grid_size = array<i32: 16, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c6 = arith.constant 6 : index
    %c32 = arith.constant 32 : index
    %tid = gpu.thread_id x
    %bid = gpu.block_id x
    %bdim = gpu.block_dim x
    %base = arith.muli %bid, %bdim : index
    %g = arith.addi %base, %tid : index
    %v = memref.load %x[%g] : memref<1024xf32>
    memref.store %v, %pv[%c1] : memref<2xf32, #gpu.address_space<private>>
    %v2 = memref.load %pv[%c1] : memref<2xf32, #gpu.address_space<private>>
    memref.store %v2, %lm[%tid] : memref<64xf32, #gpu.address_space<workgroup>>
    gpu.barrier
    scf.for %k = %c0 to %c6 step %c1 {
      %s = arith.shrui %c32, %k : index
      %lt = arith.cmpi ult, %tid, %s : index
      scf.if %lt {
        %j = arith.addi %tid, %s : index
        %p = memref.load %lm[%tid] : memref<64xf32, #gpu.address_space<workgroup>>
        %q = memref.load %lm[%j] : memref<64xf32, #gpu.address_space<workgroup>>
        %r = arith.addf %p, %q : f32
        memref.store %r, %lm[%tid] : memref<64xf32, #gpu.address_space<workgroup>>
      }
      gpu.barrier
    }
    %is0 = arith.cmpi eq, %tid, %c0 : index
    scf.if %is0 {
      %sum = memref.load %lm[%c0] : memref<64xf32, #gpu.address_space<workgroup>>
      %sc = arith.sitofp %scale : i32 to f32
      %res = arith.mulf %sum, %sc : f32
      memref.store %res, %out[%bid] : memref<16xf32>
    }
    gpu.return
  }
}
