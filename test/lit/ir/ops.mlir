// Round trip and verifiers of the kiln ops.
// RUN: kiln-opt %s --split-input-file --verify-diagnostics | FileCheck %s

// CHECK-LABEL: func.func @roundtrip
// CHECK: kiln.conv %{{.*}}, %{{.*}}, %{{.*}} {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x3x4x4xf32>, tensor<2x3x1x1xf32>, tensor<2xf32>) -> tensor<1x2x4x4xf32>
// CHECK: kiln.max_pool %{{.*}} {dilations = array<i64: 1, 1>, kernel_shape = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<1x2x4x4xf32>) -> tensor<1x2x2x2xf32>
// CHECK: kiln.reduce_mean %{{.*}} {axes = array<i64: 2, 3>, keepdims = true}
func.func @roundtrip(%x: tensor<1x3x4x4xf32>, %w: tensor<2x3x1x1xf32>, %b: tensor<2xf32>) -> tensor<1x2x1x1xf32> {
  %0 = kiln.conv %x, %w, %b {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x3x4x4xf32>, tensor<2x3x1x1xf32>, tensor<2xf32>) -> tensor<1x2x4x4xf32>
  %1 = kiln.max_pool %0 {dilations = array<i64: 1, 1>, kernel_shape = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<1x2x4x4xf32>) -> tensor<1x2x2x2xf32>
  %2 = kiln.reduce_mean %1 {axes = array<i64: 2, 3>, keepdims = true} : (tensor<1x2x2x2xf32>) -> tensor<1x2x1x1xf32>
  return %2 : tensor<1x2x1x1xf32>
}

// -----

// A declared type less precise than the inferred one is accepted.
// CHECK-LABEL: func.func @less_precise
// CHECK: kiln.matmul {{.*}} -> tensor<?x5xf32>
func.func @less_precise(%a: tensor<4x3xf32>, %b: tensor<3x5xf32>) -> tensor<?x5xf32> {
  %0 = kiln.matmul %a, %b : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<?x5xf32>
  return %0 : tensor<?x5xf32>
}

// -----

func.func @contradiction(%a: tensor<4x3xf32>, %b: tensor<3x5xf32>) -> tensor<4x6xf32> {
  // expected-error @+2 {{inferred type(s) 'tensor<4x5xf32>' are incompatible with return type(s) of operation 'tensor<4x6xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.matmul %a, %b : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x6xf32>
  return %0 : tensor<4x6xf32>
}

// -----

func.func @bad_perm(%x: tensor<2x3xf32>) -> tensor<3x2xf32> {
  // expected-error @+2 {{perm is not a permutation}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.transpose %x {perm = array<i64: 0, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

func.func @conv_channels(%x: tensor<1x3x4x4xf32>, %w: tensor<2x4x1x1xf32>) -> tensor<*xf32> {
  // expected-error @+2 {{conv input has 3 channels but weight expects 4 x group 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.conv %x, %w {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x3x4x4xf32>, tensor<2x4x1x1xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @reshape_count(%x: tensor<2x3xf32>) -> tensor<*xf32> {
  %s = kiln.constant {value = dense<[4, 2]> : tensor<2xi64>} : () -> tensor<2xi64>
  // expected-error @+2 {{cannot reshape 6 elements into 8 elements}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kiln.reshape %x, %s {allowzero = false} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

// CHECK-LABEL: func.func @row_ops
// CHECK: kiln.softmax %arg0 {axis = 1 : i64, log = true} : (tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK: kiln.layer_norm %arg0 scale %arg1 bias %arg1 {axis = 1 : i64, epsilon = 9.99999974E-6 : f32}
func.func @row_ops(%x: tensor<2x8xf32>, %g: tensor<8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>) {
  %s = kiln.softmax %x {axis = 1 : i64, log = true} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %l = kiln.layer_norm %x scale %g bias %g {axis = 1 : i64, epsilon = 1.0e-5 : f32} : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return %s, %l : tensor<2x8xf32>, tensor<2x8xf32>
}

// -----

func.func @softmax_bad_axis(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{axis 2 is not an axis of a rank-2 tensor}}
  %s = kiln.softmax %x {axis = 2 : i64, log = false} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return %s : tensor<2x8xf32>
}

// -----

func.func @layer_norm_scale_size(%x: tensor<2x8xf32>, %g: tensor<16xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{scale and bias must hold one value per element of a normalised slice}}
  %l = kiln.layer_norm %x scale %g {axis = 1 : i64, epsilon = 1.0e-5 : f32} : (tensor<2x8xf32>, tensor<16xf32>) -> tensor<2x8xf32>
  return %l : tensor<2x8xf32>
}

