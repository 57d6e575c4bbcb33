// RUN: kiln-opt %s --kiln-outline-loop-nests --split-input-file | FileCheck %s

// Two planned buffers (distinct views of the workspace) are noalias in the
// outlined function; a subview of the same buffer as another operand is not.
// CHECK-LABEL: func.func private @main_op0(%arg0: memref<8xf32> {llvm.noalias}, %arg1: memref<8xf32> {llvm.noalias})
// CHECK: linalg.generic
// CHECK: arith.addf
// CHECK: func.func private @main_op1(%arg0: memref<2x8xf32>, %arg1: memref<8x2xf32>)
// CHECK: linalg.transpose
// CHECK-LABEL: func.func @main
// CHECK: call @main_op0(%[[A:.*]], %[[B:.*]]) : (memref<8xf32>, memref<8xf32>) -> ()
// CHECK: call @main_op1
#map = affine_map<(d0) -> (d0)>
func.func @main(%ws: memref<256xi8>, %out: memref<16xf32>) {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %one = arith.constant 1.0 : f32
  %a = memref.view %ws[%c0][] : memref<256xi8> to memref<8xf32>
  %b = memref.view %ws[%c64][] : memref<256xi8> to memref<8xf32>
  linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%a : memref<8xf32>) outs(%b : memref<8xf32>) {
  ^bb0(%x: f32, %y: f32):
    %s = arith.addf %x, %one : f32
    linalg.yield %s : f32
  }
  %e = memref.expand_shape %out [[0, 1]] output_shape [2, 8] : memref<16xf32> into memref<2x8xf32>
  %t = memref.expand_shape %out [[0, 1]] output_shape [8, 2] : memref<16xf32> into memref<8x2xf32>
  linalg.transpose ins(%e : memref<2x8xf32>) outs(%t : memref<8x2xf32>) permutation = [1, 0]
  return
}

// -----

// An operand whose buffer is not known (a select between two buffers) could
// be either: no argument of that op is noalias.
// CHECK-LABEL: func.func private @select_op0(%arg0: memref<8xf32>, %arg1: memref<8xf32>)
func.func @select(%c: i1, %a: memref<8xf32>, %b: memref<8xf32>) {
  %s = arith.select %c, %a, %b : memref<8xf32>
  linalg.copy ins(%s : memref<8xf32>) outs(%a : memref<8xf32>)
  return
}

// -----

// A strided view (a slice of a concatenation) cannot cross the bare-pointer
// calling convention: the function gets the whole buffer and remakes the
// view inside. The two operands come from different buffers: noalias.
// CHECK-LABEL: func.func private @strided_op0(%arg0: memref<2x8xf32> {llvm.noalias}, %arg1: memref<2x3xf32> {llvm.noalias})
// CHECK: %[[V:.*]] = memref.subview %arg0[0, 5] [2, 3] [1, 1] : memref<2x8xf32> to memref<2x3xf32, strided<[8, 1], offset: 5>>
// CHECK: linalg.copy ins(%[[V]] : memref<2x3xf32, strided<[8, 1], offset: 5>>) outs(%arg1 : memref<2x3xf32>)
// CHECK-LABEL: func.func @strided
// CHECK: call @strided_op0(%arg0, %arg1) : (memref<2x8xf32>, memref<2x3xf32>) -> ()
func.func @strided(%a: memref<2x8xf32>, %b: memref<2x3xf32>) {
  %v = memref.subview %a[0, 5] [2, 3] [1, 1] : memref<2x8xf32> to memref<2x3xf32, strided<[8, 1], offset: 5>>
  linalg.copy ins(%v : memref<2x3xf32, strided<[8, 1], offset: 5>>) outs(%b : memref<2x3xf32>)
  return
}

// -----

