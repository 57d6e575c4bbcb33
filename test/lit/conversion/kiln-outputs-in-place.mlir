// RUN: kiln-opt %s --split-input-file --kiln-outputs-in-place | FileCheck %s

// A buffer reshaped and copied into the output: the kernel writes the
// output itself, through a view of it with the buffer's shape.
// CHECK-LABEL: func.func @reshaped
// CHECK-SAME:  (%[[X:.*]]: memref<4xf32>, %[[OUT:.*]]: memref<4xf32>)
// CHECK-NOT:   memref.alloc
// CHECK:       %[[V:.*]] = memref.expand_shape %[[OUT]] {{\[\[}}0, 1]] output_shape [1, 4] : memref<4xf32> into memref<1x4xf32>
// CHECK:       linalg.generic {{.*}} outs(%[[V]] : memref<1x4xf32>)
// CHECK-NOT:   memref.copy
// CHECK:       return
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @reshaped(%x: memref<4xf32>, %out: memref<4xf32>) {
  %a = memref.alloc() {alignment = 64 : i64} : memref<1x4xf32>
  %xe = memref.expand_shape %x [[0, 1]] output_shape [1, 4] : memref<4xf32> into memref<1x4xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%xe : memref<1x4xf32>) outs(%a : memref<1x4xf32>) {
  ^bb0(%in: f32, %o: f32):
    %n = arith.negf %in : f32
    linalg.yield %n : f32
  }
  %r = memref.collapse_shape %a [[0, 1]] : memref<1x4xf32> into memref<4xf32>
  memref.copy %r, %out : memref<4xf32> to memref<4xf32>
  return
}

// -----

// Shapes of different rank on both sides: collapsed to one dimension, then
// expanded to the buffer's shape.
// CHECK-LABEL: func.func @regrouped
// CHECK:       %[[F:.*]] = memref.collapse_shape %{{.*}} {{\[\[}}0, 1]] : memref<2x6xf32> into memref<12xf32>
// CHECK:       memref.expand_shape %[[F]] {{\[\[}}0, 1, 2]] output_shape [3, 2, 2] : memref<12xf32> into memref<3x2x2xf32>
// CHECK-NOT:   memref.copy
func.func @regrouped(%out: memref<2x6xf32>) {
  %shape = memref.alloca() : memref<2xi64>
  %a = memref.alloc() : memref<3x2x2xf32>
  %c = arith.constant 1.0 : f32
  linalg.fill ins(%c : f32) outs(%a : memref<3x2x2xf32>)
  %r = memref.reshape %a(%shape) : (memref<3x2x2xf32>, memref<2xi64>) -> memref<2x6xf32>
  memref.copy %r, %out : memref<2x6xf32> to memref<2x6xf32>
  return
}

// -----

// The buffer is written again after the copy: the output must keep the
// copied values, so the copy stays.
// CHECK-LABEL: func.func @written_after
// CHECK:       memref.alloc
// CHECK:       memref.copy
// CHECK:       linalg.fill
func.func @written_after(%out: memref<4xf32>) {
  %a = memref.alloc() : memref<4xf32>
  %c = arith.constant 1.0 : f32
  %d = arith.constant 2.0 : f32
  linalg.fill ins(%c : f32) outs(%a : memref<4xf32>)
  memref.copy %a, %out : memref<4xf32> to memref<4xf32>
  linalg.fill ins(%d : f32) outs(%a : memref<4xf32>)
  return
}

// -----

// A part of a buffer (subview), and an output argument with another use,
// are left alone.
// CHECK-LABEL: func.func @not_whole
// CHECK-COUNT-2: memref.copy
func.func @not_whole(%out: memref<4xf32>, %out2: memref<4xf32>) {
  %a = memref.alloc() : memref<8xf32>
  %b = memref.alloc() : memref<4xf32>
  %c = arith.constant 1.0 : f32
  linalg.fill ins(%c : f32) outs(%a : memref<8xf32>)
  linalg.fill ins(%c : f32) outs(%b : memref<4xf32>)
  %s = memref.subview %a[0] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1]>>
  memref.copy %s, %out : memref<4xf32, strided<[1]>> to memref<4xf32>
  memref.copy %b, %out2 : memref<4xf32> to memref<4xf32>
  %i = arith.constant 0 : index
  %v = memref.load %out2[%i] : memref<4xf32>
  return
}

// -----

