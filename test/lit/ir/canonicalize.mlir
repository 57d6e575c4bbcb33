// Canonicalization patterns of kiln ops (lib/ir/Canonicalize.cpp).
// RUN: kiln-opt %s --canonicalize --split-input-file | FileCheck %s

// pow(x, 2) is x * x, pow(x, 3) is (x * x) * x, pow(x, 1) is x.
// CHECK-LABEL: func.func @pow_whole
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK-NOT: kiln.pow
// CHECK: %[[SQ:.*]] = kiln.mul %[[X]], %[[X]]
// CHECK: %[[SQ2:.*]] = kiln.mul %[[X]], %[[X]]
// CHECK: %[[CUBE:.*]] = kiln.mul %[[SQ2]], %[[X]]
// CHECK-NOT: kiln.pow
// CHECK: return %[[SQ]], %[[CUBE]], %[[X]]
func.func @pow_whole(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %two = kiln.constant {value = dense<2.0> : tensor<f32>} : () -> tensor<f32>
  %three = kiln.constant {value = dense<3.0> : tensor<1xf32>} : () -> tensor<1xf32>
  %one = kiln.constant {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %a = kiln.pow %x, %two : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %b = kiln.pow %x, %three : (tensor<4x8xf32>, tensor<1xf32>) -> tensor<4x8xf32>
  %c = kiln.pow %x, %one : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  return %a, %b, %c : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// An integer base with an integer exponent: the same product.
// CHECK-LABEL: func.func @pow_int
// CHECK: kiln.mul %arg0, %arg0 : (tensor<5xi32>, tensor<5xi32>) -> tensor<5xi32>
// CHECK-NOT: kiln.pow
func.func @pow_int(%x: tensor<5xi32>) -> tensor<5xi32> {
  %two = kiln.constant {value = dense<2> : tensor<i32>} : () -> tensor<i32>
  %a = kiln.pow %x, %two : (tensor<5xi32>, tensor<i32>) -> tensor<5xi32>
  return %a : tensor<5xi32>
}

// -----

// Other exponents keep pow: fractions and larger or negative whole numbers
// (a product chain would round differently), non-splat exponents, and an
// exponent that broadcasts the base to a larger shape.
// CHECK-LABEL: func.func @pow_kept
// CHECK-COUNT-5: kiln.pow
// CHECK-NOT: kiln.mul
func.func @pow_kept(%x: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<2x3xf32>) {
  %half = kiln.constant {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %four = kiln.constant {value = dense<4.0> : tensor<f32>} : () -> tensor<f32>
  %minus = kiln.constant {value = dense<-2.0> : tensor<f32>} : () -> tensor<f32>
  %vec = kiln.constant {value = dense<[2.0, 2.0, 3.0]> : tensor<3xf32>} : () -> tensor<3xf32>
  %wide = kiln.constant {value = dense<2.0> : tensor<2x3xf32>} : () -> tensor<2x3xf32>
  %a = kiln.pow %x, %half : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  %b = kiln.pow %x, %four : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  %c = kiln.pow %x, %minus : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  %d = kiln.pow %x, %vec : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %e = kiln.pow %x, %wide : (tensor<3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return %a, %b, %c, %d, %e : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<2x3xf32>
}

// -----

// An unranked base: whether the exponent broadcasts it is unknown, so pow
// stays; so does a one-element exponent of higher rank than the base.
// CHECK-LABEL: func.func @pow_unknown_broadcast
// CHECK-COUNT-2: kiln.pow
// CHECK-NOT: kiln.mul
func.func @pow_unknown_broadcast(%x: tensor<*xf32>, %y: tensor<3xf32>) -> (tensor<*xf32>, tensor<1x3xf32>) {
  %two = kiln.constant {value = dense<2.0> : tensor<2x3xf32>} : () -> tensor<2x3xf32>
  %a = kiln.pow %x, %two : (tensor<*xf32>, tensor<2x3xf32>) -> tensor<*xf32>
  %c = kiln.constant {value = dense<2.0> : tensor<1x1xf32>} : () -> tensor<1x1xf32>
  %b = kiln.pow %y, %c : (tensor<3xf32>, tensor<1x1xf32>) -> tensor<1x3xf32>
  return %a, %b : tensor<*xf32>, tensor<1x3xf32>
}

// -----

// avg_pool of a zero Pad of the spatial dims (PyTorch's export of
// avg_pool2d(3, 1, padding=1)) takes the pads itself, counted in the
// divisor: the same sums and divisors (every window of the padded tensor
// is whole). Left alone: a Pad of the channels, a non-zero value, and a
// pool with pads of its own.
// CHECK-LABEL: func.func @zero_pad_into_avg_pool
// CHECK: %[[P:.*]] = kiln.avg_pool %arg0 {ceil_pads = array<i64: 0, 0>, count_include_pad = true, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 2, 1, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
// CHECK: kiln.pad
// CHECK: kiln.avg_pool
// CHECK: kiln.pad
// CHECK: kiln.avg_pool
// CHECK: kiln.avg_pool
// CHECK-SAME: pads = array<i64: 1, 1, 1, 1>
// CHECK: return %[[P]]
func.func @zero_pad_into_avg_pool(%x: tensor<1x4x8x8xf32>) -> (tensor<1x4x8x8xf32>, tensor<1x6x8x8xf32>, tensor<1x4x8x8xf32>, tensor<1x4x10x10xf32>) {
  %pads = kiln.constant {value = dense<[0, 0, 1, 2, 0, 0, 1, 0]> : tensor<8xi64>} : () -> tensor<8xi64>
  %chan = kiln.constant {value = dense<[0, 1, 1, 1, 0, 1, 1, 1]> : tensor<8xi64>} : () -> tensor<8xi64>
  %zero = kiln.constant {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %one = kiln.constant {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %p = kiln.pad %x, %pads, %zero {mode = "constant"} : (tensor<1x4x8x8xf32>, tensor<8xi64>, tensor<f32>) -> tensor<1x4x10x10xf32>
  %a = kiln.avg_pool %p {ceil_pads = array<i64: 0, 0>, count_include_pad = false, kernel_shape = array<i64: 3, 3>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x10x10xf32>) -> tensor<1x4x8x8xf32>
  %pc = kiln.pad %x, %chan, %zero {mode = "constant"} : (tensor<1x4x8x8xf32>, tensor<8xi64>, tensor<f32>) -> tensor<1x6x10x10xf32>
  %b = kiln.avg_pool %pc {ceil_pads = array<i64: 0, 0>, count_include_pad = false, kernel_shape = array<i64: 3, 3>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x6x10x10xf32>) -> tensor<1x6x8x8xf32>
  %po = kiln.pad %x, %pads, %one {mode = "constant"} : (tensor<1x4x8x8xf32>, tensor<8xi64>, tensor<f32>) -> tensor<1x4x10x10xf32>
  %c = kiln.avg_pool %po {ceil_pads = array<i64: 0, 0>, count_include_pad = false, kernel_shape = array<i64: 3, 3>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x10x10xf32>) -> tensor<1x4x8x8xf32>
  %d = kiln.avg_pool %p {ceil_pads = array<i64: 0, 0>, count_include_pad = false, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<1x4x10x10xf32>) -> tensor<1x4x10x10xf32>
  return %a, %b, %c, %d : tensor<1x4x8x8xf32>, tensor<1x6x8x8xf32>, tensor<1x4x8x8xf32>, tensor<1x4x10x10xf32>
}

// -----

// Kernel taps that only ever read padding are dropped. 3x3 dilated by 24 on
// a 14x14 map padded by 24 (DeepLab-v3's ASPP): offsets -24 and +24 never
// reach the input, so it is a 1x1 convolution with no pads. Dilated by 12,
// the outer taps reach the border rows and columns: left alone. A 7-wide
// kernel along W, stride 2, padded 4 on a 2-wide input: taps 0, 1 and 6
// never read it (2i + t - 4 for i = 0, 1), taps 2-5 do; pads become 2 and
// 2 (the same two outputs).
// CHECK-LABEL: func.func @dead_conv_taps
// CHECK-DAG: %[[W1:.*]] = kiln.constant {value = dense<2.000000e+00> : tensor<4x8x1x1xf32>}
// CHECK-DAG: %[[W5:.*]] = kiln.constant {value = dense<3.000000e+00> : tensor<4x8x1x4xf32>}
// CHECK: kiln.conv %arg0, %[[W1]] {dilations = array<i64: 24, 24>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x8x14x14xf32>, tensor<4x8x1x1xf32>) -> tensor<1x4x14x14xf32>
// CHECK: kiln.conv %arg0, {{.*}} {dilations = array<i64: 12, 12>, group = 1 : i64, pads = array<i64: 12, 12, 12, 12>, strides = array<i64: 1, 1>} : (tensor<1x8x14x14xf32>, tensor<4x8x3x3xf32>) -> tensor<1x4x14x14xf32>
// CHECK: kiln.conv %arg1, %[[W5]] {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 2, 0, 2>, strides = array<i64: 1, 2>} : (tensor<1x8x1x2xf32>, tensor<4x8x1x4xf32>) -> tensor<1x4x1x2xf32>
func.func @dead_conv_taps(%x: tensor<1x8x14x14xf32>, %v: tensor<1x8x1x2xf32>) -> (tensor<1x4x14x14xf32>, tensor<1x4x14x14xf32>, tensor<1x4x1x2xf32>) {
  %w = kiln.constant {value = dense<2.0> : tensor<4x8x3x3xf32>} : () -> tensor<4x8x3x3xf32>
  %w12 = kiln.constant {value = dense<1.0> : tensor<4x8x3x3xf32>} : () -> tensor<4x8x3x3xf32>
  %w5 = kiln.constant {value = dense<3.0> : tensor<4x8x1x7xf32>} : () -> tensor<4x8x1x7xf32>
  %a = kiln.conv %x, %w {dilations = array<i64: 24, 24>, group = 1 : i64, pads = array<i64: 24, 24, 24, 24>, strides = array<i64: 1, 1>} : (tensor<1x8x14x14xf32>, tensor<4x8x3x3xf32>) -> tensor<1x4x14x14xf32>
  %b = kiln.conv %x, %w12 {dilations = array<i64: 12, 12>, group = 1 : i64, pads = array<i64: 12, 12, 12, 12>, strides = array<i64: 1, 1>} : (tensor<1x8x14x14xf32>, tensor<4x8x3x3xf32>) -> tensor<1x4x14x14xf32>
  %c = kiln.conv %v, %w5 {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 4, 0, 4>, strides = array<i64: 1, 2>} : (tensor<1x8x1x2xf32>, tensor<4x8x1x7xf32>) -> tensor<1x4x1x2xf32>
  return %a, %b, %c : tensor<1x4x14x14xf32>, tensor<1x4x14x14xf32>, tensor<1x4x1x2xf32>
}
