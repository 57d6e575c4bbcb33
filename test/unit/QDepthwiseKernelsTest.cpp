// kiln_qdwconv2d_nhwc_u8s8 (runtime/kernels/QDepthwiseKernels.cpp) against
// a plain integer reference loop: exact equality, of the i32 sums and of
// their requantization to u8 or s8 (computed here in scalar f32 ops, as
// ONNX's QuantizeLinear defines it). Sizes: channel counts not a multiple
// of the vector (the tail path), windows with and without a fast path (3x3
// and 5x5 at strides 1 and 2; 7x7, dilations, asymmetric pads), zero points
// at both ends of the range, weights of -128 and 127, s8 activations,
// channel slices of wider tensors. The packing is written from the layout
// contract in kiln/kernels.h, not from the compiler's packer.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

extern "C" void kiln_qdwconv2d_nhwc_u8s8(intptr_t, intptr_t, intptr_t, intptr_t, intptr_t,
                                         intptr_t, int64_t, int64_t, int64_t);

namespace {

constexpr int64_t kPanel = 32;

template <typename T>
intptr_t addr(T *p) {
  return reinterpret_cast<intptr_t>(p);
}

struct QDw {
  int64_t n, h, w, c, kh, kw, sh, sw, pt, pl, pb, pr, dh, dw;
  int zeroPoint;
  bool signedInput;
  int64_t oh() const { return (h + pt + pb - (kh - 1) * dh - 1) / sh + 1; }
  int64_t ow() const { return (w + pl + pr - (kw - 1) * dw - 1) / sw + 1; }
};

struct Requant {
  float zeroPoint, lo, hi, scaleLo, scaleHi;
};

void checkQDw(const QDw &s, const Requant *rq = nullptr, int64_t inExtra = 0,
              int64_t outExtra = 0, uint32_t seed = 1) {
  std::mt19937 rng(seed);
  int64_t oh = s.oh(), ow = s.ow(), ldi = s.c + inExtra, ldo = s.c + outExtra;
  std::uniform_int_distribution<int> byte(0, 255), weight(-128, 127), biasD(-5000, 5000);
  std::vector<uint8_t> in(s.n * s.h * s.w * ldi);
  for (auto &v : in)
    v = (uint8_t)byte(rng);
  auto value = [&](uint8_t b) { return s.signedInput ? (int)(int8_t)b : (int)b; };
  std::vector<int8_t> w(s.c * s.kh * s.kw); // ONNX [C][1][KH][KW]
  for (auto &v : w)
    v = (int8_t)weight(rng);
  w[0] = -128;
  w.back() = 127;
  std::vector<int32_t> bias(s.c);
  for (auto &v : bias)
    v = biasD(rng);

  std::vector<int64_t> want(s.n * oh * ow * s.c);
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t y = 0; y < oh; ++y)
      for (int64_t x = 0; x < ow; ++x)
        for (int64_t c = 0; c < s.c; ++c) {
          int64_t acc = bias[c];
          for (int64_t ky = 0; ky < s.kh; ++ky)
            for (int64_t kx = 0; kx < s.kw; ++kx) {
              int64_t iy = y * s.sh - s.pt + ky * s.dh, ix = x * s.sw - s.pl + kx * s.dw;
              if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w)
                continue; // (x - zero point) is 0 there
              acc += (int64_t)(value(in[((n * s.h + iy) * s.w + ix) * ldi + c]) - s.zeroPoint) *
                     w[(c * s.kh + ky) * s.kw + kx];
            }
          want[((n * oh + y) * ow + x) * s.c + c] = acc;
        }

  // Weights as floats [kh][kw][cpad]; bias [cpad] less the zero point times
  // each channel's weight sum (padding reads the zero point).
  int64_t cpad = (s.c + kPanel - 1) / kPanel * kPanel;
  std::vector<float> pw(s.kh * s.kw * cpad, 0.0f);
  std::vector<int32_t> pb(cpad, 0);
  for (int64_t c = 0; c < s.c; ++c) {
    int64_t sum = 0;
    for (int64_t k = 0; k < s.kh * s.kw; ++k) {
      sum += w[c * s.kh * s.kw + k];
      pw[k * cpad + c] = w[c * s.kh * s.kw + k];
    }
    pb[c] = (int32_t)(bias[c] - s.zeroPoint * sum);
  }
  int64_t flags = (rq ? 8 : 0) | (s.signedInput ? 16 : 0);
  int64_t params[] = {s.n,  s.h,  s.w,  s.c,  oh,   ow,   s.c, s.kh, s.kw,
                      s.sh, s.sw, s.pt, s.pl, s.dh, s.dw, s.c, flags};
  if (!rq) {
    const int32_t sentinel = 0x7eadbeef;
    std::vector<int32_t> out(s.n * oh * ow * ldo, sentinel);
    kiln_qdwconv2d_nhwc_u8s8(addr(params), addr(in.data()), addr(pw.data()), addr(pb.data()), 0,
                             addr(out.data()), s.zeroPoint, ldi, ldo);
    for (int64_t px = 0; px < s.n * oh * ow; ++px) {
      for (int64_t c = 0; c < s.c; ++c)
        ASSERT_EQ(out[px * ldo + c], want[px * s.c + c]) << "pixel " << px << " channel " << c;
      for (int64_t c = s.c; c < ldo; ++c)
        ASSERT_EQ(out[px * ldo + c], sentinel) << "wrote past the channels at pixel " << px;
    }
    return;
  }
  std::vector<float> block(4 + cpad, 0.0f);
  block[0] = rq->zeroPoint;
  block[1] = rq->lo;
  block[2] = rq->hi;
  std::uniform_real_distribution<float> scaleD(rq->scaleLo, rq->scaleHi);
  for (int64_t c = 0; c < s.c; ++c)
    block[4 + c] = scaleD(rng);
  const uint8_t sentinel = 0xa5;
  std::vector<uint8_t> out(s.n * oh * ow * ldo, sentinel);
  kiln_qdwconv2d_nhwc_u8s8(addr(params), addr(in.data()), addr(pw.data()), addr(pb.data()),
                           addr(block.data()), addr(out.data()), s.zeroPoint, ldi, ldo);
  for (int64_t px = 0; px < s.n * oh * ow; ++px) {
    for (int64_t c = 0; c < s.c; ++c) {
      float x = std::nearbyint((float)want[px * s.c + c] * block[4 + c]) + rq->zeroPoint;
      int want8 = (int)std::min(std::max(x, rq->lo), rq->hi);
      int got = rq->lo < 0 ? (int)(int8_t)out[px * ldo + c] : (int)out[px * ldo + c];
      ASSERT_EQ(got, want8) << "pixel " << px << " channel " << c;
    }
    for (int64_t c = s.c; c < ldo; ++c)
      ASSERT_EQ(out[px * ldo + c], sentinel) << "wrote past the channels at pixel " << px;
  }
}

