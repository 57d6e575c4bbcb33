// RUN: kiln-opt %s --kiln-fuse-epilogues --canonicalize --split-input-file | FileCheck %s

// BatchNormalization as the importer writes it (x * f + shift with
// per-channel constants) folds into the weights and the bias, then Clip
// (max/min with scalars) becomes the clamp: ReLU6.
// w = 1 for both outputs, f = [2, 3], shift = [0.5, -1], bias = [1, 1]:
// weights [2, 3], bias [1 * 2 + 0.5, 1 * 3 - 1] = [2.5, 2].
// CHECK-LABEL: func.func @batchnorm_relu6
// CHECK-DAG: %[[W:.*]] = kiln.constant {value = dense<{{\[\[\[\[}}2.000000e+00]]], {{\[\[\[}}3.000000e+00]]]]> : tensor<2x1x1x1xf32>}
// CHECK-DAG: %[[B:.*]] = kiln.constant {value = dense<[2.500000e+00, 2.000000e+00]> : tensor<2xf32>}
// CHECK: %[[C:.*]] = kiln.conv2d_nhwc %arg0, %[[W]] bias %[[B]] {clamp_max = 6.000000e+00 : f32, clamp_min = 0.000000e+00 : f32
// CHECK-NEXT: return %[[C]]
func.func @batchnorm_relu6(%x: tensor<1x4x4x1xf32>) -> tensor<1x4x4x2xf32> {
  %w = kiln.constant {value = dense<1.0> : tensor<2x1x1x1xf32>} : () -> tensor<2x1x1x1xf32>
  %b = kiln.constant {value = dense<1.0> : tensor<2xf32>} : () -> tensor<2xf32>
  %f = kiln.constant {value = dense<[[[[2.0, 3.0]]]]> : tensor<1x1x1x2xf32>} : () -> tensor<1x1x1x2xf32>
  %s = kiln.constant {value = dense<[0.5, -1.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %lo = kiln.constant {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %hi = kiln.constant {value = dense<6.0> : tensor<f32>} : () -> tensor<f32>
  %0 = kiln.conv2d_nhwc %x, %w bias %b {clamp_max = 0x7F800000 : f32, clamp_min = 0xFF800000 : f32, dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x4x1xf32>, tensor<2x1x1x1xf32>, tensor<2xf32>) -> tensor<1x4x4x2xf32>
  %1 = kiln.mul %0, %f : (tensor<1x4x4x2xf32>, tensor<1x1x1x2xf32>) -> tensor<1x4x4x2xf32>
  %2 = kiln.add %1, %s : (tensor<1x4x4x2xf32>, tensor<2xf32>) -> tensor<1x4x4x2xf32>
  %3 = kiln.max %2, %lo : (tensor<1x4x4x2xf32>, tensor<f32>) -> tensor<1x4x4x2xf32>
  %4 = kiln.min %3, %hi : (tensor<1x4x4x2xf32>, tensor<f32>) -> tensor<1x4x4x2xf32>
  return %4 : tensor<1x4x4x2xf32>
}

// -----

// No fold: a scale after a residual add would scale the residual too, and
// a conv result with a second user must stay as it is.
// CHECK-LABEL: func.func @no_fold
// CHECK: %[[C:.*]] = kiln.conv2d_nhwc %arg0, %{{.*}} residual %arg1
// CHECK: kiln.mul %[[C]]
// CHECK: %[[D:.*]] = kiln.conv2d_nhwc %arg0, %{{.*}} {clamp_max = 0x7F800000 : f32, clamp_min = 0xFF800000 : f32
// CHECK: kiln.relu %[[D]]
// CHECK: kiln.add %[[D]]
func.func @no_fold(%x: tensor<1x4x4x1xf32>, %r: tensor<1x4x4x2xf32>) -> (tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>) {
  %w = kiln.constant {value = dense<1.0> : tensor<2x1x1x1xf32>} : () -> tensor<2x1x1x1xf32>
  %f = kiln.constant {value = dense<[2.0, 3.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %0 = kiln.conv2d_nhwc %x, %w residual %r {clamp_max = 0x7F800000 : f32, clamp_min = 0xFF800000 : f32, dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x4x1xf32>, tensor<2x1x1x1xf32>, tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  %1 = kiln.mul %0, %f : (tensor<1x4x4x2xf32>, tensor<2xf32>) -> tensor<1x4x4x2xf32>
  %2 = kiln.conv2d_nhwc %x, %w {clamp_max = 0x7F800000 : f32, clamp_min = 0xFF800000 : f32, dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x4x1xf32>, tensor<2x1x1x1xf32>) -> tensor<1x4x4x2xf32>
  %3 = kiln.relu %2 : (tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  %4 = kiln.add %2, %r : (tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  return %1, %3, %4 : tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>
}

// -----

// No fold of a fractional scale into integer weights: a quantized
// convolution's exact integer sum must be scaled as a whole (its
// requantization rounds the product), as integer kernels do.
// CHECK-LABEL: func.func @quantized_scale_stays
// CHECK: %[[C:.*]] = kiln.conv2d_nhwc %arg0, %{{.*}} {clamp_max
// CHECK: kiln.mul %[[C]]
func.func @quantized_scale_stays(%x: tensor<1x4x4x1xf32>) -> tensor<1x4x4x2xf32> {
  %w = kiln.constant {value = dense<[[[[3.0]]], [[[-7.0]]]]> : tensor<2x1x1x1xf32>} : () -> tensor<2x1x1x1xf32>
  %f = kiln.constant {value = dense<[0.013, 0.021]> : tensor<2xf32>} : () -> tensor<2xf32>
  %0 = kiln.conv2d_nhwc %x, %w {clamp_max = 0x7F800000 : f32, clamp_min = 0xFF800000 : f32, dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x4x1xf32>, tensor<2x1x1x1xf32>) -> tensor<1x4x4x2xf32>
  %1 = kiln.mul %0, %f : (tensor<1x4x4x2xf32>, tensor<2xf32>) -> tensor<1x4x4x2xf32>
  return %1 : tensor<1x4x4x2xf32>
}

// -----

// A Linear layer: matmul by constant weights [K=2, N=3] is a 1x1
// convolution over the 4 rows of x (weights transposed to [N, K, 1, 1]);
// the bias add, the residual add and the Relu behind the reshape back to
// [1, 4, 3] move in front of it and fold into the kernel's epilogue.
// CHECK-LABEL: func.func @linear_bias_residual_relu
// CHECK-DAG: %[[W:.*]] = kiln.constant {value = dense<{{\[\[\[\[}}1.000000e+00]], {{\[\[}}4.000000e+00]]], {{\[\[\[}}2.000000e+00]], {{\[\[}}5.000000e+00]]], {{\[\[\[}}3.000000e+00]], {{\[\[}}6.000000e+00]]]]> : tensor<3x2x1x1xf32>}
// CHECK-DAG: %[[B:.*]] = kiln.constant {value = dense<[1.000000e-01, 2.000000e-01, 3.000000e-01]> : tensor<3xf32>}
// CHECK-DAG: %[[X:.*]] = kiln.reshape %arg0
// CHECK-DAG: %[[R:.*]] = kiln.reshape %arg1
// CHECK: %[[C:.*]] = kiln.conv2d_nhwc %[[X]], %[[W]] bias %[[B]] residual %[[R]] {clamp_max = 0x7F800000 : f32, clamp_min = 0.000000e+00 : f32
// CHECK-SAME: (tensor<1x1x4x2xf32>, tensor<3x2x1x1xf32>, tensor<3xf32>, tensor<1x1x4x3xf32>) -> tensor<1x1x4x3xf32>
// CHECK: %[[Y:.*]] = kiln.reshape %[[C]]
// CHECK-NOT: kiln.add
// CHECK-NOT: kiln.relu
// CHECK: return %[[Y]] : tensor<1x4x3xf32>
func.func @linear_bias_residual_relu(%x: tensor<1x4x2xf32>, %skip: tensor<1x4x3xf32>) -> tensor<1x4x3xf32> {
  %w = kiln.constant {value = dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>} : () -> tensor<2x3xf32>
  %b = kiln.constant {value = dense<[0.1, 0.2, 0.3]> : tensor<3xf32>} : () -> tensor<3xf32>
  %0 = kiln.matmul %x, %w : (tensor<1x4x2xf32>, tensor<2x3xf32>) -> tensor<1x4x3xf32>
  %1 = kiln.add %b, %0 : (tensor<3xf32>, tensor<1x4x3xf32>) -> tensor<1x4x3xf32>
  %2 = kiln.add %skip, %1 : (tensor<1x4x3xf32>, tensor<1x4x3xf32>) -> tensor<1x4x3xf32>
  %3 = kiln.relu %2 : (tensor<1x4x3xf32>) -> tensor<1x4x3xf32>
  return %3 : tensor<1x4x3xf32>
}

// -----

// A bias that varies along rows, not channels, is no per-channel bias: it
// stays an add after the product (which still becomes a convolution).
// CHECK-LABEL: func.func @linear_row_bias_stays
// CHECK: %[[C:.*]] = kiln.conv2d_nhwc
// CHECK-NOT: bias
// CHECK: %[[Y:.*]] = kiln.reshape %[[C]]
// CHECK: kiln.add %[[Y]], %{{.*}} : (tensor<4x3xf32>, tensor<4x1xf32>)
func.func @linear_row_bias_stays(%x: tensor<4x2xf32>) -> tensor<4x3xf32> {
  %w = kiln.constant {value = dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>} : () -> tensor<2x3xf32>
  %b = kiln.constant {value = dense<[[1.0], [2.0], [3.0], [4.0]]> : tensor<4x1xf32>} : () -> tensor<4x1xf32>
  %0 = kiln.matmul %x, %w : (tensor<4x2xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
  %1 = kiln.add %0, %b : (tensor<4x3xf32>, tensor<4x1xf32>) -> tensor<4x3xf32>
  return %1 : tensor<4x3xf32>
}

// -----

// GELU as PyTorch exports it, x/sqrt(2) -> Erf -> +1 -> *x -> *0.5, after a
// Linear layer: the bias folds, then the whole GELU becomes the kernel's
// `gelu` epilogue; nothing of the chain is left.
// CHECK-LABEL: func.func @linear_gelu
// CHECK: %[[C:.*]] = kiln.conv2d_nhwc %{{.*}}, %{{.*}} bias %{{.*}} {clamp_max = 0x7F800000 : f32, clamp_min = 0xFF800000 : f32, {{.*}}gelu
// CHECK: %[[Y:.*]] = kiln.reshape %[[C]]
// CHECK-NOT: kiln.erf
// CHECK-NOT: kiln.mul
// CHECK: return %[[Y]]
func.func @linear_gelu(%x: tensor<4x2xf32>) -> tensor<4x3xf32> {
  %w = kiln.constant {value = dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>} : () -> tensor<2x3xf32>
  %b = kiln.constant {value = dense<[0.1, 0.2, 0.3]> : tensor<3xf32>} : () -> tensor<3xf32>
  %sqrt2 = kiln.constant {value = dense<1.41421354> : tensor<f32>} : () -> tensor<f32>
  %one = kiln.constant {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %half = kiln.constant {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %0 = kiln.matmul %x, %w : (tensor<4x2xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
  %1 = kiln.add %0, %b : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %2 = kiln.div %1, %sqrt2 : (tensor<4x3xf32>, tensor<f32>) -> tensor<4x3xf32>
  %3 = kiln.erf %2 : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %4 = kiln.add %3, %one : (tensor<4x3xf32>, tensor<f32>) -> tensor<4x3xf32>
  %5 = kiln.mul %1, %4 : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %6 = kiln.mul %5, %half : (tensor<4x3xf32>, tensor<f32>) -> tensor<4x3xf32>
  return %6 : tensor<4x3xf32>
}

// -----

// The other association (0.5 * x first) and x * (1/sqrt(2)) also match, on
// a convolution's own result.
// CHECK-LABEL: func.func @conv_gelu_other_form
// CHECK: %[[C:.*]] = kiln.conv2d_nhwc {{.*}}gelu
// CHECK-NOT: kiln.erf
// CHECK: return %[[C]]
func.func @conv_gelu_other_form(%x: tensor<1x4x4x2xf32>) -> tensor<1x4x4x3xf32> {
  %w = kiln.constant {value = dense<1.0> : tensor<3x2x1x1xf32>} : () -> tensor<3x2x1x1xf32>
  %rsqrt2 = kiln.constant {value = dense<0.707106769> : tensor<f32>} : () -> tensor<f32>
  %one = kiln.constant {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %half = kiln.constant {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %c = kiln.conv2d_nhwc %x, %w {clamp_max = 0x7F800000 : f32, clamp_min = 0xFF800000 : f32, dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x4x2xf32>, tensor<3x2x1x1xf32>) -> tensor<1x4x4x3xf32>
  %h = kiln.mul %half, %c : (tensor<f32>, tensor<1x4x4x3xf32>) -> tensor<1x4x4x3xf32>
  %s = kiln.mul %c, %rsqrt2 : (tensor<1x4x4x3xf32>, tensor<f32>) -> tensor<1x4x4x3xf32>
  %e = kiln.erf %s : (tensor<1x4x4x3xf32>) -> tensor<1x4x4x3xf32>
  %a = kiln.add %one, %e : (tensor<f32>, tensor<1x4x4x3xf32>) -> tensor<1x4x4x3xf32>
  %y = kiln.mul %h, %a : (tensor<1x4x4x3xf32>, tensor<1x4x4x3xf32>) -> tensor<1x4x4x3xf32>
  return %y : tensor<1x4x4x3xf32>
}

// -----

// Not a GELU to fuse: the convolution already clamps (Relu before the GELU:
// the kernel would apply them in the other order), and a chain whose x is
// also read elsewhere must keep x.
// CHECK-LABEL: func.func @gelu_not_fused
// CHECK-NOT: gelu
// CHECK: kiln.erf
// CHECK-NOT: gelu
// CHECK: kiln.erf
// CHECK-NOT: gelu
// CHECK: return
func.func @gelu_not_fused(%x: tensor<1x4x4x2xf32>) -> (tensor<1x4x4x3xf32>, tensor<1x4x4x3xf32>, tensor<1x4x4x3xf32>) {
  %w = kiln.constant {value = dense<1.0> : tensor<3x2x1x1xf32>} : () -> tensor<3x2x1x1xf32>
  %sqrt2 = kiln.constant {value = dense<1.41421354> : tensor<f32>} : () -> tensor<f32>
  %one = kiln.constant {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %half = kiln.constant {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %c = kiln.conv2d_nhwc %x, %w {clamp_max = 0x7F800000 : f32, clamp_min = 0.0 : f32, dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x4x2xf32>, tensor<3x2x1x1xf32>) -> tensor<1x4x4x3xf32>
  %s = kiln.div %c, %sqrt2 : (tensor<1x4x4x3xf32>, tensor<f32>) -> tensor<1x4x4x3xf32>
  %e = kiln.erf %s : (tensor<1x4x4x3xf32>) -> tensor<1x4x4x3xf32>
  %a = kiln.add %e, %one : (tensor<1x4x4x3xf32>, tensor<f32>) -> tensor<1x4x4x3xf32>
  %m = kiln.mul %c, %a : (tensor<1x4x4x3xf32>, tensor<1x4x4x3xf32>) -> tensor<1x4x4x3xf32>
  %y = kiln.mul %m, %half : (tensor<1x4x4x3xf32>, tensor<f32>) -> tensor<1x4x4x3xf32>
  %c2 = kiln.conv2d_nhwc %x, %w {clamp_max = 0x7F800000 : f32, clamp_min = 0xFF800000 : f32, dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x4x2xf32>, tensor<3x2x1x1xf32>) -> tensor<1x4x4x3xf32>
  %s2 = kiln.div %c2, %sqrt2 : (tensor<1x4x4x3xf32>, tensor<f32>) -> tensor<1x4x4x3xf32>
  %e2 = kiln.erf %s2 : (tensor<1x4x4x3xf32>) -> tensor<1x4x4x3xf32>
  %a2 = kiln.add %e2, %one : (tensor<1x4x4x3xf32>, tensor<f32>) -> tensor<1x4x4x3xf32>
  %m2 = kiln.mul %c2, %a2 : (tensor<1x4x4x3xf32>, tensor<1x4x4x3xf32>) -> tensor<1x4x4x3xf32>
  %y2 = kiln.mul %m2, %half : (tensor<1x4x4x3xf32>, tensor<f32>) -> tensor<1x4x4x3xf32>
  return %y, %y2, %c2 : tensor<1x4x4x3xf32>, tensor<1x4x4x3xf32>, tensor<1x4x4x3xf32>
}

// -----

// Dims known only at run time (one compile for every shape): the matrix
// product with constant weights becomes the 1x1 convolution over a row of
// run-time length (the reshapes infer it, -1), and the residual add after
// the reshape back joins it (kiln-lower-to-linalg lowers that only where it
// proves the residual's dims the result's).
// CHECK-LABEL: func.func @dynamic_rows
// CHECK-DAG: %[[ROW:.*]] = kiln.constant {value = dense<[1, 1, -1, 4]> : tensor<4xi64>}
// CHECK-DAG: %[[BACK:.*]] = kiln.constant {value = dense<[1, -1, 4]> : tensor<3xi64>}
// CHECK: %[[X:.*]] = kiln.reshape %arg0, %[[ROW]] {{.*}} -> tensor<1x1x?x4xf32>
// CHECK: %[[R:.*]] = kiln.reshape %arg1, %[[ROW]] {{.*}} -> tensor<1x1x?x4xf32>
// CHECK: %[[C:.*]] = kiln.conv2d_nhwc %[[X]], %{{.*}} residual %[[R]] {{.*}} -> tensor<1x1x?x4xf32>
// CHECK: kiln.reshape %[[C]], %[[BACK]] {{.*}} -> tensor<1x?x4xf32>
func.func @dynamic_rows(%x: tensor<1x?x4xf32>, %r: tensor<1x?x4xf32>) -> tensor<1x?x4xf32> {
  %w = kiln.constant {value = dense<1.0> : tensor<4x4xf32>} : () -> tensor<4x4xf32>
  %m = kiln.matmul %x, %w : (tensor<1x?x4xf32>, tensor<4x4xf32>) -> tensor<1x?x4xf32>
  %a = kiln.add %m, %r : (tensor<1x?x4xf32>, tensor<1x?x4xf32>) -> tensor<1x?x4xf32>
  return %a : tensor<1x?x4xf32>
}

// -----

// Batch and length both known only at run time (a padded BERT batch): the
// rows' reshape still infers their count, and the reshape back takes the
// product's leading dims from its left operand (kiln.shape of each), so
// that the bias and the GELU after it join the convolution too.
// CHECK-LABEL: func.func @dynamic_batch_and_length_gelu
// CHECK-DAG: %[[ROW:.*]] = kiln.constant {value = dense<[1, 1, -1, 4]> : tensor<4xi64>}
// CHECK-DAG: %[[N:.*]] = kiln.constant {value = dense<3> : tensor<1xi64>}
// CHECK: %[[X:.*]] = kiln.reshape %arg0, %[[ROW]] {{.*}} -> tensor<1x1x?x4xf32>
// CHECK-DAG: %[[B:.*]] = kiln.shape %arg0 {end = 1 : i64, start = 0 : i64}
// CHECK-DAG: %[[S:.*]] = kiln.shape %arg0 {end = 2 : i64, start = 1 : i64}
// CHECK: %[[BACK:.*]] = kiln.concat %[[B]], %[[S]], %[[N]] {axis = 0 : i64}
// CHECK: %[[C:.*]] = kiln.conv2d_nhwc %[[X]], %{{.*}} bias %{{.*}} {{.*}}gelu{{.*}} -> tensor<1x1x?x3xf32>
// CHECK: kiln.reshape %[[C]], %[[BACK]] {{.*}} -> tensor<?x?x3xf32>
// CHECK-NOT: kiln.erf
func.func @dynamic_batch_and_length_gelu(%x: tensor<?x?x4xf32>) -> tensor<?x?x3xf32> {
  %w = kiln.constant {value = dense<0.5> : tensor<4x3xf32>} : () -> tensor<4x3xf32>
  %bias = kiln.constant {value = dense<[0.1, 0.2, 0.3]> : tensor<3xf32>} : () -> tensor<3xf32>
  %m = kiln.matmul %x, %w : (tensor<?x?x4xf32>, tensor<4x3xf32>) -> tensor<?x?x3xf32>
  %y = kiln.add %m, %bias : (tensor<?x?x3xf32>, tensor<3xf32>) -> tensor<?x?x3xf32>
  %sqrt2 = kiln.constant {value = dense<1.41421354> : tensor<f32>} : () -> tensor<f32>
  %one = kiln.constant {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %half = kiln.constant {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %d = kiln.div %y, %sqrt2 : (tensor<?x?x3xf32>, tensor<f32>) -> tensor<?x?x3xf32>
  %e = kiln.erf %d : (tensor<?x?x3xf32>) -> tensor<?x?x3xf32>
  %p = kiln.add %e, %one : (tensor<?x?x3xf32>, tensor<f32>) -> tensor<?x?x3xf32>
  %g = kiln.mul %y, %p : (tensor<?x?x3xf32>, tensor<?x?x3xf32>) -> tensor<?x?x3xf32>
  %h = kiln.mul %g, %half : (tensor<?x?x3xf32>, tensor<f32>) -> tensor<?x?x3xf32>
  return %h : tensor<?x?x3xf32>
}

// -----

// A quantized product (u8 rows, constant s8 weights [K=2, N=3], i32) is the
// integer 1x1 convolution over the rows, weights transposed to [N, K, 1, 1],
// input zero point 0 (the importer subtracts A's zero point's share); rows
// known only at run time stay a run-time width.
// CHECK-LABEL: func.func @integer_linear
// CHECK: %[[W:.*]] = kiln.constant {value = dense<{{\[}}{{\[}}{{\[}}[1]], {{\[}}[-4]]], {{\[}}{{\[}}[2]], {{\[}}[5]]], {{\[}}{{\[}}[-3]], {{\[}}[6]]]]> : tensor<3x2x1x1xi8>}
// CHECK: kiln.conv2d_nhwc %{{.*}}, %[[W]] {{{.*}}input_zero_point = 0 : i64{{.*}}} : (tensor<1x1x?x2xui8>, tensor<3x2x1x1xi8>) -> tensor<1x1x?x3xi32>
// CHECK-NOT: kiln.matmul
func.func @integer_linear(%x: tensor<?x2xui8>) -> tensor<?x3xi32> {
  %w = kiln.constant {value = dense<[[1, 2, -3], [-4, 5, 6]]> : tensor<2x3xi8>} : () -> tensor<2x3xi8>
  %0 = kiln.matmul %x, %w : (tensor<?x2xui8>, tensor<2x3xi8>) -> tensor<?x3xi32>
  return %0 : tensor<?x3xi32>
}

// -----

// QuantizeLinear after an integer convolution, as the importer writes it
// (cast to f32, the per-channel multiplier, round, the zero point as a cast
// of an integer constant, the clamp to the type's range), becomes the
// convolution's requantization: it stores u8 itself.
// CHECK-LABEL: func.func @requantize
// CHECK: %[[C:.*]] = kiln.conv2d_nhwc %arg0, %{{.*}} bias %{{.*}} {clamp_max = 2.550000e+02 : f32, clamp_min = 0.000000e+00 : f32, dilations = array<i64: 1, 1>, group = 1 : i64, input_zero_point = 10 : i64, pads = array<i64: 0, 0, 0, 0>, requant_scale = array<f32: 5.000000e-01, 2.500000e-01>, requant_type = ui8, requant_zero_point = 3.000000e+00 : f32, strides = array<i64: 1, 1>} : (tensor<1x2x2x3xui8>, tensor<2x3x1x1xi8>, tensor<2xi32>) -> tensor<1x2x2x2xui8>
// CHECK-NEXT: return %[[C]]
func.func @requantize(%x: tensor<1x2x2x3xui8>) -> tensor<1x2x2x2xui8> {
  %w = kiln.constant {value = dense<[[[[1]], [[2]], [[3]]], [[[-1]], [[0]], [[4]]]]> : tensor<2x3x1x1xi8>} : () -> tensor<2x3x1x1xi8>
  %b = kiln.constant {value = dense<[100, -50]> : tensor<2xi32>} : () -> tensor<2xi32>
  %s = kiln.constant {value = dense<[[[[0.5, 0.25]]]]> : tensor<1x1x1x2xf32>} : () -> tensor<1x1x1x2xf32>
  %zp = kiln.constant {value = dense<3> : tensor<ui8>} : () -> tensor<ui8>
  %lo = kiln.constant {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %hi = kiln.constant {value = dense<255.0> : tensor<f32>} : () -> tensor<f32>
  %0 = kiln.conv2d_nhwc %x, %w bias %b {clamp_max = 0x7F800000 : f32, clamp_min = 0xFF800000 : f32, dilations = array<i64: 1, 1>, group = 1 : i64, input_zero_point = 10 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x2x3xui8>, tensor<2x3x1x1xi8>, tensor<2xi32>) -> tensor<1x2x2x2xi32>
  %1 = kiln.cast %0 {to = f32} : (tensor<1x2x2x2xi32>) -> tensor<1x2x2x2xf32>
  %2 = kiln.mul %1, %s : (tensor<1x2x2x2xf32>, tensor<1x1x1x2xf32>) -> tensor<1x2x2x2xf32>
  %3 = kiln.round %2 : (tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32>
  %z = kiln.cast %zp {to = f32} : (tensor<ui8>) -> tensor<f32>
  %4 = kiln.add %3, %z : (tensor<1x2x2x2xf32>, tensor<f32>) -> tensor<1x2x2x2xf32>
  %5 = kiln.max %4, %lo : (tensor<1x2x2x2xf32>, tensor<f32>) -> tensor<1x2x2x2xf32>
  %6 = kiln.min %5, %hi : (tensor<1x2x2x2xf32>, tensor<f32>) -> tensor<1x2x2x2xf32>
  %7 = kiln.cast %6 {to = ui8} : (tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xui8>
  return %7 : tensor<1x2x2x2xui8>
}

// -----

// s8 output with a zero point of 0 (no add), min before max, depthwise:
// the same fold. No fold where the rounded value has a second user, or
// where a bound is not an integer (the kernels clamp before rounding).
// CHECK-LABEL: func.func @requantize_s8_and_not
// CHECK: kiln.conv2d_nhwc {{.*}}group = 2 : i64{{.*}}requant_scale = array<f32: 1.250000e-01, 1.250000e-01>, requant_type = i8, requant_zero_point = 0.000000e+00 : f32{{.*}} -> tensor<1x2x2x2xi8>
// CHECK: %[[K:.*]] = kiln.conv2d_nhwc {{.*}} -> tensor<1x2x2x2xi32>
// CHECK: kiln.round
// CHECK: %[[L:.*]] = kiln.conv2d_nhwc {{.*}} -> tensor<1x2x2x2xi32>
// CHECK: kiln.max
func.func @requantize_s8_and_not(%x: tensor<1x2x2x2xi8>) -> (tensor<1x2x2x2xi8>, tensor<1x2x2x2xi8>, tensor<1x2x2x2xf32>, tensor<1x2x2x2xi8>) {
  %w = kiln.constant {value = dense<[[[[1]]], [[[-2]]]]> : tensor<2x1x1x1xi8>} : () -> tensor<2x1x1x1xi8>
  %s = kiln.constant {value = dense<0.125> : tensor<f32>} : () -> tensor<f32>
  %lo = kiln.constant {value = dense<-128.0> : tensor<f32>} : () -> tensor<f32>
  %hi = kiln.constant {value = dense<127.0> : tensor<f32>} : () -> tensor<f32>
  %half = kiln.constant {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %0 = kiln.conv2d_nhwc %x, %w {clamp_max = 0x7F800000 : f32, clamp_min = 0xFF800000 : f32, dilations = array<i64: 1, 1>, group = 2 : i64, input_zero_point = 0 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x2x2xi8>, tensor<2x1x1x1xi8>) -> tensor<1x2x2x2xi32>
  %1 = kiln.cast %0 {to = f32} : (tensor<1x2x2x2xi32>) -> tensor<1x2x2x2xf32>
  %2 = kiln.mul %s, %1 : (tensor<f32>, tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32>
  %3 = kiln.round %2 : (tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32>
  %4 = kiln.min %3, %hi : (tensor<1x2x2x2xf32>, tensor<f32>) -> tensor<1x2x2x2xf32>
  %5 = kiln.max %lo, %4 : (tensor<f32>, tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32>
  %6 = kiln.cast %5 {to = i8} : (tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xi8>
  %a = kiln.conv2d_nhwc %x, %w {clamp_max = 0x7F800000 : f32, clamp_min = 0xFF800000 : f32, dilations = array<i64: 1, 1>, group = 2 : i64, input_zero_point = 0 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x2x2xi8>, tensor<2x1x1x1xi8>) -> tensor<1x2x2x2xi32>
  %a1 = kiln.cast %a {to = f32} : (tensor<1x2x2x2xi32>) -> tensor<1x2x2x2xf32>
  %a2 = kiln.mul %a1, %s : (tensor<1x2x2x2xf32>, tensor<f32>) -> tensor<1x2x2x2xf32>
  %a3 = kiln.round %a2 : (tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32>
  %a4 = kiln.max %a3, %lo : (tensor<1x2x2x2xf32>, tensor<f32>) -> tensor<1x2x2x2xf32>
  %a5 = kiln.min %a4, %hi : (tensor<1x2x2x2xf32>, tensor<f32>) -> tensor<1x2x2x2xf32>
  %a6 = kiln.cast %a5 {to = i8} : (tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xi8>
  %b = kiln.conv2d_nhwc %x, %w {clamp_max = 0x7F800000 : f32, clamp_min = 0xFF800000 : f32, dilations = array<i64: 1, 1>, group = 2 : i64, input_zero_point = 0 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x2x2xi8>, tensor<2x1x1x1xi8>) -> tensor<1x2x2x2xi32>
  %b1 = kiln.cast %b {to = f32} : (tensor<1x2x2x2xi32>) -> tensor<1x2x2x2xf32>
  %b2 = kiln.mul %b1, %s : (tensor<1x2x2x2xf32>, tensor<f32>) -> tensor<1x2x2x2xf32>
  %b3 = kiln.round %b2 : (tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32>
  %b4 = kiln.max %b3, %half : (tensor<1x2x2x2xf32>, tensor<f32>) -> tensor<1x2x2x2xf32>
  %b5 = kiln.min %b4, %hi : (tensor<1x2x2x2xf32>, tensor<f32>) -> tensor<1x2x2x2xf32>
  %b6 = kiln.cast %b5 {to = i8} : (tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xi8>
  return %6, %a6, %a3, %b6 : tensor<1x2x2x2xi8>, tensor<1x2x2x2xi8>, tensor<1x2x2x2xf32>, tensor<1x2x2x2xi8>
}
