// What the thread pool needs from the profiler (runtime/src/profile.cpp):
// the profiler and kernel name of the calling thread, published with a
// job, so that every thread that works on it records its slice.
#ifndef KILN_RUNTIME_PROFILE_INTERNAL_H
#define KILN_RUNTIME_PROFILE_INTERNAL_H

#include "kiln/profile.h"

namespace kiln_rt {

struct ProfileContext {
  kiln_profiler *profiler = nullptr; // null: not profiling
  const char *name = nullptr;
};

/// The calling thread's profiler and the kernel it is inside.
ProfileContext currentProfileContext();
int64_t profileClockNs();
void recordProfileSlice(const ProfileContext &context, int64_t beginNs, int64_t endNs,
                        int32_t thread);

} // namespace kiln_rt

#endif
