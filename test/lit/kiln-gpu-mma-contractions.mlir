// RUN: kiln-opt %s --kiln-gpu-mma-contractions --canonicalize --cse --split-input-file | FileCheck %s
// RUN: kiln-opt %s --kiln-gpu-mma-contractions=emulate=1 --canonicalize --cse --split-input-file | FileCheck %s --check-prefix=EMU

// A 64x96 by 96x80 f16 product after a fill of C with zeros: blocks of 4
// warps (128 threads), each warp one 16x16 tile along n (5 tiles: 2
// blocks, the last warps of the second idle), 4 blocks along m. The
// accumulator starts as the fill's value (no fill kernel); per step of 16
// along k, A's fragment is read with leading dim K = 96 and B's with N =
// 80; C is stored once with leading dim 80. A and B are planned buffers
// (views of the workspace at multiples of 64 bytes), C an output.
#a = affine_map<(m, k, n) -> (m, k)>
#b = affine_map<(m, k, n) -> (k, n)>
#c = affine_map<(m, k, n) -> (m, n)>
// CHECK-LABEL: func.func @product
// CHECK-NOT: linalg.fill
// CHECK: gpu.launch blocks(%[[BX:.*]], %[[BY:.*]], %{{.*}}) in ({{.*}} = %c2, {{.*}} = %c4, {{.*}} = %c1) threads(%[[T:.*]], %{{.*}}, %{{.*}}) in ({{.*}} = %c128, {{.*}} = %c1, {{.*}} = %c1)
// CHECK: %[[W:.*]] = arith.divui %[[T]], %c32
// CHECK: %[[BX4:.*]] = arith.muli %[[BX]], %c4
// CHECK: %[[TILE:.*]] = arith.addi %[[BX4]], %[[W]]
// CHECK: %[[IN:.*]] = arith.cmpi ult, %[[TILE]], %c5
// CHECK: scf.if %[[IN]] {
// CHECK: %[[M0:.*]] = arith.muli %[[BY]], %c16
// CHECK: %[[N0:.*]] = arith.muli %[[TILE]], %c16
// CHECK: %[[INIT:.*]] = gpu.subgroup_mma_constant_matrix %{{.*}} : !gpu.mma_matrix<16x16xf16, "COp">
// CHECK: %[[SUM:.*]] = scf.for %[[K:.*]] = %c0 to %c96 step %c16 iter_args(%[[ACC:.*]] = %[[INIT]])
// CHECK: %[[A:.*]] = gpu.subgroup_mma_load_matrix %[[AV:.*]][%[[M0]], %[[K]]] {leadDimension = 96 : index} : memref<64x96xf16> -> !gpu.mma_matrix<16x16xf16, "AOp">
// CHECK: %[[B:.*]] = gpu.subgroup_mma_load_matrix %[[BV:.*]][%[[K]], %[[N0]]] {leadDimension = 80 : index} : memref<96x80xf16> -> !gpu.mma_matrix<16x16xf16, "BOp">
// CHECK: gpu.subgroup_mma_compute %[[A]], %[[B]], %[[ACC]]
// CHECK: gpu.subgroup_mma_store_matrix %[[SUM]], %arg1[%[[M0]], %[[N0]]] {leadDimension = 80 : index}

// The emulation: the same grid and warps as loops, the fill's value as
// each accumulator element's start, a 16x16x16 loop per step.
// EMU-LABEL: func.func @product
// EMU-NOT: linalg.fill
// EMU-NOT: gpu.
// EMU: memref.alloc() : memref<16x16xf16>
// EMU: scf.for %{{.*}} = %c0 to %c4 step %c1
// EMU: scf.for %{{.*}} = %c0 to %c2 step %c1
// EMU: scf.for %{{.*}} = %c0 to %c4 step %c1
// EMU: arith.cmpi ult, %{{.*}}, %c5
// EMU: scf.for %{{.*}} = %c0 to %c96 step %c16
// EMU: arith.mulf
// EMU: arith.addf
func.func @product(%ws: memref<65536xi8>, %c: memref<64x80xf16>) {
  %c0 = arith.constant 0 : index
  %c12288 = arith.constant 12288 : index
  %a = memref.view %ws[%c0][] : memref<65536xi8> to memref<64x96xf16>
  %b = memref.view %ws[%c12288][] : memref<65536xi8> to memref<96x80xf16>
  %zero = arith.constant 0.0 : f16
  linalg.fill ins(%zero : f16) outs(%c : memref<64x80xf16>)
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %b : memref<64x96xf16>, memref<96x80xf16>) outs(%c : memref<64x80xf16>) {
  ^bb0(%x: f16, %y: f16, %o: f16):
    %p = arith.mulf %x, %y : f16
    %s = arith.addf %o, %p : f16
    linalg.yield %s : f16
  }
  return
}

// -----

