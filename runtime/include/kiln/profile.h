/* Kiln runtime: per-kernel profiles.
 *
 * Code compiled with profiling on (kilnc --profile, kiln-run --profile, the
 * JIT option `profile`) brackets every kernel of the model with
 * kiln_profile_begin / kiln_profile_end. Those record an event in the
 * profiler attached to the running thread, and nothing when none is
 * attached. Code compiled without profiling calls neither: profiling costs
 * nothing unless asked for at compile time.
 *
 * A kernel that the thread pool splits also gives one "slice" event per
 * thread that worked on it, so a trace shows which threads ran what. */
#ifndef KILN_PROFILE_H
#define KILN_PROFILE_H

#include "kiln/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kiln_profiler kiln_profiler;

typedef enum kiln_profile_event_kind {
  KILN_PROFILE_KERNEL = 0, /* one kernel call, on the thread that runs the model */
  KILN_PROFILE_SLICE = 1   /* the part of a split kernel that one thread ran */
} kiln_profile_event_kind;

typedef struct kiln_profile_event {
  const char *name;   /* the ONNX node(s) the kernel computes, "node (Op) + ..." */
  const char *kernel; /* the compiled function or microkernel that ran */
  int64_t flops;      /* floating-point operations of the call; 0: not counted */
  int64_t begin_ns;   /* since the profiler was created */
  int64_t end_ns;
  int32_t thread;     /* 0: the thread that ran the model; k > 0: pool worker k */
  int32_t kind;       /* kiln_profile_event_kind */
} kiln_profile_event;

/* NULL when out of memory. */
kiln_profiler *kiln_profiler_create(void);
void kiln_profiler_free(kiln_profiler *profiler);

/* Makes `profiler` the one that kernels run by this thread record into
 * (NULL: none); returns the previously attached one. Pool workers record
 * into the profiler of the thread that handed them the work. */
kiln_profiler *kiln_profiler_attach(kiln_profiler *profiler);

/* Drops the events recorded so far (a warm-up run, say). */
void kiln_profiler_clear(kiln_profiler *profiler);

/* The events in the order they ended. The pointer is valid until the next
 * event is recorded or the profiler is cleared or freed. */
size_t kiln_profiler_num_events(const kiln_profiler *profiler);
const kiln_profile_event *kiln_profiler_events(const kiln_profiler *profiler);

/* Writes the events as a Chrome trace (chrome://tracing, ui.perfetto.dev):
 * one complete event per kernel and slice, one track per thread. */
kiln_status *kiln_profiler_write_chrome_trace(const kiln_profiler *profiler, const char *path);

/* Called by compiled code; not for direct use. begin returns a timestamp
 * for end (0 when no profiler is attached) and makes `name` the kernel
 * that kiln_parallel_for slices are attributed to. */
int64_t kiln_profile_begin(const char *name);
void kiln_profile_end(const char *name, const char *kernel, int64_t flops, int64_t begin);

#ifdef __cplusplus
}
#endif

#endif /* KILN_PROFILE_H */
