#ifndef KILN_PASSES_TD
#define KILN_PASSES_TD

include "mlir/Pass/PassBase.td"

def KilnInferShapes : Pass<"kiln-infer-shapes", "mlir::func::FuncOp"> {
  let summary = "Refine kiln result types, folding constants on the way";
  let description = [{
    Walks each function in order and recomputes every kiln op's result type
    from its operands. Folding is interleaved with inference because each
    enables the other: `kiln.shape` folds once its input is static, and a
    `kiln.reshape` gets a static result once its shape operand has folded to
    a constant (the Shape -> Gather -> Unsqueeze -> Concat -> Reshape chains
    of exported transformers). The function signature is updated to the
    refined result types. Fails on inconsistent shapes, naming the op.
  }];
  let dependentDialects = ["::kiln::KilnDialect"];
}

def KilnSymbolicDims : Pass<"kiln-symbolic-dims", "mlir::func::FuncOp"> {
  let summary = "Track unknown dims as expressions of the inputs' dims";
  let description = [{
    Runs the symbolic-dimension analysis (include/kiln/IR/SymbolicDims.h)
    over each function in order: every unknown input dim is a symbol (named
    by its ONNX dim_param, `kiln.dim_names` on the argument), and shape
    arithmetic (Shape, Gather, Slice, Concat, Unsqueeze, integer Add/Sub/
    Mul/Div/Max/Min, Where, Cast) carries expressions over them into the ops
    that take shapes (Reshape, Expand, ConstantOfShape, Tile, Range) and
    through elementwise, row, transpose, concat, gather and matmul ops.
    A dim whose expression is a constant becomes static in the result type
    (an Expand to [batch, 1, 768] has 1x768 known); each function result
    with unknown dims gets `kiln.dims`, one string per dim saying how it
    follows from the inputs ("batch", "past + new"). With concrete input
    shapes there are no symbols and nothing changes.

    ```mlir
    func.func @main(%k: tensor<1x4x?x16xf32> {kiln.dim_names = ["", "", "past", ""]},
                    %n: tensor<1x4x?x16xf32> {kiln.dim_names = ["", "", "new", ""]})
        -> (tensor<1x4x?x16xf32> {kiln.dims = ["1", "4", "past + new", "16"]})
    ```

    With `annotate-all`, every op's result of unknown dims gets `kiln.dims`
    too: what the analysis knows at each step, for tests and debugging.
  }];
  let options = [
    Option<"annotateAll", "annotate-all", "bool", /*default=*/"false",
           "Annotate every op result of unknown dims, not only the function's">,
  ];
  let dependentDialects = ["::kiln::KilnDialect"];
}

def KilnConvertLayout : Pass<"kiln-convert-layout", "mlir::func::FuncOp"> {
  let summary = "Move 2-D convolution chains to NHWC and fuse their epilogues";
  let description = [{
    Each NCHW `kiln.conv` with constant weights (static, f32, 2-D) becomes
    `kiln.conv2d_nhwc` between two transposes. The transposes then sink
    through elementwise ops (broadcast operands are re-laid out when they
    are constants or smaller than the result), keepdims reductions,
    concatenations and pooling (which switches to `channels_last`), and a
    transpose pair cancels, so data stays NHWC between convolutions and
    transposes remain only at the edges. A transpose that only moves size-1
    dims becomes a reshape. Runs the `kiln-fuse-epilogues` patterns too.

    ```mlir
    %0 = kiln.conv %x, %w, %b {...} : (tensor<1x3x8x8xf32>, ...) -> tensor<1x4x8x8xf32>
    %1 = kiln.relu %0 : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
    // becomes
    %t = kiln.transpose %x {perm = array<i64: 0, 2, 3, 1>} ...
    %c = kiln.conv2d_nhwc %t, %w bias %b {clamp_max = 0x7F800000 : f32, clamp_min = 0.0 : f32, ...}
    %1 = kiln.transpose %c {perm = array<i64: 0, 3, 1, 2>} ...
    ```
  }];
  let dependentDialects = ["::kiln::KilnDialect"];
}

