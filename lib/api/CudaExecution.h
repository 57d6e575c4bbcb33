// Running a model compiled for CUDA (CompileOptions::device == "cuda"): the
// device side of one executable, and the copies at its inputs and outputs.
#ifndef KILN_API_CUDAEXECUTION_H
#define KILN_API_CUDAEXECUTION_H

#include "Driver.h"

#include "kiln/cuda.h"

#include <memory>
#include <mutex>

namespace kiln {

/// The GPU a Model runs on, shared by its executables.
using CudaDevice = std::shared_ptr<kiln_cuda_device>;
Status openCudaDevice(int ordinal, CudaDevice &out);

/// "sm_90" for a device of compute capability 9.0.
std::string cudaChipOf(const kiln_cuda_device *device);

/// One executable on the device: its program (kernels, weights uploaded
/// once, workspace) and device buffers for its inputs and outputs, reused by
/// every run.
class CudaExecutable {
public:
  static Status create(const CudaDevice &device, const CudaHostCode &code,
                       const std::vector<TensorInfo> &inputs,
                       const std::vector<TensorInfo> &outputs,
                       std::unique_ptr<CudaExecutable> &out);
  ~CudaExecutable();

  /// Copies `inputs` (checked against the signature by the caller,
  /// kiln_model_check_inputs) to the device, runs `entry`, waits, and copies
  /// the outputs into fresh tensors (`outputs`, sized as the signature).
  /// `deviceMilliseconds`: the kernels' device time (CUDA events).
  Status run(kiln_entry_fn entry, const std::vector<const kiln_tensor *> &inputs,
             std::vector<kiln_tensor *> &outputs, double &deviceMilliseconds);

private:
  CudaExecutable() = default;
  CudaDevice device;
  kiln_cuda_program *program = nullptr;
  kiln_cuda_timer *timer = nullptr;
  std::vector<TensorInfo> inputs, outputs;
  /// Inputs, then outputs.
  std::vector<kiln_cuda_ptr> buffers;
  std::vector<size_t> bytes;
  /// The buffers are shared: one run at a time.
  std::mutex mutex;
};

} // namespace kiln

#endif
