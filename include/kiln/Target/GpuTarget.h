#ifndef KILN_TARGET_GPUTARGET_H
#define KILN_TARGET_GPUTARGET_H

#include <cstdint>
#include <string>
#include <vector>

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

/// After kiln-gpu-host-calls: the bytes of every global it placed in the
/// weights buffer, at their offsets (`kiln.gpu_constant_offset`), into
/// `blob`; those globals are then erased from the host code.
bool packGpuConstants(mlir::ModuleOp module, std::string &blob, std::string &error);

/// The number of parameters of `.entry kernel(...)` in `ptx`; -1 if the
/// kernel is not there.
int64_t ptxParameterCount(const std::string &ptx, const std::string &kernel);

/// For an ahead-of-time CUDA host object: globals beside the entry point
/// `name` that kiln_cuda_program_create takes (kiln/cuda.h):
/// `name_ptx` (NUL-terminated), `name_kernels` (const char *[]),
/// `name_num_kernels` and `name_weights_size` (int64), `name_weights`.
void defineCudaObjectData(mlir::ModuleOp module, const std::string &name, const std::string &ptx,
                          const std::vector<std::string> &kernels, const std::string &weights);

} // namespace kiln

#endif
