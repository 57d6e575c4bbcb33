// RUN: kiln-opt %s --kiln-plan-memory --split-input-file | FileCheck %s
// RUN: kiln-opt %s --kiln-plan-memory=debug-memory --split-input-file | FileCheck %s --check-prefix=DEBUG

// %a (256 B) dies at the copy into %b; %c (256 B), allocated after that,
// reuses its bytes. %b (512 B) overlaps both, so it goes first at 0 and
// the 256-byte buffers at 512. Workspace: 768 bytes, the last argument.
// CHECK-LABEL: module attributes {kiln.workspace_size = 768 : i64}
// CHECK: func.func @plan(%arg0: memref<64xf32>, %arg1: memref<64xf32>, %[[WS:.*]]: memref<768xi8>)
// CHECK: %[[C512:.*]] = arith.constant 512 : index
// CHECK-NEXT: memref.view %[[WS]][%[[C512]]][] : memref<768xi8> to memref<64xf32>
// CHECK: %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT: memref.view %[[WS]][%[[C0]]][] : memref<768xi8> to memref<128xf32>
// CHECK: %[[C512B:.*]] = arith.constant 512 : index
// CHECK-NEXT: memref.view %[[WS]][%[[C512B]]][] : memref<768xi8> to memref<64xf32>
// CHECK-NOT: memref.alloc
// DEBUG-LABEL: func.func @plan(%arg0: memref<64xf32>, %arg1: memref<64xf32>)
// DEBUG: %[[A:.*]] = memref.alloc() : memref<64xf32>
// DEBUG-NEXT: %[[NAN:.*]] = arith.constant 0x7FC00000 : f32
// DEBUG-NEXT: linalg.fill ins(%[[NAN]] : f32) outs(%[[A]] : memref<64xf32>)
// DEBUG-NOT: memref.view
func.func @plan(%in: memref<64xf32>, %out: memref<64xf32>) {
  %a = memref.alloc() : memref<64xf32>
  memref.copy %in, %a : memref<64xf32> to memref<64xf32>
  %b = memref.alloc() : memref<128xf32>
  %b0 = memref.subview %b[0] [64] [1] : memref<128xf32> to memref<64xf32, strided<[1]>>
  memref.copy %a, %b0 : memref<64xf32> to memref<64xf32, strided<[1]>>
  %c = memref.alloc() : memref<64xf32>
  memref.copy %b0, %c : memref<64xf32, strided<[1]>> to memref<64xf32>
  memref.copy %c, %out : memref<64xf32> to memref<64xf32>
  return
}

// -----

// Nothing to plan: no workspace argument, no size attribute.
// CHECK-LABEL: module {
// CHECK: func.func @nothing(%arg0: memref<4xf32>, %arg1: memref<4xf32>) {
func.func @nothing(%in: memref<4xf32>, %out: memref<4xf32>) {
  memref.copy %in, %out : memref<4xf32> to memref<4xf32>
  return
}

// -----

