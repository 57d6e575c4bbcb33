// Integer depthwise convolution, NHWC (kiln.conv's integer form with one
// input and one output channel per group: MobileNet's and EfficientNet's
// 3x3 and 5x5 layers as quantize_static writes them), vectorised over
// channels. Why hand-written: see KernelSupport.h.
//
// Why in f32: a depthwise tap is one multiply-add per channel, with nothing
// to sum four at a time within a lane, so VNNI's vpdpbusd has no work here;
// the f32 FMA does 16 per instruction, and its sums are exact integers
// while they stay below 2^24 (255 x 128 x 512 taps < 2^24, which the
// compiler checks). What the integer form saves is memory: the layer reads
// bytes and, requantized, writes bytes, where the float path read and wrote
// four times as much, three times over (dequantize, convolve, quantize).

#include "KernelSupport.h"

namespace {

#include "Requantize.inc"

/// Output pixels of a row per block: each weight vector serves them all.
constexpr int kPx = 8;

struct QDwJob {
  const kiln_conv2d_params *q;
  const unsigned char *in;
  const float *w;    // [kh][kw][cpad], the s8 weights as floats
  const int *bias;   // [cpad], i32
  const kiln_requant_params *requant; // null: i32 results
  const float *scale;
  void *out;
  float zeroPoint;   // the input's, read where the window hangs over the image
  kiln_i64 ldi, ldo, cpad;
};

/// KILN_VEC activations from `p` as floats (their u8 or s8 values), the
/// first `len` only (the rest 0) when len < KILN_VEC.
template <bool Signed>
INLINE vf loadq(const unsigned char *p, kiln_i64 len) {
  typedef signed char vs8 __attribute__((ext_vector_type(KILN_VEC), aligned(1)));
  if (len >= KILN_VEC) {
    if (Signed) {
      vs8 b;
      __builtin_memcpy(&b, p, sizeof(b));
      return __builtin_convertvector(b, vf);
    }
    vu8 b;
    __builtin_memcpy(&b, p, sizeof(b));
    return __builtin_convertvector(b, vf);
  }
  vf v = splat(0);
  for (kiln_i64 c = 0; c < len; ++c)
    v[c] = Signed ? (float)(signed char)p[c] : (float)p[c];
  return v;
}

/// Adds the bias to px pixels' exact sums of channels [c0, c0 + len) and
/// stores them, as i32 or requantized to bytes.
INLINE void qdwStore(const QDwJob &j, const vf (&acc)[kPx], kiln_i64 n, kiln_i64 oy,
                     kiln_i64 ox0, int px, kiln_i64 c0, kiln_i64 len) {
  const kiln_conv2d_params &q = *j.q;
  vi32 b;
  __builtin_memcpy(&b, j.bias + c0, sizeof(b));
  // p up to the constant kPx (stores guarded): a run-time bound would index
  // acc dynamically and keep it in memory, stored after every FMA.
#pragma clang loop unroll(full)
  for (int p = 0; p < kPx; ++p) {
    if (p >= px)
      continue;
    kiln_i64 pixel = (n * q.oh + oy) * q.ow + ox0 + p;
    vi32 sum = __builtin_convertvector(acc[p], vi32) + b;
    if (j.requant) {
      vu8 y = requantize(sum, loadv(j.scale + c0), requantConstants(*j.requant));
      unsigned char *o = (unsigned char *)j.out + pixel * j.ldo + c0;
      if (len >= KILN_VEC)
        __builtin_memcpy(o, &y, sizeof(y));
      else
        storePartial(o, y, len);
    } else {
      int *o = (int *)j.out + pixel * j.ldo + c0;
      if (len >= KILN_VEC)
        __builtin_memcpy(o, &sum, sizeof(sum));
      else
        storePartial(o, sum, len);
    }
  }
}

/// Any window: px output pixels of row oy, channels [c0, c0 + len), every
/// tap loaded with a bounds test (the zero point outside the image).
template <bool Signed>
INLINE void qdwBlock(const QDwJob &j, kiln_i64 n, kiln_i64 oy, kiln_i64 ox0, int px,
                     kiln_i64 c0, kiln_i64 len) {
  const kiln_conv2d_params &q = *j.q;
  const unsigned char *image = j.in + n * q.h * q.w * j.ldi;
  vf zp = splat(j.zeroPoint);
  vf acc[kPx];
#pragma clang loop unroll(full)
  for (int p = 0; p < kPx; ++p)
    acc[p] = splat(0);
  for (kiln_i64 ky = 0; ky < q.kh; ++ky) {
    kiln_i64 y = oy * q.sh - q.ph + ky * q.dh;
    bool rowInside = y >= 0 && y < q.h;
    for (kiln_i64 kx = 0; kx < q.kw; ++kx) {
      vf wv = loadv(j.w + (ky * q.kw + kx) * j.cpad + c0);
#pragma clang loop unroll(full)
      for (int p = 0; p < kPx; ++p) {
        kiln_i64 x = (ox0 + (p < px ? p : 0)) * q.sw - q.pw + kx * q.dw;
        vf v = rowInside && x >= 0 && x < q.w
                   ? loadq<Signed>(image + (y * q.w + x) * j.ldi + c0, len)
                   : zp;
        acc[p] += v * wv;
      }
    }
  }
  qdwStore(j, acc, n, oy, ox0, px, c0, len);
}

/// The common windows (KW wide, stride S, no dilation) on full vectors: the
/// S*(kPx-1)+KW inputs under a block are each loaded and converted once and
/// multiplied into every output they reach (as DepthwiseKernels.cpp's
/// dwRowBlock does for floats).
/// Interior: every input column under the block is inside the image (no
/// test per input: as selects, LLVM made each load a branch of its own).
template <int KW, int S, bool Signed, bool Interior>
INLINE void qdwRowBlock(const QDwJob &j, kiln_i64 n, kiln_i64 oy, kiln_i64 ox0, int px,
                        kiln_i64 c0) {
  const kiln_conv2d_params &q = *j.q;
  constexpr int kInputs = S * (kPx - 1) + KW;
  const unsigned char *image = j.in + n * q.h * q.w * j.ldi;
  vf zp = splat(j.zeroPoint);
  kiln_i64 x0 = ox0 * S - q.pw;
  vf acc[kPx];
#pragma clang loop unroll(full)
  for (int p = 0; p < kPx; ++p)
    acc[p] = splat(0);
  for (kiln_i64 ky = 0; ky < q.kh; ++ky) {
    kiln_i64 y = oy * q.sh - q.ph + ky * q.dh;
    bool rowInside = y >= 0 && y < q.h;
    const unsigned char *row = image + (y * q.w + x0) * j.ldi + c0;
    vf wv[KW];
#pragma clang loop unroll(full)
    for (int kx = 0; kx < KW; ++kx)
      wv[kx] = loadv(j.w + (ky * KW + kx) * j.cpad + c0);
    if (Interior && !rowInside) {
      // The whole row is padding: the zero point times each tap.
#pragma clang loop unroll(full)
      for (int kx = 0; kx < KW; ++kx)
#pragma clang loop unroll(full)
        for (int p = 0; p < kPx; ++p)
          acc[p] += zp * wv[kx];
      continue;
    }
#pragma clang loop unroll(full)
    for (int t = 0; t < kInputs; ++t) {
      vf v;
      if (Interior) {
        v = loadq<Signed>(row + t * j.ldi, KILN_VEC);
      } else {
        kiln_i64 x = x0 + t;
        v = rowInside && (unsigned long)x < (unsigned long)q.w
                ? loadq<Signed>(row + t * j.ldi, KILN_VEC)
                : zp;
      }
#pragma clang loop unroll(full)
      for (int kx = 0; kx < KW; ++kx) {
        int d = t - kx;
        if (d >= 0 && d % S == 0 && d / S < kPx)
          acc[d / S] += v * wv[kx];
      }
    }
  }
  qdwStore(j, acc, n, oy, ox0, px, c0, KILN_VEC);
}

template <bool Signed>
INLINE bool qdwRowBlockFast(const QDwJob &j, kiln_i64 n, kiln_i64 oy, kiln_i64 ox0, int px,
                            kiln_i64 c0) {
  const kiln_conv2d_params &q = *j.q;
  if (q.dw != 1)
    return false;
  kiln_i64 x0 = ox0 * q.sw - q.pw;
  bool interior = x0 >= 0 && x0 + q.sw * (kPx - 1) + q.kw <= q.w;
#define KILN_QDW_CASE(KW, S)                                                                   \
  if (q.kw == KW && q.sw == S) {                                                               \
    if (interior)                                                                              \
      qdwRowBlock<KW, S, Signed, true>(j, n, oy, ox0, px, c0);                                 \
    else                                                                                       \
      qdwRowBlock<KW, S, Signed, false>(j, n, oy, ox0, px, c0);                                \
    return true;                                                                               \
  }
  KILN_QDW_CASE(3, 1)
  KILN_QDW_CASE(3, 2)
  KILN_QDW_CASE(5, 1)
  KILN_QDW_CASE(5, 2)
#undef KILN_QDW_CASE
  return false;
}

/// Output rows [begin, end) of all images (row = image * oh + oy).
template <bool Signed>
void qdwTask(void *ctx, kiln_i64 begin, kiln_i64 end) {
  const QDwJob &j = *(const QDwJob *)ctx;
  const kiln_conv2d_params &q = *j.q;
  for (kiln_i64 row = begin; row < end; ++row) {
    kiln_i64 n = row / q.oh, oy = row % q.oh;
    for (kiln_i64 ox0 = 0; ox0 < q.ow; ox0 += kPx) {
      int px = q.ow - ox0 < kPx ? (int)(q.ow - ox0) : kPx;
      for (kiln_i64 c0 = 0; c0 < q.c; c0 += KILN_VEC) {
        kiln_i64 len = q.c - c0 < KILN_VEC ? q.c - c0 : KILN_VEC;
        if (len == KILN_VEC && qdwRowBlockFast<Signed>(j, n, oy, ox0, px, c0))
          continue;
        qdwBlock<Signed>(j, n, oy, ox0, px, c0, len);
      }
    }
  }
}

} // namespace

extern "C" {

void kiln_qdwconv2d_nhwc_u8s8(kiln_addr params, kiln_addr in, kiln_addr w, kiln_addr bias,
                              kiln_addr requant, kiln_addr out, kiln_i64 zeroPoint,
                              kiln_i64 inStride, kiln_i64 outStride) {
  const kiln_conv2d_params &q = *(const kiln_conv2d_params *)params;
  const kiln_requant_params *rq =
      q.flags & KILN_QCONV_REQUANT ? (const kiln_requant_params *)requant : nullptr;
  QDwJob job{&q,
             (const unsigned char *)in,
             (const float *)w,
             (const int *)bias,
             rq,
             rq ? (const float *)(rq + 1) : nullptr,
             (void *)out,
             (float)zeroPoint,
             inStride,
             outStride,
             (q.c + KILN_PANEL - 1) / KILN_PANEL * KILN_PANEL};
  if (q.flags & KILN_QCONV_SIGNED_INPUT)
    parallelFor<qdwTask<true>>(q.n * q.oh, q.ow * q.c * q.kh * q.kw, &job);
  else
    parallelFor<qdwTask<false>>(q.n * q.oh, q.ow * q.c * q.kh * q.kw, &job);
}

} // extern "C"
