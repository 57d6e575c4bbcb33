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
