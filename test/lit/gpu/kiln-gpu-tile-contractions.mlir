// RUN: kiln-opt %s --kiln-gpu-tile-contractions --canonicalize --cse --split-input-file | FileCheck %s
// RUN: kiln-opt %s --kiln-gpu-tile-contractions="emulate=1 min-blocks=1" --canonicalize --cse --split-input-file | FileCheck %s --check-prefix=EMU
// RUN: kiln-opt %s --kiln-gpu-tile-contractions="tf32=1" --canonicalize --cse --split-input-file | FileCheck %s --check-prefix=TF32
// RUN: kiln-opt %s --kiln-gpu-tile-contractions="tf32=1 emulate=1 min-blocks=1" --canonicalize --cse --split-input-file | FileCheck %s --check-prefix=TF32EMU
// RUN: kiln-opt %s --kiln-gpu-tile-contractions="tf32=1 product-min-blocks=8" --canonicalize --cse --split-input-file | FileCheck %s --check-prefix=FEW

// 2048 x 64 x 2048: 16 x 16 blocks of 128 x 128 (256 blocks >= 128, no
// edge), 256 threads with 8 x 8 sums each. Slice 0 of A^T and B (rows
// padded to 132) is staged before the loop; per K-slice of 8, each thread
// loads its 4 + 4 elements of the next slice into registers (while there
// is one), does 8 rank-1 updates of 64 FMAs from shared memory, and after a
// barrier stores the next slice, then another barrier. No bound checks:
// every extent divides.
// The fill of C is taken over: C = 0 + sums, no load of C.
#a = affine_map<(m, k, n) -> (m, k)>
#b = affine_map<(m, k, n) -> (k, n)>
#c = affine_map<(m, k, n) -> (m, n)>
// TF32 (tf32=1): the same blocks on tensor cores, named @tf32_tiles (two
// blocks per SM, kiln-merge-gpu-modules). K-slices of 16 go through two
// stages of shared memory: A, fetched along K, is staged as 128 x (16 +
// 4), B as 16 x (128 + 8). Slice 0 is copied into stage 0 with cp.async,
// one element of 4 bytes per copy (the function's arguments are inputs,
// not known to be 16-byte aligned), consecutive threads on consecutive
// elements: 8 copies of A, 8 of B per thread, one group. Per slice: wait
// for the group, one barrier, while there is a next slice its 16 copies
// into the other stage (1 - stage), a group, then per step of 8 along K
// (PTX's fragment order) A's and B's fragments from this slice's stage,
// each rounded to TF32 as it is loaded (cvt.rna), and 4 x 4 mma.sync
// m16n8k8 (the warp's 64 x 32 tile); then the 64 accumulators are stored.
// TF32-LABEL: func.func @matmul_128
// TF32: gpu.launch {{.*}} threads({{.*}}) in ({{.*}} = %c256, {{.*}}) function(@tf32_tiles) workgroup(%[[AT:.*]] : memref<2x128x20xf32, #gpu.address_space<workgroup>>, %[[BT:.*]] : memref<2x16x136xf32, #gpu.address_space<workgroup>>)
// TF32-COUNT-8: nvgpu.device_async_copy %arg0[{{.*}}], %[[AT]][%c0, {{.*}}], 1 : memref<2048x64xf32> to memref<2x128x20xf32, #gpu.address_space<workgroup>>
// TF32-COUNT-8: nvgpu.device_async_copy %arg1[{{.*}}], %[[BT]][%c0, {{.*}}], 1 : memref<64x2048xf32> to memref<2x16x136xf32, #gpu.address_space<workgroup>>
// TF32-NEXT: nvvm.cp.async.commit.group
// TF32-NEXT: scf.for %[[K0:.*]] = %c0 to %c64 step %c16 iter_args
// TF32: %[[SLICE:.*]] = arith.divui %[[K0]], %c16
// TF32-NEXT: %[[STAGE:.*]] = arith.remui %[[SLICE]], %c2
// TF32-NEXT: nvvm.cp.async.wait.group 0
// TF32-NEXT: gpu.barrier
// TF32: %[[NEXT:.*]] = arith.addi %[[K0]], %c16
// TF32-NEXT: %[[MORE:.*]] = arith.cmpi ult, %[[NEXT]], %c64
// TF32-NEXT: scf.if %[[MORE]] {
// TF32-NEXT: %[[OTHER:.*]] = arith.subi %c1, %[[STAGE]]
// TF32-COUNT-8: nvgpu.device_async_copy %arg0[{{.*}}], %[[AT]][%[[OTHER]], {{.*}}]
// TF32-COUNT-8: nvgpu.device_async_copy %arg1[{{.*}}], %[[BT]][%[[OTHER]], {{.*}}]
// TF32-NEXT: }
// TF32-NEXT: nvvm.cp.async.commit.group
// TF32: memref.load %[[AT]][%[[STAGE]], {{.*}}]
// TF32-NEXT: nvvm.convert.float.to.tf32 {{.*}} {rnd = #nvvm.fp_rnd_mode<rna>}
// TF32-COUNT-16: nvvm.mma.sync A[{{.*}}]  B[{{.*}}]  C[{{.*}}]  {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, multiplicandAPtxType = #nvvm.mma_type<tf32>, multiplicandBPtxType = #nvvm.mma_type<tf32>, shape = #nvvm.shape<m = 16, n = 8, k = 8>}
// TF32: memref.load %[[AT]][%[[STAGE]], {{.*}}]
// TF32-COUNT-16: nvvm.mma.sync
// TF32-NOT: nvvm.mma.sync
// TF32-NOT: gpu.barrier
// TF32-NOT: vector.load
// TF32: scf.yield
// TF32-COUNT-64: memref.store {{.*}} : memref<2048x2048xf32>
// TF32-NOT: memref.store
// TF32: gpu.terminator
// The emulation: two stages of plain memory; slice 0 into stage 0, then
// per slice every thread's copies of the next one into the other stage,
// every thread's 48 fragment registers (2 steps of 4 x 4 for A and 4 x 2
// for B), then each thread's 64 accumulators summed over 8 k per step from
// the lanes that hold them.
// TF32EMU-LABEL: func.func @matmul_128
// TF32EMU: %[[AT:.*]] = memref.alloc() : memref<2x128x20xf32>
// TF32EMU: %[[BT:.*]] = memref.alloc() : memref<2x16x136xf32>
// TF32EMU: memref.alloc() : memref<256x64xf32>
// TF32EMU: %[[FRAGS:.*]] = memref.alloc() : memref<256x48xf32>
// TF32EMU: memref.store {{.*}}, %[[AT]][%c0,
// TF32EMU: scf.for %[[K0:.*]] = %c0 to %c64 step %c16
// TF32EMU: scf.if
// TF32EMU: memref.store {{.*}}, %[[AT]]
// TF32EMU: scf.for {{.*}} = %c0 to %c256 step %c1
// TF32EMU-COUNT-48: memref.store {{.*}}, %[[FRAGS]]
// TF32EMU-COUNT-2: scf.for {{.*}} = %c0 to %c8 step %c1 iter_args
// TF32EMU-NOT: nvvm.mma.sync
// TF32EMU-NOT: nvgpu.
// CHECK-LABEL: func.func @matmul_128
// CHECK-NOT: linalg.generic
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c16, {{.*}} = %c16, {{.*}} = %c1) threads(%[[T:.*]], {{.*}}, {{.*}}) in ({{.*}} = %c256, {{.*}} = %c1, {{.*}} = %c1)
// CHECK-SAME: workgroup(%[[AT:.*]] : memref<8x132xf32, #gpu.address_space<workgroup>>, %[[BT:.*]] : memref<8x132xf32, #gpu.address_space<workgroup>>)
// CHECK-NOT: arith.cmpi
// CHECK-COUNT-4: memref.store {{.*}}, %[[AT]]
// CHECK-COUNT-4: memref.store {{.*}}, %[[BT]]
// CHECK-NEXT: gpu.barrier
// CHECK: %{{.*}}:64 = scf.for %[[K0:.*]] = %c0 to %c64 step %c8 iter_args
// CHECK: %[[NEXT:.*]] = arith.addi %[[K0]], %c8
// CHECK: %[[MORE:.*]] = arith.cmpi ult, %[[NEXT]], %c64
// CHECK: %[[FETCHED:.*]]:8 = scf.if %[[MORE]] -> (f32, f32, f32, f32, f32, f32, f32, f32)
// CHECK-COUNT-4: memref.load %arg0
// CHECK-COUNT-4: memref.load %arg1
// CHECK: } else {
// CHECK-COUNT-512: math.fma
// CHECK-NEXT: gpu.barrier
// CHECK: memref.store %[[FETCHED]]#0, %[[AT]]
// CHECK: memref.store %[[FETCHED]]#3, %[[AT]]
// CHECK: memref.store %[[FETCHED]]#4, %[[BT]]
// CHECK: memref.store %[[FETCHED]]#7, %[[BT]]
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: scf.yield
// CHECK-NOT: memref.load %arg2
// CHECK-COUNT-64: memref.store {{.*}} : memref<2048x2048xf32>
// CHECK-NOT: memref.store
// CHECK: gpu.terminator
func.func @matmul_128(%x: memref<2048x64xf32>, %y: memref<64x2048xf32>, %z: memref<2048x2048xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%z : memref<2048x2048xf32>)
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%x, %y : memref<2048x64xf32>, memref<64x2048xf32>) outs(%z : memref<2048x2048xf32>) {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// The same product on buffers known to be 16-byte aligned (allocations
// with their alignment): each thread copies runs of 4 elements, one
// 16-byte cp.async each (cp.async.cg, bypassing L1), 2 of A and 2 of B per
// slice. Then each step takes k = 4q + 2s + h for lane q (step s, half
// h): A's tile keeps K in order in rows of 16 floats, and a lane's values
// of a row over the slice are one 128-bit load; B's rows are permuted
// (row 4c + q holds k = 4q + c). B's fragments of the slice are loaded
// first, then A's row tile by row tile.
#a = affine_map<(m, k, n) -> (m, k)>
#b = affine_map<(m, k, n) -> (k, n)>
#c = affine_map<(m, k, n) -> (m, n)>
// TF32-LABEL: func.func @matmul_128_aligned
// TF32: gpu.launch {{.*}} workgroup(%[[AT:.*]] : memref<2x128x16xf32, #gpu.address_space<workgroup>>, %[[BT:.*]] : memref<2x16x136xf32, #gpu.address_space<workgroup>>)
// TF32-COUNT-2: nvgpu.device_async_copy %{{.*}}[{{.*}}], %[[AT]][%c0, {{.*}}], 4 {bypassL1} : memref<2048x64xf32> to memref<2x128x16xf32, #gpu.address_space<workgroup>>
// TF32-COUNT-2: nvgpu.device_async_copy %{{.*}}[{{.*}}], %[[BT]][%c0, {{.*}}], 4 {bypassL1} : memref<64x2048xf32> to memref<2x16x136xf32, #gpu.address_space<workgroup>>
// TF32-NEXT: nvvm.cp.async.commit.group
// TF32: scf.if
// TF32-COUNT-4: nvgpu.device_async_copy {{.*}}, 4 {bypassL1}
// TF32-NEXT: }
// TF32-NEXT: nvvm.cp.async.commit.group
// TF32-COUNT-16: nvvm.convert.float.to.tf32 {{.*}} {rnd = #nvvm.fp_rnd_mode<rna>}
// TF32: vector.load %[[AT]][{{.*}}] {alignment = 16 : i64} : memref<2x128x16xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// TF32-COUNT-32: nvvm.mma.sync
// TF32-NOT: nvgpu.device_async_copy
// TF32: gpu.terminator
func.func @matmul_128_aligned(%z: memref<2048x2048xf32>) {
  %x = memref.alloc() {alignment = 64 : i64} : memref<2048x64xf32>
  %y = memref.alloc() {alignment = 64 : i64} : memref<64x2048xf32>
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%x, %y : memref<2048x64xf32>, memref<64x2048xf32>) outs(%z : memref<2048x2048xf32>) {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A with a stride of 2 in its innermost dim (a strided Slice's view):
// cp.async needs a unit innermost stride, so A is staged with plain loads
// and stores (the next barrier publishes them alike); B keeps cp.async.
#a = affine_map<(m, k, n) -> (m, k)>
#b = affine_map<(m, k, n) -> (k, n)>
#c = affine_map<(m, k, n) -> (m, n)>
// TF32-LABEL: func.func @strided_a
// TF32: gpu.launch {{.*}} workgroup(%[[AT:.*]] : memref<2x128x20xf32, #gpu.address_space<workgroup>>, %[[BT:.*]] : memref<2x16x136xf32, #gpu.address_space<workgroup>>)
// TF32-COUNT-8: memref.load %arg0{{.*}} : memref<2048x64xf32, strided<[128, 2]>>
// TF32-NOT: nvgpu.device_async_copy %arg0
// TF32: nvgpu.device_async_copy %arg1
// TF32: nvvm.cp.async.commit.group
// TF32-NOT: nvgpu.device_async_copy %arg0
// TF32: gpu.terminator
func.func @strided_a(%x: memref<2048x64xf32, strided<[128, 2]>>, %y: memref<64x2048xf32>, %z: memref<2048x2048xf32>) {
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%x, %y : memref<2048x64xf32, strided<[128, 2]>>, memref<64x2048xf32>) outs(%z : memref<2048x2048xf32>) {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// 1000 x 300 x 1024: 128 x 128 would be 64 blocks, too few; 64 x 64 tiles
// (16 x 16 blocks), K-slices of 16, 4 x 4 sums per thread. The rows (1000)
// and K (300) have edges: loads of A check both, B's check K, stores check
// the row only.
#a = affine_map<(m, k, n) -> (m, k)>
#b = affine_map<(m, k, n) -> (k, n)>
#c = affine_map<(m, k, n) -> (m, n)>
// CHECK-LABEL: func.func @matmul_64
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c16, {{.*}} = %c16, {{.*}} = %c1)
// CHECK-SAME: workgroup({{.*}} : memref<16x66xf32, #gpu.address_space<workgroup>>, {{.*}} : memref<16x66xf32, #gpu.address_space<workgroup>>)
// CHECK: %[[ROW_OK:.*]] = arith.cmpi ult, %{{.*}}, %c1000 : index
// CHECK: %[[K_OK:.*]] = arith.cmpi ult, %{{.*}}, %c300 : index
// CHECK: %[[BOTH:.*]] = arith.andi %[[ROW_OK]], %[[K_OK]] : i1
// CHECK: scf.if %[[BOTH]] -> (f32) {
// CHECK: memref.load %arg0
// CHECK: } else {
// CHECK: scf.yield %cst : f32
// CHECK: gpu.barrier
// CHECK: scf.for {{.*}} = %c0 to %c300 step %c16 iter_args
// CHECK: scf.if %{{.*}} -> (f32, f32, f32, f32, f32, f32, f32, f32) {
// CHECK: arith.andi %[[ROW_OK]], %{{.*}} : i1
// CHECK: memref.load %arg0
// CHECK-COUNT-256: math.fma
// CHECK: gpu.barrier
// CHECK: scf.yield
// CHECK-COUNT-16: scf.if
// CHECK: memref.load %arg2
// CHECK: gpu.terminator
func.func @matmul_64(%x: memref<1000x300xf32>, %y: memref<300x1024xf32>, %z: memref<1000x1024xf32>) {
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%x, %y : memref<1000x300xf32>, memref<300x1024xf32>) outs(%z : memref<1000x1024xf32>) {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A small product (one 64 x 64 block) keeps kiln-gpu-loops' kernels; so
// do a reduction that is not a sum of products, a thin product (M = 1:
// 256 blocks of 64 x 64 with one useful row each), a product whose input
// is its output's memory and one with K = 0.
#a = affine_map<(m, k, n) -> (m, k)>
#b = affine_map<(m, k, n) -> (k, n)>
#c = affine_map<(m, k, n) -> (m, n)>
// CHECK-LABEL: func.func @small_and_max
// CHECK-NOT: gpu.launch
// CHECK: linalg.generic
// CHECK: arith.mulf
// CHECK: linalg.generic
// CHECK: arith.maximumf
// CHECK: linalg.generic
// CHECK-SAME: outs(%arg8 : memref<1x16384xf32>)
// CHECK: linalg.generic
// CHECK-SAME: outs(%arg9 : memref<2048x2048xf32>)
// (The K = 0 product, left alone, is then erased by the canonicalizer.)
func.func @small_and_max(%x: memref<64x64xf32>, %y: memref<64x64xf32>, %z: memref<64x64xf32>,
                         %u: memref<2048x64xf32>, %v: memref<64x2048xf32>, %w: memref<2048x2048xf32>,
                         %r: memref<1x512xf32>, %rw: memref<512x16384xf32>, %o: memref<1x16384xf32>,
                         %sq: memref<2048x2048xf32>, %e0: memref<2048x0xf32>,
                         %e1: memref<0x2048xf32>) {
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%x, %y : memref<64x64xf32>, memref<64x64xf32>) outs(%z : memref<64x64xf32>) {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%u, %v : memref<2048x64xf32>, memref<64x2048xf32>) outs(%w : memref<2048x2048xf32>) {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %m = arith.addf %p, %q : f32
    %s = arith.maximumf %acc, %m : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%r, %rw : memref<1x512xf32>, memref<512x16384xf32>) outs(%o : memref<1x16384xf32>) {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %m = arith.mulf %p, %q : f32
    %t = arith.addf %acc, %m : f32
    linalg.yield %t : f32
  }
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%sq, %sq : memref<2048x2048xf32>, memref<2048x2048xf32>) outs(%sq : memref<2048x2048xf32>) {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %m = arith.mulf %p, %q : f32
    %t = arith.addf %acc, %m : f32
    linalg.yield %t : f32
  }
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%e0, %e1 : memref<2048x0xf32>, memref<0x2048xf32>) outs(%w : memref<2048x2048xf32>) {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %m = arith.mulf %p, %q : f32
    %t = arith.addf %acc, %m : f32
    linalg.yield %t : f32
  }
  return
}

// -----

// A stride-2 convolution (n, f, c, kh, kw, oh, ow) as an implicit GEMM,
// emulated on the CPU: M = f (40, the weights' own dim), N = (n, oh, ow)
// (128, the input's), K = (c, kh, kw) (27). The weights are read at K
// delinearized by 3 and 3 (consecutive threads along K, their contiguous
// dim); the input at oh * 2 + kh. Two 64 x 64 blocks, 256 threads as a
// loop per phase, each thread's 16 sums in a row of a 256 x 16 buffer and
// its 8 elements of the next slice in a row of a 256 x 8 one: per slice,
// every thread fetches, then every thread multiplies, then every thread
// stores what it fetched (the barriers' order on the GPU).
#in = affine_map<(n, f, c, kh, kw, oh, ow) -> (n, c, oh * 2 + kh, ow * 2 + kw)>
#w = affine_map<(n, f, c, kh, kw, oh, ow) -> (f, c, kh, kw)>
#out = affine_map<(n, f, c, kh, kw, oh, ow) -> (n, f, oh, ow)>
// EMU-LABEL: func.func @conv
// EMU-NOT: gpu.
// EMU-DAG: %[[AT:.*]] = memref.alloc() : memref<16x66xf32>
// EMU-DAG: %[[BT:.*]] = memref.alloc() : memref<16x66xf32>
// EMU-DAG: %[[ACC:.*]] = memref.alloc() : memref<256x16xf32>
// EMU-DAG: %[[NEXT:.*]] = memref.alloc() : memref<256x8xf32>
// EMU: scf.for %[[BX:.*]] = %c0 to %c2 step %c1 {
// EMU: scf.for %[[T:.*]] = %c0 to %c256 step %c1 {
// EMU: memref.store %cst, %[[ACC]][%[[T]], %c15]
// EMU: %[[K:.*]] = arith.remui %[[T]], %c16 : index
// EMU: %[[F:.*]] = arith.divui %[[T]], %c16 : index
// EMU: arith.cmpi ult, %[[F]], %c40 : index
// EMU: arith.cmpi ult, %[[K]], %c27 : index
// EMU: %[[KW:.*]] = arith.remui %[[K]], %c3 : index
// EMU: %[[CKH:.*]] = arith.divui %[[K]], %c3 : index
// EMU: %[[KH:.*]] = arith.remui %[[CKH]], %c3 : index
// EMU: %[[C:.*]] = arith.divui %[[CKH]], %c3 : index
// EMU: memref.load %arg1[%[[F]], %[[C]], %[[KH]], %[[KW]]] : memref<40x3x3x3xf32>
// EMU: memref.load %arg0
// EMU: memref.store {{.*}}, %[[AT]][%[[K]], %[[F]]]
// EMU: memref.store {{.*}}, %[[BT]]
// EMU: scf.for %[[K0:.*]] = %c0 to %c27 step %c16 {
// EMU: scf.for %[[T1:.*]] = %c0 to %c256 step %c1 {
// EMU: %[[K1:.*]] = arith.addi %[[K0]], %c16 : index
// EMU: %[[MORE:.*]] = arith.cmpi ult, %[[K1]], %c27 : index
// EMU: %[[FETCHED:.*]]:8 = scf.if %[[MORE]]
// EMU: memref.store %[[FETCHED]]#7, %[[NEXT]][%[[T1]], %c7]
// EMU: scf.for %[[T2:.*]] = %c0 to %c256 step %c1 {
// EMU: memref.load %[[ACC]][%[[T2]], %c0]
// EMU: math.fma
// EMU: memref.store {{.*}}, %[[ACC]][%[[T2]], %c15]
// EMU: scf.for %[[T3:.*]] = %c0 to %c256 step %c1 {
// EMU: memref.load %[[NEXT]][%[[T3]], %c0]
// EMU: memref.store {{.*}}, %[[AT]]
// EMU: memref.store {{.*}}, %[[BT]]
// EMU: scf.for %[[T4:.*]] = %c0 to %c256 step %c1 {
// EMU: memref.load %arg2
// EMU: arith.addf
// EMU: memref.store {{.*}}, %arg2
// EMU-DAG: memref.dealloc %[[AT]]
// EMU-DAG: memref.dealloc %[[BT]]
// EMU-DAG: memref.dealloc %[[ACC]]
// EMU-DAG: memref.dealloc %[[NEXT]]
func.func @conv(%x: memref<2x3x17x17xf32>, %w: memref<40x3x3x3xf32>, %y: memref<2x40x8x8xf32>) {
  linalg.generic {indexing_maps = [#in, #w, #out], iterator_types = ["parallel", "parallel", "reduction", "reduction", "reduction", "parallel", "parallel"]}
      ins(%x, %w : memref<2x3x17x17xf32>, memref<40x3x3x3xf32>) outs(%y : memref<2x40x8x8xf32>) {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// product-min-blocks (what TF32 gets: 8): a 64 x 1024 x 4096 product (an
// MLP's first layer at 64 rows) makes 64 blocks of 64 x 64, too few for
// min-blocks (128), enough for product-min-blocks; a 64 x 64 x 4096 one
// makes 1, too few for either. A convolution with as few blocks keeps
// kiln-gpu-loops' kernel: product-min-blocks is for matrix products only.
#a = affine_map<(m, k, n) -> (m, k)>
#b = affine_map<(m, k, n) -> (k, n)>
#c = affine_map<(m, k, n) -> (m, n)>
#in = affine_map<(n, f, c, kh, kw, oh, ow) -> (n, c, oh + kh, ow + kw)>
#w = affine_map<(n, f, c, kh, kw, oh, ow) -> (f, c, kh, kw)>
#out = affine_map<(n, f, c, kh, kw, oh, ow) -> (n, f, oh, ow)>
// FEW-LABEL: func.func @few_blocks
// FEW: gpu.launch blocks({{.*}}) in ({{.*}} = %c64, {{.*}} = %c1, {{.*}} = %c1)
// FEW-SAME: workgroup({{.*}} : memref<2x64x36xf32, #gpu.address_space<workgroup>>, {{.*}} : memref<2x32x72xf32, #gpu.address_space<workgroup>>)
// FEW-COUNT-16: nvvm.mma.sync
// FEW: gpu.terminator
// FEW-NOT: gpu.launch
// FEW: linalg.generic
// FEW-SAME: outs(%arg5 : memref<64x64xf32>)
// FEW: linalg.generic
// FEW-SAME: outs(%arg8 : memref<1x512x7x7xf32>)
// CHECK-LABEL: func.func @few_blocks
// CHECK-NOT: gpu.launch
func.func @few_blocks(%x: memref<64x1024xf32>, %y: memref<1024x4096xf32>, %z: memref<64x4096xf32>,
                      %s: memref<64x4096xf32>, %t: memref<4096x64xf32>, %u: memref<64x64xf32>,
                      %i: memref<1x512x9x9xf32>, %k: memref<512x512x3x3xf32>, %o: memref<1x512x7x7xf32>) {
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%x, %y : memref<64x1024xf32>, memref<1024x4096xf32>) outs(%z : memref<64x4096xf32>) {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %m = arith.mulf %p, %q : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%s, %t : memref<64x4096xf32>, memref<4096x64xf32>) outs(%u : memref<64x64xf32>) {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %m = arith.mulf %p, %q : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#in, #w, #out], iterator_types = ["parallel", "parallel", "reduction", "reduction", "reduction", "parallel", "parallel"]}
      ins(%i, %k : memref<1x512x9x9xf32>, memref<512x512x3x3xf32>) outs(%o : memref<1x512x7x7xf32>) {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %m = arith.mulf %p, %q : f32
    %r = arith.addf %m, %acc : f32
    linalg.yield %r : f32
  }
  return
}
