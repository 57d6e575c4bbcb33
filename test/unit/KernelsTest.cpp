// The microkernels (runtime/kernels/*Kernels.cpp), compiled natively for each
// register-tile variant, against plain reference loops on awkward sizes:
// sizes of 1, primes, tails of the row tile and of the channel panel,
// padding larger than the window, strides, dilations, groups, large K.
// The weight packing here is written from the layout contract in
// the kernels, independently of the compiler's packer.
#include "kiln/runtime.h"
#include "kiln/kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

extern "C" {
void kiln_conv2d_nhwc_f32(intptr_t, intptr_t, intptr_t, intptr_t, intptr_t, intptr_t, float,
                          float, int64_t, int64_t);
void kiln_dwconv2d_nhwc_f32(intptr_t, intptr_t, intptr_t, intptr_t, intptr_t, intptr_t, float,
                            float, int64_t, int64_t);
void kiln_matmul_f32(intptr_t, intptr_t, intptr_t, intptr_t);
void kiln_attention_f32(intptr_t, intptr_t, intptr_t, intptr_t, intptr_t, float);
void kiln_attention_mask_f32(intptr_t, intptr_t, intptr_t, intptr_t, intptr_t, intptr_t, float,
                             float);
void kiln_pool2d_nhwc_f32(intptr_t, intptr_t, intptr_t, int64_t, int64_t);
void kiln_maxpool2d_nhwc_i8(intptr_t, intptr_t, intptr_t, int64_t, int64_t);
}

namespace {

// Every test runs with a three-thread pool attached: calls above the
// kernels' parallel threshold (the *Parallel tests, and a few others) split
// their tiles over it, unevenly; smaller ones take the serial path.
struct PoolEnvironment : ::testing::Environment {
  kiln_thread_pool *pool = nullptr;
  void SetUp() override { kiln_thread_pool_attach(pool = kiln_thread_pool_create(3)); }
  void TearDown() override {
    kiln_thread_pool_attach(nullptr);
    kiln_thread_pool_free(pool);
  }
};
const auto *const poolEnvironment = ::testing::AddGlobalTestEnvironment(new PoolEnvironment);

constexpr int64_t kPanel = 32;
constexpr float kInf = std::numeric_limits<float>::infinity();

intptr_t addr(const void *p) { return reinterpret_cast<intptr_t>(p); }

std::vector<float> randoms(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float &x : v)
    x = d(gen);
  return v;
}

void expectClose(const std::vector<float> &got, const std::vector<double> &want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-4 + 1e-4 * std::fabs(want[i])) << "at flat index " << i;
}

double gelu(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }

struct Conv {
  int64_t n, h, w, c, oc, kh, kw, sh, sw, pt, pl, pb, pr, dh, dw, groups;
  bool bias, residual;
  float lo = -kInf, hi = kInf;
  bool gelu = false;
  int64_t schedule = 0; ///< KILN_CONV_SCHEDULE_BITS
  int64_t oh() const { return (h + pt + pb - dh * (kh - 1) - 1) / sh + 1; }
  int64_t ow() const { return (w + pl + pr - dw * (kw - 1) - 1) / sw + 1; }
};

/// Stores `dense` ([pixels][c]) with `extra` more floats after each pixel's
/// channels, as a channel slice of a wider tensor is laid out; the gaps hold
/// `gap`.
std::vector<float> widen(const std::vector<float> &dense, int64_t c, int64_t extra, float gap) {
  int64_t pixels = (int64_t)dense.size() / c;
  std::vector<float> wide(pixels * (c + extra), gap);
  for (int64_t p = 0; p < pixels; ++p)
    std::copy(dense.begin() + p * c, dense.begin() + (p + 1) * c, wide.begin() + p * (c + extra));
  return wide;
}

/// The kernel's output read back from a widened buffer; the gaps must still
/// hold their sentinel (nothing wrote outside the slice).
std::vector<float> narrow(const std::vector<float> &wide, int64_t c, int64_t extra) {
  int64_t pixels = (int64_t)wide.size() / (c + extra);
  std::vector<float> dense(pixels * c);
  for (int64_t p = 0; p < pixels; ++p) {
    for (int64_t i = 0; i < c; ++i)
      dense[p * c + i] = wide[p * (c + extra) + i];
    for (int64_t i = c; i < c + extra; ++i)
      EXPECT_EQ(wide[p * (c + extra) + i], -7.0f) << "pixel " << p << " gap " << i - c;
  }
  return dense;
}

