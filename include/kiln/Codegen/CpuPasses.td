// CPU code generation: elementwise fusion, loop nests as parallel functions,
// kernel-call profiling.
#ifndef KILN_CODEGEN_CPUPASSES_TD
#define KILN_CODEGEN_CPUPASSES_TD

include "mlir/Pass/PassBase.td"

def KilnFuseElementwise : Pass<"kiln-fuse-elementwise", "mlir::func::FuncOp"> {
  let summary = "Fuse elementwise linalg.generic ops, bounding the size of a fused body";
  let description = [{
    Upstream's elementwise fusion (the patterns and canonicalizations of
    `linalg-fuse-elementwise-ops`) with one more rule: a producer is not
    fused into its consumer when their bodies together would pass
    `max-body-ops` operations. Each fusion copies the producer's body, so
    an unbounded chain of N elementwise nodes costs O(N^2) (a 10,000-node
    chain took 71 s); bounded, it is cut into kernels of at most
    `max-body-ops` ops and compiles in linear time. Real models' chains
    are far below the bound.

    ```mlir
    // a chain of 300 elementwise generics, max-body-ops = 128
    // becomes 3 generics of at most 128 body ops each
    ```
  }];
  let options = [
    Option<"maxBodyOps", "max-body-ops", "int64_t", "64",
           "The most operations a fused body may have">
  ];
  let dependentDialects = ["::mlir::linalg::LinalgDialect", "::mlir::tensor::TensorDialect",
                           "::mlir::affine::AffineDialect"];
}

def KilnOutlineLoopNests : Pass<"kiln-outline-loop-nests", "mlir::ModuleOp"> {
  let summary = "Move each top-level linalg op on memrefs into a function with noalias buffers";
  let description = [{
    Runs after bufferization and the memory plan. Each top-level linalg op
    of a public function whose buffers have static shapes and identity
    layouts becomes a call of a new private function `NAME_opN` taking its
    operands (and any values its body uses from outside, constants cloned
    in). A buffer argument gets `llvm.noalias` when no other argument is a
    view of the same buffer. Planned intermediates share one workspace, so
    this is how LLVM learns that a loop's operands are distinct; inlining
    turns it into alias scopes limited to that op.

    Inside the new function an all-parallel `linalg.generic` has the loops
    after its thread-split loop folded into one where every operand keeps
    them contiguous (`memref.collapse_shape`); one whose innermost loop
    stays narrow (8-256 iterations: NHWC channels times a per-channel
    operand) becomes loops here, the innermost marked
    `llvm.loop.unroll.disable`. Either way LLVM vectorises along contiguous
    memory instead of unrolling a short inner loop and vectorising the
    one around it with gathers.

    ```mlir
    linalg.generic {...} ins(%a : memref<8xf32>) outs(%b : memref<8xf32>) {...}
    // becomes
    call @main_op0(%a, %b) : (memref<8xf32>, memref<8xf32>) -> ()
    func.func private @main_op0(%arg0: memref<8xf32> {llvm.noalias}, %arg1: memref<8xf32> {llvm.noalias})
    ```
  }];
  let dependentDialects = ["::mlir::func::FuncDialect", "::mlir::LLVM::LLVMDialect"];
}

def KilnMergeDuplicateFunctions : Pass<"kiln-merge-duplicate-functions", "mlir::ModuleOp"> {
  let summary = "Keep one of each set of identical private functions";
  let description = [{
    Runs after `kiln-outline-loop-nests`. A private `func.func` whose type,
    attributes (other than its name) and body equal those of an earlier
    one, locations aside, is erased and its calls go to the earlier one.

    Why: a network repeats its layers, and each repeat's ops outline into
    functions that differ only in name (weights are arguments), so LLVM
    optimised and compiled the same code once per layer. A 4-layer GPT-2
    decoder's 72 outlined functions are 15 distinct ones. This is what the
    one compile for every shape pays at a first call; IREE deduplicates
    its dispatches for the same reason.

    ```mlir
    func.func private @main_op0(%a: memref<8xf32>) { ... }
    func.func private @main_op1(%a: memref<8xf32>) { ... same body ... }
    // call @main_op1(%x) becomes call @main_op0(%x); @main_op1 is erased
    ```
  }];
  let dependentDialects = ["::mlir::func::FuncDialect"];
}

def KilnParallelizeCalls : Pass<"kiln-parallelize-calls", "mlir::ModuleOp"> {
  let summary = "Run calls marked kiln.parallel over the runtime's thread pool";
  let description = [{
    Runs on the LLVM dialect. A call marked `kiln.parallel = array<i64:
    trips, grain>`, whose last two arguments are an i64 `[begin, end)`
    range of a parallel loop (kiln-outline-loop-nests makes these), becomes
    a call of the runtime's `kiln_parallel_for(trips, grain, task, slots)`:
    the other arguments go into 8-byte stack slots, and `CALLEE_task(slots,
    begin, end)` loads them back and calls the callee on one chunk.

    ```mlir
    llvm.call @main_op3(%a, %b, %c0, %c64) {kiln.parallel = array<i64: 64, 4>}
    // becomes
    llvm.store %a, %slot0 ...
    llvm.call @kiln_parallel_for(%c64, %c4, %task, %slots)
    llvm.func internal @main_op3_task(%slots: !llvm.ptr, %begin: i64, %end: i64)
    ```
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def KilnProfileKernels : Pass<"kiln-profile-kernels", "mlir::ModuleOp"> {
  let summary = "Bracket every kernel call of the model with the runtime's profiling hooks";
  let description = [{
    Runs on the LLVM dialect, after kiln-parallelize-calls, when a model is
    compiled with profiling on (nothing else adds these calls, so profiling
    costs nothing unless asked for). In every public function (the model),
    each call of a kernel (an outlined loop nest, a kiln_parallel_for, a
    microkernel) and each memcpy/memset becomes

    ```mlir
    %t = llvm.call @kiln_profile_begin(%name) : (!llvm.ptr) -> i64
    llvm.call @main_op3(...)
    llvm.call @kiln_profile_end(%name, %kernel, %flops, %t)
    ```

    `name` says which ONNX nodes the kernel computes, taken from the call's
    location ("node (Op) + node (Op)"), `kernel` names the function that
    runs, and `flops` is the call's `kiln.flops` attribute (set by the
    lowerings that know the count), or 0.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

#endif