// An op big enough to split (2^16 iterations or more) whose outermost
// non-unit loop is parallel: the function takes an i64 [begin, end) range
// of that loop and slices the operands the loop indexes (the broadcast bias
// is not); the call covers the whole range and is marked for
// kiln-parallelize-calls with [trip count, grain].
// CHECK-LABEL: func.func private @split_op0(%arg0: memref<1x256x512xf32> {llvm.noalias}, %arg1: memref<512xf32> {llvm.noalias}, %arg2: memref<1x256x512xf32> {llvm.noalias}, %arg3: i64, %arg4: i64)
// CHECK: %[[B:.*]] = arith.index_cast %arg3 : i64 to index
// CHECK: %[[E:.*]] = arith.index_cast %arg4 : i64 to index
// CHECK: %[[N:.*]] = arith.subi %[[E]], %[[B]] : index
// CHECK: %[[IN:.*]] = memref.subview %arg0[0, %[[B]], 0] [1, %[[N]], 512] [1, 1, 1]
// CHECK: %[[OUT:.*]] = memref.subview %arg2[0, %[[B]], 0] [1, %[[N]], 512] [1, 1, 1]
// CHECK: linalg.generic {{.*}} ins(%[[IN]], %arg1 : {{.*}}) outs(%[[OUT]] :
// CHECK-LABEL: func.func @split
// CHECK: %[[C0:.*]] = arith.constant 0 : i64
// CHECK: %[[C256:.*]] = arith.constant 256 : i64
// CHECK: call @split_op0(%arg0, %arg1, %arg2, %[[C0]], %[[C256]]) {kiln.parallel = array<i64: 256, 32>}
#map = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#bias = affine_map<(d0, d1, d2) -> (d2)>
func.func @split(%x: memref<1x256x512xf32>, %b: memref<512xf32>, %y: memref<1x256x512xf32>) {
  linalg.generic {indexing_maps = [#map, #bias, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%x, %b : memref<1x256x512xf32>, memref<512xf32>) outs(%y : memref<1x256x512xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %c : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A reduction as the outermost non-unit loop, and an op too small to be
// worth a thread: both stay whole.
// CHECK-LABEL: func.func private @no_split_op0(%arg0: memref<65536x2xf32> {llvm.noalias}, %arg1: memref<2xf32> {llvm.noalias})
// CHECK-LABEL: func.func private @no_split_op1(%arg0: memref<64x64xf32> {llvm.noalias}, %arg1: memref<64x64xf32> {llvm.noalias})
// CHECK-LABEL: func.func @no_split
// CHECK-NOT: kiln.parallel
// CHECK: return
#in = affine_map<(d0, d1) -> (d0, d1)>
#out = affine_map<(d0, d1) -> (d1)>
func.func @no_split(%x: memref<65536x2xf32>, %s: memref<2xf32>, %a: memref<64x64xf32>, %b: memref<64x64xf32>) {
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["reduction", "parallel"]} ins(%x : memref<65536x2xf32>) outs(%s : memref<2xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %r = arith.addf %v, %acc : f32
    linalg.yield %r : f32
  }
  linalg.copy ins(%a : memref<64x64xf32>) outs(%b : memref<64x64xf32>)
  return
}

// -----

// Inside a thread's chunk, the loops of an elementwise op that every operand
// keeps contiguous fold into one (LLVM unrolled a loop of 16 and vectorised
// the one around it with gathers); the split loop stays on its own and a
// rank-0 operand needs no reshape.
// CHECK-LABEL: func.func private @hardswish_op0(
// CHECK: %[[IN:.*]] = memref.subview %arg0[0, %{{.*}}, 0, 0] [1, %{{.*}}, 112, 16]
// CHECK: %[[OUT:.*]] = memref.subview %arg2[0, %{{.*}}, 0, 0] [1, %{{.*}}, 112, 16]
// CHECK: %[[CIN:.*]] = memref.collapse_shape %[[IN]] {{\[\[}}0], [1], [2, 3]] : {{.*}} into memref<1x?x1792xf32, strided<[200704, 1792, 1], offset: ?>>
// CHECK: %[[COUT:.*]] = memref.collapse_shape %[[OUT]] {{\[\[}}0], [1], [2, 3]]
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel"]} ins(%[[CIN]], %arg1 : {{.*}}, memref<f32>) outs(%[[COUT]] :
// CHECK-LABEL: func.func @hardswish
// CHECK: call @hardswish_op0({{.*}}) {kiln.parallel = array<i64: 112, 9>}
#id4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#scalar4 = affine_map<(d0, d1, d2, d3) -> ()>
func.func @hardswish(%a: memref<1x112x112x16xf32>, %k: memref<f32>, %b: memref<1x112x112x16xf32>) {
  linalg.generic {indexing_maps = [#id4, #scalar4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%a, %k : memref<1x112x112x16xf32>, memref<f32>) outs(%b : memref<1x112x112x16xf32>) {
  ^bb0(%x: f32, %s: f32, %y: f32):
    %m = arith.mulf %x, %s : f32
    linalg.yield %m : f32
  }
  return
}

// -----

// A per-channel operand indexes only the innermost loop, so no loops fold;
// neither do loops that a strided slice (a part of a concatenation) does
// not keep contiguous. Both keep a narrow innermost loop (8 to 256) and
// become loops here, that one marked not to unroll: unrolled, it made LLVM
// vectorise the loop around it with gathers. A small op that is not split
// folds all its loops and stays a linalg op.
// CHECK: #[[UNROLL:.*]] = #llvm.loop_unroll<disable = true>
// CHECK: #[[NOUNROLL:.*]] = #llvm.loop_annotation<unroll = #[[UNROLL]]>
// CHECK-LABEL: func.func private @nofold_op0(
// CHECK-NOT: memref.collapse_shape
// CHECK: scf.for
// CHECK: scf.for
// CHECK: scf.for %{{.*}} = %{{.*}} to %c112
// CHECK: scf.for %{{.*}} = %{{.*}} to %c16
// CHECK: memref.load %arg1[
// CHECK: arith.mulf
// CHECK: } {loop_annotation = #[[NOUNROLL]]}
// CHECK-NEXT: }
// CHECK-NOT: linalg.generic
// CHECK-LABEL: func.func private @nofold_op1(
// CHECK-NOT: memref.collapse_shape
// CHECK: scf.for %{{.*}} = %{{.*}} to %c2
// CHECK: scf.for %{{.*}} = %{{.*}} to %c4
// CHECK: scf.for %{{.*}} = %{{.*}} to %c8
// CHECK: } {loop_annotation = #[[NOUNROLL]]}
// CHECK-NEXT: }
// CHECK-LABEL: func.func private @nofold_op2(
// CHECK: memref.collapse_shape %arg0 {{\[\[}}0, 1, 2]] : memref<2x4x8xf32> into memref<64xf32>
// CHECK: memref.collapse_shape %arg1 {{\[\[}}0, 1, 2]] : memref<2x4x8xf32> into memref<64xf32>
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel"]}
// CHECK-LABEL: func.func @nofold
#id4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#bias4 = affine_map<(d0, d1, d2, d3) -> (d3)>
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @nofold(%a: memref<1x112x112x16xf32>, %c: memref<16xf32>, %b: memref<1x112x112x16xf32>,
                  %cat: memref<2x4x16xf32>, %x: memref<2x4x8xf32>, %y: memref<2x4x8xf32>) {
  linalg.generic {indexing_maps = [#id4, #bias4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%a, %c : memref<1x112x112x16xf32>, memref<16xf32>) outs(%b : memref<1x112x112x16xf32>) {
  ^bb0(%v: f32, %s: f32, %w: f32):
    %m = arith.mulf %v, %s : f32
    linalg.yield %m : f32
  }
  %part = memref.subview %cat[0, 0, 8] [2, 4, 8] [1, 1, 1] : memref<2x4x16xf32> to memref<2x4x8xf32, strided<[64, 16, 1], offset: 8>>
  linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%x : memref<2x4x8xf32>) outs(%part : memref<2x4x8xf32, strided<[64, 16, 1], offset: 8>>) {
  ^bb0(%v: f32, %w: f32):
    linalg.yield %v : f32
  }
  linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%x : memref<2x4x8xf32>) outs(%y : memref<2x4x8xf32>) {
  ^bb0(%v: f32, %w: f32):
    %n = arith.negf %v : f32
    linalg.yield %n : f32
  }
  return
}

// -----

// Data movement over run-time sizes is optsize (its compile time is what one
// compile for every shape pays) only where the innermost loop's trip count
// is a run-time value: a run-time batch around static inner loops (a CNN's
// NCHW -> NHWC input transpose) vectorises as static code does, with no
// scalar tail to grow the code.
// CHECK-LABEL: func.func private @run_time_moves_op0(
// CHECK-SAME: attributes {llvm.linkage = #llvm.linkage<internal>, llvm.no_inline} {
// CHECK: linalg.transpose
// CHECK-LABEL: func.func private @run_time_moves_op1(
// CHECK-SAME: llvm.optsize
// CHECK: linalg.transpose
func.func @run_time_moves(%a: memref<?x3x224x224xf32>, %b: memref<?x224x224x3xf32>,
                          %c: memref<4x?xf32>, %d: memref<?x4xf32>) {
  linalg.transpose ins(%a : memref<?x3x224x224xf32>) outs(%b : memref<?x224x224x3xf32>) permutation = [0, 2, 3, 1]
  linalg.transpose ins(%d : memref<?x4xf32>) outs(%c : memref<4x?xf32>) permutation = [1, 0]
  return
}

// -----

// A copy that moves whole rows (the last dim of both operands, contiguous,
// 64 bytes or more) under run-time sizes is optsize although its innermost
// loop is static: one memcpy a row, not rows unrolled by 8 with every
// memcpy expanded inline (a decoder's head split and merge). Rows of 8
// floats, a transposed last dim, anything that computes, and a loop that
// yields something other than its input are not.
// CHECK-LABEL: func.func private @row_copies_op0(
// CHECK-SAME: llvm.optsize
// CHECK: linalg.transpose
// CHECK-LABEL: func.func private @row_copies_op1(
// CHECK-SAME: attributes {llvm.linkage = #llvm.linkage<internal>, llvm.no_inline} {
// CHECK: linalg.transpose
// CHECK-LABEL: func.func private @row_copies_op2(
// CHECK-SAME: attributes {llvm.linkage = #llvm.linkage<internal>, llvm.no_inline} {
// CHECK: linalg.transpose
// CHECK-LABEL: func.func private @row_copies_op3(
// CHECK-SAME: attributes {llvm.linkage = #llvm.linkage<internal>, llvm.no_inline} {
// CHECK: linalg.generic
// CHECK-LABEL: func.func private @row_copies_op4(
// CHECK-SAME: attributes {llvm.linkage = #llvm.linkage<internal>, llvm.no_inline} {
// CHECK: linalg.generic
func.func @row_copies(%a: memref<1x?x4x64xf32>, %b: memref<1x4x?x64xf32>,
                      %c: memref<1x?x4x8xf32>, %d: memref<1x4x?x8xf32>,
                      %e: memref<?x64xf32>, %f: memref<64x?xf32>,
                      %g: memref<?x64xf32>, %h: memref<?x64xf32>) {
  linalg.transpose ins(%a : memref<1x?x4x64xf32>) outs(%b : memref<1x4x?x64xf32>) permutation = [0, 2, 1, 3]
  linalg.transpose ins(%c : memref<1x?x4x8xf32>) outs(%d : memref<1x4x?x8xf32>) permutation = [0, 2, 1, 3]
  linalg.transpose ins(%f : memref<64x?xf32>) outs(%e : memref<?x64xf32>) permutation = [1, 0]
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%g : memref<?x64xf32>) outs(%h : memref<?x64xf32>) {
  ^bb0(%x: f32, %y: f32):
    %n = arith.negf %x : f32
    linalg.yield %n : f32
  }
  // Yields the output's own element, not the input's: no copy.
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%g : memref<?x64xf32>) outs(%h : memref<?x64xf32>) {
  ^bb0(%x: f32, %y: f32):
    linalg.yield %y : f32
  }
  return
}

