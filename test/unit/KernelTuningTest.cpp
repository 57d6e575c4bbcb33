// The tuner's candidates for a convolution layer (lib/api/KernelTuning.h):
// each distinct cut and order of its work items once, the default first.
// Counts by hand from kiln_conv2d_pixel_blocks and kiln_conv2d_pixel_major.
#include "KernelTuning.h"
#include "kiln/kernels.h"

#include <gtest/gtest.h>

using namespace kiln;

namespace {
std::vector<int64_t> candidates(int64_t h, int64_t w, int64_t c, int64_t oc, int64_t k,
                                int64_t groups = 1, int64_t flags = 0) {
  int64_t fields[17] = {1, h, w, c, h, w, oc, k, k, 1, 1, k / 2, k / 2, 1, 1, groups, flags};
  return convScheduleCandidates(fields);
}
constexpr int64_t kHalf = KILN_CONV_HALF_BLOCKS, kDouble = KILN_CONV_DOUBLE_BLOCKS;
constexpr int64_t kPixel = KILN_CONV_PIXEL_MAJOR, kPanel = KILN_CONV_PANEL_MAJOR;
} // namespace

// 56x56 = 3136 pixels, 64 -> 64 channels (2 panels), 1x1 (16 KB of
// weights): 65 blocks of 48, pixel-major by default. All six cuts and
// orders differ; the default's own (48, pixel-major) is not repeated.
TEST(KernelTuning, EveryCutAndOrderOnce) {
  EXPECT_EQ(candidates(56, 56, 64, 64, 1),
            (std::vector<int64_t>{0, kPanel, kHalf | kPixel, kHalf | kPanel, kDouble | kPixel,
                                  kDouble | kPanel}));
}

// A 7x7 map (49 pixels): one block of 48 (with the 49th) or of 96 (the
// same items: no candidate), two blocks of 24 in either order.
TEST(KernelTuning, OneBlockIsOneCandidate) {
  EXPECT_EQ(candidates(7, 7, 512, 512, 3),
            (std::vector<int64_t>{0, kHalf | kPixel, kHalf | kPanel}));
}

// One panel (16 outputs) of one group: both orders give the same items,
// so only the block sizes are candidates.
TEST(KernelTuning, OnePanelHasNoOrder) {
  EXPECT_EQ(candidates(112, 112, 32, 16, 1),
            (std::vector<int64_t>{0, kHalf | kPixel, kDouble | kPixel}));
}

// Five pixels: one block whatever its size; nothing to tune. Schedule bits
// already in the flags (a stored choice) do not change the candidates.
TEST(KernelTuning, NothingToTune) {
  EXPECT_EQ(candidates(1, 5, 40, 33, 1), (std::vector<int64_t>{0}));
  EXPECT_EQ(candidates(56, 56, 64, 64, 1, 1, kHalf | kPanel | KILN_CONV_HAS_RESIDUAL),
            candidates(56, 56, 64, 64, 1, 1, KILN_CONV_HAS_RESIDUAL));
}
