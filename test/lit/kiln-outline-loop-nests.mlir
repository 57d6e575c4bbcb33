// RUN: kiln-opt %s --kiln-outline-loop-nests --split-input-file | FileCheck %s

// Two planned buffers (distinct views of the workspace) are noalias in the
// outlined function; a subview of the same buffer as another operand is not.
// CHECK-LABEL: func.func private @main_op0(%arg0: memref<8xf32> {llvm.noalias}, %arg1: memref<8xf32> {llvm.noalias})
// CHECK: linalg.generic
// CHECK: arith.addf
// CHECK: func.func private @main_op1(%arg0: memref<2x8xf32>, %arg1: memref<8x2xf32>)
// CHECK: linalg.transpose
// CHECK-LABEL: func.func @main
// CHECK: call @main_op0(%[[A:.*]], %[[B:.*]]) : (memref<8xf32>, memref<8xf32>) -> ()
// CHECK: call @main_op1
#map = affine_map<(d0) -> (d0)>
func.func @main(%ws: memref<256xi8>, %out: memref<16xf32>) {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %one = arith.constant 1.0 : f32
  %a = memref.view %ws[%c0][] : memref<256xi8> to memref<8xf32>
  %b = memref.view %ws[%c64][] : memref<256xi8> to memref<8xf32>
  linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%a : memref<8xf32>) outs(%b : memref<8xf32>) {
  ^bb0(%x: f32, %y: f32):
    %s = arith.addf %x, %one : f32
    linalg.yield %s : f32
  }
  %e = memref.expand_shape %out [[0, 1]] output_shape [2, 8] : memref<16xf32> into memref<2x8xf32>
  %t = memref.expand_shape %out [[0, 1]] output_shape [8, 2] : memref<16xf32> into memref<8x2xf32>
  linalg.transpose ins(%e : memref<2x8xf32>) outs(%t : memref<8x2xf32>) permutation = [1, 0]
  return
}

// -----

// An operand whose buffer is not known (a select between two buffers) could
// be either: no argument of that op is noalias.
// CHECK-LABEL: func.func private @select_op0(%arg0: memref<8xf32>, %arg1: memref<8xf32>)
func.func @select(%c: i1, %a: memref<8xf32>, %b: memref<8xf32>) {
  %s = arith.select %c, %a, %b : memref<8xf32>
  linalg.copy ins(%s : memref<8xf32>) outs(%a : memref<8xf32>)
  return
}

// -----

// A strided view (a slice of a concatenation) cannot cross the bare-pointer
// calling convention: the function gets the whole buffer and remakes the
// view inside. The two operands come from different buffers: noalias.
// CHECK-LABEL: func.func private @strided_op0(%arg0: memref<2x8xf32> {llvm.noalias}, %arg1: memref<2x3xf32> {llvm.noalias})
// CHECK: %[[V:.*]] = memref.subview %arg0[0, 5] [2, 3] [1, 1] : memref<2x8xf32> to memref<2x3xf32, strided<[8, 1], offset: 5>>
// CHECK: linalg.copy ins(%[[V]] : memref<2x3xf32, strided<[8, 1], offset: 5>>) outs(%arg1 : memref<2x3xf32>)
// CHECK-LABEL: func.func @strided
// CHECK: call @strided_op0(%arg0, %arg1) : (memref<2x8xf32>, memref<2x3xf32>) -> ()
func.func @strided(%a: memref<2x8xf32>, %b: memref<2x3xf32>) {
  %v = memref.subview %a[0, 5] [2, 3] [1, 1] : memref<2x8xf32> to memref<2x3xf32, strided<[8, 1], offset: 5>>
  linalg.copy ins(%v : memref<2x3xf32, strided<[8, 1], offset: 5>>) outs(%b : memref<2x3xf32>)
  return
}
