// RUN: kiln-opt %s --kiln-profile-kernels --split-input-file | FileCheck %s

// Each kernel call of the model (a public function) is bracketed: begin
// takes the name of the ONNX nodes, from the call's location (node names
// wrapping op types; a fused location gives every node), end also the
// kernel that ran (for kiln_parallel_for, the task) and the kiln.flops count.
// CHECK-DAG: llvm.func @kiln_profile_begin(!llvm.ptr) -> i64
// CHECK-DAG: llvm.func @kiln_profile_end(!llvm.ptr, !llvm.ptr, i64, i64)
// CHECK-DAG: llvm.mlir.global private constant @[[N0:kiln_profile_str_[0-9]+]]("conv1 (Conv) + relu1 (Relu)\00")
// CHECK-DAG: llvm.mlir.global private constant @[[K0:kiln_profile_str_[0-9]+]]("kiln_conv2d_nhwc_f32\00")
// CHECK-DAG: llvm.mlir.global private constant @[[N1:kiln_profile_str_[0-9]+]]("add1 (Add)\00")
// CHECK-DAG: llvm.mlir.global private constant @[[K1:kiln_profile_str_[0-9]+]]("main_op1_task\00")
// CHECK-LABEL: llvm.func @main
// CHECK: %[[A0:.*]] = llvm.mlir.addressof @[[N0]]
// CHECK: %[[T0:.*]] = llvm.call @kiln_profile_begin(%[[A0]])
// CHECK-NEXT: llvm.call @kiln_conv2d_nhwc_f32(
// CHECK-NOT: kiln.flops
// CHECK: %[[B0:.*]] = llvm.mlir.addressof @[[K0]]
// CHECK: %[[F0:.*]] = llvm.mlir.constant(1000 : i64) : i64
// CHECK: llvm.call @kiln_profile_end(%[[A0]], %[[B0]], %[[F0]], %[[T0]])
// CHECK: %[[A1:.*]] = llvm.mlir.addressof @[[N1]]
// CHECK: %[[T1:.*]] = llvm.call @kiln_profile_begin(%[[A1]])
// CHECK-NEXT: llvm.call @kiln_parallel_for(
// CHECK: %[[B1:.*]] = llvm.mlir.addressof @[[K1]]
// CHECK: %[[F1:.*]] = llvm.mlir.constant(0 : i64) : i64
// CHECK: llvm.call @kiln_profile_end(%[[A1]], %[[B1]], %[[F1]], %[[T1]])
// Allocation is not a kernel.
// CHECK: llvm.call @malloc
// CHECK-NOT: kiln_profile
// CHECK: llvm.return
// Nothing is added to internal functions (the kernels' own bodies).
// CHECK-LABEL: llvm.func internal @main_op1_task
// CHECK-NOT: kiln_profile
// CHECK: llvm.return
llvm.func @kiln_conv2d_nhwc_f32(i64)
llvm.func @kiln_parallel_for(i64, i64, !llvm.ptr, !llvm.ptr)
llvm.func @malloc(i64) -> !llvm.ptr
llvm.func @main(%x: i64, %slots: !llvm.ptr) {
  llvm.call @kiln_conv2d_nhwc_f32(%x) {kiln.flops = 1000 : i64} : (i64) -> () loc(fused["conv1"("Conv"("m.onnx":0:0)), "relu1"("Relu"("m.onnx":0:0))])
  %task = llvm.mlir.addressof @main_op1_task : !llvm.ptr
  %n = llvm.mlir.constant(64 : i64) : i64
  llvm.call @kiln_parallel_for(%n, %n, %task, %slots) : (i64, i64, !llvm.ptr, !llvm.ptr) -> () loc("add1"("Add"("m.onnx":0:0)))
  %p = llvm.call @malloc(%x) : (i64) -> !llvm.ptr
  llvm.return
}
llvm.func internal @main_op1_task(%ctx: !llvm.ptr, %b: i64, %e: i64) {
  llvm.call @kiln_conv2d_nhwc_f32(%b) : (i64) -> ()
  llvm.return
}
