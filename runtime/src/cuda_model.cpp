// CUDA bundles (kiln/cuda.h): a descriptor whose `cuda` holds the kernels,
// loaded once onto a device and run on host tensors or device buffers.
// Built on the program API (cuda.cpp), so a bundle and the JIT's CUDA path
// load and launch the same way.
#include "kiln/cuda.h"

#include <mutex>
#include <string>
#include <vector>

struct kiln_cuda_model {
  kiln_cuda_device *device = nullptr;
  const kiln_model_desc *desc = nullptr;
  kiln_cuda_program *program = nullptr;
  std::vector<kiln_cuda_ptr> buffers; // inputs, then outputs
  std::vector<size_t> bytes;
  std::mutex running;
};

namespace {

kiln_status *fail(kiln_status_code code, const std::string &message) {
  return kiln_status_create(code, message.c_str());
}

std::string modelName(const kiln_model_desc *m) {
  return "model '" + std::string(m->name ? m->name : "") + "'";
}

size_t byteSize(const kiln_tensor_desc &t) {
  size_t n = kiln_dtype_size(t.dtype);
  for (int32_t d = 0; d < t.rank; ++d)
    n *= (size_t)(t.dims[d] > 0 ? t.dims[d] : 0);
  return n;
}

/// Whether every dim of the signature is known: a CUDA bundle holds one
/// static specialisation (its buffers are allocated when it is loaded).
bool staticSignature(const kiln_model_desc *m) {
  for (const auto &[list, n] : {std::make_pair(m->inputs, m->num_inputs),
                                std::make_pair(m->outputs, m->num_outputs)})
    for (int32_t i = 0; i < n; ++i)
      for (int32_t d = 0; d < list[i].rank; ++d)
        if (list[i].dims[d] < 0)
          return false;
  return true;
}

} // namespace

