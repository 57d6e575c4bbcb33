// RUN: kiln-opt %s --kiln-gpu-mma-contractions --canonicalize --cse --split-input-file | FileCheck %s
// RUN: kiln-opt %s --kiln-gpu-mma-contractions=emulate=1 --canonicalize --cse --split-input-file | FileCheck %s --check-prefix=EMU
// RUN: kiln-opt %s --kiln-gpu-mma-contractions=bf16=0 --split-input-file | FileCheck %s --check-prefix=NOBF16

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

// -----

// A 32x64 by 64x48 bf16 product after a fill of C with 0.5: mma.sync
// m16n8k16 (WMMA has no bf16), f32 accumulators. Per lane: 8 accumulators
// starting as the fill's value (widened; no fill kernel), per 16-step 4 A
// registers (pairs along a row, one 4-byte load each) and per 16x8 half 2
// B registers (pairs down a column), one mma.sync per half; the sums
// rounded to bf16 and stored as pairs. Grid: 3 tiles of 16 along n (one
// block, its last warp idle), 2 along m.
#a = affine_map<(m, k, n) -> (m, k)>
#b = affine_map<(m, k, n) -> (k, n)>
#c = affine_map<(m, k, n) -> (m, n)>
// CHECK-LABEL: func.func @bf16_product
// CHECK-NOT: linalg.fill
// CHECK: %[[HALF:.*]] = arith.constant 5.000000e-01 : f32
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c1, {{.*}} = %c2, {{.*}} = %c1) threads({{.*}}) in ({{.*}} = %c128,
// CHECK: arith.cmpi ult, %{{.*}}, %c3
// Half 0 takes accumulators 0-3 and half 1 4-7, both the same A registers
// and each its own B registers (loaded between the two); the sums come back
// in that order and are stored in it.
// CHECK: %[[SUM:.*]]:8 = scf.for %{{.*}} = %c0 to %c64 step %c16 iter_args(%[[C0:arg[0-9]+]] = %[[HALF]], %[[C1:arg[0-9]+]] = %[[HALF]], %[[C2:arg[0-9]+]] = %[[HALF]], %[[C3:arg[0-9]+]] = %[[HALF]], %[[C4:arg[0-9]+]] = %[[HALF]], %[[C5:arg[0-9]+]] = %[[HALF]], %[[C6:arg[0-9]+]] = %[[HALF]], %[[C7:arg[0-9]+]] = %[[HALF]]) -> (f32, f32, f32, f32, f32, f32, f32, f32)
// CHECK-COUNT-4: vector.load %{{.*}} {alignment = 4 : i64} : memref<32x64xbf16>, vector<2xbf16>
// CHECK: memref.load %{{.*}} : memref<64x48xbf16>
// CHECK: %[[D0:.*]] = nvvm.mma.sync A[%[[A0:[0-9]+]], %[[A1:[0-9]+]], %[[A2:[0-9]+]], %[[A3:[0-9]+]]]  B[%{{[0-9]+}}, %{{[0-9]+}}]  C[%[[C0]], %[[C1]], %[[C2]], %[[C3]]]  {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, multiplicandAPtxType = #nvvm.mma_type<bf16>, multiplicandBPtxType = #nvvm.mma_type<bf16>, shape = #nvvm.shape<m = 16, n = 8, k = 16>} : (i32, i32, f32) -> !llvm.struct<(f32, f32, f32, f32)>
// CHECK: %[[E0:.*]] = llvm.extractvalue %[[D0]][0]
// CHECK: %[[E1:.*]] = llvm.extractvalue %[[D0]][1]
// CHECK: %[[E2:.*]] = llvm.extractvalue %[[D0]][2]
// CHECK: %[[E3:.*]] = llvm.extractvalue %[[D0]][3]
// CHECK: memref.load %{{.*}} : memref<64x48xbf16>
// CHECK: %[[D1:.*]] = nvvm.mma.sync A[%[[A0]], %[[A1]], %[[A2]], %[[A3]]]  B[%{{[0-9]+}}, %{{[0-9]+}}]  C[%[[C4]], %[[C5]], %[[C6]], %[[C7]]]
// CHECK: %[[E4:.*]] = llvm.extractvalue %[[D1]][0]
// CHECK: %[[E5:.*]] = llvm.extractvalue %[[D1]][1]
// CHECK: %[[E6:.*]] = llvm.extractvalue %[[D1]][2]
// CHECK: %[[E7:.*]] = llvm.extractvalue %[[D1]][3]
// CHECK: scf.yield %[[E0]], %[[E1]], %[[E2]], %[[E3]], %[[E4]], %[[E5]], %[[E6]], %[[E7]]
// CHECK-NOT: nvvm.mma.sync
// CHECK: arith.truncf %[[SUM]]#0 : f32 to bf16
// CHECK: arith.truncf %[[SUM]]#1 : f32 to bf16
// CHECK: vector.store %{{.*}} {alignment = 4 : i64} : memref<32x48xbf16>, vector<2xbf16>
// CHECK: arith.truncf %[[SUM]]#2 : f32 to bf16
// CHECK: arith.truncf %[[SUM]]#3 : f32 to bf16
// CHECK: vector.store
// CHECK: arith.truncf %[[SUM]]#4 : f32 to bf16
// CHECK: arith.truncf %[[SUM]]#5 : f32 to bf16
// CHECK: vector.store
// CHECK: arith.truncf %[[SUM]]#6 : f32 to bf16
// CHECK: arith.truncf %[[SUM]]#7 : f32 to bf16
// CHECK: vector.store

// The emulation: the warp's registers as scratch memory (A's per lane, B's
// per half and lane, the accumulators), loaded by the same per-lane code,
// each mma.sync as loops over the half's 16x8 elements and k.
// EMU-LABEL: func.func @bf16_product
// EMU-NOT: gpu.
// EMU-NOT: nvvm.
// EMU: memref.alloc() : memref<32x4xi32>
// EMU: memref.alloc() : memref<2x32x2xi32>
// EMU: memref.alloc() : memref<32x8xf32>
// EMU: vector.load %{{.*}} {alignment = 2 : i64} : memref<32x64xbf16>, vector<2xbf16>
// EMU: vector.bitcast %{{.*}} : vector<2xbf16> to vector<1xi32>
// EMU: scf.for %{{.*}} = %c0 to %c8 step %c1
// EMU: vector.bitcast %{{.*}} : vector<1xi32> to vector<2xbf16>
// EMU: arith.mulf %{{.*}} : f32

// Without bf16 (sm_75's tensor cores have none) the product is left alone.
// NOBF16-LABEL: func.func @bf16_product
// NOBF16-NOT: nvvm.mma.sync
// NOBF16: linalg.generic
func.func @bf16_product(%ws: memref<65536xi8>, %c: memref<32x48xbf16>) {
  %c0 = arith.constant 0 : index
  %c4096 = arith.constant 4096 : index
  %a = memref.view %ws[%c0][] : memref<65536xi8> to memref<32x64xbf16>
  %b = memref.view %ws[%c4096][] : memref<65536xi8> to memref<64x48xbf16>
  %half = arith.constant 0.5 : bf16
  linalg.fill ins(%half : bf16) outs(%c : memref<32x48xbf16>)
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %b : memref<32x64xbf16>, memref<64x48xbf16>) outs(%c : memref<32x48xbf16>) {
  ^bb0(%x: bf16, %y: bf16, %o: bf16):
    %p = arith.mulf %x, %y : bf16
    %s = arith.addf %o, %p : bf16
    linalg.yield %s : bf16
  }
  return
}

