// kiln -> linalg on tensors -> buffers, and the buffer-level passes that the CPU
// and GPU pipelines share (memory plan, entry point).
#ifndef KILN_CONVERSION_PASSES_TD
#define KILN_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def KilnLowerToLinalg : Pass<"kiln-lower-to-linalg", "mlir::ModuleOp"> {
  let summary = "Lower kiln ops to linalg, tensor, arith and math on tensors";
  let description = [{
    Dims unknown at compile time stay run-time values where
    kiln-symbolic-dims can say how they follow from the inputs' dims and
    the op's lowering takes them (elementwise ops, transposes, reshapes,
    slices, reductions, matrix products; others need concrete input shapes
    and say so, naming the op). Elementwise ops become `linalg.generic` with broadcasting
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
    "::mlir::affine::AffineDialect",
    "::mlir::memref::MemRefDialect"
  ];
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

    Allocations of run-time size in the top-level block (dims known only
    at run time) go into one block of memory, allocated where the first of
    them was: buffers whose sizes are the same product of the same values
    share slots by their live ranges, the slots lie end to end, and the
    offsets and the block's size are computed there from those values. An
    allocation whose dims are computed later (from data read at run time)
    keeps its own.

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

def KilnExpandBf16 : Pass<"kiln-expand-bf16", "mlir::func::FuncOp"> {
  let summary = "bf16 arithmetic in f32, and bf16 conversions as integer ops";
  let description = [{
    Upstream's float emulation (bf16 arithmetic computed in f32 between an
    `arith.extf` and an `arith.truncf`) followed by its bf16 expansion
    (`arith.extf` from bf16 a shift, `arith.truncf` to bf16 a rounding to
    nearest even in integer ops), so that no target needs compiler-rt's
    `__truncsfbf2`: LLVM calls it for every f32 -> bf16 conversion on CPUs
    without a bf16 instruction (AVX2 x86-64), which Kiln's JIT and
    Debian's libgcc do not have.

    ```mlir
    %y = arith.truncf %x : f32 to bf16
    // becomes bitcast to i32, add 0x7fff + lsb, shift right by 16, trunc
    // to i16, bitcast to bf16 (NaN kept quiet)
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
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

def KilnRuntimeDimsArguments : Pass<"kiln-runtime-dims-arguments", "mlir::ModuleOp"> {
  let summary = "Give the model function its dims known only at run time in one i64 array";
  let description = [{
    The entry point takes bare pointers, which carry no sizes. In a model
    function whose buffers have dims known only at run time (see
    kiln-lower-to-linalg), each such argument becomes `memref<0xT>` (one
    pointer, as before) rebuilt inside with `memref.reinterpret_cast` from
    its sizes, which come from one new last argument `memref<Nxi64>`: the
    dynamic dims of every argument in order (inputs, then outputs).

    It also adds `func.func @MODEL_dims(memref<Nxi64>) -> i64`, which the
    runtime calls first with the inputs' entries filled in: it checks that
    inputs agree on every shared symbol (returning 1 + the index of the
    first entry that disagrees, or 0) and writes the outputs' entries, from
    each output's `kiln.dim_map` over the symbols that
    `kiln.runtime_symbols` says where to read. The module gets
    `kiln.runtime_dims = N`.
  }];
  let options = [
    Option<"modelFunction", "model-function", "std::string", /*default=*/"\"main\"",
           "The model function">
  ];
  let dependentDialects = ["::mlir::memref::MemRefDialect", "::mlir::affine::AffineDialect",
                           "::mlir::arith::ArithDialect"];
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

#endif
