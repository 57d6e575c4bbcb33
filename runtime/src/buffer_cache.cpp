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
// Buffers are allocated in size classes (bufferSize) and a request takes the
// smallest cached buffer that fits (up to kMaxWaste times its size), so that
// intermediates of run-time size, which also come from here, find their
// buffers again when the input shapes change.
//
// Bounded: at most kMaxEntries buffers and KILN_BUFFER_CACHE_MB megabytes
// (default 256; 0 turns recycling off); kiln_release_cached_memory() gives
// everything back to the system.
#include "buffer_cache.h"

#include "kiln/runtime.h"

#include <cstdint>
#include <cstdlib>
#include <mutex>

#ifdef __linux__
#include <sys/mman.h>
#endif

namespace kiln_rt {
namespace {

constexpr size_t kMinRecycled = 64 << 10; // below: malloc's own free lists do well
constexpr size_t kPage = 4096;
constexpr size_t kHugePage = size_t(2) << 20;
// Enough for the intermediates of run-time size that one run of a
// transformer keeps alive at once, and the outputs of the last run.
constexpr int kMaxEntries = 64;
// A recycled buffer may be up to this many times the bytes asked for.
constexpr size_t kMaxWaste = 4;

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

/// A fresh buffer of `size` bytes (a size class). Those of at least a huge
/// page are aligned to one and offered to the kernel as transparent huge
/// pages (with THP in its default "madvise" mode, nothing else asks): their
/// first touch then faults 2 MiB at a time instead of 4 KiB. On the virtual
/// machines Kiln is measured on a fault costs ~6 us, so a new 8 MiB
/// intermediate cost ~12 ms in faults before any arithmetic.
void *allocate(size_t size) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (size >= kHugePage) {
    size_t pages = (size + kHugePage - 1) / kHugePage * kHugePage;
    void *data = std::aligned_alloc(kHugePage, pages);
    if (data)
      madvise(data, pages, MADV_HUGEPAGE);
    return data;
  }
#endif
  return std::aligned_alloc(size >= kMinRecycled ? kPage : 64, size);
}

} // namespace

size_t paddedSize(size_t bytes) { return ((bytes ? bytes : 1) + 63) / 64 * 64; }

size_t bufferSize(size_t bytes) {
  size_t rounded = paddedSize(bytes);
  if (rounded < kMinRecycled)
    return rounded;
  // Two size classes an octave (2^k and 3 * 2^(k-1)), so that a buffer of
  // run-time size finds a recycled one when the shape changes: with exact
  // sizes, each new sequence length of a model compiled for every shape
  // allocated all its intermediates afresh, and faulting their pages in
  // made the first run at a length 3-4x a steady one (encoder4 at 128:
  // 24 ms against 6). Pages past what a run writes are never touched, so
  // the rounding costs address space, not memory.
  size_t octave = kMinRecycled;
  while (octave < rounded) {
    if (octave + octave / 2 >= rounded)
      return octave + octave / 2;
    if (octave > SIZE_MAX / 4)
      return (rounded + kPage - 1) / kPage * kPage;
    octave *= 2;
  }
  return octave;
}

void *acquireBuffer(size_t bytes, size_t &capacity) {
  size_t size = bufferSize(bytes);
  capacity = size;
  if (size >= kMinRecycled) {
    BufferCache &c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    // The smallest that fits, up to kMaxWaste times the size: a run at a
    // smaller shape takes the buffers of a larger one (their extra pages
    // stay as they are), and one at a larger shape those it left. Among
    // equals, the most recently released: its lines are the likeliest to
    // be in the cache still.
    int best = -1;
    for (int i = c.count - 1; i >= 0; --i)
      if (c.entries[i].size >= size && c.entries[i].size / kMaxWaste <= size &&
          (best < 0 || c.entries[i].size < c.entries[best].size))
        best = i;
    if (best >= 0) {
      void *data = c.entries[best].data;
      capacity = c.entries[best].size;
      for (int j = best; j + 1 < c.count; ++j)
        c.entries[j] = c.entries[j + 1];
      --c.count;
      c.bytes -= capacity;
      return data;
    }
  }
  return allocate(size);
}

void releaseBuffer(void *data, size_t capacity) {
  if (!data)
    return;
  if (capacity >= kMinRecycled) {
    BufferCache &c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    if (capacity <= c.limit) {
      // Oldest out until the new one fits.
      while (c.count > 0 && (c.count == kMaxEntries || c.bytes + capacity > c.limit)) {
        std::free(c.entries[0].data);
        c.bytes -= c.entries[0].size;
        for (int j = 0; j + 1 < c.count; ++j)
          c.entries[j] = c.entries[j + 1];
        --c.count;
      }
      c.entries[c.count++] = Entry{data, capacity};
      c.bytes += capacity;
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
