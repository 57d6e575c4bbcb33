// RUN: kiln-opt %s --kiln-flatten-globals | FileCheck %s

// A 2-D constant global is stored flat; its use gets a view of the old shape.
// CHECK: memref.global "private" constant @w : memref<6xf32> = dense<[1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00, 5.000000e+00, 6.000000e+00]>
// 1-D and scalar globals are left alone.
// CHECK: memref.global "private" constant @v : memref<3xf32>
// CHECK-LABEL: func.func @use
// CHECK: %[[FLAT:.*]] = memref.get_global @w : memref<6xf32>
// CHECK: %[[VIEW:.*]] = memref.expand_shape %[[FLAT]] {{\[}}[0, 1]] output_shape [2, 3] : memref<6xf32> into memref<2x3xf32>
// CHECK: memref.copy %[[VIEW]]
// CHECK: memref.get_global @v : memref<3xf32>
memref.global "private" constant @w : memref<2x3xf32> = dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]>
memref.global "private" constant @v : memref<3xf32> = dense<[1.0, 2.0, 3.0]>
func.func @use(%out: memref<2x3xf32>, %out2: memref<3xf32>) {
  %0 = memref.get_global @w : memref<2x3xf32>
  memref.copy %0, %out : memref<2x3xf32> to memref<2x3xf32>
  %1 = memref.get_global @v : memref<3xf32>
  memref.copy %1, %out2 : memref<3xf32> to memref<3xf32>
  return
}