/// Runs the kernel the compiler would pick for `s` and compares with a
/// double-precision reference. `inExtra`/`outExtra`: the input and output
/// are channel slices of wider tensors (pixel strides c + inExtra and
/// oc + outExtra).
void checkConv(const Conv &s, int64_t inExtra = 0, int64_t outExtra = 0) {
  int64_t cg = s.c / s.groups, fg = s.oc / s.groups, oh = s.oh(), ow = s.ow();
  auto in = randoms(s.n * s.h * s.w * s.c, 1);
  auto w = randoms(s.oc * cg * s.kh * s.kw, 2); // ONNX [O][I/g][KH][KW]
  auto b = randoms(s.oc, 3);
  auto res = randoms(s.n * oh * ow * s.oc, 4);
  if (!s.bias)
    std::fill(b.begin(), b.end(), 0.0f);

  std::vector<double> want(s.n * oh * ow * s.oc);
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t y = 0; y < oh; ++y)
      for (int64_t x = 0; x < ow; ++x)
        for (int64_t o = 0; o < s.oc; ++o) {
          int64_t g = o / fg;
          double acc = b[o];
          for (int64_t ky = 0; ky < s.kh; ++ky)
            for (int64_t kx = 0; kx < s.kw; ++kx) {
              int64_t iy = y * s.sh - s.pt + ky * s.dh, ix = x * s.sw - s.pl + kx * s.dw;
              if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w)
                continue;
              for (int64_t i = 0; i < cg; ++i)
                acc += (double)in[((n * s.h + iy) * s.w + ix) * s.c + g * cg + i] *
                       w[((o * cg + i) * s.kh + ky) * s.kw + kx];
            }
          int64_t at = ((n * oh + y) * ow + x) * s.oc + o;
          if (s.residual)
            acc += res[at];
          if (s.gelu)
            acc = gelu(acc);
          want[at] = std::min<double>(std::max<double>(acc, s.lo), s.hi);
        }

  bool depthwise = s.groups == s.c && s.groups == s.oc && s.groups > 1;
  std::vector<float> pw, pb;
  if (depthwise) {
    int64_t cpad = (s.c + kPanel - 1) / kPanel * kPanel;
    pw.assign(s.kh * s.kw * cpad, 0.0f);
    pb.assign(cpad, 0.0f);
    for (int64_t c = 0; c < s.c; ++c) {
      pb[c] = b[c];
      for (int64_t k = 0; k < s.kh * s.kw; ++k)
        pw[k * cpad + c] = w[c * s.kh * s.kw + k];
    }
  } else {
    int64_t panels = (fg + kPanel - 1) / kPanel;
    pw.assign(s.groups * panels * s.kh * s.kw * cg * kPanel, 0.0f);
    pb.assign(s.groups * panels * kPanel, 0.0f);
    for (int64_t o = 0; o < s.oc; ++o) {
      int64_t g = o / fg, f = o % fg, p = f / kPanel, lane = f % kPanel;
      pb[(g * panels + p) * kPanel + lane] = b[o];
      for (int64_t ky = 0; ky < s.kh; ++ky)
        for (int64_t kx = 0; kx < s.kw; ++kx)
          for (int64_t i = 0; i < cg; ++i)
            pw[((((g * panels + p) * s.kh + ky) * s.kw + kx) * cg + i) * kPanel + lane] =
                w[((o * cg + i) * s.kh + ky) * s.kw + kx];
    }
  }
  int64_t params[] = {s.n,  s.h,  s.w,  s.c,  oh,   ow,   s.oc, s.kh,     s.kw,
                      s.sh, s.sw, s.pt, s.pl, s.dh, s.dw, s.groups,
                      (s.residual ? 1 : 0) | (s.gelu ? 2 : 0) | s.schedule};
  std::vector<float> wideIn = widen(in, s.c, inExtra, -7.0f);
  std::vector<float> out = widen(std::vector<float>(want.size(), std::nanf("")), s.oc, outExtra,
                                 -7.0f);
  (depthwise ? kiln_dwconv2d_nhwc_f32 : kiln_conv2d_nhwc_f32)(
      addr(params), addr(wideIn.data()), addr(pw.data()), addr(pb.data()),
      s.residual ? addr(res.data()) : 0, addr(out.data()), s.lo, s.hi, s.c + inExtra,
      s.oc + outExtra);
  expectClose(narrow(out, s.oc, outExtra), want);
}

TEST(Kernels, ConvPlain3x3) { checkConv({1, 9, 11, 5, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, false}); }
TEST(Kernels, ConvSizeOne) { checkConv({1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, false, false}); }
TEST(Kernels, ConvPanelAndRowTails) {
  // 37 output channels: one full panel and a 5-wide tail; 13x13 pixels.
  checkConv({2, 13, 13, 17, 37, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, true});
}
TEST(Kernels, ConvEightRowTiles) {
  // 64 pixels per image: a 48-pixel block, then 16 pixels as two 8-row
  // tiles; 55 pixels: a block, then 7 rows (an 8-row tile with MR = 12, a
  // 7-row one on AVX-512, 6 + 1 on AVX2).
  checkConv({2, 8, 8, 19, 40, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, true, true, -0.5f, 0.5f});
  checkConv({1, 5, 11, 6, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, false});
}
TEST(Kernels, ConvStride2AsymmetricPads) {
  checkConv({1, 15, 12, 8, 64, 3, 3, 2, 2, 0, 1, 2, 0, 1, 1, 1, true, false});
}
TEST(Kernels, Conv7x7Stride2Stem) {
  checkConv({1, 23, 23, 3, 64, 7, 7, 2, 2, 3, 3, 3, 3, 1, 1, 1, true, false, 0.0f, kInf});
}
// Wide enough that whole tiles have their window rows inside the image:
// the fused window-row path for few input channels (3 and 5), next to edge
// tiles on the per-tap path; rows above and below the image read zeros.
TEST(Kernels, ConvNarrowInputWindowRows) {
  checkConv({1, 40, 60, 3, 64, 7, 7, 2, 2, 3, 3, 3, 3, 1, 1, 1, true, false, 0.0f, kInf});
  checkConv({2, 17, 50, 5, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, true});
  checkConv({1, 9, 70, 1, 33, 5, 5, 1, 2, 2, 0, 2, 0, 1, 1, 1, false, false});
}
TEST(Kernels, ConvDilated) { checkConv({1, 11, 11, 6, 33, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, 1, false, false}); }
TEST(Kernels, ConvPaddingWiderThanWindow) {
  checkConv({1, 2, 3, 4, 5, 3, 3, 1, 1, 4, 4, 4, 4, 1, 1, 1, true, false});
}
TEST(Kernels, ConvGrouped) { checkConv({1, 7, 9, 12, 18, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 3, true, true}); }
TEST(Kernels, ConvDepthwiseMultiplier) {
  // groups == channels but 2 outputs each: the general kernel, per group.
  checkConv({1, 8, 8, 4, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 4, true, false});
}
TEST(Kernels, ConvLargeK1x1WithClamp) {
  checkConv({1, 5, 7, 4099, 40, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, true, true, -0.5f, 0.5f});
}
// Tiles whose rows lie a multiple of 4 KB apart copy some rows to a stack
// buffer (tileRowsAlias): a 1024-channel 1x1 conv over 3 pixel blocks and
// 3 panels (the last one half), a 1000-channel slice of a 1024-wide tensor
// (chunk tails that are not whole vectors), a stride-2 1x1 conv over 512
// channels, and a padded 3x3 conv whose edge rows read the zero rows.
TEST(Kernels, ConvRowsFourKilobytesApart) {
  checkConv({1, 9, 11, 1024, 70, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, true, true});
  checkConv({1, 5, 7, 1000, 40, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, true, false}, 24, 0);
  checkConv({1, 8, 26, 512, 33, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 1, false, true, 0.0f, kInf});
  checkConv({1, 6, 7, 1024, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, false});
}
// Pointwise convolutions at unit stride without padding take pointwiseTile:
// two images of 7x9 pixels (tiles that cross an image's end), two groups of
// 40 output channels each (a full panel, then a half one), a residual and a
// clamp; input and output as channel slices of wider tensors; and one with a
// GELU epilogue over full panels.
// A 1x1 convolution padded at the end only (a strided ConvTranspose's
// phases, kiln's importer): the last row and column of the output read
// only padding, so it must not take the pointwise path, which reads
// oh x ow input pixels (it did, and read past the input).
TEST(Kernels, OneByOneWithEndPads) {
  checkConv({2, 4, 5, 3, 27, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1, true, false});
  checkConv({1, 6, 3, 20, 40, 1, 1, 1, 1, 0, 0, 0, 2, 1, 1, 1, false, false});
}

