module attributes {gpu.container_module} {
  func.func @main(%arg0: memref<100x37xf32>) -> memref<100xf32> {
    %c100 = arith.constant 100 : index
    %c0 = arith.constant 0 : index
    %c4 = arith.constant 4 : index
    %c32 = arith.constant 32 : index
    %c1 = arith.constant 1 : index
    %cst = arith.constant 0xFF800000 : f32
    %alloc = memref.alloc() {alignment = 64 : i64} : memref<100xf32>
    scf.for %arg1 = %c0 to %c100 step %c1 {
      memref.store %cst, %alloc[%arg1] : memref<100xf32>
    }
    gpu.launch_func  @main_kernel::@main_kernel blocks in (%c4, %c1, %c1) threads in (%c32, %c1, %c1)  args(%arg0 : memref<100x37xf32>, %alloc : memref<100xf32>)
    return %alloc : memref<100xf32>
  }
  gpu.module @main_kernel {
    gpu.func @main_kernel(%arg0: memref<100x37xf32>, %arg1: memref<100xf32>) kernel attributes {known_block_size = array<i32: 32, 1, 1>, known_grid_size = array<i32: 4, 1, 1>} {
      %c32 = arith.constant 32 : index
      %c100 = arith.constant 100 : index
      %c-32 = arith.constant -32 : index
      %c37 = arith.constant 37 : index
      %c1 = arith.constant 1 : index
      %c0 = arith.constant 0 : index
      %cst = arith.constant 0xFF800000 : f32
      %block_id_x = gpu.block_id x
      %0 = arith.muli %block_id_x, %c-32 overflow<nsw> : index
      %1 = arith.addi %0, %c100 : index
      %2 = arith.minsi %1, %c32 : index
      %thread_id_x = gpu.thread_id x
      %3 = arith.cmpi sle, %2, %c0 : index
      %4 = arith.subi %c0, %2 : index
      %5 = arith.subi %2, %c1 : index
      %6 = arith.select %3, %4, %5 : index
      %7 = arith.divsi %6, %c32 : index
      %8 = arith.subi %c0, %7 : index
      %9 = arith.addi %7, %c1 : index
      %10 = arith.select %3, %8, %9 : index
      %11 = arith.muli %thread_id_x, %10 overflow<nsw> : index
      %12 = arith.subi %2, %11 : index
      %13 = arith.minsi %12, %10 : index
      %14 = arith.maxsi %13, %c0 : index
      scf.for %arg2 = %c0 to %14 step %c1 {
        %15 = arith.muli %block_id_x, %c32 overflow<nsw> : index
        %16 = arith.addi %15, %arg2 : index
        %17 = arith.addi %16, %11 : index
        memref.store %cst, %arg1[%17] : memref<100xf32>
      }
      scf.for %arg2 = %c0 to %14 step %c1 {
        scf.for %arg3 = %c0 to %c37 step %c1 {
          %15 = arith.muli %block_id_x, %c32 overflow<nsw> : index
          %16 = arith.addi %15, %arg2 : index
          %17 = arith.addi %16, %11 : index
          %18 = memref.load %arg0[%17, %arg3] : memref<100x37xf32>
          %19 = memref.load %arg1[%17] : memref<100xf32>
          %20 = arith.maximumf %18, %19 : f32
          memref.store %20, %arg1[%17] : memref<100xf32>
        }
      }
      gpu.return
    }
  }
}

