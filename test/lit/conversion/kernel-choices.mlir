// RUN: kiln-opt %s --kiln-lower-to-linalg --split-input-file | FileCheck %s

// Each tunable layer's call is marked with its name (kernel and parameter
// block): two products of the same shape share one; the third is another.
// Untuned, the flags field (the last) keeps no schedule bits.
// CHECK-LABEL: func.func @untuned
// CHECK: arith.constant dense<[1, 1, 8, 2, 1, 8, 3, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0]> : tensor<17xi64>
// CHECK: kiln.call_kernel @kiln_conv2d_nhwc_f32
// CHECK-SAME: kiln.kernel_layer = "conv2d_nhwc_f32:1,1,8,2,1,8,3,1,1,1,1,0,0,1,1,1,0"
// CHECK: kiln.call_kernel @kiln_conv2d_nhwc_f32
// CHECK-SAME: kiln.kernel_layer = "conv2d_nhwc_f32:1,1,8,2,1,8,3,1,1,1,1,0,0,1,1,1,0"
// CHECK: kiln.call_kernel @kiln_conv2d_nhwc_f32
// CHECK-SAME: kiln.kernel_layer = "conv2d_nhwc_f32:1,1,4,2,1,4,3,1,1,1,1,0,0,1,1,1,0"
func.func @untuned(%a: tensor<8x2xf32>, %c: tensor<8x2xf32>, %d: tensor<4x2xf32>) -> (tensor<8x3xf32>, tensor<8x3xf32>, tensor<4x3xf32>) {
  %b = kiln.constant {value = dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>} : () -> tensor<2x3xf32>
  %0 = kiln.matmul %a, %b : (tensor<8x2xf32>, tensor<2x3xf32>) -> tensor<8x3xf32>
  %1 = kiln.matmul %c, %b : (tensor<8x2xf32>, tensor<2x3xf32>) -> tensor<8x3xf32>
  %2 = kiln.matmul %d, %b : (tensor<4x2xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
  return %0, %1, %2 : tensor<8x3xf32>, tensor<8x3xf32>, tensor<4x3xf32>
}

// -----

// A tuned choice (panel-major, blocks of 24 pixels: 64 | 128) goes into the
// named layer's flags, and only its schedule bits (a stray 1, the residual
// flag, is not taken); the layer without a choice keeps the heuristic.
// CHECK-LABEL: func.func @tuned
// CHECK: arith.constant dense<[1, 1, 8, 2, 1, 8, 3, 1, 1, 1, 1, 0, 0, 1, 1, 1, 192]> : tensor<17xi64>
// CHECK: kiln.call_kernel @kiln_conv2d_nhwc_f32
// CHECK: arith.constant dense<[1, 1, 4, 2, 1, 4, 3, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0]> : tensor<17xi64>
// CHECK: kiln.call_kernel @kiln_conv2d_nhwc_f32
module attributes {kiln.kernel_choices = {"conv2d_nhwc_f32:1,1,8,2,1,8,3,1,1,1,1,0,0,1,1,1,0" = 193 : i64}} {
func.func @tuned(%a: tensor<8x2xf32>, %d: tensor<4x2xf32>) -> (tensor<8x3xf32>, tensor<4x3xf32>) {
  %b = kiln.constant {value = dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>} : () -> tensor<2x3xf32>
  %0 = kiln.matmul %a, %b : (tensor<8x2xf32>, tensor<2x3xf32>) -> tensor<8x3xf32>
  %2 = kiln.matmul %d, %b : (tensor<4x2xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
  return %0, %2 : tensor<8x3xf32>, tensor<4x3xf32>
}
}
