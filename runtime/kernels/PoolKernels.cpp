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

namespace {

// 8-bit max pooling (quantized CNNs: ResNet's stem pools its u8
// activations; the importer's QDQ fusion hands it the bytes, see
// QdqFusion.cpp), a whole register of bytes per step: 64 channels on
// AVX-512, where the f32 kernel does 16.
constexpr int kPoolBytes = 4 * KILN_VEC;
typedef unsigned char vbu __attribute__((ext_vector_type(kPoolBytes), aligned(1)));
typedef signed char vbs __attribute__((ext_vector_type(kPoolBytes), aligned(1)));

struct BytePoolJob {
  const PoolParams *q;
  const unsigned char *in;
  unsigned char *out;
  kiln_i64 ldi, ldo;
};

/// The taps [lo, hi) of a window starting at `start` (dilation d) that
/// fall inside [0, size).
INLINE void insideTaps(kiln_i64 start, kiln_i64 d, kiln_i64 taps, kiln_i64 size, kiln_i64 &lo,
                       kiln_i64 &hi) {
  lo = 0;
  while (lo < taps && start + lo * d < 0)
    ++lo;
  hi = taps;
  while (hi > lo && start + (hi - 1) * d >= size)
    --hi;
}

/// Output rows [begin, end) of all images; T, V: u8 and vbu, or s8 and vbs.
/// The window's inside taps are found once per pixel, so the loop over
/// them tests nothing (tested per tap, a 3x3 window cost 4x its loads).
template <typename T, typename V>
void bytePoolTask(void *ctx, kiln_i64 begin, kiln_i64 end) {
  const BytePoolJob &j = *(const BytePoolJob *)ctx;
  const PoolParams &q = *j.q;
  const T lowest = (T)0 < (T)-1 ? (T)0 : (T)-128;
  for (kiln_i64 row = begin; row < end; ++row) {
    kiln_i64 n = row / q.oh, oy = row % q.oh;
    kiln_i64 y0 = oy * q.sh - q.ph, kyLo, kyHi;
    insideTaps(y0, q.dh, q.kh, q.h, kyLo, kyHi);
    const unsigned char *image = j.in + n * q.h * q.w * j.ldi;
    for (kiln_i64 ox = 0; ox < q.ow; ++ox) {
      kiln_i64 x0 = ox * q.sw - q.pw, kxLo, kxHi;
      insideTaps(x0, q.dw, q.kw, q.w, kxLo, kxHi);
      unsigned char *o = j.out + ((n * q.oh + oy) * q.ow + ox) * j.ldo;
      for (kiln_i64 c0 = 0; c0 < q.c; c0 += kPoolBytes) {
        kiln_i64 len = q.c - c0 < kPoolBytes ? q.c - c0 : kPoolBytes;
        // A window wholly in the padding (ceil mode) gives the type's
        // lowest value, as the f32 kernel gives -inf.
        V acc = (V)lowest;
        for (kiln_i64 ky = kyLo; ky < kyHi; ++ky) {
          const unsigned char *src =
              image + ((y0 + ky * q.dh) * q.w + x0 + kxLo * q.dw) * j.ldi + c0;
          for (kiln_i64 kx = kxLo; kx < kxHi; ++kx, src += q.dw * j.ldi) {
            V v;
            if (len == kPoolBytes) {
              __builtin_memcpy(&v, src, sizeof(V));
            } else {
              T part[kPoolBytes];
              for (kiln_i64 c = 0; c < kPoolBytes; ++c)
                part[c] = c < len ? (T)src[c] : lowest;
              __builtin_memcpy(&v, part, sizeof(V));
            }
            acc = __builtin_elementwise_max(acc, v);
          }
        }
        if (len == kPoolBytes) {
          __builtin_memcpy(o + c0, &acc, sizeof(V));
        } else {
          T part[kPoolBytes];
          __builtin_memcpy(part, &acc, sizeof(V));
          for (kiln_i64 c = 0; c < len; ++c)
            o[c0 + c] = (unsigned char)part[c];
        }
      }
    }
  }
}

} // namespace

extern "C" {

/// Max pooling of u8 (or, with KILN_POOL_SIGNED, s8) values over NHWC:
/// kiln_pool2d_nhwc_f32's windows, strides in bytes.
void kiln_maxpool2d_nhwc_i8(kiln_addr params, kiln_addr inAddr, kiln_addr outAddr,
                            kiln_i64 inStride, kiln_i64 outStride) {
  const PoolParams &q = *(const PoolParams *)params;
  BytePoolJob job{&q, (const unsigned char *)inAddr, (unsigned char *)outAddr, inStride,
                  outStride};
  if (q.flags & KILN_POOL_SIGNED)
    parallelFor<bytePoolTask<signed char, vbs>>(q.n * q.oh, q.ow * q.c * q.kh * q.kw / 4, &job);
  else
    parallelFor<bytePoolTask<unsigned char, vbu>>(q.n * q.oh, q.ow * q.c * q.kh * q.kw / 4, &job);
}

} // extern "C"
