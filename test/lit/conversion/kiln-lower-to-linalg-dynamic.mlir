// RUN: kiln-opt %s --pass-pipeline='builtin.module(func.func(kiln-symbolic-dims),kiln-lower-to-linalg,canonicalize,cse)' --split-input-file | FileCheck %s

// Dims known only at run time (compiled once for every shape): each is read
// once at the entry from the input that names it, tensors are made with
// their sizes, a reduction's kept dims and a reshape's target come from
// them, and the matrix product with constant weights calls the convolution
// kernel with the number of rows in its parameter block at run time. The
// function says where each symbol is read and how its result's dims follow
// (kiln.runtime_symbols, kiln.dim_map) for kiln-runtime-dims-arguments.
// CHECK: #[[TWICE:.*]] = affine_map<()[s0] -> (s0 * 2)>
// CHECK-LABEL: func.func @rows
// CHECK-SAME: -> (tensor<?xf32> {kiln.dim_map = #[[TWICE]], kiln.dims = ["n * 2"]})
// CHECK-SAME: kiln.runtime_symbol_names = ["n"], kiln.runtime_symbols = [array<i64: 0, 0>]
// CHECK: %[[N:.*]] = tensor.dim %arg0, %c0
// CHECK: %[[E:.*]] = tensor.empty(%[[N]]) : tensor<?x4xf32>
// CHECK: %[[SUM:.*]] = linalg.generic {{.*}} ins(%arg0, %arg1 : tensor<?x4xf32>, tensor<4xf32>) outs(%[[E]] : tensor<?x4xf32>)
// CHECK: tensor.empty(%[[N]]) : tensor<?xf32>
// CHECK: %[[N64:.*]] = arith.index_cast %[[N]] : index to i64
// CHECK: tensor.from_elements %[[N64]], %c1_i64 : tensor<2xi64>
// CHECK: %[[PARAMS:.*]] = tensor.from_elements %c1_i64, %c1_i64, %[[N64]], %c4_i64, %c1_i64, %[[N64]], %c2_i64,
// CHECK-SAME: tensor<17xi64>
// CHECK: %[[OUT:.*]] = tensor.empty(%[[N]]) : tensor<?x2xf32>
// CHECK: kiln.call_kernel @kiln_conv2d_nhwc_f32(%[[PARAMS]], {{.*}} into %[[OUT]]
// CHECK: %[[TOTAL:.*]] = affine.apply #[[TWICE]]()[%[[N]]]
// CHECK: arith.index_cast %[[TOTAL]]
// CHECK: tensor.reshape
// CHECK-SAME: -> tensor<?xf32>
func.func @rows(%x: tensor<?x4xf32> {kiln.dim_names = ["n", ""]}, %b: tensor<4xf32>) -> tensor<?xf32> {
  %0 = kiln.add %x, %b : (tensor<?x4xf32>, tensor<4xf32>) -> tensor<?x4xf32>
  %1 = kiln.reduce_sum %0 {axes = array<i64: 1>, keepdims = true} : (tensor<?x4xf32>) -> tensor<?x1xf32>
  %2 = kiln.sub %0, %1 : (tensor<?x4xf32>, tensor<?x1xf32>) -> tensor<?x4xf32>
  %w = kiln.constant {value = dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]]> : tensor<4x2xf32>} : () -> tensor<4x2xf32>
  %3 = kiln.matmul %2, %w : (tensor<?x4xf32>, tensor<4x2xf32>) -> tensor<?x2xf32>
  %s = kiln.constant {value = dense<[-1]> : tensor<1xi64>} : () -> tensor<1xi64>
  %4 = kiln.reshape %3, %s {allowzero = false} : (tensor<?x2xf32>, tensor<1xi64>) -> tensor<?xf32>
  return %4 : tensor<?xf32>
}

// -----

