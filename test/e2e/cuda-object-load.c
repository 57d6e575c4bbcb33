/* Links a CUDA host object (kilnc --target=nvptx64-nvidia-cuda --emit=obj)
 * with libkiln_runtime alone: every symbol the object needs must come from
 * the runtime. Where a GPU is, it loads the embedded PTX, resolves every
 * kernel the host code names and uploads the weights; elsewhere it checks
 * that asking for the device is a clean error, and says so. */
#include "kiln/cuda.h"

#include <stdio.h>
#include <string.h>

KILN_CUDA_DECLARE_OBJECT(kiln_entry);

int main(void) {
  if (kiln_entry_num_kernels <= 0 || strstr(kiln_entry_ptx, ".visible .entry") == NULL) {
    fprintf(stderr, "the object embeds no kernels\n");
    return 1;
  }
  for (int64_t k = 0; k < kiln_entry_num_kernels; ++k) {
    char head[256];
    snprintf(head, sizeof head, ".entry %s(", kiln_entry_kernels[k]);
    if (!strstr(kiln_entry_ptx, head)) {
      fprintf(stderr, "kernel '%s' is not in the embedded PTX\n", kiln_entry_kernels[k]);
      return 1;
    }
  }
  kiln_cuda_device *dev = NULL;
  kiln_status *s = kiln_cuda_device_open(0, &dev);
  if (s) {
    printf("no GPU (%s): the object links against the runtime alone and names %lld kernels, "
           "all in its PTX; %lld bytes of weights, %lld of workspace\n",
           kiln_status_message(s), (long long)kiln_entry_num_kernels,
           (long long)kiln_entry_weights_size, (long long)kiln_entry_workspace_size);
    int clean = kiln_status_get_code(s) == KILN_DEVICE_ERROR && dev == NULL;
    kiln_status_free(s);
    return clean ? 0 : 1;
  }
  kiln_cuda_program *program = NULL;
  s = kiln_cuda_program_create(dev, kiln_entry_ptx, kiln_entry_kernels,
                               (size_t)kiln_entry_num_kernels, kiln_entry_weights,
                               (size_t)kiln_entry_weights_size,
                               (size_t)kiln_entry_workspace_size, &program);
  if (s) {
    fprintf(stderr, "error: %s\n", kiln_status_message(s));
    kiln_status_free(s);
    kiln_cuda_device_close(dev);
    return 1;
  }
  printf("%s: loaded %lld kernels and %lld bytes of weights\n", kiln_cuda_device_name(dev),
         (long long)kiln_entry_num_kernels, (long long)kiln_entry_weights_size);
  kiln_cuda_program_free(program);
  kiln_cuda_device_close(dev);
  (void)kiln_entry;
  return 0;
}
