// GPU code generation: fusion, hand-built kernels (tensor cores, shared-memory
// tiles, block reductions, vector accesses), loops to kernels, host calls.
#ifndef KILN_CODEGEN_GPUPASSES_TD
#define KILN_CODEGEN_GPUPASSES_TD

include "mlir/Pass/PassBase.td"

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
    With `tf32` (what float32 models get on sm_80 and later unless
    `--gpu-precision=fp32`), the products run on tensor cores: tiles of
    128x128 (K-slices of 16) or 64x64 (32), the 8 warps as 2 x 4, each
    warp a 64x32 (or 32x16) tile of C as `nvvm.mma.sync` m16n8k8 with
    `.tf32` operands and f32 accumulators. Slices are staged in two
    workgroup buffers with `nvgpu.device_async_copy` (cp.async; slice i + 1
    in flight while slice i is multiplied, one barrier per slice), 16 bytes
    per copy where the operand is contiguous and known to be 16-byte
    aligned (`global-alignment` for globals), else 4; fragments are rounded
    to TF32 (to nearest, ties away) as they are loaded, and each operand's
    slice is kept K-major or x-major, padded, so that neither staging nor
    fragment loads have bank conflicts. The launch names its kernel
    `tf32_tiles` (kiln-merge-gpu-modules then asks for two blocks per SM).
    `emulate` builds the same phases for the CPU (blocks and threads as
    loops, one phase for all threads before the next), which `kiln-run
    --gpu-tensor-passes` runs; with `tf32`, every lane's fragments are
    loaded first and each mma.sync is computed from them through the
    inverse of the fragment layout.
  }];
  let options = [
    Option<"emulate", "emulate", "bool", /*default=*/"false",
           "Build the kernel as CPU loops (testing the index arithmetic)">,
    Option<"minBlocks", "min-blocks", "int64_t", /*default=*/"128",
           "Least number of blocks a tiled kernel must have">,
    Option<"productMinBlocks", "product-min-blocks", "int64_t", /*default=*/"0",
           "Least number of blocks for a matrix product (one K dim, operands "
           "read by projected permutations) that no tile fits at min-blocks "
           "(0: none); convolutions keep min-blocks">,
    Option<"tf32", "tf32", "bool", /*default=*/"false",
           "Multiply on TF32 tensor cores (mma.sync m16n8k8, sm_80 and later)">,
    Option<"globalAlignment", "global-alignment", "int64_t", /*default=*/"0",
           "Alignment in bytes of buffers from memref.get_global (the device's "
           "weights); 0: their own alignment attribute. Decides where TF32 "
           "staging copies 16 bytes at a time">,
  ];
  let dependentDialects = ["mlir::gpu::GPUDialect", "mlir::scf::SCFDialect",
                           "mlir::memref::MemRefDialect", "mlir::math::MathDialect",
                           "mlir::arith::ArithDialect", "mlir::LLVM::LLVMDialect",
                           "mlir::NVVM::NVVMDialect",
                           "mlir::nvgpu::NVGPUDialect", "mlir::vector::VectorDialect"];
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
    A kernel outlined as `tf32_tiles` (kiln-gpu-tile-contractions' TF32
    kernels) gets `nvvm.minctasm = 2` (ptxas keeps it within 128 registers,
    two blocks per SM) and 16-byte aligned workgroup buffers.
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
