// RUN: not kiln-opt %s --pass-pipeline='builtin.module(func.func(kiln-symbolic-dims),kiln-lower-to-linalg,canonicalize,cse)' --split-input-file 2>%t.err | FileCheck %s
// RUN: FileCheck %s --check-prefix=ERR < %t.err

// A reshape with dims known only at run time is lowered for every shape
// only where it keeps the element count for every value of those dims.
// [n, 256] to [-1, 64]: the -1 is n * 4 for every n.
// CHECK-LABEL: func.func @divides
// CHECK: tensor.reshape {{.*}} -> tensor<?x64xf32>
func.func @divides(%x: tensor<?x256xf32> {kiln.dim_names = ["n", ""]}) -> tensor<?x64xf32> {
  %s = arith.constant dense<[-1, 64]> : tensor<2xi64>
  %0 = kiln.reshape %x, %s {allowzero = false} : (tensor<?x256xf32>, tensor<2xi64>) -> tensor<?x64xf32> loc("reshape_64")
  return %0 : tensor<?x64xf32>
}

// -----

// [n, 256] to [-1, 7]: 256 n is a multiple of 7 for some n only (ONNX
// Runtime refuses the others); the run-time code would round the count
// down. Refused, naming the node, so that the model is compiled for each
// shape (where a bad one is an error).
// ERR: error: loc("reshape_7"): an operand has dynamic shape 'tensor<?x256xf32>'; give concrete input shapes
// ERR: error: loc("reshape_7"): the result has dynamic shape 'tensor<?x7xf32>'; give concrete input shapes
// ERR-NOT: error
func.func @floor(%x: tensor<?x256xf32> {kiln.dim_names = ["n", ""]}) -> tensor<?x7xf32> {
  %s = arith.constant dense<[-1, 7]> : tensor<2xi64>
  %0 = kiln.reshape %x, %s {allowzero = false} : (tensor<?x256xf32>, tensor<2xi64>) -> tensor<?x7xf32> loc("reshape_7")
  return %0 : tensor<?x7xf32>
}

// -----

// x [n, 4] to the shape of y [m, 4]: the result's rows are the ones the
// element count gives, n (an entry of y's shape could be 0 at run time,
// "copy the input's dim", so it is not taken as the rows). Shape values
// are materialised first (y's m, x's n read at the entry), then the
// fused-kernel patterns erase what nothing used yet, x's `tensor.dim`
// among them; the reshape's size must be read again, not taken from the
// erased op (that crashed).
// CHECK-LABEL: func.func @other_input
// CHECK: %[[N:.*]] = tensor.dim %arg0, %c0
// CHECK: %[[N64:.*]] = arith.index_cast %[[N]]
// CHECK: %[[SHAPE:.*]] = tensor.from_elements %[[N64]], %c4_i64
// CHECK: tensor.reshape %arg0(%[[SHAPE]]) : (tensor<?x4xf32>, tensor<2xi64>) -> tensor<?x4xf32>
func.func @other_input(%x: tensor<?x4xf32> {kiln.dim_names = ["n", ""]},
                       %y: tensor<?x4xf32> {kiln.dim_names = ["m", ""]}) -> tensor<?x4xf32> {
  %s = kiln.shape %y {start = 0 : i64, end = 2 : i64} : (tensor<?x4xf32>) -> tensor<2xi64>
  %0 = kiln.reshape %x, %s {allowzero = false} : (tensor<?x4xf32>, tensor<2xi64>) -> tensor<?x4xf32> loc("reshape_like_y")
  return %0 : tensor<?x4xf32>
}
