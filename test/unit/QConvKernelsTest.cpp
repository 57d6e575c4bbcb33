// kiln_qconv2d_nhwc_u8s8 (runtime/kernels/QConvKernels.cpp) against a plain
// integer reference loop: exact equality. Each test binary's variant runs
// one of the kernel's dot products on this machine: AVX512-VNNI (avx512),
// AVX-VNNI or the portable one (avx2, by CPUID), the portable one (neon,
// built natively). Sizes: channel counts not a multiple of 4 (the byte
// tail), output channels not a multiple of the panel, pixel counts not a
// multiple of the row tile, padding, strides, dilations; zero points at
// both ends of the range and weights of -128 and 127 (products at the
// extremes); s8 activations. The weight packing is written here from the
// layout contract in the kernel's comment, not from the compiler's packer.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

extern "C" void kiln_qconv2d_nhwc_u8s8(intptr_t, intptr_t, intptr_t, intptr_t, intptr_t,
                                       intptr_t, int64_t, int64_t, int64_t, intptr_t);

extern "C" int kiln_qconv_test_path; // KILN_QCONV_TEST_HOOKS (QConvKernels.cpp)

namespace {

constexpr int64_t kPanel = 32;

template <typename T>
intptr_t addr(T *p) {
  return reinterpret_cast<intptr_t>(p);
}

struct QConv {
  int64_t n, h, w, c, oc, kh, kw, sh, sw, pt, pl, pb, pr, dh, dw;
  int zeroPoint;
  bool signedInput;
  int64_t oh() const { return (h + pt + pb - (kh - 1) * dh - 1) / sh + 1; }
  int64_t ow() const { return (w + pl + pr - (kw - 1) * dw - 1) / sw + 1; }
};

/// KILN_QCONV_REQUANT: the output as 8-bit values, requantized as ONNX's
/// QuantizeLinear does it in f32 (the reference below, in scalar f32 ops).
struct Requant {
  float zeroPoint, lo, hi;
  float scaleLo, scaleHi; // per-channel scales drawn from [scaleLo, scaleHi]
};

// Ties (x.5 products) met within the clamp by requantRef: a test of the
// rounding checks that it saw some.
int64_t tiesSeen = 0;

/// The reference requantization of one exact sum.
int requantRef(int64_t sum, float scale, const Requant &r) {
  float product = (float)sum * scale;
  float x = std::nearbyint(product) + r.zeroPoint; // ties to even
  if (product - std::floor(product) == 0.5f && x >= r.lo && x <= r.hi)
    ++tiesSeen;
  x = std::min(std::max(x, r.lo), r.hi);
  return (int)x;
}

void checkQConv(const QConv &s, int64_t inExtra = 0, int64_t outExtra = 0, bool flat = false,
                uint32_t seed = 1, const Requant *rq = nullptr) {
  std::mt19937 rng(seed);
  int64_t oh = s.oh(), ow = s.ow(), ldi = s.c + inExtra, ldo = s.oc + outExtra;
  std::uniform_int_distribution<int> byte(0, 255), weight(-128, 127), biasD(-5000, 5000);
  // Activations as their bytes; s8 ones read as int8_t below.
  std::vector<uint8_t> in(s.n * s.h * s.w * ldi);
  for (auto &v : in)
    v = (uint8_t)byte(rng);
  auto value = [&](uint8_t b) { return s.signedInput ? (int)(int8_t)b : (int)b; };
  std::vector<int8_t> w(s.oc * s.c * s.kh * s.kw); // ONNX [O][I][KH][KW]
  for (auto &v : w)
    v = (int8_t)weight(rng);
  w[0] = -128;
  w.back() = 127;
  std::vector<int32_t> bias(s.oc);
  for (auto &v : bias)
    v = biasD(rng);

  std::vector<int64_t> want(s.n * oh * ow * s.oc);
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t y = 0; y < oh; ++y)
      for (int64_t x = 0; x < ow; ++x)
        for (int64_t o = 0; o < s.oc; ++o) {
          int64_t acc = bias[o];
          for (int64_t ky = 0; ky < s.kh; ++ky)
            for (int64_t kx = 0; kx < s.kw; ++kx) {
              int64_t iy = y * s.sh - s.pt + ky * s.dh, ix = x * s.sw - s.pl + kx * s.dw;
              if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w)
                continue; // (x - zero point) is 0 there
              for (int64_t i = 0; i < s.c; ++i)
                acc += (int64_t)(value(in[((n * s.h + iy) * s.w + ix) * ldi + i]) - s.zeroPoint) *
                       w[((o * s.c + i) * s.kh + ky) * s.kw + kx];
            }
          want[((n * oh + y) * ow + x) * s.oc + o] = acc;
        }

  // [panels][kh][kw][ceil(c/4)][kPanel][4], zero padded; bias [panels][kPanel]
  // less the zero point (as the kernel reads it: s8 as u8 + 128) times each
  // output's weight sum.
  // Flat (KILN_QCONV_FLAT_K): [panels][ceil(kh*kw*c/4)][kPanel][4], the
  // window's (ky, kx, channel) flattened.
  int64_t panels = (s.oc + kPanel - 1) / kPanel, groups4 = (s.c + 3) / 4;
  int64_t flatGroups = (s.kh * s.kw * s.c + 3) / 4;
  std::vector<int8_t> pw(panels * (flat ? flatGroups : s.kh * s.kw * groups4) * kPanel * 4, 0);
  std::vector<int32_t> pb(panels * kPanel, 0);
  int64_t zpRead = s.signedInput ? s.zeroPoint + 128 : s.zeroPoint;
  for (int64_t o = 0; o < s.oc; ++o) {
    int64_t p = o / kPanel, lane = o % kPanel, sum = 0;
    for (int64_t ky = 0; ky < s.kh; ++ky)
      for (int64_t kx = 0; kx < s.kw; ++kx)
        for (int64_t i = 0; i < s.c; ++i) {
          int8_t v = w[((o * s.c + i) * s.kh + ky) * s.kw + kx];
          sum += v;
          int64_t k = (ky * s.kw + kx) * s.c + i;
          if (flat)
            pw[((p * flatGroups + k / 4) * kPanel + lane) * 4 + k % 4] = v;
          else
            pw[((((p * s.kh + ky) * s.kw + kx) * groups4 + i / 4) * kPanel + lane) * 4 + i % 4] =
                v;
        }
    pb[p * kPanel + lane] = (int32_t)(bias[o] - zpRead * sum);
  }
  std::vector<uint8_t> pad(groups4 * 4, (uint8_t)s.zeroPoint);
  int64_t params[] = {s.n,  s.h,  s.w,  s.c,  oh,   ow, s.oc, s.kh, s.kw,
                      s.sh, s.sw, s.pt, s.pl, s.dh, s.dw, 1,   (flat ? 4 : 0) | (rq ? 8 : 0)};
  if (rq) {
    // kiln_requant_params, then a scale per output channel (panel padded).
    std::vector<float> block(4 + panels * kPanel, 0.0f);
    block[0] = rq->zeroPoint;
    block[1] = rq->lo;
    block[2] = rq->hi;
    std::uniform_real_distribution<float> scaleD(rq->scaleLo, rq->scaleHi);
    for (int64_t o = 0; o < s.oc; ++o)
      block[4 + o] = scaleD(rng);
    const uint8_t sentinel = 0xa5;
    std::vector<uint8_t> out(s.n * oh * ow * ldo, sentinel);
    kiln_qconv2d_nhwc_u8s8(addr(params), addr(in.data()), addr(pw.data()), addr(pb.data()),
                           addr(pad.data()), addr(out.data()), s.signedInput ? 0x80808080 : 0,
                           ldi, ldo, addr(block.data()));
    for (int64_t px = 0; px < s.n * oh * ow; ++px) {
      for (int64_t o = 0; o < s.oc; ++o) {
        int want8 = requantRef(want[px * s.oc + o], block[4 + o], *rq);
        int got = rq->lo < 0 ? (int)(int8_t)out[px * ldo + o] : (int)out[px * ldo + o];
        ASSERT_EQ(got, want8) << "pixel " << px << " channel " << o << " sum "
                              << want[px * s.oc + o];
      }
      for (int64_t o = s.oc; o < ldo; ++o)
        ASSERT_EQ(out[px * ldo + o], sentinel) << "wrote past the output's channels at pixel " << px;
    }
    return;
  }
  const int32_t sentinel = 0x7eadbeef;
  std::vector<int32_t> out(s.n * oh * ow * ldo, sentinel);
  kiln_qconv2d_nhwc_u8s8(addr(params), addr(in.data()), addr(pw.data()), addr(pb.data()),
                         addr(pad.data()), addr(out.data()), s.signedInput ? 0x80808080 : 0,
                         ldi, ldo, 0);
  for (int64_t px = 0; px < s.n * oh * ow; ++px) {
    for (int64_t o = 0; o < s.oc; ++o)
      ASSERT_EQ(out[px * ldo + o], want[px * s.oc + o]) << "pixel " << px << " channel " << o;
    for (int64_t o = s.oc; o < ldo; ++o)
      ASSERT_EQ(out[px * ldo + o], sentinel) << "wrote past the output's channels at pixel " << px;
  }
}