// Shape arithmetic on dims known only at run time (Shape, Gather, Concat
// feeding a Reshape) is replaced by the values it computes, from the
// symbols, and is then dead; two inputs that name the same dim share one
// symbol, so their elementwise product needs no broadcast. A product of
// two run-time operands calls kiln_matmul_f32 with M, N and K at run time.
// CHECK-LABEL: func.func @shapes
// CHECK-SAME: kiln.runtime_symbols = [array<i64: 0, 0>]
// CHECK-NOT: kiln.shape
// CHECK-NOT: kiln.gather
// CHECK: %[[S:.*]] = tensor.dim %arg0, %c0
// CHECK: linalg.generic {{.*}} ins(%arg0, %arg1 : tensor<?x8xf32>, tensor<?x8xf32>)
// CHECK: %[[S64:.*]] = arith.index_cast %[[S]] : index to i64
// CHECK: tensor.from_elements %[[S64]], %c2_i64, %c4_i64 : tensor<3xi64>
// CHECK: tensor.reshape {{.*}} -> tensor<?x2x4xf32>
// CHECK: kiln.call_kernel @kiln_matmul_f32
// CHECK-SAME: -> tensor<?x2x2xf32>
func.func @shapes(%x: tensor<?x8xf32> {kiln.dim_names = ["seq", ""]}, %y: tensor<?x8xf32> {kiln.dim_names = ["seq", ""]}) -> tensor<?x2x2xf32> {
  %0 = kiln.mul %x, %y : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
  %1 = kiln.shape %0 {end = 9223372036854775807 : i64, start = 0 : i64} : (tensor<?x8xf32>) -> tensor<2xi64>
  %i = kiln.constant {value = dense<[0]> : tensor<1xi64>} : () -> tensor<1xi64>
  %2 = kiln.gather %1, %i {axis = 0 : i64} : (tensor<2xi64>, tensor<1xi64>) -> tensor<1xi64>
  %c = kiln.constant {value = dense<[2, 4]> : tensor<2xi64>} : () -> tensor<2xi64>
  %3 = kiln.concat %2, %c {axis = 0 : i64} : (tensor<1xi64>, tensor<2xi64>) -> tensor<3xi64>
  %4 = kiln.reshape %0, %3 {allowzero = false} : (tensor<?x8xf32>, tensor<3xi64>) -> tensor<?x2x4xf32>
  %5 = kiln.transpose %4 {perm = array<i64: 0, 2, 1>} : (tensor<?x2x4xf32>) -> tensor<?x4x2xf32>
  %6 = kiln.matmul %4, %5 : (tensor<?x2x4xf32>, tensor<?x4x2xf32>) -> tensor<?x2x2xf32>
  return %6 : tensor<?x2x2xf32>
}

// -----

// A CNN compiled once for every batch: a convolution and a channels_last
// pooling whose batch is the only run-time dim call the same kernels with
// the batch in their parameter blocks (field 0) at run time.
// CHECK-LABEL: func.func @batch
// CHECK: %[[B:.*]] = tensor.dim %arg0, %c0
// CHECK: %[[B64:.*]] = arith.index_cast %[[B]] : index to i64
// CHECK: %[[CONV:.*]] = tensor.from_elements %[[B64]], %c8_i64,
// CHECK: kiln.call_kernel @kiln_conv2d_nhwc_f32(%[[CONV]],
// CHECK-SAME: -> tensor<?x8x8x4xf32>
// CHECK: %[[POOL:.*]] = tensor.from_elements %{{.*}}, %c8_i64, %c8_i64, %c4_i64,
// CHECK: kiln.call_kernel @kiln_pool2d_nhwc_f32(%[[POOL]],
// CHECK-SAME: -> tensor<?x4x4x4xf32>
func.func @batch(%x: tensor<?x8x8x3xf32> {kiln.dim_names = ["batch", "", "", ""]}) -> tensor<?x4x4x4xf32> {
  %w = kiln.constant {value = dense<0.5> : tensor<4x3x1x1xf32>} : () -> tensor<4x3x1x1xf32>
  %c = kiln.conv2d_nhwc %x, %w {clamp_max = 0x7F800000 : f32, clamp_min = 0.0 : f32, dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<?x8x8x3xf32>, tensor<4x3x1x1xf32>) -> tensor<?x8x8x4xf32>
  %p = kiln.max_pool %c {channels_last, dilations = array<i64: 1, 1>, kernel_shape = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<?x8x8x4xf32>) -> tensor<?x4x4x4xf32>
  return %p : tensor<?x4x4x4xf32>
}

// -----