TEST(Kernels, PointwiseTiles) {
  checkConv({2, 7, 9, 96, 80, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 2, true, true, -1.0f, 1.5f}, 5, 3);
  checkConv({1, 5, 11, 256, 64, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, true, false, -kInf, kInf,
             true});
}
// At most eight output pixels per image (matrix-vector products, as a
// decoder's projections at one token per sequence): pointwiseRowStreams
// reads the reduction as four ranges at once, then the c % 4 channels after
// them. One pixel: a half last panel with a residual and a clamp; three
// images; fewer channels than ranges; two groups with a GELU. Two to eight
// pixels: tiles of several rows and a last tile of fewer rows.
TEST(Kernels, PointwiseFewRowStreams) {
  checkConv({1, 1, 1, 770, 40, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, true, true, -0.5f, 0.5f});
  checkConv({3, 1, 1, 1027, 70, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, true, false});
  checkConv({1, 1, 1, 3, 33, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, false, true});
  checkConv({1, 1, 1, 512, 64, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 2, true, false, -kInf, kInf, true});
  checkConv({1, 1, 4, 771, 72, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, true, true, -0.5f, 0.5f});
  checkConv({2, 3, 1, 258, 40, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, true, false}, 3, 5);
  checkConv({1, 2, 1, 96, 33, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, false, true, -kInf, kInf, true});
  // Whole chunks, then a partial chunk and the c % 4 channels after the
  // ranges (c / 4 = 225 and 226 steps: 7 chunks of 32 and 1 or 2 more):
  // one and four rows, two groups.
  checkConv({1, 1, 1, 900, 40, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, true, true});
  checkConv({1, 2, 2, 1806, 66, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 2, true, false, -0.5f, 0.5f});
  // Rows 3072 floats apart (a multiple of 4 KB, which MR-row tiles copy on
  // AVX-512): 3 rows, as a decoder's down-projection at batch 3; and 6.
  checkConv({1, 1, 3, 3072, 40, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, true, true});
  checkConv({1, 1, 6, 3072, 40, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, true, true});
  // Five to eight rows (an encoder over a few tokens): every tile count,
  // with a residual and a clamp, two images, two groups with a GELU.
  checkConv({1, 1, 7, 771, 72, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, true, true, -0.5f, 0.5f});
  checkConv({1, 2, 4, 258, 40, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, true, false});
  checkConv({2, 1, 5, 1806, 66, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 2, true, false, -kInf, kInf,
             true});
}

TEST(Kernels, Depthwise3x3Relu6) {
  checkConv({1, 10, 9, 53, 53, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 53, true, true, 0.0f, 6.0f});
}
TEST(Kernels, Depthwise7x7Stride2) {
  checkConv({2, 17, 14, 96, 96, 7, 7, 2, 2, 3, 3, 3, 3, 1, 1, 96, true, false});
}
// The unrolled sliding-window path (3x3 and 5x5 at strides 1 and 2, 7x7 at
// stride 1) on rows with interior blocks, edge blocks and short last blocks;
// 35 channels: two full vectors and a 3-wide tail on the general path.
TEST(Kernels, DepthwiseInteriorWindows) {
  checkConv({1, 6, 40, 40, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 40, true, true, 0.0f, 6.0f});
  checkConv({1, 9, 41, 35, 35, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 35, true, false});
  checkConv({2, 7, 30, 32, 32, 5, 5, 1, 1, 2, 2, 2, 2, 1, 1, 32, false, true});
  checkConv({1, 11, 45, 48, 48, 5, 5, 2, 2, 2, 2, 2, 2, 1, 1, 48, true, false, -1.0f, 1.0f});
  checkConv({1, 9, 33, 16, 16, 7, 7, 1, 1, 3, 3, 3, 3, 1, 1, 16, true, true});
  // Stride 2 along rows only, 1 along columns: the stride-1 window.
  checkConv({1, 12, 40, 32, 32, 3, 3, 2, 1, 1, 1, 1, 1, 1, 1, 32, true, false});
}
TEST(Kernels, DepthwiseDilatedOddChannels) {
  checkConv({1, 9, 9, 3, 3, 5, 5, 1, 1, 4, 4, 4, 4, 2, 2, 3, false, false});
}

