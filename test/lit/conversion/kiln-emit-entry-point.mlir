// RUN: kiln-opt %s --kiln-emit-entry-point --split-input-file --verify-diagnostics | FileCheck %s
// RUN: kiln-opt %s --kiln-emit-entry-point="entry-name=resnet_run" --split-input-file --verify-diagnostics | FileCheck %s --check-prefix=NAMED

// The model function becomes internal with noalias buffers (the ABI asks
// for distinct buffers); the entry point loads buffer i from slot i of its
// one argument and passes it on, in order.
// Both are entry glue, which LLVM's SLP vectorizer skips (TargetEmitter).
// CHECK-LABEL: llvm.func internal @main(%{{.*}}: !llvm.ptr {llvm.noalias}, %{{.*}}: !llvm.ptr {llvm.noalias})
// CHECK-SAME: passthrough = ["kiln-entry-glue"]
// CHECK: llvm.func @kiln_entry(%[[BUFS:.*]]: !llvm.ptr)
// CHECK-SAME: passthrough = ["kiln-entry-glue"]
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

// -----

// Run-time dims: `kiln_entry_dims` wraps the model's dims function; both are
// entry glue too, and a passthrough attribute already there is kept.
// CHECK-LABEL: llvm.func internal @main_dims(%{{.*}}: !llvm.ptr) -> i64
// CHECK-SAME: passthrough = ["nounwind", "kiln-entry-glue"]
// CHECK: llvm.func @kiln_entry_dims(%{{.*}}: !llvm.ptr) -> i64
// CHECK-SAME: passthrough = ["kiln-entry-glue"]
module attributes {kiln.runtime_dims = 1 : i64} {
  llvm.func @main(%in: !llvm.ptr) {
    llvm.return
  }
  llvm.func @main_dims(%dims: !llvm.ptr) -> i64 attributes {passthrough = ["nounwind"]} {
    %r = llvm.mlir.constant(-1 : i64) : i64
    llvm.return %r : i64
  }
}
