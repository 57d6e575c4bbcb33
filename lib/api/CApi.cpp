#include "kiln/Kiln.h"
#include "kiln/kiln_c.h"

#include "TensorDescs.h"

struct kiln_compiled_model {
  std::unique_ptr<kiln::Model> model;
  std::vector<kiln_tensor_desc> inputs, outputs;
};

/// The C options as kiln::CompileOptions; an error (a status) where they
/// are inconsistent.
static kiln_status *toOptions(const kiln_compile_options *o, kiln::CompileOptions &opts) {
  if (o) {
    if (o->cpu)
      opts.cpu = o->cpu;
    opts.optLevel = o->opt_level;
    opts.debugMemory = o->debug_memory != 0;
    opts.numThreads = o->num_threads;
    opts.cache = o->no_cache == 0;
    if (o->cache_dir)
      opts.cacheDir = o->cache_dir;
    opts.profile = o->profile != 0;
    opts.dynamicShapes = o->specialize == 0;
    if (o->num_dim_bounds &&
        (!o->dim_bound_names || !o->dim_bound_min || !o->dim_bound_max))
      return kiln_status_create(KILN_INVALID_ARGUMENT,
                                "num_dim_bounds is not 0, but dim_bound_names, dim_bound_min or "
                                "dim_bound_max is NULL");
    for (size_t i = 0; i < o->num_dim_bounds; ++i) {
      if (!o->dim_bound_names[i])
        return kiln_status_create(KILN_INVALID_ARGUMENT,
                                  ("dim_bound_names[" + std::to_string(i) + "] is NULL").c_str());
      opts.dimBounds[o->dim_bound_names[i]] = {o->dim_bound_min[i], o->dim_bound_max[i]};
    }
  }
  return nullptr;
}

static kiln_status *wrap(std::unique_ptr<kiln::Model> model, const std::string &error,
                         kiln_compiled_model **out) {
  if (!out)
    return kiln_status_create(KILN_INVALID_ARGUMENT, "out must not be NULL");
  *out = nullptr;
  if (!model)
    return kiln_status_create(KILN_COMPILE_ERROR, error.c_str());
  auto *m = new kiln_compiled_model;
  m->model = std::move(model);
  m->inputs = kiln::describeTensors(m->model->inputs());
  m->outputs = kiln::describeTensors(m->model->outputs());
  *out = m;
  return nullptr;
}

extern "C" {

kiln_status *kiln_compile_file(const char *path, const kiln_compile_options *options,
                               kiln_compiled_model **out) {
  if (!path)
    return kiln_status_create(KILN_INVALID_ARGUMENT, "path must not be NULL");
  kiln::CompileOptions opts;
  if (kiln_status *s = toOptions(options, opts))
    return s;
  std::string error;
  return wrap(kiln::Model::load(path, opts, &error), error, out);
}

kiln_status *kiln_compile_buffer(const void *data, size_t size, const char *baseDir,
                                 const kiln_compile_options *options, kiln_compiled_model **out) {
  if (!data && size)
    return kiln_status_create(KILN_INVALID_ARGUMENT, "data must not be NULL");
  kiln::CompileOptions opts;
  if (kiln_status *s = toOptions(options, opts))
    return s;
  std::string error;
  return wrap(kiln::Model::loadFromMemory(data, size, baseDir ? baseDir : "", opts, &error),
              error, out);
}

int32_t kiln_compiled_model_num_inputs(const kiln_compiled_model *m) {
  return m ? (int32_t)m->inputs.size() : 0;
}
int32_t kiln_compiled_model_num_outputs(const kiln_compiled_model *m) {
  return m ? (int32_t)m->outputs.size() : 0;
}
const kiln_tensor_desc *kiln_compiled_model_input(const kiln_compiled_model *m, int32_t i) {
  return m && i >= 0 && i < (int32_t)m->inputs.size() ? &m->inputs[i] : nullptr;
}
const kiln_tensor_desc *kiln_compiled_model_output(const kiln_compiled_model *m, int32_t i) {
  return m && i >= 0 && i < (int32_t)m->outputs.size() ? &m->outputs[i] : nullptr;
}

kiln_status *kiln_compiled_model_run(const kiln_compiled_model *m,
                                     const kiln_tensor *const *inputs, size_t numInputs,
                                     kiln_tensor **outputs, size_t numOutputs) {
  if (!m)
    return kiln_status_create(KILN_INVALID_ARGUMENT, "model must not be NULL");
  if (numOutputs != m->outputs.size() || (numOutputs && !outputs))
    return kiln_status_create(KILN_INVALID_ARGUMENT, "wrong number of outputs");
  if (numInputs && !inputs)
    return kiln_status_create(KILN_INVALID_ARGUMENT, "inputs must not be NULL");
  std::vector<const kiln_tensor *> ins(inputs, inputs + numInputs);
  std::vector<kiln::Tensor> outs;
  kiln::Status s = m->model->run(ins, outs);
  if (!s.ok())
    return kiln_status_create(s.code, s.message.c_str());
  for (size_t i = 0; i < outs.size(); ++i)
    outputs[i] = outs[i].release();
  return nullptr;
}

void kiln_compiled_model_free(kiln_compiled_model *m) { delete m; }

} // extern "C"
