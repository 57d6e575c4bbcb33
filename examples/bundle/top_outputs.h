/* Prints the k largest values of y[0..n) with their indices, largest first:
 * what both example programs show of the model's first output. */
#ifndef KILN_EXAMPLE_TOP_OUTPUTS_H
#define KILN_EXAMPLE_TOP_OUTPUTS_H

#include <stdint.h>
#include <stdio.h>

static void print_top_outputs(const float *y, int64_t n, int k) {
  int64_t printed[16];
  if (k > 16)
    k = 16;
  for (int r = 0; r < k && r < n; ++r) {
    int64_t best = -1;
    for (int64_t i = 0; i < n; ++i) {
      int taken = 0;
      for (int j = 0; j < r; ++j)
        taken |= printed[j] == i;
      if (!taken && (best < 0 || y[i] > y[best]))
        best = i;
    }
    printed[r] = best;
    printf("  %lld: %.6g\n", (long long)best, y[best]);
  }
}

#endif