// Channel slices of concatenations: the input read from, and the output
// written into, a wider tensor (in-place Concat).
TEST(Kernels, ConvStridedInputAndOutput) {
  checkConv({2, 13, 13, 17, 37, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, true}, 5, 11);
}
TEST(Kernels, ConvHalfPanelStridedOutput) {
  checkConv({1, 7, 6, 8, 16, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, true, false}, 0, 48);
}
TEST(Kernels, ConvParallel) {
  checkConv({2, 23, 19, 40, 70, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, true, 0.0f, kInf}, 3, 5);
}
TEST(Kernels, DepthwiseParallel) {
  checkConv({1, 41, 37, 67, 67, 7, 7, 1, 1, 3, 3, 3, 3, 1, 1, 67, true, false}, 0, 9);
}
TEST(Kernels, DepthwiseStridedInputAndOutput) {
  checkConv({1, 10, 9, 53, 53, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 53, true, true, 0.0f, 6.0f}, 3, 19);
}

// GELU in the epilogue (kiln-fuse-epilogues' `gelu`): after bias and
// residual, on panel and row tails, also through the 8- and 4-row tiles.
TEST(Kernels, ConvGeluEpilogue) {
  Conv s{1, 1, 61, 300, 70, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, true, true};
  s.gelu = true;
  checkConv(s);
  Conv t{1, 5, 7, 9, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, false};
  t.gelu = true;
  checkConv(t);
}

// The kernel's GELU against the C library's erf in double, over every
// float in [-10, 10] on a 2^-12 grid (x * 2^12 integral), and far out: the
// error bound is what the accuracy of an f32 GELU can be held to.
TEST(Kernels, GeluAccuracy) {
  std::vector<float> xs;
  for (int64_t i = -10 * 4096; i <= 10 * 4096; ++i)
    xs.push_back((float)i / 4096.0f);
  for (float far : {11.0f, 20.0f, 100.0f, 1e6f, 1e30f, 3e38f})
    xs.insert(xs.end(), {far, -far});
  int64_t n = (int64_t)xs.size();
  // A 1x1 convolution of one channel with weight 1 and no bias: y = gelu(x).
  int64_t params[] = {1, 1, n, 1, 1, n, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 2};
  std::vector<float> w(kPanel, 0.0f), b(kPanel, 0.0f), out(n, std::nanf(""));
  w[0] = 1.0f;
  kiln_conv2d_nhwc_f32(addr(params), addr(xs.data()), addr(w.data()), addr(b.data()), 0,
                       addr(out.data()), -kInf, kInf, 1, 1);
  // Error relative to max(1, |x|): f32 cannot do better for x < -1, where
  // 1 + erf cancels (GELU(-3) = -0.004 from 1 + erf = 0.0027, whose f32
  // rounding alone is 2e-5 of it); and relative error where GELU >= 0.5.
  double worstScaled = 0, worstRel = 0;
  float worstScaledAt = 0, worstRelAt = 0;
  for (int64_t i = 0; i < n; ++i) {
    double want = gelu(xs[i]), err = std::fabs(out[i] - want);
    double scaled = err / std::max(1.0, std::fabs((double)xs[i]));
    if (scaled > worstScaled)
      worstScaled = scaled, worstScaledAt = xs[i];
    if (want >= 0.5 && err / want > worstRel)
      worstRel = err / want, worstRelAt = xs[i];
  }
  std::printf("GELU: max |error| / max(1, |x|) %.3g (x = %g); max relative error where "
              "GELU >= 0.5: %.3g (x = %g)\n",
              worstScaled, worstScaledAt, worstRel, worstRelAt);
  // Measured: 2.2e-7 for both (x = 4.13), under 2 ulp of the result.
  EXPECT_LT(worstScaled, 4e-7);
  EXPECT_LT(worstRel, 4e-7);
}

TEST(Kernels, GeluKeepsNaN) {
  std::vector<float> xs{std::nanf(""), 1.0f, -std::nanf("")};
  int64_t params[] = {1, 1, 3, 1, 1, 3, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 2};
  std::vector<float> w(kPanel, 0.0f), b(kPanel, 0.0f), out(3, 0.0f);
  w[0] = 1.0f;
  kiln_conv2d_nhwc_f32(addr(params), addr(xs.data()), addr(w.data()), addr(b.data()), 0,
                       addr(out.data()), -kInf, kInf, 1, 1);
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_NEAR(out[1], gelu(1.0), 1e-6);
  EXPECT_TRUE(std::isnan(out[2]));
}

// A NaN in the input stays NaN in every output it reaches when the conv
// has no activation (with a fused Relu/Clip it becomes the bound, as
// max(x, 0) does in MLAS).
TEST(Kernels, NaNPropagatesThroughConvEpilogue) {
  for (float lo : {-kInf}) {
    int64_t params[] = {1, 1, 3, 2, 1, 3, 20, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0};
    std::vector<float> in{1, 2, std::nanf(""), 4, 5, 6};
    std::vector<float> w(32 * 2, 0.5f), b(32, 0.0f), out(3 * 20, 0.0f);
    kiln_conv2d_nhwc_f32(addr(params), addr(in.data()), addr(w.data()), addr(b.data()), 0,
                         addr(out.data()), lo, kInf, 2, 20);
    for (int64_t o = 0; o < 20; ++o) {
      EXPECT_FALSE(std::isnan(out[o])) << o;
      EXPECT_TRUE(std::isnan(out[20 + o])) << "pixel 1, channel " << o << ", lo " << lo;
    }
  }
}

TEST(Kernels, NaNPropagatesThroughMatMul) {
  // K = 300 crosses the kernel's K blocks; the NaN is in the first one.
  int64_t K = 300;
  std::vector<float> a(K, 1.0f), b(K * 32, 1.0f), out(32, 0.0f);
  a[3] = std::nanf("");
  int64_t params[] = {1, 1, 32, K, 0, 0, 0, K, 32, 32, 0, 0, 0};
  kiln_matmul_f32(addr(params), addr(a.data()), addr(b.data()), addr(out.data()));
  for (float v : out)
    EXPECT_TRUE(std::isnan(v));
}

