/* Kiln's C API over the in-process JIT, for use from other languages.
 *
 *   kiln_compiled_model *m;
 *   kiln_status *s = kiln_compile_file("model.onnx", NULL, &m);
 *   ...kiln_compiled_model_run(m, inputs, n_in, outputs, n_out)...
 *   kiln_compiled_model_free(m);
 *
 * Functions returning kiln_status* return NULL on success.
 */
#ifndef KILN_KILN_C_H
#define KILN_KILN_C_H

#include "kiln/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kiln_compiled_model kiln_compiled_model;

typedef struct kiln_compile_options {
  const char *cpu; /* NULL or "host" for the host CPU */
  int opt_level;   /* 0..3 */
  int debug_memory; /* nonzero: no memory plan, NaN-filled intermediates */
  int num_threads;  /* threads per run, the caller included; 0: physical cores */
  int no_cache;     /* nonzero: do not use the on-disk compile cache */
  const char *cache_dir; /* NULL: $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, ~/.cache/kiln */
  int profile; /* nonzero: record per-kernel events into an attached kiln_profiler (kiln/profile.h) */
  /* Nonzero: code specialised to each new set of input shapes, also where
   * the model's unknown dims could be taken at run time (by default one
   * compile serves every shape there; kiln::CompileOptions::dynamicShapes). */
  int specialize;
  /* Bounds of dims the model names (ONNX dim_param), e.g. "seq" in 1..512:
   * dim_bound_names[i] lies in [dim_bound_min[i], dim_bound_max[i]] for
   * i < num_dim_bounds. An input outside them is refused before anything
   * compiles or runs (KILN_SHAPE_MISMATCH naming the input, the dim and the
   * bounds); a name no input uses, or an empty range, fails the compile. */
  size_t num_dim_bounds;
  const char *const *dim_bound_names;
  const int64_t *dim_bound_min;
  const int64_t *dim_bound_max;
} kiln_compile_options;

kiln_status *kiln_compile_file(const char *path, const kiln_compile_options *options,
                               kiln_compiled_model **out);
kiln_status *kiln_compile_buffer(const void *data, size_t size, const char *base_dir,
                                 const kiln_compile_options *options, kiln_compiled_model **out);

/* Declared signature; dims of -1 are known only at run time. The returned
 * descriptors live as long as the model. */
int32_t kiln_compiled_model_num_inputs(const kiln_compiled_model *model);
int32_t kiln_compiled_model_num_outputs(const kiln_compiled_model *model);
const kiln_tensor_desc *kiln_compiled_model_input(const kiln_compiled_model *model, int32_t i);
const kiln_tensor_desc *kiln_compiled_model_output(const kiln_compiled_model *model, int32_t i);

/* Runs the model; allocates outputs[0..num_outputs) for the caller to free
 * with kiln_tensor_free. Thread-safe. */
kiln_status *kiln_compiled_model_run(const kiln_compiled_model *model,
                                     const kiln_tensor *const *inputs, size_t num_inputs,
                                     kiln_tensor **outputs, size_t num_outputs);

void kiln_compiled_model_free(kiln_compiled_model *model);

#ifdef __cplusplus
}
#endif

#endif