// Outputs of run-time size: a cache's concatenation into a buffer of the
// output's type is written into the output itself; a buffer of another
// shape becomes a view of the output with the buffer's own run-time sizes.
// CHECK-LABEL: func.func @run_time_sizes
// CHECK-SAME:  (%[[P:.*]]: memref<?x4x?x8xf32>, %[[N:.*]]: index, %[[OUT:.*]]: memref<?x4x?x8xf32>, %[[OUT2:.*]]: memref<?xf32>)
// CHECK-NOT:   memref.alloc
// CHECK:       %[[S:.*]] = memref.subview %[[OUT]]
// CHECK:       memref.copy %[[P]], %[[S]]
// CHECK:       %[[V:.*]] = memref.expand_shape %[[OUT2]] {{\[\[}}0, 1]] output_shape [%[[N]], 8] : memref<?xf32> into memref<?x8xf32>
// CHECK:       linalg.fill {{.*}} outs(%[[V]] : memref<?x8xf32>)
// CHECK-NOT:   memref.copy
// CHECK:       return
func.func @run_time_sizes(%past: memref<?x4x?x8xf32>, %n: index, %out: memref<?x4x?x8xf32>,
                          %out2: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %b = memref.dim %past, %c0 : memref<?x4x?x8xf32>
  %l = memref.dim %past, %c2 : memref<?x4x?x8xf32>
  %l1 = arith.addi %l, %n : index
  %a = memref.alloc(%b, %l1) : memref<?x4x?x8xf32>
  %s = memref.subview %a[0, 0, 0, 0] [%b, 4, %l, 8] [1, 1, 1, 1]
      : memref<?x4x?x8xf32> to memref<?x4x?x8xf32, strided<[?, ?, 8, 1]>>
  memref.copy %past, %s : memref<?x4x?x8xf32> to memref<?x4x?x8xf32, strided<[?, ?, 8, 1]>>
  %c = arith.constant 1.0 : f32
  %a2 = memref.alloc(%n) : memref<?x8xf32>
  linalg.fill ins(%c : f32) outs(%a2 : memref<?x8xf32>)
  %r = memref.collapse_shape %a2 [[0, 1]] : memref<?x8xf32> into memref<?xf32>
  memref.copy %a, %out : memref<?x4x?x8xf32> to memref<?x4x?x8xf32>
  memref.copy %r, %out2 : memref<?xf32> to memref<?xf32>
  return
}

// -----

// A buffer [x, y] reshaped to [y, x] and copied into an output of the same
// type: alike types of run-time size, other sizes. The buffer becomes a
// view of the output with its own sizes (collapsed and expanded), not the
// output as it is.
// CHECK-LABEL: func.func @alike_types_other_sizes
// CHECK-SAME:  (%[[X:.*]]: index, %[[Y:.*]]: index, %[[OUT:.*]]: memref<?x?xf32>)
// CHECK:       %[[F:.*]] = memref.collapse_shape %[[OUT]] {{\[\[}}0, 1]] : memref<?x?xf32> into memref<?xf32>
// CHECK:       %[[V:.*]] = memref.expand_shape %[[F]] {{\[\[}}0, 1]] output_shape [%[[X]], %[[Y]]] : memref<?xf32> into memref<?x?xf32>
// CHECK:       linalg.fill {{.*}} outs(%[[V]] : memref<?x?xf32>)
// CHECK-NOT:   memref.copy
func.func @alike_types_other_sizes(%x: index, %y: index, %out: memref<?x?xf32>) {
  %a = memref.alloc(%x, %y) : memref<?x?xf32>
  %c = arith.constant 1.0 : f32
  linalg.fill ins(%c : f32) outs(%a : memref<?x?xf32>)
  %f = memref.collapse_shape %a [[0, 1]] : memref<?x?xf32> into memref<?xf32>
  %r = memref.expand_shape %f [[0, 1]] output_shape [%y, %x] : memref<?xf32> into memref<?x?xf32>
  memref.copy %r, %out : memref<?x?xf32> to memref<?x?xf32>
  return
}

// -----

// A static buffer copied into an output of run-time size (shape inference
// proved the output's dims; the signature kept them open), and the reverse:
// the copies stay.
// CHECK-LABEL: func.func @static_and_run_time
// CHECK-COUNT-2: memref.copy
func.func @static_and_run_time(%n: index, %out: memref<?x8xf32>, %out2: memref<4x8xf32>) {
  %a = memref.alloc() : memref<4x8xf32>
  %b = memref.alloc(%n) : memref<?x8xf32>
  %c = arith.constant 1.0 : f32
  linalg.fill ins(%c : f32) outs(%a : memref<4x8xf32>)
  linalg.fill ins(%c : f32) outs(%b : memref<?x8xf32>)
  %ca = memref.cast %a : memref<4x8xf32> to memref<?x8xf32>
  %cb = memref.cast %b : memref<?x8xf32> to memref<4x8xf32>
  memref.copy %ca, %out : memref<?x8xf32> to memref<?x8xf32>
  memref.copy %cb, %out2 : memref<4x8xf32> to memref<4x8xf32>
  return
}
