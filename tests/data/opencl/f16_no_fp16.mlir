// f16 on a device without cl_khr_fp16 (emitted with fp16=False): vload_half/vstore_half, math in float,
// every inexact f16 result rounded to f16.
gpu.module @h {
  gpu.func @f16_no_fp16(%x: memref<64xf16>, %y: memref<64xf16>, %out: memref<6x64xf16>, %v: memref<16x4xf16>) kernel attributes {known_block_size = array<i32: 16, 1, 1>, known_grid_size = array<i32: 4, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %c4 = arith.constant 4 : index
    %c5 = arith.constant 5 : index
    %c16 = arith.constant 16 : index
    %k = arith.constant 1001 : i32
    %tenth = arith.constant 0.1 : f16
    %i = gpu.global_id x
    %a = memref.load %x[%i] : memref<64xf16>
    %b = memref.load %y[%i] : memref<64xf16>
    %r0 = arith.mulf %a, %b : f16
    %r1 = arith.addf %r0, %a : f16
    %r2 = math.exp %a : f16
    %af = arith.extf %a : f16 to f32
    %bf = arith.extf %b : f16 to f32
    %s = arith.addf %af, %bf : f32
    %r3 = arith.truncf %s : f32 to f16
    %ii = arith.index_cast %i : index to i32
    %ik = arith.muli %ii, %k : i32
    %r4 = arith.sitofp %ik : i32 to f16
    %r5 = arith.minimumf %r1, %tenth : f16
    memref.store %r0, %out[%c0, %i] : memref<6x64xf16>
    memref.store %r1, %out[%c1, %i] : memref<6x64xf16>
    memref.store %r2, %out[%c2, %i] : memref<6x64xf16>
    memref.store %r3, %out[%c3, %i] : memref<6x64xf16>
    memref.store %r4, %out[%c4, %i] : memref<6x64xf16>
    memref.store %r5, %out[%c5, %i] : memref<6x64xf16>
    %lt = arith.cmpi ult, %i, %c16 : index
    scf.if %lt {
      %vv = vector.load %v[%i, %c0] : memref<16x4xf16>, vector<4xf16>
      %vc = arith.constant dense<1.5> : vector<4xf16>
      %vm = arith.mulf %vv, %vc : vector<4xf16>
      %vs = arith.maximumf %vm, %vv : vector<4xf16>
      vector.store %vs, %v[%i, %c0] : memref<16x4xf16>, vector<4xf16>
    }
    gpu.return
  }
}
