// The GPU code generator's choices: one struct that the API
// (CompileOptions::gpu, EmitOptions::gpu), the drivers and the pipelines
// (GpuLoweringOptions, LoweringOptions) pass along unchanged, so that a new
// switch is added in one place. No LLVM/MLIR: part of the public API.
#ifndef KILN_SUPPORT_GPUOPTIONS_H
#define KILN_SUPPORT_GPUOPTIONS_H

namespace kiln {

/// Each member runs one optional pass of kiln/Codegen/GpuPasses.td; kilnc
/// turns each off (or split reductions on) to measure it.
struct GpuPassOptions {
  /// kiln-gpu-split-reductions: long reductions with few outputs split in
  /// two launches. Off by default: kiln-gpu-block-reductions takes the same
  /// reductions in one launch.
  bool splitReductions = false;
  /// kiln-gpu-tile-contractions: large products and convolutions as
  /// shared-memory tiled kernels.
  bool tileContractions = true;
  /// kiln-gpu-block-reductions: reductions with few outputs, one block per
  /// output.
  bool blockReductions = true;
  /// kiln-gpu-vectorize-elementwise: elementwise kernels with 128-bit loads
  /// and stores where aligned.
  bool vectorizeElementwise = true;
  /// kiln-gpu-mma-contractions: f16/bf16 products on tensor cores.
  bool mmaContractions = true;
  /// kiln-gpu-tile-contractions' tf32: float32 products and convolutions
  /// on TF32 tensor cores (inputs rounded to 10 mantissa bits, f32 sums),
  /// on sm_80 and later, as PyTorch does for convolutions by default;
  /// false (kilnc --gpu-precision=fp32) keeps exact FP32 FMAs.
  bool tf32 = true;
};

} // namespace kiln

#endif