/// A and B may sit inside larger buffers, as attention heads inside one
/// projection's output: `offset` floats in, rows `pad` floats longer than
/// they need be.
void checkMatMul(int64_t batch, int64_t M, int64_t N, int64_t K, bool broadcastB, bool transB,
                 int64_t offset = 0, int64_t pad = 0) {
  int64_t lda = K + pad, ldb = (transB ? K : N) + pad;
  int64_t bRows = transB ? N : K;
  auto a = randoms(offset + batch * M * lda, 5);
  auto b = randoms(offset + (broadcastB ? 1 : batch) * bRows * ldb, 6);
  std::vector<double> want(batch * M * N);
  for (int64_t bi = 0; bi < batch; ++bi)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double acc = 0;
        const float *A = a.data() + offset + bi * M * lda;
        const float *B = b.data() + offset + (broadcastB ? 0 : bi * bRows * ldb);
        for (int64_t k = 0; k < K; ++k)
          acc += (double)A[m * lda + k] * (transB ? B[n * ldb + k] : B[k * ldb + n]);
        want[(bi * M + m) * N + n] = acc;
      }
  int64_t params[] = {batch, M, N, K, M * lda, broadcastB ? 0 : bRows * ldb, M * N,
                      lda,   ldb, N, transB ? 1 : 0, offset, offset};
  std::vector<float> out(want.size(), std::nanf(""));
  kiln_matmul_f32(addr(params), addr(a.data()), addr(b.data()), addr(out.data()));
  expectClose(out, want);
}

/// Additive masks for kiln_attention_mask_f32's tests.
enum class Mask {
  None,
  /// [2, 1, N]: one padding row per half of the heads (two sequences of
  /// heads / 2 heads each), -inf on the padded keys (the last third of
  /// the second sequence's); the kernel reads it with div heads / 2.
  Padding,
  /// [M, N], the same for every head: causal (-inf above the diagonal
  /// shifted by N - M) plus a finite bias, and a QK scale of 0.5.
  CausalBias,
  /// As Padding, with the float minimum (Hugging Face's padding value)
  /// instead of -inf on the first sequence's last half of keys, and on
  /// every key of the second: a row with no open key, whose softmax is
  /// then uniform over all keys (the kernel must not drop keys for it).
  PaddingMinimum,
  /// [M, N], the same for every head: row m opens keys [0, N - 3m) (at
  /// least one), -inf after: later rows of a block open fewer keys than
  /// earlier ones.
  Staircase,
  /// Staircase with row M / 2 closed everywhere by the float minimum (its
  /// softmax uniform): its block keeps every key.
  StaircaseClosedRow,
};

/// softmax(scale * Q K^T) V with Q, K, V as heads of one [tokens, 3 * H * D]
/// projection (token-major, as exporters cut them), K read transposed or
/// given as K^T, against a double-precision reference; with a mask, the
/// softmax is of scale * (qkScale * Q K^T + mask).
void checkAttention(int64_t heads, int64_t M, int64_t N, int64_t D, bool kTransposed,
                    Mask maskKind = Mask::None) {
  int64_t width = 3 * heads * D, tokens = std::max(M, N);
  auto qkv = randoms(tokens * width, 13);
  std::vector<float> kt;                  // K^T per head: [heads][D][N]
  if (!kTransposed) {
    kt.resize(heads * D * N);
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t d = 0; d < D; ++d)
        for (int64_t n = 0; n < N; ++n)
          kt[(h * D + d) * N + n] = qkv[n * width + heads * D + h * D + d];
  }
  float scale = 1.0f / std::sqrt((float)D), qkScale = 1.0f;
  std::vector<float> mask;
  int64_t maskDiv = 1, maskMod = 1, maskBatchStride = 0, maskRowStride = 0;
  if (maskKind == Mask::Padding) {
    mask.assign(2 * N, 0.0f);
    for (int64_t n = N - N / 3; n < N; ++n)
      mask[N + n] = -INFINITY;
    maskDiv = heads / 2, maskMod = 2, maskBatchStride = N;
  } else if (maskKind == Mask::PaddingMinimum) {
    mask.assign(2 * N, 0.0f);
    for (int64_t n = 0; n < N; ++n) {
      if (n >= N / 2)
        mask[n] = std::numeric_limits<float>::lowest();
      mask[N + n] = std::numeric_limits<float>::lowest();
    }
    maskDiv = heads / 2, maskMod = 2, maskBatchStride = N;
  } else if (maskKind == Mask::Staircase || maskKind == Mask::StaircaseClosedRow) {
    mask.assign(M * N, 0.0f);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = std::max<int64_t>(1, N - 3 * m); n < N; ++n)
        mask[m * N + n] = -INFINITY;
    if (maskKind == Mask::StaircaseClosedRow)
      for (int64_t n = 0; n < N; ++n)
        mask[M / 2 * N + n] = std::numeric_limits<float>::lowest();
    maskRowStride = N;
  } else if (maskKind == Mask::CausalBias) {
    mask = randoms(M * N, 29);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = m + (N - M) + 1; n < N; ++n)
        mask[m * N + n] = -INFINITY;
    maskRowStride = N;
    qkScale = 0.5f;
  }
  auto maskAt = [&](int64_t h, int64_t m, int64_t n) -> double {
    if (mask.empty())
      return 0.0;
    return mask[(h / maskDiv) % maskMod * maskBatchStride + m * maskRowStride + n];
  };
  std::vector<double> want(heads * M * D);
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t m = 0; m < M; ++m) {
      std::vector<double> s(N);
      double mx = -INFINITY, sum = 0;
      for (int64_t n = 0; n < N; ++n) {
        double acc = 0;
        for (int64_t d = 0; d < D; ++d)
          acc += (double)qkv[m * width + h * D + d] * qkv[n * width + heads * D + h * D + d];
        s[n] = scale * (qkScale * acc + maskAt(h, m, n));
        mx = std::max(mx, s[n]);
      }
      for (int64_t n = 0; n < N; ++n)
        sum += (s[n] = std::exp(s[n] - mx));
      for (int64_t d = 0; d < D; ++d) {
        double acc = 0;
        for (int64_t n = 0; n < N; ++n)
          acc += s[n] / sum * qkv[n * width + 2 * heads * D + h * D + d];
        want[(h * M + m) * D + d] = acc;
      }
    }
  const float *kBase = kTransposed ? qkv.data() : kt.data();
  int64_t params[] = {heads, M, N, D, D,
                      0, D, width,                                  // Q
                      kTransposed ? heads * D : 0, kTransposed ? D : D * N,
                      kTransposed ? width : N, kTransposed ? 1 : 0, // K
                      2 * heads * D, D, width,                      // V
                      M * D, D};                                    // O
  std::vector<float> out(want.size(), std::nanf(""));
  if (maskKind == Mask::None) {
    kiln_attention_f32(addr(params), addr(qkv.data()), addr(kBase), addr(qkv.data()),
                       addr(out.data()), scale);
  } else {
    std::vector<int64_t> masked(std::begin(params), std::end(params));
    masked.insert(masked.end(), {0, maskDiv, maskMod, maskBatchStride, maskRowStride});
    kiln_attention_mask_f32(addr(masked.data()), addr(qkv.data()), addr(kBase),
                            addr(qkv.data()), addr(mask.data()), addr(out.data()), scale,
                            qkScale);
  }
  expectClose(out, want);
}

