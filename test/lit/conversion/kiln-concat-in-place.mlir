// RUN: kiln-opt %s --kiln-concat-in-place --canonicalize --split-input-file | FileCheck %s
// RUN: kiln-opt %s --kiln-concat-in-place --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" --cse --canonicalize --split-input-file | FileCheck %s --check-prefix=BUF

// Two parts computed by a kernel call and a linalg op: each writes into its
// slice of the concatenation; bufferized, there is one buffer and no copy.
// CHECK-LABEL: func.func @parts_in_place
// CHECK: %[[E:.*]] = tensor.empty() : tensor<1x4x4x8xf32>
// CHECK: %[[S0:.*]] = tensor.extract_slice %[[E]][0, 0, 0, 0] [1, 4, 4, 3]
// CHECK: %[[A:.*]] = kiln.call_kernel @kiln_pool2d_nhwc_f32({{.*}}) into %[[S0]]
// CHECK: %[[C0:.*]] = tensor.insert_slice %[[A]] into %[[E]][0, 0, 0, 0] [1, 4, 4, 3]
// CHECK: %[[S1:.*]] = tensor.extract_slice %[[C0]][0, 0, 0, 3] [1, 4, 4, 5]
// CHECK: %[[B:.*]] = linalg.generic {{.*}} outs(%[[S1]] :
// CHECK: %[[C1:.*]] = tensor.insert_slice %[[B]] into %[[C0]][0, 0, 0, 3] [1, 4, 4, 5]
// CHECK: return %[[C1]]
// BUF-LABEL: func.func @parts_in_place
// BUF: memref.alloc() {{.*}} : memref<1x4x4x8xf32>
// BUF-NOT: memref.alloc
// BUF-NOT: memref.copy
// BUF: return
#map = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
func.func private @kiln_pool2d_nhwc_f32(i64, i64, i64, i64, i64)
func.func @parts_in_place(%x: tensor<1x4x4x3xf32>, %y: tensor<1x4x4x5xf32>) -> tensor<1x4x4x8xf32> {
  %p = arith.constant dense<[1, 4, 4, 3, 4, 4, 1, 1, 1, 1, 0, 0, 1, 1, 0, 0, 0]> : tensor<17xi64>
  %zero = arith.constant 0 : i64
  %ea = tensor.empty() : tensor<1x4x4x3xf32>
  %a = kiln.call_kernel @kiln_pool2d_nhwc_f32(%p, %x, %zero, %zero) into %ea {result_position = 2 : i64, row_strides = array<i64: 1, 2, -1, 3>} : (tensor<17xi64>, tensor<1x4x4x3xf32>, i64, i64, tensor<1x4x4x3xf32>) -> tensor<1x4x4x3xf32>
  %eb = tensor.empty() : tensor<1x4x4x5xf32>
  %b = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%y : tensor<1x4x4x5xf32>) outs(%eb : tensor<1x4x4x5xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.addf %in, %in : f32
    linalg.yield %r : f32
  } -> tensor<1x4x4x5xf32>
  %e = tensor.empty() : tensor<1x4x4x8xf32>
  %0 = tensor.insert_slice %a into %e[0, 0, 0, 0] [1, 4, 4, 3] [1, 1, 1, 1] : tensor<1x4x4x3xf32> into tensor<1x4x4x8xf32>
  %1 = tensor.insert_slice %b into %0[0, 0, 0, 3] [1, 4, 4, 5] [1, 1, 1, 1] : tensor<1x4x4x5xf32> into tensor<1x4x4x8xf32>
  return %1 : tensor<1x4x4x8xf32>
}

// -----

