// Per-kernel profiles: events recorded by code compiled with profiling on
// (see kiln/profile.h), and their Chrome-trace output.
//
// Events go into one vector under a mutex: a model makes a few hundred
// calls per run, each microseconds to milliseconds long, so a lock per
// event is noise next to the kernels, and a single list keeps the output
// in order without merging per-thread buffers.
#include "profile_internal.h"

#include <chrono>
#include <cstdio>
#include <mutex>
#include <new>
#include <string>
#include <vector>

struct kiln_profiler {
  int64_t originNs = 0;
  mutable std::mutex mutex;
  std::vector<kiln_profile_event> events;
};

namespace {
thread_local kiln_profiler *attachedProfiler = nullptr;
thread_local const char *currentKernel = nullptr;

void record(kiln_profiler *p, const kiln_profile_event &event) {
  try {
    std::lock_guard<std::mutex> lock(p->mutex);
    p->events.push_back(event);
  } catch (...) {
    // Out of memory: the event is dropped, the run goes on.
  }
}

/// `s` as a JSON string body.
void writeJsonString(FILE *f, const char *s) {
  for (const unsigned char *c = (const unsigned char *)(s ? s : ""); *c; ++c) {
    if (*c == '"' || *c == '\\')
      std::fprintf(f, "\\%c", *c);
    else if (*c < 0x20 || *c == 0x7f)
      std::fprintf(f, "\\u%04x", *c);
    else
      std::fputc(*c, f);
  }
}
} // namespace

namespace kiln_rt {

int64_t profileClockNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

ProfileContext currentProfileContext() { return {attachedProfiler, currentKernel}; }

void recordProfileSlice(const ProfileContext &context, int64_t beginNs, int64_t endNs,
                        int32_t thread) {
  if (!context.profiler)
    return;
  kiln_profile_event e{context.name ? context.name : "?", "", 0,
                       beginNs - context.profiler->originNs,
                       endNs - context.profiler->originNs, thread, KILN_PROFILE_SLICE};
  record(context.profiler, e);
}

} // namespace kiln_rt

extern "C" {

kiln_profiler *kiln_profiler_create(void) {
  auto *p = new (std::nothrow) kiln_profiler;
  if (p)
    p->originNs = kiln_rt::profileClockNs();
  return p;
}

void kiln_profiler_free(kiln_profiler *profiler) {
  if (attachedProfiler == profiler)
    attachedProfiler = nullptr;
  delete profiler;
}

kiln_profiler *kiln_profiler_attach(kiln_profiler *profiler) {
  kiln_profiler *previous = attachedProfiler;
  attachedProfiler = profiler;
  return previous;
}

void kiln_profiler_clear(kiln_profiler *profiler) {
  if (!profiler)
    return;
  std::lock_guard<std::mutex> lock(profiler->mutex);
  profiler->events.clear();
}

size_t kiln_profiler_num_events(const kiln_profiler *profiler) {
  if (!profiler)
    return 0;
  std::lock_guard<std::mutex> lock(profiler->mutex);
  return profiler->events.size();
}

const kiln_profile_event *kiln_profiler_events(const kiln_profiler *profiler) {
  if (!profiler)
    return nullptr;
  std::lock_guard<std::mutex> lock(profiler->mutex);
  return profiler->events.data();
}

kiln_status *kiln_profiler_write_chrome_trace(const kiln_profiler *profiler, const char *path) {
  if (!profiler || !path)
    return kiln_status_create(KILN_INVALID_ARGUMENT, "no profiler or no path");
  FILE *f = std::fopen(path, "w");
  if (!f)
    return kiln_status_create(KILN_IO_ERROR,
                              (std::string("cannot write the profile to '") + path + "'").c_str());
  std::lock_guard<std::mutex> lock(profiler->mutex);
  std::fprintf(f, "{\"displayTimeUnit\": \"ns\", \"traceEvents\": [\n");
  std::fprintf(f, "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 1, \"args\": "
                  "{\"name\": \"kiln model\"}}");
  int32_t threads = 0;
  for (const kiln_profile_event &e : profiler->events)
    threads = e.thread + 1 > threads ? e.thread + 1 : threads;
  for (int32_t t = 0; t < threads; ++t)
    std::fprintf(f,
                 ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": %d, "
                 "\"args\": {\"name\": \"%s %d\"}}",
                 t, t == 0 ? "caller" : "worker", t);
  for (const kiln_profile_event &e : profiler->events) {
    std::fprintf(f, ",\n{\"name\": \"");
    writeJsonString(f, e.name);
    std::fprintf(f, "\", \"cat\": \"%s\", \"ph\": \"X\", \"pid\": 1, \"tid\": %d, "
                    "\"ts\": %.3f, \"dur\": %.3f",
                 e.kind == KILN_PROFILE_KERNEL ? "kernel" : "slice", e.thread,
                 e.begin_ns / 1000.0, (e.end_ns - e.begin_ns) / 1000.0);
    if (e.kind == KILN_PROFILE_KERNEL) {
      std::fprintf(f, ", \"args\": {\"kernel\": \"");
      writeJsonString(f, e.kernel);
      std::fprintf(f, "\", \"flops\": %lld}", (long long)e.flops);
    }
    std::fputc('}', f);
  }
  std::fprintf(f, "\n]}\n");
  bool ok = std::ferror(f) == 0;
  ok = std::fclose(f) == 0 && ok;
  if (!ok)
    return kiln_status_create(KILN_IO_ERROR,
                              (std::string("error writing the profile to '") + path + "'").c_str());
  return nullptr;
}

int64_t kiln_profile_begin(const char *name) {
  if (!attachedProfiler)
    return 0;
  currentKernel = name;
  return kiln_rt::profileClockNs();
}

void kiln_profile_end(const char *name, const char *kernel, int64_t flops, int64_t begin) {
  kiln_profiler *p = attachedProfiler;
  currentKernel = nullptr;
  if (!p || begin == 0)
    return;
  int64_t end = kiln_rt::profileClockNs();
  kiln_profile_event e{name ? name : "?", kernel ? kernel : "", flops, begin - p->originNs,
                       end - p->originNs, 0, KILN_PROFILE_KERNEL};
  record(p, e);
}

} // extern "C"
