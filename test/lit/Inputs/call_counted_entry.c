/* Calls a bundle's entry point directly, as its header documents for a
 * model with a run-time row count: input buffers, output buffers at their
 * largest size, one int64 per row count, then the workspace. The model is
 * ONNX's test_nonzero_example: NonZero of a 2x2 bool, whose output is
 * [2, count] int64 with at most 4 columns. */
#include "nz.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int main(void) {
  uint8_t cond[4] = {1, 0, 1, 1}; /* [[1, 0], [1, 1]] */
  int64_t out[NZ_OUTPUT_0_NUM_ELEMENTS];
  int64_t count = -1;
  void *workspace = NZ_WORKSPACE_SIZE ? aligned_alloc(64, (NZ_WORKSPACE_SIZE + 63) / 64 * 64) : 0;
  void *buffers[] = {cond, out, &count, workspace};
  nz_entry(buffers);
  int64_t cols = NZ_OUTPUT_0_NUM_ELEMENTS / 2; /* the largest count */
  printf("rows axis %d, row count %lld of at most %lld\n", NZ_OUTPUT_0_ROWS_AXIS,
         (long long)count, (long long)cols);
  for (int r = 0; r < 2; ++r) {
    printf("row %d:", r);
    for (int64_t c = 0; c < count; ++c)
      printf(" %lld", (long long)out[r * cols + c]);
    printf("\n");
  }
  free(workspace);
  return 0;
}
