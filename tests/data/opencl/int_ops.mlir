// i32 ops (a, b with negatives, b != 0): row k of %out is op k; see IROWS in tests/test_codegen_opencl.py.
gpu.module @ints {
  gpu.func @int_ops(%x: memref<256xi32>, %y: memref<256xi32>, %out: memref<43x256xi32>) kernel attributes {known_block_size = array<i32: 64, 1, 1>, known_grid_size = array<i32: 4, 1, 1>} {
    %i = gpu.global_id x
    %a = memref.load %x[%i] : memref<256xi32>
    %b = memref.load %y[%i] : memref<256xi32>
    %c31 = arith.constant 31 : i32
    %s = arith.andi %b, %c31 : i32
    %a8 = arith.trunci %a : i32 to i8
    %b8 = arith.trunci %b : i32 to i8
    %s8 = arith.addi %a8, %b8 : i8
    %a64 = arith.extsi %a : i32 to i64
    %b64 = arith.extsi %b : i32 to i64
    %p64 = arith.muli %a64, %b64 : i64
    %c32_64 = arith.constant 32 : i64
    %hi64 = arith.shrsi %p64, %c32_64 : i64
    %ai = arith.index_cast %a : i32 to index
    %seven = arith.constant 7 : index
    %idx2 = arith.muli %ai, %seven : index
    %af = arith.sitofp %a : i32 to f32
    %chalf = arith.constant 0.5 : f32
    %halff = arith.mulf %af, %chalf : f32
    %uf = arith.uitofp %a : i32 to f32
    %absf = math.absf %af : f32
    %cmp_eq = arith.cmpi eq, %a, %b : i32
    %cmp_ne = arith.cmpi ne, %a, %b : i32
    %cmp_slt = arith.cmpi slt, %a, %b : i32
    %cmp_sle = arith.cmpi sle, %a, %b : i32
    %cmp_sgt = arith.cmpi sgt, %a, %b : i32
    %cmp_sge = arith.cmpi sge, %a, %b : i32
    %cmp_ult = arith.cmpi ult, %a, %b : i32
    %cmp_ule = arith.cmpi ule, %a, %b : i32
    %cmp_ugt = arith.cmpi ugt, %a, %b : i32
    %cmp_uge = arith.cmpi uge, %a, %b : i32
    %slt = arith.cmpi slt, %a, %b : i32
    %true = arith.constant true
    %bx = arith.xori %slt, %true : i1
    %row0 = arith.constant 0 : index
    %r0 = arith.addi %a, %b : i32  // addi
    memref.store %r0, %out[%row0, %i] : memref<43x256xi32>
    %row1 = arith.constant 1 : index
    %r1 = arith.subi %a, %b : i32  // subi
    memref.store %r1, %out[%row1, %i] : memref<43x256xi32>
    %row2 = arith.constant 2 : index
    %r2 = arith.muli %a, %b : i32  // muli
    memref.store %r2, %out[%row2, %i] : memref<43x256xi32>
    %row3 = arith.constant 3 : index
    %r3 = arith.divsi %a, %b : i32  // divsi
    memref.store %r3, %out[%row3, %i] : memref<43x256xi32>
    %row4 = arith.constant 4 : index
    %r4 = arith.remsi %a, %b : i32  // remsi
    memref.store %r4, %out[%row4, %i] : memref<43x256xi32>
    %row5 = arith.constant 5 : index
    %r5 = arith.floordivsi %a, %b : i32  // floordivsi
    memref.store %r5, %out[%row5, %i] : memref<43x256xi32>
    %row6 = arith.constant 6 : index
    %r6 = arith.ceildivsi %a, %b : i32  // ceildivsi
    memref.store %r6, %out[%row6, %i] : memref<43x256xi32>
    %row7 = arith.constant 7 : index
    %r7 = arith.divui %a, %b : i32  // divui
    memref.store %r7, %out[%row7, %i] : memref<43x256xi32>
    %row8 = arith.constant 8 : index
    %r8 = arith.remui %a, %b : i32  // remui
    memref.store %r8, %out[%row8, %i] : memref<43x256xi32>
    %row9 = arith.constant 9 : index
    %r9 = arith.ceildivui %a, %b : i32  // ceildivui
    memref.store %r9, %out[%row9, %i] : memref<43x256xi32>
    %row10 = arith.constant 10 : index
    %r10 = arith.shli %a, %s : i32  // shli
    memref.store %r10, %out[%row10, %i] : memref<43x256xi32>
    %row11 = arith.constant 11 : index
    %r11 = arith.shrsi %a, %s : i32  // shrsi
    memref.store %r11, %out[%row11, %i] : memref<43x256xi32>
    %row12 = arith.constant 12 : index
    %r12 = arith.shrui %a, %s : i32  // shrui
    memref.store %r12, %out[%row12, %i] : memref<43x256xi32>
    %row13 = arith.constant 13 : index
    %r13 = arith.minsi %a, %b : i32  // minsi
    memref.store %r13, %out[%row13, %i] : memref<43x256xi32>
    %row14 = arith.constant 14 : index
    %r14 = arith.maxsi %a, %b : i32  // maxsi
    memref.store %r14, %out[%row14, %i] : memref<43x256xi32>
    %row15 = arith.constant 15 : index
    %r15 = arith.minui %a, %b : i32  // minui
    memref.store %r15, %out[%row15, %i] : memref<43x256xi32>
    %row16 = arith.constant 16 : index
    %r16 = arith.maxui %a, %b : i32  // maxui
    memref.store %r16, %out[%row16, %i] : memref<43x256xi32>
    %row17 = arith.constant 17 : index
    %r17 = arith.andi %a, %b : i32  // andi
    memref.store %r17, %out[%row17, %i] : memref<43x256xi32>
    %row18 = arith.constant 18 : index
    %r18 = arith.ori %a, %b : i32  // ori
    memref.store %r18, %out[%row18, %i] : memref<43x256xi32>
    %row19 = arith.constant 19 : index
    %r19 = arith.xori %a, %b : i32  // xori
    memref.store %r19, %out[%row19, %i] : memref<43x256xi32>
    %row20 = arith.constant 20 : index
    %r20 = math.absi %a : i32  // absi
    memref.store %r20, %out[%row20, %i] : memref<43x256xi32>
    %row21 = arith.constant 21 : index
    %r21 = arith.select %slt, %a, %b : i32  // select_slt
    memref.store %r21, %out[%row21, %i] : memref<43x256xi32>
    %row22 = arith.constant 22 : index
    %r22 = arith.extui %cmp_eq : i1 to i32  // cmpi_eq
    memref.store %r22, %out[%row22, %i] : memref<43x256xi32>
    %row23 = arith.constant 23 : index
    %r23 = arith.extui %cmp_ne : i1 to i32  // cmpi_ne
    memref.store %r23, %out[%row23, %i] : memref<43x256xi32>
    %row24 = arith.constant 24 : index
    %r24 = arith.extui %cmp_slt : i1 to i32  // cmpi_slt
    memref.store %r24, %out[%row24, %i] : memref<43x256xi32>
    %row25 = arith.constant 25 : index
    %r25 = arith.extui %cmp_sle : i1 to i32  // cmpi_sle
    memref.store %r25, %out[%row25, %i] : memref<43x256xi32>
    %row26 = arith.constant 26 : index
    %r26 = arith.extui %cmp_sgt : i1 to i32  // cmpi_sgt
    memref.store %r26, %out[%row26, %i] : memref<43x256xi32>
    %row27 = arith.constant 27 : index
    %r27 = arith.extui %cmp_sge : i1 to i32  // cmpi_sge
    memref.store %r27, %out[%row27, %i] : memref<43x256xi32>
    %row28 = arith.constant 28 : index
    %r28 = arith.extui %cmp_ult : i1 to i32  // cmpi_ult
    memref.store %r28, %out[%row28, %i] : memref<43x256xi32>
    %row29 = arith.constant 29 : index
    %r29 = arith.extui %cmp_ule : i1 to i32  // cmpi_ule
    memref.store %r29, %out[%row29, %i] : memref<43x256xi32>
    %row30 = arith.constant 30 : index
    %r30 = arith.extui %cmp_ugt : i1 to i32  // cmpi_ugt
    memref.store %r30, %out[%row30, %i] : memref<43x256xi32>
    %row31 = arith.constant 31 : index
    %r31 = arith.extui %cmp_uge : i1 to i32  // cmpi_uge
    memref.store %r31, %out[%row31, %i] : memref<43x256xi32>
    %row32 = arith.constant 32 : index
    %r32 = arith.extsi %slt : i1 to i32  // extsi_i1
    memref.store %r32, %out[%row32, %i] : memref<43x256xi32>
    %row33 = arith.constant 33 : index
    %r33 = arith.extsi %a8 : i8 to i32  // trunc_i8_extsi
    memref.store %r33, %out[%row33, %i] : memref<43x256xi32>
    %row34 = arith.constant 34 : index
    %r34 = arith.extui %a8 : i8 to i32  // trunc_i8_extui
    memref.store %r34, %out[%row34, %i] : memref<43x256xi32>
    %row35 = arith.constant 35 : index
    %r35 = arith.extsi %s8 : i8 to i32  // i8_add_extsi
    memref.store %r35, %out[%row35, %i] : memref<43x256xi32>
    %row36 = arith.constant 36 : index
    %r36 = arith.trunci %hi64 : i64 to i32  // mulhi_i64
    memref.store %r36, %out[%row36, %i] : memref<43x256xi32>
    %row37 = arith.constant 37 : index
    %r37 = arith.index_cast %idx2 : index to i32  // index_roundtrip
    memref.store %r37, %out[%row37, %i] : memref<43x256xi32>
    %row38 = arith.constant 38 : index
    %r38 = arith.fptosi %halff : f32 to i32  // sitofp_half_fptosi
    memref.store %r38, %out[%row38, %i] : memref<43x256xi32>
    %row39 = arith.constant 39 : index
    %r39 = arith.bitcast %uf : f32 to i32  // uitofp_bits
    memref.store %r39, %out[%row39, %i] : memref<43x256xi32>
    %row40 = arith.constant 40 : index
    %r40 = arith.fptoui %absf : f32 to i32  // fptoui_abs
    memref.store %r40, %out[%row40, %i] : memref<43x256xi32>
    %row41 = arith.constant 41 : index
    %r41 = arith.extui %bx : i1 to i32  // i1_xor_extui
    memref.store %r41, %out[%row41, %i] : memref<43x256xi32>
    %row42 = arith.constant 42 : index
    %r42 = math.ctpop %a : i32  // ctpop
    memref.store %r42, %out[%row42, %i] : memref<43x256xi32>
    gpu.return
  }
}
