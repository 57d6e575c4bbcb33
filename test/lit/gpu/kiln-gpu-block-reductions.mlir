// RUN: kiln-opt %s --kiln-gpu-block-reductions --canonicalize --cse --split-input-file | FileCheck %s
// RUN: kiln-opt %s --kiln-gpu-block-reductions=emulate=1 --canonicalize --cse --split-input-file | FileCheck %s --check-prefix=EMU

// A layer norm's variance, 128 rows of 256: one block of 256 threads per
// row. Thread t folds (x - mean)^2 over elements t, t + 256, ... from 0 (the
// body cloned, the mean read at the row), stores its partial in workgroup
// memory; 8 halving steps (128, 64, ..., 1), a barrier after each; thread
// 0 adds the total to the fill's value (the fill is taken over: no fill
// kernel, no load of the output).
#x = affine_map<(r, k) -> (r, k)>
#row = affine_map<(r, k) -> (r)>
// CHECK-LABEL: func.func @variance
// CHECK-NOT: linalg.fill
// CHECK: gpu.launch blocks(%[[ROW:.*]], %{{.*}}, %{{.*}}) in ({{.*}} = %c128, {{.*}} = %c1, {{.*}} = %c1) threads(%[[T:.*]], %{{.*}}, %{{.*}}) in ({{.*}} = %c256, {{.*}} = %c1, {{.*}} = %c1)
// CHECK-SAME: workgroup(%[[P:.*]] : memref<256xf32, #gpu.address_space<workgroup>>)
// CHECK: %[[PART:.*]] = scf.for %[[K:.*]] = %[[T]] to %c256 step %c256 iter_args(%[[ACC:.*]] = %cst) -> (f32) {
// CHECK: %[[V:.*]] = memref.load %arg0[%[[ROW]], %[[K]]]
// CHECK: %[[M:.*]] = memref.load %arg1[%[[ROW]]]
// CHECK: %[[D:.*]] = arith.subf %[[V]], %[[M]]
// CHECK: %[[SQ:.*]] = arith.mulf %[[D]], %[[D]]
// CHECK: arith.addf %[[ACC]], %[[SQ]]
// CHECK: memref.store %[[PART]], %[[P]][%[[T]]]
// CHECK-NEXT: gpu.barrier
// CHECK: arith.cmpi ult, %[[T]], %c128
// CHECK: scf.if
// CHECK: arith.addi %[[T]], %c128
// CHECK: gpu.barrier
// CHECK-COUNT-7: gpu.barrier
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %[[T]], %c0
// CHECK: scf.if %[[FIRST]] {
// CHECK: %[[TOTAL:.*]] = memref.load %[[P]][%c0]
// CHECK: %[[OUT:.*]] = arith.addf %[[TOTAL]], %cst
// CHECK: memref.store %[[OUT]], %arg2[%[[ROW]]]
// CHECK: gpu.terminator
func.func @variance(%x: memref<128x256xf32>, %mean: memref<128xf32>, %out: memref<128xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%out : memref<128xf32>)
  linalg.generic {indexing_maps = [#x, #row, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x, %mean : memref<128x256xf32>, memref<128xf32>) outs(%out : memref<128xf32>) {
  ^bb0(%v: f32, %m: f32, %acc: f32):
    %d = arith.subf %v, %m : f32
    %sq = arith.mulf %d, %d : f32
    %s = arith.addf %sq, %acc : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A softmax's row maximum over 100: 128 threads (the least power of two
// >= 100, from 32 to 256), folding from -inf; the output has no fill right
// before the op, so thread 0 combines with the output's value.
#x = affine_map<(r, k) -> (r, k)>
#row = affine_map<(r, k) -> (r)>
// CHECK-LABEL: func.func @row_max
// CHECK-DAG: %[[NEG_INF:.*]] = arith.constant 0xFF800000 : f32
// CHECK: gpu.launch {{.*}} in ({{.*}} = %c4, {{.*}} threads({{.*}}) in ({{.*}} = %c128, 
// CHECK-SAME: workgroup(%{{.*}} : memref<128xf32, #gpu.address_space<workgroup>>)
// CHECK: scf.for {{.*}} step %c128 iter_args(%{{.*}} = %[[NEG_INF]])
// CHECK: arith.maximumf
// CHECK-COUNT-7: gpu.barrier
// CHECK: %[[OLD:.*]] = memref.load %arg1
// CHECK: arith.maximumf %[[OLD]]
func.func @row_max(%x: memref<4x100xf32>, %out: memref<4xf32>) {
  linalg.generic {indexing_maps = [#x, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4x100xf32>) outs(%out : memref<4xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %m = arith.maximumf %acc, %v : f32
    linalg.yield %m : f32
  }
  return
}

// -----

// Left alone: a row of 32 (< min-row 64); a product whose weights run along
// the row in their outer dim (W[k][n]: the block's loads would be strided);
// 2^15 outputs (> max-outputs); a body that reads linalg.index; a body that
// uses the output twice; a 1x1 convolution (its row runs along the input's
// channels, 196 floats apart: kh and kw have one element and do not count);
// a reduction whose input is its output's memory.
#x = affine_map<(r, k) -> (r, k)>
#row = affine_map<(r, k) -> (r)>
#v = affine_map<(n, k) -> (k)>
#w = affine_map<(n, k) -> (k, n)>
#o = affine_map<(n, k) -> (n)>
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT: gpu.launch
// CHECK-COUNT-7: linalg.generic
func.func @left_alone(%short: memref<64x32xf32>, %s_out: memref<64xf32>,
                      %vec: memref<512xf32>, %wt: memref<512x1000xf32>, %fc: memref<1000xf32>,
                      %many: memref<32768x64xf32>, %m_out: memref<32768xf32>,
                      %rows: memref<16x256xf32>, %i_out: memref<16xf32>, %t_out: memref<16xf32>,
                      %img: memref<1x96x14x14xf32>, %pw: memref<24x96x1x1xf32>,
                      %pw_out: memref<1x24x14x14xf32>, %same: memref<16x256xf32>) {
  linalg.generic {indexing_maps = [#x, #row], iterator_types = ["parallel", "reduction"]}
      ins(%short : memref<64x32xf32>) outs(%s_out : memref<64xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#v, #w, #o], iterator_types = ["parallel", "reduction"]}
      ins(%vec, %wt : memref<512xf32>, memref<512x1000xf32>) outs(%fc : memref<1000xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %p, %acc : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#x, #row], iterator_types = ["parallel", "reduction"]}
      ins(%many : memref<32768x64xf32>) outs(%m_out : memref<32768xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#x, #row], iterator_types = ["parallel", "reduction"]}
      ins(%rows : memref<16x256xf32>) outs(%i_out : memref<16xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %k = linalg.index 1 : index
    %ki = arith.index_cast %k : index to i32
    %kf = arith.sitofp %ki : i32 to f32
    %p = arith.mulf %a, %kf : f32
    %s = arith.addf %p, %acc : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#x, #row], iterator_types = ["parallel", "reduction"]}
      ins(%rows : memref<16x256xf32>) outs(%t_out : memref<16xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %p = arith.mulf %a, %acc : f32
    %s = arith.addf %p, %acc : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(n, f, oh, ow, c, kh, kw) -> (n, c, oh + kh, ow + kw)>,
                                   affine_map<(n, f, oh, ow, c, kh, kw) -> (f, c, kh, kw)>,
                                   affine_map<(n, f, oh, ow, c, kh, kw) -> (n, f, oh, ow)>],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
      ins(%img, %pw : memref<1x96x14x14xf32>, memref<24x96x1x1xf32>) outs(%pw_out : memref<1x24x14x14xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %p, %acc : f32
    linalg.yield %s : f32
  }
  %first = memref.subview %same[0, 0] [16, 1] [1, 1] : memref<16x256xf32> to memref<16xf32, strided<[256]>>
  linalg.generic {indexing_maps = [#x, #row], iterator_types = ["parallel", "reduction"]}
      ins(%same : memref<16x256xf32>) outs(%first : memref<16xf32, strided<[256]>>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A reduction to one value: one block (no output dims), 256 threads over
// the 4 x 300 elements flattened.
// CHECK-LABEL: func.func @total
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c1, {{.*}} = %c1, {{.*}} = %c1) threads({{.*}}) in ({{.*}} = %c256,
// CHECK: scf.for {{.*}} to %c1200 step %c256
// CHECK: memref.store {{.*}}, %arg1[] : memref<f32>
func.func @total(%x: memref<4x300xf32>, %out: memref<f32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> ()>],
                  iterator_types = ["reduction", "reduction"]}
      ins(%x : memref<4x300xf32>) outs(%out : memref<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Emulated on the CPU: rows of 70 (128 threads), then the threads' folds,
// then each halving step as a loop over the active threads, then the
// output.
#x = affine_map<(r, k) -> (r, k)>
#row = affine_map<(r, k) -> (r)>
// EMU-LABEL: func.func @row_sum
// EMU: %[[P:.*]] = memref.alloc() : memref<128xf32>
// EMU: scf.for %[[ROW:.*]] = %c0 to %c8 step %c1 {
// EMU: scf.for %[[T:.*]] = %c0 to %c128 step %c1 {
// EMU: %[[PART:.*]] = scf.for %[[K:.*]] = %[[T]] to %c70 step %c128 iter_args
// EMU: memref.load %arg0[%[[ROW]], %[[K]]]
// EMU: memref.store %[[PART]], %[[P]][%[[T]]]
// EMU: scf.for %[[T64:.*]] = %c0 to %c64 step %c1 {
// EMU: arith.addi %[[T64]], %c64
// EMU: scf.for {{.*}} = %c0 to %c32 step %c1 {
// EMU: scf.for {{.*}} = %c0 to %c16 step %c1 {
// EMU: scf.for {{.*}} = %c0 to %c8 step %c1 {
// EMU: scf.for {{.*}} = %c0 to %c4 step %c1 {
// EMU: scf.for {{.*}} = %c0 to %c2 step %c1 {
// EMU: memref.load %[[P]][%c0]
// EMU: memref.load %[[P]][%c1]
// EMU: memref.load %arg1[%[[ROW]]]
// EMU: memref.store {{.*}}, %arg1[%[[ROW]]]
// EMU: memref.dealloc %[[P]]
func.func @row_sum(%x: memref<8x70xf32>, %out: memref<8xf32>) {
  linalg.generic {indexing_maps = [#x, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<8x70xf32>) outs(%out : memref<8xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %v, %acc : f32
    linalg.yield %s : f32
  }
  return
}