TEST(Kernels, AttentionHeadsOfOneProjection) { checkAttention(3, 13, 37, 16, true); }
TEST(Kernels, AttentionWithKTransposedAndTails) { checkAttention(2, 5, 33, 24, false); }
TEST(Kernels, AttentionParallel) { checkAttention(4, 128, 128, 64, true); }
// 2000 keys: the scores buffer holds only a few dozen query rows, so the
// 50 queries go in several blocks.
TEST(Kernels, AttentionLongSequenceInRowBlocks) { checkAttention(2, 50, 2000, 8, true); }

// Masks: a padding mask per sequence shared by its heads (-inf on padded
// keys), and a causal mask with a bias shared by every head, with tails
// and several row blocks (2000 keys).
TEST(Kernels, AttentionPaddingMaskPerSequence) {
  checkAttention(4, 13, 37, 16, true, Mask::Padding);
  checkAttention(6, 9, 2000, 8, false, Mask::Padding);
}
// The keys after every row's last open one are not computed (their
// probabilities are exactly 0): -inf and the float minimum close a key; a
// row with no open key at all keeps every key (uniform weights).
TEST(Kernels, AttentionSkipsKeysTheMaskCloses) {
  checkAttention(4, 13, 37, 16, true, Mask::PaddingMinimum);
  checkAttention(2, 50, 384, 32, false, Mask::PaddingMinimum);
  checkAttention(2, 3, 65, 24, true, Mask::PaddingMinimum);
  checkAttention(2, 7, KILN_ATTENTION_MAX_KEYS + 300, 8, true, Mask::PaddingMinimum);
  // Kept keys beyond one block of scores: the chunked path, trimmed.
  checkAttention(2, 7, 2 * KILN_ATTENTION_MAX_KEYS + 300, 8, true, Mask::PaddingMinimum);
  // A few query rows against K^T (attentionDirect's other branch).
  checkAttention(2, 3, 65, 24, false, Mask::PaddingMinimum);
  // A row per query: later rows open fewer keys; a closed row in a block.
  checkAttention(2, 40, 200, 16, true, Mask::Staircase);
  checkAttention(2, 3, 50, 16, false, Mask::Staircase);
  checkAttention(2, 40, 200, 16, true, Mask::StaircaseClosedRow);
}
TEST(Kernels, AttentionCausalMaskWithBias) {
  checkAttention(3, 13, 37, 16, true, Mask::CausalBias);
  checkAttention(2, 50, 2000, 8, true, Mask::CausalBias);
}

// More keys than one block of scores holds (KILN_ATTENTION_MAX_KEYS): the
// keys in chunks with a running max and sum, with and without masks (a
// padding mask that hides the last chunk's keys of one sequence, a causal
// mask that hides a whole chunk from the first queries).
TEST(Kernels, AttentionBeyondOneBlockOfScores) {
  checkAttention(2, 3, 2 * KILN_ATTENTION_MAX_KEYS + 7, 8, true);
  checkAttention(2, 13, KILN_ATTENTION_MAX_KEYS + 1, 8, false);
  checkAttention(4, 5, KILN_ATTENTION_MAX_KEYS + 300, 8, true, Mask::Padding);
  checkAttention(2, 7, 2 * KILN_ATTENTION_MAX_KEYS + 3, 8, false, Mask::CausalBias);
}

/// A few query rows (a decode step's one row a head) go straight through
/// K and V (attentionDirect): K's rows or K^T, vector tails in D and DV,
/// whole and partial groups of output columns, masks, four rows (the most
/// it takes), more keys than one block of the panel path, and four rows
/// over more keys than the block of scores holds (the chunked path again).
TEST(Kernels, AttentionOfFewQueryRows) {
  checkAttention(4, 1, 65, 24, true);
  checkAttention(4, 1, 65, 24, false);
  checkAttention(2, 1, 1, 8, true);
  checkAttention(2, 1, 33, 200, true);
  checkAttention(2, 3, 33, 200, false);
  checkAttention(4, 2, 37, 20, true, Mask::Padding);
  checkAttention(2, 1, 2000, 8, false, Mask::CausalBias);
  checkAttention(2, 4, 65, 24, true);
  checkAttention(2, 1, 2 * KILN_ATTENTION_MAX_KEYS + 7, 8, true);
  checkAttention(2, 4, 3 * KILN_ATTENTION_MAX_KEYS + 5, 8, true, Mask::CausalBias);
}