// Buffers of run-time size share one block by liveness. Their sizes are
// constants times the same run-time value (%n rows of 512, 256 and 128
// floats), so they are placed as the static plan places its buffers, in
// units of %n: largest first, each at the lowest offset free for its live
// range. %a (2048 %n bytes) takes 0; %b, live while %a is, 2048 %n; %c,
// live only with %b, 0 again: 3072 %n bytes in all (slots of equal sizes
// only, as before, laid the three end to end: 3584 %n). The offsets and the
// block's size are computed where the first buffer was allocated.
// CHECK-LABEL: func.func @run_time_sized
// CHECK-SAME: (%[[IN:.*]]: memref<?x512xf32>, %[[OUT:.*]]: memref<?x128xf32>)
// CHECK: %[[N:.*]] = memref.dim %[[IN]]
// CHECK: %[[PROD:.*]] = arith.muli %{{.*}}, %[[N]] : index
// CHECK: %[[EXTENT:.*]] = arith.constant 3072 : index
// CHECK: %[[SIZE:.*]] = arith.muli %[[EXTENT]], %[[PROD]] : index
// CHECK: %[[TOTAL:.*]] = arith.addi %{{.*}}, %[[SIZE]] : index
// CHECK: %[[BLOCK:.*]] = memref.alloc(%[[TOTAL]]) {alignment = 64 : i64} : memref<?xi8>
// CHECK: %[[A_UNITS:.*]] = arith.constant 0 : index
// CHECK: %[[A_BYTES:.*]] = arith.muli %[[A_UNITS]], %[[PROD]] : index
// CHECK: %[[A_AT:.*]] = arith.addi %{{.*}}, %[[A_BYTES]] : index
// CHECK: memref.view %[[BLOCK]][%[[A_AT]]][%[[N]]] : memref<?xi8> to memref<?x512xf32>
// CHECK: %[[B_UNITS:.*]] = arith.constant 2048 : index
// CHECK: %[[B_BYTES:.*]] = arith.muli %[[B_UNITS]], %[[PROD]] : index
// CHECK: %[[B_AT:.*]] = arith.addi %{{.*}}, %[[B_BYTES]] : index
// CHECK: memref.view %[[BLOCK]][%[[B_AT]]][%[[N]]] : memref<?xi8> to memref<?x256xf32>
// CHECK: %[[C_UNITS:.*]] = arith.constant 0 : index
// CHECK: %[[C_BYTES:.*]] = arith.muli %[[C_UNITS]], %[[PROD]] : index
// CHECK: %[[C_AT:.*]] = arith.addi %{{.*}}, %[[C_BYTES]] : index
// CHECK: memref.view %[[BLOCK]][%[[C_AT]]][%[[N]]] : memref<?xi8> to memref<?x128xf32>
// CHECK-NOT: memref.alloc
// CHECK: return
func.func @run_time_sized(%in: memref<?x512xf32>, %out: memref<?x128xf32>) {
  %c0 = arith.constant 0 : index
  %n = memref.dim %in, %c0 : memref<?x512xf32>
  %a = memref.alloc(%n) {alignment = 64 : i64} : memref<?x512xf32>
  memref.copy %in, %a : memref<?x512xf32> to memref<?x512xf32>
  %b = memref.alloc(%n) {alignment = 64 : i64} : memref<?x256xf32>
  %a0 = memref.subview %a[0, 0] [%n, 256] [1, 1] : memref<?x512xf32> to memref<?x256xf32, strided<[512, 1]>>
  memref.copy %a0, %b : memref<?x256xf32, strided<[512, 1]>> to memref<?x256xf32>
  %c = memref.alloc(%n) {alignment = 64 : i64} : memref<?x128xf32>
  %b0 = memref.subview %b[0, 0] [%n, 128] [1, 1] : memref<?x256xf32> to memref<?x128xf32, strided<[256, 1]>>
  memref.copy %b0, %c : memref<?x128xf32, strided<[256, 1]>> to memref<?x128xf32>
  memref.copy %c, %out : memref<?x128xf32> to memref<?x128xf32>
  return
}

// -----

// Factors under 64 bytes ([n] floats: 4 n bytes each, live together) are
// placed as they are (offsets 0 and 4, 8 n bytes in all), with n rounded
// up to a multiple of 16, so that 4 times it is a multiple of 64: every
// view stays 64-byte aligned without giving each buffer 64 n bytes.
// CHECK-LABEL: func.func @small_factors
// CHECK: %[[N:.*]] = memref.dim
// CHECK: %[[PROD:.*]] = arith.muli %{{.*}}, %[[N]] : index
// CHECK: %[[UP:.*]] = arith.addi %[[PROD]], %{{.*}} : index
// CHECK: %[[C16:.*]] = arith.constant 16 : index
// CHECK: %[[Q:.*]] = arith.divui %[[UP]], %[[C16]] : index
// CHECK: %[[P:.*]] = arith.muli %[[Q]], %{{.*}} : index
// CHECK: %[[C8:.*]] = arith.constant 8 : index
// CHECK: %[[SIZE:.*]] = arith.muli %[[C8]], %[[P]] : index
// CHECK: %[[TOTAL:.*]] = arith.addi %{{.*}}, %[[SIZE]] : index
// CHECK: %[[BLOCK:.*]] = memref.alloc(%[[TOTAL]])
// CHECK: memref.view %[[BLOCK]]
// CHECK: %[[C4:.*]] = arith.constant 4 : index
// CHECK: %[[B_BYTES:.*]] = arith.muli %[[C4]], %[[P]] : index
// CHECK: %[[B_AT:.*]] = arith.addi %{{.*}}, %[[B_BYTES]] : index
// CHECK: memref.view %[[BLOCK]][%[[B_AT]]][%[[N]]] : memref<?xi8> to memref<?xf32>
func.func @small_factors(%in: memref<?xf32>, %out: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %n = memref.dim %in, %c0 : memref<?xf32>
  %a = memref.alloc(%n) {alignment = 64 : i64} : memref<?xf32>
  memref.copy %in, %a : memref<?xf32> to memref<?xf32>
  %b = memref.alloc(%n) {alignment = 64 : i64} : memref<?xf32>
  memref.copy %a, %b : memref<?xf32> to memref<?xf32>
  memref.copy %b, %out : memref<?xf32> to memref<?xf32>
  return
}