// DenseNet's pattern: the second layer concatenates x, f1, f2, where the
// first concatenated x, f1 and f2 was computed from it. The small
// concatenation becomes the leading slice of the large one: f1 and f2 are
// each written once, into one buffer, and only the graph input is copied.
// CHECK-LABEL: func.func @dense_block
// CHECK: %[[C0:.*]] = tensor.insert_slice %arg0 into %{{.*}}[0, 0, 0, 0] [1, 4, 4, 2]
// CHECK: %[[S1:.*]] = tensor.extract_slice %[[C0]][0, 0, 0, 2] [1, 4, 4, 2]
// CHECK: %[[F1:.*]] = kiln.call_kernel {{.*}} into %[[S1]]
// CHECK: %[[C1:.*]] = tensor.insert_slice %[[F1]] into %[[C0]][0, 0, 0, 2] [1, 4, 4, 2]
// CHECK: %[[SMALL:.*]] = tensor.extract_slice %[[C1]][0, 0, 0, 0] [1, 4, 4, 4] [1, 1, 1, 1] : tensor<1x4x4x6xf32> to tensor<1x4x4x4xf32>
// CHECK: linalg.generic {{.*}} ins(%[[SMALL]] :
// CHECK: %[[S2:.*]] = tensor.extract_slice %[[C1]][0, 0, 0, 4] [1, 4, 4, 2]
// CHECK: %[[F2:.*]] = linalg.generic {{.*}} outs(%[[S2]] :
// CHECK: %[[C2:.*]] = tensor.insert_slice %[[F2]] into %[[C1]][0, 0, 0, 4] [1, 4, 4, 2]
// CHECK-NOT: tensor.insert_slice
// CHECK: return %[[C2]]
// BUF-LABEL: func.func @dense_block
// BUF: %[[BIG:.*]] = memref.alloc() {{.*}} : memref<1x4x4x6xf32>
// BUF: memref.copy %arg0
// BUF-NOT: memref.copy
// BUF: return %[[BIG]]
#map = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
func.func private @kiln_pool2d_nhwc_f32(i64, i64, i64, i64, i64)
func.func @dense_block(%x: tensor<1x4x4x2xf32>) -> tensor<1x4x4x6xf32> {
  %p = arith.constant dense<[1, 4, 4, 2, 4, 4, 1, 1, 1, 1, 0, 0, 1, 1, 0, 0, 0]> : tensor<17xi64>
  %zero = arith.constant 0 : i64
  %e2 = tensor.empty() : tensor<1x4x4x2xf32>
  %f1 = kiln.call_kernel @kiln_pool2d_nhwc_f32(%p, %x, %zero, %zero) into %e2 {result_position = 2 : i64, row_strides = array<i64: 1, 2, -1, 3>} : (tensor<17xi64>, tensor<1x4x4x2xf32>, i64, i64, tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  %e4 = tensor.empty() : tensor<1x4x4x4xf32>
  %c0 = tensor.insert_slice %x into %e4[0, 0, 0, 0] [1, 4, 4, 2] [1, 1, 1, 1] : tensor<1x4x4x2xf32> into tensor<1x4x4x4xf32>
  %c1 = tensor.insert_slice %f1 into %c0[0, 0, 0, 2] [1, 4, 4, 2] [1, 1, 1, 1] : tensor<1x4x4x2xf32> into tensor<1x4x4x4xf32>
  %e4b = tensor.empty() : tensor<1x4x4x4xf32>
  %g = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%c1 : tensor<1x4x4x4xf32>) outs(%e4b : tensor<1x4x4x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %a, %a : f32
    linalg.yield %r : f32
  } -> tensor<1x4x4x4xf32>
  %s = tensor.extract_slice %g[0, 0, 0, 1] [1, 4, 4, 2] [1, 1, 1, 1] : tensor<1x4x4x4xf32> to tensor<1x4x4x2xf32>
  %f2 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s : tensor<1x4x4x2xf32>) outs(%e2 : tensor<1x4x4x2xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.mulf %a, %a : f32
    linalg.yield %r : f32
  } -> tensor<1x4x4x2xf32>
  %e6 = tensor.empty() : tensor<1x4x4x6xf32>
  %d0 = tensor.insert_slice %x into %e6[0, 0, 0, 0] [1, 4, 4, 2] [1, 1, 1, 1] : tensor<1x4x4x2xf32> into tensor<1x4x4x6xf32>
  %d1 = tensor.insert_slice %f1 into %d0[0, 0, 0, 2] [1, 4, 4, 2] [1, 1, 1, 1] : tensor<1x4x4x2xf32> into tensor<1x4x4x6xf32>
  %d2 = tensor.insert_slice %f2 into %d1[0, 0, 0, 4] [1, 4, 4, 2] [1, 1, 1, 1] : tensor<1x4x4x2xf32> into tensor<1x4x4x6xf32>
  return %d2 : tensor<1x4x4x6xf32>
}

// -----