// The same over images whose size is known only at run time: the kernels
// read the batch, the input's height and width (fields 1, 2) and the
// output's (fields 4, 5, from the window: (h + 2 - 3) floordiv 2 + 1 for
// the stride-2 convolution) from their parameter blocks; the packed
// weights fix only the channels and the window.
// The output sizes of the convolution and the pool must be at least 1
// (kiln.dim_checks, which MODEL_dims checks before the run: an image
// smaller than a window is an error there, not a negative size here).
// CHECK-LABEL: func.func @image_size
// CHECK-SAME: kiln.dim_checks = [#[[C1:.*]], #[[C2:.*]], #[[C3:.*]], #[[C4:.*]]]
// CHECK-DAG: %[[B:.*]] = tensor.dim %arg0, %c0
// CHECK-DAG: %[[H:.*]] = tensor.dim %arg0, %c1
// CHECK-DAG: %[[W:.*]] = tensor.dim %arg0, %c2
// CHECK-DAG: %[[OH:.*]] = affine.apply #{{.*}}()[%[[H]]]
// CHECK-DAG: %[[OW:.*]] = affine.apply #{{.*}}()[%[[W]]]
// CHECK-DAG: %[[B64:.*]] = arith.index_cast %[[B]] : index to i64
// CHECK-DAG: %[[H64:.*]] = arith.index_cast %[[H]] : index to i64
// CHECK-DAG: %[[W64:.*]] = arith.index_cast %[[W]] : index to i64
// CHECK-DAG: %[[OH64:.*]] = arith.index_cast %[[OH]] : index to i64
// CHECK-DAG: %[[OW64:.*]] = arith.index_cast %[[OW]] : index to i64
// CHECK: %[[CONV:.*]] = tensor.from_elements %[[B64]], %[[H64]], %[[W64]], %c3_i64, %[[OH64]], %[[OW64]], %c4_i64, %c3_i64, %c3_i64, %c2_i64, %c2_i64,
// CHECK: kiln.call_kernel @kiln_conv2d_nhwc_f32(%[[CONV]],
// CHECK-SAME: -> tensor<?x?x?x4xf32>
// CHECK: %[[POOL:.*]] = tensor.from_elements %[[B64]], %[[OH64]], %[[OW64]], %c4_i64,
// CHECK: kiln.call_kernel @kiln_pool2d_nhwc_f32(%[[POOL]],
// CHECK-SAME: -> tensor<?x?x?x4xf32>
func.func @image_size(%x: tensor<?x?x?x3xf32> {kiln.dim_names = ["batch", "h", "w", ""]}) -> tensor<?x?x?x4xf32> {
  %w = kiln.constant {value = dense<0.5> : tensor<4x3x3x3xf32>} : () -> tensor<4x3x3x3xf32>
  %c = kiln.conv2d_nhwc %x, %w {clamp_max = 0x7F800000 : f32, clamp_min = 0.0 : f32, dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<?x?x?x3xf32>, tensor<4x3x3x3xf32>) -> tensor<?x?x?x4xf32>
  %p = kiln.max_pool %c {channels_last, dilations = array<i64: 1, 1>, kernel_shape = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<?x?x?x4xf32>) -> tensor<?x?x?x4xf32>
  return %p : tensor<?x?x?x4xf32>
}

// -----

// Expand to a target built from a run-time dim (ViT's class token, [1, 1,
// 8] expanded to [batch, 1, 8], then joined to the patches): the target's
// shape arithmetic is dead, and the expansion is a broadcast into a tensor
// of the batch's size.
// CHECK-LABEL: func.func @class_token
// CHECK-NOT: kiln.expand
// CHECK: %[[B:.*]] = tensor.dim %arg0, %c0
// CHECK: %[[E:.*]] = tensor.empty(%[[B]]) : tensor<?x1x8xf32>
// CHECK: linalg.generic {{.*}} ins(%{{.*}} : tensor<1x1x8xf32>) outs(%[[E]] : tensor<?x1x8xf32>)
func.func @class_token(%x: tensor<?x4x8xf32> {kiln.dim_names = ["batch", "", ""]}) -> tensor<?x5x8xf32> {
  %t = kiln.constant {value = dense<1.0> : tensor<1x1x8xf32>} : () -> tensor<1x1x8xf32>
  %s = kiln.shape %x {end = 1 : i64, start = 0 : i64} : (tensor<?x4x8xf32>) -> tensor<1xi64>
  %c = kiln.constant {value = dense<[1, 8]> : tensor<2xi64>} : () -> tensor<2xi64>
  %target = kiln.concat %s, %c {axis = 0 : i64} : (tensor<1xi64>, tensor<2xi64>) -> tensor<3xi64>
  %e = kiln.expand %t, %target : (tensor<1x1x8xf32>, tensor<3xi64>) -> tensor<?x1x8xf32>
  %y = kiln.concat %e, %x {axis = 1 : i64} : (tensor<?x1x8xf32>, tensor<?x4x8xf32>) -> tensor<?x5x8xf32>
  return %y : tensor<?x5x8xf32>
}

// -----

