// RUN: kiln-opt %s --kiln-gpu-loops --cse --split-input-file | FileCheck %s

// A matrix product written (m, k, n), the order Kiln's lowering uses: the
// loops are reordered so that both parallel loops are in the scf.parallel
// and the reduction runs inside each (m, n) iteration.
// CHECK-LABEL: func.func @matmul
// CHECK: scf.parallel (%[[M:.*]], %[[N:.*]]) = (%c0, %c0) to (%c4, %c8)
// CHECK-NEXT: scf.for %[[K:.*]] = %c0 to %c16
// CHECK-DAG: %[[AM:.*]] = affine.apply #{{.*}}(%[[M]])
// CHECK-DAG: %[[AK:.*]] = affine.apply #{{.*}}(%[[K]])
// CHECK: memref.load %arg0[%[[AM]], %[[AK]]]
// CHECK-NOT: linalg.
#mk = affine_map<(m, k, n) -> (m, k)>
#kn = affine_map<(m, k, n) -> (k, n)>
#mn = affine_map<(m, k, n) -> (m, n)>
func.func @matmul(%a: memref<4x16xf32>, %b: memref<16x8xf32>, %c: memref<4x8xf32>) {
  linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "reduction", "parallel"]} ins(%a, %b : memref<4x16xf32>, memref<16x8xf32>) outs(%c : memref<4x8xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A full reduction has no parallel loop: it is wrapped in a one-iteration
// scf.parallel (one GPU thread) instead of staying a host loop. A copy
// becomes a parallel loop too.
// CHECK-LABEL: func.func @full_reduction
// CHECK: scf.parallel (%{{.*}}) = (%c0) to (%c1) step (%c1)
// CHECK-NEXT: scf.for %{{.*}} = %c0 to %c16
// CHECK: memref.store {{.*}}, %arg1[]
// CHECK: scf.parallel (%{{.*}}) = (%c0) to (%c16) step (%c1)
// CHECK: %[[V:.*]] = memref.load %arg0
// CHECK: memref.store %[[V]], %arg2
// CHECK-NOT: memref.copy
#in = affine_map<(i) -> (i)>
#out = affine_map<(i) -> ()>
func.func @full_reduction(%x: memref<16xf32>, %sum: memref<f32>, %y: memref<16xf32>) {
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["reduction"]} ins(%x : memref<16xf32>) outs(%sum : memref<f32>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %acc, %v : f32
    linalg.yield %s : f32
  }
  memref.copy %x, %y : memref<16xf32> to memref<16xf32>
  return
}
