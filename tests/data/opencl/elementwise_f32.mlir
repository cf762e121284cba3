// Elementwise f32 ops: row k of %out is op k of x (a) and y (b, >= 0); see ROWS in tests/test_codegen_opencl.py.
gpu.module @elementwise {
  gpu.func @elementwise_f32(%x: memref<256xf32>, %y: memref<256xf32>, %out: memref<45x256xf32>) kernel attributes {known_block_size = array<i32: 64, 1, 1>, known_grid_size = array<i32: 4, 1, 1>} {
    %i = gpu.global_id x
    %a = memref.load %x[%i] : memref<256xf32>
    %b = memref.load %y[%i] : memref<256xf32>
    %c3i = arith.constant 3 : i32
    %cninf = arith.constant 0xFF800000 : f32
    %cnz = arith.constant -0.0 : f32
    %cz = arith.constant 0.0 : f32
    %th = math.tanh %a : f32
    %lt = arith.cmpf olt, %a, %b : f32
    %ugt = arith.cmpf ugt, %a, %b : f32
    %ge0 = arith.cmpf oge, %a, %cz : f32
    %nan = math.isnan %a : f32
    %inf = math.isinf %a : f32
    %b64 = arith.extf %b : f32 to f64
    %sq64 = math.sqrt %b64 : f64
    %row0 = arith.constant 0 : index
    %r0 = arith.addf %a, %b : f32  // addf
    memref.store %r0, %out[%row0, %i] : memref<45x256xf32>
    %row1 = arith.constant 1 : index
    %r1 = arith.subf %a, %b : f32  // subf
    memref.store %r1, %out[%row1, %i] : memref<45x256xf32>
    %row2 = arith.constant 2 : index
    %r2 = arith.mulf %a, %b : f32  // mulf
    memref.store %r2, %out[%row2, %i] : memref<45x256xf32>
    %row3 = arith.constant 3 : index
    %r3 = arith.divf %a, %b : f32  // divf
    memref.store %r3, %out[%row3, %i] : memref<45x256xf32>
    %row4 = arith.constant 4 : index
    %r4 = arith.remf %a, %b : f32  // remf
    memref.store %r4, %out[%row4, %i] : memref<45x256xf32>
    %row5 = arith.constant 5 : index
    %r5 = arith.negf %a : f32  // negf
    memref.store %r5, %out[%row5, %i] : memref<45x256xf32>
    %row6 = arith.constant 6 : index
    %r6 = arith.maximumf %a, %b : f32  // maximumf
    memref.store %r6, %out[%row6, %i] : memref<45x256xf32>
    %row7 = arith.constant 7 : index
    %r7 = arith.minimumf %a, %b : f32  // minimumf
    memref.store %r7, %out[%row7, %i] : memref<45x256xf32>
    %row8 = arith.constant 8 : index
    %r8 = arith.maxnumf %a, %b : f32  // maxnumf
    memref.store %r8, %out[%row8, %i] : memref<45x256xf32>
    %row9 = arith.constant 9 : index
    %r9 = arith.minnumf %a, %b : f32  // minnumf
    memref.store %r9, %out[%row9, %i] : memref<45x256xf32>
    %row10 = arith.constant 10 : index
    %r10 = math.exp %a : f32  // exp
    memref.store %r10, %out[%row10, %i] : memref<45x256xf32>
    %row11 = arith.constant 11 : index
    %r11 = math.exp2 %a : f32  // exp2
    memref.store %r11, %out[%row11, %i] : memref<45x256xf32>
    %row12 = arith.constant 12 : index
    %r12 = math.expm1 %a : f32  // expm1
    memref.store %r12, %out[%row12, %i] : memref<45x256xf32>
    %row13 = arith.constant 13 : index
    %r13 = math.log %b : f32  // log
    memref.store %r13, %out[%row13, %i] : memref<45x256xf32>
    %row14 = arith.constant 14 : index
    %r14 = math.log2 %b : f32  // log2
    memref.store %r14, %out[%row14, %i] : memref<45x256xf32>
    %row15 = arith.constant 15 : index
    %r15 = math.log1p %b : f32  // log1p
    memref.store %r15, %out[%row15, %i] : memref<45x256xf32>
    %row16 = arith.constant 16 : index
    %r16 = math.sqrt %b : f32  // sqrt
    memref.store %r16, %out[%row16, %i] : memref<45x256xf32>
    %row17 = arith.constant 17 : index
    %r17 = math.rsqrt %b : f32  // rsqrt
    memref.store %r17, %out[%row17, %i] : memref<45x256xf32>
    %row18 = arith.constant 18 : index
    %r18 = math.tanh %a : f32  // tanh
    memref.store %r18, %out[%row18, %i] : memref<45x256xf32>
    %row19 = arith.constant 19 : index
    %r19 = math.sin %a : f32  // sin
    memref.store %r19, %out[%row19, %i] : memref<45x256xf32>
    %row20 = arith.constant 20 : index
    %r20 = math.cos %a : f32  // cos
    memref.store %r20, %out[%row20, %i] : memref<45x256xf32>
    %row21 = arith.constant 21 : index
    %r21 = math.tan %a : f32  // tan
    memref.store %r21, %out[%row21, %i] : memref<45x256xf32>
    %row22 = arith.constant 22 : index
    %r22 = math.atan %a : f32  // atan
    memref.store %r22, %out[%row22, %i] : memref<45x256xf32>
    %row23 = arith.constant 23 : index
    %r23 = math.atan2 %a, %b : f32  // atan2
    memref.store %r23, %out[%row23, %i] : memref<45x256xf32>
    %row24 = arith.constant 24 : index
    %r24 = math.asin %th : f32  // asin_tanh
    memref.store %r24, %out[%row24, %i] : memref<45x256xf32>
    %row25 = arith.constant 25 : index
    %r25 = math.acos %th : f32  // acos_tanh
    memref.store %r25, %out[%row25, %i] : memref<45x256xf32>
    %row26 = arith.constant 26 : index
    %r26 = math.powf %b, %a : f32  // powf
    memref.store %r26, %out[%row26, %i] : memref<45x256xf32>
    %row27 = arith.constant 27 : index
    %r27 = math.fpowi %a, %c3i : f32, i32  // fpowi3
    memref.store %r27, %out[%row27, %i] : memref<45x256xf32>
    %row28 = arith.constant 28 : index
    %r28 = math.absf %a : f32  // absf
    memref.store %r28, %out[%row28, %i] : memref<45x256xf32>
    %row29 = arith.constant 29 : index
    %r29 = math.floor %a : f32  // floor
    memref.store %r29, %out[%row29, %i] : memref<45x256xf32>
    %row30 = arith.constant 30 : index
    %r30 = math.ceil %a : f32  // ceil
    memref.store %r30, %out[%row30, %i] : memref<45x256xf32>
    %row31 = arith.constant 31 : index
    %r31 = math.round %a : f32  // round
    memref.store %r31, %out[%row31, %i] : memref<45x256xf32>
    %row32 = arith.constant 32 : index
    %r32 = math.roundeven %a : f32  // roundeven
    memref.store %r32, %out[%row32, %i] : memref<45x256xf32>
    %row33 = arith.constant 33 : index
    %r33 = math.trunc %a : f32  // trunc
    memref.store %r33, %out[%row33, %i] : memref<45x256xf32>
    %row34 = arith.constant 34 : index
    %r34 = math.erf %a : f32  // erf
    memref.store %r34, %out[%row34, %i] : memref<45x256xf32>
    %row35 = arith.constant 35 : index
    %r35 = math.fma %a, %b, %a : f32  // fma
    memref.store %r35, %out[%row35, %i] : memref<45x256xf32>
    %row36 = arith.constant 36 : index
    %r36 = math.copysign %b, %a : f32  // copysign
    memref.store %r36, %out[%row36, %i] : memref<45x256xf32>
    %row37 = arith.constant 37 : index
    %r37 = arith.select %lt, %a, %b : f32  // select_olt
    memref.store %r37, %out[%row37, %i] : memref<45x256xf32>
    %row38 = arith.constant 38 : index
    %r38 = arith.uitofp %ugt : i1 to f32  // ugt_as_f32
    memref.store %r38, %out[%row38, %i] : memref<45x256xf32>
    %row39 = arith.constant 39 : index
    %r39 = arith.uitofp %nan : i1 to f32  // isnan_as_f32
    memref.store %r39, %out[%row39, %i] : memref<45x256xf32>
    %row40 = arith.constant 40 : index
    %r40 = arith.uitofp %inf : i1 to f32  // isinf_as_f32
    memref.store %r40, %out[%row40, %i] : memref<45x256xf32>
    %row41 = arith.constant 41 : index
    %r41 = arith.maximumf %a, %cninf : f32  // max_neginf
    memref.store %r41, %out[%row41, %i] : memref<45x256xf32>
    %row42 = arith.constant 42 : index
    %r42 = arith.mulf %b, %cnz : f32  // mul_negzero
    memref.store %r42, %out[%row42, %i] : memref<45x256xf32>
    %row43 = arith.constant 43 : index
    %r43 = arith.truncf %sq64 : f64 to f32  // sqrt_f64
    memref.store %r43, %out[%row43, %i] : memref<45x256xf32>
    %row44 = arith.constant 44 : index
    %r44 = arith.select %ge0, %a, %cz : f32  // relu_ge
    memref.store %r44, %out[%row44, %i] : memref<45x256xf32>
    gpu.return
  }
}
