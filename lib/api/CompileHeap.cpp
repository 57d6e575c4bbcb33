#include "CompileHeap.h"

#include <mutex>

#ifdef __GLIBC__
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>
#endif

#include <cstdint>
#include <cstdlib>

namespace kiln {

namespace {
std::mutex heapMutex;
int activeScopes = 0;

#ifdef __GLIBC__
// glibc's largest mmap threshold on 64-bit hosts (mallopt refuses more):
// tensors above it are still mapped on their own.
constexpr int kCompileMmapThreshold = 32 << 20;
// Address space only: pages are touched as the compile uses them.
constexpr int kCompileTopPad = 64 << 20;
// After a compile: where glibc's own adaptive thresholds end up once blocks
// of tens of megabytes have been freed (the mmap threshold rises to the
// largest freed mapped block, at most 32 MiB, and the trim threshold
// follows at twice that). Setting any threshold turns the adaptation off
// for good, and glibc's initial 128 KiB would then map and unmap every
// larger block at every run, faulting its pages in each time. The top pad
// goes back to glibc's default.
constexpr int kServingMmapThreshold = 32 << 20;
constexpr int kServingTrimThreshold = 64 << 20;
constexpr int kDefaultTopPad = 128 << 10;
// Free heap kept after a compile. Trimming gives the pages back, and the
// runs that follow fault them in again as their allocations move through
// the trimmed space: trimmed after every compile, the decoder's step with
// a growing KV cache went 0.33 -> 0.47 ms for all of 128 tokens. A small
// model's compile leaves less than this free, a large one's far more (ViT-B
// 1.1 GB, which a serving process should not keep).
constexpr size_t kKeptFreeHeap = size_t(256) << 20;
constexpr uintptr_t kHugePage = uintptr_t(2) << 20;
/// Where the heap's huge-page advice starts: the program break when the
/// first compile began (what lies below is in use already).
uintptr_t adviseFrom = 0;

/// Asks for transparent huge pages over the heap grown since the first
/// compile (heapMutex held; adviseFrom set by the first scope). With THP in the kernel's default "madvise"
/// mode, the heap otherwise gets 4 KiB pages, each a fault on first touch.
void adviseHeap() {
#ifdef MADV_HUGEPAGE
  uintptr_t brk = reinterpret_cast<uintptr_t>(sbrk(0));
  uintptr_t lo = (adviseFrom + kHugePage - 1) & ~(kHugePage - 1), hi = brk & ~(kHugePage - 1);
  if (hi > lo)
    madvise(reinterpret_cast<void *>(lo), hi - lo, MADV_HUGEPAGE);
#endif
}
#endif
} // namespace

CompileHeapScope::CompileHeapScope() {
  std::lock_guard<std::mutex> lock(heapMutex);
  if (activeScopes++ > 0)
    return;
#ifdef __GLIBC__
  mallopt(M_MMAP_THRESHOLD, kCompileMmapThreshold);
  // Never trimmed while compiling: -1 is the largest threshold.
  mallopt(M_TRIM_THRESHOLD, -1);
  mallopt(M_TOP_PAD, kCompileTopPad);
  if (!adviseFrom)
    adviseFrom = reinterpret_cast<uintptr_t>(sbrk(0));
  // Grow the heap now (a block just under the mmap threshold, freed at
  // once: the heap keeps it, with the top pad, as free space) so that the
  // advice below covers what the compile will use first.
  if (void *grow = std::malloc(kCompileMmapThreshold - (64 << 10))) {
    // A store the compiler must keep, or it may drop the malloc/free pair.
    static_cast<volatile char *>(grow)[0] = 0;
    std::free(grow);
  }
  adviseHeap();
#endif
}

void CompileHeapScope::grown() {
#ifdef __GLIBC__
  std::lock_guard<std::mutex> lock(heapMutex);
  if (activeScopes > 0)
    adviseHeap();
#endif
}

CompileHeapScope::~CompileHeapScope() {
  std::lock_guard<std::mutex> lock(heapMutex);
  if (--activeScopes > 0)
    return;
#ifdef __GLIBC__
  mallopt(M_MMAP_THRESHOLD, kServingMmapThreshold);
  mallopt(M_TRIM_THRESHOLD, kServingTrimThreshold);
  mallopt(M_TOP_PAD, kDefaultTopPad);
#if __GLIBC_PREREQ(2, 33)
  if (mallinfo2().fordblks > kKeptFreeHeap)
    malloc_trim(0);
#else
  malloc_trim(0);
#endif
#endif
}

} // namespace kiln
