// RUN: kiln-opt %s --kiln-symbolic-dims --split-input-file | FileCheck %s

// A KV cache: present = concat(past, new) along the sequence axis; its
// length is past + new whatever the two are.
// CHECK-LABEL: func.func @kv_cache
// CHECK-SAME: kiln.dims = ["batch", "4", "past + new", "16"]
func.func @kv_cache(%past: tensor<?x4x?x16xf32> {kiln.dim_names = ["batch", "", "past", ""]},
                    %new: tensor<?x4x?x16xf32> {kiln.dim_names = ["batch", "", "new", ""]})
    -> tensor<?x4x?x16xf32> {
  %c = kiln.concat %past, %new {axis = 2 : i64} : (tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  return %c : tensor<?x4x?x16xf32>
}

// -----

// Positions of the new tokens: Range(past, past + new) has new elements;
// an embedding gather of them, added to the tokens' embedding, has
// [batch, new, 8] (Shape -> Gather -> Add -> Range -> Unsqueeze).
// CHECK-LABEL: func.func @positions
// CHECK-SAME: kiln.dims = ["batch", "new", "8"]
func.func @positions(%ids: tensor<?x?xi64> {kiln.dim_names = ["batch", "new"]},
                     %past: tensor<?x4x?x16xf32> {kiln.dim_names = ["batch", "", "past", ""]},
                     %table: tensor<32x8xf32>) -> tensor<?x?x8xf32> {
  %sp = kiln.shape %past {start = 0 : i64, end = 4 : i64} : (tensor<?x4x?x16xf32>) -> tensor<4xi64>
  %si = kiln.shape %ids {start = 0 : i64, end = 2 : i64} : (tensor<?x?xi64>) -> tensor<2xi64>
  %two = kiln.constant {value = dense<2> : tensor<i64>} : () -> tensor<i64>
  %one = kiln.constant {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %p = kiln.gather %sp, %two {axis = 0 : i64} : (tensor<4xi64>, tensor<i64>) -> tensor<i64>
  %t = kiln.gather %si, %one {axis = 0 : i64} : (tensor<2xi64>, tensor<i64>) -> tensor<i64>
  %end = kiln.add %p, %t : (tensor<i64>, tensor<i64>) -> tensor<i64>
  %r = kiln.range %p, %end, %one : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %pos = kiln.unsqueeze %r {axes = array<i64: 0>} : (tensor<?xi64>) -> tensor<1x?xi64>
  %pe = kiln.gather %table, %pos {axis = 0 : i64} : (tensor<32x8xf32>, tensor<1x?xi64>) -> tensor<1x?x8xf32>
  %te = kiln.gather %table, %ids {axis = 0 : i64} : (tensor<32x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  %x = kiln.add %te, %pe : (tensor<?x?x8xf32>, tensor<1x?x8xf32>) -> tensor<?x?x8xf32>
  return %x : tensor<?x?x8xf32>
}

// -----

// PyTorch's `cls.expand(n, -1, -1)`: Expand to Where(Equal(s, -1), 1, s)
// with s = [batch, -1, -1]; the type inference sees a shape it cannot read
// (all dims unknown), the symbolic one a [batch, 1, 768] broadcast.
// CHECK-LABEL: func.func @expand_class_token
// CHECK-SAME: -> (tensor<?x1x768xf32> {kiln.dims = ["n", "1", "768"]})
// CHECK: kiln.expand {{.*}} -> tensor<?x1x768xf32>
func.func @expand_class_token(%x: tensor<?x196x768xf32> {kiln.dim_names = ["n", "", ""]},
                              %cls: tensor<1x1x768xf32>) -> tensor<*xf32> {
  %s = kiln.shape %x {start = 0 : i64, end = 1 : i64} : (tensor<?x196x768xf32>) -> tensor<1xi64>
  %rest = kiln.constant {value = dense<[-1, -1]> : tensor<2xi64>} : () -> tensor<2xi64>
  %target = kiln.concat %s, %rest {axis = 0 : i64} : (tensor<1xi64>, tensor<2xi64>) -> tensor<3xi64>
  %m = kiln.constant {value = dense<-1> : tensor<i64>} : () -> tensor<i64>
  %eq = kiln.equal %target, %m : (tensor<3xi64>, tensor<i64>) -> tensor<3xi1>
  %ones = kiln.constant {value = dense<1> : tensor<3xi64>} : () -> tensor<3xi64>
  %w = kiln.select %eq, %ones, %target : (tensor<3xi1>, tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
  %e = kiln.expand %cls, %w : (tensor<1x1x768xf32>, tensor<3xi64>) -> tensor<*xf32>
  return %e : tensor<*xf32>
}

// -----

// Reshape to [b, t, 4, 16] of x[b, t, 64], the target built from x's own
// shape; then merging heads with [b, t * 4, 16] computed as a product.
// CHECK-LABEL: func.func @heads
// CHECK-SAME: kiln.dims = ["b", "t * 4", "16"]
func.func @heads(%x: tensor<?x?x64xf32> {kiln.dim_names = ["b", "t", ""]}) -> tensor<?x?x16xf32> {
  %s = kiln.shape %x {start = 0 : i64, end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %i1 = kiln.constant {value = dense<[1]> : tensor<1xi64>} : () -> tensor<1xi64>
  %i0 = kiln.constant {value = dense<[0]> : tensor<1xi64>} : () -> tensor<1xi64>
  %b = kiln.gather %s, %i0 {axis = 0 : i64} : (tensor<2xi64>, tensor<1xi64>) -> tensor<1xi64>
  %t = kiln.gather %s, %i1 {axis = 0 : i64} : (tensor<2xi64>, tensor<1xi64>) -> tensor<1xi64>
  %four = kiln.constant {value = dense<[4]> : tensor<1xi64>} : () -> tensor<1xi64>
  %t4 = kiln.mul %t, %four : (tensor<1xi64>, tensor<1xi64>) -> tensor<1xi64>
  %sixteen = kiln.constant {value = dense<[16]> : tensor<1xi64>} : () -> tensor<1xi64>
  %target = kiln.concat %b, %t4, %sixteen {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<3xi64>
  %r = kiln.reshape %x, %target {allowzero = false} : (tensor<?x?x64xf32>, tensor<3xi64>) -> tensor<?x?x16xf32>
  return %r : tensor<?x?x16xf32>
}

// -----

// An unnamed unknown dim is its own symbol, named after the input; a
// matmul keeps the rows of its left operand; dims nothing is known of stay
// "?" (a NonZero's count).
// CHECK-LABEL: func.func @unnamed
// CHECK-SAME: kiln.dims = ["x.0", "5"]
func.func @unnamed(%x: tensor<?x3xf32> {kiln.name = "x"}, %w: tensor<3x5xf32>) -> tensor<?x5xf32> {
  %y = kiln.matmul %x, %w : (tensor<?x3xf32>, tensor<3x5xf32>) -> tensor<?x5xf32>
  %z = kiln.relu %y : (tensor<?x5xf32>) -> tensor<?x5xf32>
  return %z : tensor<?x5xf32>
}

// -----

// With static shapes the pass changes nothing.
// CHECK-LABEL: func.func @static
// CHECK-NOT: kiln.dims
func.func @static(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %y = kiln.relu %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

// -----

// Reductions keep (keepdims) or drop the reduced axes; a slice keeps the
// dims of the axes it does not slice (a fused qkv projection split in three).
// CHECK-LABEL: func.func @reduce_and_slice
// CHECK-SAME: kiln.dims = ["b", "t", "1"]
// CHECK-SAME: kiln.dims = ["b", "t", "64"]
func.func @reduce_and_slice(%x: tensor<?x?x192xf32> {kiln.dim_names = ["b", "t", ""]})
    -> (tensor<?x?x1xf32>, tensor<?x?x64xf32>) {
  %m = kiln.reduce_mean %x {axes = array<i64: 2>, keepdims = true} : (tensor<?x?x192xf32>) -> tensor<?x?x1xf32>
  %s = kiln.constant {value = dense<[0]> : tensor<1xi64>} : () -> tensor<1xi64>
  %e = kiln.constant {value = dense<[64]> : tensor<1xi64>} : () -> tensor<1xi64>
  %a = kiln.constant {value = dense<[-1]> : tensor<1xi64>} : () -> tensor<1xi64>
  %st = kiln.constant {value = dense<[1]> : tensor<1xi64>} : () -> tensor<1xi64>
  %q = kiln.slice %x, %s, %e, %a, %st : (tensor<?x?x192xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x?x64xf32>
  return %m, %q : tensor<?x?x1xf32>, tensor<?x?x64xf32>
}

// -----

// A Slice of a dim of fixed size whose bounds follow from the input dims:
// a table of 128 positions sliced to the length (pos[:t]) and a window of
// t rows after `p` cached ones (x[p : p + t]) are described as t rows, as
// code compiled once for every shape has them: it assumes the ends lie
// within the table and checks that at entry (kiln.slice_checks,
// kiln-lower-to-linalg-dynamic.mlir). An end from the dims that may be
// negative (t - 5) is not taken (ONNX would count it from the end), nor a
// step other than 1. The pass never fixes a type from such an assumption:
// the window of 4 rows at p keeps its unknown dim (a 4 there would hold
// without the check).
// CHECK-LABEL: func.func @runtime_slices
// CHECK-SAME: kiln.dims = ["t", "64"]
// CHECK-SAME: kiln.dims = ["t", "64"]
// CHECK-SAME: kiln.dims = ["?", "64"]
// CHECK-SAME: kiln.dims = ["?", "64"]
// CHECK-SAME: tensor<?x?x64xf32> {kiln.dims = ["b", "4", "64"]}
// CHECK: kiln.slice %arg2, {{.*}} -> tensor<?x?x64xf32>
func.func @runtime_slices(%x: tensor<?x?xi64> {kiln.dim_names = ["p", "t"]},
                          %pos: tensor<128x64xf32>,
                          %w: tensor<?x128x64xf32> {kiln.dim_names = ["b", "", ""]})
    -> (tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>,
        tensor<?x?x64xf32>) {
  %sh = kiln.shape %x {end = 9223372036854775807 : i64, start = 0 : i64} : (tensor<?x?xi64>) -> tensor<2xi64>
  %i0 = kiln.constant {value = dense<0> : tensor<i64>} : () -> tensor<i64>
  %i1 = kiln.constant {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %p = kiln.gather %sh, %i0 {axis = 0 : i64} : (tensor<2xi64>, tensor<i64>) -> tensor<i64>
  %t = kiln.gather %sh, %i1 {axis = 0 : i64} : (tensor<2xi64>, tensor<i64>) -> tensor<i64>
  %pt = kiln.add %p, %t : (tensor<i64>, tensor<i64>) -> tensor<i64>
  %c5 = kiln.constant {value = dense<5> : tensor<i64>} : () -> tensor<i64>
  %tm5 = kiln.sub %t, %c5 : (tensor<i64>, tensor<i64>) -> tensor<i64>
  %e = kiln.unsqueeze %t {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %ps = kiln.unsqueeze %p {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %pe = kiln.unsqueeze %pt {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %me = kiln.unsqueeze %tm5 {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %z = kiln.constant {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %s1 = kiln.constant {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %s2 = kiln.constant {value = dense<2> : tensor<1xi64>} : () -> tensor<1xi64>
  %a = kiln.slice %pos, %z, %e, %z, %s1 : (tensor<128x64xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x64xf32>
  %b = kiln.slice %pos, %ps, %pe, %z, %s1 : (tensor<128x64xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x64xf32>
  %c = kiln.slice %pos, %z, %me, %z, %s1 : (tensor<128x64xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x64xf32>
  %d = kiln.slice %pos, %z, %e, %z, %s2 : (tensor<128x64xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x64xf32>
  %c4 = kiln.constant {value = dense<4> : tensor<i64>} : () -> tensor<i64>
  %p4 = kiln.add %p, %c4 : (tensor<i64>, tensor<i64>) -> tensor<i64>
  %p4e = kiln.unsqueeze %p4 {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %w4 = kiln.slice %w, %ps, %p4e, %s1, %s1 : (tensor<?x128x64xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x?x64xf32>
  return %a, %b, %c, %d, %w4 : tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x?x64xf32>
}

// -----

// What is not known stays unknown: n - 1 may be -1 (n = 0), so Equal with -1
// is not decided; Range(n + 3, n) has no elements, not -3; a value an
// scf.if yields keeps its type (the if's result type must match exactly).
// CHECK-LABEL: func.func @not_known
// CHECK-SAME: -> (tensor<?xf32> {kiln.dims = ["?"]}, tensor<?xi64> {kiln.dims = ["?"]}
// CHECK: kiln.constant_of_shape {{.*}} -> tensor<?xf32>
// CHECK: kiln.range {{.*}} -> tensor<?xi64>
// CHECK: kiln.constant_of_shape {{.*}} -> tensor<?x?xf32>
// CHECK: scf.if
func.func @not_known(%x: tensor<?xf32> {kiln.dim_names = ["n"]}, %c: i1)
    -> (tensor<?xf32>, tensor<?xi64>, tensor<?x?xf32>) {
  %s = kiln.shape %x {start = 0 : i64, end = 1 : i64} : (tensor<?xf32>) -> tensor<1xi64>
  %one = kiln.constant {value = dense<[1]> : tensor<1xi64>} : () -> tensor<1xi64>
  %m1 = kiln.constant {value = dense<[-1]> : tensor<1xi64>} : () -> tensor<1xi64>
  %n1 = kiln.sub %s, %one : (tensor<1xi64>, tensor<1xi64>) -> tensor<1xi64>
  %eq = kiln.equal %n1, %m1 : (tensor<1xi64>, tensor<1xi64>) -> tensor<1xi1>
  %five = kiln.constant {value = dense<[5]> : tensor<1xi64>} : () -> tensor<1xi64>
  %w = kiln.select %eq, %five, %one : (tensor<1xi1>, tensor<1xi64>, tensor<1xi64>) -> tensor<1xi64>
  %z = kiln.constant_of_shape %w {value = dense<0.0> : tensor<1xf32>} : (tensor<1xi64>) -> tensor<?xf32>
  %n = kiln.reshape %s, %one {allowzero = false} : (tensor<1xi64>, tensor<1xi64>) -> tensor<1xi64>
  %three = kiln.constant {value = dense<3> : tensor<i64>} : () -> tensor<i64>
  %ns = kiln.squeeze %n {axes = array<i64: 0>} : (tensor<1xi64>) -> tensor<i64>
  %start = kiln.add %ns, %three : (tensor<i64>, tensor<i64>) -> tensor<i64>
  %step = kiln.constant {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %r = kiln.range %start, %ns, %step : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %four = kiln.constant {value = dense<[4]> : tensor<1xi64>} : () -> tensor<1xi64>
  %shape = kiln.concat %s, %four {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>
  %t = kiln.constant_of_shape %shape {value = dense<0.0> : tensor<1xf32>} : (tensor<2xi64>) -> tensor<?x?xf32>
  %y = scf.if %c -> (tensor<?x?xf32>) {
    scf.yield %t : tensor<?x?xf32>
  } else {
    scf.yield %t : tensor<?x?xf32>
  }
  return %z, %r, %y : tensor<?xf32>, tensor<?xi64>, tensor<?x?xf32>
}

// -----

// A patch embedding: a 16x16 stride-16 conv keeps the batch; a 3x3 stride-2
// pad-1 conv of an unknown height gives (h - 1) floordiv 2 + 1 rows (ONNX's
// floor((h + 2 - 2 - 1) / 2) + 1); flattening [n, 8, 2, 2] to [-1, 32] by a
// target with one unknown entry gives the element count over 32: n.
// CHECK-LABEL: func.func @conv_and_flatten
// CHECK-SAME: kiln.dims = ["1", "8", "(h - 1) floordiv 2 + 1", "4"]
// CHECK-SAME: kiln.dims = ["n", "32"]
func.func @conv_and_flatten(%x: tensor<?x3x32x32xf32> {kiln.dim_names = ["n", "", "", ""]},
                            %y: tensor<1x3x?x8xf32> {kiln.dim_names = ["", "", "h", ""]},
                            %w: tensor<8x3x16x16xf32>, %v: tensor<8x3x3x3xf32>)
    -> (tensor<1x8x?x4xf32>, tensor<?x32xf32>) {
  %c = kiln.conv %x, %w {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 16, 16>} : (tensor<?x3x32x32xf32>, tensor<8x3x16x16xf32>) -> tensor<?x8x2x2xf32>
  %d = kiln.conv %y, %v {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x3x?x8xf32>, tensor<8x3x3x3xf32>) -> tensor<1x8x?x4xf32>
  %s = kiln.shape %c {start = 0 : i64, end = 1 : i64} : (tensor<?x8x2x2xf32>) -> tensor<1xi64>
  %m = kiln.constant {value = dense<[-1, 32]> : tensor<2xi64>} : () -> tensor<2xi64>
  %r = kiln.reshape %c, %m {allowzero = false} : (tensor<?x8x2x2xf32>, tensor<2xi64>) -> tensor<?x32xf32>
  return %d, %r : tensor<1x8x?x4xf32>, tensor<?x32xf32>
}

// -----

// A padding mask [b, s] reshaped to [b, 1, 1, s'] with s' gathered from
// another tensor (torch's key padding mask): a target entry that is not
// the input's dim at its position is trusted where it can be 0 only when
// the input is empty (ONNX's "0 copies the input's dim" then differs only
// where ONNX Runtime fails or both results are empty). The merge of heads
// after it, [b * 4, s] read back from [b, 4, 1, s] through x's shape,
// needs the cancelled division (b * s * 4) floordiv 4 nowhere: its dims
// come from the target.
// CHECK-LABEL: func.func @mask_from_other_dims
// CHECK-SAME: kiln.dims = ["b", "1", "1", "s"]
// CHECK-SAME: kiln.dims = ["b * 4", "1", "s"]
func.func @mask_from_other_dims(%mask: tensor<?x?xi1> {kiln.dim_names = ["b", "s"]},
                                %k: tensor<?x?x64xf32> {kiln.dim_names = ["s", "b", ""]})
    -> (tensor<?x1x1x?xi1>, tensor<?x1x?xi1>) {
  %sk = kiln.shape %k {start = 0 : i64, end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %i0 = kiln.constant {value = dense<[0]> : tensor<1xi64>} : () -> tensor<1xi64>
  %i1 = kiln.constant {value = dense<[1]> : tensor<1xi64>} : () -> tensor<1xi64>
  %len = kiln.gather %sk, %i0 {axis = 0 : i64} : (tensor<2xi64>, tensor<1xi64>) -> tensor<1xi64>
  %bsz = kiln.gather %sk, %i1 {axis = 0 : i64} : (tensor<2xi64>, tensor<1xi64>) -> tensor<1xi64>
  %target = kiln.concat %bsz, %i1, %i1, %len {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4xi64>
  %r = kiln.reshape %mask, %target {allowzero = false} : (tensor<?x?xi1>, tensor<4xi64>) -> tensor<?x1x1x?xi1>
  %heads = kiln.constant {value = dense<[1, 4, 1, 1]> : tensor<4xi64>} : () -> tensor<4xi64>
  %e = kiln.expand %r, %heads : (tensor<?x1x1x?xi1>, tensor<4xi64>) -> tensor<?x4x1x?xi1>
  %four = kiln.constant {value = dense<[4]> : tensor<1xi64>} : () -> tensor<1xi64>
  %b4 = kiln.mul %bsz, %four : (tensor<1xi64>, tensor<1xi64>) -> tensor<1xi64>
  %t2 = kiln.concat %b4, %i1, %len {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<3xi64>
  %m = kiln.reshape %e, %t2 {allowzero = false} : (tensor<?x4x1x?xi1>, tensor<3xi64>) -> tensor<?x1x?xi1>
  return %r, %m : tensor<?x1x1x?xi1>, tensor<?x1x?xi1>
}

// -----

// Not trusted: target entries t and u that can be 0 while the input
// [b, 6] is not empty (ONNX would then copy the input's dim where they
// stand): the dims stay unknown, and the code for them is compiled per
// shape.
// CHECK-LABEL: func.func @target_zero_while_input_is_not
// CHECK-SAME: kiln.dims = ["?", "?"]
func.func @target_zero_while_input_is_not(%x: tensor<?x6xf32> {kiln.dim_names = ["b", ""]},
                                          %y: tensor<?x?xf32> {kiln.dim_names = ["t", "u"]})
    -> tensor<?x?xf32> {
  %sy = kiln.shape %y {start = 0 : i64, end = 2 : i64} : (tensor<?x?xf32>) -> tensor<2xi64>
  %r = kiln.reshape %x, %sy {allowzero = false} : (tensor<?x6xf32>, tensor<2xi64>) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}

// -----

// Rows of a 1x1 convolution over [b, s, 64]: (b * s * 64) floordiv 64 is
// b * s once the exact division is cancelled (flattening keeps a product
// of symbols as it is).
// CHECK-LABEL: func.func @exact_division
// CHECK-SAME: kiln.dims = ["1", "1", "b * s", "64"]
func.func @exact_division(%x: tensor<?x?x64xf32> {kiln.dim_names = ["b", "s"]}) -> tensor<1x1x?x64xf32> {
  %t = kiln.constant {value = dense<[1, 1, -1, 64]> : tensor<4xi64>} : () -> tensor<4xi64>
  %r = kiln.reshape %x, %t {allowzero = false} : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<1x1x?x64xf32>
  return %r : tensor<1x1x?x64xf32>
}

// -----

// Flatten: the product of the dims before the axis, and of the rest.
// CHECK-LABEL: func.func @flatten
// CHECK-SAME: kiln.dims = ["b * 3", "s * 4"]
func.func @flatten(%x: tensor<?x3x?x4xf32> {kiln.dim_names = ["b", "", "s", ""]}) -> tensor<?x?xf32> {
  %f = kiln.flatten %x {axis = 2 : i64} : (tensor<?x3x?x4xf32>) -> tensor<?x?xf32>
  return %f : tensor<?x?xf32>
}

// -----

// A channel shuffle (ShuffleNet): [b, 58, 2, 28, 28] reshaped to
// [b, -1, 28, 28] with b gathered from the input's shape. The -1 is the
// input's count over the other dims, b cancelling: 116. Before, it was
// inferred only where every other dim was a constant.
// CHECK-LABEL: func.func @shuffle_channels
// CHECK-SAME: tensor<?x116x28x28xf32> {kiln.dims = ["b", "116", "28", "28"]}
func.func @shuffle_channels(%x: tensor<?x58x2x28x28xf32> {kiln.dim_names = ["b", "", "", "", ""]})
    -> tensor<?x?x28x28xf32> {
  %sx = kiln.shape %x {start = 0 : i64, end = 1 : i64} : (tensor<?x58x2x28x28xf32>) -> tensor<1xi64>
  %rest = kiln.constant {value = dense<[-1, 28, 28]> : tensor<3xi64>} : () -> tensor<3xi64>
  %target = kiln.concat %sx, %rest {axis = 0 : i64} : (tensor<1xi64>, tensor<3xi64>) -> tensor<4xi64>
  %r = kiln.reshape %x, %target {allowzero = false} : (tensor<?x58x2x28x28xf32>, tensor<4xi64>) -> tensor<?x?x28x28xf32>
  return %r : tensor<?x?x28x28xf32>
}

// -----

// Pooling over an image whose size is known only at run time: each spatial
// dim from the window as for a convolution (floor mode; AveragePool's
// ceil_pads counted), NCHW and channels_last alike.
// CHECK-LABEL: func.func @pool_dims
// CHECK-SAME: kiln.dims = ["n", "4", "(h - 1) floordiv 2 + 1", "(w - 1) floordiv 2 + 1"]
// CHECK-SAME: kiln.dims = ["n", "h floordiv 2", "w floordiv 2", "4"]
func.func @pool_dims(%x: tensor<?x4x?x?xf32> {kiln.dim_names = ["n", "", "h", "w"]},
                     %y: tensor<?x?x?x4xf32> {kiln.dim_names = ["n", "h", "w", ""]})
    -> (tensor<?x4x?x?xf32>, tensor<?x?x?x4xf32>) {
  %p = kiln.max_pool %x {dilations = array<i64: 1, 1>, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<?x4x?x?xf32>) -> tensor<?x4x?x?xf32>
  %q = kiln.avg_pool %y {channels_last, kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, ceil_pads = array<i64: 0, 0>, count_include_pad = false} : (tensor<?x?x?x4xf32>) -> tensor<?x?x?x4xf32>
  return %p, %q : tensor<?x4x?x?xf32>, tensor<?x?x?x4xf32>
}

// -----

// A Range up to a convolution's output width, (w - 1) floordiv 2 + 1: never
// negative although w - 1 may be (the lower bound of each part), so its
// length is that dim (a Resize's output positions at run time).
// CHECK-LABEL: func.func @range_to_conv_width
// CHECK-SAME: kiln.dims = ["(w - 1) floordiv 2 + 1"]
func.func @range_to_conv_width(%x: tensor<1x2x?x?xf32> {kiln.dim_names = ["", "", "h", "w"]})
    -> tensor<?xi64> {
  %wt = kiln.constant {value = dense<1.0> : tensor<2x2x3x3xf32>} : () -> tensor<2x2x3x3xf32>
  %c = kiln.conv %x, %wt {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x2x?x?xf32>, tensor<2x2x3x3xf32>) -> tensor<1x2x?x?xf32>
  %s = kiln.shape %c {start = 3 : i64, end = 4 : i64} : (tensor<1x2x?x?xf32>) -> tensor<1xi64>
  %zero = kiln.constant {value = dense<0> : tensor<i64>} : () -> tensor<i64>
  %one = kiln.constant {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %limit = kiln.gather %s, %zero {axis = 0 : i64} : (tensor<1xi64>, tensor<i64>) -> tensor<i64>
  %r = kiln.range %zero, %limit, %one : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  return %r : tensor<?xi64>
}

// -----

// A channel shuffle over a feature map of run-time height and width: the
// target [n, 2, 2, h', w'] takes h' and w' from the input's Shape, at other
// positions than the input's own (rank 4 into 5); each is one of the
// input's dims, so a 0 there could only come from an empty input, and the
// dims are the input's.
// CHECK-LABEL: func.func @shuffle_runtime_image
// CHECK-SAME: kiln.dims = ["n", "2", "2", "(h - 1) floordiv 2 + 1", "w"]
func.func @shuffle_runtime_image(%x: tensor<?x4x?x?xf32> {kiln.dim_names = ["n", "", "h", "w"]})
    -> tensor<?x2x2x?x?xf32> {
  %wt = kiln.constant {value = dense<1.0> : tensor<4x4x3x1xf32>} : () -> tensor<4x4x3x1xf32>
  %c = kiln.conv %x, %wt {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 1, 0, 1, 0>, strides = array<i64: 2, 1>} : (tensor<?x4x?x?xf32>, tensor<4x4x3x1xf32>) -> tensor<?x4x?x?xf32>
  %s = kiln.shape %c {start = 0 : i64, end = 4 : i64} : (tensor<?x4x?x?xf32>) -> tensor<4xi64>
  %i0 = kiln.constant {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %i2 = kiln.constant {value = dense<2> : tensor<1xi64>} : () -> tensor<1xi64>
  %i3 = kiln.constant {value = dense<3> : tensor<1xi64>} : () -> tensor<1xi64>
  %n = kiln.gather %s, %i0 {axis = 0 : i64} : (tensor<4xi64>, tensor<1xi64>) -> tensor<1xi64>
  %h = kiln.gather %s, %i2 {axis = 0 : i64} : (tensor<4xi64>, tensor<1xi64>) -> tensor<1xi64>
  %w = kiln.gather %s, %i3 {axis = 0 : i64} : (tensor<4xi64>, tensor<1xi64>) -> tensor<1xi64>
  %g = kiln.constant {value = dense<2> : tensor<2xi64>} : () -> tensor<2xi64>
  %t = kiln.concat %n, %g, %h, %w {axis = 0 : i64} : (tensor<1xi64>, tensor<2xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<5xi64>
  %r = kiln.reshape %c, %t {allowzero = false} : (tensor<?x4x?x?xf32>, tensor<5xi64>) -> tensor<?x2x2x?x?xf32>
  return %r : tensor<?x2x2x?x?xf32>
}
