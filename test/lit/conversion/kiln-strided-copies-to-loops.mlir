// RUN: kiln-opt %s --kiln-strided-copies-to-loops | FileCheck %s

// A copy out of a strided view becomes linalg.copy (loops later)...
// CHECK-LABEL: func.func @strided
// CHECK-NOT: memref.copy
// CHECK: linalg.copy ins(%{{.*}} : memref<4xf32, strided<[2]>>) outs(%{{.*}} : memref<4xf32>)
func.func @strided(%src: memref<4xf32, strided<[2]>>, %dst: memref<4xf32>) {
  memref.copy %src, %dst : memref<4xf32, strided<[2]>> to memref<4xf32>
  return
}

// ...while a contiguous copy stays a memref.copy, which lowers to memcpy.
// CHECK-LABEL: func.func @contiguous
// CHECK: memref.copy
// CHECK-NOT: linalg.copy
func.func @contiguous(%src: memref<4xf32>, %dst: memref<4xf32>) {
  memref.copy %src, %dst : memref<4xf32> to memref<4xf32>
  return
}
