// Depthwise convolution, NHWC, vectorised over channels.
// Why hand-written, and how they are built: KernelSupport.h.

#include "ConvSupport.h"

extern "C" {

/// Depthwise 2-D convolution (one input and one output channel per group),
/// NHWC, weights packed as [kh][kw][C rounded up to KILN_PANEL] and bias as
/// [C rounded up]. Vectorised over channels; DW_PX output pixels of a row
/// share each weight vector load. Pixel blocks whose windows stay inside the
/// row take a path without bounds tests (the interior of every layer).
#define DW_PX 8
/// The epilogue of a depthwise block: px output pixels of channels [c0,
/// c0 + KILN_VEC) (fewer when !full), + residual, clamped.
INLINE void dwStore(const ConvParams &q, const vf (&acc)[DW_PX], const float *res, float *out,
                    float lo, float hi, kiln_i64 ldo, kiln_i64 n, kiln_i64 oy, kiln_i64 ox0,
                    int px, kiln_i64 c0, bool full) {
  kiln_i64 C = q.c, len = C - c0 < KILN_VEC ? C - c0 : KILN_VEC;
  vf vlo = splat(lo), vhi = splat(hi);
  for (int j = 0; j < px; ++j) {
    kiln_i64 pixel = (n * q.oh + oy) * q.ow + ox0 + j;
    kiln_i64 off = pixel * ldo + c0, roff = pixel * C + c0;
    if (full) {
      vf r = acc[j];
      if (res)
        r += loadv(res + roff);
      storev(out + off, hasBounds(lo, hi) ? clampv(r, vlo, vhi) : r);
    } else {
      float lanes[KILN_VEC]; // see storeTile
      storev(lanes, acc[j]);
      for (kiln_i64 c = 0; c < len; ++c) {
        float r = lanes[c];
        if (res)
          r += res[roff + c];
        out[off + c] = hasBounds(lo, hi) ? clampf(r, lo, hi) : r;
      }
    }
  }
}

INLINE void dwBlock(const ConvParams &q, const float *image, const float *w,
                    const float *bias, const float *res, float *out, float lo, float hi,
                    kiln_i64 ldi, kiln_i64 ldo, kiln_i64 n, kiln_i64 oy, kiln_i64 ox0, int px,
                    kiln_i64 c0, bool full, bool interior) {
  kiln_i64 C = q.c, cpad = (C + KILN_PANEL - 1) / KILN_PANEL * KILN_PANEL;
  kiln_i64 len = C - c0 < KILN_VEC ? C - c0 : KILN_VEC;
  vf acc[DW_PX];
  for (int j = 0; j < DW_PX; ++j)
    acc[j] = loadv(bias + c0);
  for (kiln_i64 ky = 0; ky < q.kh; ++ky) {
    kiln_i64 y = oy * q.sh - q.ph + ky * q.dh;
    if (y < 0 || y >= q.h)
      continue;
    const float *row = image + y * q.w * ldi + c0;
    for (kiln_i64 kx = 0; kx < q.kw; ++kx) {
      vf wv = loadv(w + (ky * q.kw + kx) * cpad + c0);
      kiln_i64 x0 = ox0 * q.sw - q.pw + kx * q.dw;
      for (int j = 0; j < DW_PX; ++j) {
        kiln_i64 x = x0 + (j < px ? j : 0) * q.sw;
        if (!interior && (x < 0 || x >= q.w))
          continue;
        const float *src = row + x * ldi;
        vf xv;
        if (full) {
          xv = loadv(src);
        } else {
          xv = splat(0);
          for (kiln_i64 c = 0; c < len; ++c)
            xv[c] = src[c];
        }
        acc[j] += xv * wv;
      }
    }
  }
  dwStore(q, acc, res, out, lo, hi, ldo, n, oy, ox0, px, c0, full);
}

} // extern "C": the interior paths are templates

