// RUN: kiln-opt %s --kiln-distinct-results --split-input-file | FileCheck %s
// RUN: kiln-opt %s --kiln-distinct-results --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" --buffer-results-to-out-params="hoist-static-allocs modify-public-functions" --split-input-file | FileCheck %s --check-prefix=BUF

// One value returned three times: each later occurrence is a copy of it, and after
// bufferization each output is its own caller-provided buffer (without the
// pass, buffer-results-to-out-params crashes on this function).
// CHECK-LABEL: func.func @twice
// CHECK: %[[V:.*]] = linalg.generic
// CHECK: %[[E1:.*]] = tensor.empty() : tensor<4xf32>
// CHECK: %[[C1:.*]] = linalg.copy ins(%[[V]] : tensor<4xf32>) outs(%[[E1]] : tensor<4xf32>)
// CHECK: %[[E2:.*]] = tensor.empty() : tensor<4xf32>
// CHECK: %[[C2:.*]] = linalg.copy ins(%[[V]] : tensor<4xf32>) outs(%[[E2]] : tensor<4xf32>)
// CHECK: return %[[V]], %[[C1]], %[[C2]]
// BUF-LABEL: func.func @twice
// BUF-SAME: (%{{.*}}: memref<4xf32>, %[[O0:.*]]: memref<4xf32>, %[[O1:.*]]: memref<4xf32>, %[[O2:.*]]: memref<4xf32>)
// BUF: linalg.generic {{.*}} outs(%[[O0]] : memref<4xf32>)
// BUF: linalg.copy ins(%[[O0]] : memref<4xf32>) outs(%[[O1]] : memref<4xf32>)
// BUF: linalg.copy ins(%[[O0]] : memref<4xf32>) outs(%[[O2]] : memref<4xf32>)
// BUF-NOT: memref.alloc
#map = affine_map<(d0) -> (d0)>
func.func @twice(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %e = tensor.empty() : tensor<4xf32>
  %v = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %in, %in : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %v, %v, %v : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// Distinct values and dynamic shapes: a repeated dynamic tensor gets its dims.
// CHECK-LABEL: func.func @dynamic
// CHECK: %[[D:.*]] = tensor.dim %[[X:.*]], %c0
// CHECK: %[[E:.*]] = tensor.empty(%[[D]]) : tensor<?xf32>
// CHECK: %[[C:.*]] = linalg.copy ins(%[[X]] : tensor<?xf32>) outs(%[[E]] : tensor<?xf32>)
// CHECK: return %[[X]], %[[Y:.*]], %[[C]]
// BUF-LABEL: func.func @dynamic
func.func @dynamic(%x: tensor<?xf32>, %y: tensor<2xf32>) -> (tensor<?xf32>, tensor<2xf32>, tensor<?xf32>) {
  return %x, %y, %x : tensor<?xf32>, tensor<2xf32>, tensor<?xf32>
}
