/* Links an object from `kilnc --emit=obj` with the runtime library alone
 * (no JIT, no LLVM): the ABI is the entry point, its buffer array, the
 * workspace size the object exports, and the thread pool the kernels hand
 * their tiles to. Runs the example MLP on x = [1, 2, 3, 4] with a pool of
 * two threads attached. */
#include "kiln/runtime.h"

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
  kiln_thread_pool *pool = kiln_thread_pool_create(2);
  kiln_thread_pool_attach(pool);
  kiln_entry(buffers);
  kiln_thread_pool_attach(NULL);
  kiln_thread_pool_free(pool);
  printf("workspace=%llu y=%.6f %.6f\n", (unsigned long long)kiln_entry_workspace_size, y[0], y[1]);
  free(workspace);
  return 0;
}
