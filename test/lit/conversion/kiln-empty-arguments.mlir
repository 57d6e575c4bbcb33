// RUN: kiln-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(kiln-empty-arguments))' | FileCheck %s
// An empty KV cache: the zero-element buffers become memref<0xT> in the
// signature and a zero-sized alloca of the original type inside.

// CHECK-LABEL: func.func @main
// CHECK-SAME: (%{{.*}}: memref<0xf32>, %[[X:.*]]: memref<2x3xf32>, %{{.*}}: memref<0xi64>, %{{.*}}: memref<0xf32>)
// CHECK: %[[A:.*]] = memref.alloca() : memref<1x4x0x16xf32>
// CHECK: %[[B:.*]] = memref.alloca() : memref<2x0xi64>
// CHECK: memref.dim %[[A]]
// CHECK: memref.dim %[[B]]
// CHECK: memref.dim %[[X]]
func.func @main(%past: memref<1x4x0x16xf32>, %x: memref<2x3xf32>, %idx: memref<2x0xi64>, %v: memref<0xf32>) {
  %c2 = arith.constant 2 : index
  %c1 = arith.constant 1 : index
  %0 = memref.dim %past, %c2 : memref<1x4x0x16xf32>
  %1 = memref.dim %idx, %c1 : memref<2x0xi64>
  %2 = memref.dim %x, %c1 : memref<2x3xf32>
  return
}

// -----

// Private functions (outlined helpers) keep their signature.
// CHECK-LABEL: func.func private @helper
// CHECK-SAME: memref<1x0xf32>
func.func private @helper(%a: memref<1x0xf32>) {
  return
}
