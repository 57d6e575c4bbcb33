// RUN: kiln-opt %s --kiln-merge-gpu-modules | FileCheck %s

// Two outlined kernels, each in a module of its own under the same function
// name, end up in one module under their modules' (unique) names, and the
// launches follow them.
// CHECK: gpu.launch_func @kiln_kernels::@main_kernel blocks
// CHECK: gpu.launch_func @kiln_kernels::@main_kernel_0 blocks
// CHECK: gpu.module @kiln_kernels
// CHECK: gpu.func @main_kernel(%{{.*}}: memref<4xf32>) kernel
// CHECK: gpu.func @main_kernel_0(%{{.*}}: memref<4xf32>) kernel
// A TF32 tile kernel (outlined as tf32_tiles) gets two blocks per SM and
// 16-byte aligned shared buffers; the others keep their attributes.
// CHECK-NOT: nvvm.minctasm
// CHECK: gpu.func @tf32_tiles(%{{.*}}: memref<4xf32>) workgroup(%{{.*}} : memref<2x8xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}) kernel attributes {nvvm.minctasm = 2 : i32}
// CHECK-NOT: gpu.module
module attributes {gpu.container_module} {
  func.func @main(%x: memref<4xf32>) {
    %c1 = arith.constant 1 : index
    gpu.launch_func @main_kernel::@main_kernel blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%x : memref<4xf32>)
    gpu.launch_func @main_kernel_0::@main_kernel blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%x : memref<4xf32>)
    gpu.launch_func @tf32_tiles::@tf32_tiles blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%x : memref<4xf32>)
    return
  }
  gpu.module @main_kernel {
    gpu.func @main_kernel(%arg0: memref<4xf32>) kernel {
      gpu.return
    }
  }
  gpu.module @main_kernel_0 {
    gpu.func @main_kernel(%arg0: memref<4xf32>) kernel {
      gpu.return
    }
  }
  gpu.module @tf32_tiles {
    gpu.func @tf32_tiles(%arg0: memref<4xf32>) workgroup(%w : memref<2x8xf32, #gpu.address_space<workgroup>>) kernel {
      gpu.return
    }
  }
}
