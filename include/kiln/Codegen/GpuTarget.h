#ifndef KILN_CODEGEN_GPUTARGET_H
#define KILN_CODEGEN_GPUTARGET_H

#include <string>

namespace mlir {
class ModuleOp;
} // namespace mlir

namespace kiln {

/// libdevice.10.bc of the CUDA toolkit: $CUDA_HOME, $CUDA_PATH, then
/// /usr/local/cuda; empty when none has it.
std::string findLibdevice();

/// Whether `chip` names an NVIDIA GPU architecture Kiln compiles for
/// (sm_NN, 75 and newer: what CUDA 13's ptxas accepts).
bool isSupportedGpuChip(const std::string &chip);

/// The PTX of the module's `gpu.binary` (one, from buildLowerToGpuPipeline).
bool extractPtx(mlir::ModuleOp module, std::string &ptx, std::string &error);

} // namespace kiln

#endif
