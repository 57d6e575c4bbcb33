// RUN: kiln-opt %s --kiln-infer-shapes --split-input-file --verify-diagnostics | FileCheck %s

// Broadcasting refines `?` and unranked results; the signature follows.
// CHECK-LABEL: func.func @broadcast
// CHECK-SAME: -> tensor<4x3xf32>
// CHECK: kiln.add %{{.*}}, %{{.*}} : (tensor<4x1xf32>, tensor<3xf32>) -> tensor<4x3xf32>
func.func @broadcast(%a: tensor<4x1xf32>, %b: tensor<3xf32>) -> tensor<*xf32> {
  %0 = kiln.add %a, %b : (tensor<4x1xf32>, tensor<3xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

// The Shape -> Gather -> Unsqueeze -> Concat -> Reshape chain of exported
// transformers folds away once the input shape is known: the reshape
// target becomes a constant and the reshape gets a static type.
// CHECK-LABEL: func.func @shape_chain
// CHECK-SAME: -> tensor<1x37x4x64xf32>
// CHECK-NOT: kiln.shape
// CHECK-NOT: kiln.gather
// CHECK-NOT: kiln.concat
// CHECK: kiln.constant {value = dense<[1, 37, 4, 64]> : tensor<4xi64>}
// CHECK: kiln.reshape {{.*}} -> tensor<1x37x4x64xf32>
func.func @shape_chain(%x: tensor<1x37x256xf32>) -> tensor<?x?x?x?xf32> {
  %s = kiln.shape %x {start = 0 : i64, end = 3 : i64} : (tensor<1x37x256xf32>) -> tensor<3xi64>
  %i0 = kiln.constant {value = dense<0> : tensor<i64>} : () -> tensor<i64>
  %i1 = kiln.constant {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %d0 = kiln.gather %s, %i0 {axis = 0 : i64} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %d1 = kiln.gather %s, %i1 {axis = 0 : i64} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %u0 = kiln.unsqueeze %d0 {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %u1 = kiln.unsqueeze %d1 {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %rest = kiln.constant {value = dense<[4, 64]> : tensor<2xi64>} : () -> tensor<2xi64>
  %target = kiln.concat %u0, %u1, %rest {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>, tensor<2xi64>) -> tensor<4xi64>
  %r = kiln.reshape %x, %target {allowzero = false} : (tensor<1x37x256xf32>, tensor<4xi64>) -> tensor<?x?x?x?xf32>
  return %r : tensor<?x?x?x?xf32>
}

// -----

// With a dynamic dimension the chain cannot fold: the shape op stays and
// the reshape keeps its unknown dims.
// CHECK-LABEL: func.func @dynamic_stays
// CHECK: kiln.shape
// CHECK: kiln.reshape {{.*}} -> tensor<?x?xf32>
func.func @dynamic_stays(%x: tensor<?x256xf32>) -> tensor<?x?xf32> {
  %s = kiln.shape %x {start = 0 : i64, end = 2 : i64} : (tensor<?x256xf32>) -> tensor<2xi64>
  %r = kiln.reshape %x, %s {allowzero = false} : (tensor<?x256xf32>, tensor<2xi64>) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}

// -----

// Convolution output extents: (8 + 1 + 1 - 3) / 2 + 1 = 4.
// CHECK-LABEL: func.func @conv
// CHECK: -> tensor<1x4x4x4xf32>
func.func @conv(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<*xf32> {
  %y = kiln.conv %x, %w {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<*xf32>
  return %y : tensor<*xf32>
}

// -----

func.func @bad_broadcast(%a: tensor<4xf32>, %b: tensor<3xf32>) -> tensor<*xf32> {
  // expected-error @+2 {{operands cannot be broadcast together}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.add %a, %b : (tensor<4xf32>, tensor<3xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

// A 0 in a reshape target copies the input's dimension; an unknown one stays
// unknown (its sentinel is no size: it used to fail as "reshape shape has
// negative dimension -9223372036854775808" on a BiLSTM's Reshape).
// CHECK-LABEL: func.func @reshape_copies_unknown_dim
// CHECK-SAME: -> tensor<?x40x2x48xf32>
func.func @reshape_copies_unknown_dim(%x: tensor<?x40x96xf32>) -> tensor<*xf32> {
  %s = kiln.constant {value = dense<[0, 40, 2, 48]> : tensor<4xi64>} : () -> tensor<4xi64>
  %r = kiln.reshape %x, %s {allowzero = false} : (tensor<?x40x96xf32>, tensor<4xi64>) -> tensor<*xf32>
  return %r : tensor<*xf32>
}

// -----

// With a -1 beside a copied unknown dimension, neither is known.
// CHECK-LABEL: func.func @reshape_copies_unknown_dim_and_infers
// CHECK-SAME: -> tensor<?x?x48xf32>
func.func @reshape_copies_unknown_dim_and_infers(%x: tensor<?x40x96xf32>) -> tensor<*xf32> {
  %s = kiln.constant {value = dense<[0, -1, 48]> : tensor<3xi64>} : () -> tensor<3xi64>
  %r = kiln.reshape %x, %s {allowzero = false} : (tensor<?x40x96xf32>, tensor<3xi64>) -> tensor<*xf32>
  return %r : tensor<*xf32>
}
