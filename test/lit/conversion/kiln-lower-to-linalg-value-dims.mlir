// RUN: kiln-opt %s --pass-pipeline='builtin.module(kiln-lower-to-linalg,canonicalize,cse)' --split-input-file -verify-diagnostics | FileCheck %s

// Dims computed from data (value-defined dims: a keypoint head's map
// resized to its box inside a loop) in a function whose inputs are all
// static. The limit of the Range is read where it is computed, clamped at
// 0 (a negative limit gives an empty Range), and every tensor whose dims
// follow from it is made with that size: the gather by the Range, a gather
// along the run-time dim (its indices clamp against the dim's size read
// there) and an ArgMax over it.
// CHECK-LABEL: func.func @dims_from_data
// CHECK: %[[E:.*]] = tensor.extract %arg1[]
// CHECK: %[[I:.*]] = arith.index_cast %[[E]] : i64 to index
// CHECK: %[[N:.*]] = arith.maxsi %[[I]], %c0
// CHECK: tensor.empty(%[[N]]) : tensor<?xi64>
// CHECK: %[[G:.*]] = tensor.empty(%[[N]]) : tensor<2x?xf32>
// CHECK: linalg.generic
// CHECK: %[[IDX:.*]] = arith.index_cast %in : i64 to index
// CHECK: %[[NEG:.*]] = arith.cmpi slt, %[[IDX]], %c0
// CHECK: %[[WRAP:.*]] = arith.addi %[[IDX]], %[[N]]
// CHECK: %[[SEL:.*]] = arith.select %[[NEG]], %[[WRAP]], %[[IDX]]
// CHECK: %[[LAST:.*]] = arith.subi %[[N]], %c1
// CHECK: %[[HI:.*]] = arith.minsi %[[SEL]], %[[LAST]]
// CHECK: %[[AT:.*]] = arith.maxsi %[[HI]], %c0
// CHECK: tensor.extract %{{.*}}[%{{.*}}, %[[AT]]] : tensor<2x?xf32>
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%{{.*}} : tensor<2x?xf32>)
// CHECK: arith.cmpf ogt
func.func @dims_from_data(%x: tensor<2x8xf32>, %n: tensor<i64>) -> (tensor<2x1xf32>, tensor<2xi64>) {
  %zero = kiln.constant {value = dense<0> : tensor<i64>} : () -> tensor<i64>
  %one = kiln.constant {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %last = kiln.constant {value = dense<-1> : tensor<1xi64>} : () -> tensor<1xi64>
  %r = kiln.range %zero, %n, %one : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %g = kiln.gather %x, %r {axis = 1 : i64} : (tensor<2x8xf32>, tensor<?xi64>) -> tensor<2x?xf32>
  %e = kiln.gather %g, %last {axis = 1 : i64} : (tensor<2x?xf32>, tensor<1xi64>) -> tensor<2x1xf32>
  %a = kiln.arg_max %g {axis = 1 : i64, is_min = false, keepdims = false, select_last_index = false} : (tensor<2x?xf32>) -> tensor<2xi64>
  return %e, %a : tensor<2x1xf32>, tensor<2xi64>
}

// -----

// An output whose dims are computed from data has no entry in the
// runtime's dims array: an error naming where it is made.
func.func @output_sized_by_data(%n: tensor<i64>) -> tensor<?xi64> {
  %zero = kiln.constant {value = dense<0> : tensor<i64>} : () -> tensor<i64>
  %one = kiln.constant {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  // expected-error @+1 {{model output 0 has dims computed from data at run time}}
  %r = kiln.range %zero, %n, %one : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  return %r : tensor<?xi64>
}
