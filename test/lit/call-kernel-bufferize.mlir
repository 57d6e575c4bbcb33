// RUN: kiln-opt %s --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" --canonicalize --split-input-file | FileCheck %s

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
