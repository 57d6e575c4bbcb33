// RUN: kiln-opt %s --kiln-conv-to-2d --split-input-file | FileCheck %s

// A 3x3x3 convolution padded by 1: the depth padded (pads of axis 2 only),
// depths od + kd gathered as [OD = 4][KD = 3], moved next to the batch and
// the channels, folded: a 2-D convolution of [4, 2 * 3, 6, 6] with the
// kernel read as [3, 6, 3, 3] (a new constant), padded in H and W only.
// CHECK-LABEL: func.func @conv3d
// CHECK-DAG: %[[W2:.*]] = kiln.constant {value = dense<5.000000e-01> : tensor<3x6x3x3xf32>}
// CHECK-DAG: %[[DEPTHS:.*]] = kiln.constant {value = dense<{{\[}}[0, 1, 2], [1, 2, 3], [2, 3, 4], [3, 4, 5]]> : tensor<4x3xi64>}
// CHECK-DAG: %[[PADS:.*]] = kiln.constant {value = dense<[0, 0, 1, 0, 0, 0, 0, 1, 0, 0]> : tensor<10xi64>}
// CHECK: %[[P:.*]] = kiln.pad %arg0, %[[PADS]], {{.*}} -> tensor<1x2x6x6x6xf32>
// CHECK: %[[G:.*]] = kiln.gather %[[P]], %[[DEPTHS]] {axis = 2 : i64} {{.*}} -> tensor<1x2x4x3x6x6xf32>
// CHECK: %[[T:.*]] = kiln.transpose %[[G]] {perm = array<i64: 0, 2, 1, 3, 4, 5>}
// CHECK: %[[X2:.*]] = kiln.reshape %[[T]], {{.*}} -> tensor<4x6x6x6xf32>
// CHECK: %[[C:.*]] = kiln.conv %[[X2]], %[[W2]] {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<4x6x6x6xf32>, tensor<3x6x3x3xf32>) -> tensor<4x3x6x6xf32>
// CHECK: %[[R:.*]] = kiln.reshape %[[C]], {{.*}} -> tensor<1x4x3x6x6xf32>
// CHECK: %[[Y:.*]] = kiln.transpose %[[R]] {perm = array<i64: 0, 2, 1, 3, 4>} {{.*}} -> tensor<1x3x4x6x6xf32>
// CHECK: return %[[Y]]
func.func @conv3d(%x: tensor<1x2x4x6x6xf32>) -> tensor<1x3x4x6x6xf32> {
  %w = kiln.constant {value = dense<0.5> : tensor<3x2x3x3x3xf32>} : () -> tensor<3x2x3x3x3xf32>
  %y = kiln.conv %x, %w {dilations = array<i64: 1, 1, 1>, group = 1 : i64, pads = array<i64: 1, 1, 1, 1, 1, 1>, strides = array<i64: 1, 1, 1>} : (tensor<1x2x4x6x6xf32>, tensor<3x2x3x3x3xf32>) -> tensor<1x3x4x6x6xf32>
  return %y : tensor<1x3x4x6x6xf32>
}

// -----

// Stride 2 and dilation 2 in depth, no depth pads (no kiln.pad), groups and
// a bias passed on, a kernel that is not a constant (reshaped by kiln.reshape):
// depths 2 od + 2 kd of 7, OD = 3, KD = 2.
// CHECK-LABEL: func.func @conv3d_strided
// CHECK-NOT: kiln.pad
// CHECK: kiln.gather %arg0, {{.*}} {axis = 2 : i64} : (tensor<1x4x7x5x5xf32>, tensor<3x2xi64>) -> tensor<1x4x3x2x5x5xf32>
// CHECK: %[[W2:.*]] = kiln.reshape %arg1, {{.*}} -> tensor<6x4x1x1xf32>
// CHECK: kiln.conv {{.*}}, %[[W2]], %arg2 {dilations = array<i64: 1, 1>, group = 2 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 2>} : (tensor<3x8x5x5xf32>, tensor<6x4x1x1xf32>, tensor<6xf32>) -> tensor<3x6x5x3xf32>
func.func @conv3d_strided(%x: tensor<1x4x7x5x5xf32>, %w: tensor<6x2x2x1x1xf32>, %b: tensor<6xf32>) -> tensor<1x6x3x5x3xf32> {
  %y = kiln.conv %x, %w, %b {dilations = array<i64: 2, 1, 1>, group = 2 : i64, pads = array<i64: 0, 0, 0, 0, 0, 0>, strides = array<i64: 2, 1, 2>} : (tensor<1x4x7x5x5xf32>, tensor<6x2x2x1x1xf32>, tensor<6xf32>) -> tensor<1x6x3x5x3xf32>
  return %y : tensor<1x6x3x5x3xf32>
}

// -----

// 1-D: [N, C, L] as [N, C, 1, L], the kernel as [F, C/g, 1, K]; stride,
// pads and dilation move to W.
// CHECK-LABEL: func.func @conv1d
// CHECK-DAG: %[[W2:.*]] = kiln.constant {value = dense<1.000000e+00> : tensor<4x2x1x3xf32>}
// CHECK: %[[X2:.*]] = kiln.reshape %arg0, {{.*}} -> tensor<2x4x1x17xf32>
// CHECK: %[[C:.*]] = kiln.conv %[[X2]], %[[W2]] {dilations = array<i64: 1, 2>, group = 2 : i64, pads = array<i64: 0, 3, 0, 1>, strides = array<i64: 1, 2>} : (tensor<2x4x1x17xf32>, tensor<4x2x1x3xf32>) -> tensor<2x4x1x9xf32>
// CHECK: kiln.reshape %[[C]], {{.*}} -> tensor<2x4x9xf32>
func.func @conv1d(%x: tensor<2x4x17xf32>) -> tensor<2x4x9xf32> {
  %w = kiln.constant {value = dense<1.0> : tensor<4x2x3xf32>} : () -> tensor<4x2x3xf32>
  %y = kiln.conv %x, %w {dilations = array<i64: 2>, group = 2 : i64, pads = array<i64: 3, 1>, strides = array<i64: 2>} : (tensor<2x4x17xf32>, tensor<4x2x3xf32>) -> tensor<2x4x9xf32>
  return %y : tensor<2x4x9xf32>
}

// -----

// 2-D convolutions and dynamic shapes are left alone.
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT: kiln.gather
// CHECK-COUNT-2: kiln.conv
// CHECK-NOT: kiln.reshape
func.func @left_alone(%x: tensor<1x2x6x6xf32>, %w: tensor<3x2x3x3xf32>, %d: tensor<1x2x?x6x6xf32>, %w3: tensor<3x2x1x1x1xf32>) -> (tensor<1x3x4x4xf32>, tensor<1x3x?x6x6xf32>) {
  %y = kiln.conv %x, %w {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x6x6xf32>, tensor<3x2x3x3xf32>) -> tensor<1x3x4x4xf32>
  %z = kiln.conv %d, %w3 {dilations = array<i64: 1, 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0, 0, 0>, strides = array<i64: 1, 1, 1>} : (tensor<1x2x?x6x6xf32>, tensor<3x2x1x1x1xf32>) -> tensor<1x3x?x6x6xf32>
  return %y, %z : tensor<1x3x4x4xf32>, tensor<1x3x?x6x6xf32>
}