/// A block of up to DW_PX output pixels of a row for the common windows (KW
/// wide, stride S, no dilation) on full vectors: the S*(DW_PX-1)+KW input
/// pixels under the block are each loaded once (zero where the window hangs
/// over the row's ends: one test per input, not per tap) and multiplied into
/// every output they reach, at constant offsets. The general dwBlock loads
/// an input once per (pixel, tap), with a bounds test and an address
/// multiply each: a 3x3 stride-1 row did 24 loads per 24 FMAs against 10,
/// and 14x14 and 7x7 maps, whose every block touches an edge, ran entirely
/// on its bounds-tested path.
template <int KW, int S>
INLINE void dwRowBlock(const ConvParams &q, const float *image, const float *w,
                       const float *bias, const float *res, float *out, float lo, float hi,
                       kiln_i64 ldi, kiln_i64 ldo, kiln_i64 n, kiln_i64 oy, kiln_i64 ox0, int px,
                       kiln_i64 c0) {
  constexpr int kInputs = S * (DW_PX - 1) + KW;
  kiln_i64 cpad = (q.c + KILN_PANEL - 1) / KILN_PANEL * KILN_PANEL;
  kiln_i64 x0 = ox0 * S - q.pw;
  vf acc[DW_PX];
  for (int j = 0; j < DW_PX; ++j)
    acc[j] = loadv(bias + c0);
  for (kiln_i64 ky = 0; ky < q.kh; ++ky) {
    kiln_i64 y = oy * q.sh - q.ph + ky * q.dh;
    if (y < 0 || y >= q.h)
      continue;
    const float *row = image + y * q.w * ldi + c0;
    const float *wk = w + ky * KW * cpad + c0;
    vf wv[KW];
    for (int kx = 0; kx < KW; ++kx)
      wv[kx] = loadv(wk + kx * cpad);
#pragma clang loop unroll(full)
    for (int t = 0; t < kInputs; ++t) {
      kiln_i64 x = x0 + t;
      vf v = (unsigned long)x < (unsigned long)q.w ? loadv(row + x * ldi) : splat(0);
#pragma clang loop unroll(full)
      for (int kx = 0; kx < KW; ++kx) {
        int d = t - kx;
        if (d >= 0 && d % S == 0 && d / S < DW_PX)
          acc[d / S] += v * wv[kx];
      }
    }
  }
  dwStore(q, acc, res, out, lo, hi, ldo, n, oy, ox0, px, c0, /*full=*/true);
}

/// dwRowBlock for this layer's window, when there is one; false otherwise.
INLINE bool dwRowBlockFast(const ConvParams &q, const float *image, const float *w,
                           const float *bias, const float *res, float *out, float lo, float hi,
                           kiln_i64 ldi, kiln_i64 ldo, kiln_i64 n, kiln_i64 oy, kiln_i64 ox0,
                           int px, kiln_i64 c0) {
  if (q.dw != 1)
    return false;
#define KILN_DW_CASE(KW, S)                                                                    \
  if (q.kw == KW && q.sw == S) {                                                               \
    dwRowBlock<KW, S>(q, image, w, bias, res, out, lo, hi, ldi, ldo, n, oy, ox0, px, c0);      \
    return true;                                                                               \
  }
  KILN_DW_CASE(3, 1)
  KILN_DW_CASE(3, 2)
  KILN_DW_CASE(5, 1)
  KILN_DW_CASE(5, 2)
  KILN_DW_CASE(7, 1)
#undef KILN_DW_CASE
  return false;
}

extern "C" {

static void dwTask(void *ctx, kiln_i64 begin, kiln_i64 end);

/// Strides as for kiln_conv2d_nhwc_f32.
void kiln_dwconv2d_nhwc_f32(kiln_addr params, kiln_addr inAddr, kiln_addr wAddr,
                            kiln_addr biasAddr, kiln_addr resAddr, kiln_addr outAddr, float lo,
                            float hi, kiln_i64 inStride, kiln_i64 outStride) {
  const ConvParams &q = *(const ConvParams *)params;
  ConvJob job{&q,
              (const float *)inAddr,
              (const float *)wAddr,
              (const float *)biasAddr,
              (q.flags & kHasResidual) ? (const float *)resAddr : nullptr,
              (float *)outAddr,
              lo,
              hi,
              inStride,
              outStride};
  parallelFor<dwTask>(q.n * q.oh, q.ow * q.c * q.kh * q.kw, &job);
}

/// Output rows [begin, end) of all images (row = image * oh + oy).
static void dwTask(void *ctx, kiln_i64 begin, kiln_i64 end) {
  const ConvJob &j = *(const ConvJob *)ctx;
  const ConvParams &q = *j.q;
  const float *w = j.w, *bias = j.bias, *res = j.res;
  float *out = j.out, lo = j.lo, hi = j.hi;
  kiln_i64 inStride = j.ldi, outStride = j.ldo;
  kiln_i64 C = q.c;
  for (kiln_i64 row = begin; row < end; ++row) {
    kiln_i64 n = row / q.oh, oy = row % q.oh;
    const float *image = j.in + n * q.h * q.w * inStride;
    {
      for (kiln_i64 ox0 = 0; ox0 < q.ow; ox0 += DW_PX) {
        int px = q.ow - ox0 < DW_PX ? (int)(q.ow - ox0) : DW_PX;
        kiln_i64 first = ox0 * q.sw - q.pw;
        kiln_i64 last = (ox0 + DW_PX - 1) * q.sw - q.pw + (q.kw - 1) * q.dw;
        bool interior = px == DW_PX && first >= 0 && last < q.w;
        for (kiln_i64 c0 = 0; c0 < C; c0 += KILN_VEC) {
          bool full = c0 + KILN_VEC <= C;
          if (full && dwRowBlockFast(q, image, w, bias, res, out, lo, hi, inStride, outStride,
                                     n, oy, ox0, px, c0))
            continue;
          if (interior && full)
            dwBlock(q, image, w, bias, res, out, lo, hi, inStride, outStride, n, oy, ox0, px, c0,
                    true, true);
          else
            dwBlock(q, image, w, bias, res, out, lo, hi, inStride, outStride, n, oy, ox0, px, c0,
                    full, false);
        }
      }
    }
  }
}

} // extern "C"