TEST(QConvKernels, Plain3x3Padded) { checkQConv({1, 9, 11, 16, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 128, false}); }
TEST(QConvKernels, ChannelTailsAndPanelTails) {
  checkQConv({2, 7, 5, 7, 45, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 3, false});
  checkQConv({1, 5, 6, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 0, false});
  checkQConv({1, 6, 6, 3, 70, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 255, false});
}
TEST(QConvKernels, ZeroPointsAtTheEnds) {
  checkQConv({1, 8, 8, 12, 33, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0, false});
  checkQConv({1, 8, 8, 12, 33, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 255, false});
  checkQConv({1, 8, 8, 12, 33, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, -128, true});
  checkQConv({1, 8, 8, 12, 33, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 127, true});
}
TEST(QConvKernels, StridedDilatedAsymmetricPads) {
  checkQConv({1, 13, 11, 9, 40, 3, 3, 2, 2, 1, 0, 0, 1, 1, 1, 17, false});
  checkQConv({1, 11, 11, 8, 24, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, 200, false});
  checkQConv({1, 17, 17, 3, 64, 7, 7, 2, 2, 3, 3, 3, 3, 1, 1, 5, true});
}
TEST(QConvKernels, PointwiseDeep) {
  // ResNet-50's deep 1x1 layers: sums far past 2^24.
  checkQConv({1, 7, 7, 2048, 40, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 128, false});
}
TEST(QConvKernels, PointwiseBlocks) {
  // 1x1, stride 1, no padding: the pointwise path (rows in one call), with
  // s8 activations, a channel tail, pixel counts past a block and slices.
  checkQConv({1, 11, 13, 22, 70, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, -100, true}, 3, 2);
  checkQConv({2, 10, 10, 16, 96, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 77, false});
}
TEST(QConvKernels, SevenRowTiles) {
  // 7x7 and 14x14 maps (pixel counts multiples of 7, not of 8): 7-row tiles
  // where the AVX-512 variant has 8, windowed and pointwise, requantized.
  Requant u8{120.0f, 0.0f, 255.0f, 1e-4f, 2e-3f};
  checkQConv({1, 7, 7, 40, 70, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 33, false}, 0, 0, false, 9, &u8);
  checkQConv({2, 14, 14, 36, 40, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, -20, true}, 4, 0, false, 10);
  checkQConv({1, 14, 14, 20, 33, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 200, false}); // 7x7 out
}
TEST(QConvKernels, ChannelSlicesOfWiderTensors) {
  checkQConv({1, 6, 7, 10, 36, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 9, false}, /*inExtra=*/5,
             /*outExtra=*/7);
}
TEST(QConvKernels, FlatWindowStem) {
  // A stem: 3 channels, 7x7 stride 2, padded; the window gathered per pixel.
  checkQConv({1, 23, 21, 3, 64, 7, 7, 2, 2, 3, 3, 3, 3, 1, 1, 114, false}, 0, 0, true);
  checkQConv({2, 9, 8, 3, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, -5, true}, 0, 0, true);
  // Dilated, one channel, slices of wider tensors (the per-pixel gather).
  checkQConv({1, 11, 12, 1, 33, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, 250, false}, 3, 5, true);
  checkQConv({1, 8, 8, 6, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0, false}, 2, 0, true);
}
TEST(QConvKernels, ParallelBatch) {
  // Enough work to split over the test's thread pool, items unevenly.
  checkQConv({3, 28, 28, 64, 96, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 131, false});
  checkQConv({3, 56, 56, 3, 64, 7, 7, 2, 2, 3, 3, 3, 3, 1, 1, 131, false}, 0, 0, true);
}
TEST(QConvKernels, RequantizedToU8AndS8) {
  // Scales that spread the sums over the whole range and past it (both
  // clamps reached), Relu's clamp at the zero point, a partial last panel
  // and channel slices of wider tensors.
  Requant u8{131.0f, 0.0f, 255.0f, 1e-4f, 2e-3f}, s8{-3.0f, -128.0f, 127.0f, 1e-4f, 2e-3f};
  Requant relu{20.0f, 20.0f, 255.0f, 1e-4f, 2e-3f};
  checkQConv({1, 9, 11, 16, 45, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 128, false}, 0, 0, false, 2, &u8);
  checkQConv({1, 8, 8, 12, 33, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, -128, true}, 0, 0, false, 3, &s8);
  checkQConv({1, 6, 7, 10, 36, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 9, false}, 5, 7, false, 4, &relu);
  // The flat (stem) form and a batch split over the pool.
  checkQConv({1, 23, 21, 3, 64, 7, 7, 2, 2, 3, 3, 3, 3, 1, 1, 114, false}, 0, 0, true, 5, &u8);
  checkQConv({3, 28, 28, 64, 96, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 131, false}, 0, 0, false, 6, &s8);
}
TEST(QConvKernels, HalfPanelsAndPartialVectors) {
  // Output channels that fill half a panel or less (MobileNet's 16-channel
  // projections: the half-panel tile) and ones that end inside a vector
  // (24, 40: a partial store), requantized and as i32, pointwise (full
  // tiles plus a partial one: 11 x 13 pixels) and 3x3, u8 and s8, with
  // output slices of wider tensors (the bytes past each slice must stay).
  Requant u8{7.0f, 0.0f, 255.0f, 1e-4f, 2e-3f}, s8{-3.0f, -128.0f, 127.0f, 1e-4f, 2e-3f};
  uint32_t seed = 20;
  for (int64_t oc : {16, 8, 24, 40, 1}) {
    SCOPED_TRACE(oc);
    checkQConv({1, 11, 13, 32, oc, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 9, false}, 0, 3, false, ++seed,
               &u8);
    checkQConv({2, 11, 13, 20, oc, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, -9, true}, 2, 5, false, ++seed,
               &s8);
    checkQConv({1, 11, 13, 32, oc, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 200, false}, 0, 2, false,
               ++seed);
    checkQConv({1, 9, 10, 12, oc, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 30, false}, 0, 1, false, ++seed,
               &u8);
    checkQConv({1, 9, 10, 3, oc, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 30, false}, 0, 4, true, ++seed,
               &u8);
  }
}
TEST(QConvKernels, RequantRoundsHalfToEven) {
  // A scale of exactly 1/256 makes every sum of 128 mod 256 a tie: ties go
  // to the even neighbour (2.5 -> 2, 3.5 -> 4), as QuantizeLinear rounds.
  Requant tie{100.0f, 0.0f, 255.0f, 1.0f / 256, 1.0f / 256};
  tiesSeen = 0;
  checkQConv({1, 16, 16, 3, 64, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 0, false}, 0, 0, false, 7, &tie);
  checkQConv({1, 16, 16, 3, 64, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 0, false}, 0, 0, true, 8, &tie);
  EXPECT_GT(tiesSeen, 10);
}

