// Kiln's pass pipelines, one per path through the compiler, built from the
// passes of every phase (kiln/Passes, kiln/Conversion, kiln/Codegen): the
// one layer that knows them all. The drivers (lib/api) and kiln-opt build
// their pass managers from these functions only.
#ifndef KILN_PIPELINES_PIPELINES_H
#define KILN_PIPELINES_PIPELINES_H

#include "kiln/Support/CodegenOptions.h"

#include <string>

namespace mlir {
class DialectRegistry;
class OpPassManager;
} // namespace mlir

namespace kiln {

/// Kiln-level cleanup: shape inference with folding, canonicalization, CSE.
void buildKilnOptimizationPipeline(mlir::OpPassManager &pm);

/// Options of the lowering from kiln to the LLVM dialect.
struct LoweringOptions {
  std::string entryName = "kiln_entry";
  /// Fuse producer/consumer elementwise linalg ops before bufferization.
  bool fuseElementwise = true;
  /// Run kiln-fuse-row-ops: Softmax and layer normalisation as row kernels.
  bool fuseRowOps = true;
  /// Run kiln-convert-layout (NHWC convolutions, fused epilogues) first.
  bool convertLayout = true;
  /// Lower convolutions, matrix products and pooling to CPU microkernel calls.
  bool useKernels = true;
  /// The API's code generation choices, as given (the pipeline reads
  /// debugMemory, profile, gpuTensorPassesOnCpu and, with the latter, gpu;
  /// the target's triple, cpu and optLevel are the LLVM emitter's).
  CodegenOptions codegen;
};

/// Options of the lowering to PTX (NVPTX targets).
struct GpuLoweringOptions {
  std::string chip = "sm_80";
  /// libdevice.10.bc to link for math functions; empty: none (a math call
  /// that is not approximated is then an unresolved extern in the PTX).
  std::string libdevice;
  /// The optional passes.
  GpuPassOptions passes;
};

/// kiln (static shapes) -> linalg (no CPU kernels) -> bufferization ->
/// loops -> gpu.launch_func + one gpu.module `kiln_kernels` -> NVVM ->
/// gpu.binary holding the PTX. The host function is left with views of the
/// workspace argument (kiln-plan-memory), memref.get_global and
/// gpu.launch_func ops.
void buildLowerToGpuPipeline(mlir::OpPassManager &pm, const GpuLoweringOptions &opts);

/// The GPU path's passes on linalg on tensors, after the lowering to linalg:
/// elementwise fusion that never recomputes a producer, reduction splitting.
void addGpuTensorPasses(mlir::OpPassManager &pm, const GpuPassOptions &gpu = {});

/// After buildLowerToGpuPipeline and extractPtx: the host function to the
/// LLVM dialect, launching through kiln_cuda_launch_kernel, with the
/// runtime's `void entryName(void **buffers)` around it (kiln-gpu-host-calls).
void buildGpuHostPipeline(mlir::OpPassManager &pm, const std::string &entryName);

/// kiln (static shapes) -> linalg on tensors, kernel calls included.
void buildLowerToLinalgPipeline(mlir::OpPassManager &pm, const LoweringOptions &opts);

/// kiln (static shapes) -> linalg on tensors -> bufferization -> loops ->
/// LLVM dialect, with the runtime entry point added.
void buildLowerToLLVMPipeline(mlir::OpPassManager &pm, const LoweringOptions &opts);

/// Registers the kiln passes and the named pipelines `kiln-optimize` and
/// `kiln-lower-to-llvm` with the global registry (for kiln-opt).
void registerKilnPassesAndPipelines();

/// Registers every dialect and interface implementation kiln's pipelines use.
void registerKilnDialects(mlir::DialectRegistry &registry);

} // namespace kiln

#endif
