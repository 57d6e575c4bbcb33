// RUN: kiln-opt %s --pass-pipeline='builtin.module(func.func(kiln-symbolic-dims{rounds=4}))' | FileCheck %s
// RUN: kiln-opt %s --pass-pipeline='builtin.module(func.func(kiln-symbolic-dims))' | FileCheck %s --check-prefix=ONE

// PyTorch's F.pad as exported: the pad amounts (here 8 - W, W a static dim
// of a tensor whose batch is known only at run time) are concatenated,
// reshaped to [4, 2], reversed, transposed and flattened. A sweep knows
// the concatenation only; folding the 2-D chain makes the pads a
// constant, which the next round's sweep reads: the padded tensor is
// [batch, 6, 8, 4]. With one round it stays unknown.
// CHECK-LABEL: func.func @torch_pad
// CHECK-SAME: -> (tensor<?x6x8x4xf32> {kiln.dims = ["b", "6", "8", "4"]})
// ONE-LABEL: func.func @torch_pad
// ONE-SAME: -> (tensor<?x?x?x?xf32>
func.func @torch_pad(%x: tensor<?x6x6x4xf32> {kiln.dim_names = ["b", "", "", ""]}) -> tensor<?x?x?x?xf32> {
  %s = kiln.shape %x {start = 0 : i64, end = 4 : i64} : (tensor<?x6x6x4xf32>) -> tensor<4xi64>
  %i2 = kiln.constant {value = dense<[2]> : tensor<1xi64>} : () -> tensor<1xi64>
  %w = kiln.gather %s, %i2 {axis = 0 : i64} : (tensor<4xi64>, tensor<1xi64>) -> tensor<1xi64>
  %eight = kiln.constant {value = dense<[8]> : tensor<1xi64>} : () -> tensor<1xi64>
  %r = kiln.sub %eight, %w : (tensor<1xi64>, tensor<1xi64>) -> tensor<1xi64>
  %zero = kiln.constant {value = dense<[0]> : tensor<1xi64>} : () -> tensor<1xi64>
  %zeros = kiln.constant {value = dense<0> : tensor<5xi64>} : () -> tensor<5xi64>
  // [0 (channels begin), 0 (channels end), 0 (W begin), r (W end), 0 ...]
  %list = kiln.concat %zero, %zero, %zero, %r, %zeros {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<5xi64>) -> tensor<9xi64>
  %c0 = kiln.constant {value = dense<[0]> : tensor<1xi64>} : () -> tensor<1xi64>
  %c8 = kiln.constant {value = dense<[8]> : tensor<1xi64>} : () -> tensor<1xi64>
  %c1 = kiln.constant {value = dense<[1]> : tensor<1xi64>} : () -> tensor<1xi64>
  %pairs8 = kiln.slice %list, %c0, %c8, %c0, %c1 : (tensor<9xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<8xi64>
  %t42 = kiln.constant {value = dense<[-1, 2]> : tensor<2xi64>} : () -> tensor<2xi64>
  %pairs = kiln.reshape %pairs8, %t42 {allowzero = false} : (tensor<8xi64>, tensor<2xi64>) -> tensor<4x2xi64>
  %m1 = kiln.constant {value = dense<[-1]> : tensor<1xi64>} : () -> tensor<1xi64>
  %min = kiln.constant {value = dense<[-9223372036854775807]> : tensor<1xi64>} : () -> tensor<1xi64>
  %rev = kiln.slice %pairs, %m1, %min, %c0, %m1 : (tensor<4x2xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4x2xi64>
  %tr = kiln.transpose %rev {perm = array<i64: 1, 0>} : (tensor<4x2xi64>) -> tensor<2x4xi64>
  %pads = kiln.reshape %tr, %m1 {allowzero = false} : (tensor<2x4xi64>, tensor<1xi64>) -> tensor<8xi64>
  %v = kiln.constant {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %p = kiln.pad %x, %pads, %v {mode = "constant"} : (tensor<?x6x6x4xf32>, tensor<8xi64>, tensor<f32>) -> tensor<?x?x?x?xf32>
  return %p : tensor<?x?x?x?xf32>
}
