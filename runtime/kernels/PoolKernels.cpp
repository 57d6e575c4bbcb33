// Max and average pooling over NHWC.
// Why hand-written, and how they are built: KernelSupport.h.

#include "ConvSupport.h"

namespace {

struct PoolJob {
  const PoolParams *q;
  const float *in;
  float *out;
  kiln_i64 ldi, ldo;
};

} // namespace

extern "C" {

/// Max or average pooling over NHWC, vectorised over channels. Ceil-mode
/// windows are clipped at the input's end like padding; `padEnd*` (the ONNX
/// end pads, without the ceil-mode extra) bound the window for
/// count_include_pad. Strides as for kiln_conv2d_nhwc_f32.
static void poolTask(void *ctx, kiln_i64 begin, kiln_i64 end);

void kiln_pool2d_nhwc_f32(kiln_addr params, kiln_addr inAddr, kiln_addr outAddr,
                          kiln_i64 inStride, kiln_i64 outStride) {
  const PoolParams &q = *(const PoolParams *)params;
  PoolJob job{&q, (const float *)inAddr, (float *)outAddr, inStride, outStride};
  parallelFor<poolTask>(q.n * q.oh, q.ow * q.c * q.kh * q.kw, &job);
}

/// Output rows [begin, end) of all images.
static void poolTask(void *ctx, kiln_i64 begin, kiln_i64 end) {
  const PoolJob &j = *(const PoolJob *)ctx;
  const PoolParams &q = *j.q;
  const float *in = j.in;
  float *out = j.out;
  kiln_i64 inStride = j.ldi, outStride = j.ldo;
  bool avg = (q.flags & kAverage) != 0, countPad = (q.flags & kCountPad) != 0;
  kiln_i64 C = q.c, padEndH = q.pad_end_h, padEndW = q.pad_end_w;
  for (kiln_i64 row = begin; row < end; ++row) {
    kiln_i64 n = row / q.oh, oy = row % q.oh;
    {
      for (kiln_i64 ox = 0; ox < q.ow; ++ox) {
        kiln_i64 y0 = oy * q.sh - q.ph, x0 = ox * q.sw - q.pw;
        kiln_i64 count = 0;
        if (countPad) {
          kiln_i64 ylo = y0 < -q.ph ? -q.ph : y0, xlo = x0 < -q.pw ? -q.pw : x0;
          kiln_i64 yhi = y0 + q.kh, xhi = x0 + q.kw;
          if (yhi > q.h + padEndH) yhi = q.h + padEndH;
          if (xhi > q.w + padEndW) xhi = q.w + padEndW;
          count = (yhi - ylo) * (xhi - xlo);
        }
        float *o = out + ((n * q.oh + oy) * q.ow + ox) * outStride;
        for (kiln_i64 c0 = 0; c0 < C; c0 += KILN_VEC) {
          kiln_i64 len = C - c0 < KILN_VEC ? C - c0 : KILN_VEC;
          vf acc = splat(avg ? 0.0f : -__builtin_inff());
          kiln_i64 valid = 0;
          for (kiln_i64 ky = 0; ky < q.kh; ++ky) {
            kiln_i64 y = y0 + ky * q.dh;
            if (y < 0 || y >= q.h)
              continue;
            for (kiln_i64 kx = 0; kx < q.kw; ++kx) {
              kiln_i64 x = x0 + kx * q.dw;
              if (x < 0 || x >= q.w)
                continue;
              ++valid;
              const float *src = in + ((n * q.h + y) * q.w + x) * inStride + c0;
              vf v;
              if (len == KILN_VEC) {
                v = loadv(src);
              } else {
                v = splat(0);
                for (kiln_i64 c = 0; c < len; ++c)
                  v[c] = src[c];
              }
              // NaN-propagating max (a NaN in the window wins, as with
              // arith.maximumf), by select: see clampv.
              acc = avg ? acc + v : ((v > acc || v != v) ? v : acc);
            }
          }
          if (avg)
            acc = acc / splat((float)(countPad ? count : (valid ? valid : 1)));
          if (len == KILN_VEC)
            storev(o + c0, acc);
          else
            for (kiln_i64 c = 0; c < len; ++c)
              o[c0 + c] = acc[c];
        }
      }
    }
  }
}

} // extern "C"
