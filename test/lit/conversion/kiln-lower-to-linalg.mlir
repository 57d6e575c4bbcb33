// RUN: kiln-opt %s --kiln-lower-to-linalg --split-input-file --verify-diagnostics | FileCheck %s

// Broadcasting becomes indexing maps: the size-1 dim reads index 0, the
// missing leading dim is dropped.
// CHECK-DAG: #[[BCAST_A:.*]] = affine_map<(d0, d1) -> (d0, 0)>
// CHECK-DAG: #[[BCAST_B:.*]] = affine_map<(d0, d1) -> (d1)>
// Model inputs are read-only for bufferization.
// CHECK-LABEL: func.func @broadcast_add
// CHECK-SAME: bufferization.writable = false
// CHECK: linalg.generic {indexing_maps = [#[[BCAST_A]], #[[BCAST_B]], #{{.*}}], iterator_types = ["parallel", "parallel"]}
// CHECK: arith.addf
func.func @broadcast_add(%a: tensor<4x1xf32>, %b: tensor<3xf32>) -> tensor<4x3xf32> {
  %0 = kiln.add %a, %b : (tensor<4x1xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

// Integer matmul (no kernel): zero-filled accumulator, reduction dim before
// the innermost output dim so the inner loop walks the output contiguously.
// CHECK-LABEL: func.func @matmul_i32
// CHECK: %[[ZERO:.*]] = arith.constant 0 : i32
// CHECK: %[[ACC:.*]] = linalg.fill ins(%[[ZERO]] : i32)
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "reduction", "parallel"]
// CHECK-SAME: outs(%[[ACC]] : tensor<4x5xi32>)
// CHECK: arith.muli
// CHECK: arith.addi
func.func @matmul_i32(%a: tensor<4x3xi32>, %b: tensor<3x5xi32>) -> tensor<4x5xi32> {
  %0 = kiln.matmul %a, %b : (tensor<4x3xi32>, tensor<3x5xi32>) -> tensor<4x5xi32>
  return %0 : tensor<4x5xi32>
}

// -----

// f32 matmul with a run-time right operand: the matmul kernel, with its
// parameter block [batch, M, N, K, batch strides A/B/C, lda, ldb, ldc, transB,
// offset A, offset B] (a rank-2 right operand is broadcast: stride 0).
// CHECK-LABEL: func.func @matmul_f32
// CHECK: %[[P:.*]] = arith.constant dense<[2, 4, 5, 3, 12, 0, 20, 3, 5, 5, 0, 0, 0]> : tensor<13xi64>
// CHECK: %[[INIT:.*]] = tensor.empty() : tensor<2x4x5xf32>
// CHECK: kiln.call_kernel @kiln_matmul_f32(%[[P]], %arg0, %arg1) into %[[INIT]] {kiln.flops = 240 : i64, result_position = 3 : i64}
func.func @matmul_f32(%a: tensor<2x4x3xf32>, %b: tensor<3x5xf32>) -> tensor<2x4x5xf32> {
  %0 = kiln.matmul %a, %b : (tensor<2x4x3xf32>, tensor<3x5xf32>) -> tensor<2x4x5xf32>
  return %0 : tensor<2x4x5xf32>
}

// -----

// Attention heads: Q and K are slices of one projection [4 tokens, 12],
// split into 2 heads of 3 and transposed. The kernel reads the projection
// in place: A with batch stride 3 and lda 12; K^T as a transposed B (ldb
// 12, transB) at offset 6. The slices, reshapes and transposes go.
// CHECK-LABEL: func.func @attention_scores_read_in_place
// CHECK: %[[P:.*]] = arith.constant dense<[2, 4, 4, 3, 3, 3, 16, 12, 12, 4, 1, 0, 6]> : tensor<13xi64>
// CHECK-NOT: linalg.transpose
// CHECK-NOT: tensor.extract_slice
// CHECK: kiln.call_kernel @kiln_matmul_f32(%[[P]], %arg0, %arg0)
func.func @attention_scores_read_in_place(%qkv: tensor<4x12xf32>) -> tensor<2x4x4xf32> {
  %s0 = kiln.constant {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %s6 = kiln.constant {value = dense<6> : tensor<1xi64>} : () -> tensor<1xi64>
  %s12 = kiln.constant {value = dense<12> : tensor<1xi64>} : () -> tensor<1xi64>
  %ax = kiln.constant {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %st = kiln.constant {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %shape = kiln.constant {value = dense<[4, 2, 3]> : tensor<3xi64>} : () -> tensor<3xi64>
  %q = kiln.slice %qkv, %s0, %s6, %ax, %st : (tensor<4x12xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4x6xf32>
  %k = kiln.slice %qkv, %s6, %s12, %ax, %st : (tensor<4x12xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4x6xf32>
  %qh = kiln.reshape %q, %shape {allowzero = false} : (tensor<4x6xf32>, tensor<3xi64>) -> tensor<4x2x3xf32>
  %kh = kiln.reshape %k, %shape {allowzero = false} : (tensor<4x6xf32>, tensor<3xi64>) -> tensor<4x2x3xf32>
  %qt = kiln.transpose %qh {perm = array<i64: 1, 0, 2>} : (tensor<4x2x3xf32>) -> tensor<2x4x3xf32>
  %kt = kiln.transpose %kh {perm = array<i64: 1, 2, 0>} : (tensor<4x2x3xf32>) -> tensor<2x3x4xf32>
  %s = kiln.matmul %qt, %kt : (tensor<2x4x3xf32>, tensor<2x3x4xf32>) -> tensor<2x4x4xf32>
  return %s : tensor<2x4x4xf32>
}

// -----

// matmul(softmax(scale * matmul(Q, K^T)), V): one attention kernel call;
// the scores never become a tensor. params: batch 2, M 4, N 5, D 3, DV 3;
// Q offset 0, batch stride 12, row stride 3; K^T offset 0, batch stride 15,
// row stride 5, not transposed; V offset 0, batch stride 15, row stride 3;
// O batch stride 12, row stride 3.
// CHECK-LABEL: func.func @attention
// CHECK-DAG: %[[P:.*]] = arith.constant dense<[2, 4, 5, 3, 3, 0, 12, 3, 0, 15, 5, 0, 0, 15, 3, 12, 3]> : tensor<17xi64>
// CHECK-DAG: %[[S:.*]] = arith.constant 2.500000e-01 : f32
// CHECK: kiln.call_kernel @kiln_attention_f32(%[[P]], %arg0, %arg1, %arg2, %[[S]]) into %{{.*}} {kiln.flops = 480 : i64, result_position = 4 : i64}
// CHECK-NOT: kiln_matmul_f32
// CHECK-NOT: kiln_softmax_f32
func.func @attention(%q: tensor<2x4x3xf32>, %kt: tensor<2x3x5xf32>, %v: tensor<2x5x3xf32>) -> tensor<2x4x3xf32> {
  %s = kiln.matmul %q, %kt : (tensor<2x4x3xf32>, tensor<2x3x5xf32>) -> tensor<2x4x5xf32>
  %p = kiln.softmax %s {axis = 2 : i64, log = false, scale = 0.25 : f32} : (tensor<2x4x5xf32>) -> tensor<2x4x5xf32>
  %o = kiln.matmul %p, %v : (tensor<2x4x5xf32>, tensor<2x5x3xf32>) -> tensor<2x4x3xf32>
  return %o : tensor<2x4x3xf32>
}

// -----

// With an additive mask before the softmax (a padding mask per sequence,
// [batch 2, 1, 1, keys], against scores [2, heads 3, 4, 5]) and the scores
// times a constant: kiln_attention_mask_f32, which reads the mask in place.
// The block: the 17 fields above (batch 6), then mask offset 0, batch div 3
// (the heads share a sequence's mask), mod 2, batch stride 5 (one row of 5
// keys), row stride 0 (every query row reads the same one).
// CHECK-LABEL: func.func @attention_padding_mask
// CHECK-DAG: %[[P:.*]] = arith.constant dense<[6, 4, 5, 3, 3, 0, 12, 3, 0, 15, 5, 0, 0, 15, 3, 12, 3, 0, 3, 2, 5, 0]> : tensor<22xi64>
// CHECK-DAG: %[[S:.*]] = arith.constant 2.500000e-01 : f32
// CHECK-DAG: %[[QK:.*]] = arith.constant 5.000000e-01 : f32
// CHECK-NOT: kiln_matmul_f32
// CHECK-NOT: kiln_softmax_f32
// CHECK: kiln.call_kernel @kiln_attention_mask_f32(%[[P]], %arg0, %arg1, %arg2, %arg3, %[[S]], %[[QK]]) into %{{.*}} {kiln.flops = 1440 : i64, result_position = 5 : i64}
func.func @attention_padding_mask(%q: tensor<2x3x4x3xf32>, %kt: tensor<2x3x3x5xf32>, %v: tensor<2x3x5x3xf32>, %mask: tensor<2x1x1x5xf32>) -> tensor<2x3x4x3xf32> {
  %half = kiln.constant {value = dense<5.000000e-01> : tensor<f32>} : () -> tensor<f32>
  %s = kiln.matmul %q, %kt : (tensor<2x3x4x3xf32>, tensor<2x3x3x5xf32>) -> tensor<2x3x4x5xf32>
  %h = kiln.mul %s, %half : (tensor<2x3x4x5xf32>, tensor<f32>) -> tensor<2x3x4x5xf32>
  %m = kiln.add %mask, %h : (tensor<2x1x1x5xf32>, tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32>
  %p = kiln.softmax %m {axis = 3 : i64, log = false, scale = 0.25 : f32} : (tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32>
  %o = kiln.matmul %p, %v : (tensor<2x3x4x5xf32>, tensor<2x3x5x3xf32>) -> tensor<2x3x4x3xf32>
  return %o : tensor<2x3x4x3xf32>
}

// -----

// A mask per head but shared by the batch ([1, heads 3, 4, 5], a position
// bias): div 1, mod 3, batch stride 20, row stride 5. A mask that
// broadcasts along the heads but not the batch between them (not one
// run of batch dims, [2, 1, 3, 4, 5] against [2, 2, 3, 4, 5]) stays three
// kernel calls.
// CHECK-LABEL: func.func @attention_bias_per_head
// CHECK: arith.constant dense<[6, 4, 5, 3, 3, 0, 12, 3, 0, 15, 5, 0, 0, 15, 3, 12, 3, 0, 1, 3, 20, 5]> : tensor<22xi64>
// CHECK: kiln.call_kernel @kiln_attention_mask_f32
func.func @attention_bias_per_head(%q: tensor<2x3x4x3xf32>, %kt: tensor<2x3x3x5xf32>, %v: tensor<2x3x5x3xf32>, %bias: tensor<3x4x5xf32>) -> tensor<2x3x4x3xf32> {
  %s = kiln.matmul %q, %kt : (tensor<2x3x4x3xf32>, tensor<2x3x3x5xf32>) -> tensor<2x3x4x5xf32>
  %m = kiln.add %s, %bias : (tensor<2x3x4x5xf32>, tensor<3x4x5xf32>) -> tensor<2x3x4x5xf32>
  %p = kiln.softmax %m {axis = 3 : i64, log = false} : (tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32>
  %o = kiln.matmul %p, %v : (tensor<2x3x4x5xf32>, tensor<2x3x5x3xf32>) -> tensor<2x3x4x3xf32>
  return %o : tensor<2x3x4x3xf32>
}

// -----

// masked_fill(cond, -inf) before the softmax (ONNX Where, as a causal mask
// is exported): the mask kernel, with a float mask made of the condition
// (-inf where it holds, 0 elsewhere) and shared by both heads (div 1, mod
// 1, batch stride 0, row stride 5). A Where whose fill is not far below
// any score (0 here) changes the softmax another way and is not fused.
// CHECK-LABEL: func.func @attention_where_mask
// CHECK-DAG: %[[P:.*]] = arith.constant dense<[2, 4, 5, 3, 3, 0, 12, 3, 0, 15, 5, 0, 0, 15, 3, 12, 3, 0, 1, 1, 0, 5]> : tensor<22xi64>
// CHECK: %[[MASK:.*]] = linalg.generic {{.*}} ins(%arg3 : tensor<4x5xi1>)
// CHECK: arith.select %{{.*}}, %{{.*}}, %{{.*}} : f32
// CHECK: kiln.call_kernel @kiln_attention_mask_f32(%[[P]], %arg0, %arg1, %arg2, %[[MASK]],
func.func @attention_where_mask(%q: tensor<2x4x3xf32>, %kt: tensor<2x3x5xf32>, %v: tensor<2x5x3xf32>, %cond: tensor<4x5xi1>) -> tensor<2x4x3xf32> {
  %ninf = kiln.constant {value = dense<0xFF800000> : tensor<f32>} : () -> tensor<f32>
  %s = kiln.matmul %q, %kt : (tensor<2x4x3xf32>, tensor<2x3x5xf32>) -> tensor<2x4x5xf32>
  %m = kiln.select %cond, %ninf, %s : (tensor<4x5xi1>, tensor<f32>, tensor<2x4x5xf32>) -> tensor<2x4x5xf32>
  %p = kiln.softmax %m {axis = 2 : i64, log = false} : (tensor<2x4x5xf32>) -> tensor<2x4x5xf32>
  %o = kiln.matmul %p, %v : (tensor<2x4x5xf32>, tensor<2x5x3xf32>) -> tensor<2x4x3xf32>
  return %o : tensor<2x4x3xf32>
}
// CHECK-LABEL: func.func @attention_where_zero
// CHECK-NOT: kiln_attention
// CHECK: kiln.call_kernel @kiln_softmax_f32
func.func @attention_where_zero(%q: tensor<2x4x3xf32>, %kt: tensor<2x3x5xf32>, %v: tensor<2x5x3xf32>, %cond: tensor<4x5xi1>) -> tensor<2x4x3xf32> {
  %zero = kiln.constant {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %s = kiln.matmul %q, %kt : (tensor<2x4x3xf32>, tensor<2x3x5xf32>) -> tensor<2x4x5xf32>
  %m = kiln.select %cond, %zero, %s : (tensor<4x5xi1>, tensor<f32>, tensor<2x4x5xf32>) -> tensor<2x4x5xf32>
  %p = kiln.softmax %m {axis = 2 : i64, log = false} : (tensor<2x4x5xf32>) -> tensor<2x4x5xf32>
  %o = kiln.matmul %p, %v : (tensor<2x4x5xf32>, tensor<2x5x3xf32>) -> tensor<2x4x3xf32>
  return %o : tensor<2x4x3xf32>
}

// -----

// CHECK-LABEL: func.func @attention_mask_split_run
// CHECK-NOT: kiln_attention
// CHECK: kiln.call_kernel @kiln_matmul_f32
// CHECK: kiln.call_kernel @kiln_softmax_f32
// CHECK: kiln.call_kernel @kiln_matmul_f32
func.func @attention_mask_split_run(%q: tensor<2x2x3x4x3xf32>, %kt: tensor<2x2x3x3x5xf32>, %v: tensor<2x2x3x5x3xf32>, %mask: tensor<2x1x3x4x5xf32>) -> tensor<2x2x3x4x3xf32> {
  %s = kiln.matmul %q, %kt : (tensor<2x2x3x4x3xf32>, tensor<2x2x3x3x5xf32>) -> tensor<2x2x3x4x5xf32>
  %m = kiln.add %s, %mask : (tensor<2x2x3x4x5xf32>, tensor<2x1x3x4x5xf32>) -> tensor<2x2x3x4x5xf32>
  %p = kiln.softmax %m {axis = 4 : i64, log = false} : (tensor<2x2x3x4x5xf32>) -> tensor<2x2x3x4x5xf32>
  %o = kiln.matmul %p, %v : (tensor<2x2x3x4x5xf32>, tensor<2x2x3x5x3xf32>) -> tensor<2x2x3x4x3xf32>
  return %o : tensor<2x2x3x4x3xf32>
}

// -----

// A constant right operand is a 1x1 convolution over the 8 rows: its
// weights are packed at compile time into a zero-padded 32-wide panel
// (B[k][n] lands at k * 32 + n).
// CHECK-LABEL: func.func @matmul_constant_rhs
// CHECK: arith.constant dense<[1, 1, 8, 2, 1, 8, 3, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0]> : tensor<17xi64>
// CHECK: arith.constant dense<[1.000000e+00, 2.000000e+00, 3.000000e+00, 0.000000e+00
// CHECK: kiln.call_kernel @kiln_conv2d_nhwc_f32
// CHECK-SAME: {kiln.flops = 96 : i64, kiln.kernel_layer = "conv2d_nhwc_f32:1,1,8,2,1,8,3,1,1,1,1,0,0,1,1,1,0", result_position = 5 : i64, row_strides = array<i64: 1, 7, -1, 8>}
func.func @matmul_constant_rhs(%a: tensor<8x2xf32>) -> tensor<8x3xf32> {
  %b = kiln.constant {value = dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>} : () -> tensor<2x3xf32>
  %0 = kiln.matmul %a, %b : (tensor<8x2xf32>, tensor<2x3xf32>) -> tensor<8x3xf32>
  return %0 : tensor<8x3xf32>
}

// -----

// Channels-last pooling is a kernel call: [n, h, w, c, oh, ow, kh, kw, sh,
// sw, pad top, pad left, dh, dw, pad bottom, pad right, flags].
// CHECK-LABEL: func.func @max_pool_nhwc
// CHECK: arith.constant dense<[1, 8, 8, 3, 4, 4, 3, 3, 2, 2, 1, 1, 1, 1, 0, 0, 0]> : tensor<17xi64>
// CHECK: kiln.call_kernel @kiln_pool2d_nhwc_f32
// CHECK-SAME: {result_position = 2 : i64, row_strides = array<i64: 1, 2, -1, 3>}
func.func @max_pool_nhwc(%x: tensor<1x8x8x3xf32>) -> tensor<1x4x4x3xf32> {
  %0 = kiln.max_pool %x {channels_last, dilations = array<i64: 1, 1>, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 0, 0>, strides = array<i64: 2, 2>} : (tensor<1x8x8x3xf32>) -> tensor<1x4x4x3xf32>
  return %0 : tensor<1x4x4x3xf32>
}

// -----

// 8-bit max pooling (a quantized CNN's stem pool, on its bytes): the byte
// kernel, flagged signed (4) for i8 and not for ui8, whose values pass as
// signless bytes and come back as ui8.
// CHECK-LABEL: func.func @max_pool_nhwc_bytes
// CHECK: arith.constant dense<[1, 8, 8, 3, 4, 4, 3, 3, 2, 2, 1, 1, 1, 1, 0, 0, 0]> : tensor<17xi64>
// CHECK: kiln.call_kernel @kiln_maxpool2d_nhwc_i8
// CHECK-SAME: -> tensor<1x4x4x3xi8>
// CHECK: arith.constant dense<[1, 8, 8, 3, 4, 4, 3, 3, 2, 2, 1, 1, 1, 1, 0, 0, 4]> : tensor<17xi64>
// CHECK: kiln.call_kernel @kiln_maxpool2d_nhwc_i8
func.func @max_pool_nhwc_bytes(%x: tensor<1x8x8x3xui8>, %y: tensor<1x8x8x3xi8>) -> (tensor<1x4x4x3xui8>, tensor<1x4x4x3xi8>) {
  %0 = kiln.max_pool %x {channels_last, dilations = array<i64: 1, 1>, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 0, 0>, strides = array<i64: 2, 2>} : (tensor<1x8x8x3xui8>) -> tensor<1x4x4x3xui8>
  %1 = kiln.max_pool %y {channels_last, dilations = array<i64: 1, 1>, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 0, 0>, strides = array<i64: 2, 2>} : (tensor<1x8x8x3xi8>) -> tensor<1x4x4x3xi8>
  return %0, %1 : tensor<1x4x4x3xui8>, tensor<1x4x4x3xi8>
}

// -----

// Max reduction starts from -inf and reshapes back for keepdims.
// CHECK-LABEL: func.func @reduce_max_keepdims
// CHECK: arith.constant 0xFF800000 : f32
// CHECK: iterator_types = ["parallel", "reduction"]
// CHECK: arith.maximumf
// CHECK: tensor.reshape {{.*}} -> tensor<4x1xf32>
func.func @reduce_max_keepdims(%x: tensor<4x5xf32>) -> tensor<4x1xf32> {
  %0 = kiln.reduce_max %x {axes = array<i64: 1>, keepdims = true} : (tensor<4x5xf32>) -> tensor<4x1xf32>
  return %0 : tensor<4x1xf32>
}

// -----

// Convolution pads first, exposes the group dimension, and collapses back.
// CHECK-LABEL: func.func @conv_grouped
// CHECK: tensor.pad
// CHECK: tensor.expand_shape {{.*}} into tensor<1x2x2x10x10xf32>
// CHECK: linalg.generic
// CHECK: tensor.collapse_shape {{.*}} into tensor<1x4x8x8xf32>
func.func @conv_grouped(%x: tensor<1x4x8x8xf32>, %w: tensor<4x2x3x3xf32>) -> tensor<1x4x8x8xf32> {
  %0 = kiln.conv %x, %w {dilations = array<i64: 1, 1>, group = 2 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<1x4x8x8xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x8x8xf32>
  return %0 : tensor<1x4x8x8xf32>
}

// -----

// Positive-step slices are extract_slice; casts are arith conversions.
// CHECK-LABEL: func.func @slice_cast
// CHECK: tensor.extract_slice %{{.*}}[2] [3] [2] : tensor<8xf32> to tensor<3xf32>
// CHECK: arith.fptosi {{.*}} : f32 to i64
func.func @slice_cast(%x: tensor<8xf32>) -> tensor<3xi64> {
  %s = kiln.constant {value = dense<[2]> : tensor<1xi64>} : () -> tensor<1xi64>
  %e = kiln.constant {value = dense<[8]> : tensor<1xi64>} : () -> tensor<1xi64>
  %a = kiln.constant {value = dense<[0]> : tensor<1xi64>} : () -> tensor<1xi64>
  %p = kiln.constant {value = dense<[2]> : tensor<1xi64>} : () -> tensor<1xi64>
  %0 = kiln.slice %x, %s, %e, %a, %p : (tensor<8xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<3xf32>
  %1 = kiln.cast %0 {to = i64} : (tensor<3xf32>) -> tensor<3xi64>
  return %1 : tensor<3xi64>
}

// -----

// Dims known only at run time that an op cannot take are rejected with an
// error at the op, not a crash: here two unnamed dims, either of which may
// be the 1 that broadcasts (the lowering of such dims is
// kiln-lower-to-linalg-dynamic.mlir).
func.func @dynamic(%x: tensor<?xf32>, %y: tensor<?xf32>) -> tensor<?xf32> {
  // expected-error @+2 {{an operand has dynamic shape}}
  // expected-error @+1 {{the result has dynamic shape}}
  %0 = kiln.add %x, %y : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

// -----

// Unsigned integers pick unsigned arith ops; afterwards every type is
// signless, as arith and bufferization expect.
// CHECK-LABEL: func.func @unsigned(%{{.*}}: tensor<4xi8> {bufferization.writable = false}, %{{.*}}: tensor<4xi8> {bufferization.writable = false}) -> (tensor<4xi8>, tensor<4xi1>)
// CHECK: arith.divui
// CHECK: arith.cmpi ult
// CHECK-NOT: ui8
func.func @unsigned(%a: tensor<4xui8>, %b: tensor<4xui8>) -> (tensor<4xui8>, tensor<4xi1>) {
  %0 = kiln.div %a, %b : (tensor<4xui8>, tensor<4xui8>) -> tensor<4xui8>
  %1 = kiln.less %a, %b : (tensor<4xui8>, tensor<4xui8>) -> tensor<4xi1>
  return %0, %1 : tensor<4xui8>, tensor<4xi1>
}

// -----

// Scatters are ordered loops over the updates that thread the output
// through tensor.insert (here with accumulation).
// CHECK-LABEL: func.func @scatter_add
// CHECK: scf.for
// CHECK: scf.for
// CHECK: tensor.extract %{{.*}} : tensor<1x2xi64>
// CHECK: arith.addf
// CHECK: tensor.insert
func.func @scatter_add(%x: tensor<1x5xf32>, %i: tensor<1x2xi64>, %u: tensor<1x2xf32>) -> tensor<1x5xf32> {
  %0 = kiln.scatter_elements %x, %i, %u {axis = 1 : i64, reduction = "add"} : (tensor<1x5xf32>, tensor<1x2xi64>, tensor<1x2xf32>) -> tensor<1x5xf32>
  return %0 : tensor<1x5xf32>
}

// -----

// Random numbers: SplitMix64 of the flat index (from linalg.index) and the
// seed, its top 24 bits scaled into [low, high).
// CHECK-LABEL: func.func @random_uniform
// CHECK: linalg.generic
// CHECK: linalg.index 0
// CHECK: linalg.index 1
// CHECK: arith.shrui
// CHECK: arith.uitofp
// CHECK: linalg.yield
func.func @random_uniform(%x: tensor<3x4xf32>) -> tensor<3x4xf32> {
  %u = kiln.random_uniform_like %x {dtype = f32, low = -1.0 : f64, high = 1.0 : f64, seed = 3 : i64} : (tensor<3x4xf32>) -> tensor<3x4xf32>
  return %u : tensor<3x4xf32>
}

// -----

// Integer division cannot trap: a zero divisor (and INT_MIN / -1) is
// replaced by 1 before the divsi, and a zero divisor gives 0.
// CHECK-LABEL: func.func @int_div
// CHECK: arith.cmpi eq
// CHECK: arith.select
// CHECK: arith.divsi
// CHECK: arith.select
func.func @int_div(%a: tensor<4xi32>, %b: tensor<4xi32>) -> tensor<4xi32> {
  %0 = kiln.div %a, %b : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

// A Loop's iteration guard becomes a call of the runtime's kiln_loop_guard
// with the node name as a NUL-terminated constant ("w", "h", "i", "l", "e",
// NUL); the answer is compared with 0.
// CHECK-DAG: memref.global "private" constant @kiln_loop_node_0 : memref<6xi8> = dense<[119, 104, 105, 108, 101, 0]>
// CHECK-DAG: func.func private @kiln_loop_guard(i64, i64) -> i32
// CHECK-LABEL: func.func @loop_guard
// CHECK: %[[I:.*]] = tensor.extract
// CHECK: %[[NAME:.*]] = memref.get_global @kiln_loop_node_0
// CHECK: %[[PTR:.*]] = memref.extract_aligned_pointer_as_index %[[NAME]]
// CHECK: %[[ADDR:.*]] = arith.index_cast %[[PTR]] : index to i64
// CHECK: %[[ANSWER:.*]] = call @kiln_loop_guard(%[[I]], %[[ADDR]]) : (i64, i64) -> i32
// CHECK: %[[GO:.*]] = arith.cmpi ne, %[[ANSWER]], %{{.*}} : i32
// CHECK: return %[[GO]]
func.func @loop_guard(%t: tensor<i64>) -> i1 {
  %i = tensor.extract %t[] : tensor<i64>
  %go = kiln.loop_guard %i {node = "while"} : i1
  return %go : i1
}

// -----

// Ops whose results have no elements compute nothing: a softmax over an empty
// KV cache and a product with an empty batch become tensor.empty, with no
// kernel call or linalg op (the microkernels take no empty shapes). A
// product with K = 0 has elements (zeros) and is lowered as usual.
// CHECK-LABEL: func.func @empty_results
// CHECK-NOT: kiln.
// CHECK-NOT: call @kiln_softmax
// CHECK-DAG: tensor.empty() : tensor<2x4x0xf32>
// CHECK-DAG: tensor.empty() : tensor<0x3xf32>
// CHECK: linalg.fill
// CHECK: return
func.func @empty_results(%s: tensor<2x4x0xf32>, %a: tensor<0x5xf32>, %w: tensor<5x3xf32>,
                         %x: tensor<2x0xf32>, %y: tensor<0x3xf32>)
    -> (tensor<2x4x0xf32>, tensor<0x3xf32>, tensor<2x3xf32>) {
  %p = kiln.softmax %s {axis = 2 : i64, log = false, scale = 1.0 : f32} : (tensor<2x4x0xf32>) -> tensor<2x4x0xf32>
  %m = kiln.matmul %a, %w : (tensor<0x5xf32>, tensor<5x3xf32>) -> tensor<0x3xf32>
  %k = kiln.matmul %x, %y : (tensor<2x0xf32>, tensor<0x3xf32>) -> tensor<2x3xf32>
  return %p, %m, %k : tensor<2x4x0xf32>, tensor<0x3xf32>, tensor<2x3xf32>
}

// -----

// An integer convolution is a call of the int8 kernel, with the bias less
// the zero point times each output's weight sum, since the kernel's padding
// reads the zero point: 100 - 10 x (1 + 2 + 3) = 40 and -50 - 10 x (-1 + 0
// + 4) = -80. Padding: three bytes of 10. Three input channels: the flat
// form (flag 4), weights [panels][ceil(kh*kw*c/4)][32][4], o's window bytes
// at lane o.
// CHECK-LABEL: func.func @integer_conv
// CHECK-DAG: arith.constant dense<[1, 2, 2, 3, 2, 2, 2, 1, 1, 1, 1, 0, 0, 1, 1, 1, 4]> : tensor<17xi64>
// CHECK-DAG: arith.constant dense<"0x01020300FF000400{{0+}}"> : tensor<128xi8>
// CHECK-DAG: arith.constant dense<[40, -80, 0, {{.*}}]> : tensor<32xi32>
// CHECK-DAG: arith.constant dense<10> : tensor<4xi8>
// CHECK: kiln.call_kernel @kiln_qconv2d_nhwc_u8s8
// CHECK-SAME: {kiln.flops = 48 : i64, result_position = 5 : i64, row_strides = array<i64: 1, 6, -1, 7>}
func.func @integer_conv(%x: tensor<1x2x2x3xui8>) -> tensor<1x2x2x2xi32> {
  %w = kiln.constant {value = dense<[[[[1]], [[2]], [[3]]], [[[-1]], [[0]], [[4]]]]> : tensor<2x3x1x1xi8>} : () -> tensor<2x3x1x1xi8>
  %b = kiln.constant {value = dense<[100, -50]> : tensor<2xi32>} : () -> tensor<2xi32>
  %0 = kiln.conv2d_nhwc %x, %w bias %b {clamp_max = 0x7F800000 : f32, clamp_min = 0xFF800000 : f32, dilations = array<i64: 1, 1>, group = 1 : i64, input_zero_point = 10 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x2x3xui8>, tensor<2x3x1x1xi8>, tensor<2xi32>) -> tensor<1x2x2x2xi32>
  return %0 : tensor<1x2x2x2xi32>
}

// -----

// s8 activations are read as u8 (x ^ 0x80): the zero point the kernel's
// padding and bias see is 128 more: 7 - (-3 + 128) x 5 = -618.
// CHECK-LABEL: func.func @integer_conv_s8
// CHECK-DAG: arith.constant dense<[-618, 0, {{.*}}]> : tensor<32xi32>
// CHECK-DAG: arith.constant dense<-3> : tensor<4xi8>
// CHECK-DAG: %[[FLIP:.*]] = arith.constant 2155905152 : i64
// CHECK: kiln.call_kernel @kiln_qconv2d_nhwc_u8s8(%{{[^,]*}}, %arg0, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %[[FLIP]],
func.func @integer_conv_s8(%x: tensor<1x3x3x1xi8>) -> tensor<1x3x3x1xi32> {
  %w = kiln.constant {value = dense<[[[[0, 1, 0], [1, 1, 1], [0, 1, 0]]]]> : tensor<1x1x3x3xi8>} : () -> tensor<1x1x3x3xi8>
  %b = kiln.constant {value = dense<7> : tensor<1xi32>} : () -> tensor<1xi32>
  %0 = kiln.conv2d_nhwc %x, %w bias %b {clamp_max = 0x7F800000 : f32, clamp_min = 0xFF800000 : f32, dilations = array<i64: 1, 1>, group = 1 : i64, input_zero_point = -3 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<1x3x3x1xi8>, tensor<1x1x3x3xi8>, tensor<1xi32>) -> tensor<1x3x3x1xi32>
  return %0 : tensor<1x3x3x1xi32>
}

// -----

// Sixteen input channels: the direct form (flag 0), weights
// [panels][kh][kw][ceil(c/4)][32][4]: channels 4g..4g+3 of output 0 at
// byte 128 g.
// CHECK-LABEL: func.func @integer_conv_direct
// CHECK-DAG: arith.constant dense<[1, 1, 2, 16, 1, 2, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0]> : tensor<17xi64>
// CHECK-DAG: arith.constant dense<"0x01020304{{0+}}05060708{{0+}}090A0B0C{{0+}}0D0E0F10{{0+}}"> : tensor<512xi8>
// CHECK: kiln.call_kernel @kiln_qconv2d_nhwc_u8s8
func.func @integer_conv_direct(%x: tensor<1x1x2x16xui8>) -> tensor<1x1x2x1xi32> {
  %w = kiln.constant {value = dense<[[[[1]], [[2]], [[3]], [[4]], [[5]], [[6]], [[7]], [[8]], [[9]], [[10]], [[11]], [[12]], [[13]], [[14]], [[15]], [[16]]]]> : tensor<1x16x1x1xi8>} : () -> tensor<1x16x1x1xi8>
  %0 = kiln.conv2d_nhwc %x, %w {clamp_max = 0x7F800000 : f32, clamp_min = 0xFF800000 : f32, dilations = array<i64: 1, 1>, group = 1 : i64, input_zero_point = 0 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x1x2x16xui8>, tensor<1x16x1x1xi8>) -> tensor<1x1x2x1xi32>
  return %0 : tensor<1x1x2x1xi32>
}

// -----

// Requantized (requant_type): flag 8, the kernel's requant block (zero
// point, clamp, a padding float, then the scales padded to the panel) as
// its last argument, and an 8-bit result.
// CHECK-LABEL: func.func @integer_conv_requantized
// CHECK-DAG: arith.constant dense<[1, 1, 2, 16, 1, 2, 2, 1, 1, 1, 1, 0, 0, 1, 1, 1, 8]> : tensor<17xi64>
// CHECK-DAG: %[[RQ:.*]] = arith.constant dense<[3.000000e+00, 0.000000e+00, 2.550000e+02, 0.000000e+00, 5.000000e-01, 2.500000e-01, 0.000000e+00{{.*}}]> : tensor<36xf32>
// CHECK: kiln.call_kernel @kiln_qconv2d_nhwc_u8s8({{.*}}, %[[RQ]]) into %{{.*}} {{.*}} -> tensor<1x1x2x2xi8>
func.func @integer_conv_requantized(%x: tensor<1x1x2x16xui8>) -> tensor<1x1x2x2xui8> {
  %w = kiln.constant {value = dense<1> : tensor<2x16x1x1xi8>} : () -> tensor<2x16x1x1xi8>
  %0 = kiln.conv2d_nhwc %x, %w {clamp_max = 255.0 : f32, clamp_min = 0.0 : f32, dilations = array<i64: 1, 1>, group = 1 : i64, input_zero_point = 0 : i64, pads = array<i64: 0, 0, 0, 0>, requant_scale = array<f32: 0.5, 0.25>, requant_type = ui8, requant_zero_point = 3.0 : f32, strides = array<i64: 1, 1>} : (tensor<1x1x2x16xui8>, tensor<2x16x1x1xi8>) -> tensor<1x1x2x2xui8>
  return %0 : tensor<1x1x2x2xui8>
}

// -----

// Depthwise (group == channels == outputs): kiln_qdwconv2d_nhwc_u8s8 with
// the weights as floats [kh][kw][C padded to 32] and the bias less the zero
// point times each channel's weight sum: 100 - 10 x (1 + 2) = 70 and
// -50 - 10 x (-1 + 4) = -80; s8 input: flag 16; the zero point as an i64.
// CHECK-LABEL: func.func @integer_depthwise
// CHECK-DAG: arith.constant dense<[1, 3, 3, 2, 3, 2, 2, 1, 2, 1, 1, 0, 0, 1, 1, 2, 16]> : tensor<17xi64>
// CHECK-DAG: arith.constant dense<[1.000000e+00, -1.000000e+00, 0.000000e+00, {{.*}}, 0.000000e+00, 2.000000e+00, 4.000000e+00, 0.000000e+00, {{.*}}]> : tensor<64xf32>
// CHECK-DAG: arith.constant dense<[70, -80, 0, {{.*}}]> : tensor<32xi32>
// CHECK-DAG: %[[ZP:.*]] = arith.constant 10 : i64
// CHECK: kiln.call_kernel @kiln_qdwconv2d_nhwc_u8s8(%{{[^,]*}}, %arg0, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %[[ZP]],
// CHECK-SAME: {kiln.flops = 48 : i64, result_position = 5 : i64, row_strides = array<i64: 1, 6, -1, 7>}
func.func @integer_depthwise(%x: tensor<1x3x3x2xi8>) -> tensor<1x3x2x2xi32> {
  %w = kiln.constant {value = dense<[[[[1, 2]]], [[[-1, 4]]]]> : tensor<2x1x1x2xi8>} : () -> tensor<2x1x1x2xi8>
  %b = kiln.constant {value = dense<[100, -50]> : tensor<2xi32>} : () -> tensor<2xi32>
  %0 = kiln.conv2d_nhwc %x, %w bias %b {clamp_max = 0x7F800000 : f32, clamp_min = 0xFF800000 : f32, dilations = array<i64: 1, 1>, group = 2 : i64, input_zero_point = 10 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x3x3x2xi8>, tensor<2x1x1x2xi8>, tensor<2xi32>) -> tensor<1x3x2x2xi32>
  return %0 : tensor<1x3x2x2xi32>
}

// -----

// Max, min and relu whose operands can never be NaN (a range analysis from
// integer casts through arithmetic with finite constants: a quantized
// residual Add -> Relu -> QuantizeLinear) carry the nnan flag, so LLVM
// emits one max instruction, not three; those with an operand of unknown
// range (a float input) keep NaN propagation, as does a division by a
// range that holds zero.
// CHECK-LABEL: func.func @nan_free_clamps
// CHECK: arith.maximumf %{{.*}}, %{{.*}} fastmath<nnan> : f32
// CHECK: arith.divf
// CHECK: arith.maximumf %{{.*}}, %{{.*}} fastmath<nnan> : f32
// CHECK: arith.minimumf %{{.*}}, %{{.*}} fastmath<nnan> : f32
// CHECK: arith.maximumf %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} : f32
// CHECK: arith.maximumf %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} : f32
// CHECK-NOT: fastmath<nnan>
func.func @nan_free_clamps(%a: tensor<8xui8>, %b: tensor<8xi8>, %f: tensor<8xf32>) -> (tensor<8xui8>, tensor<8xf32>, tensor<8xf32>) {
  %za = kiln.constant {value = dense<3.0> : tensor<f32>} : () -> tensor<f32>
  %sa = kiln.constant {value = dense<0.02> : tensor<f32>} : () -> tensor<f32>
  %lo = kiln.constant {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %hi = kiln.constant {value = dense<255.0> : tensor<f32>} : () -> tensor<f32>
  %af = kiln.cast %a {to = f32} : (tensor<8xui8>) -> tensor<8xf32>
  %bf = kiln.cast %b {to = f32} : (tensor<8xi8>) -> tensor<8xf32>
  %as = kiln.sub %af, %za : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %am = kiln.mul %as, %sa : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %bm = kiln.mul %bf, %sa : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %s = kiln.add %am, %bm : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %r = kiln.relu %s : (tensor<8xf32>) -> tensor<8xf32>
  %q = kiln.div %r, %sa : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %n = kiln.round %q : (tensor<8xf32>) -> tensor<8xf32>
  %c1 = kiln.max %n, %lo : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %c2 = kiln.min %c1, %hi : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %y = kiln.cast %c2 {to = ui8} : (tensor<8xf32>) -> tensor<8xui8>
  %g = kiln.relu %f : (tensor<8xf32>) -> tensor<8xf32>
  %d = kiln.div %sa, %bf : (tensor<f32>, tensor<8xf32>) -> tensor<8xf32>
  %h = kiln.max %d, %lo : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  return %y, %g, %h : tensor<8xui8>, tensor<8xf32>, tensor<8xf32>
}

// -----

// Not NaN-free: a constant holding a NaN among finite values, and a divisor
// whose exact range excludes zero but whose f32 value need not ((k + 1) x
// 2^-30 + 1 - 1 rounds to 0 for every u8 k: 0 / 0 is NaN).
// CHECK-LABEL: func.func @nan_free_refusals
// CHECK-NOT: fastmath<nnan>
// CHECK: return
func.func @nan_free_refusals(%a: tensor<2xui8>) -> (tensor<2xf32>, tensor<2xf32>) {
  %nan = kiln.constant {value = dense<[1.0, 0x7FC00000]> : tensor<2xf32>} : () -> tensor<2xf32>
  %one = kiln.constant {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %tiny = kiln.constant {value = dense<0x30800000> : tensor<f32>} : () -> tensor<f32>
  %af = kiln.cast %a {to = f32} : (tensor<2xui8>) -> tensor<2xf32>
  %m = kiln.max %af, %nan : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %k1 = kiln.add %af, %one : (tensor<2xf32>, tensor<f32>) -> tensor<2xf32>
  %t = kiln.mul %k1, %tiny : (tensor<2xf32>, tensor<f32>) -> tensor<2xf32>
  %u = kiln.add %t, %one : (tensor<2xf32>, tensor<f32>) -> tensor<2xf32>
  %d = kiln.sub %u, %one : (tensor<2xf32>, tensor<f32>) -> tensor<2xf32>
  %q = kiln.div %af, %d : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %r = kiln.relu %q : (tensor<2xf32>) -> tensor<2xf32>
  return %m, %r : tensor<2xf32>, tensor<2xf32>
}