extern "C" {

kiln_status *kiln_cuda_model_load(kiln_cuda_device *device, const kiln_model_desc *m,
                                  kiln_cuda_model **out) {
  if (!device || !m || !out)
    return fail(KILN_INVALID_ARGUMENT, "kiln_cuda_model_load: NULL argument");
  *out = nullptr;
  if (m->abi_version != KILN_ABI_VERSION)
    return fail(KILN_INVALID_ARGUMENT, "model was compiled for runtime ABI " +
                                           std::to_string(m->abi_version) +
                                           ", this runtime has " +
                                           std::to_string(KILN_ABI_VERSION));
  const kiln_cuda_code *code = m->cuda;
  if (!code)
    return fail(KILN_INVALID_ARGUMENT,
                modelName(m) + " is compiled for the CPU: run it with kiln_model_execute");
  if (!m->entry || m->num_variants || !staticSignature(m))
    return fail(KILN_INVALID_ARGUMENT, modelName(m) + " has no entry point of static shapes");
  if (m->output_rows && m->num_row_counts > 0) // kilnc does not make these for GPUs
    return fail(KILN_INVALID_ARGUMENT,
                modelName(m) + " has outputs whose number of rows is known only at run time, "
                               "which the CUDA runtime does not support");
  int have = kiln_cuda_device_compute_capability(device);
  if (code->compute_capability > have ||
      (code->arch_specific && code->compute_capability != have))
    return fail(KILN_DEVICE_ERROR,
                modelName(m) + " is compiled for sm_" + std::to_string(code->compute_capability) +
                    (code->arch_specific ? "a" : "") + "; " + kiln_cuda_device_name(device) +
                    " is sm_" + std::to_string(have) + " (recompile with --mcpu=sm_" +
                    std::to_string(have) + ")");
  const void *weights = code->weights;
  size_t weightsSize = (size_t)code->weights_size;
  if (m->weights) {
    if (!m->weights->loaded)
      return fail(KILN_INVALID_ARGUMENT, modelName(m) +
                                             " keeps its weights in a file: load it with "
                                             "kiln_model_load_weights first");
    weights = m->weights->data;
    weightsSize = (size_t)m->weights->size;
  }
  std::vector<const char *> names;
  for (int32_t k = 0; k < code->num_kernels; ++k)
    names.push_back(code->kernels[k].name);
  auto *model = new kiln_cuda_model;
  model->device = device;
  model->desc = m;
  kiln_status *s = kiln_cuda_program_create(device, code->ptx, names.data(), names.size(),
                                            weights, weightsSize, (size_t)m->workspace_size,
                                            &model->program);
  for (const auto &[list, n] : {std::make_pair(m->inputs, m->num_inputs),
                                std::make_pair(m->outputs, m->num_outputs)})
    for (int32_t i = 0; !s && i < n; ++i) {
      kiln_cuda_ptr p = 0;
      size_t size = byteSize(list[i]);
      // A zero-sized tensor still gets an address to pass.
      s = kiln_cuda_malloc(device, size ? size : 1, &p);
      if (!s) {
        model->buffers.push_back(p);
        model->bytes.push_back(size);
      }
    }
  if (s) {
    kiln_cuda_model_free(model);
    return s;
  }
  *out = model;
  return nullptr;
}

void kiln_cuda_model_free(kiln_cuda_model *model) {
  if (!model)
    return;
  for (kiln_cuda_ptr p : model->buffers)
    kiln_status_free(kiln_cuda_free(model->device, p));
  kiln_cuda_program_free(model->program);
  delete model;
}

kiln_status *kiln_cuda_model_run(kiln_cuda_model *model, const kiln_cuda_ptr *buffers,
                                 size_t num_buffers) {
  if (!model || (num_buffers && !buffers))
    return fail(KILN_INVALID_ARGUMENT, "kiln_cuda_model_run: NULL argument");
  const kiln_model_desc *m = model->desc;
  if (num_buffers != (size_t)(m->num_inputs + m->num_outputs))
    return fail(KILN_INVALID_ARGUMENT,
                modelName(m) + " takes " + std::to_string(m->num_inputs) + " inputs and " +
                    std::to_string(m->num_outputs) + " outputs, got " +
                    std::to_string(num_buffers) + " buffers");
  // The kernels store outputs with 16-byte accesses where the compiler
  // knows them aligned: the entry point's ABI (kiln/runtime.h) promises 64.
  for (size_t i = m->num_inputs; i < num_buffers; ++i)
    if (buffers[i] % 64 != 0)
      return fail(KILN_INVALID_ARGUMENT,
                  modelName(m) + ": output " + std::to_string(i - m->num_inputs) +
                      " is not 64-byte aligned (device address " + std::to_string(buffers[i]) +
                      "); outputs must be, as cuMemAlloc's are");
  if (kiln_status *s = kiln_cuda_program_run(model->program, m->entry, buffers, num_buffers))
    return s;
  return kiln_cuda_synchronize(model->device);
}

kiln_status *kiln_cuda_model_execute(kiln_cuda_model *model, const kiln_tensor *const *inputs,
                                     size_t num_inputs, kiln_tensor **outputs,
                                     size_t num_outputs) {
  if (!model)
    return fail(KILN_INVALID_ARGUMENT, "kiln_cuda_model_execute: NULL model");
  const kiln_model_desc *m = model->desc;
  if (kiln_status *s = kiln_model_check_inputs(m, inputs, num_inputs))
    return s;
  if (num_outputs != (size_t)m->num_outputs || (num_outputs && !outputs))
    return fail(KILN_INVALID_ARGUMENT, "the model has " + std::to_string(m->num_outputs) +
                                           " outputs, room was given for " +
                                           std::to_string(num_outputs));
  std::lock_guard<std::mutex> lock(model->running);
  for (size_t i = 0; i < num_inputs; ++i)
    if (kiln_status *s = kiln_cuda_copy_to_device(
            model->device, model->buffers[i],
            kiln_tensor_data(const_cast<kiln_tensor *>(inputs[i])), model->bytes[i]))
      return s;
  if (kiln_status *s = kiln_cuda_model_run(model, model->buffers.data(), model->buffers.size()))
    return s;
  for (size_t k = 0; k < num_outputs; ++k)
    outputs[k] = nullptr;
  for (size_t k = 0; k < num_outputs; ++k) {
    const kiln_tensor_desc &d = m->outputs[k];
    outputs[k] = kiln_tensor_create(d.dtype, d.rank, d.dims);
    kiln_status *s =
        outputs[k] ? kiln_cuda_copy_to_host(model->device, kiln_tensor_data(outputs[k]),
                                            model->buffers[num_inputs + k],
                                            model->bytes[num_inputs + k])
                   : fail(KILN_OUT_OF_MEMORY, "cannot allocate an output tensor");
    if (s) {
      for (size_t j = 0; j <= k; ++j) {
        kiln_tensor_free(outputs[j]);
        outputs[j] = nullptr;
      }
      return s;
    }
  }
  return nullptr;
}

} // extern "C"