TEST(QDepthwiseKernels, FastWindows) {
  checkQDw({1, 13, 17, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 128, false});
  checkQDw({1, 14, 19, 48, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 3, false});
  checkQDw({1, 12, 11, 16, 5, 5, 1, 1, 2, 2, 2, 2, 1, 1, 250, false});
  checkQDw({2, 15, 15, 64, 5, 5, 2, 2, 2, 2, 2, 2, 1, 1, 0, false});
}
TEST(QDepthwiseKernels, GeneralWindowsAndChannelTails) {
  checkQDw({1, 9, 10, 20, 7, 7, 1, 1, 3, 3, 3, 3, 1, 1, 77, false});
  checkQDw({1, 11, 11, 7, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, 200, false});
  checkQDw({1, 10, 9, 37, 3, 3, 2, 1, 0, 1, 1, 0, 1, 1, 9, false});
  checkQDw({1, 6, 5, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 255, false});
}
TEST(QDepthwiseKernels, ZeroPointsAtTheEndsAndSignedInput) {
  checkQDw({1, 8, 8, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0, false});
  checkQDw({1, 8, 8, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 255, false});
  checkQDw({1, 8, 8, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, -128, true});
  checkQDw({1, 8, 8, 24, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 127, true});
}
TEST(QDepthwiseKernels, RequantizedToU8AndS8) {
  Requant u8{131.0f, 0.0f, 255.0f, 1e-3f, 2e-2f}, s8{-3.0f, -128.0f, 127.0f, 1e-3f, 2e-2f};
  Requant relu6{0.0f, 0.0f, 200.0f, 1e-3f, 2e-2f};
  checkQDw({1, 13, 17, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 128, false}, &u8);
  checkQDw({1, 14, 19, 40, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, -7, true}, &s8);
  checkQDw({1, 9, 10, 20, 7, 7, 1, 1, 3, 3, 3, 3, 1, 1, 77, false}, &relu6);
  checkQDw({1, 12, 11, 16, 5, 5, 1, 1, 2, 2, 2, 2, 1, 1, 250, false}, &u8, 5, 3);
}
TEST(QDepthwiseKernels, ChannelSlicesAndParallelRows) {
  checkQDw({1, 10, 12, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 40, false}, nullptr, 8, 5);
  checkQDw({2, 56, 56, 96, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 111, false});
}

} // namespace
