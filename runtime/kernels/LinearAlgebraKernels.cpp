// Linear-algebra kernels: determinants of matrices too large for the
// closed-form sums the importer writes (Det above 4x4).
//
// Freestanding like the other kernels (no libc); the unit tests compile it
// natively and compare with an independent reference.

#include "KernelSupport.h"

namespace {

// The largest matrix side: the LU works on a double copy on the stack
// (32 KB at this size: the calling thread may have a small stack, and the
// kernels get no stack probes). The importer rejects larger ones.
constexpr kiln_i64 kMaxDetSide = 64;

INLINE double absd(double x) { return x < 0 ? -x : x; }

/// det of the n x n row-major matrix `a` by LU with partial pivoting, in
/// double: a row swap flips the sign, the product of the pivots is the rest.
double determinant(const float *a, kiln_i64 n) {
  double m[kMaxDetSide * kMaxDetSide];
  for (kiln_i64 i = 0; i < n * n; ++i)
    m[i] = a[i];
  double det = 1.0;
  for (kiln_i64 k = 0; k < n; ++k) {
    kiln_i64 pivot = k;
    for (kiln_i64 r = k + 1; r < n; ++r)
      if (absd(m[r * n + k]) > absd(m[pivot * n + k]))
        pivot = r;
    if (m[pivot * n + k] == 0.0)
      return 0.0;
    if (pivot != k) {
      for (kiln_i64 c = 0; c < n; ++c) {
        double t = m[k * n + c];
        m[k * n + c] = m[pivot * n + c];
        m[pivot * n + c] = t;
      }
      det = -det;
    }
    double p = m[k * n + k];
    det *= p;
    for (kiln_i64 r = k + 1; r < n; ++r) {
      double f = m[r * n + k] / p;
      for (kiln_i64 c = k + 1; c < n; ++c)
        m[r * n + c] -= f * m[k * n + c];
    }
  }
  return det;
}

} // namespace

extern "C" {

/// Determinants of `params[0]` row-major n x n matrices (n = params[1],
/// at most kMaxDetSide) into `out`.
void kiln_det_f32(kiln_addr paramsAddr, kiln_addr inAddr, kiln_addr outAddr) {
  const kiln_det_params *q = (const kiln_det_params *)paramsAddr;
  kiln_i64 count = q->count, n = q->n;
  const float *in = (const float *)inAddr;
  float *out = (float *)outAddr;
  for (kiln_i64 b = 0; b < count; ++b)
    out[b] = n <= kMaxDetSide ? (float)determinant(in + b * n * n, n) : __builtin_nanf("");
}

} // extern "C"
