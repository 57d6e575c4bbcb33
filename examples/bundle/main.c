/* Runs the bundled model `net` (kiln_add_model in CMakeLists.txt) on the
 * numbers given on the command line (the rest of the first input is
 * zero-filled) and prints its first output's five largest values. */
#include "net.h"
#include "top_outputs.h"

#include <stdio.h>
#include <stdlib.h>

#if NET_INPUT_0_DTYPE != KILN_FLOAT32
#error "this example fills a float32 first input"
#endif

int main(int argc, char **argv) {
  static float input[NET_INPUT_0_NUM_ELEMENTS];
  for (int i = 1; i < argc && i <= NET_INPUT_0_NUM_ELEMENTS; ++i)
    input[i - 1] = strtof(argv[i], NULL);
  const int64_t dims[] = NET_INPUT_0_DIMS;
  kiln_tensor *in = kiln_tensor_wrap(KILN_FLOAT32, NET_INPUT_0_RANK, dims, input);
  kiln_tensor *inputs[NET_NUM_INPUTS] = {in};
  for (int i = 1; i < NET_NUM_INPUTS; ++i) { /* zeros for any further inputs */
    const kiln_tensor_desc *d = &net_model.inputs[i];
    inputs[i] = kiln_tensor_create(d->dtype, d->rank, d->dims);
  }
  kiln_tensor *outputs[NET_NUM_OUTPUTS] = {0};
  kiln_status *status = kiln_model_execute(&net_model, (const kiln_tensor *const *)inputs,
                                           NET_NUM_INPUTS, outputs, NET_NUM_OUTPUTS);
  if (status) {
    fprintf(stderr, "bundle-example: %s\n", kiln_status_message(status));
    kiln_status_free(status);
    return 1;
  }
  printf("%s (%s): output '%s'\n", net_model.name, NET_MODEL_DIGEST, NET_OUTPUT_0_NAME);
  const float *y = kiln_tensor_data(outputs[0]);
  int64_t n = kiln_tensor_num_elements(outputs[0]);
  print_top_outputs(y, n, 5);
  for (int i = 0; i < NET_NUM_INPUTS; ++i)
    kiln_tensor_free(inputs[i]);
  for (int i = 0; i < NET_NUM_OUTPUTS; ++i)
    kiln_tensor_free(outputs[i]);
  return 0;
}