// -----

// A buffer whose size is read from memory after the block's place (data-
// dependent, as NonZero's count) keeps its own allocation; one buffer of
// run-time size alone is left as it is.
// CHECK-LABEL: func.func @data_dependent
// CHECK: memref.alloc(%{{.*}}) {alignment = 64 : i64} : memref<?xf32>
// CHECK: memref.alloc(%{{.*}}) {alignment = 64 : i64} : memref<?xf32>
// CHECK-NOT: memref.view
func.func @data_dependent(%in: memref<?xf32>, %count: memref<index>, %out: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %n = memref.dim %in, %c0 : memref<?xf32>
  %a = memref.alloc(%n) {alignment = 64 : i64} : memref<?xf32>
  memref.copy %in, %a : memref<?xf32> to memref<?xf32>
  %k = memref.load %count[] : memref<index>
  %b = memref.alloc(%k) {alignment = 64 : i64} : memref<?xf32>
  %a0 = memref.subview %a[0] [%k] [1] : memref<?xf32> to memref<?xf32, strided<[1]>>
  memref.copy %a0, %b : memref<?xf32, strided<[1]>> to memref<?xf32>
  memref.copy %b, %out : memref<?xf32> to memref<?xf32>
  return
}

// -----

// A size computed after the first buffer of run-time size from values
// known there (an affine.apply of the batch, as ViT's batch x 197 rows) is
// computed where the block is allocated, and its buffer joins the block.
// CHECK-LABEL: func.func @hoisted_size
// CHECK: %[[B:.*]] = memref.dim %arg0
// CHECK: %[[ROWS:.*]] = affine.apply #{{.*}}()[%[[B]]]
// CHECK: %[[BLOCK:.*]] = memref.alloc(%{{.*}}) {alignment = 64 : i64} : memref<?xi8>
// CHECK: memref.view %[[BLOCK]][%{{.*}}][%[[B]]] : memref<?xi8> to memref<?x8xf32>
// CHECK: memref.view %[[BLOCK]][%{{.*}}][%[[ROWS]]] : memref<?xi8> to memref<?x4xf32>
// CHECK-NOT: memref.alloc
func.func @hoisted_size(%in: memref<?x8xf32>, %out: memref<?x4xf32>) {
  %c0 = arith.constant 0 : index
  %b = memref.dim %in, %c0 : memref<?x8xf32>
  %a = memref.alloc(%b) {alignment = 64 : i64} : memref<?x8xf32>
  memref.copy %in, %a : memref<?x8xf32> to memref<?x8xf32>
  %rows = affine.apply affine_map<()[s0] -> (s0 * 2)>()[%b]
  %c = memref.alloc(%rows) {alignment = 64 : i64} : memref<?x4xf32>
  %shape = memref.alloc() : memref<2xindex>
  memref.store %rows, %shape[%c0] : memref<2xindex>
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  memref.store %c4, %shape[%c1] : memref<2xindex>
  %r = memref.reshape %a(%shape) : (memref<?x8xf32>, memref<2xindex>) -> memref<?x4xf32>
  memref.copy %r, %c : memref<?x4xf32> to memref<?x4xf32>
  memref.copy %c, %out : memref<?x4xf32> to memref<?x4xf32>
  return
}