// -----

// The integer convolution: an 8-bit input with i8 weights gives i32.
// CHECK-LABEL: func.func @integer_conv
// CHECK: kiln.conv %arg0, %arg1, %arg2 {{{.*}}input_zero_point = 255 : i64{{.*}}} : (tensor<1x4x3x3xui8>, tensor<2x4x1x1xi8>, tensor<2xi32>) -> tensor<1x2x3x3xi32>
func.func @integer_conv(%x: tensor<1x4x3x3xui8>, %w: tensor<2x4x1x1xi8>, %b: tensor<2xi32>) -> tensor<1x2x3x3xi32> {
  %0 = kiln.conv %x, %w, %b {dilations = array<i64: 1, 1>, group = 1 : i64, input_zero_point = 255 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x3x3xui8>, tensor<2x4x1x1xi8>, tensor<2xi32>) -> tensor<1x2x3x3xi32>
  return %0 : tensor<1x2x3x3xi32>
}

// -----

func.func @integer_conv_unsigned_weights(%x: tensor<1x4x3x3xui8>, %w: tensor<2x4x1x1xui8>) -> tensor<1x2x3x3xi32> {
  // expected-error @+1 {{an 8-bit integer input needs i8 weights}}
  %0 = kiln.conv %x, %w {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x3x3xui8>, tensor<2x4x1x1xui8>) -> tensor<1x2x3x3xi32>
  return %0 : tensor<1x2x3x3xi32>
}

// -----

func.func @integer_conv_zero_point_range(%x: tensor<1x4x3x3xi8>, %w: tensor<2x4x1x1xi8>) -> tensor<1x2x3x3xi32> {
  // expected-error @+1 {{input_zero_point 128 is outside the input type's range [-128, 127]}}
  %0 = kiln.conv %x, %w {dilations = array<i64: 1, 1>, group = 1 : i64, input_zero_point = 128 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x3x3xi8>, tensor<2x4x1x1xi8>) -> tensor<1x2x3x3xi32>
  return %0 : tensor<1x2x3x3xi32>
}

// -----

func.func @float_conv_zero_point(%x: tensor<1x4x3x3xf32>, %w: tensor<2x4x1x1xf32>) -> tensor<1x2x3x3xf32> {
  // expected-error @+1 {{input_zero_point needs an 8-bit integer input}}
  %0 = kiln.conv %x, %w {dilations = array<i64: 1, 1>, group = 1 : i64, input_zero_point = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x3x3xf32>, tensor<2x4x1x1xf32>) -> tensor<1x2x3x3xf32>
  return %0 : tensor<1x2x3x3xf32>
}

// -----

func.func @integer_conv_nhwc_clamp(%x: tensor<1x3x3x4xui8>, %w: tensor<2x4x1x1xi8>) -> tensor<1x3x3x2xi32> {
  // expected-error @+1 {{an integer convolution clamps only its requantized result}}
  %0 = kiln.conv2d_nhwc %x, %w {clamp_max = 6.0 : f32, clamp_min = 0.0 : f32, dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x3x3x4xui8>, tensor<2x4x1x1xi8>) -> tensor<1x3x3x2xi32>
  return %0 : tensor<1x3x3x2xi32>
}

