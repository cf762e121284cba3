// Golden only: f16 (needs cl_khr_fp16, which PoCL lacks), f64, i8, i64 limits, special float constants,
// every cmpf predicate, vector i1 masks, a workgroup size from spirv.entry_point_abi and an index argument.
gpu.module @misc {
  gpu.func @misc_types(%h: memref<16xf16>, %d: memref<16xf64>, %c: memref<16xi8>, %l: memref<16xi64>, %flags: memref<16xi1>, %n: index) kernel attributes {spirv.entry_point_abi = #spirv.entry_point_abi<workgroup_size = [16, 1, 1]>} {
    %i = gpu.thread_id x
    %h0 = memref.load %h[%i] : memref<16xf16>
    %hc = arith.constant 0.1 : f16
    %hinf = arith.constant 0x7C00 : f16
    %h1 = arith.mulf %h0, %hc : f16
    %h2 = arith.minimumf %h1, %hinf : f16
    %h3 = math.exp %h2 : f16
    %d0 = memref.load %d[%i] : memref<16xf64>
    %hd = arith.extf %h3 : f16 to f64
    %dnan = arith.constant 0x7FF8000000000000 : f64
    %dnz = arith.constant -0.0 : f64
    %d1 = arith.addf %d0, %hd : f64
    %d2 = arith.maximumf %d1, %dnz : f64
    %dn = arith.cmpf uno, %d2, %dnan : f64
    %d3 = arith.select %dn, %dnan, %d2 : f64
    memref.store %d3, %d[%i] : memref<16xf64>
    %h4 = arith.truncf %d3 : f64 to f16
    memref.store %h4, %h[%i] : memref<16xf16>
    %c0 = memref.load %c[%i] : memref<16xi8>
    %c1 = arith.constant -128 : i8
    %c2 = arith.constant 255 : i8
    %c3 = arith.divui %c0, %c2 : i8
    %c4 = arith.maxsi %c3, %c1 : i8
    %c5 = arith.shrui %c4, %c3 : i8
    memref.store %c5, %c[%i] : memref<16xi8>
    %l0 = memref.load %l[%i] : memref<16xi64>
    %lmin = arith.constant -9223372036854775808 : i64
    %lmax = arith.constant 9223372036854775807 : i64
    %l1 = arith.maxsi %l0, %lmin : i64
    %l2 = arith.minui %l1, %lmax : i64
    %ni = arith.index_castui %n : index to i64
    %l3 = arith.floordivsi %l2, %ni : i64
    memref.store %l3, %l[%i] : memref<16xi64>
    %f0 = memref.load %flags[%i] : memref<16xi1>
    %f1 = arith.cmpi slt, %f0, %dn : i1
    memref.store %f1, %flags[%i] : memref<16xi1>
    %va = vector.broadcast %d0 : f64 to vector<4xf64>
    %vb = arith.constant dense<[1.0, 0x7FF0000000000000, -2.5, 0x7FF8000000000000]> : vector<4xf64>
    %p0 = arith.cmpf oeq, %va, %vb : vector<4xf64>
    %p1 = arith.cmpf ogt, %va, %vb : vector<4xf64>
    %p2 = arith.cmpf oge, %va, %vb : vector<4xf64>
    %p3 = arith.cmpf olt, %va, %vb : vector<4xf64>
    %p4 = arith.cmpf ole, %va, %vb : vector<4xf64>
    %p5 = arith.cmpf one, %va, %vb : vector<4xf64>
    %p6 = arith.cmpf ord, %va, %vb : vector<4xf64>
    %p7 = arith.cmpf ueq, %va, %vb : vector<4xf64>
    %p8 = arith.cmpf ugt, %va, %vb : vector<4xf64>
    %p9 = arith.cmpf uge, %va, %vb : vector<4xf64>
    %p10 = arith.cmpf ult, %va, %vb : vector<4xf64>
    %p11 = arith.cmpf ule, %va, %vb : vector<4xf64>
    %p12 = arith.cmpf une, %va, %vb : vector<4xf64>
    %p13 = arith.cmpf uno, %va, %vb : vector<4xf64>
    %p14 = arith.cmpf true, %va, %vb : vector<4xf64>
    %q0 = arith.ori %p0, %p1 : vector<4xi1>
    %q1 = arith.xori %q0, %p2 : vector<4xi1>
    %q2 = arith.andi %q1, %p3 : vector<4xi1>
    %q3 = arith.ori %q2, %p4 : vector<4xi1>
    %q4 = arith.ori %q3, %p5 : vector<4xi1>
    %q5 = arith.ori %q4, %p6 : vector<4xi1>
    %q6 = arith.ori %q5, %p7 : vector<4xi1>
    %q7 = arith.ori %q6, %p8 : vector<4xi1>
    %q8 = arith.ori %q7, %p9 : vector<4xi1>
    %q9 = arith.ori %q8, %p10 : vector<4xi1>
    %q10 = arith.ori %q9, %p11 : vector<4xi1>
    %q11 = arith.ori %q10, %p12 : vector<4xi1>
    %q12 = arith.ori %q11, %p13 : vector<4xi1>
    %q13 = arith.andi %q12, %p14 : vector<4xi1>
    %sel = arith.select %q13, %va, %vb : vector<4xi1>, vector<4xf64>
    %wide = arith.extsi %q13 : vector<4xi1> to vector<4xi64>
    %sum = vector.reduction <add>, %sel : vector<4xf64> into f64
    %cnt = vector.reduction <add>, %wide : vector<4xi64> into i64
    %cntf = arith.sitofp %cnt : i64 to f64
    %tot = arith.addf %sum, %cntf : f64
    %c1i = arith.constant 1 : index
    memref.store %tot, %d[%c1i] : memref<16xf64>
    gpu.return
  }
}