// Sizes known only at run time may be 0 (an empty KV cache, an empty
// sequence): no keys give zeros (a sum of no terms), no queries nothing.
TEST(Kernels, AttentionWithNoKeys) { checkAttention(2, 3, 0, 8, true); }
TEST(Kernels, AttentionWithNoQueries) { checkAttention(2, 0, 5, 8, true); }
TEST(Kernels, ConvEveryTileHeight) {
  // Blocks of 9 to 23 pixels and 37 and 49 (an encoder's 37 tokens, a 7x7
  // map): on AVX-512 the rows split into tiles of 4 to 8 rows with nothing
  // left over (nextTileRows: 9 -> 5 + 4, 37 -> 8 x 4 + 5, 49 -> 8 x 5 + 5 +
  // 4); the other variants' MR-row tiles get the same cases. Pointwise (the
  // pointwise tile at every height), 3x3 (convTile), and a matrix product
  // of the same row counts.
  for (int64_t m = 9; m <= 23; ++m)
    checkConv({1, 1, m, 24, 40, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, true, true, -0.5f, 0.5f});
  checkConv({1, 1, 37, 256, 64, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, true, false});
  checkConv({1, 7, 7, 20, 33, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, true});
  checkConv({1, 1, 11, 13, 32, 1, 3, 1, 1, 0, 1, 0, 1, 1, 1, 1, false, false});
  for (int64_t m : {9, 10, 11, 13, 37})
    checkMatMul(1, m, 40, 19, false, false);
  // A second pixel block ending in 9-11 rows (105 = 96 + 9), a GELU at 5
  // rows, a full-width 3x3 at 6 (convTile<6, NV>), and 7 rows 4 KB apart
  // (1024 channels: the copied-rows tile).
  checkConv({1, 1, 105, 40, 64, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, true, true});
  Conv gelu{1, 1, 13, 20, 32, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, true, false};
  gelu.gelu = true;
  checkConv(gelu);
  checkConv({1, 2, 7, 9, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, false});
  checkConv({1, 1, 15, 1024, 32, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, true, false});
}
// Every schedule a tuned layer may choose (kiln/kernels.h) computes the
// same convolution: pixel blocks of 24, 48 and 96 rows, in either order,
// across block tails (200 pixels: 8 x 24 + 8, 4 x 48 + 8, 96 + 104; 190:
// one block of 190 when blocks are 96), 1x1
// (with the streamed few-row blocks), 3x3 and grouped layers, a batch of
// two, and a GELU epilogue; each checked against the reference.
TEST(Kernels, ConvEverySchedule) {
  const int64_t orders[] = {0, KILN_CONV_PIXEL_MAJOR, KILN_CONV_PANEL_MAJOR};
  const int64_t blocks[] = {0, KILN_CONV_HALF_BLOCKS, KILN_CONV_DOUBLE_BLOCKS};
  for (int64_t order : orders)
    for (int64_t block : blocks) {
      SCOPED_TRACE("schedule " + std::to_string(order | block));
      std::vector<Conv> convs = {
          {1, 10, 20, 24, 72, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, true, true},
          {2, 10, 20, 13, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, false},
          {1, 9, 9, 16, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2, false, false, -0.5f, 0.5f},
          {1, 1, 37, 40, 33, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, true, false},
          {1, 1, 5, 40, 33, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, true, false},
          // AVX2's pointwise blocks by K (more than kKBlock inputs): their
          // partial sums for a whole block, up to 190 rows here.
          {1, 10, 19, 600, 40, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, true, false}};
      convs[1].gelu = true;
      for (Conv conv : convs) {
        conv.schedule = order | block;
        checkConv(conv);
      }
    }
}
TEST(Kernels, MatMulOverNoTerms) { checkMatMul(2, 3, 4, 0, false, false); }
TEST(Kernels, MatMulOfNoRows) { checkMatMul(2, 0, 4, 3, false, false); }
TEST(Kernels, MatMulTiny) { checkMatMul(1, 1, 1, 1, false, false); }
TEST(Kernels, MatMulPrimes) { checkMatMul(1, 13, 37, 7, false, false); }
TEST(Kernels, MatMulBatchedTails) { checkMatMul(3, 29, 65, 31, false, false); }
TEST(Kernels, MatMulBroadcastRhs) { checkMatMul(4, 5, 33, 3, true, false); }
TEST(Kernels, MatMulLargeKCrossesBlocks) { checkMatMul(1, 14, 40, 600, false, false); }
// Rows of A 4 KB apart (K = 1024, 2048): some rows of each tile are copied
// (rowsAlias), one whole K block of 256 at a time.
TEST(Kernels, MatMulRowsFourKilobytesApart) {
  checkMatMul(1, 29, 40, 1024, false, false);
  checkMatMul(2, 13, 33, 2048, false, true);
}
TEST(Kernels, MatMulTransposedRhs) { checkMatMul(2, 17, 19, 300, false, true); }
TEST(Kernels, MatMulParallel) { checkMatMul(3, 401, 70, 290, false, false); }
TEST(Kernels, MatMulStridedViewsWithOffsets) {
  checkMatMul(4, 37, 64, 64, false, false, 256, 192);
  checkMatMul(4, 37, 41, 64, false, true, 512, 192);
}