// -----

// The requantized form: its result type is requant_type's.
// CHECK-LABEL: func.func @integer_conv_requantized
// CHECK: requant_type = ui8
func.func @integer_conv_requantized(%x: tensor<1x3x3x4xui8>, %w: tensor<2x4x1x1xi8>) -> tensor<1x3x3x2xui8> {
  %0 = kiln.conv2d_nhwc %x, %w {clamp_max = 255.0 : f32, clamp_min = 3.0 : f32, dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, requant_scale = array<f32: 0.5, 0.25>, requant_type = ui8, requant_zero_point = 3.0 : f32, strides = array<i64: 1, 1>} : (tensor<1x3x3x4xui8>, tensor<2x4x1x1xi8>) -> tensor<1x3x3x2xui8>
  return %0 : tensor<1x3x3x2xui8>
}

// -----

func.func @integer_conv_requant_range(%x: tensor<1x3x3x4xui8>, %w: tensor<2x4x1x1xi8>) -> tensor<1x3x3x2xi8> {
  // expected-error @+1 {{the requantized result's clamp [0, 255] is outside the range of 'i8'}}
  %0 = kiln.conv2d_nhwc %x, %w {clamp_max = 255.0 : f32, clamp_min = 0.0 : f32, dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, requant_scale = array<f32: 0.5>, requant_type = i8, requant_zero_point = 0.0 : f32, strides = array<i64: 1, 1>} : (tensor<1x3x3x4xui8>, tensor<2x4x1x1xi8>) -> tensor<1x3x3x2xi8>
  return %0 : tensor<1x3x3x2xi8>
}

// -----

func.func @integer_conv_requant_scales(%x: tensor<1x3x3x4xui8>, %w: tensor<2x4x1x1xi8>) -> tensor<1x3x3x2xui8> {
  // expected-error @+1 {{requant_scale has 3 values for 2 output channels}}
  %0 = kiln.conv2d_nhwc %x, %w {clamp_max = 255.0 : f32, clamp_min = 0.0 : f32, dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, requant_scale = array<f32: 0.5, 1.0, 2.0>, requant_type = ui8, requant_zero_point = 0.0 : f32, strides = array<i64: 1, 1>} : (tensor<1x3x3x4xui8>, tensor<2x4x1x1xi8>) -> tensor<1x3x3x2xui8>
  return %0 : tensor<1x3x3x2xui8>
}

// -----

func.func @integer_conv_requant_partial(%x: tensor<1x3x3x4xui8>, %w: tensor<2x4x1x1xi8>) -> tensor<1x3x3x2xui8> {
  // expected-error @+1 {{requantization needs requant_type, requant_scale and requant_zero_point together}}
  %0 = kiln.conv2d_nhwc %x, %w {clamp_max = 255.0 : f32, clamp_min = 0.0 : f32, dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, requant_type = ui8, requant_zero_point = 0.0 : f32, strides = array<i64: 1, 1>} : (tensor<1x3x3x4xui8>, tensor<2x4x1x1xi8>) -> tensor<1x3x3x2xui8>
  return %0 : tensor<1x3x3x2xui8>
}

// -----

func.func @float_conv_requant(%x: tensor<1x3x3x4xf32>, %w: tensor<2x4x1x1xf32>) -> tensor<1x3x3x2xui8> {
  // expected-error @+1 {{only an integer convolution is requantized}}
  %0 = kiln.conv2d_nhwc %x, %w {clamp_max = 255.0 : f32, clamp_min = 0.0 : f32, dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, requant_scale = array<f32: 0.5>, requant_type = ui8, requant_zero_point = 0.0 : f32, strides = array<i64: 1, 1>} : (tensor<1x3x3x4xf32>, tensor<2x4x1x1xf32>) -> tensor<1x3x3x2xui8>
  return %0 : tensor<1x3x3x2xui8>
}