// Overlapping inserts are not a concatenation (the later one wins): left
// alone.
// CHECK-LABEL: func.func @overlapping
// CHECK: %[[E:.*]] = tensor.empty() : tensor<4xf32>
// CHECK: %[[A:.*]] = tensor.insert_slice %arg0 into %[[E]][0] [3] [1]
// CHECK: tensor.insert_slice %arg1 into %[[A]][1] [3] [1]
func.func @overlapping(%a: tensor<3xf32>, %b: tensor<3xf32>) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4xf32>
  %0 = tensor.insert_slice %a into %e[0] [3] [1] : tensor<3xf32> into tensor<4xf32>
  %1 = tensor.insert_slice %b into %0[1] [3] [1] : tensor<3xf32> into tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// A part whose producer starts from a linalg.fill: the chain's buffer comes
// before the fill, and the fill initialises the part's slice in place.
// CHECK-LABEL: func.func @filled_part
// CHECK: %[[E:.*]] = tensor.empty() : tensor<4x8xf32>
// CHECK: %[[Y:.*]] = tensor.insert_slice %arg1 into %[[E]][0, 4] [4, 4] [1, 1]
// CHECK: %[[S:.*]] = tensor.extract_slice %[[Y]][0, 0] [4, 4] [1, 1]
// CHECK: %[[F:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[S]] : tensor<4x4xf32>)
// CHECK: %[[A:.*]] = linalg.generic {{.*}} outs(%[[F]] :
// CHECK: tensor.insert_slice %[[A]] into %[[Y]][0, 0] [4, 4] [1, 1]
// BUF-LABEL: func.func @filled_part
// BUF: memref.alloc() {{.*}} : memref<4x8xf32>
// BUF-NOT: memref.alloc
// BUF: return
#in = affine_map<(d0, d1, d2) -> (d0, d2)>
#out = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @filled_part(%x: tensor<4x16xf32>, %y: tensor<4x4xf32>) -> tensor<4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %ea = tensor.empty() : tensor<4x4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%ea : tensor<4x4xf32>) -> tensor<4x4xf32>
  %a = linalg.generic {indexing_maps = [#in, #out], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x : tensor<4x16xf32>) outs(%f : tensor<4x4xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %r = arith.addf %v, %acc : f32
    linalg.yield %r : f32
  } -> tensor<4x4xf32>
  %e = tensor.empty() : tensor<4x8xf32>
  %0 = tensor.insert_slice %a into %e[0, 0] [4, 4] [1, 1] : tensor<4x4xf32> into tensor<4x8xf32>
  %1 = tensor.insert_slice %y into %0[0, 4] [4, 4] [1, 1] : tensor<4x4xf32> into tensor<4x8xf32>
  return %1 : tensor<4x8xf32>
}

// -----

// A concatenation of a concatenation that a larger family absorbed: the
// outer chain refers to the value that replaced the inner one (which is a
// slice of the large chain), not to its erased ops.
// CHECK-LABEL: func.func @concat_of_member
// CHECK: %[[C1:.*]] = tensor.insert_slice %arg1 into %{{.*}}[2] [2] [1] : tensor<2xf32> into tensor<8xf32>
// CHECK: %[[M:.*]] = tensor.extract_slice %[[C1]][0] [4] [1] : tensor<8xf32> to tensor<4xf32>
// CHECK: %[[OUTER:.*]] = tensor.insert_slice %[[M]] into %{{.*}}[0] [4] [1] : tensor<4xf32> into tensor<6xf32>
// CHECK: return %{{.*}}, %[[OUTER]]
func.func @concat_of_member(%a: tensor<2xf32>, %b: tensor<2xf32>, %c: tensor<2xf32>, %d: tensor<2xf32>, %e: tensor<2xf32>) -> (tensor<8xf32>, tensor<6xf32>) {
  %eh = tensor.empty() : tensor<8xf32>
  %h0 = tensor.insert_slice %a into %eh[0] [2] [1] : tensor<2xf32> into tensor<8xf32>
  %h1 = tensor.insert_slice %b into %h0[2] [2] [1] : tensor<2xf32> into tensor<8xf32>
  %h2 = tensor.insert_slice %c into %h1[4] [2] [1] : tensor<2xf32> into tensor<8xf32>
  %h3 = tensor.insert_slice %d into %h2[6] [2] [1] : tensor<2xf32> into tensor<8xf32>
  %em = tensor.empty() : tensor<4xf32>
  %m0 = tensor.insert_slice %a into %em[0] [2] [1] : tensor<2xf32> into tensor<4xf32>
  %m1 = tensor.insert_slice %b into %m0[2] [2] [1] : tensor<2xf32> into tensor<4xf32>
  %ec = tensor.empty() : tensor<6xf32>
  %c0 = tensor.insert_slice %m1 into %ec[0] [4] [1] : tensor<4xf32> into tensor<6xf32>
  %c1 = tensor.insert_slice %e into %c0[4] [2] [1] : tensor<2xf32> into tensor<6xf32>
  return %h3, %c1 : tensor<8xf32>, tensor<6xf32>
}

