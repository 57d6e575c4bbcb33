// RUN: kiln-opt %s --kiln-parallelize-calls --split-input-file | FileCheck %s

// A call marked kiln.parallel becomes kiln_parallel_for over its range: the
// other arguments go into stack slots (allocated once, in the entry block)
// that the task function loads back before calling the callee on a chunk.
// CHECK: llvm.func @kiln_parallel_for(i64, i64, !llvm.ptr, !llvm.ptr)
// CHECK-LABEL: llvm.func @main
// CHECK: %[[SLOTS:.*]] = llvm.alloca %{{.*}} x i64 {alignment = 8 : i64}
// CHECK: %[[S0:.*]] = llvm.getelementptr %[[SLOTS]][0]
// CHECK: llvm.store %arg0, %[[S0]] : !llvm.ptr, !llvm.ptr
// CHECK: %[[S1:.*]] = llvm.getelementptr %[[SLOTS]][1]
// CHECK: llvm.store %arg1, %[[S1]] : f32, !llvm.ptr
// CHECK: %[[TASK:.*]] = llvm.mlir.addressof @body_task : !llvm.ptr
// CHECK: %[[N:.*]] = llvm.mlir.constant(256 : i64) : i64
// CHECK: %[[G:.*]] = llvm.mlir.constant(32 : i64) : i64
// CHECK: llvm.call @kiln_parallel_for(%[[N]], %[[G]], %[[TASK]], %[[SLOTS]])
// CHECK-NOT: llvm.call @body(
// CHECK-LABEL: llvm.func internal @body_task(%arg0: !llvm.ptr, %arg1: i64, %arg2: i64)
// CHECK: %[[P:.*]] = llvm.load %{{.*}} : !llvm.ptr -> !llvm.ptr
// CHECK: %[[F:.*]] = llvm.load %{{.*}} : !llvm.ptr -> f32
// CHECK: llvm.call @body(%[[P]], %[[F]], %arg1, %arg2)
llvm.func internal @body(%p: !llvm.ptr, %f: f32, %begin: i64, %end: i64) {
  llvm.return
}
llvm.func @main(%p: !llvm.ptr, %f: f32) {
  %c0 = llvm.mlir.constant(0 : i64) : i64
  %c256 = llvm.mlir.constant(256 : i64) : i64
  llvm.call @body(%p, %f, %c0, %c256) {kiln.parallel = array<i64: 256, 32>} : (!llvm.ptr, f32, i64, i64) -> ()
  llvm.return
}

// -----

// Unmarked calls stay as they are.
// CHECK-LABEL: llvm.func @plain
// CHECK: llvm.call @body(%arg0, %{{.*}}, %{{.*}})
// CHECK-NOT: kiln_parallel_for
llvm.func internal @body(%p: !llvm.ptr, %begin: i64, %end: i64) {
  llvm.return
}
llvm.func @plain(%p: !llvm.ptr) {
  %c0 = llvm.mlir.constant(0 : i64) : i64
  %c8 = llvm.mlir.constant(8 : i64) : i64
  llvm.call @body(%p, %c0, %c8) : (!llvm.ptr, i64, i64) -> ()
  llvm.return
}