def KilnFuseRowOps : Pass<"kiln-fuse-row-ops", "mlir::func::FuncOp"> {
  let summary = "Recognise Softmax, LogSoftmax and layer normalisation written as reductions";
  let description = [{
    Over the trailing axes of a static f32 tensor:
    `exp(x - max) / sum` becomes `kiln.softmax`, `s - log(sum(exp(s)))`
    (with `s = x - max`) becomes `kiln.softmax {log}`, and
    `(x - mean) / sqrt(mean((x - mean)^2) + eps)` (also with `d * d`, or
    `* reciprocal(...)`) becomes `kiln.layer_norm`, which then absorbs a
    following `* scale` and `+ bias` of one value per normalised element.
    These lower to row kernels that read each row once.
  }];
  let dependentDialects = ["::kiln::KilnDialect"];
}

def KilnFuseEpilogues : Pass<"kiln-fuse-epilogues", "mlir::func::FuncOp"> {
  let summary = "Fold per-channel scale/shift, bias, residual add and Relu/Clip into conv2d_nhwc";
  let description = [{
    The kernel computes `clamp(conv + bias + residual, lo, hi)` while the
    output tile is in registers. A single-use `kiln.conv2d_nhwc` absorbs, in
    that order: `kiln.mul`/`kiln.add` by per-channel constants (folded into
    the weights and bias: BatchNormalization), `kiln.add` of a tensor of the
    result's type (residual), and `kiln.relu` or `kiln.max`/`kiln.min` with
    a scalar constant (Relu, Clip, ReLU6).
  }];
  let dependentDialects = ["::kiln::KilnDialect"];
}

def KilnLowerToLinalg : Pass<"kiln-lower-to-linalg", "mlir::ModuleOp"> {
  let summary = "Lower kiln ops to linalg, tensor, arith and math on tensors";
  let description = [{
    Requires static shapes (run kiln-infer-shapes first, with input shapes
    specialised). Elementwise ops become `linalg.generic` with broadcasting
    indexing maps, so that upstream elementwise fusion applies; contractions,
    convolutions and pooling become `linalg.generic`/named ops with explicit
    padding. Each failure names the kiln op (and through its location the
    ONNX node) that could not be lowered. Function arguments (the model's
    inputs, owned by the caller) are marked `bufferization.writable = false`.
    Convolutions in NHWC, f32 matrix products and channels_last pooling
    become calls to Kiln's microkernels (declared as private functions in
    the module; their bitcode is linked in after translation to LLVM IR).
    With `use-kernels=false` (the GPU path, which has no kernel library)
    every op becomes linalg instead.
  }];
  let options = [
    Option<"useKernels", "use-kernels", "bool", /*default=*/"true",
           "Lower convolutions, matrix products, pooling and row ops to calls "
           "of Kiln's CPU microkernels">
  ];
  let dependentDialects = [
    "::mlir::bufferization::BufferizationDialect",
    "::mlir::linalg::LinalgDialect", "::mlir::tensor::TensorDialect",
    "::mlir::arith::ArithDialect", "::mlir::math::MathDialect",
    "::mlir::scf::SCFDialect", "::mlir::func::FuncDialect",
    "::mlir::memref::MemRefDialect"
  ];
}