// -----

// A run-time batch (a CNN compiled once for every batch): the parts' sizes
// are tensor.dim of the parts, read just before their inserts, which are
// the sizes their destinations were created with (the batch read at entry);
// each part is written into its slice of one buffer, as with static shapes.
// A concatenation along a run-time axis (the second part's offset is a
// run-time value) is left as it was: nothing shows its parts apart.
// CHECK-LABEL: func.func @run_time_batch
// CHECK: %[[N:.*]] = tensor.dim %arg0, %c0
// CHECK: %[[E:.*]] = tensor.empty(%[[N]]) : tensor<?x4x4x8xf32>
// CHECK: %[[S0:.*]] = tensor.extract_slice %[[E]][0, 0, 0, 0] [%[[N]], 4, 4, 3]
// CHECK: %[[A:.*]] = linalg.generic {{.*}} outs(%[[S0]] :
// CHECK: %[[C0:.*]] = tensor.insert_slice %[[A]] into %[[E]][0, 0, 0, 0] [%[[N]], 4, 4, 3]
// CHECK: %[[S1:.*]] = tensor.extract_slice %[[C0]][0, 0, 0, 3] [%[[N]], 4, 4, 5]
// CHECK: %[[B:.*]] = linalg.generic {{.*}} outs(%[[S1]] :
// CHECK: %[[C1:.*]] = tensor.insert_slice %[[B]] into %[[C0]][0, 0, 0, 3] [%[[N]], 4, 4, 5]
// CHECK: return %[[C1]]
// BUF-LABEL: func.func @run_time_batch
// BUF: memref.alloc(%{{.*}}) {{.*}} : memref<?x4x4x8xf32>
// BUF-NOT: memref.alloc
// BUF-NOT: memref.copy
// BUF: return
// CHECK-LABEL: func.func @run_time_axis
// CHECK: linalg.generic
// CHECK: tensor.empty(%{{.*}}) : tensor<?x4xf32>
// CHECK: tensor.insert_slice %arg0 into
// CHECK: tensor.insert_slice %{{.*}} into %{{.*}}[%{{.*}}, 0] [2, 4]
#map = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
func.func @run_time_batch(%x: tensor<?x4x4x3xf32>, %y: tensor<?x4x4x5xf32>) -> tensor<?x4x4x8xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?x4x4x3xf32>
  %ea = tensor.empty(%n) : tensor<?x4x4x3xf32>
  %a = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%x : tensor<?x4x4x3xf32>) outs(%ea : tensor<?x4x4x3xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.mulf %in, %in : f32
    linalg.yield %r : f32
  } -> tensor<?x4x4x3xf32>
  %eb = tensor.empty(%n) : tensor<?x4x4x5xf32>
  %b = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%y : tensor<?x4x4x5xf32>) outs(%eb : tensor<?x4x4x5xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.addf %in, %in : f32
    linalg.yield %r : f32
  } -> tensor<?x4x4x5xf32>
  %na = tensor.dim %a, %c0 : tensor<?x4x4x3xf32>
  %e = tensor.empty(%n) : tensor<?x4x4x8xf32>
  %0 = tensor.insert_slice %a into %e[0, 0, 0, 0] [%na, 4, 4, 3] [1, 1, 1, 1] : tensor<?x4x4x3xf32> into tensor<?x4x4x8xf32>
  %nb = tensor.dim %b, %c0 : tensor<?x4x4x5xf32>
  %1 = tensor.insert_slice %b into %0[0, 0, 0, 3] [%nb, 4, 4, 5] [1, 1, 1, 1] : tensor<?x4x4x5xf32> into tensor<?x4x4x8xf32>
  return %1 : tensor<?x4x4x8xf32>
}

