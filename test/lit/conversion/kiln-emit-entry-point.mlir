// RUN: kiln-opt %s --kiln-emit-entry-point --split-input-file --verify-diagnostics | FileCheck %s
// RUN: kiln-opt %s --kiln-emit-entry-point="entry-name=resnet_run" --split-input-file --verify-diagnostics | FileCheck %s --check-prefix=NAMED

// The model function becomes internal with noalias buffers (the ABI asks
// for distinct buffers); the entry point loads buffer i from slot i of its
// one argument and passes it on, in order.
// CHECK-LABEL: llvm.func internal @main(%{{.*}}: !llvm.ptr {llvm.noalias}, %{{.*}}: !llvm.ptr {llvm.noalias})
// CHECK: llvm.func @kiln_entry(%[[BUFS:.*]]: !llvm.ptr)
// CHECK: %[[S0:.*]] = llvm.getelementptr %[[BUFS]][0]
// CHECK: %[[B0:.*]] = llvm.load %[[S0]] : !llvm.ptr -> !llvm.ptr
// CHECK: %[[S1:.*]] = llvm.getelementptr %[[BUFS]][1]
// CHECK: %[[B1:.*]] = llvm.load %[[S1]] : !llvm.ptr -> !llvm.ptr
// CHECK: llvm.call @main(%[[B0]], %[[B1]])
// NAMED: llvm.func @resnet_run(
llvm.func @main(%in: !llvm.ptr, %out: !llvm.ptr) {
  llvm.return
}

// -----

// A memref descriptor argument (dynamic shape) has no place in the ABI.
// expected-error @+1 {{is not a bare pointer}}
llvm.func @main(%in: !llvm.ptr, %size: i64) {
  llvm.return
}
