// RUN: kiln-opt %s --kiln-convert-layout --canonicalize --split-input-file | FileCheck %s

// A conv -> relu -> conv chain: one transpose in, one out; the pair between
// the convolutions cancels and the relu becomes the first conv's clamp.
// CHECK-LABEL: func.func @chain
// CHECK: %[[IN:.*]] = kiln.transpose %arg0 {perm = array<i64: 0, 2, 3, 1>}
// CHECK: %[[C1:.*]] = kiln.conv2d_nhwc %[[IN]], %{{.*}} bias %{{.*}} {clamp_max = 0x7F800000 : f32, clamp_min = 0.000000e+00 : f32
// CHECK-SAME: -> tensor<1x8x8x4xf32>
// CHECK: %[[C2:.*]] = kiln.conv2d_nhwc %[[C1]], %{{.*}} {clamp_max = 0x7F800000 : f32, clamp_min = 0xFF800000 : f32
// CHECK: %[[OUT:.*]] = kiln.transpose %[[C2]] {perm = array<i64: 0, 3, 1, 2>}
// CHECK-NOT: kiln.transpose
// CHECK: return %[[OUT]]
func.func @chain(%x: tensor<1x3x8x8xf32>) -> tensor<1x2x8x8xf32> {
  %w1 = kiln.constant {value = dense<0.5> : tensor<4x3x3x3xf32>} : () -> tensor<4x3x3x3xf32>
  %b1 = kiln.constant {value = dense<0.25> : tensor<4xf32>} : () -> tensor<4xf32>
  %w2 = kiln.constant {value = dense<1.5> : tensor<2x4x1x1xf32>} : () -> tensor<2x4x1x1xf32>
  %0 = kiln.conv %x, %w1, %b1 {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<1x4x8x8xf32>
  %1 = kiln.relu %0 : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  %2 = kiln.conv %1, %w2 {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x8x8xf32>, tensor<2x4x1x1xf32>) -> tensor<1x2x8x8xf32>
  return %2 : tensor<1x2x8x8xf32>
}

// -----

// Max pooling between convolutions switches to channels_last; a residual
// add of two NHWC values becomes the second conv's residual operand.
// CHECK-LABEL: func.func @pool_and_residual
// CHECK: %[[IN:.*]] = kiln.transpose %arg0 {perm = array<i64: 0, 2, 3, 1>}
// CHECK: %[[P:.*]] = kiln.max_pool %[[IN]] {channels_last
// CHECK-SAME: -> tensor<1x4x4x4xf32>
// CHECK: %[[C:.*]] = kiln.conv2d_nhwc %[[P]], %{{.*}} residual %[[P]] {clamp_max = 0x7F800000 : f32, clamp_min = 0.000000e+00 : f32
// CHECK: kiln.transpose %[[C]] {perm = array<i64: 0, 3, 1, 2>}
func.func @pool_and_residual(%x: tensor<1x4x8x8xf32>) -> tensor<1x4x4x4xf32> {
  %w = kiln.constant {value = dense<0.5> : tensor<4x4x3x3xf32>} : () -> tensor<4x4x3x3xf32>
  %t = kiln.transpose %x {perm = array<i64: 0, 2, 3, 1>} : (tensor<1x4x8x8xf32>) -> tensor<1x8x8x4xf32>
  %u = kiln.transpose %t {perm = array<i64: 0, 3, 1, 2>} : (tensor<1x8x8x4xf32>) -> tensor<1x4x8x8xf32>
  %p = kiln.max_pool %u {dilations = array<i64: 1, 1>, kernel_shape = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<1x4x8x8xf32>) -> tensor<1x4x4x4xf32>
  %c = kiln.conv %p, %w {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<1x4x4x4xf32>, tensor<4x4x3x3xf32>) -> tensor<1x4x4x4xf32>
  %a = kiln.add %c, %p : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %r = kiln.relu %a : (tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  return %r : tensor<1x4x4x4xf32>
}

// -----

// An 8-bit max pool between integer convolutions (a quantized ResNet's stem
// pool, which the importer's QDQ fusion hands the bytes) goes channels_last
// too: the byte kernel takes NHWC. An 8-bit average pool does not (no
// kernel for it).
// CHECK-LABEL: func.func @byte_max_pool
// CHECK: kiln.max_pool %{{.*}} {channels_last
// CHECK-SAME: (tensor<1x8x8x4xui8>) -> tensor<1x4x4x4xui8>
// CHECK: kiln.avg_pool
// CHECK-NOT: channels_last
// CHECK-SAME: (tensor<1x4x8x8xui8>) -> tensor<1x4x4x4xui8>
func.func @byte_max_pool(%x: tensor<1x8x8x4xui8>) -> (tensor<1x4x4x4xui8>, tensor<1x4x4x4xui8>) {
  %u = kiln.transpose %x {perm = array<i64: 0, 3, 1, 2>} : (tensor<1x8x8x4xui8>) -> tensor<1x4x8x8xui8>
  %p = kiln.max_pool %u {dilations = array<i64: 1, 1>, kernel_shape = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<1x4x8x8xui8>) -> tensor<1x4x4x4xui8>
  %a = kiln.avg_pool %u {kernel_shape = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>, ceil_pads = array<i64: 0, 0>, count_include_pad = false} : (tensor<1x4x8x8xui8>) -> tensor<1x4x4x4xui8>
  return %p, %a : tensor<1x4x4x4xui8>, tensor<1x4x4x4xui8>
}

// -----

// Global average pooling (a keepdims reduce_mean) runs over NHWC axes 1, 2;
// the transpose left behind only moves size-1 dims, so it is a reshape.
// Concatenation along channels becomes concatenation along the last axis.
// CHECK-LABEL: func.func @concat_and_global_pool
// CHECK: %[[C:.*]] = kiln.concat %{{.*}}, %{{.*}} {axis = 3 : i64}
// CHECK: %[[M:.*]] = kiln.reduce_mean %[[C]] {axes = array<i64: 1, 2>, keepdims = true}
// CHECK-SAME: -> tensor<1x1x1x6xf32>
// CHECK: kiln.reshape %[[M]]
// CHECK-NOT: kiln.transpose
func.func @concat_and_global_pool(%x: tensor<1x2x5x5xf32>) -> tensor<1x6x1x1xf32> {
  %w1 = kiln.constant {value = dense<0.5> : tensor<2x2x1x1xf32>} : () -> tensor<2x2x1x1xf32>
  %w2 = kiln.constant {value = dense<0.5> : tensor<4x2x3x3xf32>} : () -> tensor<4x2x3x3xf32>
  %a = kiln.conv %x, %w1 {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x5x5xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x5x5xf32>
  %b = kiln.conv %x, %w2 {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<1x2x5x5xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x5x5xf32>
  %c = kiln.concat %a, %b {axis = 1 : i64} : (tensor<1x2x5x5xf32>, tensor<1x4x5x5xf32>) -> tensor<1x6x5x5xf32>
  %m = kiln.reduce_mean %c {axes = array<i64: 2, 3>, keepdims = true} : (tensor<1x6x5x5xf32>) -> tensor<1x6x1x1xf32>
  return %m : tensor<1x6x1x1xf32>
}

// -----

// Non-constant weights keep the NCHW convolution.
// CHECK-LABEL: func.func @runtime_weights
// CHECK: kiln.conv %arg0, %arg1
// CHECK-NOT: kiln.conv2d_nhwc
func.func @runtime_weights(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  %0 = kiln.conv %x, %w {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return %0 : tensor<1x4x6x6xf32>
}

// -----

// A transpose of a zero-sized tensor is not turned into a reshape (a 0 in
// a reshape target means "keep the dim").
// CHECK-LABEL: func.func @zero_sized_transpose
// CHECK: kiln.transpose %arg0 {perm = array<i64: 1, 0, 2>}
func.func @zero_sized_transpose(%x: tensor<0x1x3xf32>) -> tensor<1x0x3xf32> {
  %0 = kiln.transpose %x {perm = array<i64: 1, 0, 2>} : (tensor<0x1x3xf32>) -> tensor<1x0x3xf32>
  return %0 : tensor<1x0x3xf32>
}

// -----

// ReLU6 as Clip with scalar bounds (MobileNet-V2): the rank-0 bounds do not
// stop the transposes from sinking, so the two convolutions meet in NHWC,
// with a static batch and with one known only at run time.
// CHECK-LABEL: func.func @relu6_scalar_bounds
// CHECK: kiln.transpose %arg0 {perm = array<i64: 0, 2, 3, 1>}
// CHECK-NOT: kiln.transpose
// CHECK: kiln.conv2d_nhwc
// CHECK-NOT: kiln.transpose
// CHECK: kiln.conv2d_nhwc
// CHECK: kiln.transpose %{{.*}} {perm = array<i64: 0, 3, 1, 2>}
// CHECK-NOT: kiln.transpose
// CHECK: return
func.func @relu6_scalar_bounds(%x: tensor<1x3x8x8xf32>) -> tensor<1x2x8x8xf32> {
  %w1 = kiln.constant {value = dense<0.5> : tensor<4x3x3x3xf32>} : () -> tensor<4x3x3x3xf32>
  %w2 = kiln.constant {value = dense<1.5> : tensor<2x4x1x1xf32>} : () -> tensor<2x4x1x1xf32>
  %lo = kiln.constant {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %hi = kiln.constant {value = dense<6.0> : tensor<f32>} : () -> tensor<f32>
  %0 = kiln.conv %x, %w1 {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32>
  %1 = kiln.max %0, %lo : (tensor<1x4x8x8xf32>, tensor<f32>) -> tensor<1x4x8x8xf32>
  %2 = kiln.min %1, %hi : (tensor<1x4x8x8xf32>, tensor<f32>) -> tensor<1x4x8x8xf32>
  %3 = kiln.conv %2, %w2 {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x8x8xf32>, tensor<2x4x1x1xf32>) -> tensor<1x2x8x8xf32>
  return %3 : tensor<1x2x8x8xf32>
}

// -----

// CHECK-LABEL: func.func @relu6_scalar_bounds_runtime_batch
// CHECK: kiln.transpose %arg0 {perm = array<i64: 0, 2, 3, 1>}
// CHECK-NOT: kiln.transpose
// CHECK: kiln.conv2d_nhwc
// CHECK-NOT: kiln.transpose
// CHECK: kiln.conv2d_nhwc
// CHECK: kiln.transpose %{{.*}} {perm = array<i64: 0, 3, 1, 2>}
// CHECK-NOT: kiln.transpose
// CHECK: return
func.func @relu6_scalar_bounds_runtime_batch(%x: tensor<?x3x8x8xf32>) -> tensor<?x2x8x8xf32> {
  %w1 = kiln.constant {value = dense<0.5> : tensor<4x3x3x3xf32>} : () -> tensor<4x3x3x3xf32>
  %w2 = kiln.constant {value = dense<1.5> : tensor<2x4x1x1xf32>} : () -> tensor<2x4x1x1xf32>
  %lo = kiln.constant {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %hi = kiln.constant {value = dense<6.0> : tensor<f32>} : () -> tensor<f32>
  %0 = kiln.conv %x, %w1 {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<?x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<?x4x8x8xf32>
  %1 = kiln.max %0, %lo : (tensor<?x4x8x8xf32>, tensor<f32>) -> tensor<?x4x8x8xf32>
  %2 = kiln.min %1, %hi : (tensor<?x4x8x8xf32>, tensor<f32>) -> tensor<?x4x8x8xf32>
  %3 = kiln.conv %2, %w2 {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<?x4x8x8xf32>, tensor<2x4x1x1xf32>) -> tensor<?x2x8x8xf32>
  return %3 : tensor<?x2x8x8xf32>
}

// -----

// An NCHW pool with a run-time batch that no transpose feeds (MaxViT's
// pooled shortcut): channels_last between two transposes, the only pool
// that takes a run-time batch.
// CHECK-LABEL: func.func @run_time_batch_pool
// CHECK: %[[IN:.*]] = kiln.transpose %arg0 {perm = array<i64: 0, 2, 3, 1>} : (tensor<?x8x6x6xf32>) -> tensor<?x6x6x8xf32>
// CHECK: %[[P:.*]] = kiln.avg_pool %[[IN]] {{{.*}}channels_last{{.*}}} : (tensor<?x6x6x8xf32>) -> tensor<?x3x3x8xf32>
// CHECK: kiln.transpose %[[P]] {perm = array<i64: 0, 3, 1, 2>} : (tensor<?x3x3x8xf32>) -> tensor<?x8x3x3xf32>
func.func @run_time_batch_pool(%x: tensor<?x8x6x6xf32>) -> tensor<?x8x3x3xf32> {
  %p = kiln.avg_pool %x {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, ceil_pads = array<i64: 0, 0>, count_include_pad = false} : (tensor<?x8x6x6xf32>) -> tensor<?x8x3x3xf32>
  return %p : tensor<?x8x3x3xf32>
}

// -----

// With a static batch the NCHW pool stays as it is.
// CHECK-LABEL: func.func @static_batch_pool
// CHECK-NOT: kiln.transpose
func.func @static_batch_pool(%x: tensor<2x8x6x6xf32>) -> tensor<2x8x3x3xf32> {
  %p = kiln.avg_pool %x {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, ceil_pads = array<i64: 0, 0>, count_include_pad = false} : (tensor<2x8x6x6xf32>) -> tensor<2x8x3x3xf32>
  return %p : tensor<2x8x3x3xf32>
}

// -----

// A squeeze-excitation block under a run-time batch: its scale [batch, C, 1,
// 1] is a quarter of the feature map or less at every batch, so the product
// moves to NHWC with the pool and the convolutions around it, as with a
// static batch. An operand as large as the feature map (the residual) is
// not re-laid out.
// CHECK-LABEL: func.func @excitation_runtime_batch
// CHECK: kiln.transpose %arg0 {perm = array<i64: 0, 2, 3, 1>}
// CHECK-NOT: kiln.transpose
// CHECK: kiln.conv2d_nhwc
// CHECK: kiln.reduce_mean %{{.*}} {axes = array<i64: 1, 2>, keepdims = true} : (tensor<?x8x8x4xf32>) -> tensor<?x1x1x4xf32>
// CHECK-NOT: kiln.transpose
// CHECK: kiln.conv2d_nhwc
// CHECK-NOT: kiln.transpose
// CHECK: kiln.mul %{{.*}}, %{{.*}} : (tensor<?x8x8x4xf32>, tensor<?x1x1x4xf32>) -> tensor<?x8x8x4xf32>
// CHECK: kiln.transpose %{{.*}} {perm = array<i64: 0, 3, 1, 2>}
// CHECK: kiln.add
// CHECK: return
func.func @excitation_runtime_batch(%x: tensor<?x3x8x8xf32>, %r: tensor<?x4x8x8xf32>) -> tensor<?x4x8x8xf32> {
  %w1 = kiln.constant {value = dense<0.5> : tensor<4x3x3x3xf32>} : () -> tensor<4x3x3x3xf32>
  %w2 = kiln.constant {value = dense<1.5> : tensor<4x4x1x1xf32>} : () -> tensor<4x4x1x1xf32>
  %0 = kiln.conv %x, %w1 {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<?x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<?x4x8x8xf32>
  %1 = kiln.reduce_mean %0 {axes = array<i64: 2, 3>, keepdims = true} : (tensor<?x4x8x8xf32>) -> tensor<?x4x1x1xf32>
  %2 = kiln.conv %1, %w2 {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<?x4x1x1xf32>, tensor<4x4x1x1xf32>) -> tensor<?x4x1x1xf32>
  %3 = kiln.sigmoid %2 : (tensor<?x4x1x1xf32>) -> tensor<?x4x1x1xf32>
  %4 = kiln.mul %0, %3 : (tensor<?x4x8x8xf32>, tensor<?x4x1x1xf32>) -> tensor<?x4x8x8xf32>
  %5 = kiln.add %4, %r : (tensor<?x4x8x8xf32>, tensor<?x4x8x8xf32>) -> tensor<?x4x8x8xf32>
  return %5 : tensor<?x4x8x8xf32>
}

// -----

// The same block over images whose size is known only at run time (a
// segmentation or detection backbone compiled once for every image size):
// only the channels need be known for the NHWC kernels, so the
// convolutions, the pool, the excitation product and the ReLU between them
// move to NHWC as with static images, with one transpose in and one out.
// The scale [batch, C, 1, 1] broadcasts along the run-time height and
// width, counted as small.
// CHECK-LABEL: func.func @excitation_runtime_image_size
// CHECK: kiln.transpose %arg0 {perm = array<i64: 0, 2, 3, 1>} : (tensor<?x3x?x?xf32>) -> tensor<?x?x?x3xf32>
// CHECK-NOT: kiln.transpose
// CHECK: kiln.conv2d_nhwc {{.*}} -> tensor<?x?x?x4xf32>
// CHECK-NOT: kiln.transpose
// CHECK: kiln.max_pool {{.*}}channels_last{{.*}} : (tensor<?x?x?x4xf32>) -> tensor<?x?x?x4xf32>
// CHECK-NOT: kiln.transpose
// CHECK: kiln.conv2d_nhwc
// CHECK-NOT: kiln.transpose
// CHECK: kiln.mul %{{.*}}, %{{.*}} : (tensor<?x?x?x4xf32>, tensor<?x1x1x4xf32>) -> tensor<?x?x?x4xf32>
// CHECK-NEXT: kiln.transpose %{{.*}} {perm = array<i64: 0, 3, 1, 2>} : (tensor<?x?x?x4xf32>) -> tensor<?x4x?x?xf32>
// CHECK-NEXT: return
func.func @excitation_runtime_image_size(%x: tensor<?x3x?x?xf32>) -> tensor<?x4x?x?xf32> {
  %w1 = kiln.constant {value = dense<0.5> : tensor<4x3x3x3xf32>} : () -> tensor<4x3x3x3xf32>
  %w2 = kiln.constant {value = dense<1.5> : tensor<4x4x1x1xf32>} : () -> tensor<4x4x1x1xf32>
  %0 = kiln.conv %x, %w1 {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<?x3x?x?xf32>, tensor<4x3x3x3xf32>) -> tensor<?x4x?x?xf32>
  %r = kiln.relu %0 : (tensor<?x4x?x?xf32>) -> tensor<?x4x?x?xf32>
  %p = kiln.max_pool %r {dilations = array<i64: 1, 1>, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<?x4x?x?xf32>) -> tensor<?x4x?x?xf32>
  %1 = kiln.reduce_mean %p {axes = array<i64: 2, 3>, keepdims = true} : (tensor<?x4x?x?xf32>) -> tensor<?x4x1x1xf32>
  %2 = kiln.conv %1, %w2 {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<?x4x1x1xf32>, tensor<4x4x1x1xf32>) -> tensor<?x4x1x1xf32>
  %3 = kiln.sigmoid %2 : (tensor<?x4x1x1xf32>) -> tensor<?x4x1x1xf32>
  %4 = kiln.mul %p, %3 : (tensor<?x4x?x?xf32>, tensor<?x4x1x1xf32>) -> tensor<?x4x?x?xf32>
  return %4 : tensor<?x4x?x?xf32>
}

// -----

// A mean over H and W without keepdims (torchvision's x.mean([2, 3])) reads
// the NHWC feature map directly: its kept axes, N and C, are in the same
// order there, so no transpose back to NCHW is left. A reduction that
// leaves the kept axes in another order ends in a transpose of them.
// CHECK-LABEL: func.func @mean_without_keepdims
// CHECK: kiln.conv2d_nhwc
// CHECK-NOT: kiln.transpose
// CHECK: %[[M:.*]] = kiln.reduce_mean %{{.*}} {axes = array<i64: 1, 2>, keepdims = false} : (tensor<?x8x8x4xf32>) -> tensor<?x4xf32>
// CHECK: %[[S:.*]] = kiln.reduce_sum %{{.*}} {axes = array<i64: 1>, keepdims = false} : (tensor<?x8x8x4xf32>) -> tensor<?x8x4xf32>
// CHECK: %[[T:.*]] = kiln.transpose %[[S]] {perm = array<i64: 0, 2, 1>} : (tensor<?x8x4xf32>) -> tensor<?x4x8xf32>
// CHECK: return %[[M]], %[[T]]
func.func @mean_without_keepdims(%x: tensor<?x3x8x8xf32>) -> (tensor<?x4xf32>, tensor<?x4x8xf32>) {
  %w1 = kiln.constant {value = dense<0.5> : tensor<4x3x3x3xf32>} : () -> tensor<4x3x3x3xf32>
  %0 = kiln.conv %x, %w1 {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<?x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<?x4x8x8xf32>
  %1 = kiln.reduce_mean %0 {axes = array<i64: 2, 3>, keepdims = false} : (tensor<?x4x8x8xf32>) -> tensor<?x4xf32>
  %2 = kiln.reduce_sum %0 {axes = array<i64: 2>, keepdims = false} : (tensor<?x4x8x8xf32>) -> tensor<?x4x8xf32>
  return %1, %2 : tensor<?x4xf32>, tensor<?x4x8xf32>
}

// -----

// Quantized convolutions (kiln.conv's integer form) take NHWC too, their
// zero point kept; the transposes between them sink through the
// requantization (elementwise) and cancel, as between float convolutions.
// CHECK-LABEL: func.func @integer_chain
// CHECK: %[[IN:.*]] = kiln.transpose %arg0 {perm = array<i64: 0, 2, 3, 1>} : (tensor<1x3x8x8xui8>) -> tensor<1x8x8x3xui8>
// CHECK: %[[C1:.*]] = kiln.conv2d_nhwc %[[IN]], %{{.*}} bias %{{.*}} {{{.*}}input_zero_point = 128 : i64{{.*}}} : (tensor<1x8x8x3xui8>, tensor<4x3x3x3xi8>, tensor<4xi32>) -> tensor<1x8x8x4xi32>
// CHECK: %[[Q:.*]] = kiln.cast %[[C1]] {{.*}} -> tensor<1x8x8x4xui8>
// CHECK: %[[C2:.*]] = kiln.conv2d_nhwc %[[Q]], %{{.*}} {{{.*}}input_zero_point = 7 : i64{{.*}}} : (tensor<1x8x8x4xui8>, tensor<2x4x1x1xi8>) -> tensor<1x8x8x2xi32>
// CHECK: %[[OUT:.*]] = kiln.transpose %[[C2]] {perm = array<i64: 0, 3, 1, 2>}
// CHECK-NOT: kiln.transpose
// CHECK: return %[[OUT]]
func.func @integer_chain(%x: tensor<1x3x8x8xui8>) -> tensor<1x2x8x8xi32> {
  %w1 = kiln.constant {value = dense<3> : tensor<4x3x3x3xi8>} : () -> tensor<4x3x3x3xi8>
  %b1 = kiln.constant {value = dense<-100> : tensor<4xi32>} : () -> tensor<4xi32>
  %w2 = kiln.constant {value = dense<-2> : tensor<2x4x1x1xi8>} : () -> tensor<2x4x1x1xi8>
  %0 = kiln.conv %x, %w1, %b1 {dilations = array<i64: 1, 1>, group = 1 : i64, input_zero_point = 128 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<1x3x8x8xui8>, tensor<4x3x3x3xi8>, tensor<4xi32>) -> tensor<1x4x8x8xi32>
  %1 = kiln.cast %0 {to = ui8} : (tensor<1x4x8x8xi32>) -> tensor<1x4x8x8xui8>
  %2 = kiln.conv %1, %w2 {dilations = array<i64: 1, 1>, group = 1 : i64, input_zero_point = 7 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x8x8xui8>, tensor<2x4x1x1xi8>) -> tensor<1x2x8x8xi32>
  return %2 : tensor<1x2x8x8xi32>
}
