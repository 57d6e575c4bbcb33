// Pass pipelines and registration: the one place that knows the passes of
// every phase and their order.
#include "kiln/Pipelines/Pipelines.h"

#include "kiln/Codegen/CpuPasses.h"
#include "kiln/Codegen/GpuPasses.h"
#include "kiln/Conversion/Passes.h"
#include "kiln/Passes/Passes.h"

#include "mlir/Conversion/BufferizationToMemRef/BufferizationToMemRef.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/OneShotAnalysis.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace kiln {

void buildKilnOptimizationPipeline(OpPassManager &pm) {
  pm.addNestedPass<func::FuncOp>(createKilnInferShapes());
  // Rounds of sweeps, inference and folding until no dim becomes known
  // (at most 8; models without unknown dims return at once): Swin's
  // window pads and masks with a run-time batch become known stage after
  // stage.
  KilnSymbolicDimsOptions symbolic;
  symbolic.rounds = 8;
  pm.addNestedPass<func::FuncOp>(createKilnSymbolicDims(symbolic));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void buildLowerToLinalgPipeline(OpPassManager &pm, const LoweringOptions &opts) {
  if (opts.fuseRowOps)
    pm.addNestedPass<func::FuncOp>(createKilnFuseRowOps());
  if (opts.convertLayout) {
    pm.addNestedPass<func::FuncOp>(createKilnConvTo2D());
    pm.addNestedPass<func::FuncOp>(createKilnConvertLayout());
    pm.addPass(createCanonicalizerPass());
  }
  KilnLowerToLinalgOptions linalgOpts;
  linalgOpts.useKernels = opts.useKernels;
  pm.addPass(createKilnLowerToLinalg(linalgOpts));
  pm.addPass(createCanonicalizerPass());
  // Ops that only the run-time dims made distinct at the kiln level (each
  // layer's copy of a padding mask, reshaped to dims gathered from that
  // layer's own tensors) are the same once lowered: one of them, not one
  // per layer, and elementwise fusion then keeps the mask out of each
  // layer's attention-score loop, as with static shapes (where kiln-level
  // CSE merged them).
  pm.addPass(createCSEPass());
}

/// Repeated return values made distinct, one-shot bufferization, and
/// outputs as caller-provided buffers (the runtime allocates them): shared
/// by the CPU and GPU pipelines.
static void addBufferizationToOutParams(OpPassManager &pm) {
  pm.addNestedPass<func::FuncOp>(createKilnDistinctResults());
  pm.addNestedPass<func::FuncOp>(createKilnUntieSharedTensors());
  bufferization::OneShotBufferizePassOptions bufOpts;
  bufOpts.bufferizeFunctionBoundaries = true;
  // Loop-carried values of ONNX Loop/Scan bodies are new tensors each
  // iteration; they need not be written in place of the iter_arg.
  bufOpts.allowReturnAllocsFromLoops = true;
  bufOpts.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  // tensor.empty has no buffer type of its own: one-shot bufferization
  // gives it a fully dynamic layout, so an scf.if whose branches both
  // yield a new tensor (a kernel's result into tensor.empty) got a
  // strided result and a copy into a dense buffer after it (encoder4 with
  // a run-time sequence length: one copy per layer, whose loops took most
  // of its LLVM -O3 time: opt -O3 100-167 -> 26-41 ms without them).
  // alloc_tensor's buffer is dense, and it bufferizes to the same aligned
  // memref.alloc.
  pm.addPass(bufferization::createEmptyTensorToAllocTensorPass());
  pm.addPass(bufferization::createOneShotBufferizePass(bufOpts));
  // Identical subviews become one, so that the copy of a part written in
  // place onto its own slice is a self-copy, which canonicalization drops.
  pm.addPass(createCSEPass());
  pm.addPass(createCanonicalizerPass());
  bufferization::BufferResultsToOutParamsPassOptions outParams;
  outParams.hoistStaticAllocs = true;
  outParams.modifyPublicFunctions = true;
  pm.addPass(bufferization::createBufferResultsToOutParamsPass(outParams));
}

void addGpuTensorPasses(OpPassManager &pm, const GpuPassOptions &gpu) {
  pm.addNestedPass<func::FuncOp>(createKilnGpuFuseElementwise());
  if (gpu.splitReductions)
    pm.addNestedPass<func::FuncOp>(createKilnGpuSplitReductions());
}

void buildLowerToLLVMPipeline(OpPassManager &pm, const LoweringOptions &given) {
  LoweringOptions opts = given;
  if (opts.codegen.gpuTensorPassesOnCpu) // the GPU path's linalg (buildLowerToGpuPipeline)
    opts.fuseRowOps = opts.convertLayout = opts.useKernels = false;
  buildLowerToLinalgPipeline(pm, opts);
  if (opts.codegen.gpuTensorPassesOnCpu)
    addGpuTensorPasses(pm, opts.codegen.gpu);
  else if (opts.fuseElementwise)
    pm.addNestedPass<func::FuncOp>(createKilnFuseElementwise());
  pm.addPass(createCSEPass());
  pm.addNestedPass<func::FuncOp>(createKilnConcatInPlace());
  addBufferizationToOutParams(pm);
  pm.addNestedPass<func::FuncOp>(createKilnOutputsInPlace());
  KilnPlanMemoryOptions plan;
  plan.debugMemory = opts.codegen.debugMemory;
  pm.addPass(createKilnPlanMemory(plan));
  bufferization::BufferDeallocationPipelineOptions dealloc;
  bufferization::buildBufferDeallocationPipeline(pm, dealloc);
  pm.addPass(createConvertBufferizationToMemRefPass());
  // Deallocating buffers that an If's branches return calls a helper over
  // memrefs of dynamic size (`dealloc_helper`), which the bare-pointer
  // calling convention below cannot take as arguments: it is inlined
  // instead (nothing else is callable here: kernels are declarations).
  pm.addPass(createInlinerPass({}, [](OpPassManager &) {}));
  pm.addPass(createSymbolDCEPass());
  pm.addPass(createCanonicalizerPass());
  pm.addNestedPass<func::FuncOp>(createKilnStridedCopiesToLoops());
  pm.addPass(createKilnFlattenGlobals());
  if (opts.codegen.gpuTensorPassesOnCpu) { // and the GPU path's hand-built kernels, emulated
    KilnGpuMmaContractionsOptions mma;
    mma.emulate = true;
    // The choice the GPU makes (its weights at kGpuWeightAlignment), so the
    // same products qualify; the emulation's own accesses claim only
    // element alignment.
    mma.globalAlignment = kGpuWeightAlignment;
    pm.addNestedPass<func::FuncOp>(createKilnGpuMmaContractions(mma));
    KilnGpuTileContractionsOptions tiles;
    tiles.emulate = true;
    tiles.minBlocks = 1;
    tiles.tf32 = opts.codegen.gpu.tf32;
    tiles.globalAlignment = kGpuWeightAlignment;
    pm.addNestedPass<func::FuncOp>(createKilnGpuTileContractions(tiles));
    KilnGpuBlockReductionsOptions rows;
    rows.emulate = true;
    pm.addNestedPass<func::FuncOp>(createKilnGpuBlockReductions(rows));
    pm.addNestedPass<func::FuncOp>(createKilnGpuVectorizeElementwise());
  }
  pm.addPass(createKilnOutlineLoopNests());
  pm.addNestedPass<func::FuncOp>(createKilnApproximateMath());
  pm.addNestedPass<func::FuncOp>(createKilnEmptyArguments());
  pm.addPass(createKilnRuntimeDimsArguments());
  pm.addPass(createKilnMergeDuplicateFunctions());

  std::string tail =
      "func.func(convert-linalg-to-loops),"
      "expand-strided-metadata,lower-affine,convert-scf-to-cf,"
      "convert-math-to-funcs,func.func(convert-math-to-llvm),convert-math-to-libm," +
      std::string(opts.codegen.gpuTensorPassesOnCpu ? "convert-vector-to-llvm," : "") +
      // Buffers of run-time size through the runtime's allocator, which
      // recycles them (kiln/runtime.h), not malloc.
      "func.func(kiln-expand-bf16),"
      "finalize-memref-to-llvm{use-generic-functions=true},convert-arith-to-llvm,"
      "convert-index-to-llvm,"
      "convert-cf-to-llvm,convert-func-to-llvm{use-bare-ptr-memref-call-conv=true},"
      "reconcile-unrealized-casts,kiln-parallelize-calls," +
      std::string(opts.codegen.profile ? "kiln-profile-kernels," : "") +
      "kiln-emit-entry-point{entry-name=" + opts.entryName + "}";
  if (failed(parsePassPipeline(tail, pm)))
    llvm::report_fatal_error("kiln: internal lowering pipeline does not parse");
}

/// The fewest blocks a TF32 tiled matrix product must make. The FMA tiles
/// need 128 (kiln-gpu-tile-contractions' default) to beat kiln-gpu-loops'
/// kernels, which spread a product over every SM; on tensor cores 8 blocks
/// of 64x64 already beat them for matrix products (encoder4's and
/// mlp_gelu's make 8-64: mlp_gelu 0.38 -> 0.12 ms). Not for convolutions:
/// at batch 1, ResNet-18 went 1.61 -> 2.24 ms with them at 8 too (their
/// long K runs on few SMs, with im2col addresses per element); they keep
/// 128 (measured on an H100 and an H200, docs/gpu.md).
constexpr int kTf32ProductMinBlocks = 8;

void buildLowerToGpuPipeline(OpPassManager &pm, const GpuLoweringOptions &gpu) {
  LoweringOptions opts;
  // Row-op fusion, NHWC layouts and microkernel calls are the CPU path's.
  opts.fuseRowOps = false;
  opts.convertLayout = false;
  opts.useKernels = false;
  buildLowerToLinalgPipeline(pm, opts);
  addGpuTensorPasses(pm, gpu.passes);
  pm.addPass(createCSEPass());
  addBufferizationToOutParams(pm);
  // The CPU path's static plan: on the device, launches on one stream run in
  // order, so buffers with disjoint live ranges may share bytes there too.
  pm.addPass(createKilnPlanMemory());
  pm.addNestedPass<func::FuncOp>(createKilnApproximateMath());
  pm.addNestedPass<func::FuncOp>(createKilnEmptyArguments());

  std::string libdevice = gpu.libdevice.empty() ? "" : " l=" + gpu.libdevice;
  std::string weights = "{global-alignment=" + std::to_string(kGpuWeightAlignment) + "},";
  // mma.sync with bf16 or tf32 operands is sm_80's (sm_75 has f16 only).
  bool bf16TensorCores = std::atoi(gpu.chip.c_str() + 3) >= 80;
  bool tf32 = gpu.passes.tf32 && bf16TensorCores;
  // No min/max bounds: with them the tiled bound is an affine.min and
  // convert-parallel-loops-to-gpu silently leaves the loop on the host.
  std::string tail =
      "func.func(" +
      (gpu.passes.mmaContractions ? "kiln-gpu-mma-contractions{global-alignment=" +
                                 std::to_string(kGpuWeightAlignment) +
                                 " bf16=" + (bf16TensorCores ? "true" : "false") + "},"
                           : "") +
      std::string(!gpu.passes.tileContractions ? ""
                  : tf32 ? "kiln-gpu-tile-contractions{tf32=true product-min-blocks=" +
                               std::to_string(kTf32ProductMinBlocks) + " global-alignment=" +
                               std::to_string(kGpuWeightAlignment) + "},"
                         : "kiln-gpu-tile-contractions,") +
      std::string(gpu.passes.blockReductions ? "kiln-gpu-block-reductions," : "") +
      (gpu.passes.vectorizeElementwise ? "kiln-gpu-vectorize-elementwise" + weights : "") +
      "kiln-gpu-loops,"
      "scf-parallel-loop-tiling{parallel-loop-tile-sizes=256 no-min-max-bounds=true},"
      "gpu-map-parallel-loops,convert-parallel-loops-to-gpu,"
      "gpu-launch-sink-index-computations),"
      "gpu-kernel-outlining,kiln-merge-gpu-modules,"
      "expand-strided-metadata,lower-affine,convert-scf-to-cf,canonicalize,"
      "nvvm-attach-target{module=kiln_kernels chip=" + gpu.chip + " O=3" + libdevice + "},"
      // cp.async (nvgpu.device_async_copy, kiln-gpu-tile-contractions' TF32
      // staging) first, then the rest.
      "gpu.module(convert-nvgpu-to-nvvm,convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=true}),"
      "reconcile-unrealized-casts,"
      "gpu-module-to-binary{format=isa}";
  if (failed(parsePassPipeline(tail, pm)))
    llvm::report_fatal_error("kiln: internal GPU pipeline does not parse");
}

void buildGpuHostPipeline(OpPassManager &pm, const std::string &entryName) {
  // Bare pointers on both sides: kernel parameters are the buffers'
  // addresses (static shapes, identity layouts), as the CPU entry point's.
  std::string tail = "gpu-to-llvm{use-bare-pointers-for-host=true "
                     "use-bare-pointers-for-kernels=true},"
                     "reconcile-unrealized-casts,kiln-gpu-host-calls,"
                     "kiln-emit-entry-point{entry-name=" + entryName + "}";
  if (failed(parsePassPipeline(tail, pm)))
    llvm::report_fatal_error("kiln: internal GPU host pipeline does not parse");
}

void registerKilnPassesAndPipelines() {
  static bool done = [] {
    registerAllPasses();
    registerKilnPasses();
    registerKilnConversionPasses();
    registerKilnCpuPasses();
    registerKilnGpuPasses();
    PassPipelineRegistration<>("kiln-optimize",
                               "Shape inference with folding, canonicalization and CSE",
                               buildKilnOptimizationPipeline);
    PassPipelineRegistration<>("kiln-lower-to-llvm",
                               "Lower static-shape kiln IR to the LLVM dialect",
                               [](OpPassManager &pm) {
                                 buildLowerToLLVMPipeline(pm, LoweringOptions());
                               });
    return true;
  }();
  (void)done;
}

} // namespace kiln