def KilnStridedCopiesToLoops : Pass<"kiln-strided-copies-to-loops", "mlir::func::FuncOp"> {
  let summary = "Rewrite memref.copy between non-contiguous buffers as linalg.copy";
  let description = [{
    `finalize-memref-to-llvm` lowers a copy that involves a strided view to a
    call into MLIR's runner-utils library, which the Kiln runtime does not
    ship. As `linalg.copy` such copies become plain loops. Contiguous copies
    are left alone: they lower to `memcpy`.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def KilnDistinctResults : Pass<"kiln-distinct-results", "mlir::func::FuncOp"> {
  let summary = "Give every returned tensor its own value before bufferization";
  let description = [{
    Runs on linalg-on-tensors IR, right before one-shot bufferization. CSE
    can make two model outputs the same SSA value (two identical Gathers,
    an output listed twice); the function then returns one buffer twice,
    which upstream `buffer-results-to-out-params` does not handle (it
    crashes in MLIR 22). Every repeated return operand after its first
    occurrence becomes a `linalg.copy` into a fresh `tensor.empty`, so each
    output is written into its own caller-provided buffer.

    ```mlir
    return %v, %v : tensor<4xf32>, tensor<4xf32>
    // becomes
    %e = tensor.empty() : tensor<4xf32>
    %c = linalg.copy ins(%v : tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
    return %v, %c : tensor<4xf32>, tensor<4xf32>
    ```
  }];
  let dependentDialects = ["mlir::linalg::LinalgDialect", "mlir::tensor::TensorDialect"];
}

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

def KilnUntieSharedTensors : Pass<"kiln-untie-shared-tensors", "mlir::func::FuncOp"> {
  let summary = "Give each user of a shared tensor.empty or tensor constant its own";
  let description = [{
    CSE merges identical `tensor.empty` ops and identical constants, so every
    kernel that writes a tensor of one shape ends up writing into the same
    empty tensor, and every convolution of one shape reads the same
    parameter block (and a weight shared by many MatMuls is one value).
    The result is the same after bufferization (each write gets its own
    buffer; each constant becomes a `memref.get_global` of one global), but
    one-shot bufferization's in-place analysis gathers, for every operand,
    all uses of the operand's value: a value with N uses costs N^2. A chain
    of 1,500 matrix products took 53 s to analyse with a shared empty
    tensor; a chain of 50,000 MatMuls sharing one weight did not finish in
    300 s. Run just before bufferization, this pass clones the empty tensor
    or the constant (its attribute is uniqued, so no data is copied) for
    each user after the first.

    ```mlir
    %e = tensor.empty() : tensor<4x8xf32>
    %a = linalg.generic ... outs(%e : tensor<4x8xf32>)
    %b = linalg.generic ... outs(%e : tensor<4x8xf32>)
    // becomes
    %e = tensor.empty() : tensor<4x8xf32>
    %a = linalg.generic ... outs(%e : tensor<4x8xf32>)
    %e1 = tensor.empty() : tensor<4x8xf32>
    %b = linalg.generic ... outs(%e1 : tensor<4x8xf32>)
    ```
  }];
  let dependentDialects = ["::mlir::tensor::TensorDialect"];
}

def KilnConcatInPlace : Pass<"kiln-concat-in-place", "mlir::func::FuncOp"> {
  let summary = "Write the parts of concatenations into their slices of the result";
  let description = [{
    Runs on linalg-on-tensors IR, before bufferization. Each chain of
    `tensor.insert_slice` ops into a `tensor.empty` (a lowered Concat) is
    rebuilt so that every part is inserted as soon as it is computed, and
    the linalg op or kernel call that computes it writes into an
    `extract_slice` of the chain rather than into a tensor of its own:
    bufferized in place, the part is written once, where the concatenation
    keeps it. A chain whose parts are a leading subset of a larger chain's
    (DenseNet concatenates all earlier features at every layer) becomes an
    `extract_slice` of the larger one, so the family shares one buffer.
    One-shot bufferization still decides every buffer: a write that cannot
    be in place gets a copy.

    ```mlir
    %e = tensor.empty() : tensor<1x4x4x8xf32>
    %a = kiln.call_kernel @k(...) into %ea ...   // tensor<1x4x4x3xf32>
    %b = linalg.generic ... outs(%eb : tensor<1x4x4x5xf32>)
    %0 = tensor.insert_slice %a into %e[0, 0, 0, 0] [1, 4, 4, 3] [1, 1, 1, 1]
    %1 = tensor.insert_slice %b into %0[0, 0, 0, 3] [1, 4, 4, 5] [1, 1, 1, 1]
    // becomes
    %e = tensor.empty() : tensor<1x4x4x8xf32>
    %sa = tensor.extract_slice %e[0, 0, 0, 0] [1, 4, 4, 3] [1, 1, 1, 1]
    %a = kiln.call_kernel @k(...) into %sa ...
    %0 = tensor.insert_slice %a into %e[0, 0, 0, 0] [1, 4, 4, 3] [1, 1, 1, 1]
    %sb = tensor.extract_slice %0[0, 0, 0, 3] [1, 4, 4, 5] [1, 1, 1, 1]
    %b = linalg.generic ... outs(%sb : tensor<1x4x4x5xf32>)
    %1 = tensor.insert_slice %b into %0[0, 0, 0, 3] [1, 4, 4, 5] [1, 1, 1, 1]
    ```
  }];
  let dependentDialects = ["::mlir::tensor::TensorDialect"];
}

def KilnOutputsInPlace : Pass<"kiln-outputs-in-place", "mlir::func::FuncOp"> {
  let summary = "Compute a model output straight into its output argument, not into a buffer then copied";
  let description = [{
    Runs after buffer-results-to-out-params. A `memref.copy` into an output
    argument (used by nothing else) whose source is a whole statically
    shaped `memref.alloc` of the top-level block, seen through reshapes,
    expand/collapse_shape and casts, goes away: the alloc is replaced by a
    view of the output argument (collapse_shape then expand_shape to the
    alloc's type). Not done when anything uses the buffer after the copy.

    ```mlir
    %a = memref.alloc() : memref<1x4xf32>
    ... writes %a ...
    %r = memref.reshape %a(%shape) : (memref<1x4xf32>, memref<1xi64>) -> memref<4xf32>
    memref.copy %r, %out : memref<4xf32> to memref<4xf32>
    // becomes
    %a = memref.expand_shape %out [[0, 1]] output_shape [1, 4] : memref<4xf32> into memref<1x4xf32>
    ... writes %a ...
    ```
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
}

def KilnPlanMemory : Pass<"kiln-plan-memory", "mlir::ModuleOp"> {
  let summary = "Place the model function's intermediates in one workspace by liveness";
  let description = [{
    Runs after bufferization (and after outputs became arguments). Every
    statically shaped `memref.alloc` in the top-level block of a public
    function becomes a `memref.view` at a compile-time offset into a
    workspace buffer, added as the function's last argument. Buffers whose
    live ranges (allocation to last use of anything derived from them) are
    disjoint share memory; placement is largest-first at the lowest offset
    that fits. The workspace size in bytes is recorded as the module
    attribute `kiln.workspace_size`. Allocations in nested regions stay on
    the heap.

    With `debug-memory`, nothing is planned: every allocation keeps its own
    memory and is filled with NaN when it is made, so that reads of memory
    nobody wrote (or a planner bug, when compared with a planned run) show
    up as NaN in the outputs.

    ```mlir
    %a = memref.alloc() {alignment = 64 : i64} : memref<4x4xf32>
    // becomes, with %ws the new argument memref<NNNxi8>
    %a = memref.view %ws[%c0][] : memref<NNNxi8> to memref<4x4xf32>
    ```
  }];
  let options = [
    Option<"debugMemory", "debug-memory", "bool", "false",
           "no plan: fresh, NaN-filled memory for every allocation">,
  ];
  let dependentDialects = ["::mlir::memref::MemRefDialect", "::mlir::linalg::LinalgDialect",
                           "::mlir::arith::ArithDialect"];
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

def KilnApproximateMath : Pass<"kiln-approximate-math", "mlir::func::FuncOp"> {
  let summary = "f32 math.exp/erf/tanh as polynomial approximations instead of libm calls";
  let description = [{
    Applies upstream `populateMathPolynomialApproximationPatterns` to
    `math.exp`, `math.erf` and `math.tanh` on f32 (scalars or vectors), so
    that loops computing Softmax, GELU or Tanh have no calls and vectorize.

    ```mlir
    %y = math.erf %x : f32
    // becomes a branch-free rational/polynomial expression in arith ops
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::math::MathDialect"];
}

def KilnEmptyArguments : Pass<"kiln-empty-arguments", "mlir::func::FuncOp"> {
  let summary = "Pass buffers of zero elements to a public function as memref<0xT>";
  let description = [{
    The entry point takes each buffer as a bare pointer, which upstream's
    func-to-llvm gives only to memrefs whose layout it can express as
    strides; a static shape with a zero after the first dimension (an empty
    KV cache `1x4x0x16`, a zero-length sequence) is not one, and the whole
    function then stays unconverted. A buffer with no elements is never read
    or written, so each such argument of a public function becomes
    `memref<0xT>` (one pointer in the ABI, as before) and its uses take a
    zero-sized `memref.alloca` of the original type.

    ```mlir
    func.func @main(%past: memref<1x4x0x16xf32>, ...)
    // becomes
    func.func @main(%past: memref<0xf32>, ...) {
      %0 = memref.alloca() : memref<1x4x0x16xf32>
      ... uses of %past use %0 ...
    ```
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
}

def KilnFlattenGlobals : Pass<"kiln-flatten-globals", "mlir::ModuleOp"> {
  let summary = "Store N-d constant memref.globals as 1-D, viewed through expand_shape";
  let description = [{
    LLVM represents an N-d constant as nested arrays: a 512x512x3x3 weight
    becomes 786,432 three-element arrays, and translating ResNet-18's
    weights that way takes seconds. A 1-D global is one flat array built
    from the raw buffer. Each `memref.get_global` of a rewritten global
    becomes a `memref.get_global` of the flat one plus a
    `memref.expand_shape`, which is free (a view).

    ```mlir
    memref.global "private" constant @w : memref<2x3xf32> = dense<...>
    // becomes
    memref.global "private" constant @w : memref<6xf32> = dense<...>
    ```
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
}

def KilnEmitEntryPoint : Pass<"kiln-emit-entry-point", "mlir::ModuleOp"> {
  let summary = "Add the `void NAME(void **buffers)` entry point for the runtime";
  let description = [{
    Runs on the LLVM dialect after `func` lowering with the bare-pointer
    calling convention. Adds an externally visible function that takes one
    array of buffer pointers (inputs, then outputs, in signature order, then
    the workspace when `kiln-plan-memory` added one) and calls the model
    function with them, plus a constant i64 `NAME_workspace_size` (the
    module's `kiln.workspace_size`, or 0). This is the only ABI the runtime
    knows, so it needs no LLVM or MLIR types.
  }];
  let options = [
    Option<"entryName", "entry-name", "std::string", "\"kiln_entry\"",
           "name of the generated entry point">,
    Option<"modelFunction", "model-function", "std::string", "\"main\"",
           "the lowered model function to wrap">
  ];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def KilnGpuLoops : Pass<"kiln-gpu-loops", "mlir::func::FuncOp"> {
  let summary = "Bufferized linalg to loop nests that all become GPU kernels";
  let description = [{
    The GPU path's first step after bufferization (NVPTX targets). Every
    `linalg.generic` has its loops interchanged so that parallel loops come
    first (a matrix product is then parallel over rows and columns, with the
    reduction inside each thread, instead of parallel over rows only); every
    `memref.copy` becomes a `linalg.copy`; every linalg op becomes loops
    (`scf.parallel` outside, `scf.for` for reductions). A loop nest left
    with no parallel loop (a full reduction) is wrapped in a one-iteration
    `scf.parallel`, so that upstream `convert-parallel-loops-to-gpu` makes it
    a one-thread kernel rather than leaving it on the host, where it would
    read device memory.

    Then, for one thread per output element (or per register tile):
    - a contraction with enough outputs (a matrix product, a convolution)
      is tiled so that each thread computes up to 8x8 outputs (along the
      output's innermost dim and a dim that one input does not use: rows,
      output channels), with the reduction loops outermost and the tile
      unrolled inside, while at least 2^16 threads remain;
    - every scf.parallel is collapsed into one loop, so that consecutive
      threads take consecutive elements of the row-major output (coalesced);
    - an output element that a reduction loop reads and writes in every
      iteration is carried in a register (iter_args) when every other buffer
      of the loop is known to be other memory;
    - float arithmetic gets `fastmath<contract>` (FMA).
  }];
  let dependentDialects = ["mlir::scf::SCFDialect", "mlir::linalg::LinalgDialect"];
}

def KilnGpuFuseElementwise : Pass<"kiln-gpu-fuse-elementwise", "mlir::func::FuncOp"> {
  let summary = "Elementwise fusion that never recomputes a producer";
  let description = [{
    Upstream elementwise fusion (`linalg-fuse-elementwise-ops`) also fuses a
    producer into a consumer that reads it through a map that drops loops:
    the GELU before a matrix product is then evaluated once per (row,
    column, k), K times too often. The CPU path never meets this (its
    matrix products are kernel calls); the GPU path does. This pass fuses
    only where the consumer reads the producer's result through a
    permutation of all its loops, so each producer element is computed once.
  }];
  let dependentDialects = ["mlir::linalg::LinalgDialect"];
}

def KilnGpuSplitReductions : Pass<"kiln-gpu-split-reductions", "mlir::func::FuncOp"> {
  let summary = "Split long reductions with few outputs into two kernels";
  let description = [{
    On tensors, before bufferization (NVPTX targets). One GPU thread per
    output element leaves a row reduction with few rows nearly idle: a
    layer norm over 128 rows of 256 is 128 threads, each reading 256
    values in series (and 1 KB apart from its neighbours). A linalg op with
    one reduction loop of K >= 64 iterations and fewer than 2^14 outputs is
    split by upstream `linalg::splitReduction`: the reduction loop becomes
    (K/r, r) with r parallel and innermost, so a first op computes r partial
    results per output (consecutive threads read consecutive elements) and
    a second combines them. r is the largest power of two with r * r <= K
    that divides K and keeps the first op at most 2^16 threads; no split
    below r = 8. An input read at a constant index of a unit dim (the mean
    in x - mean keeps ONNX's keepdims dim: (d0, d1, 0)) is collapsed first,
    since upstream's split builds invalid maps from it. The partials' fill,
    and the original init's when it is a fill used by nothing else, are
    dropped: each of the two ops takes the fill's value at its first
    reduction step (a select on the reduction index, free in a loop this
    short once unrolled), so no fill kernel runs. Each split is one
    level; the partial sums change the order of float additions (as any
    parallel reduction does). `kiln-run --gpu-tensor-passes` runs the
    result on the CPU.
  }];
  let dependentDialects = ["mlir::linalg::LinalgDialect", "mlir::tensor::TensorDialect",
                           "mlir::arith::ArithDialect"];
}

def KilnGpuMmaContractions : Pass<"kiln-gpu-mma-contractions", "mlir::func::FuncOp"> {
  let summary = "f16 and bf16 matrix products on tensor cores (WMMA m16n16k16, mma.sync m16n8k16)";
  let description = [{
    On bufferized linalg, before `kiln-gpu-tile-contractions` (NVPTX
    targets). A `linalg.generic` C[batch][m][n] += A[batch][m][k] *
    B[batch][k][n] in f16 or bf16 (body `out + x * y`, one reduction dim; A
    and B each with the batch dims or none) on static identity-layout
    memrefs, with M, N and K multiples of 16 and no input in the output's
    memory, becomes one `gpu.launch` of blocks of 4 warps, each warp
    computing a 16x16 tile of C; grid (ceil(N / 64), M / 16, batch). The
    accumulators start as C, or as the value of a `linalg.fill` of C right
    before the op (or of a fill copied into it), which is then dropped.
    - f16: `gpu.subgroup_mma_load_matrix` (A with leading dim K, B and C
      with N), `gpu.subgroup_mma_compute` per step of 16 along k, one
      `gpu.subgroup_mma_store_matrix`; f16 accumulators. A and B must start
      at multiples of 32 bytes and C of 16 (WMMA's rule; what each buffer's
      start is known to be aligned to, as for
      `kiln-gpu-vectorize-elementwise`: a model input is not).
    - bf16 (option `bf16`, sm_80 and later): per step of 16 along k and
      16x8 half of the tile, one `nvvm.mma.sync` m16n8k16 bf16 with f32
      accumulators, its registers loaded per lane in the PTX fragment layout
      (A as 4-byte pairs along rows, B as pairs of elements down columns),
      rounded to bf16 once at the store. A and C must start at multiples of
      4 bytes.
    `emulate` builds the same grid, warps and steps for the CPU (`kiln-run
    --gpu-tensor-passes`): f16 fragment operations as loops that address
    elements as WMMA does; for bf16 the same per-lane loads and stores,
    with each mma.sync computed from all lanes' registers through the
    inverse of the fragment layout.
  }];
  let options = [
    Option<"emulate", "emulate", "bool", /*default=*/"false",
           "Build the kernel as CPU loops (testing the index arithmetic)">,
    Option<"globalAlignment", "global-alignment", "int64_t", /*default=*/"0",
           "Bytes every global's data is aligned to (the GPU's weights: 256); "
           "0: each global's own alignment attribute">,
    Option<"bf16", "bf16", "bool", /*default=*/"true",
           "Take bf16 products too (mma.sync bf16 needs sm_80 or later)">,
  ];
  let dependentDialects = ["mlir::gpu::GPUDialect", "mlir::scf::SCFDialect",
                           "mlir::memref::MemRefDialect", "mlir::arith::ArithDialect",
                           "mlir::vector::VectorDialect", "mlir::NVVM::NVVMDialect",
                           "mlir::LLVM::LLVMDialect"];
}

def KilnGpuTileContractions : Pass<"kiln-gpu-tile-contractions", "mlir::func::FuncOp"> {
  let summary = "Large matrix products and convolutions as shared-memory tiled GPU kernels";
  let description = [{
    On bufferized linalg, before `kiln-gpu-loops` (NVPTX targets). A
    `linalg.generic` whose body is `out + x * y` on static f32 memrefs, with
    an output map that is a permutation of its parallel dims, is read as
    C[batch][M][N] += A[batch][M][K] * B[batch][K][N] over groups of its own
    dims (N: the parallel dims only the input using the output's innermost
    dim reads; M: those only the other input reads; batch: the rest; K:
    every reduction dim), the operands read through their own indexing maps
    (an implicit GEMM for convolutions). It becomes one `gpu.launch` of
    blocks of 256 threads, each block computing a 128x128 (K-slices of 8)
    or 64x64 (slices of 16) tile of C, each thread an 8x8 or 4x4 register
    tile strided by 16; per slice, A^T and B are staged in workgroup memory
    between two `gpu.barrier`s, each thread's share of the next slice read
    into registers before the current slice's multiply-adds (consecutive threads along each operand's
    contiguous dim; tile rows padded against bank conflicts). The larger
    tile is taken when it makes at least `min-blocks` blocks and wastes at
    most a fifth of its outputs on the edges; else the less wasteful one
    that has enough blocks, if it wastes at most half (a depthwise
    convolution, M = 1, keeps `kiln-gpu-loops`' kernel); none where the
    grid's y or z would pass 65535, or where an input may be the output's
    memory. Out-of-range elements are loaded as zeros and not stored. A
    `linalg.fill` of C right before the op, or a copy into C from a buffer
    only a fill wrote, is taken over (C = fill value + sums), so no fill or
    copy kernel runs.
    `emulate` builds the same phases for the CPU (blocks and threads as
    loops, one phase for all threads before the next), which `kiln-run
    --gpu-tensor-passes` runs.
  }];
  let options = [
    Option<"emulate", "emulate", "bool", /*default=*/"false",
           "Build the kernel as CPU loops (testing the index arithmetic)">,
    Option<"minBlocks", "min-blocks", "int64_t", /*default=*/"128",
           "Least number of blocks a tiled kernel must have">,
  ];
  let dependentDialects = ["mlir::gpu::GPUDialect", "mlir::scf::SCFDialect",
                           "mlir::memref::MemRefDialect", "mlir::math::MathDialect",
                           "mlir::arith::ArithDialect"];
}

def KilnGpuVectorizeElementwise
    : Pass<"kiln-gpu-vectorize-elementwise", "mlir::func::FuncOp"> {
  let summary = "Elementwise ops as GPU threads of W elements with 128-bit vector accesses";
  let description = [{
    On bufferized linalg, after `kiln-gpu-block-reductions` and before
    `kiln-gpu-loops` (NVPTX targets). A `linalg.generic` whose loops are
    all parallel (or a `linalg.map`, `linalg.fill` or `memref.copy`, as
    its generic), on static memrefs, with an output map that is a
    permutation, becomes an `scf.parallel` over the output's dims before G
    and over G / W, G being the longest run of the output's innermost dims
    that each operand either reads as its own innermost dims in the same
    order, contiguously (it is read or written with `vector.load` /
    `vector.store` of W elements, G collapsed to one dim), or does not read
    (one `memref.load`, broadcast). W is the largest power of two with
    W x element bits <= 128 that divides G's element count and at which at
    least one vector operand is fully aligned; each access carries the
    alignment its operand has (the largest power of two dividing W, its
    static offset and its strides outside G, times the element bytes). None
    where W < 2, where a vector operand has elements of under 8 bits, or
    where the body holds an op that does not map elementwise onto vectors
    (or a `linalg.index` of a dim in G); the op then keeps kiln-gpu-loops' one
    thread per element. The alignment also respects what each buffer's
    start is known to be aligned to: an output argument 64 bytes (the
    entry point's ABI), an input argument only its element size, a
    workspace view the gcd of its byte shift and 64, a global
    `global-alignment` bytes (0: its own alignment attribute), an
    allocation its attribute. Also run by `kiln-run --gpu-tensor-passes`.
  }];
  let options = [
    Option<"globalAlignment", "global-alignment", "int64_t", /*default=*/"0",
           "Bytes every global's data is aligned to (the GPU's weights: 256); "
           "0: each global's own alignment attribute">,
  ];
  let dependentDialects = ["mlir::vector::VectorDialect", "mlir::linalg::LinalgDialect",
                           "mlir::scf::SCFDialect",
                           "mlir::memref::MemRefDialect", "mlir::arith::ArithDialect"];
}

def KilnGpuBlockReductions : Pass<"kiln-gpu-block-reductions", "mlir::func::FuncOp"> {
  let summary = "Reductions with few outputs and long rows: one GPU block per output";
  let description = [{
    On bufferized linalg, after `kiln-gpu-tile-contractions` and before
    `kiln-gpu-loops` (NVPTX targets). A `linalg.generic` with one init, at
    most `max-outputs` outputs and rows of at least `min-row` elements
    (its reduction dims flattened), whose body is `yield combine(out,
    g(inputs))` with `combine` an op with a neutral element (add, mul, max,
    min, and, or, xor), `out` used nowhere else and g free of memory
    effects, whose inputs that run along the row do so in their innermost
    dim of more than one element, and whose inputs are not the output's
    memory, becomes one
    `gpu.launch` with a block of T threads per output (T: the least power
    of two >= the row, from 32 to 256). Thread t folds g over elements t,
    t + T, ... from the neutral element; the T partials are combined in
    workgroup memory by log2(T) halving steps, each followed by a
    `gpu.barrier`; thread 0 combines the total into the output, or into the
    value of a `linalg.fill` of the output right before the op (or of the
    fill of a buffer copied into the output right before the op), which is
    then dropped (no fill or copy kernel). A reduction to one value is one
    block. `emulate`
    builds the same phases for the CPU (kiln-run --gpu-tensor-passes).
  }];
  let options = [
    Option<"emulate", "emulate", "bool", /*default=*/"false",
           "Build the kernel as CPU loops (testing the index arithmetic)">,
    Option<"maxOutputs", "max-outputs", "int64_t", /*default=*/"16384",
           "Most outputs a block-per-output kernel is built for">,
    Option<"minRow", "min-row", "int64_t", /*default=*/"64",
           "Least row length a block-per-output kernel is built for">,
  ];
  let dependentDialects = ["mlir::gpu::GPUDialect", "mlir::scf::SCFDialect",
                           "mlir::memref::MemRefDialect", "mlir::arith::ArithDialect"];
}

def KilnMergeGpuModules : Pass<"kiln-merge-gpu-modules", "mlir::ModuleOp"> {
  let summary = "Move every outlined kernel into one gpu.module";
  let description = [{
    `gpu-kernel-outlining` makes one `gpu.module` per launch, each with a
    function of the same name. Kiln loads one PTX module per model, so this
    moves every kernel into the module `kiln_kernels`, names each after the
    module it came from (unique), and retargets the `gpu.launch_func` ops.
  }];
  let dependentDialects = ["mlir::gpu::GPUDialect"];
}

def KilnGpuHostCalls : Pass<"kiln-gpu-host-calls", "mlir::ModuleOp"> {
  let summary = "Host code of a CUDA model: kernel launches and weights through Kiln's runtime";
  let description = [{
    Runs on the host side after `gpu-to-llvm` (bare pointers for host and
    kernels). Each `gpu.launch_func` becomes a call to the runtime's
    `kiln_cuda_launch_kernel(kernel index, grid x/y/z, block x/y/z, dynamic
    shared memory, void **args)`, where args[i] points at the i-th kernel
    parameter, as `cuLaunchKernel` takes them; the kernels' names, in index
    order, are the module's `kiln.gpu_kernels`, their parameter counts
    `kiln.gpu_kernel_arities`. Kiln's runtime, not MLIR's
    `mgpu*` wrappers (unversioned, not shipped by Debian), owns loading and
    launching.

    Every constant global the host code addresses becomes an offset into one
    weights buffer on the device, a new last argument of the model function:
    each such global gets `kiln.gpu_constant_offset` and the module
    `kiln.gpu_constants_size`, for the driver to pack the bytes and drop the
    globals from the host code.
  }];
  let dependentDialects = ["mlir::LLVM::LLVMDialect"];
}

#endif
