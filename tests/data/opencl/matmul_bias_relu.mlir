module attributes {gpu.container_module} {
  func.func @main(%arg0: memref<129x31xf32>, %arg1: memref<31x257xf32>, %arg2: memref<257xf32>) -> memref<129x257xf32> {
    %c5 = arith.constant 5 : index
    %c9 = arith.constant 9 : index
    %c8 = arith.constant 8 : index
    %c1 = arith.constant 1 : index
    %alloc = memref.alloc() {alignment = 64 : i64} : memref<129x257xf32>
    gpu.launch_func  @main_kernel::@main_kernel blocks in (%c9, %c5, %c1) threads in (%c8, %c8, %c1)  args(%arg0 : memref<129x31xf32>, %arg1 : memref<31x257xf32>, %arg2 : memref<257xf32>, %alloc : memref<129x257xf32>)
    return %alloc : memref<129x257xf32>
  }
  gpu.module @main_kernel {
    gpu.func @main_kernel(%arg0: memref<129x31xf32>, %arg1: memref<31x257xf32>, %arg2: memref<257xf32>, %arg3: memref<129x257xf32>) kernel attributes {known_block_size = array<i32: 8, 8, 1>, known_grid_size = array<i32: 9, 5, 1>} {
      %c8 = arith.constant 8 : index
      %c257 = arith.constant 257 : index
      %c32 = arith.constant 32 : index
      %c129 = arith.constant 129 : index
      %c-32 = arith.constant -32 : index
      %c31 = arith.constant 31 : index
      %c1 = arith.constant 1 : index
      %c0 = arith.constant 0 : index
      %cst = arith.constant 0.000000e+00 : f32
      %block_id_x = gpu.block_id x
      %block_id_y = gpu.block_id y
      %0 = arith.muli %block_id_y, %c-32 overflow<nsw> : index
      %1 = arith.addi %0, %c129 : index
      %2 = arith.minsi %1, %c32 : index
      %3 = arith.muli %block_id_x, %c-32 overflow<nsw> : index
      %4 = arith.addi %3, %c257 : index
      %5 = arith.minsi %4, %c32 : index
      %thread_id_x = gpu.thread_id x
      %thread_id_y = gpu.thread_id y
      %6 = arith.cmpi sle, %2, %c0 : index
      %7 = arith.subi %c0, %2 : index
      %8 = arith.subi %2, %c1 : index
      %9 = arith.select %6, %7, %8 : index
      %10 = arith.divsi %9, %c8 : index
      %11 = arith.subi %c0, %10 : index
      %12 = arith.addi %10, %c1 : index
      %13 = arith.select %6, %11, %12 : index
      %14 = arith.muli %thread_id_y, %13 overflow<nsw> : index
      %15 = arith.subi %2, %14 : index
      %16 = arith.minsi %15, %13 : index
      %17 = arith.maxsi %16, %c0 : index
      %18 = arith.cmpi sle, %5, %c0 : index
      %19 = arith.subi %c0, %5 : index
      %20 = arith.subi %5, %c1 : index
      %21 = arith.select %18, %19, %20 : index
      %22 = arith.divsi %21, %c8 : index
      %23 = arith.subi %c0, %22 : index
      %24 = arith.addi %22, %c1 : index
      %25 = arith.select %18, %23, %24 : index
      %26 = arith.muli %thread_id_x, %25 overflow<nsw> : index
      %27 = arith.subi %5, %26 : index
      %28 = arith.minsi %27, %25 : index
      %29 = arith.maxsi %28, %c0 : index
      %alloc = memref.alloc(%17, %29) {alignment = 64 : i64} : memref<?x?xf32>
      scf.for %arg4 = %c0 to %17 step %c1 {
        scf.for %arg5 = %c0 to %29 step %c1 {
          memref.store %cst, %alloc[%arg4, %arg5] : memref<?x?xf32>
        }
      }
      scf.for %arg4 = %c0 to %17 step %c1 {
        scf.for %arg5 = %c0 to %29 step %c1 {
          scf.for %arg6 = %c0 to %c31 step %c1 {
            %30 = arith.muli %block_id_y, %c32 overflow<nsw> : index
            %31 = arith.addi %30, %arg4 : index
            %32 = arith.addi %31, %14 : index
            %33 = memref.load %arg0[%32, %arg6] : memref<129x31xf32>
            %34 = arith.muli %block_id_x, %c32 overflow<nsw> : index
            %35 = arith.addi %34, %arg5 : index
            %36 = arith.addi %35, %26 : index
            %37 = memref.load %arg1[%arg6, %36] : memref<31x257xf32>
            %38 = memref.load %alloc[%arg4, %arg5] : memref<?x?xf32>
            %39 = arith.mulf %33, %37 : f32
            %40 = arith.addf %38, %39 : f32
            memref.store %40, %alloc[%arg4, %arg5] : memref<?x?xf32>
          }
        }
      }
      scf.for %arg4 = %c0 to %17 step %c1 {
        scf.for %arg5 = %c0 to %29 step %c1 {
          %30 = arith.muli %block_id_y, %c32 overflow<nsw> : index
          %31 = arith.addi %30, %arg4 : index
          %32 = arith.addi %31, %14 : index
          %33 = arith.muli %block_id_x, %c32 overflow<nsw> : index
          %34 = arith.addi %33, %arg5 : index
          %35 = arith.addi %34, %26 : index
          memref.store %cst, %arg3[%32, %35] : memref<129x257xf32>
        }
      }
      scf.for %arg4 = %c0 to %17 step %c1 {
        scf.for %arg5 = %c0 to %29 step %c1 {
          scf.for %arg6 = %c0 to %c31 step %c1 {
            %30 = arith.muli %block_id_y, %c32 overflow<nsw> : index
            %31 = arith.addi %30, %arg4 : index
            %32 = arith.addi %31, %14 : index
            %33 = memref.load %arg0[%32, %arg6] : memref<129x31xf32>
            %34 = arith.muli %block_id_x, %c32 overflow<nsw> : index
            %35 = arith.addi %34, %arg5 : index
            %36 = arith.addi %35, %26 : index
            %37 = memref.load %arg1[%arg6, %36] : memref<31x257xf32>
            %38 = memref.load %arg3[%32, %36] : memref<129x257xf32>
            %39 = arith.mulf %33, %37 : f32
            %40 = arith.addf %38, %39 : f32
            memref.store %40, %arg3[%32, %36] : memref<129x257xf32>
          }
        }
      }
      scf.for %arg4 = %c0 to %17 step %c1 {
        scf.for %arg5 = %c0 to %29 step %c1 {
          %30 = memref.load %alloc[%arg4, %arg5] : memref<?x?xf32>
          %31 = arith.muli %block_id_x, %c32 overflow<nsw> : index
          %32 = arith.addi %31, %arg5 : index
          %33 = arith.addi %32, %26 : index
          %34 = memref.load %arg2[%33] : memref<257xf32>
          %35 = arith.addf %30, %34 : f32
          %36 = arith.maximumf %35, %cst : f32
          %37 = arith.muli %block_id_y, %c32 overflow<nsw> : index
          %38 = arith.addi %37, %arg4 : index
          %39 = arith.addi %38, %14 : index
          memref.store %36, %arg3[%39, %33] : memref<129x257xf32>
        }
      }
      gpu.return
    }
  }
}