// -----

// A loop nest under a run-time batch is split across threads on its first
// static loop (H), the batch loop whole in every chunk: the operands are
// sliced along H with the batch's run-time size. Its run-time sizes come
// before the range, which kiln-parallelize-calls takes as the last two
// arguments. A nest whose only static loop after the batch is the
// innermost one (a transformer's hidden size) is not split.
// CHECK-LABEL: func.func private @batch_outer_op0(
// CHECK-SAME: %{{.*}}: index, %{{.*}}: index, %[[BEGIN:.*]]: i64, %[[END:.*]]: i64)
// CHECK: %[[N:.*]] = memref.dim %{{.*}}, %c0
// CHECK: memref.subview %{{.*}}[0, %{{.*}}, 0, 0] [%[[N]], %{{.*}}, 56, 48]
// CHECK-LABEL: func.func private @batch_outer_op1(
// CHECK-NOT: i64
// CHECK-LABEL: func.func @batch_outer
// CHECK: call @batch_outer_op0({{.*}}) {kiln.parallel = array<i64: 56, 6>}
// CHECK: call @batch_outer_op1({{.*}}) : (
// CHECK-NOT: kiln.parallel
#id4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#id2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @batch_outer(%a: memref<?x56x56x48xf32>, %b: memref<?x56x56x48xf32>,
                       %c: memref<?x65536xf32>, %d: memref<?x65536xf32>) {
  linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%a : memref<?x56x56x48xf32>) outs(%b : memref<?x56x56x48xf32>) {
  ^bb0(%x: f32, %y: f32):
    %m = arith.mulf %x, %x : f32
    linalg.yield %m : f32
  }
  linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%c : memref<?x65536xf32>) outs(%d : memref<?x65536xf32>) {
  ^bb0(%x: f32, %y: f32):
    %m = arith.mulf %x, %x : f32
    linalg.yield %m : f32
  }
  return
}
