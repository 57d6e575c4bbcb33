// Row kernels: softmax, log-softmax and layer normalisation over the
// trailing axes of a tensor, seen as [rows, n]. Exporters write each of these
// as four to nine ONNX ops (ReduceMax, Sub, Exp, ReduceSum, Div; ReduceMean,
// Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add); lowered one by one they
// are as many passes over the tensor through memory, and the reductions do
// not vectorise (LLVM keeps a float sum in order). Here each row is read
// from memory once and the remaining sweeps find it in L1; rows go to the
// thread pool. `kiln-fuse-row-ops` recognises the patterns.
//
// exp is a vector polynomial (no libm call in the loop); see expv.
#include "KernelSupport.h"

namespace {

typedef int vi __attribute__((ext_vector_type(KILN_VEC)));

struct RowParams {
  kiln_i64 rows, n, flags;
};
enum : kiln_i64 { kLogSoftmax = 1, kHasScale = 2, kHasBias = 4 };

constexpr float kInf = __builtin_inff();

/// e^x. Cody-Waite reduction x = k ln2 + r, |r| <= ln2/2, and Cephes' degree-5
/// polynomial for e^r; 2^k is built in the exponent bits. Below -88 the
/// result flushes to 0 (k = -127 gives a zero scale), so exp(-inf) = 0 as a
/// softmax over masked positions needs; NaN stays NaN. Maximum relative
/// error against the C library: see RowKernelsTest (below 2 ulp).
INLINE vf expv(vf x) {
  vf t = __builtin_elementwise_min(__builtin_elementwise_max(x, splat(-88.0f)), splat(88.0f));
  vf k = __builtin_elementwise_roundeven(t * splat(1.44269504088896341f));
  vf r = t - k * splat(0.693359375f);
  r = r - k * splat(-2.12194440e-4f);
  vf p = splat(1.9875691500e-4f);
  p = p * r + splat(1.3981999507e-3f);
  p = p * r + splat(8.3334519073e-3f);
  p = p * r + splat(4.1665795894e-2f);
  p = p * r + splat(1.6666665459e-1f);
  p = p * r + splat(5.0000001201e-1f);
  vf y = p * (r * r) + r + splat(1.0f);
  vi bits = (__builtin_convertvector(k, vi) + 127) << 23;
  y = y * __builtin_bit_cast(vf, bits);
  return x != x ? x : y;
}

/// log(x) for the softmax denominator (x in [1, n]), in double: once per row.
INLINE float logScalar(float xf) {
  if (!(xf > 0.0f) || xf == kInf)
    return xf == kInf ? kInf : (xf == 0.0f ? -kInf : __builtin_nanf(""));
  double x = xf;
  int e = 0;
  while (x > 1.41421356237309505) {
    x *= 0.5;
    ++e;
  }
  while (x < 0.70710678118654752) {
    x *= 2.0;
    --e;
  }
  // log(x) = 2 atanh(s), s = (x - 1) / (x + 1), |s| <= 0.172.
  double s = (x - 1.0) / (x + 1.0), s2 = s * s;
  double series = 1.0 + s2 * (1.0 / 3 + s2 * (1.0 / 5 + s2 * (1.0 / 7 + s2 * (1.0 / 9 +
                  s2 * (1.0 / 11 + s2 * (1.0 / 13))))));
  return (float)(e * 0.693147180559945309 + 2.0 * s * series);
}

/// Lanes [0, len) of p, the others `fill`.
INLINE vf loadPartial(const float *p, kiln_i64 len, float fill) {
  vf v = splat(fill);
  for (kiln_i64 i = 0; i < len; ++i)
    v[i] = p[i];
  return v;
}
INLINE void storePartial(float *p, vf v, kiln_i64 len) {
  for (kiln_i64 i = 0; i < len; ++i)
    p[i] = v[i];
}
INLINE float sumLanes(vf v) {
  float s = 0.0f;
  for (int i = 0; i < KILN_VEC; ++i)
    s += v[i];
  return s;
}

struct RowJob {
  const RowParams *q;
  const float *in, *scale, *bias;
  float *out;
  float epsilon; // layer norm; softmax: the scale of its input
};

/// Rows [begin, end). Three sweeps per row: the maximum, exp(x - max) stored
/// and summed, then the scaling (or, for log-softmax, x - max - log(sum)).
/// The maximum ignores NaN (maxnum) but a NaN input still makes its exp, the
/// sum and so the whole row NaN, as the ONNX definition gives.
void softmaxTask(void *ctx, kiln_i64 begin, kiln_i64 end) {
  const RowJob &j = *(const RowJob *)ctx;
  kiln_i64 n = j.q->n, full = n - n % KILN_VEC, tail = n - full;
  bool log = (j.q->flags & kLogSoftmax) != 0;
  // softmax(c * x) for c > 0: the maximum of c * x is c times that of x.
  float c = j.epsilon;
  vf vc = splat(c);
  for (kiln_i64 row = begin; row < end; ++row) {
    const float *x = j.in + row * n;
    float *y = j.out + row * n;
    vf m0 = splat(-kInf), m1 = splat(-kInf);
    kiln_i64 i = 0;
    for (; i + 2 * KILN_VEC <= full; i += 2 * KILN_VEC) {
      m0 = __builtin_elementwise_max(m0, loadv(x + i));
      m1 = __builtin_elementwise_max(m1, loadv(x + i + KILN_VEC));
    }
    for (; i < full; i += KILN_VEC)
      m0 = __builtin_elementwise_max(m0, loadv(x + i));
    if (tail)
      m1 = __builtin_elementwise_max(m1, loadPartial(x + full, tail, -kInf));
    m0 = __builtin_elementwise_max(m0, m1);
    float mx = m0[0];
    for (int l = 1; l < KILN_VEC; ++l)
      mx = mx > m0[l] ? mx : m0[l];
    mx *= c;
    vf vmx = splat(mx), s0 = splat(0.0f), s1 = splat(0.0f);
    for (i = 0; i + 2 * KILN_VEC <= full; i += 2 * KILN_VEC) {
      vf e0 = expv(loadv(x + i) * vc - vmx), e1 = expv(loadv(x + i + KILN_VEC) * vc - vmx);
      if (!log) {
        storev(y + i, e0);
        storev(y + i + KILN_VEC, e1);
      }
      s0 += e0;
      s1 += e1;
    }
    for (; i < full; i += KILN_VEC) {
      vf e = expv(loadv(x + i) * vc - vmx);
      if (!log)
        storev(y + i, e);
      s0 += e;
    }
    if (tail) {
      // Padding lanes hold -inf, whose exp is 0.
      vf e = expv(loadPartial(x + full, tail, -kInf) * vc - vmx);
      if (!log)
        storePartial(y + full, e, tail);
      s1 += e;
    }
    float sum = sumLanes(s0 + s1);
    if (log) {
      vf shift = splat(mx + logScalar(sum));
      for (i = 0; i < full; i += KILN_VEC)
        storev(y + i, loadv(x + i) * vc - shift);
      for (; i < n; ++i)
        y[i] = x[i] * c - shift[0];
    } else {
      vf inv = splat(1.0f / sum);
      for (i = 0; i < full; i += KILN_VEC)
        storev(y + i, loadv(y + i) * inv);
      for (; i < n; ++i)
        y[i] *= inv[0];
    }
  }
}

/// Rows [begin, end): mean, then the variance as the mean of squared
/// deviations (two sweeps, as the exported graphs compute it, not E[x^2] -
/// mean^2, which cancels), then (x - mean) / sqrt(var + epsilon) * scale +
/// bias.
void layerNormTask(void *ctx, kiln_i64 begin, kiln_i64 end) {
  const RowJob &j = *(const RowJob *)ctx;
  kiln_i64 n = j.q->n, full = n - n % KILN_VEC, tail = n - full;
  bool hasScale = (j.q->flags & kHasScale) != 0, hasBias = (j.q->flags & kHasBias) != 0;
  for (kiln_i64 row = begin; row < end; ++row) {
    const float *x = j.in + row * n;
    float *y = j.out + row * n;
    vf s0 = splat(0.0f), s1 = splat(0.0f);
    kiln_i64 i = 0;
    for (; i + 2 * KILN_VEC <= full; i += 2 * KILN_VEC) {
      s0 += loadv(x + i);
      s1 += loadv(x + i + KILN_VEC);
    }
    for (; i < full; i += KILN_VEC)
      s0 += loadv(x + i);
    if (tail)
      s1 += loadPartial(x + full, tail, 0.0f);
    float mean = sumLanes(s0 + s1) / (float)n;
    vf vmean = splat(mean);
    s0 = s1 = splat(0.0f);
    for (i = 0; i + 2 * KILN_VEC <= full; i += 2 * KILN_VEC) {
      vf d0 = loadv(x + i) - vmean, d1 = loadv(x + i + KILN_VEC) - vmean;
      s0 += d0 * d0;
      s1 += d1 * d1;
    }
    for (; i < full; i += KILN_VEC) {
      vf d = loadv(x + i) - vmean;
      s0 += d * d;
    }
    if (tail) {
      vf d = loadPartial(x + full, tail, mean) - vmean;
      s1 += d * d;
    }
    float var = sumLanes(s0 + s1) / (float)n;
    vf inv = splat(1.0f / __builtin_sqrtf(var + j.epsilon));
    for (i = 0; i < n; i += KILN_VEC) {
      kiln_i64 len = n - i < KILN_VEC ? n - i : KILN_VEC;
      bool whole = len == KILN_VEC;
      vf v = (whole ? loadv(x + i) : loadPartial(x + i, len, 0.0f)) - vmean;
      v = v * inv;
      if (hasScale)
        v = v * (whole ? loadv(j.scale + i) : loadPartial(j.scale + i, len, 0.0f));
      if (hasBias)
        v = v + (whole ? loadv(j.bias + i) : loadPartial(j.bias + i, len, 0.0f));
      if (whole)
        storev(y + i, v);
      else
        storePartial(y + i, v, len);
    }
  }
}

} // namespace

extern "C" {

/// Softmax (flags & 1: log-softmax) of `scale` (> 0) times each of `rows`
/// contiguous rows of `n` floats. params: rows, n, flags.
void kiln_softmax_f32(kiln_addr params, kiln_addr in, kiln_addr out, float scale) {
  const RowParams &q = *(const RowParams *)params;
  RowJob job{&q, (const float *)in, nullptr, nullptr, (float *)out, scale};
  parallelFor<softmaxTask>(q.rows, 8 * q.n, &job);
}

/// Layer normalisation of each of `rows` contiguous rows of `n` floats,
/// times `scale` (flags & 2) plus `bias` (flags & 4), both `n` floats.
/// params: rows, n, flags.
void kiln_layer_norm_f32(kiln_addr params, kiln_addr in, kiln_addr scale, kiln_addr bias,
                         kiln_addr out, float epsilon) {
  const RowParams &q = *(const RowParams *)params;
  RowJob job{&q, (const float *)in, (const float *)scale, (const float *)bias, (float *)out,
             epsilon};
  parallelFor<layerNormTask>(q.rows, 4 * q.n, &job);
}

} // extern "C"
