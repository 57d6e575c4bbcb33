// Softmax over one row and the vector exp it needs, shared by the row
// kernels (RowKernels.cpp) and the fused attention kernel (Kernels.cpp).
#ifndef KILN_KERNELS_ROWSUPPORT_H
#define KILN_KERNELS_ROWSUPPORT_H

#include "KernelSupport.h"

namespace {

typedef int vi __attribute__((ext_vector_type(KILN_VEC)));

constexpr float kInf = __builtin_inff();

/// e^x. Cody-Waite reduction x = k ln2 + r, |r| <= ln2/2, and Cephes' degree-5
/// polynomial for e^r; 2^k is built in the exponent bits. Below -88 the
/// result flushes to 0 (k = -127 gives a zero scale), so exp(-inf) = 0 as a
/// softmax over masked positions needs; NaN stays NaN. Maximum relative
/// error against the C library: see RowKernelsTest (below 2 ulp).
/// Instruction count matters: a softmax is mostly this function (attention
/// over 128 keys spent 17 % of its time in softmax). The clamps are selects,
/// which a NaN fails and passes through (one min/max instruction each, where
/// maxnum/minnum needed a separate NaN test and blend), and k is rounded by
/// adding 1.5 * 2^23, which leaves k + 127 in the low bits of the sum, so
/// that no conversion to integer is needed.
INLINE vf expv(vf x) {
  vf t = x < splat(-88.0f) ? splat(-88.0f) : x;
  t = t > splat(88.0f) ? splat(88.0f) : t;
  constexpr float kRound = 12582912.0f; // 1.5 * 2^23
  vf biased = t * splat(1.44269504088896341f) + splat(kRound);
  vf k = biased - splat(kRound);
  vf r = t - k * splat(0.693359375f);
  r = r - k * splat(-2.12194440e-4f);
  vf p = splat(1.9875691500e-4f);
  p = p * r + splat(1.3981999507e-3f);
  p = p * r + splat(8.3334519073e-3f);
  p = p * r + splat(4.1665795894e-2f);
  p = p * r + splat(1.6666665459e-1f);
  p = p * r + splat(5.0000001201e-1f);
  vf y = p * (r * r) + r + splat(1.0f);
  // The low 9 bits of kRound's bits are 0, so (bits + 127) << 23 is
  // (k + 127) << 23 for k in [-127, 127].
  vi scale = (__builtin_bit_cast(vi, biased) + 127) << 23;
  return y * __builtin_bit_cast(vf, scale);
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
/// The sum and the maximum of the lanes, as trees of half-width steps: a
/// loop over the lanes is a chain of KILN_VEC dependent operations, and
/// __builtin_reduce_max is one too (with a NaN test per step). Once per row
/// of a softmax or normalisation, where rows can be as short as 4 vectors.
INLINE float sumLanes(vf v) {
  float l[KILN_VEC];
  storev(l, v);
  for (int w = KILN_VEC / 2; w > 0; w /= 2)
    for (int i = 0; i < w; ++i)
      l[i] += l[i + w];
  return l[0];
}
INLINE float maxLanes(vf v) {
  float l[KILN_VEC];
  storev(l, v);
  for (int w = KILN_VEC / 2; w > 0; w /= 2)
    for (int i = 0; i < w; ++i)
      l[i] = l[i] > l[i + w] ? l[i] : l[i + w];
  return l[0];
}

/// y = softmax(c * x) over one row of n floats (c > 0), or with `log`,
/// c * x - max - log(sum). Three sweeps: the maximum, exp(c x - max) stored
/// and summed, then the scaling. The maximum ignores NaN (maxnum) but a NaN
/// input still makes its exp, the sum and so the whole row NaN, as the ONNX
/// definition gives. x and y may be the same row.
INLINE void softmaxRow(const float *x, float *y, kiln_i64 n, bool log, float c) {
  kiln_i64 full = n - n % KILN_VEC, tail = n - full;
  vf vc = splat(c);
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
  float mx = maxLanes(m0) * c;
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

} // namespace

#endif
