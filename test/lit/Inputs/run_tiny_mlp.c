/* Links an object from `kilnc --emit=obj` without the JIT or the runtime:
 * the ABI is the entry point, its buffer array, and the workspace size the
 * object exports. Runs the example MLP on x = [1, 2, 3, 4]. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

void kiln_entry(void **buffers);
extern const uint64_t kiln_entry_workspace_size;

int main(void) {
  float x[4] = {1, 2, 3, 4}, y[2] = {0, 0};
  size_t bytes = kiln_entry_workspace_size ? (kiln_entry_workspace_size + 63) / 64 * 64 : 64;
  void *workspace = aligned_alloc(64, bytes);
  void *buffers[] = {x, y, workspace};
  kiln_entry(buffers);
  printf("workspace=%llu y=%.6f %.6f\n", (unsigned long long)kiln_entry_workspace_size, y[0], y[1]);
  free(workspace);
  return 0;
}