TEST(QConvKernels, EveryDotProduct) {
  // The vpmaddwd (AVX2 / AVX512BW without VNNI) and portable dot products,
  // forced, on the cases above: weights at -128 and 127 and activations at
  // 255 (the sums vpmaddubsw would saturate), tails, s8, flat, requantized.
  Requant s8{-3.0f, -128.0f, 127.0f, 1e-4f, 2e-3f};
  for (int path : {2, 3}) {
    SCOPED_TRACE(path == 2 ? "vpmaddwd" : "portable");
#if defined(__x86_64__)
    // vpmaddwd on zmm needs AVX512BW, on ymm AVX2: a machine without it
    // would stop on an illegal instruction (Zen 3 running the avx512 variant).
    if (path == 2 && !(KILN_VEC == 16 ? __builtin_cpu_supports("avx512bw")
                                       : KILN_VEC != 8 || __builtin_cpu_supports("avx2")))
      continue;
#endif
    kiln_qconv_test_path = path;
    checkQConv({2, 7, 5, 7, 45, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 3, false});
    checkQConv({1, 8, 8, 12, 33, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 255, false});
    checkQConv({1, 8, 8, 12, 33, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, -128, true}, 0, 0, false, 3, &s8);
    checkQConv({1, 7, 7, 2048, 40, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 128, false});
    checkQConv({1, 23, 21, 3, 64, 7, 7, 2, 2, 3, 3, 3, 3, 1, 1, 114, false}, 0, 0, true);
    checkQConv({1, 11, 13, 32, 16, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 9, false}, 0, 3, false, 4, &s8);
  }
  kiln_qconv_test_path = 0;
}

} // namespace
