// vector<4xf32> and vector<4xi32>: vload4/vstore4, broadcast, fma, maximumf, extract/insert, cmpf+select,
// reductions, shuffle, vector constants, fptosi/floordivsi/sitofp on vectors.
gpu.module @vec {
  gpu.func @vector4(%x: memref<64x8xf32>, %y: memref<64x8xf32>, %out: memref<64x8xf32>, %outs: memref<64xf32>, %outi: memref<64x4xi32>) kernel attributes {known_block_size = array<i32: 16, 1, 1>, known_grid_size = array<i32: 4, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c4 = arith.constant 4 : index
    %c7 = arith.constant 7 : index
    %r = gpu.global_id x
    %a = vector.load %x[%r, %c0] : memref<64x8xf32>, vector<4xf32>
    %b = vector.load %y[%r, %c4] : memref<64x8xf32>, vector<4xf32>
    %sc = memref.load %x[%r, %c7] : memref<64x8xf32>
    %s = vector.broadcast %sc : f32 to vector<4xf32>
    %two = arith.constant dense<2.0> : vector<4xf32>
    %f = vector.fma %a, %b, %s : vector<4xf32>
    %m = arith.maximumf %f, %two : vector<4xf32>
    %e = vector.extract %a[2] : f32 from vector<4xf32>
    %ins = vector.insert %e, %m[0] : f32 into vector<4xf32>
    vector.store %ins, %out[%r, %c0] : memref<64x8xf32>, vector<4xf32>
    %lt = arith.cmpf olt, %a, %b : vector<4xf32>
    %sel = arith.select %lt, %a, %b : vector<4xi1>, vector<4xf32>
    %ex = math.exp %sel : vector<4xf32>
    %sum = vector.reduction <add>, %ex : vector<4xf32> into f32
    %mx = vector.reduction <maximumf>, %a : vector<4xf32> into f32
    %t = arith.addf %sum, %mx : f32
    memref.store %t, %outs[%r] : memref<64xf32>
    %sh = vector.shuffle %a, %b [0, 5, 2, 7] : vector<4xf32>, vector<4xf32>
    %cv = arith.constant dense<[1.0, 2.0, 3.0, 4.0]> : vector<4xf32>
    %add = arith.addf %sh, %cv : vector<4xf32>
    vector.store %add, %out[%r, %c4] : memref<64x8xf32>, vector<4xf32>
    %ten = arith.constant dense<10.0> : vector<4xf32>
    %a10 = arith.mulf %a, %ten : vector<4xf32>
    %ai = arith.fptosi %a10 : vector<4xf32> to vector<4xi32>
    %three = arith.constant dense<3> : vector<4xi32>
    %fd = arith.floordivsi %ai, %three : vector<4xi32>
    %lim = arith.constant dense<[-5, 0, 5, 100]> : vector<4xi32>
    %mn = arith.minsi %fd, %lim : vector<4xi32>
    %neg = arith.cmpi slt, %ai, %lim : vector<4xi32>
    %negi = arith.extui %neg : vector<4xi1> to vector<4xi32>
    %res = arith.addi %mn, %negi : vector<4xi32>
    %mxi = vector.reduction <maxsi>, %ai : vector<4xi32> into i32
    %last = vector.insert %mxi, %res[3] : i32 into vector<4xi32>
    vector.store %last, %outi[%r, %c0] : memref<64x4xi32>, vector<4xi32>
    gpu.return
  }
}
