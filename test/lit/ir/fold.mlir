// Constant propagation through op folders, driven by the canonicalizer.
// RUN: kiln-opt %s --canonicalize --split-input-file | FileCheck %s

// Integer shape arithmetic folds: (12 / 4) * 2 + 1 = 7.
// CHECK-LABEL: func.func @arith
// CHECK-NEXT: %[[C:.*]] = kiln.constant {value = dense<7> : tensor<i64>}
// CHECK-NEXT: return %[[C]]
func.func @arith() -> tensor<i64> {
  %a = kiln.constant {value = dense<12> : tensor<i64>} : () -> tensor<i64>
  %b = kiln.constant {value = dense<4> : tensor<i64>} : () -> tensor<i64>
  %c = kiln.constant {value = dense<2> : tensor<i64>} : () -> tensor<i64>
  %d = kiln.constant {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %q = kiln.div %a, %b : (tensor<i64>, tensor<i64>) -> tensor<i64>
  %m = kiln.mul %q, %c : (tensor<i64>, tensor<i64>) -> tensor<i64>
  %s = kiln.add %m, %d : (tensor<i64>, tensor<i64>) -> tensor<i64>
  return %s : tensor<i64>
}

// -----

// Broadcasting in folds: [[1],[2]] + [10, 20, 30].
// CHECK-LABEL: func.func @broadcast_fold
// CHECK: dense<{{\[}}[11, 21, 31], [12, 22, 32]]> : tensor<2x3xi64>
func.func @broadcast_fold() -> tensor<2x3xi64> {
  %a = kiln.constant {value = dense<[[1], [2]]> : tensor<2x1xi64>} : () -> tensor<2x1xi64>
  %b = kiln.constant {value = dense<[10, 20, 30]> : tensor<3xi64>} : () -> tensor<3xi64>
  %s = kiln.add %a, %b : (tensor<2x1xi64>, tensor<3xi64>) -> tensor<2x3xi64>
  return %s : tensor<2x3xi64>
}

// -----

// BatchNorm-style constants: 2 / sqrt(3 + 1) = 1.
// CHECK-LABEL: func.func @float_fold
// CHECK-NEXT: kiln.constant {value = dense<1.000000e+00> : tensor<f32>}
func.func @float_fold() -> tensor<f32> {
  %s = kiln.constant {value = dense<2.0> : tensor<f32>} : () -> tensor<f32>
  %v = kiln.constant {value = dense<3.0> : tensor<f32>} : () -> tensor<f32>
  %e = kiln.constant {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %a = kiln.add %v, %e : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %r = kiln.sqrt %a : (tensor<f32>) -> tensor<f32>
  %f = kiln.div %s, %r : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %f : tensor<f32>
}

// -----

// Transpose, concat, gather, slice and cast of constants.
// CHECK-LABEL: func.func @data_movement
// CHECK-DAG: dense<{{\[}}[1, 3], [2, 4]]> : tensor<2x2xi64>
// CHECK-DAG: dense<[1, 2, 3, 4, 5]> : tensor<5xi64>
// CHECK-DAG: dense<[3, 1]> : tensor<2xi64>
// CHECK-DAG: dense<[5, 3]> : tensor<2xi64>
// CHECK-DAG: dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>
func.func @data_movement() -> (tensor<2x2xi64>, tensor<5xi64>, tensor<2xi64>, tensor<2xi64>, tensor<2xf32>) {
  %m = kiln.constant {value = dense<[[1, 2], [3, 4]]> : tensor<2x2xi64>} : () -> tensor<2x2xi64>
  %t = kiln.transpose %m {perm = array<i64: 1, 0>} : (tensor<2x2xi64>) -> tensor<2x2xi64>
  %a = kiln.constant {value = dense<[1, 2]> : tensor<2xi64>} : () -> tensor<2xi64>
  %b = kiln.constant {value = dense<[3, 4, 5]> : tensor<3xi64>} : () -> tensor<3xi64>
  %c = kiln.concat %a, %b {axis = 0 : i64} : (tensor<2xi64>, tensor<3xi64>) -> tensor<5xi64>
  %i = kiln.constant {value = dense<[-3, 0]> : tensor<2xi64>} : () -> tensor<2xi64>
  %g = kiln.gather %c, %i {axis = 0 : i64} : (tensor<5xi64>, tensor<2xi64>) -> tensor<2xi64>
  %st = kiln.constant {value = dense<[-1]> : tensor<1xi64>} : () -> tensor<1xi64>
  %en = kiln.constant {value = dense<[-4]> : tensor<1xi64>} : () -> tensor<1xi64>
  %ax = kiln.constant {value = dense<[0]> : tensor<1xi64>} : () -> tensor<1xi64>
  %sp = kiln.constant {value = dense<[-2]> : tensor<1xi64>} : () -> tensor<1xi64>
  %s = kiln.slice %c, %st, %en, %ax, %sp : (tensor<5xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>
  %f = kiln.cast %a {to = f32} : (tensor<2xi64>) -> tensor<2xf32>
  return %t, %c, %g, %s, %f : tensor<2x2xi64>, tensor<5xi64>, tensor<2xi64>, tensor<2xi64>, tensor<2xf32>
}

// -----

// No fold: operands that are not constants stay as ops.
// CHECK-LABEL: func.func @no_fold
// CHECK: kiln.add
// CHECK: kiln.transpose
func.func @no_fold(%x: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %one = kiln.constant {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %a = kiln.add %x, %one : (tensor<2x2xf32>, tensor<f32>) -> tensor<2x2xf32>
  %t = kiln.transpose %a {perm = array<i64: 1, 0>} : (tensor<2x2xf32>) -> tensor<2x2xf32>
  return %t : tensor<2x2xf32>
}

// -----

// No fold: integer division by zero is left for run time.
// CHECK-LABEL: func.func @no_fold_div_zero
// CHECK: kiln.div
func.func @no_fold_div_zero() -> tensor<i64> {
  %a = kiln.constant {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %z = kiln.constant {value = dense<0> : tensor<i64>} : () -> tensor<i64>
  %d = kiln.div %a, %z : (tensor<i64>, tensor<i64>) -> tensor<i64>
  return %d : tensor<i64>
}

// -----

// Identity folds: a reshape to the same type and an identity transpose.
// CHECK-LABEL: func.func @identity
// CHECK-NEXT: return %arg0
func.func @identity(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %s = kiln.constant {value = dense<[2, 3]> : tensor<2xi64>} : () -> tensor<2xi64>
  %r = kiln.reshape %x, %s {allowzero = false} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<2x3xf32>
  %t = kiln.transpose %r {perm = array<i64: 0, 1>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %t : tensor<2x3xf32>
}

// -----

// Unsigned constants: sign-agnostic ops fold (200 + 100 wraps to 44), but
// division, which the folders do with signed semantics, does not.
// CHECK-LABEL: func.func @unsigned
// CHECK-DAG: kiln.constant {value = dense<44> : tensor<ui8>}
// CHECK-DAG: kiln.div
func.func @unsigned() -> (tensor<ui8>, tensor<ui8>) {
  %a = kiln.constant {value = dense<200> : tensor<ui8>} : () -> tensor<ui8>
  %b = kiln.constant {value = dense<100> : tensor<ui8>} : () -> tensor<ui8>
  %s = kiln.add %a, %b : (tensor<ui8>, tensor<ui8>) -> tensor<ui8>
  %d = kiln.div %a, %b : (tensor<ui8>, tensor<ui8>) -> tensor<ui8>
  return %s, %d : tensor<ui8>, tensor<ui8>
}

// -----

// Zero pads are the identity (PyTorch's AvgPool2d export); nonzero ones stay.
// CHECK-LABEL: func.func @zero_pad
// CHECK-NOT: kiln.pad
// CHECK: return %arg0
func.func @zero_pad(%x: tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> {
  %p = kiln.constant {value = dense<0> : tensor<8xi64>} : () -> tensor<8xi64>
  %v = kiln.constant {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %y = kiln.pad %x, %p, %v {mode = "constant"} : (tensor<1x2x4x4xf32>, tensor<8xi64>, tensor<f32>) -> tensor<1x2x4x4xf32>
  return %y : tensor<1x2x4x4xf32>
}

// -----

// CHECK-LABEL: func.func @nonzero_pad
// CHECK: kiln.pad
func.func @nonzero_pad(%x: tensor<1x2x4x4xf32>) -> tensor<1x2x4x6xf32> {
  %p = kiln.constant {value = dense<[0, 0, 0, 1, 0, 0, 0, 1]> : tensor<8xi64>} : () -> tensor<8xi64>
  %v = kiln.constant {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %y = kiln.pad %x, %p, %v {mode = "constant"} : (tensor<1x2x4x4xf32>, tensor<8xi64>, tensor<f32>) -> tensor<1x2x4x6xf32>
  return %y : tensor<1x2x4x6xf32>
}

// -----

// A reshape of a reshape reads the original tensor: the inner one goes
// (here it had no other user). Not when the shape holds a 0, which copies
// a dimension of the inner result.
// CHECK-LABEL: func.func @reshape_of_reshape
// CHECK-DAG: %[[S6:.*]] = kiln.constant {value = dense<6> : tensor<1xi64>}
// CHECK-DAG: %[[S0:.*]] = kiln.constant {value = dense<[0, 1, 2]> : tensor<3xi64>}
// CHECK: %[[A:.*]] = kiln.reshape %arg0, %[[S6]] {{.*}} : (tensor<2x3xf32>, tensor<1xi64>) -> tensor<6xf32>
// CHECK: %[[I:.*]] = kiln.reshape %arg0, %{{.*}} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<3x2xf32>
// CHECK: %[[B:.*]] = kiln.reshape %[[I]], %[[S0]]
// CHECK: return %[[A]], %[[B]]
func.func @reshape_of_reshape(%x: tensor<2x3xf32>) -> (tensor<6xf32>, tensor<3x1x2xf32>) {
  %s32 = kiln.constant {value = dense<[3, 2]> : tensor<2xi64>} : () -> tensor<2xi64>
  %s6 = kiln.constant {value = dense<[6]> : tensor<1xi64>} : () -> tensor<1xi64>
  %s012 = kiln.constant {value = dense<[0, 1, 2]> : tensor<3xi64>} : () -> tensor<3xi64>
  %a = kiln.reshape %x, %s32 {allowzero = false} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<3x2xf32>
  %b = kiln.reshape %a, %s6 {allowzero = false} : (tensor<3x2xf32>, tensor<1xi64>) -> tensor<6xf32>
  %i = kiln.reshape %x, %s32 {allowzero = false} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<3x2xf32>
  %c = kiln.reshape %i, %s012 {allowzero = false} : (tensor<3x2xf32>, tensor<3xi64>) -> tensor<3x1x2xf32>
  return %b, %c : tensor<6xf32>, tensor<3x1x2xf32>
}

// -----

// A negative integer casts to a negative float (it once went through
// uint64 and became 1.8e19); ceil(-4 / -3) = 2.
// CHECK-LABEL: func.func @signed_int_to_float
// CHECK-DAG: kiln.constant {value = dense<-4.000000e+00> : tensor<f32>}
// CHECK-DAG: kiln.constant {value = dense<2.000000e+00> : tensor<f32>}
func.func @signed_int_to_float() -> (tensor<f32>, tensor<f32>) {
  %a = kiln.constant {value = dense<-4> : tensor<i32>} : () -> tensor<i32>
  %b = kiln.constant {value = dense<-3> : tensor<i32>} : () -> tensor<i32>
  %fa = kiln.cast %a {to = f32} : (tensor<i32>) -> tensor<f32>
  %fb = kiln.cast %b {to = f32} : (tensor<i32>) -> tensor<f32>
  %d = kiln.div %fa, %fb : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %c = kiln.ceil %d : (tensor<f32>) -> tensor<f32>
  return %fa, %c : tensor<f32>, tensor<f32>
}

// -----

// PyTorch's `expand(n, -1, -1)`: Where(Equal(shape, -1), ones, shape) on a
// constant shape folds, so the Expand's target is a constant.
// CHECK-LABEL: func.func @select_shape
// CHECK-NEXT: %[[C:.*]] = kiln.constant {value = dense<[2, 1, 768]> : tensor<3xi64>}
// CHECK-NEXT: return %[[C]]
func.func @select_shape() -> tensor<3xi64> {
  %s = kiln.constant {value = dense<[2, -1, -1]> : tensor<3xi64>} : () -> tensor<3xi64>
  %m = kiln.constant {value = dense<-1> : tensor<i64>} : () -> tensor<i64>
  %one = kiln.constant {value = dense<1> : tensor<3xi64>} : () -> tensor<3xi64>
  %other = kiln.constant {value = dense<[7, 1, 768]> : tensor<3xi64>} : () -> tensor<3xi64>
  %eq = kiln.equal %s, %m : (tensor<3xi64>, tensor<i64>) -> tensor<3xi1>
  %w = kiln.select %eq, %one, %s : (tensor<3xi1>, tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
  %n = kiln.constant {value = dense<[1, 1, 768]> : tensor<3xi64>} : () -> tensor<3xi64>
  %r = kiln.max %w, %n : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
  return %r : tensor<3xi64>
}

// -----

// A select with a broadcast condition picks element by element.
// CHECK-LABEL: func.func @select_broadcast
// CHECK: dense<{{\[}}[1, 20], [3, 40]]> : tensor<2x2xi64>
func.func @select_broadcast() -> tensor<2x2xi64> {
  %c = kiln.constant {value = dense<[true, false]> : tensor<2xi1>} : () -> tensor<2xi1>
  %a = kiln.constant {value = dense<[[1, 2], [3, 4]]> : tensor<2x2xi64>} : () -> tensor<2x2xi64>
  %b = kiln.constant {value = dense<[[10, 20], [30, 40]]> : tensor<2x2xi64>} : () -> tensor<2x2xi64>
  %r = kiln.select %c, %a, %b : (tensor<2xi1>, tensor<2x2xi64>, tensor<2x2xi64>) -> tensor<2x2xi64>
  return %r : tensor<2x2xi64>
}

// -----

// A select whose condition is a splat is the operand it picks, constant or not.
// CHECK-LABEL: func.func @select_splat
// CHECK-NEXT: return %arg1
func.func @select_splat(%a: tensor<3xf32>, %b: tensor<3xf32>) -> tensor<3xf32> {
  %c = kiln.constant {value = dense<false> : tensor<3xi1>} : () -> tensor<3xi1>
  %r = kiln.select %c, %a, %b : (tensor<3xi1>, tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %r : tensor<3xf32>
}

// -----

// Expand of a constant by a constant shape folds; not a non-constant input.
// CHECK-LABEL: func.func @expand_fold
// CHECK: dense<{{\[}}[1, 2], [1, 2], [1, 2]]> : tensor<3x2xi64>
// CHECK: kiln.expand %arg0
func.func @expand_fold(%x: tensor<1x2xf32>) -> (tensor<3x2xi64>, tensor<3x2xf32>) {
  %v = kiln.constant {value = dense<[[1, 2]]> : tensor<1x2xi64>} : () -> tensor<1x2xi64>
  %s = kiln.constant {value = dense<[3, 1]> : tensor<2xi64>} : () -> tensor<2xi64>
  %e = kiln.expand %v, %s : (tensor<1x2xi64>, tensor<2xi64>) -> tensor<3x2xi64>
  %f = kiln.expand %x, %s : (tensor<1x2xf32>, tensor<2xi64>) -> tensor<3x2xf32>
  return %e, %f : tensor<3x2xi64>, tensor<3x2xf32>
}

// -----

// A detector's resize scale: min(320 / min(h, w), 320 / max(h, w)) of a
// constant shape; reductions of constants fold.
// CHECK-LABEL: func.func @reduce_shape
// CHECK-DAG: dense<240> : tensor<i64>
// CHECK-DAG: dense<300> : tensor<i64>
// CHECK-DAG: dense<[6.000000e+00, 1.200000e+01]> : tensor<2xf32>
// CHECK-DAG: dense<[2.000000e+00, 4.000000e+00]> : tensor<2xf32>
// CHECK-DAG: dense<[6, 0]> : tensor<2xi64>
// CHECK-NOT: kiln.reduce
func.func @reduce_shape() -> (tensor<i64>, tensor<i64>, tensor<2xf32>, tensor<2xf32>, tensor<2xi64>) {
  %hw = kiln.constant {value = dense<[240, 300]> : tensor<2xi64>} : () -> tensor<2xi64>
  %lo = kiln.reduce_min %hw {axes = array<i64: 0>, keepdims = false} : (tensor<2xi64>) -> tensor<i64>
  %hi = kiln.reduce_max %hw {axes = array<i64: 0>, keepdims = false} : (tensor<2xi64>) -> tensor<i64>
  %m = kiln.constant {value = dense<[[1.0, 2.0, 3.0], [3.0, 4.0, 5.0]]> : tensor<2x3xf32>} : () -> tensor<2x3xf32>
  %s = kiln.reduce_sum %m {axes = array<i64: 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<2xf32>
  %mean = kiln.reduce_mean %m {axes = array<i64: 1>, keepdims = false} : (tensor<2x3xf32>) -> tensor<2xf32>
  %i = kiln.constant {value = dense<[[1, 2, 3], [0, 4, 5]]> : tensor<2x3xi64>} : () -> tensor<2x3xi64>
  %p = kiln.reduce_prod %i {axes = array<i64: 1>, keepdims = false} : (tensor<2x3xi64>) -> tensor<2xi64>
  return %lo, %hi, %s, %mean, %p : tensor<i64>, tensor<i64>, tensor<2xf32>, tensor<2xf32>, tensor<2xi64>
}

// -----

// A reduction over an empty axis gives the identity: 0 for a sum, -inf for
// a max.
// CHECK-LABEL: func.func @reduce_empty
// CHECK-DAG: dense<0.000000e+00> : tensor<2xf32>
// CHECK-DAG: dense<0xFF800000> : tensor<2xf32>
func.func @reduce_empty() -> (tensor<2xf32>, tensor<2xf32>) {
  %e = kiln.constant {value = dense<> : tensor<2x0xf32>} : () -> tensor<2x0xf32>
  %s = kiln.reduce_sum %e {axes = array<i64: 1>, keepdims = false} : (tensor<2x0xf32>) -> tensor<2xf32>
  %m = kiln.reduce_max %e {axes = array<i64: 1>, keepdims = false} : (tensor<2x0xf32>) -> tensor<2xf32>
  return %s, %m : tensor<2xf32>, tensor<2xf32>
}

// -----

// No identity folds on unknown dims: a select of a splat condition may
// broadcast the operand it picks (a: [1], b: [5] gives [5]), and a reshape
// from ?x? to ?x? may swap the two.
// CHECK-LABEL: func.func @no_identity_on_unknown_dims
// CHECK: kiln.select
// CHECK: kiln.reshape
func.func @no_identity_on_unknown_dims(%a: tensor<?xf32>, %b: tensor<?xf32>, %x: tensor<?x?xf32>,
                                       %s: tensor<2xi64>) -> (tensor<?xf32>, tensor<?x?xf32>) {
  %c = kiln.constant {value = dense<true> : tensor<i1>} : () -> tensor<i1>
  %w = kiln.select %c, %a, %b : (tensor<i1>, tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
  %r = kiln.reshape %x, %s {allowzero = false} : (tensor<?x?xf32>, tensor<2xi64>) -> tensor<?x?xf32>
  return %w, %r : tensor<?xf32>, tensor<?x?xf32>
}

// -----

// IEEE maximum: +0 is above -0.
// CHECK-LABEL: func.func @reduce_max_signed_zero
// CHECK: dense<0.000000e+00> : tensor<f32>
func.func @reduce_max_signed_zero() -> tensor<f32> {
  %z = kiln.constant {value = dense<[-0.0, 0.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %m = kiln.reduce_max %z {axes = array<i64: 0>, keepdims = false} : (tensor<2xf32>) -> tensor<f32>
  return %m : tensor<f32>
}
