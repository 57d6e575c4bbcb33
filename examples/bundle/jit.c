/* The same model as bundle-example, compiled at run time through Kiln's C
 * API instead of ahead of time; prints the same lines. */
#include "kiln/kiln_c.h"
#include "top_outputs.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  kiln_compiled_model *model;
  kiln_status *status = kiln_compile_file(KILN_EXAMPLE_MODEL, NULL, &model);
  if (status) {
    fprintf(stderr, "jit-example: %s\n", kiln_status_message(status));
    return 1;
  }
  const kiln_tensor_desc *d = kiln_compiled_model_input(model, 0);
  kiln_tensor *in = kiln_tensor_create(d->dtype, d->rank, d->dims);
  float *x = kiln_tensor_data(in);
  for (int i = 1; i < argc && i <= kiln_tensor_num_elements(in); ++i)
    x[i - 1] = strtof(argv[i], NULL);
  const kiln_tensor *inputs[] = {in};
  kiln_tensor *out = NULL;
  status = kiln_compiled_model_run(model, inputs, 1, &out, 1);
  if (status) {
    fprintf(stderr, "jit-example: %s\n", kiln_status_message(status));
    return 1;
  }
  const float *y = kiln_tensor_data(out);
  int64_t n = kiln_tensor_num_elements(out);
  printf("jit: output '%s'\n", kiln_compiled_model_output(model, 0)->name);
  print_top_outputs(y, n, 5);
  kiln_tensor_free(in);
  kiln_tensor_free(out);
  kiln_compiled_model_free(model);
  return 0;
}
