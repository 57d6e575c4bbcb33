// kiln-run --profile: the table of the top kernels printed after a profiled run.
#ifndef KILN_TOOLS_PROFILE_REPORT_H
#define KILN_TOOLS_PROFILE_REPORT_H

#include "kiln/profile.h"

#include <cstdio>

/// Prints, for `runs` profiled runs recorded in `profiler`, the kernels by
/// total time: time per run, share of the summed kernel time, calls per
/// run, GFLOP/s where the kernel's FLOPs are counted, and the threads that
/// ran it. `top` rows, then one for the rest.
void printProfileReport(const kiln_profiler *profiler, long runs, size_t top, FILE *out);

#endif
