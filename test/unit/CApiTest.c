/* The C API, compiled as C: compile the example, query, run, free; then
 * declared dim bounds and specialised code on a model with named dims
 * (test/e2e/models/bert_mask: input_ids and attention_mask [batch, seq]). */
#include "kiln/kiln_c.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define EXPECT(cond)                                                           \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond);      \
      return 1;                                                                \
    }                                                                          \
  } while (0)

/* Runs bert_mask on ids 1..n and a mask of ones, batch x seq; its status. */
static kiln_status *runMasked(const kiln_compiled_model *m, int64_t batch, int64_t seq,
                              kiln_tensor **out) {
  int64_t dims[2] = {batch, seq};
  kiln_tensor *ids = kiln_tensor_create(KILN_INT64, 2, dims);
  kiln_tensor *mask = kiln_tensor_create(KILN_INT64, 2, dims);
  for (int64_t i = 0; i < batch * seq; ++i) {
    ((int64_t *)kiln_tensor_data(ids))[i] = 1 + i % 7;
    ((int64_t *)kiln_tensor_data(mask))[i] = 1;
  }
  const kiln_tensor *ins[2] = {ids, mask};
  *out = NULL;
  kiln_status *s = kiln_compiled_model_run(m, ins, 2, out, 1);
  kiln_tensor_free(ids);
  kiln_tensor_free(mask);
  return s;
}

static int boundsAndSpecialisation(const char *path) {
  const char *names[2] = {"batch", "seq"};
  int64_t lo[2] = {1, 1}, hi[2] = {2, 8};
  kiln_compile_options opts = {"host", 2};
  opts.num_threads = 1;
  opts.no_cache = 1;
  opts.num_dim_bounds = 2;
  opts.dim_bound_names = names;
  opts.dim_bound_min = lo;
  opts.dim_bound_max = hi;
  kiln_compiled_model *m = NULL;
  kiln_status *s = kiln_compile_file(path, &opts, &m);
  EXPECT(s == NULL);
  kiln_tensor *y = NULL;
  s = runMasked(m, 1, 7, &y);
  EXPECT(s == NULL && kiln_tensor_rank(y) == 3);
  EXPECT(kiln_tensor_dims(y)[0] == 1 && kiln_tensor_dims(y)[1] == 7 && kiln_tensor_dims(y)[2] == 32);
  /* Outside the bounds: refused, naming the dim and its bounds. */
  kiln_tensor *none = NULL;
  s = runMasked(m, 1, 12, &none);
  EXPECT(s != NULL && kiln_status_get_code(s) == KILN_SHAPE_MISMATCH && none == NULL);
  EXPECT(strstr(kiln_status_message(s), "'seq'") && strstr(kiln_status_message(s), "1..8"));
  kiln_status_free(s);
  s = runMasked(m, 3, 4, &none);
  EXPECT(s != NULL && kiln_status_get_code(s) == KILN_SHAPE_MISMATCH);
  EXPECT(strstr(kiln_status_message(s), "'batch'") && strstr(kiln_status_message(s), "1..2"));
  kiln_status_free(s);

  /* Specialised code gives the same outputs as the code for every shape. */
  kiln_compile_options spec = {"host", 2};
  spec.num_threads = 1;
  spec.no_cache = 1;
  spec.specialize = 1;
  kiln_compiled_model *ms = NULL;
  s = kiln_compile_file(path, &spec, &ms);
  EXPECT(s == NULL);
  kiln_tensor *ys = NULL;
  s = runMasked(ms, 1, 7, &ys);
  EXPECT(s == NULL);
  const float *a = (const float *)kiln_tensor_data(y), *b = (const float *)kiln_tensor_data(ys);
  for (int i = 0; i < 7 * 32; ++i)
    EXPECT(fabs(a[i] - b[i]) <= 1e-4 + 1e-3 * fabs(b[i]));
  kiln_tensor_free(ys);
  kiln_tensor_free(y);
  kiln_compiled_model_free(ms);
  kiln_compiled_model_free(m);

  /* Inconsistent bounds are errors, not crashes. */
  kiln_compile_options bad = {"host", 2};
  bad.no_cache = 1;
  bad.num_dim_bounds = 1;
  kiln_compiled_model *none_m = NULL;
  s = kiln_compile_file(path, &bad, &none_m);
  EXPECT(s != NULL && kiln_status_get_code(s) == KILN_INVALID_ARGUMENT && none_m == NULL);
  kiln_status_free(s);
  const char *unknown[1] = {"length"};
  bad.dim_bound_names = unknown;
  bad.dim_bound_min = lo;
  bad.dim_bound_max = hi;
  s = kiln_compile_file(path, &bad, &none_m);
  EXPECT(s != NULL && none_m == NULL && strstr(kiln_status_message(s), "length"));
  kiln_status_free(s);
  return 0;
}

int main(int argc, char **argv) {
  EXPECT(argc == 3);
  if (boundsAndSpecialisation(argv[2]))
    return 1;
  kiln_compiled_model *m = NULL;
  kiln_compile_options opts = {"host", 2};
  kiln_status *s = kiln_compile_file(argv[1], &opts, &m);
  EXPECT(s == NULL);
  EXPECT(kiln_compiled_model_num_inputs(m) == 1);
  EXPECT(kiln_compiled_model_num_outputs(m) == 1);
  const kiln_tensor_desc *in = kiln_compiled_model_input(m, 0);
  EXPECT(strcmp(in->name, "x") == 0 && in->dtype == KILN_FLOAT32 && in->rank == 2);
  EXPECT(kiln_compiled_model_input(m, 5) == NULL);

  int64_t dims[2] = {1, 4};
  kiln_tensor *x = kiln_tensor_create(KILN_FLOAT32, 2, dims);
  float *p = (float *)kiln_tensor_data(x);
  p[0] = 1; p[1] = 2; p[2] = 3; p[3] = 4;
  const kiln_tensor *ins[1] = {x};
  kiln_tensor *outs[1] = {NULL};
  s = kiln_compiled_model_run(m, ins, 1, outs, 1);
  EXPECT(s == NULL);
  const float *y = (const float *)kiln_tensor_data(outs[0]);
  /* softmax([10, 1]), derived by hand in examples/tiny_mlp/model.textproto */
  EXPECT(fabs(y[0] - 1.0 / (1.0 + exp(-9.0))) < 1e-6);
  EXPECT(fabs(y[1] - exp(-9.0) / (1.0 + exp(-9.0))) < 1e-6);

  /* Errors come back as statuses, never crashes. */
  s = kiln_compiled_model_run(m, ins, 1, outs, 0);
  EXPECT(s != NULL && kiln_status_get_code(s) == KILN_INVALID_ARGUMENT);
  kiln_status_free(s);
  kiln_compiled_model *bad = NULL;
  s = kiln_compile_file("/nonexistent/model.onnx", NULL, &bad);
  EXPECT(s != NULL && bad == NULL && strstr(kiln_status_message(s), "no such file"));
  kiln_status_free(s);

  kiln_tensor_free(outs[0]);
  kiln_tensor_free(x);
  kiln_compiled_model_free(m);
  printf("C API test passed\n");
  return 0;
}