void checkPool(bool avg, bool countPad, int64_t n, int64_t h, int64_t w, int64_t c, int64_t k,
               int64_t s, int64_t pad, int64_t extraEnd, int64_t inExtra = 0,
               int64_t outExtra = 0) {
  int64_t oh = (h + 2 * pad + extraEnd - k) / s + 1, ow = (w + 2 * pad + extraEnd - k) / s + 1;
  auto in = randoms(n * h * w * c, 7);
  std::vector<double> want(n * oh * ow * c);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t y = 0; y < oh; ++y)
      for (int64_t x = 0; x < ow; ++x)
        for (int64_t ch = 0; ch < c; ++ch) {
          double acc = avg ? 0 : -INFINITY;
          int64_t valid = 0, padded = 0;
          for (int64_t ky = 0; ky < k; ++ky)
            for (int64_t kx = 0; kx < k; ++kx) {
              int64_t iy = y * s - pad + ky, ix = x * s - pad + kx;
              if (iy < h + pad && ix < w + pad)
                ++padded; // inside the ONNX pads (ceil-mode extra excluded)
              if (iy < 0 || iy >= h || ix < 0 || ix >= w)
                continue;
              ++valid;
              double v = in[((b * h + iy) * w + ix) * c + ch];
              acc = avg ? acc + v : std::max(acc, v);
            }
          want[((b * oh + y) * ow + x) * c + ch] = avg ? acc / (countPad ? padded : valid) : acc;
        }
  int64_t params[] = {n, h, w, c, oh, ow, k, k, s, s, pad, pad, 1, 1, pad, pad,
                      (avg ? 1 : 0) | (countPad ? 2 : 0)};
  std::vector<float> wideIn = widen(in, c, inExtra, -7.0f);
  std::vector<float> out = widen(std::vector<float>(want.size(), std::nanf("")), c, outExtra,
                                 -7.0f);
  kiln_pool2d_nhwc_f32(addr(params), addr(wideIn.data()), addr(out.data()), c + inExtra,
                       c + outExtra);
  expectClose(narrow(out, c, outExtra), want);
}

TEST(Kernels, MaxPool3x3Stride2Padded) { checkPool(false, false, 1, 11, 11, 19, 3, 2, 1, 0); }
TEST(Kernels, MaxPoolCeilMode) { checkPool(false, false, 2, 13, 13, 64, 3, 2, 0, 1); }
TEST(Kernels, AvgPoolExcludePad) { checkPool(true, false, 1, 7, 9, 33, 3, 1, 1, 0); }
TEST(Kernels, AvgPoolCountPad) { checkPool(true, true, 1, 7, 9, 5, 3, 2, 1, 1); }
TEST(Kernels, PoolParallel) { checkPool(true, false, 2, 61, 59, 70, 5, 1, 2, 0); }
TEST(Kernels, PoolStridedInputAndOutput) { checkPool(false, false, 1, 11, 11, 19, 3, 2, 1, 0, 4, 13); }

/// kiln_maxpool2d_nhwc_i8 against a plain loop: u8 or s8 values over the
/// whole range (both ends), padding, dilation, a ceil-mode extra, channel
/// tails past one register of bytes, strided views (the bytes around each
/// output slice must stay).
void checkBytePool(bool isSigned, int64_t n, int64_t h, int64_t w, int64_t c, int64_t k,
                   int64_t s, int64_t pad, int64_t dil, int64_t extraEnd, int64_t inExtra = 0,
                   int64_t outExtra = 0) {
  int64_t span = (k - 1) * dil + 1;
  int64_t oh = (h + 2 * pad + extraEnd - span) / s + 1, ow = (w + 2 * pad + extraEnd - span) / s + 1;
  int64_t ldi = c + inExtra, ldo = c + outExtra;
  std::mt19937 rng(static_cast<uint32_t>(c * 131 + k));
  std::vector<uint8_t> in(n * h * w * ldi);
  for (uint8_t &b : in)
    b = static_cast<uint8_t>(rng());
  auto value = [&](uint8_t b) { return isSigned ? static_cast<int>(static_cast<int8_t>(b)) : b; };
  std::vector<uint8_t> out(n * oh * ow * ldo, 0xA5);
  int64_t params[] = {n, h, w, c, oh, ow, k, k, s, s, pad, pad, dil, dil, pad, pad,
                      isSigned ? 4 /* KILN_POOL_SIGNED */ : 0};
  kiln_maxpool2d_nhwc_i8(addr(params), addr(in.data()), addr(out.data()), ldi, ldo);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t y = 0; y < oh; ++y)
      for (int64_t x = 0; x < ow; ++x)
        for (int64_t ch = 0; ch < ldo; ++ch) {
          uint8_t got = out[((b * oh + y) * ow + x) * ldo + ch];
          if (ch >= c) {
            ASSERT_EQ(got, 0xA5) << "a byte past the output slice was written";
            continue;
          }
          int want = isSigned ? -128 : 0;
          for (int64_t ky = 0; ky < k; ++ky)
            for (int64_t kx = 0; kx < k; ++kx) {
              int64_t iy = y * s - pad + ky * dil, ix = x * s - pad + kx * dil;
              if (iy >= 0 && iy < h && ix >= 0 && ix < w)
                want = std::max(want, value(in[((b * h + iy) * w + ix) * ldi + ch]));
            }
          ASSERT_EQ(value(got), want) << "image " << b << " at " << y << "," << x << " channel " << ch;
        }
}

TEST(Kernels, BytesMaxPoolU8AndS8) {
  checkBytePool(false, 1, 11, 11, 64, 3, 2, 1, 1, 0);  // ResNet's stem pool
  checkBytePool(true, 2, 9, 10, 70, 3, 2, 1, 1, 1);    // channel tail, ceil mode
  checkBytePool(false, 1, 12, 9, 5, 2, 1, 0, 2, 0, 3, 4); // dilated, strided views
  checkBytePool(true, 1, 7, 7, 130, 5, 1, 2, 1, 0);    // parallel rows, 3 registers
}

} // namespace
