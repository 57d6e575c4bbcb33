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
