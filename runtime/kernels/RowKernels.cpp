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
#include "RowSupport.h"

namespace {

typedef kiln_row_params RowParams;
enum : kiln_i64 {
  kLogSoftmax = KILN_ROW_LOG_SOFTMAX,
  kHasScale = KILN_ROW_HAS_SCALE,
  kHasBias = KILN_ROW_HAS_BIAS
};

struct RowJob {
  const RowParams *q;
  const float *in, *scale, *bias;
  float *out;
  float scalar; // layer norm: epsilon; softmax: the scale of its input
};

/// Rows [begin, end): see softmaxRow.
void softmaxTask(void *ctx, kiln_i64 begin, kiln_i64 end) {
  const RowJob &j = *(const RowJob *)ctx;
  kiln_i64 n = j.q->n;
  bool log = (j.q->flags & kLogSoftmax) != 0;
  for (kiln_i64 row = begin; row < end; ++row)
    softmaxRow(j.in + row * n, j.out + row * n, n, log, j.scalar);
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
    vf inv = splat(1.0f / __builtin_sqrtf(var + j.scalar));
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
