// RUN: kiln-opt %s --kiln-gpu-loops --cse --split-input-file | FileCheck %s

// A matrix product written (m, k, n), the order Kiln's lowering uses: the
// loops are reordered so that both parallel loops are in the scf.parallel,
// which is collapsed into one loop over the 32 elements of the output (n
// fastest: neighbouring threads write neighbouring elements), and the
// reduction runs inside each, its sum carried in a register: one load of
// the output before the loop, one store after it, multiply-adds that may
// contract into FMA.
// CHECK-LABEL: func.func @matmul
// CHECK: scf.parallel (%[[I:.*]]) = (%c0) to (%{{.*}}) step (%c1)
// CHECK-DAG: %[[N:.*]] = arith.remsi %[[I]], %c8
// CHECK-DAG: %[[M:.*]] = arith.divsi %[[I]], %c8
// CHECK: %[[C0:.*]] = memref.load %arg2[%[[M]], %[[N]]]
// CHECK-NEXT: %[[SUM:.*]] = scf.for %[[K:.*]] = %c0 to %c16 step %c1 iter_args(%[[ACC:.*]] = %[[C0]])
// CHECK: memref.load %arg0[%[[M]], %[[K]]]
// CHECK: %[[P:.*]] = arith.mulf {{.*}} fastmath<contract>
// CHECK: %[[S:.*]] = arith.addf %[[ACC]], %[[P]] fastmath<contract>
// CHECK-NEXT: scf.yield %[[S]]
// CHECK: memref.store %[[SUM]], %arg2[%[[M]], %[[N]]]
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
// scf.parallel (one GPU thread) instead of staying a host loop, its sum in
// a register. A copy becomes a parallel loop too.
// CHECK-LABEL: func.func @full_reduction
// CHECK: scf.parallel (%{{.*}}) = (%c0) to (%c1) step (%c1)
// CHECK-NEXT: %[[INIT:.*]] = memref.load %arg1[]
// CHECK-NEXT: %[[SUM:.*]] = scf.for %{{.*}} = %c0 to %c16 step %c1 iter_args(%{{.*}} = %[[INIT]])
// CHECK: memref.store %[[SUM]], %arg1[]
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

// -----

// The output and an input are views of one buffer that is not a planned
// one (a subview of the same argument): they may overlap, so the output
// element is loaded and stored in every iteration, as written.
// CHECK-LABEL: func.func @may_alias
// CHECK: scf.for
// CHECK-NOT: iter_args
// CHECK: memref.load %{{.*}}[%{{.*}}] : memref<4xf32, strided<[1], offset: 4>>
// CHECK: memref.store
#row = affine_map<(i, k) -> (i, k)>
#col = affine_map<(i, k) -> (i)>
func.func @may_alias(%buf: memref<20xf32>, %x: memref<4x4xf32>) {
  %out = memref.subview %buf[4] [4] [1] : memref<20xf32> to memref<4xf32, strided<[1], offset: 4>>
  %in = memref.subview %buf[0] [16] [1] : memref<20xf32> to memref<16xf32>
  %in2 = memref.expand_shape %in [[0, 1]] output_shape [4, 4] : memref<16xf32> into memref<4x4xf32>
  linalg.generic {indexing_maps = [#row, #col], iterator_types = ["parallel", "reduction"]} ins(%in2 : memref<4x4xf32>) outs(%out : memref<4xf32, strided<[1], offset: 4>>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %acc, %v : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A matrix product big enough to keep 2^16 threads busy with a register
// tile: each thread computes a 2x4 tile of C (1024 * 512 / 8 = 65536
// threads), so each step of the reduction loads 2 values of A and 4 of B
// for 8 multiply-adds, and the 8 sums stay in registers (iter_args).
// CHECK-LABEL: func.func @register_tile
// CHECK: scf.parallel (%{{.*}}) = (%c0{{.*}}) to (%{{.*}}) step
// CHECK: %[[CT:.*]] = memref.subview %arg2[%{{.*}}, %{{.*}}] [2, 4] [1, 1]
// CHECK-COUNT-8: memref.load %[[CT]][%c{{[0-3]}}, %c{{[0-3]}}]
// CHECK: %[[SUMS:.*]]:8 = scf.for %{{.*}} = %c0 to %c64 step %c1 iter_args(
// CHECK-COUNT-8: arith.addf %arg{{.*}} fastmath<contract>
// CHECK: scf.yield
// CHECK-COUNT-8: memref.store %[[SUMS]]#{{[0-7]}}, %[[CT]]
#mk2 = affine_map<(m, k, n) -> (m, k)>
#kn2 = affine_map<(m, k, n) -> (k, n)>
#mn2 = affine_map<(m, k, n) -> (m, n)>
func.func @register_tile(%a: memref<1024x64xf32>, %b: memref<64x512xf32>, %c: memref<1024x512xf32>) {
  linalg.generic {indexing_maps = [#mk2, #kn2, #mn2], iterator_types = ["parallel", "reduction", "parallel"]} ins(%a, %b : memref<1024x64xf32>, memref<64x512xf32>) outs(%c : memref<1024x512xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}