// ConstantOfShape of a shape read from an input (a mask's zeros): a fill
// of a tensor of the input's run-time dims; the shape arithmetic is dead.
// CHECK-LABEL: func.func @constant_of_shape
// CHECK-DAG: %[[B:.*]] = tensor.dim %arg0, %c0
// CHECK-DAG: %[[S:.*]] = tensor.dim %arg0, %c1
// CHECK: %[[E:.*]] = tensor.empty(%[[B]], %[[S]]) : tensor<?x1x?xf32>
// CHECK: linalg.fill ins(%cst{{.*}} : f32) outs(%[[E]] : tensor<?x1x?xf32>)
// CHECK-NOT: kiln.
func.func @constant_of_shape(%m: tensor<?x?xi1> {kiln.dim_names = ["b", "s"]}) -> tensor<?x1x?xf32> {
  %s = kiln.shape %m {start = 0 : i64, end = 2 : i64} : (tensor<?x?xi1>) -> tensor<2xi64>
  %i0 = kiln.constant {value = dense<[0]> : tensor<1xi64>} : () -> tensor<1xi64>
  %i1 = kiln.constant {value = dense<[1]> : tensor<1xi64>} : () -> tensor<1xi64>
  %b = kiln.gather %s, %i0 {axis = 0 : i64} : (tensor<2xi64>, tensor<1xi64>) -> tensor<1xi64>
  %l = kiln.gather %s, %i1 {axis = 0 : i64} : (tensor<2xi64>, tensor<1xi64>) -> tensor<1xi64>
  %t = kiln.concat %b, %i1, %l {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<3xi64>
  %z = kiln.constant_of_shape %t {value = dense<-2.5> : tensor<1xf32>} : (tensor<3xi64>) -> tensor<?x1x?xf32>
  return %z : tensor<?x1x?xf32>
}

// -----

// Attention's scores with the keys transposed, [bh, 16, s] from [s, bh, 16],
// batch and length known only at run time: kiln_matmul_f32 reads the keys
// in place (trans_b, the batch stride 16 and the column stride bh * 16 at
// run time) instead of a copy of the transpose.
// CHECK-LABEL: func.func @scores_of_transposed_keys
// CHECK-NOT: linalg.transpose
// CHECK: %[[BH:.*]] = tensor.dim %arg1, %c1
// CHECK: %[[LD:.*]] = arith.muli %[[BH]], %c16
// CHECK: %[[LD64:.*]] = arith.index_cast %[[LD]] : index to i64
// CHECK: %[[P:.*]] = tensor.from_elements {{.*}}, %c16_i64, %[[LD64]], %{{.*}}, %c1_i64, %c0_i64, %c0_i64 : tensor<13xi64>
// CHECK: kiln.call_kernel @kiln_matmul_f32(%[[P]], %arg0, %arg1)
// CHECK-NOT: linalg.transpose
func.func @scores_of_transposed_keys(%q: tensor<?x?x16xf32> {kiln.dim_names = ["bh", "s", ""]},
                                     %k: tensor<?x?x16xf32> {kiln.dim_names = ["s", "bh", ""]})
    -> tensor<?x?x?xf32> {
  %kt = kiln.transpose %k {perm = array<i64: 1, 2, 0>} : (tensor<?x?x16xf32>) -> tensor<?x16x?xf32>
  %s = kiln.matmul %q, %kt : (tensor<?x?x16xf32>, tensor<?x16x?xf32>) -> tensor<?x?x?xf32>
  return %s : tensor<?x?x?xf32>
}

// -----

// Attention over a run-time batch of heads and run-time lengths, with a
// padding mask [batch * heads, 1, keys] added before the softmax: one call
// of kiln_attention_mask_f32 (the kernel takes any number of keys, so there
// is no run-time choice of path). Its block holds the batch bh, the
// lengths, strides computed from them (Q's and the output's batch stride
// m * 4, K^T's and V's n * 4, K^T's row stride n) and the mask's fields
// (offset 0, div 1, mod bh, batch stride n, row stride 0).
// CHECK-LABEL: func.func @masked_attention
// CHECK-NOT: scf.if
// CHECK-NOT: kiln_softmax_f32
// CHECK: %[[BH:.*]] = tensor.dim %arg0, %c0
// CHECK: %[[M:.*]] = tensor.dim %arg0, %c1
// CHECK: %[[N:.*]] = tensor.dim %arg1, %c2
// CHECK: %[[M4:.*]] = arith.muli %[[M]], %c4
// CHECK: %[[N4:.*]] = arith.muli %[[N]], %c4
// CHECK: %[[BH64:.*]] = arith.index_cast %[[BH]]
// CHECK: %[[M64:.*]] = arith.index_cast %[[M]]
// CHECK: %[[N64:.*]] = arith.index_cast %[[N]]
// CHECK: %[[M4_64:.*]] = arith.index_cast %[[M4]]
// CHECK: %[[N4_64:.*]] = arith.index_cast %[[N4]]
// CHECK: %[[P:.*]] = tensor.from_elements %[[BH64]], %[[M64]], %[[N64]], %c4_i64, %c4_i64, %c0_i64, %[[M4_64]], %c4_i64, %c0_i64, %[[N4_64]], %[[N64]], %c0_i64, %c0_i64, %[[N4_64]], %c4_i64, %[[M4_64]], %c4_i64, %c0_i64, %c1_i64, %[[BH64]], %[[N64]], %c0_i64 : tensor<22xi64>
// CHECK: kiln.call_kernel @kiln_attention_mask_f32(%[[P]], %arg0, %arg1, %arg2, %arg3, %{{.*}}, %{{.*}}) into
func.func @masked_attention(%q: tensor<?x?x4xf32> {kiln.dim_names = ["bh", "m", ""]}, %kt: tensor<?x4x?xf32> {kiln.dim_names = ["bh", "", "n"]}, %v: tensor<?x?x4xf32> {kiln.dim_names = ["bh", "n", ""]}, %mask: tensor<?x1x?xf32> {kiln.dim_names = ["bh", "", "n"]}) -> tensor<?x?x4xf32> {
  %s = kiln.matmul %q, %kt : (tensor<?x?x4xf32>, tensor<?x4x?xf32>) -> tensor<?x?x?xf32>
  %m = kiln.add %s, %mask : (tensor<?x?x?xf32>, tensor<?x1x?xf32>) -> tensor<?x?x?xf32>
  %p = kiln.softmax %m {axis = 2 : i64, log = false} : (tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
  %o = kiln.matmul %p, %v : (tensor<?x?x?xf32>, tensor<?x?x4xf32>) -> tensor<?x?x4xf32>
  return %o : tensor<?x?x4xf32>
}

// -----

// A decoder's keys [batch, heads, past, d] read as K^T [batch, heads, d,
// past]: the two batch dims fold into one stride of the cache (past * 8),
// so the kernel reads the keys in place (k_transposed 1, row stride 8) for
// batch x heads = b * 4 matrices, with no copy of the transpose.
// CHECK-LABEL: func.func @decoder_keys
// CHECK-NOT: linalg.transpose
// CHECK: %[[B:.*]] = tensor.dim %arg0, %c0
// CHECK: %[[N:.*]] = tensor.dim %arg1, %c2
// CHECK: %[[N8:.*]] = arith.muli %[[N]], %c8
// CHECK: %[[B4:.*]] = arith.muli %[[B]], %c4
// CHECK: %[[B4_64:.*]] = arith.index_cast %[[B4]]
// CHECK: %[[N8_64:.*]] = arith.index_cast %[[N8]]
// CHECK: %[[P:.*]] = tensor.from_elements %[[B4_64]], %{{.*}}, %{{.*}}, %c8_i64, %c8_i64, %c0_i64, %{{.*}}, %c8_i64, %c0_i64, %[[N8_64]], %c8_i64, %c1_i64,
// CHECK: kiln.call_kernel @kiln_attention_f32(%[[P]], %arg0, %arg1, %arg2
// CHECK-NOT: linalg.transpose
func.func @decoder_keys(%q: tensor<?x4x?x8xf32> {kiln.dim_names = ["b", "", "m", ""]},
                        %k: tensor<?x4x?x8xf32> {kiln.dim_names = ["b", "", "n", ""]},
                        %v: tensor<?x4x?x8xf32> {kiln.dim_names = ["b", "", "n", ""]})
    -> tensor<?x4x?x8xf32> {
  %kt = kiln.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<?x4x?x8xf32>) -> tensor<?x4x8x?xf32>
  %s = kiln.matmul %q, %kt : (tensor<?x4x?x8xf32>, tensor<?x4x8x?xf32>) -> tensor<?x4x?x?xf32>
  %p = kiln.softmax %s {axis = 3 : i64, log = false} : (tensor<?x4x?x?xf32>) -> tensor<?x4x?x?xf32>
  %o = kiln.matmul %p, %v : (tensor<?x4x?x?xf32>, tensor<?x4x?x8xf32>) -> tensor<?x4x?x8xf32>
  return %o : tensor<?x4x?x8xf32>
}

// -----

// Batch dims in the other order than in the keys' buffer ([heads, batch]
// from [batch, past, heads, d]) fold into no one stride: the transpose is
// copied, and the kernel reads the copy.
// CHECK-LABEL: func.func @keys_batch_dims_reordered
// CHECK: linalg.transpose
// CHECK: kiln.call_kernel @kiln_attention_f32
func.func @keys_batch_dims_reordered(%q: tensor<4x?x?x8xf32> {kiln.dim_names = ["", "b", "m", ""]},
                                     %k: tensor<?x?x4x8xf32> {kiln.dim_names = ["b", "n", "", ""]},
                                     %v: tensor<4x?x?x8xf32> {kiln.dim_names = ["", "b", "n", ""]})
    -> tensor<4x?x?x8xf32> {
  %kt = kiln.transpose %k {perm = array<i64: 2, 0, 3, 1>} : (tensor<?x?x4x8xf32>) -> tensor<4x?x8x?xf32>
  %s = kiln.matmul %q, %kt : (tensor<4x?x?x8xf32>, tensor<4x?x8x?xf32>) -> tensor<4x?x?x?xf32>
  %p = kiln.softmax %s {axis = 3 : i64, log = false} : (tensor<4x?x?x?xf32>) -> tensor<4x?x?x?xf32>
  %o = kiln.matmul %p, %v : (tensor<4x?x?x?xf32>, tensor<4x?x?x8xf32>) -> tensor<4x?x?x8xf32>
  return %o : tensor<4x?x?x8xf32>
}

// -----

// Batch dims with a dim of the matrix between them in the keys' buffer
// ([batch, past, heads, d] read as [batch, heads, d, past]) fold into no one
// stride either: copied.
// CHECK-LABEL: func.func @keys_batch_dims_apart
// CHECK: linalg.transpose
// CHECK: kiln.call_kernel @kiln_attention_f32
func.func @keys_batch_dims_apart(%q: tensor<?x4x?x8xf32> {kiln.dim_names = ["b", "", "m", ""]},
                                 %k: tensor<?x?x4x8xf32> {kiln.dim_names = ["b", "n", "", ""]},
                                 %v: tensor<?x4x?x8xf32> {kiln.dim_names = ["b", "", "n", ""]})
    -> tensor<?x4x?x8xf32> {
  %kt = kiln.transpose %k {perm = array<i64: 0, 2, 3, 1>} : (tensor<?x?x4x8xf32>) -> tensor<?x4x8x?xf32>
  %s = kiln.matmul %q, %kt : (tensor<?x4x?x8xf32>, tensor<?x4x8x?xf32>) -> tensor<?x4x?x?xf32>
  %p = kiln.softmax %s {axis = 3 : i64, log = false} : (tensor<?x4x?x?xf32>) -> tensor<?x4x?x?xf32>
  %o = kiln.matmul %p, %v : (tensor<?x4x?x?xf32>, tensor<?x4x?x8xf32>) -> tensor<?x4x?x8xf32>
  return %o : tensor<?x4x?x8xf32>
}

// -----

// A dim of a static 1 between the batch dims ([batch, 1, heads, past, d])
// does not keep them from folding: the keys are read in place, the batch
// stride past * 8.
// CHECK-LABEL: func.func @keys_batch_dims_around_a_unit_dim
// CHECK-NOT: linalg.transpose
// CHECK: %[[N:.*]] = tensor.dim %arg1, %c3
// CHECK: %[[N8:.*]] = arith.muli %[[N]], %c8
// CHECK: %[[N8_64:.*]] = arith.index_cast %[[N8]]
// CHECK: tensor.from_elements {{.*}}, %[[N8_64]], %c8_i64, %c1_i64,
// CHECK: kiln.call_kernel @kiln_attention_f32
// CHECK-NOT: linalg.transpose
func.func @keys_batch_dims_around_a_unit_dim(
    %q: tensor<?x1x4x?x8xf32> {kiln.dim_names = ["b", "", "", "m", ""]},
    %k: tensor<?x1x4x?x8xf32> {kiln.dim_names = ["b", "", "", "n", ""]},
    %v: tensor<?x1x4x?x8xf32> {kiln.dim_names = ["b", "", "", "n", ""]})
    -> tensor<?x1x4x?x8xf32> {
  %kt = kiln.transpose %k {perm = array<i64: 0, 1, 2, 4, 3>} : (tensor<?x1x4x?x8xf32>) -> tensor<?x1x4x8x?xf32>
  %s = kiln.matmul %q, %kt : (tensor<?x1x4x?x8xf32>, tensor<?x1x4x8x?xf32>) -> tensor<?x1x4x?x?xf32>
  %p = kiln.softmax %s {axis = 4 : i64, log = false} : (tensor<?x1x4x?x?xf32>) -> tensor<?x1x4x?x?xf32>
  %o = kiln.matmul %p, %v : (tensor<?x1x4x?x?xf32>, tensor<?x1x4x?x8xf32>) -> tensor<?x1x4x?x8xf32>
  return %o : tensor<?x1x4x?x8xf32>
}

// -----

// Slices whose bounds follow from the input dims, over dims of fixed size:
// a table of 128 positions sliced to t (pos[:t]), a window of t rows after
// p (pos[p : p + t]), the rows from t on (pos[t:]) and a window of 4 rows
// at p of a tensor whose batch is dynamic (its type already says 4). Each
// size assumes the bounds fit (the slice_checks, at least 0 at entry:
// 128 - t for the first and third, 128 - p - t, 124 - p); each start is read
// at run time as ONNX takes it (clamped to [0, 128]), so the window of
// static size still gets its check and its start.
// RUN: kiln-opt %s --pass-pipeline='builtin.module(func.func(kiln-symbolic-dims),kiln-lower-to-linalg,canonicalize,cse)' --split-input-file | FileCheck %s --check-prefix=SLICES
// SLICES-DAG: #[[T:map[0-9]*]] = affine_map<()[s0, s1, s2] -> (-s1 + 128)>
// SLICES-DAG: #[[PT:map[0-9]*]] = affine_map<()[s0, s1, s2] -> (-s0 - s1 + 128)>
// SLICES-DAG: #[[P4:map[0-9]*]] = affine_map<()[s0, s1, s2] -> (-s0 + 124)>
// SLICES: func.func @runtime_slices{{.*}}kiln.slice_checks = [#[[T]], #[[PT]], #[[P4]]]
// CHECK-LABEL: func.func @runtime_slices
// CHECK-SAME: kiln.dims = ["t", "64"]
// CHECK-SAME: kiln.dims = ["t", "64"]
// CHECK-SAME: kiln.dims = ["t * -1 + 128", "64"]
// CHECK-SAME: kiln.dims = ["b", "4", "64"]
// CHECK-SAME: kiln.slice_checks = [#[[T:map[0-9]*]], #[[PT:map[0-9]*]], #[[P4:map[0-9]*]]]
// CHECK: tensor.extract_slice %arg2[0, 0] [%[[N:.*]], 64] [1, 1] : tensor<128x64xf32> to tensor<?x64xf32>
// CHECK: %[[LO:.*]] = arith.maxsi %{{.*}}, %c0 : index
// CHECK: %[[P:.*]] = arith.minsi %[[LO]], %c128 : index
// CHECK: tensor.extract_slice %arg2[%[[P]], 0] [%[[N]], 64] [1, 1] : tensor<128x64xf32> to tensor<?x64xf32>
// CHECK: tensor.extract_slice %arg2[%{{.*}}, 0] [%{{.*}}, 64] [1, 1] : tensor<128x64xf32> to tensor<?x64xf32>
// CHECK: tensor.extract_slice %arg1[0, %[[P]], 0] [%{{.*}}, 4, 64] [1, 1, 1] : tensor<?x128x64xf32> to tensor<?x4x64xf32>
func.func @runtime_slices(%x: tensor<?x?xi64> {kiln.dim_names = ["p", "t"]},
                          %w: tensor<?x128x64xf32> {kiln.dim_names = ["b", "", ""]},
                          %pos: tensor<128x64xf32>)
    -> (tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x4x64xf32>) {
  %sh = kiln.shape %x {end = 9223372036854775807 : i64, start = 0 : i64} : (tensor<?x?xi64>) -> tensor<2xi64>
  %i0 = kiln.constant {value = dense<0> : tensor<i64>} : () -> tensor<i64>
  %i1 = kiln.constant {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %c4 = kiln.constant {value = dense<4> : tensor<i64>} : () -> tensor<i64>
  %p = kiln.gather %sh, %i0 {axis = 0 : i64} : (tensor<2xi64>, tensor<i64>) -> tensor<i64>
  %t = kiln.gather %sh, %i1 {axis = 0 : i64} : (tensor<2xi64>, tensor<i64>) -> tensor<i64>
  %pt = kiln.add %p, %t : (tensor<i64>, tensor<i64>) -> tensor<i64>
  %p4 = kiln.add %p, %c4 : (tensor<i64>, tensor<i64>) -> tensor<i64>
  %e = kiln.unsqueeze %t {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %ps = kiln.unsqueeze %p {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %pe = kiln.unsqueeze %pt {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %p4e = kiln.unsqueeze %p4 {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %z = kiln.constant {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %one = kiln.constant {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %big = kiln.constant {value = dense<9223372036854775807> : tensor<1xi64>} : () -> tensor<1xi64>
  %a = kiln.slice %pos, %z, %e, %z, %one : (tensor<128x64xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x64xf32>
  %b = kiln.slice %pos, %ps, %pe, %z, %one : (tensor<128x64xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x64xf32>
  %c = kiln.slice %pos, %e, %big, %z, %one : (tensor<128x64xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x64xf32>
  %d = kiln.slice %w, %ps, %p4e, %one, %one : (tensor<?x128x64xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x4x64xf32>
  return %a, %b, %c, %d : tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x4x64xf32>
}

// -----

// Constant bounds along a dim known only at run time (x[:, 1:], x[:, :-1],
// x[:, -1:] of a sequence of n tokens): sizes n - 1, n - 1 and 1, assuming
// n >= 1 (ONNX would give 0, 0 and n below: the JIT then compiles for those
// shapes, a bundle refuses them); the offsets read n where they count from
// the end (n - 1 for x[:, -1:], clamped to [0, n] as ONNX does).
// RUN: kiln-opt %s --pass-pipeline='builtin.module(func.func(kiln-symbolic-dims),kiln-lower-to-linalg,canonicalize,cse)' --split-input-file | FileCheck %s --check-prefix=DYNSLICE
// DYNSLICE-DAG: #[[N1:map[0-9]*]] = affine_map<()[s0] -> (s0 - 1)>
// DYNSLICE: func.func @slices_of_a_runtime_dim{{.*}}kiln.dims = ["1", "n - 1", "8"]{{.*}}kiln.dims = ["1", "n - 1", "8"]{{.*}}kiln.dims = ["1", "1", "8"]{{.*}}kiln.slice_checks = [#[[N1]]]
// DYNSLICE: %[[N:.*]] = tensor.dim %arg0, %c1 : tensor<1x?x8xf32>
// DYNSLICE: %[[S1:.*]] = arith.minsi %[[N]], %c1 : index
// DYNSLICE: %[[M:.*]] = affine.apply #[[N1]]()[%[[N]]]
// DYNSLICE: tensor.extract_slice %arg0[0, %[[S1]], 0] [1, %[[M]], 8] [1, 1, 1] : tensor<1x?x8xf32> to tensor<1x?x8xf32>
// DYNSLICE: tensor.extract_slice %arg0[0, %{{.*}}, 0] [1, %[[M]], 8] [1, 1, 1] : tensor<1x?x8xf32> to tensor<1x?x8xf32>
// DYNSLICE: %[[FROMEND:.*]] = arith.addi %[[N]], %c-1 : index
// DYNSLICE: %[[LO:.*]] = arith.maxsi %[[FROMEND]], %c0 : index
// DYNSLICE: %[[S3:.*]] = arith.minsi %[[LO]], %[[N]] : index
// DYNSLICE: tensor.extract_slice %arg0[0, %[[S3]], 0] [1, 1, 8] [1, 1, 1] : tensor<1x?x8xf32> to tensor<1x1x8xf32>
func.func @slices_of_a_runtime_dim(%x: tensor<1x?x8xf32> {kiln.dim_names = ["", "n", ""]})
    -> (tensor<1x?x8xf32>, tensor<1x?x8xf32>, tensor<1x?x8xf32>) {
  %zero = kiln.constant {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %one = kiln.constant {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %last = kiln.constant {value = dense<-1> : tensor<1xi64>} : () -> tensor<1xi64>
  %big = kiln.constant {value = dense<9223372036854775807> : tensor<1xi64>} : () -> tensor<1xi64>
  %a = kiln.slice %x, %one, %big, %one, %one : (tensor<1x?x8xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x?x8xf32>
  %b = kiln.slice %x, %zero, %last, %one, %one : (tensor<1x?x8xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x?x8xf32>
  %c = kiln.slice %x, %last, %big, %one, %one : (tensor<1x?x8xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x?x8xf32>
  return %a, %b, %c : tensor<1x?x8xf32>, tensor<1x?x8xf32>, tensor<1x?x8xf32>
}
