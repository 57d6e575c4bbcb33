// The kiln-level pipeline: shape inference with folding, then
// canonicalization (dead-code elimination) and CSE.
// RUN: kiln-opt %s --kiln-optimize --split-input-file | FileCheck %s

// CSE: two identical exps become one; DCE: the unused sigmoid disappears.
// CHECK-LABEL: func.func @cse_dce
// CHECK: %[[E:.*]] = kiln.exp %arg0
// CHECK-NOT: kiln.exp
// CHECK-NOT: kiln.sigmoid
// CHECK: kiln.add %[[E]], %[[E]]
func.func @cse_dce(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = kiln.exp %x : (tensor<4xf32>) -> tensor<4xf32>
  %b = kiln.exp %x : (tensor<4xf32>) -> tensor<4xf32>
  %dead = kiln.sigmoid %x : (tensor<4xf32>) -> tensor<4xf32>
  %s = kiln.add %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %s : tensor<4xf32>
}

// -----

// Folded shape arithmetic leaves no dead constants behind.
// CHECK-LABEL: func.func @no_leftovers
// CHECK-NEXT: %[[C:.*]] = kiln.constant {value = dense<[3, 2]> : tensor<2xi64>}
// CHECK-NEXT: %[[R:.*]] = kiln.reshape %arg0, %[[C]] {{.*}} -> tensor<3x2xf32>
// CHECK-NEXT: return %[[R]]
func.func @no_leftovers(%x: tensor<2x3xf32>) -> tensor<?x?xf32> {
  %s = kiln.shape %x {start = 0 : i64, end = 2 : i64} : (tensor<2x3xf32>) -> tensor<2xi64>
  %p = kiln.constant {value = dense<[1, 0]> : tensor<2xi64>} : () -> tensor<2xi64>
  %t = kiln.gather %s, %p {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
  %r = kiln.reshape %x, %t {allowzero = false} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}