// -----

// A bf16 product reading a model input as A (2-byte aligned at best: no
// 4-byte pair loads) is left on CUDA cores. One whose C is not filled right
// before (a buffer the memory plan filled earlier) starts its accumulators
// from C's elements: pairs along a row, widened to f32, in the order the
// accumulators are stored, read where they are stored (the stores'
// addresses are what gpu-mma-contractions-run.test checks by value; ONNX
// models always have a constant in C here, so no run checks the loads).
#a = affine_map<(m, k, n) -> (m, k)>
#b = affine_map<(m, k, n) -> (k, n)>
#c = affine_map<(m, k, n) -> (m, n)>
// CHECK-LABEL: func.func @bf16_input_operand
// CHECK-NOT: nvvm.mma.sync
// CHECK: linalg.generic
// CHECK-LABEL: func.func @bf16_unfilled
// CHECK: gpu.launch
// CHECK: %[[L0:.*]] = vector.load %arg1[%[[R0:[0-9]+]], %[[Q0:[0-9]+]]] {alignment = 4 : i64} : memref<32x32xbf16>, vector<2xbf16>
// CHECK: %[[L0E0:.*]] = vector.extract %[[L0]][0]
// CHECK: %[[X0:.*]] = arith.extf %[[L0E0]] : bf16 to f32
// CHECK: %[[L0E1:.*]] = vector.extract %[[L0]][1]
// CHECK: %[[X1:.*]] = arith.extf %[[L0E1]] : bf16 to f32
// CHECK: %[[L1:.*]] = vector.load %arg1[%[[R1:[0-9]+]], %[[Q1:[0-9]+]]] {alignment = 4 : i64} : memref<32x32xbf16>, vector<2xbf16>
// CHECK: %[[L1E0:.*]] = vector.extract %[[L1]][0]
// CHECK: %[[X2:.*]] = arith.extf %[[L1E0]] : bf16 to f32
// CHECK: %[[L1E1:.*]] = vector.extract %[[L1]][1]
// CHECK: %[[X3:.*]] = arith.extf %[[L1E1]] : bf16 to f32
// CHECK: %[[L2:.*]] = vector.load %arg1[%[[R2:[0-9]+]], %[[Q2:[0-9]+]]] {alignment = 4 : i64} : memref<32x32xbf16>, vector<2xbf16>
// CHECK: %[[L2E0:.*]] = vector.extract %[[L2]][0]
// CHECK: %[[X4:.*]] = arith.extf %[[L2E0]] : bf16 to f32
// CHECK: %[[L2E1:.*]] = vector.extract %[[L2]][1]
// CHECK: %[[X5:.*]] = arith.extf %[[L2E1]] : bf16 to f32
// CHECK: %[[L3:.*]] = vector.load %arg1[%[[R3:[0-9]+]], %[[Q3:[0-9]+]]] {alignment = 4 : i64} : memref<32x32xbf16>, vector<2xbf16>
// CHECK: %[[L3E0:.*]] = vector.extract %[[L3]][0]
// CHECK: %[[X6:.*]] = arith.extf %[[L3E0]] : bf16 to f32
// CHECK: %[[L3E1:.*]] = vector.extract %[[L3]][1]
// CHECK: %[[X7:.*]] = arith.extf %[[L3E1]] : bf16 to f32
// CHECK: scf.for %{{.*}} iter_args(%{{.*}} = %[[X0]], %{{.*}} = %[[X1]], %{{.*}} = %[[X2]], %{{.*}} = %[[X3]], %{{.*}} = %[[X4]], %{{.*}} = %[[X5]], %{{.*}} = %[[X6]], %{{.*}} = %[[X7]])
// CHECK: nvvm.mma.sync
// CHECK: vector.store %{{.*}}, %arg1[%[[R0]], %[[Q0]]]
// CHECK: vector.store %{{.*}}, %arg1[%[[R1]], %[[Q1]]]
// CHECK: vector.store %{{.*}}, %arg1[%[[R2]], %[[Q2]]]
// CHECK: vector.store %{{.*}}, %arg1[%[[R3]], %[[Q3]]]
// CHECK-NOT: linalg.generic
func.func @bf16_input_operand(%a: memref<32x32xbf16>, %ws: memref<65536xi8>, %c: memref<32x32xbf16>) {
  %c0 = arith.constant 0 : index
  %b = memref.view %ws[%c0][] : memref<65536xi8> to memref<32x32xbf16>
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %b : memref<32x32xbf16>, memref<32x32xbf16>) outs(%c : memref<32x32xbf16>) {
  ^bb0(%x: bf16, %y: bf16, %o: bf16):
    %p = arith.mulf %x, %y : bf16
    %s = arith.addf %o, %p : bf16
    linalg.yield %s : bf16
  }
  return
}

func.func @bf16_unfilled(%ws: memref<65536xi8>, %c: memref<32x32xbf16>) {
  %c0 = arith.constant 0 : index
  %c2048 = arith.constant 2048 : index
  %a = memref.view %ws[%c0][] : memref<65536xi8> to memref<32x32xbf16>
  %b = memref.view %ws[%c2048][] : memref<65536xi8> to memref<32x32xbf16>
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %b : memref<32x32xbf16>, memref<32x32xbf16>) outs(%c : memref<32x32xbf16>) {
  ^bb0(%x: bf16, %y: bf16, %o: bf16):
    %p = arith.mulf %x, %y : bf16
    %s = arith.addf %o, %p : bf16
    linalg.yield %s : bf16
  }
  return
}