func.func @run_time_axis(%past: tensor<?x4xf32>, %y: tensor<2x4xf32>) -> tensor<?x4xf32> {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %p = tensor.dim %past, %c0 : tensor<?x4xf32>
  %eb = tensor.empty() : tensor<2x4xf32>
  %b = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%y : tensor<2x4xf32>) outs(%eb : tensor<2x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.addf %in, %in : f32
    linalg.yield %r : f32
  } -> tensor<2x4xf32>
  %t = arith.addi %p, %c2 : index
  %e = tensor.empty(%t) : tensor<?x4xf32>
  %0 = tensor.insert_slice %past into %e[0, 0] [%p, 4] [1, 1] : tensor<?x4xf32> into tensor<?x4xf32>
  %1 = tensor.insert_slice %b into %0[%p, 0] [2, 4] [1, 1] : tensor<2x4xf32> into tensor<?x4xf32>
  return %1 : tensor<?x4xf32>
}

// -----

// DenseNet's pattern under a run-time batch: the two concatenations share
// the batch (the same value, read at entry), so the small one becomes the
// leading slice of the large one, as with static shapes; bufferized, one
// buffer, and only the graph input is copied.
// CHECK-LABEL: func.func @dense_block_run_time_batch
// CHECK: %[[N:.*]] = tensor.dim %arg0, %c0
// CHECK: %[[C0:.*]] = tensor.insert_slice %arg0 into %{{.*}}[0, 0, 0, 0] [%[[N]], 4, 4, 2]
// CHECK: %[[C1:.*]] = tensor.insert_slice %{{.*}} into %[[C0]][0, 0, 0, 2] [%[[N]], 4, 4, 2]
// CHECK: %[[SMALL:.*]] = tensor.extract_slice %[[C1]][0, 0, 0, 0] [%[[N]], 4, 4, 4] [1, 1, 1, 1] : tensor<?x4x4x6xf32> to tensor<?x4x4x4xf32>
// CHECK: linalg.generic {{.*}} ins(%[[SMALL]] :
// CHECK: %[[C2:.*]] = tensor.insert_slice %{{.*}} into %[[C1]][0, 0, 0, 4] [%[[N]], 4, 4, 2]
// CHECK-NOT: tensor.insert_slice
// CHECK: return %[[C2]]
// BUF-LABEL: func.func @dense_block_run_time_batch
// BUF: %[[BIG:.*]] = memref.alloc(%{{.*}}) {{.*}} : memref<?x4x4x6xf32>
// BUF: memref.copy %arg0
// BUF-NOT: memref.copy
// BUF: return %[[BIG]]
#map = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
func.func @dense_block_run_time_batch(%x: tensor<?x4x4x2xf32>) -> tensor<?x4x4x6xf32> {
  %i0 = arith.constant 0 : index
  %n = tensor.dim %x, %i0 : tensor<?x4x4x2xf32>
  %e2 = tensor.empty(%n) : tensor<?x4x4x2xf32>
  %f1 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%x : tensor<?x4x4x2xf32>) outs(%e2 : tensor<?x4x4x2xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.subf %a, %a : f32
    linalg.yield %r : f32
  } -> tensor<?x4x4x2xf32>
  %e4 = tensor.empty(%n) : tensor<?x4x4x4xf32>
  %c0 = tensor.insert_slice %x into %e4[0, 0, 0, 0] [%n, 4, 4, 2] [1, 1, 1, 1] : tensor<?x4x4x2xf32> into tensor<?x4x4x4xf32>
  %c1 = tensor.insert_slice %f1 into %c0[0, 0, 0, 2] [%n, 4, 4, 2] [1, 1, 1, 1] : tensor<?x4x4x2xf32> into tensor<?x4x4x4xf32>
  %e4b = tensor.empty(%n) : tensor<?x4x4x4xf32>
  %g = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%c1 : tensor<?x4x4x4xf32>) outs(%e4b : tensor<?x4x4x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %a, %a : f32
    linalg.yield %r : f32
  } -> tensor<?x4x4x4xf32>
  %s = tensor.extract_slice %g[0, 0, 0, 1] [%n, 4, 4, 2] [1, 1, 1, 1] : tensor<?x4x4x4xf32> to tensor<?x4x4x2xf32>
  %e2b = tensor.empty(%n) : tensor<?x4x4x2xf32>
  %f2 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s : tensor<?x4x4x2xf32>) outs(%e2b : tensor<?x4x4x2xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.mulf %a, %a : f32
    linalg.yield %r : f32
  } -> tensor<?x4x4x2xf32>
  %e6 = tensor.empty(%n) : tensor<?x4x4x6xf32>
  %d0 = tensor.insert_slice %x into %e6[0, 0, 0, 0] [%n, 4, 4, 2] [1, 1, 1, 1] : tensor<?x4x4x2xf32> into tensor<?x4x4x6xf32>
  %d1 = tensor.insert_slice %f1 into %d0[0, 0, 0, 2] [%n, 4, 4, 2] [1, 1, 1, 1] : tensor<?x4x4x2xf32> into tensor<?x4x4x6xf32>
  %d2 = tensor.insert_slice %f2 into %d1[0, 0, 0, 4] [%n, 4, 4, 2] [1, 1, 1, 1] : tensor<?x4x4x2xf32> into tensor<?x4x4x6xf32>
  return %d2 : tensor<?x4x4x6xf32>
}

