// Large output buffers freed by kiln_tensor_free are kept for the next run.
//
// Why: every run hands its outputs to the caller in fresh tensors. A buffer
// above glibc's mmap threshold (128 KiB at first) comes from a fresh mmap,
// and writing it faults in every page: in the VMs Kiln is measured on a
// page fault costs several microseconds, so a 64x4096 float output (1 MiB)
// cost 1-3 ms a run, as much as the matrix product that fills it (mlp_gelu
// ran at 0.9x ONNX Runtime with this cost, whose arena reuses its memory).
// A run that frees its previous outputs before the next gets the same pages
// back, already mapped and warm in the cache.
//
// Bounded: at most kMaxEntries buffers and KILN_BUFFER_CACHE_MB megabytes
// (default 256; 0 turns recycling off); kiln_release_cached_memory() gives
// everything back to the system.
#include "buffer_cache.h"

#include "kiln/runtime.h"

#include <cstdint>
#include <cstdlib>
#include <mutex>

namespace kiln_rt {
namespace {

constexpr size_t kMinRecycled = 64 << 10; // below: malloc's own free lists do well
constexpr size_t kPage = 4096;
constexpr int kMaxEntries = 32;

struct Entry {
  void *data;
  size_t size;
};

struct BufferCache {
  std::mutex mutex;
  Entry entries[kMaxEntries];
  int count = 0;
  size_t bytes = 0;
  size_t limit;

  BufferCache() {
    limit = size_t(256) << 20;
    if (const char *env = std::getenv("KILN_BUFFER_CACHE_MB")) {
      char *end = nullptr;
      unsigned long long mb = std::strtoull(env, &end, 10);
      if (end != env && *end == '\0' && mb < (SIZE_MAX >> 20))
        limit = size_t(mb) << 20;
    }
  }
};

// Never destroyed: tensors freed by other static destructors at exit still
// find it, and its buffers stay reachable (no leak report) until the end.
BufferCache &cache() {
  static BufferCache *c = new BufferCache;
  return *c;
}

} // namespace

size_t bufferSize(size_t bytes) {
  size_t rounded = ((bytes ? bytes : 1) + 63) / 64 * 64;
  if (rounded >= kMinRecycled)
    rounded = (rounded + kPage - 1) / kPage * kPage;
  return rounded;
}

void *acquireBuffer(size_t bytes) {
  size_t size = bufferSize(bytes);
  if (size >= kMinRecycled) {
    BufferCache &c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    // The most recently released first: its lines are the likeliest to be
    // in the cache still.
    for (int i = c.count - 1; i >= 0; --i) {
      if (c.entries[i].size != size)
        continue;
      void *data = c.entries[i].data;
      for (int j = i; j + 1 < c.count; ++j)
        c.entries[j] = c.entries[j + 1];
      --c.count;
      c.bytes -= size;
      return data;
    }
  }
  return std::aligned_alloc(size >= kMinRecycled ? kPage : 64, size);
}

void releaseBuffer(void *data, size_t bytes) {
  if (!data)
    return;
  size_t size = bufferSize(bytes);
  if (size >= kMinRecycled) {
    BufferCache &c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    if (size <= c.limit) {
      // Oldest out until the new one fits.
      while (c.count > 0 && (c.count == kMaxEntries || c.bytes + size > c.limit)) {
        std::free(c.entries[0].data);
        c.bytes -= c.entries[0].size;
        for (int j = 0; j + 1 < c.count; ++j)
          c.entries[j] = c.entries[j + 1];
        --c.count;
      }
      c.entries[c.count++] = Entry{data, size};
      c.bytes += size;
      return;
    }
  }
  std::free(data);
}

} // namespace kiln_rt

extern "C" void kiln_release_cached_memory(void) {
  kiln_rt::BufferCache &c = kiln_rt::cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  for (int i = 0; i < c.count; ++i)
    std::free(c.entries[i].data);
  c.count = 0;
  c.bytes = 0;
}
