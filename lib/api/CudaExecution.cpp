#include "CudaExecution.h"
#include "TensorDescs.h"

namespace kiln {

Status openCudaDevice(int ordinal, CudaDevice &out) {
  kiln_cuda_device *device = nullptr;
  if (Status s = takeStatus(kiln_cuda_device_open(ordinal, &device)); !s.ok())
    return s;
  out = CudaDevice(device, kiln_cuda_device_close);
  return {};
}

std::string cudaChipOf(const kiln_cuda_device *device) {
  return "sm_" + std::to_string(kiln_cuda_device_compute_capability(device));
}

static size_t byteSize(const TensorInfo &t) {
  size_t n = kiln_dtype_size(t.dtype);
  for (int64_t d : t.dims)
    n *= (size_t)std::max<int64_t>(d, 0);
  return n;
}

Status CudaExecutable::create(const CudaDevice &device, const CudaHostCode &code,
                              const std::vector<TensorInfo> &inputs,
                              const std::vector<TensorInfo> &outputs,
                              std::unique_ptr<CudaExecutable> &out) {
  std::unique_ptr<CudaExecutable> exe(new CudaExecutable);
  exe->device = device;
  exe->inputs = inputs;
  exe->outputs = outputs;
  std::vector<const char *> names;
  for (const std::string &k : code.kernels)
    names.push_back(k.c_str());
  if (Status s = takeStatus(kiln_cuda_program_create(device.get(), code.ptx.c_str(), names.data(),
                                               names.size(), code.constants.data(),
                                               code.constants.size(),
                                               (size_t)code.workspaceBytes, &exe->program));
      !s.ok())
    return s;
  if (Status s = takeStatus(kiln_cuda_timer_create(device.get(), &exe->timer)); !s.ok())
    return s;
  for (const auto *list : {&inputs, &outputs})
    for (const TensorInfo &t : *list) {
      kiln_cuda_ptr p = 0;
      size_t n = byteSize(t);
      if (Status s = takeStatus(kiln_cuda_malloc(device.get(), n, &p),
                          "the device buffer of '" + t.name + "': ");
          !s.ok())
        return s;
      exe->buffers.push_back(p);
      exe->bytes.push_back(n);
    }
  out = std::move(exe);
  return {};
}

CudaExecutable::~CudaExecutable() {
  for (kiln_cuda_ptr p : buffers)
    kiln_status_free(kiln_cuda_free(device.get(), p));
  kiln_cuda_timer_free(timer);
  kiln_cuda_program_free(program);
}

Status CudaExecutable::run(kiln_entry_fn entry, const std::vector<const kiln_tensor *> &in,
                           std::vector<kiln_tensor *> &out, double &deviceMilliseconds) {
  std::lock_guard<std::mutex> lock(mutex);
  kiln_cuda_device *dev = device.get();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const void *data = kiln_tensor_data(const_cast<kiln_tensor *>(in[i]));
    if (Status s = takeStatus(kiln_cuda_copy_to_device(dev, buffers[i], data, bytes[i]),
                        "copying input '" + inputs[i].name + "' to the device: ");
        !s.ok())
      return s;
  }
  if (Status s = takeStatus(kiln_cuda_timer_start(timer)); !s.ok())
    return s;
  if (Status s = takeStatus(kiln_cuda_program_run(program, entry, buffers.data(), buffers.size()));
      !s.ok())
    return s;
  // Waits for the kernels; an error of one that ran comes back here.
  if (Status s = takeStatus(kiln_cuda_timer_stop(timer, &deviceMilliseconds)); !s.ok())
    return s;
  if (Status s = takeStatus(kiln_cuda_synchronize(dev)); !s.ok())
    return s;
  out.assign(outputs.size(), nullptr);
  auto fail = [&](Status s) {
    for (kiln_tensor *t : out)
      kiln_tensor_free(t);
    out.clear();
    return s;
  };
  for (size_t k = 0; k < outputs.size(); ++k) {
    const TensorInfo &t = outputs[k];
    out[k] = kiln_tensor_create(t.dtype, (int32_t)t.dims.size(), t.dims.data());
    if (!out[k])
      return fail(Status::error(KILN_OUT_OF_MEMORY, "cannot allocate output '" + t.name + "'"));
    size_t b = bytes[inputs.size() + k];
    if (Status s = takeStatus(kiln_cuda_copy_to_host(dev, kiln_tensor_data(out[k]),
                                               buffers[inputs.size() + k], b),
                        "copying output '" + t.name + "' from the device: ");
        !s.ok())
      return fail(s);
  }
  return {};
}

} // namespace kiln
