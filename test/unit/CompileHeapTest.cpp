// The C library's allocator while a compile runs (lib/api/CompileHeap.h).
#include "CompileHeap.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#ifdef __GLIBC__
#include <malloc.h>
#endif

#if defined(__GLIBC__) && __GLIBC_PREREQ(2, 33)

// While any scope is held (nested ones included), a freed block of several
// megabytes stays in the heap for the next stage instead of being mapped
// and unmapped on its own: with glibc's defaults an 8 MiB block is an mmap.
TEST(CompileHeap, FreedBlocksStayInTheHeapWhileCompiling) {
  constexpr size_t kBlock = size_t(8) << 20;
  kiln::CompileHeapScope outer;
  {
    kiln::CompileHeapScope inner;
  }
  size_t mappedBefore = mallinfo2().hblkhd;
  void *p = std::malloc(kBlock);
  ASSERT_TRUE(p);
  std::memset(p, 1, kBlock);
  EXPECT_EQ(mallinfo2().hblkhd, mappedBefore) << "the block was mapped on its own";
  std::free(p);
  EXPECT_GE(mallinfo2().fordblks, kBlock) << "the freed block left the heap";
}

// When the last scope ends with more than 256 MB of the heap free, that
// memory goes back to the system, so a serving process does not keep a
// large compile's peak.
TEST(CompileHeap, ALargeCompilesFreeHeapIsReturnedAfterwards) {
  constexpr size_t kBlock = size_t(16) << 20;
  size_t arenaHeld;
  {
    kiln::CompileHeapScope scope;
    std::vector<void *> blocks;
    blocks.reserve(24);
    for (int i = 0; i < 24; ++i) { // 384 MiB
      blocks.push_back(std::malloc(kBlock));
      ASSERT_TRUE(blocks.back());
      std::memset(blocks.back(), 1, 4096);
    }
    for (void *b : blocks)
      std::free(b);
    arenaHeld = mallinfo2().arena;
    ASSERT_GE(arenaHeld, 24 * kBlock);
  }
  EXPECT_LT(mallinfo2().arena + 256 * (size_t(1) << 20), arenaHeld);
}

#endif
