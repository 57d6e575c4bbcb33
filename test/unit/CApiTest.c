/* The C API, compiled as C: compile the example, query, run, free. */
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

int main(int argc, char **argv) {
  EXPECT(argc == 2);
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