// Batched, B shared across the batch: the block's z is the batch, A and C
// are indexed by it, B (a weight) is not. No fill before: the accumulator
// is loaded.
// CHECK-LABEL: func.func @shared_weight
// CHECK: gpu.launch blocks(%{{.*}}, %{{.*}}, %[[BZ:.*]]) in ({{.*}} = %c1, {{.*}} = %c2, {{.*}} = %c3)
// CHECK: %[[INIT:.*]] = gpu.subgroup_mma_load_matrix %arg1[%[[BZ]], %{{.*}}, %{{.*}}] {leadDimension = 64 : index} : memref<3x32x64xf16> -> !gpu.mma_matrix<16x16xf16, "COp">
// CHECK: gpu.subgroup_mma_load_matrix %{{.*}}[%[[BZ]], %{{.*}}, %{{.*}}] {leadDimension = 48 : index}
// CHECK: gpu.subgroup_mma_load_matrix %{{.*}}[%{{[^,]*}}, %{{[^,]*}}] {leadDimension = 64 : index} : memref<48x64xf16>
// CHECK: gpu.subgroup_mma_store_matrix %{{.*}}, %arg1[%[[BZ]], %{{.*}}, %{{.*}}] {leadDimension = 64 : index}
memref.global "private" constant @w : memref<48x64xf16> = dense<1.0> {alignment = 64 : i64}
func.func @shared_weight(%ws: memref<65536xi8>, %c: memref<3x32x64xf16>) {
  %c0 = arith.constant 0 : index
  %a = memref.view %ws[%c0][] : memref<65536xi8> to memref<3x32x48xf16>
  %b = memref.get_global @w : memref<48x64xf16>
  linalg.generic {indexing_maps = [affine_map<(z, m, k, n) -> (z, m, k)>, affine_map<(z, m, k, n) -> (k, n)>,
                                   affine_map<(z, m, k, n) -> (z, m, n)>],
                  iterator_types = ["parallel", "parallel", "reduction", "parallel"]}
      ins(%a, %b : memref<3x32x48xf16>, memref<48x64xf16>) outs(%c : memref<3x32x64xf16>) {
  ^bb0(%x: f16, %y: f16, %o: f16):
    %p = arith.mulf %x, %y : f16
    %s = arith.addf %o, %p : f16
    linalg.yield %s : f16
  }
  return
}

// -----

// Left alone: f32 (kiln-gpu-tile-contractions' case), an extent that is
// not a multiple of 16, a transposed B, and A a model input (it may be at
// any address; WMMA needs 32 bytes).
// CHECK-LABEL: func.func @f32
// CHECK: linalg.generic
// CHECK-LABEL: func.func @ragged
// CHECK: linalg.generic
// CHECK-LABEL: func.func @transposed
// CHECK: linalg.generic
// CHECK-LABEL: func.func @input_operand
// CHECK: linalg.generic
// CHECK-NOT: gpu.
func.func @f32(%ws: memref<65536xi8>, %c: memref<32x32xf32>) {
  %c0 = arith.constant 0 : index
  %c4096 = arith.constant 4096 : index
  %a = memref.view %ws[%c0][] : memref<65536xi8> to memref<32x32xf32>
  %b = memref.view %ws[%c4096][] : memref<65536xi8> to memref<32x32xf32>
  linalg.generic {indexing_maps = [affine_map<(m, k, n) -> (m, k)>, affine_map<(m, k, n) -> (k, n)>, affine_map<(m, k, n) -> (m, n)>],
                  iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %b : memref<32x32xf32>, memref<32x32xf32>) outs(%c : memref<32x32xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  }
  return
}
func.func @ragged(%ws: memref<65536xi8>, %c: memref<20x32xf16>) {
  %c0 = arith.constant 0 : index
  %c4096 = arith.constant 4096 : index
  %a = memref.view %ws[%c0][] : memref<65536xi8> to memref<20x32xf16>
  %b = memref.view %ws[%c4096][] : memref<65536xi8> to memref<32x32xf16>
  linalg.generic {indexing_maps = [affine_map<(m, k, n) -> (m, k)>, affine_map<(m, k, n) -> (k, n)>, affine_map<(m, k, n) -> (m, n)>],
                  iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %b : memref<20x32xf16>, memref<32x32xf16>) outs(%c : memref<20x32xf16>) {
  ^bb0(%x: f16, %y: f16, %o: f16):
    %p = arith.mulf %x, %y : f16
    %s = arith.addf %o, %p : f16
    linalg.yield %s : f16
  }
  return
}
func.func @transposed(%ws: memref<65536xi8>, %c: memref<32x32xf16>) {
  %c0 = arith.constant 0 : index
  %c4096 = arith.constant 4096 : index
  %a = memref.view %ws[%c0][] : memref<65536xi8> to memref<32x32xf16>
  %b = memref.view %ws[%c4096][] : memref<65536xi8> to memref<32x32xf16>
  linalg.generic {indexing_maps = [affine_map<(m, k, n) -> (m, k)>, affine_map<(m, k, n) -> (n, k)>, affine_map<(m, k, n) -> (m, n)>],
                  iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %b : memref<32x32xf16>, memref<32x32xf16>) outs(%c : memref<32x32xf16>) {
  ^bb0(%x: f16, %y: f16, %o: f16):
    %p = arith.mulf %x, %y : f16
    %s = arith.addf %o, %p : f16
    linalg.yield %s : f16
  }
  return
}
func.func @input_operand(%a: memref<32x32xf16>, %ws: memref<65536xi8>, %c: memref<32x32xf16>) {
  %c0 = arith.constant 0 : index
  %b = memref.view %ws[%c0][] : memref<65536xi8> to memref<32x32xf16>
  linalg.generic {indexing_maps = [affine_map<(m, k, n) -> (m, k)>, affine_map<(m, k, n) -> (k, n)>, affine_map<(m, k, n) -> (m, n)>],
                  iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %b : memref<32x32xf16>, memref<32x32xf16>) outs(%c : memref<32x32xf16>) {
  ^bb0(%x: f16, %y: f16, %o: f16):
    %p = arith.mulf %x, %y : f16
    %s = arith.addf %o, %p : f16
    linalg.yield %s : f16
  }
  return
}
