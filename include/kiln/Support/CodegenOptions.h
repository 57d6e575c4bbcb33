// The code generator's choices, one struct per concern, which the API
// (kiln::CompileOptions and kiln::EmitOptions derive from CodegenOptions),
// the drivers (lib/api), the pipelines (LoweringOptions::codegen) and the
// target emitter (createTargetMachine takes the TargetOptions part) pass
// along unchanged: a new choice is declared, documented and defaulted here
// once. No LLVM/MLIR: part of the public API (installed with kiln/Kiln.h).
#ifndef KILN_SUPPORT_CODEGENOPTIONS_H
#define KILN_SUPPORT_CODEGENOPTIONS_H

#include "kiln/Support/GpuOptions.h"

#include <string>

namespace kiln {

/// The machine code is generated for.
struct TargetOptions {
  /// LLVM target triple; empty: this machine's. The JIT (CompileOptions)
  /// generates code for this machine only and takes none; kilnc's
  /// --target, and nvptx64-nvidia-cuda for NVIDIA GPUs, in EmitOptions.
  std::string triple;
  /// LLVM CPU name, e.g. "skylake"; "host" (or empty): this machine's CPU
  /// and features for its own triple, "generic" for another. For NVIDIA
  /// targets the GPU architecture (sm_80 where "host").
  std::string cpu = "host";
  int optLevel = 3; ///< 0..3
};

/// What the generated code does besides computing the model, and which
/// passes make it: the same for the JIT, kilnc's objects and bundles.
struct CodegenOptions : TargetOptions {
  /// Debugging: no static memory plan; every intermediate gets fresh memory
  /// filled with NaN, so reads of unwritten memory show up in the outputs.
  /// CPU targets only.
  bool debugMemory = false;
  /// Profiling: every kernel is bracketed with the runtime's profiling
  /// hooks, which record into the kiln_profiler attached to the thread that
  /// runs the model (kiln/profile.h). Off: no hooks are compiled in. CPU
  /// targets only.
  bool profile = false;
  /// Testing: on the CPU, compile the linalg the GPU path makes (its
  /// elementwise fusion; no row-op kernels, NHWC layouts or microkernels)
  /// instead of the CPU path's, with the GPU path's tiled contractions and
  /// block reductions emulated by loops, so that those transformations are
  /// checked by running the model on any machine.
  bool gpuTensorPassesOnCpu = false;
  /// The GPU path's optional passes (NVIDIA targets, and the emulation
  /// above).
  GpuPassOptions gpu;
  /// Tune kernel choices on this machine (kilnc --tune, kiln-run --tune,
  /// kiln.compile(..., tune=True)): each convolution layer's schedule is
  /// timed at its real shape, on the threads a run uses, until a
  /// confidence bound separates the candidates; choices are kept in the
  /// compile cache keyed by CPU and layer, so each is paid for once. The
  /// host's CPU only. Off: the kernels' own heuristics.
  bool tune = false;
};

} // namespace kiln

#endif
