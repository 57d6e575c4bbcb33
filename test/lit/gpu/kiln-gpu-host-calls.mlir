// RUN: kiln-opt %s --split-input-file --verify-diagnostics --kiln-gpu-host-calls | FileCheck %s

// Launches become calls to the runtime with the kernel's index (its first
// use), grid, block, shared memory and a pointer array whose i-th entry
// points at the i-th parameter; weights become offsets (aligned to 256)
// into a new last argument, and the globals say where they went.

// CHECK-LABEL: module attributes
// CHECK-SAME: kiln.gpu_constants_size = 264 : i64
// CHECK-SAME: kiln.gpu_kernels = ["k0", "k1"]
// CHECK-DAG: llvm.mlir.global private constant @w({{.*}}) {{.*}}kiln.gpu_constant_offset = 0 : i64
// CHECK-DAG: llvm.mlir.global private constant @b({{.*}}) {{.*}}kiln.gpu_constant_offset = 256 : i64
// CHECK-NOT: gpu.binary
// CHECK: llvm.func @main(%[[IN:.*]]: !llvm.ptr, %[[OUT:.*]]: !llvm.ptr, %[[WEIGHTS:.*]]: !llvm.ptr)
// CHECK-DAG: %[[ARGS0:.*]] = llvm.alloca %{{.*}} x !llvm.array<4 x ptr>
// CHECK-DAG: %[[ARGS1:.*]] = llvm.alloca %{{.*}} x !llvm.array<2 x ptr>
// CHECK-DAG: %[[W:.*]] = llvm.getelementptr %[[WEIGHTS]][0] : (!llvm.ptr) -> !llvm.ptr, i8
// CHECK-DAG: %[[B:.*]] = llvm.getelementptr %[[WEIGHTS]][256] : (!llvm.ptr) -> !llvm.ptr, i8
// CHECK: llvm.store %[[W]], %[[SLOT:.*]] : !llvm.ptr, !llvm.ptr
// CHECK: %[[AT:.*]] = llvm.getelementptr %[[ARGS0]][0, 2] : (!llvm.ptr) -> !llvm.ptr, !llvm.array<4 x ptr>
// CHECK: llvm.store %[[SLOT]], %[[AT]] : !llvm.ptr, !llvm.ptr
// CHECK: %[[NOSHARED:.*]] = llvm.mlir.constant(0 : i64) : i64
// CHECK-NEXT: %[[K0:.*]] = llvm.mlir.constant(0 : i64) : i64
// CHECK-NEXT: llvm.call @kiln_cuda_launch_kernel(%[[K0]], %[[C4:.*]], %[[C1:.*]], %[[C1]], %[[C4]], %[[C1]], %[[C1]], %[[NOSHARED]], %[[ARGS0]])
// CHECK: %[[K1:.*]] = llvm.mlir.constant(1 : i64) : i64
// CHECK-NEXT: llvm.call @kiln_cuda_launch_kernel(%[[K1]], %[[C1]], %[[C1]], %[[C1]], %[[C4]], %[[C1]], %[[C1]], %{{.*}}, %[[ARGS1]])
// CHECK: llvm.mlir.constant(0 : i64) : i64
// CHECK-NEXT: %[[K0AGAIN:.*]] = llvm.mlir.constant(0 : i64) : i64
// CHECK-NEXT: llvm.call @kiln_cuda_launch_kernel(%[[K0AGAIN]],
// CHECK-NOT: gpu.launch_func
// CHECK: llvm.func @kiln_cuda_launch_kernel(i64, i64, i64, i64, i64, i64, i64, i64, !llvm.ptr)
module attributes {gpu.container_module} {
  llvm.mlir.global private constant @w(dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>) {addr_space = 0 : i32} : !llvm.array<4 x f32>
  llvm.mlir.global private constant @b(dense<5.0> : tensor<2xf32>) {addr_space = 0 : i32} : !llvm.array<2 x f32>
  gpu.binary @kiln_kernels  [#gpu.object<#nvvm.target, "PTX text">]
  llvm.func @main(%in: !llvm.ptr, %out: !llvm.ptr) {
    %c1 = llvm.mlir.constant(1 : index) : i64
    %c4 = llvm.mlir.constant(4 : index) : i64
    %w = llvm.mlir.addressof @w : !llvm.ptr
    %b = llvm.mlir.addressof @b : !llvm.ptr
    gpu.launch_func @kiln_kernels::@k0 blocks in (%c4, %c1, %c1) threads in (%c4, %c1, %c1) : i64 args(%c4 : i64, %in : !llvm.ptr, %w : !llvm.ptr, %out : !llvm.ptr)
    gpu.launch_func @kiln_kernels::@k1 blocks in (%c1, %c1, %c1) threads in (%c4, %c1, %c1) : i64 args(%out : !llvm.ptr, %b : !llvm.ptr)
    gpu.launch_func @kiln_kernels::@k0 blocks in (%c4, %c1, %c1) threads in (%c4, %c1, %c1) : i64 args(%c4 : i64, %in : !llvm.ptr, %w : !llvm.ptr, %out : !llvm.ptr)
    llvm.return
  }
}

// -----

// A mutable global would be host memory that the kernels cannot reach.
module attributes {gpu.container_module} {
  llvm.mlir.global private @state(dense<0.0> : tensor<4xf32>) {addr_space = 0 : i32} : !llvm.array<4 x f32>
  llvm.func @main(%out: !llvm.ptr) {
    // expected-error @+1 {{the GPU host code addresses 'state', which is not a constant with a plain value}}
    %s = llvm.mlir.addressof @state : !llvm.ptr
    llvm.return
  }
}