// -----

// A chain whose first part is a function argument starts after the run-time
// sizes it needs; here one (%n2) is computed after the member's last insert,
// where the member's value would be cut from the chain: the chains are left
// as they were (they made invalid IR: a use before its definition).
// CHECK-LABEL: func.func @size_after_member
// CHECK: %[[E4:.*]] = tensor.empty(%{{.*}}) : tensor<?x4x4x4xf32>
// CHECK: tensor.insert_slice %arg0 into %[[E4]]
// CHECK: %[[E6:.*]] = tensor.empty(%{{.*}}) : tensor<?x4x4x6xf32>
// CHECK: tensor.insert_slice %arg0 into %[[E6]]
#map = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
func.func @size_after_member(%x: tensor<?x4x4x2xf32>) -> tensor<?x4x4x6xf32> {
  %i0 = arith.constant 0 : index
  %n = tensor.dim %x, %i0 : tensor<?x4x4x2xf32>
  %e2 = tensor.empty(%n) : tensor<?x4x4x2xf32>
  %f1 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%x : tensor<?x4x4x2xf32>) outs(%e2 : tensor<?x4x4x2xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.subf %a, %a : f32
    linalg.yield %r : f32
  } -> tensor<?x4x4x2xf32>
  %e4 = tensor.empty(%n) : tensor<?x4x4x4xf32>
  %c0 = tensor.insert_slice %x into %e4[0, 0, 0, 0] [%n, 4, 4, 2] [1, 1, 1, 1] : tensor<?x4x4x2xf32> into tensor<?x4x4x4xf32>
  %c1 = tensor.insert_slice %f1 into %c0[0, 0, 0, 2] [%n, 4, 4, 2] [1, 1, 1, 1] : tensor<?x4x4x2xf32> into tensor<?x4x4x4xf32>
  %e4b = tensor.empty(%n) : tensor<?x4x4x4xf32>
  %g = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%c1 : tensor<?x4x4x4xf32>) outs(%e4b : tensor<?x4x4x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %a, %a : f32
    linalg.yield %r : f32
  } -> tensor<?x4x4x4xf32>
  %s = tensor.extract_slice %g[0, 0, 0, 1] [%n, 4, 4, 2] [1, 1, 1, 1] : tensor<?x4x4x4xf32> to tensor<?x4x4x2xf32>
  %n2 = arith.addi %n, %i0 : index
  %e2b = tensor.empty(%n2) : tensor<?x4x4x2xf32>
  %f2 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s : tensor<?x4x4x2xf32>) outs(%e2b : tensor<?x4x4x2xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.mulf %a, %a : f32
    linalg.yield %r : f32
  } -> tensor<?x4x4x2xf32>
  %e6 = tensor.empty(%n) : tensor<?x4x4x6xf32>
  %d0 = tensor.insert_slice %x into %e6[0, 0, 0, 0] [%n, 4, 4, 2] [1, 1, 1, 1] : tensor<?x4x4x2xf32> into tensor<?x4x4x6xf32>
  %d1 = tensor.insert_slice %f1 into %d0[0, 0, 0, 2] [%n, 4, 4, 2] [1, 1, 1, 1] : tensor<?x4x4x2xf32> into tensor<?x4x4x6xf32>
  %d2 = tensor.insert_slice %f2 into %d1[0, 0, 0, 4] [%n2, 4, 4, 2] [1, 1, 1, 1] : tensor<?x4x4x2xf32> into tensor<?x4x4x6xf32>
  return %d2 : tensor<?x4x4x6xf32>
}
