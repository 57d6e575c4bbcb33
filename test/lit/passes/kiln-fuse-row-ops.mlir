// RUN: kiln-opt %s --kiln-fuse-row-ops --split-input-file | FileCheck %s
// RUN: kiln-opt %s --kiln-fuse-row-ops --kiln-lower-to-linalg --split-input-file | FileCheck %s --check-prefix=KERNEL

// Softmax as the importer (and exporters) write it, over the last axis.
// CHECK-LABEL: func.func @softmax
// CHECK-NEXT: %[[S:.*]] = kiln.softmax %arg0 {axis = 2 : i64, log = false} : (tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
// CHECK-NEXT: return %[[S]]
// KERNEL-LABEL: func.func @softmax
// KERNEL: %[[P:.*]] = arith.constant dense<[6, 5, 0]> : tensor<3xi64>
// KERNEL: %[[C:.*]] = arith.constant 1.000000e+00 : f32
// KERNEL: kiln.call_kernel @kiln_softmax_f32(%[[P]], %arg0, %[[C]]) into
func.func @softmax(%x: tensor<2x3x5xf32>) -> tensor<2x3x5xf32> {
  %m = kiln.reduce_max %x {axes = array<i64: 2>, keepdims = true} : (tensor<2x3x5xf32>) -> tensor<2x3x1xf32>
  %s = kiln.sub %x, %m : (tensor<2x3x5xf32>, tensor<2x3x1xf32>) -> tensor<2x3x5xf32>
  %e = kiln.exp %s : (tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
  %z = kiln.reduce_sum %e {axes = array<i64: 2>, keepdims = true} : (tensor<2x3x5xf32>) -> tensor<2x3x1xf32>
  %y = kiln.div %e, %z : (tensor<2x3x5xf32>, tensor<2x3x1xf32>) -> tensor<2x3x5xf32>
  return %y : tensor<2x3x5xf32>
}

// -----

// LogSoftmax over the trailing axes [1, 3) (opset < 13 coerces to 2-D).
// CHECK-LABEL: func.func @log_softmax_trailing_axes
// CHECK-NEXT: %[[S:.*]] = kiln.softmax %arg0 {axis = 1 : i64, log = true}
// CHECK-NEXT: return %[[S]]
// KERNEL-LABEL: func.func @log_softmax_trailing_axes
// KERNEL: arith.constant dense<[2, 15, 1]> : tensor<3xi64>
func.func @log_softmax_trailing_axes(%x: tensor<2x3x5xf32>) -> tensor<2x3x5xf32> {
  %m = kiln.reduce_max %x {axes = array<i64: 1, 2>, keepdims = true} : (tensor<2x3x5xf32>) -> tensor<2x1x1xf32>
  %s = kiln.sub %x, %m : (tensor<2x3x5xf32>, tensor<2x1x1xf32>) -> tensor<2x3x5xf32>
  %e = kiln.exp %s : (tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
  %z = kiln.reduce_sum %e {axes = array<i64: 1, 2>, keepdims = true} : (tensor<2x3x5xf32>) -> tensor<2x1x1xf32>
  %l = kiln.log %z : (tensor<2x1x1xf32>) -> tensor<2x1x1xf32>
  %y = kiln.sub %s, %l : (tensor<2x3x5xf32>, tensor<2x1x1xf32>) -> tensor<2x3x5xf32>
  return %y : tensor<2x3x5xf32>
}

// -----

// A softmax over a middle axis has no row kernel: left alone.
// CHECK-LABEL: func.func @softmax_middle_axis
// CHECK-NOT: kiln.softmax
// CHECK: kiln.div
func.func @softmax_middle_axis(%x: tensor<2x3x5xf32>) -> tensor<2x3x5xf32> {
  %m = kiln.reduce_max %x {axes = array<i64: 1>, keepdims = true} : (tensor<2x3x5xf32>) -> tensor<2x1x5xf32>
  %s = kiln.sub %x, %m : (tensor<2x3x5xf32>, tensor<2x1x5xf32>) -> tensor<2x3x5xf32>
  %e = kiln.exp %s : (tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
  %z = kiln.reduce_sum %e {axes = array<i64: 1>, keepdims = true} : (tensor<2x3x5xf32>) -> tensor<2x1x5xf32>
  %y = kiln.div %e, %z : (tensor<2x3x5xf32>, tensor<2x1x5xf32>) -> tensor<2x3x5xf32>
  return %y : tensor<2x3x5xf32>
}

// -----

// PyTorch's exported LayerNorm (Pow by 2, Div by Sqrt), then the affine
// scale and bias, which the op absorbs.
// CHECK-LABEL: func.func @exported_layer_norm
// CHECK-NEXT: %[[L:.*]] = kiln.layer_norm %arg0 scale %arg1 bias %arg2 {axis = 2 : i64, epsilon = 9.99999974E-6 : f32}
// CHECK-NEXT: return %[[L]]
// KERNEL-LABEL: func.func @exported_layer_norm
// KERNEL: %[[P:.*]] = arith.constant dense<[8, 4, 6]> : tensor<3xi64>
// KERNEL: %[[E:.*]] = arith.constant 9.99999974E-6 : f32
// KERNEL: kiln.call_kernel @kiln_layer_norm_f32(%[[P]], %arg0, %arg1, %arg2, %[[E]]) into %{{.*}} {result_position = 4 : i64}
func.func @exported_layer_norm(%x: tensor<2x4x4xf32>, %g: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<2x4x4xf32> {
  %two = kiln.constant {value = dense<2.0> : tensor<f32>} : () -> tensor<f32>
  %eps = kiln.constant {value = dense<1.0e-5> : tensor<f32>} : () -> tensor<f32>
  %mean = kiln.reduce_mean %x {axes = array<i64: 2>, keepdims = true} : (tensor<2x4x4xf32>) -> tensor<2x4x1xf32>
  %d = kiln.sub %x, %mean : (tensor<2x4x4xf32>, tensor<2x4x1xf32>) -> tensor<2x4x4xf32>
  %sq = kiln.pow %d, %two : (tensor<2x4x4xf32>, tensor<f32>) -> tensor<2x4x4xf32>
  %var = kiln.reduce_mean %sq {axes = array<i64: 2>, keepdims = true} : (tensor<2x4x4xf32>) -> tensor<2x4x1xf32>
  %ve = kiln.add %var, %eps : (tensor<2x4x1xf32>, tensor<f32>) -> tensor<2x4x1xf32>
  %sd = kiln.sqrt %ve : (tensor<2x4x1xf32>) -> tensor<2x4x1xf32>
  %n = kiln.div %d, %sd : (tensor<2x4x4xf32>, tensor<2x4x1xf32>) -> tensor<2x4x4xf32>
  %s = kiln.mul %n, %g : (tensor<2x4x4xf32>, tensor<4xf32>) -> tensor<2x4x4xf32>
  %y = kiln.add %s, %b : (tensor<2x4x4xf32>, tensor<4xf32>) -> tensor<2x4x4xf32>
  return %y : tensor<2x4x4xf32>
}

// -----

// The importer's LayerNormalization form (d * d, reciprocal); the mean is
// also a graph output, so its reduction stays. No scale: a bias alone.
// CHECK-LABEL: func.func @imported_layer_norm
// CHECK: %[[M:.*]] = kiln.reduce_mean %arg0
// CHECK: %[[L:.*]] = kiln.layer_norm %arg0 bias %arg1 {axis = 1 : i64, epsilon = 1.000000e-03 : f32}
// CHECK-NEXT: return %[[L]], %[[M]]
func.func @imported_layer_norm(%x: tensor<3x8xf32>, %b: tensor<1x8xf32>) -> (tensor<3x8xf32>, tensor<3x1xf32>) {
  %eps = kiln.constant {value = dense<1.0e-3> : tensor<1xf32>} : () -> tensor<1xf32>
  %mean = kiln.reduce_mean %x {axes = array<i64: 1>, keepdims = true} : (tensor<3x8xf32>) -> tensor<3x1xf32>
  %d = kiln.sub %x, %mean : (tensor<3x8xf32>, tensor<3x1xf32>) -> tensor<3x8xf32>
  %sq = kiln.mul %d, %d : (tensor<3x8xf32>, tensor<3x8xf32>) -> tensor<3x8xf32>
  %var = kiln.reduce_mean %sq {axes = array<i64: 1>, keepdims = true} : (tensor<3x8xf32>) -> tensor<3x1xf32>
  %ve = kiln.add %eps, %var : (tensor<1xf32>, tensor<3x1xf32>) -> tensor<3x1xf32>
  %sd = kiln.sqrt %ve : (tensor<3x1xf32>) -> tensor<3x1xf32>
  %inv = kiln.reciprocal %sd : (tensor<3x1xf32>) -> tensor<3x1xf32>
  %n = kiln.mul %d, %inv : (tensor<3x8xf32>, tensor<3x1xf32>) -> tensor<3x8xf32>
  %y = kiln.add %n, %b : (tensor<3x8xf32>, tensor<1x8xf32>) -> tensor<3x8xf32>
  return %y, %mean : tensor<3x8xf32>, tensor<3x1xf32>
}

// -----

// The variance as E[x^2] - mean^2 (ONNX's own function body) is another
// computation, with its own rounding: not a layer_norm for the kernel.
// CHECK-LABEL: func.func @variance_by_moments_stays
// CHECK-NOT: kiln.layer_norm
func.func @variance_by_moments_stays(%x: tensor<3x8xf32>) -> tensor<3x8xf32> {
  %eps = kiln.constant {value = dense<1.0e-3> : tensor<f32>} : () -> tensor<f32>
  %mean = kiln.reduce_mean %x {axes = array<i64: 1>, keepdims = true} : (tensor<3x8xf32>) -> tensor<3x1xf32>
  %xx = kiln.mul %x, %x : (tensor<3x8xf32>, tensor<3x8xf32>) -> tensor<3x8xf32>
  %ex2 = kiln.reduce_mean %xx {axes = array<i64: 1>, keepdims = true} : (tensor<3x8xf32>) -> tensor<3x1xf32>
  %m2 = kiln.mul %mean, %mean : (tensor<3x1xf32>, tensor<3x1xf32>) -> tensor<3x1xf32>
  %var = kiln.sub %ex2, %m2 : (tensor<3x1xf32>, tensor<3x1xf32>) -> tensor<3x1xf32>
  %ve = kiln.add %var, %eps : (tensor<3x1xf32>, tensor<f32>) -> tensor<3x1xf32>
  %sd = kiln.sqrt %ve : (tensor<3x1xf32>) -> tensor<3x1xf32>
  %d = kiln.sub %x, %mean : (tensor<3x8xf32>, tensor<3x1xf32>) -> tensor<3x8xf32>
  %n = kiln.div %d, %sd : (tensor<3x8xf32>, tensor<3x1xf32>) -> tensor<3x8xf32>
  return %n : tensor<3x8xf32>
}

// -----

// Attention scores: Q scaled by 1/sqrt(d) = 1/8 before the product (seen
// through a transpose), K by 0.5 after one: both factors become the
// softmax's scale, and the products read the unscaled tensors.
// CHECK-LABEL: func.func @attention_scale
// CHECK-NOT: kiln.div
// CHECK-NOT: kiln.mul
// CHECK: %[[Q:.*]] = kiln.transpose %arg0
// CHECK: %[[S:.*]] = kiln.matmul %[[Q]], %arg1
// CHECK: kiln.softmax %[[S]] {axis = 2 : i64, log = false, scale = 6.250000e-02 : f32}
func.func @attention_scale(%q: tensor<4x2x8xf32>, %k: tensor<2x8x4xf32>) -> tensor<2x4x4xf32> {
  %c = kiln.constant {value = dense<8.0> : tensor<f32>} : () -> tensor<f32>
  %h = kiln.constant {value = dense<0.5> : tensor<1xf32>} : () -> tensor<1xf32>
  %qs = kiln.div %q, %c : (tensor<4x2x8xf32>, tensor<f32>) -> tensor<4x2x8xf32>
  %qt = kiln.transpose %qs {perm = array<i64: 1, 0, 2>} : (tensor<4x2x8xf32>) -> tensor<2x4x8xf32>
  %ks = kiln.mul %h, %k : (tensor<1xf32>, tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  %s = kiln.matmul %qt, %ks : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
  %m = kiln.reduce_max %s {axes = array<i64: 2>, keepdims = true} : (tensor<2x4x4xf32>) -> tensor<2x4x1xf32>
  %d = kiln.sub %s, %m : (tensor<2x4x4xf32>, tensor<2x4x1xf32>) -> tensor<2x4x4xf32>
  %e = kiln.exp %d : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %z = kiln.reduce_sum %e {axes = array<i64: 2>, keepdims = true} : (tensor<2x4x4xf32>) -> tensor<2x4x1xf32>
  %y = kiln.div %e, %z : (tensor<2x4x4xf32>, tensor<2x4x1xf32>) -> tensor<2x4x4xf32>
  return %y : tensor<2x4x4xf32>
}

// -----

// A negative factor would flip the maximum: it stays a multiply.
// CHECK-LABEL: func.func @negative_scale_stays
// CHECK: kiln.mul
// CHECK: kiln.softmax %{{.*}} {axis = 1 : i64, log = false} : (tensor<3x5xf32>)
func.func @negative_scale_stays(%x: tensor<3x5xf32>) -> tensor<3x5xf32> {
  %c = kiln.constant {value = dense<-2.0> : tensor<f32>} : () -> tensor<f32>
  %xs = kiln.mul %x, %c : (tensor<3x5xf32>, tensor<f32>) -> tensor<3x5xf32>
  %m = kiln.reduce_max %xs {axes = array<i64: 1>, keepdims = true} : (tensor<3x5xf32>) -> tensor<3x1xf32>
  %d = kiln.sub %xs, %m : (tensor<3x5xf32>, tensor<3x1xf32>) -> tensor<3x5xf32>
  %e = kiln.exp %d : (tensor<3x5xf32>) -> tensor<3x5xf32>
  %z = kiln.reduce_sum %e {axes = array<i64: 1>, keepdims = true} : (tensor<3x5xf32>) -> tensor<3x1xf32>
  %y = kiln.div %e, %z : (tensor<3x5xf32>, tensor<3x1xf32>) -> tensor<3x5xf32>
  return %y : tensor<3x5xf32>
}

// -----

// Rows of run-time number and length (attention scores over a sequence
// known only at run time): the same softmax, whose kernel takes both sizes
// in its parameter block at run time.
// CHECK-LABEL: func.func @dynamic_softmax
// CHECK: kiln.softmax %arg0 {axis = 2 : i64
// KERNEL-LABEL: func.func @dynamic_softmax
// KERNEL: %[[PARAMS:.*]] = tensor.from_elements
// KERNEL-SAME: tensor<3xi64>
// KERNEL: kiln.call_kernel @kiln_softmax_f32(%[[PARAMS]]
// KERNEL-SAME: -> tensor<4x?x?xf32>
func.func @dynamic_softmax(%x: tensor<4x?x?xf32> {kiln.dim_names = ["", "q", "k"]}) -> tensor<4x?x?xf32> {
  %m = kiln.reduce_max %x {axes = array<i64: 2>, keepdims = true} : (tensor<4x?x?xf32>) -> tensor<4x?x1xf32>
  %s = kiln.sub %x, %m : (tensor<4x?x?xf32>, tensor<4x?x1xf32>) -> tensor<4x?x?xf32>
  %e = kiln.exp %s : (tensor<4x?x?xf32>) -> tensor<4x?x?xf32>
  %t = kiln.reduce_sum %e {axes = array<i64: 2>, keepdims = true} : (tensor<4x?x?xf32>) -> tensor<4x?x1xf32>
  %d = kiln.div %e, %t : (tensor<4x?x?xf32>, tensor<4x?x1xf32>) -> tensor<4x?x?xf32>
  return %d : tensor<4x?x?xf32>
}
