// RUN: kiln-opt %s --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" --cse --canonicalize --split-input-file | FileCheck %s

// kiln.call_kernel bufferizes to a call with i64 addresses taken right at
// the call; the destination's address goes at result_position.
// CHECK-LABEL: func.func @call
// CHECK: %[[OUT:.*]] = memref.alloc() {alignment = 64 : i64} : memref<4x16xf32>
// CHECK-DAG: memref.extract_aligned_pointer_as_index %arg0
// CHECK-DAG: memref.extract_aligned_pointer_as_index %arg1
// CHECK-DAG: memref.extract_aligned_pointer_as_index %[[OUT]]
// CHECK: call @kiln_matmul_f32(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (i64, i64, i64, i64) -> ()
// CHECK: return %[[OUT]]
func.func private @kiln_matmul_f32(i64, i64, i64, i64)
func.func @call(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %p = arith.constant dense<[1, 4, 16, 8, 0, 0, 0, 8, 16, 16, 0]> : tensor<11xi64>
  %init = tensor.empty() : tensor<4x16xf32>
  %0 = kiln.call_kernel @kiln_matmul_f32(%p, %a, %b) into %init {result_position = 3 : i64} : (tensor<11xi64>, tensor<4x8xf32>, tensor<8x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// A strided operand (a column slice) is copied to a dense buffer first.
// CHECK-LABEL: func.func @strided_operand
// CHECK: %[[SUB:.*]] = memref.subview %arg0[0, 0] [4, 8] [1, 1]
// CHECK: %[[DENSE:.*]] = memref.alloc() {alignment = 64 : i64} : memref<4x8xf32>
// CHECK: memref.copy %[[SUB]], %[[DENSE]]
// CHECK: memref.extract_aligned_pointer_as_index %[[DENSE]]
// CHECK: call @kiln_matmul_f32
func.func private @kiln_matmul_f32(i64, i64, i64, i64)
func.func @strided_operand(%a: tensor<4x9xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %p = arith.constant dense<[1, 4, 16, 8, 0, 0, 0, 8, 16, 16, 0]> : tensor<11xi64>
  %s = tensor.extract_slice %a[0, 0] [4, 8] [1, 1] : tensor<4x9xf32> to tensor<4x8xf32>
  %init = tensor.empty() : tensor<4x16xf32>
  %0 = kiln.call_kernel @kiln_matmul_f32(%p, %s, %b) into %init {result_position = 3 : i64} : (tensor<11xi64>, tensor<4x8xf32>, tensor<8x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// With row_strides, a channel slice of a wider tensor (a concatenation's
// part) is passed as it is, in and out, and the kernel gets the row strides
// (9 and 24) in the named arguments. (The insert_slice of the kernel's own
// slot becomes a copy onto itself, which CSE and canonicalization remove.)
// CHECK-LABEL: func.func @row_strided
// CHECK-NOT: memref.copy
// CHECK-DAG: %[[S9:.*]] = arith.constant 9 : i64
// CHECK-DAG: %[[S24:.*]] = arith.constant 24 : i64
// CHECK: call @kiln_pool2d_nhwc_f32(%{{.*}}, %{{.*}}, %{{.*}}, %[[S9]], %[[S24]])
// CHECK-NOT: memref.copy
// CHECK: return
func.func private @kiln_pool2d_nhwc_f32(i64, i64, i64, i64, i64)
func.func @row_strided(%x: tensor<1x4x4x9xf32>) -> tensor<1x4x4x24xf32> {
  %p = arith.constant dense<[1, 4, 4, 8, 4, 4, 1, 1, 1, 1, 0, 0, 1, 1, 0, 0, 0]> : tensor<17xi64>
  %zero = arith.constant 0 : i64
  %in = tensor.extract_slice %x[0, 0, 0, 1] [1, 4, 4, 8] [1, 1, 1, 1] : tensor<1x4x4x9xf32> to tensor<1x4x4x8xf32>
  %big = tensor.empty() : tensor<1x4x4x24xf32>
  %slot = tensor.extract_slice %big[0, 0, 0, 16] [1, 4, 4, 8] [1, 1, 1, 1] : tensor<1x4x4x24xf32> to tensor<1x4x4x8xf32>
  %0 = kiln.call_kernel @kiln_pool2d_nhwc_f32(%p, %in, %zero, %zero) into %slot {result_position = 2 : i64, row_strides = array<i64: 1, 2, -1, 3>} : (tensor<17xi64>, tensor<1x4x4x8xf32>, i64, i64, tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32>
  %r = tensor.insert_slice %0 into %big[0, 0, 0, 16] [1, 4, 4, 8] [1, 1, 1, 1] : tensor<1x4x4x8xf32> into tensor<1x4x4x24xf32>
  return %r : tensor<1x4x4x24xf32>
}

// -----

// A slice that is not row-strided (every other row) is still copied, and
// the stride argument is the dense copy's.
// CHECK-LABEL: func.func @not_row_strided
// CHECK: %[[S8:.*]] = arith.constant 8 : i64
// CHECK: memref.copy
// CHECK: call @kiln_pool2d_nhwc_f32(%{{.*}}, %{{.*}}, %{{.*}}, %[[S8]], %[[S8]])
func.func private @kiln_pool2d_nhwc_f32(i64, i64, i64, i64, i64)
func.func @not_row_strided(%x: tensor<1x8x4x8xf32>) -> tensor<1x4x4x8xf32> {
  %p = arith.constant dense<[1, 4, 4, 8, 4, 4, 1, 1, 1, 1, 0, 0, 1, 1, 0, 0, 0]> : tensor<17xi64>
  %zero = arith.constant 0 : i64
  %in = tensor.extract_slice %x[0, 0, 0, 0] [1, 4, 4, 8] [1, 2, 1, 1] : tensor<1x8x4x8xf32> to tensor<1x4x4x8xf32>
  %init = tensor.empty() : tensor<1x4x4x8xf32>
  %0 = kiln.call_kernel @kiln_pool2d_nhwc_f32(%p, %in, %zero, %zero) into %init {result_position = 2 : i64, row_strides = array<i64: 1, 2, -1, 3>} : (tensor<17xi64>, tensor<1x4x4x8xf32>, i64, i64, tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32>
  return %0 : tensor<1x4x4x8xf32>
}
