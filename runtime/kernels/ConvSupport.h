// What the convolution and matrix-product kernels share: the register tile
// (accumulate, storeTile), the epilogues (clamp, GELU), the convolution
// tiles, the L1-aliasing test and the split of work into pixel blocks.
// Freestanding like the kernels.
#ifndef KILN_KERNELS_CONVSUPPORT_H
#define KILN_KERNELS_CONVSUPPORT_H

#include "RowSupport.h"

namespace {

// Zeros that padded window positions read from, so that the inner loops
// never test bounds. Channel counts above this go through the chunked path.
constexpr kiln_i64 kZeroFloats = 4096;
alignas(64) const float kZeros[kZeroFloats] = {};

INLINE float clampf(float x, float lo, float hi) { return x < lo ? lo : (x > hi ? hi : x); }
// Relu/Clip bounds. maxNum/minNum semantics: a NaN becomes the bound, so
// the store paths apply this only when there are bounds (a conv or matmul
// without an activation keeps NaNs). Written this way, not as IEEE
// maximum/minimum or compare-and-select: those forms changed LLVM's register
// allocation of the inlined FMA loop (accumulators spilled every iteration,
// mlp_gelu 2.8x slower).
INLINE vf clampv(vf x, vf lo, vf hi) {
  return __builtin_elementwise_min(__builtin_elementwise_max(x, lo), hi);
}
INLINE bool hasBounds(float lo, float hi) {
  return lo != -__builtin_inff() || hi != __builtin_inff();
}

/// acc[i][v] += sum over c in [begin, end) of a[i][c] times row c of the
/// packed panel b. One call covers (part of) one window position of a
/// convolution (k input channels). W vectors of the panel are used: NV, or
/// NV / 2 for a panel whose valid columns fit in its first half (a 16- or
/// 48-channel layer would otherwise spend half the FMAs of its last panel on
/// zero padding). With Prefetch, each step also prefetches the step's panel
/// row at `next`, into L2 (prefetcht1), not L1: the next panel (32 KB for a
/// 256-deep reduction) pulled into L1 evicted the panel and the input rows
/// the tile was reading (a 128x256x1024 product with its weights in L3, as
/// in an encoder whose weights outgrow L2: 95 -> 99 GFLOP/s on average over
/// 300 calls, best 100 -> 106; native build, Zen 4). A range rather than
/// offset pointers, so that the chunks of a long reduction (kSumChunk) reuse
/// the tile's row pointers.
template <int R, int W, bool Prefetch = false>
INLINE void accumulateFrom(vf (&acc)[R][W], const float *const (&a)[R], const float *b,
                           kiln_i64 begin, kiln_i64 end, const float *next = nullptr) {
  for (kiln_i64 c = begin; c < end; ++c) {
    if constexpr (Prefetch) {
      __builtin_prefetch(next + c * KILN_PANEL, 0, 2);
      __builtin_prefetch(next + c * KILN_PANEL + 16, 0, 2);
    }
    vf bv[W];
    for (int v = 0; v < W; ++v)
      bv[v] = loadv(b + c * KILN_PANEL + v * KILN_VEC);
    for (int i = 0; i < R; ++i) {
      vf x = splat(a[i][c]);
      for (int v = 0; v < W; ++v)
        acc[i][v] += x * bv[v];
    }
  }
}

template <int R, int W, bool Prefetch = false>
INLINE void accumulate(vf (&acc)[R][W], const float *const (&a)[R], const float *b,
                       kiln_i64 k, const float *next = nullptr) {
  accumulateFrom<R, W, Prefetch>(acc, a, b, 0, k, next);
}

/// Long reductions are summed in chunks: the register accumulators take a
/// chunk and are then added to a running total kept beside them (on the
/// stack: it is touched once per chunk, not in the FMA loop), restarting
/// from zero. A chunk ends after the first window position (or pointwise
/// block of kSumChunk channels) by which at least kSumChunk products have
/// gone in: a 3x3 layer of 512 channels sums 512 per chunk, an RGB stem one
/// window row. One chain of FMAs as long as the reduction loses precision
/// with its length: fcn_resnet50's logits differed from ONNX Runtime's by
/// up to 2.3e-4 (245 of 1M elements beyond atol 1e-4 + rtol 1e-3; its
/// feature maps erred 1.3-1.4x more than ONNX Runtime's against float64);
/// with chunks, 53-71 elements (4-6 with the bias last, chunksFinish).
/// MLAS's SGEMM sums in K blocks of 128 much the same way. The price:
/// ResNet-18 2-4 % slower on one core. A reduction of at most kSumChunk
/// products never flushes.
constexpr kiln_i64 kSumChunk = 128;

template <int R, int W> struct ChunkedSum {
  vf total[R][W];
  kiln_i64 pending = 0;
  bool flushed = false;
};

// The loops over the tile below are unrolled by force, as storeTile's are:
// acc must only ever be indexed by constants, or LLVM keeps it a stack
// array (see storeTile). Their trip counts are constants, so this only
// makes sure of it.

/// After `k` more products went into acc: when a chunk is complete, move acc
/// into the total and restart acc from zero.
template <int R, int W>
INLINE void chunkDone(ChunkedSum<R, W> &sum, vf (&acc)[R][W], kiln_i64 k) {
  sum.pending += k;
  if (__builtin_expect(sum.pending < kSumChunk, 1))
    return;
  if (sum.flushed) {
#pragma clang loop unroll(full)
    for (int i = 0; i < R; ++i)
#pragma clang loop unroll(full)
      for (int v = 0; v < W; ++v)
        sum.total[i][v] += acc[i][v];
  } else {
#pragma clang loop unroll(full)
    for (int i = 0; i < R; ++i)
#pragma clang loop unroll(full)
      for (int v = 0; v < W; ++v)
        sum.total[i][v] = acc[i][v];
  }
#pragma clang loop unroll(full)
  for (int i = 0; i < R; ++i)
#pragma clang loop unroll(full)
    for (int v = 0; v < W; ++v)
      acc[i][v] = splat(0);
  sum.flushed = true;
  sum.pending = 0;
}

/// acc = the whole sum (the last, partial chunk plus the total), then the
/// bias, added last as MLAS does: started with the bias, the sum ended
/// further from float64 (fcn_resnet50: 53-71 of 1M logits beyond the
/// tolerance of ONNX Runtime's; 4-6 with the bias last).
template <int R, int W>
INLINE void chunksFinish(ChunkedSum<R, W> &sum, vf (&acc)[R][W], const float *bias) {
  if (sum.flushed) {
#pragma clang loop unroll(full)
    for (int i = 0; i < R; ++i)
#pragma clang loop unroll(full)
      for (int v = 0; v < W; ++v)
        acc[i][v] += sum.total[i][v];
  }
#pragma clang loop unroll(full)
  for (int v = 0; v < W; ++v) {
    vf b = loadv(bias + v * KILN_VEC);
#pragma clang loop unroll(full)
    for (int i = 0; i < R; ++i)
      acc[i][v] += b;
  }
}

/// Epilogue of one register tile (whole sum and bias already in acc):
/// residual, clamp, and a store of the `rows` x `cols` valid part.
template <int R, int W>
INLINE void storeTile(vf (&acc)[R][W], float *const (&out)[R], const float *const (&res)[R],
                      int rows, kiln_i64 cols, bool hasResidual, float lo, float hi) {
  vf vlo = splat(lo), vhi = splat(hi);
  bool bounded = hasBounds(lo, hi);
  // A constant trip count, unrolled by force: a loop to the run-time `rows`
  // indexes acc with a variable, which keeps the accumulators in a stack
  // array that every FMA of the hot loop stores to (2.3x slower tiles once
  // the tile function grew past LLVM's unrolling threshold).
#pragma clang loop unroll(full)
  for (int i = 0; i < R; ++i) {
#pragma clang loop unroll(full)
    for (int v = 0; v < W && i < rows; ++v) {
      kiln_i64 c0 = v * KILN_VEC;
      if (c0 + KILN_VEC <= cols) {
        vf r = acc[i][v];
        if (hasResidual)
          r += loadv(res[i] + c0);
        if (bounded)
          r = clampv(r, vlo, vhi);
        storev(out[i] + c0, r);
      } else {
        // Through a copy: indexing acc with a run-time lane kept the whole
        // accumulator array in memory, stored on every FMA step (matmul at
        // 28 % of peak instead of 90 %).
        float lanes[KILN_VEC];
        storev(lanes, acc[i][v]);
        for (kiln_i64 c = c0; c < cols; ++c) {
          float r = lanes[c - c0];
          if (hasResidual)
            r += res[i][c];
          out[i][c] = bounded ? clampf(r, lo, hi) : r;
        }
      }
    }
  }
}

typedef kiln_conv2d_params ConvParams;
enum : kiln_i64 { kHasResidual = KILN_CONV_HAS_RESIDUAL, kGelu = KILN_CONV_GELU };

/// GELU, x/2 * (1 + erf(x/sqrt(2))), with erf(z) = z P(z^2) / Q(z^2) on z
/// clamped to [-4, 4] (beyond, erf is +-1 in f32): the rational
/// approximation of Eigen and XLA, no exp and no table. Below z = -4,
/// 1 + erf is exactly 0, so that a large negative x gives 0 rather than x
/// times the approximation's residue. Maximum error against the C
/// library's erf in double: see KernelsTest (GeluAccuracy). NaN stays NaN
/// (it is multiplied back in).
INLINE vf geluv(vf x) {
  vf zr = x * splat(0.70710678118654752f);
  vf z = __builtin_elementwise_min(__builtin_elementwise_max(zr, splat(-4.0f)), splat(4.0f));
  vf z2 = z * z;
  vf p = splat(-2.72614225801306e-10f);
  p = p * z2 + splat(2.77068142495902e-08f);
  p = p * z2 + splat(-2.10102402082508e-06f);
  p = p * z2 + splat(-5.69250639462346e-05f);
  p = p * z2 + splat(-7.34990630326855e-04f);
  p = p * z2 + splat(-2.95459980854025e-03f);
  p = p * z2 + splat(-1.60960333262415e-02f);
  vf q = splat(-1.45660718464996e-05f);
  q = q * z2 + splat(-2.13374055278905e-04f);
  q = q * z2 + splat(-1.68282697438203e-03f);
  q = q * z2 + splat(-7.37332916720468e-03f);
  q = q * z2 + splat(-1.42647390514189e-02f);
  vf erf = __builtin_elementwise_min(__builtin_elementwise_max(z * p / q, splat(-1.0f)),
                                     splat(1.0f));
  vf onePlusErf = zr < splat(-4.0f) ? splat(0.0f) : splat(1.0f) + erf;
  return splat(0.5f) * x * onePlusErf;
}

/// GELU over a stored tile, in place: `rows` rows of `cols` floats. Out of
/// line and after the store on purpose: its dozen constants, inlined into
/// the tile, would compete with the accumulators for registers (see
/// clampv), and the tile it reads is still in L1.
__attribute__((noinline)) void geluTile(float *const *out, int rows, kiln_i64 cols) {
  for (int i = 0; i < rows; ++i) {
    float *o = out[i];
    kiln_i64 c = 0;
    for (; c + KILN_VEC <= cols; c += KILN_VEC)
      storev(o + c, geluv(loadv(o + c)));
    if (c < cols) {
      float lanes[KILN_VEC] = {};
      for (kiln_i64 k = c; k < cols; ++k)
        lanes[k - c] = o[k];
      storev(lanes, geluv(loadv(lanes)));
      for (kiln_i64 k = c; k < cols; ++k)
        o[k] = lanes[k - c];
    }
  }
}

typedef kiln_pool2d_params PoolParams;
enum : kiln_i64 { kAverage = KILN_POOL_AVERAGE, kCountPad = KILN_POOL_COUNT_PAD };

/// Rows of a register tile that lie a multiple of 4 KB apart (a 1x1
/// convolution or matrix product whose reduction is 1024, 2048, ...
/// channels: a transformer's feed-forward output, ResNet-50's 1024-channel
/// layers) all map to one set of the L1 cache (64 sets on the x86-64 and
/// AArch64 cores Kiln targets), and MR = 8 or 12 rows in a set of 8 ways evict
/// each other on every k step: a 128x1024x256 product ran at 77-86 GFLOP/s
/// against 107-113 for a reduction of 1008. Such tiles copy every third row,
/// a chunk of kCopyChunk channels at a time, into a stack buffer whose rows
/// fall into other sets; the rows left in place (8 of 12, 6 of 8) fit the
/// set's ways. Copying
/// every row cost more than it saved (102 GFLOP/s; every third: 110): the
/// copy reads its rows from L2 again for every weight panel.
constexpr kiln_i64 kL1Sets = 64, kL1LineFloats = 16;
constexpr kiln_i64 kCopyChunk = 256, kCopyStride = kCopyChunk + kL1LineFloats;
/// Whether MR rows `floats` apart crowd one L1 set (see above).
INLINE bool rowsAlias(kiln_i64 floats) {
  if (floats % kL1LineFloats)
    return false;
  kiln_i64 step = (floats / kL1LineFloats) % kL1Sets;
  kiln_i64 sets = step == 0 ? 1 : kL1Sets / (step & -step);
  return (MR + sets - 1) / sets > 6;
}
INLINE bool tileRowsAlias(const ConvParams &q, kiln_i64 ldi) { return rowsAlias(ldi * q.sw); }
/// to[0, n) = from[0, n): whole vectors, then the tail.
INLINE void copyFloats(float *to, const float *from, kiln_i64 n) {
  kiln_i64 c = 0;
  for (; c + KILN_VEC <= n; c += KILN_VEC)
    storev(to + c, loadv(from + c));
  for (; c < n; ++c)
    to[c] = from[c];
}

/// Output pixels [m0, m0 + rows) of image `n`, group `g`, output-channel
/// panel `p`. The K loop walks window positions; for each, every row of the
/// tile points at its input pixel's channels, or at zeros when the window
/// position falls in the padding.
/// R rows per tile: MR, or fewer for the last pixels of a block (a matrix
/// product of one row, as in an LSTM step, would otherwise compute MR).
/// `col`: the tile's first column within the panel (0, or KILN_PANEL / 2
/// for the second of two tiles of TNV vectors).
template <int R, int W, bool WindowRows = false, bool Prefetch = false, bool CopyRows = false>
INLINE void convTile(const ConvParams &q, const float *in, const float *w, const float *bias,
                     const float *res, float *out, float lo, float hi, kiln_i64 ldi, kiln_i64 ldo,
                     kiln_i64 n, kiln_i64 g, kiln_i64 p, kiln_i64 m0, int rows, kiln_i64 col) {
  kiln_i64 cg = q.c / q.groups, fg = q.oc / q.groups;
  kiln_i64 panels = (fg + KILN_PANEL - 1) / KILN_PANEL;
  kiln_i64 m = q.oh * q.ow;
  // Pixel coordinates by stepping, not dividing: with few input channels
  // (pointwise convs of narrow layers) MR divisions cost as much as the tile.
  kiln_i64 ih0[R], iw0[R];
  kiln_i64 oy = m0 / q.ow, ox = m0 % q.ow;
  for (int i = 0; i < R; ++i) {
    ih0[i] = oy * q.sh - q.ph;
    iw0[i] = ox * q.sw - q.pw;
    if (i + 1 < rows && ++ox == q.ow) {
      ox = 0;
      ++oy;
    }
  }
  const float *image = in + n * q.h * q.w * ldi + g * cg;
  const float *panel = w + (g * panels + p) * q.kh * q.kw * cg * KILN_PANEL + col;
  const float *bp = bias + (g * panels + p) * KILN_PANEL + col;

  // The output lines are read for ownership while the tile computes: a
  // store into lines not in the cache stalls when the tile ends.
  {
    kiln_i64 col0 = g * fg + p * KILN_PANEL + col;
    for (int i = 0; i < R; ++i) {
      kiln_i64 pixel = n * q.oh * q.ow + m0 + (i < rows ? i : 0);
      for (int v = 0; v < W; ++v)
        __builtin_prefetch(out + pixel * ldo + col0 + v * KILN_VEC, 1, 3);
    }
  }
  vf acc[R][W];
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < W; ++v)
      acc[i][v] = splat(0);
  ChunkedSum<R, W> sum;

  for (kiln_i64 ky = 0; ky < q.kh; ++ky) {
    if constexpr (WindowRows) {
      // convWindowRows said every row's window row lies inside the image.
      const float *a[R];
      for (int i = 0; i < R; ++i) {
        kiln_i64 y = ih0[i] + ky * q.dh;
        a[i] = y >= 0 && y < q.h ? image + (y * q.w + iw0[i]) * ldi : kZeros;
      }
      accumulate(acc, a, panel + ky * q.kw * cg * KILN_PANEL, q.kw * cg);
      // A chunk per window row: the rows are short (kw*cg < kw*KILN_VEC
      // products), but this is an RGB stem, whose error reaches every later
      // layer (fcn_resnet50's logits: 4-6 of 1M elements beyond the
      // tolerance of ONNX Runtime's, against 89 with chunks of 128).
      chunkDone(sum, acc, kSumChunk);
      continue;
    }
    for (kiln_i64 kx = 0; kx < q.kw; ++kx) {
      const float *kpanel = panel + (ky * q.kw + kx) * cg * KILN_PANEL;
      // A window position that reads only padding for every row of the
      // tile adds nothing: its products are skipped (the chunks still end
      // where they would, so every sum is the one it was). A dilated
      // convolution on a small map (DeepLab's ASPP, dilations 12 to 36 on
      // 14x14 or less) has such positions for most tiles; with static
      // shapes kiln.conv's canonicalization drops those that read padding
      // everywhere, but an image size known only at run time leaves that
      // to here.
      bool anyInside = false;
      for (int i = 0; i < R; ++i) {
        kiln_i64 y = ih0[i] + ky * q.dh, x = iw0[i] + kx * q.dw;
        anyInside |= y >= 0 && y < q.h && x >= 0 && x < q.w;
      }
      // Channel chunks keep the zero rows within kZeros.
      for (kiln_i64 c0 = 0; c0 < cg; c0 += kZeroFloats) {
        kiln_i64 k = cg - c0 < kZeroFloats ? cg - c0 : kZeroFloats;
        if (!anyInside) {
          chunkDone(sum, acc, k);
          continue;
        }
        const float *a[R];
        for (int i = 0; i < R; ++i) {
          kiln_i64 y = ih0[i] + ky * q.dh, x = iw0[i] + kx * q.dw;
          bool inside = y >= 0 && y < q.h && x >= 0 && x < q.w;
          a[i] = inside ? image + (y * q.w + x) * ldi + c0 : kZeros;
        }
        // With Prefetch: the same rows of the next panel.
        const float *next = kpanel + (q.kh * q.kw * cg + c0) * KILN_PANEL;
        if constexpr (CopyRows) {
          alignas(64) float copy[(R / 3 + 1) * kCopyStride];
          const float *rowsAt[R];
          for (kiln_i64 c1 = 0; c1 < k; c1 += kCopyChunk) {
            kiln_i64 kc = k - c1 < kCopyChunk ? k - c1 : kCopyChunk;
            for (int i = 0; i < R; ++i) {
              if (i % 3 != 2) {
                rowsAt[i] = a[i] + c1;
                continue;
              }
              rowsAt[i] = copy + i / 3 * kCopyStride;
              copyFloats(copy + i / 3 * kCopyStride, a[i] + c1, kc);
            }
            accumulate<R, W, Prefetch>(acc, rowsAt, kpanel + (c0 + c1) * KILN_PANEL, kc,
                                       next + c1 * KILN_PANEL);
          }
        } else {
          accumulate<R, W, Prefetch>(acc, a, kpanel + c0 * KILN_PANEL, k, next);
        }
        // A chunk ends with a window position, not inside one: flushing
        // every kSumChunk channels here (or per copied chunk above) made
        // LLVM allocate the whole tile function's registers worse (the RGB
        // stem, which never runs this path, 20-30 % slower).
        chunkDone(sum, acc, k);
      }
    }
  }

  chunksFinish(sum, acc, bp);

  kiln_i64 col0 = g * fg + p * KILN_PANEL + col;
  kiln_i64 cols = (fg - p * KILN_PANEL < KILN_PANEL ? fg - p * KILN_PANEL : KILN_PANEL) - col;
  float *o[R];
  const float *r[R];
  for (int i = 0; i < R; ++i) {
    kiln_i64 pixel = n * m + m0 + (i < rows ? i : 0);
    o[i] = out + pixel * ldo + col0;
    r[i] = res ? res + pixel * q.oc + col0 : nullptr;
  }
  storeTile(acc, o, r, rows, cols, (q.flags & kHasResidual) != 0, lo, hi);
  // The compiler fuses GELU only into convolutions without a clamp, so
  // applying it after storeTile's clamp is the same order as the op's.
  if (q.flags & kGelu)
    geluTile(o, rows, cols);
}

/// convTile for a pointwise convolution with unit strides and no padding: a
/// matrix product whose rows are the pixels, so the tile's input rows are
/// `ldi` floats apart and there are no window positions, zero rows or channel
/// chunks to set up. convTile's general set-up and epilogue, with their
/// spills, cost several hundred cycles per 12x32 tile on AVX-512 (then 12 rows): a hot
/// 48x256x32 product ran at 107 GFLOP/s (111.9 this way), and encoder4's
/// 256-deep projections at 101 against ONNX Runtime's 111.
template <int R, int W, bool Prefetch = false>
INLINE void pointwiseTile(const ConvParams &q, const float *in, const float *w, const float *bias,
                          const float *res, float *out, float lo, float hi, kiln_i64 ldi,
                          kiln_i64 ldo, kiln_i64 n, kiln_i64 g, kiln_i64 p, kiln_i64 m0,
                          int rows, kiln_i64 col, kiln_i64 kBegin = 0, kiln_i64 kEnd = -1,
                          float *partial = nullptr) {
  kiln_i64 cg = q.c / q.groups, fg = q.oc / q.groups;
  if (kEnd < 0)
    kEnd = cg;
  kiln_i64 panels = (fg + KILN_PANEL - 1) / KILN_PANEL;
  kiln_i64 pixel0 = n * q.oh * q.ow + m0;
  kiln_i64 col0 = g * fg + p * KILN_PANEL + col;
  const float *panel = w + (g * panels + p) * cg * KILN_PANEL + col;
  const float *bp = bias + (g * panels + p) * KILN_PANEL + col;
  const float *a[R];
  float *o[R];
  const float *r[R];
  for (int i = 0; i < R; ++i) {
    kiln_i64 pixel = pixel0 + (i < rows ? i : 0);
    a[i] = in + pixel * ldi + g * cg;
    o[i] = out + pixel * ldo + col0;
    r[i] = res ? res + pixel * q.oc + col0 : nullptr;
    for (int v = 0; v < W; ++v)
      __builtin_prefetch(o[i] + v * KILN_VEC, 1, 3);
  }
  vf acc[R][W];
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < W; ++v)
      acc[i][v] = splat(0);
  ChunkedSum<R, W> sum;
  if (kBegin > 0) { // the running totals of the channels before kBegin
#pragma clang loop unroll(full)
    for (int i = 0; i < R; ++i)
#pragma clang loop unroll(full)
      for (int v = 0; v < W; ++v)
        sum.total[i][v] = loadv(partial + (i * W + v) * KILN_VEC);
    sum.flushed = true;
  }
  for (kiln_i64 c0 = kBegin; c0 < kEnd; c0 += kSumChunk) {
    kiln_i64 e = kEnd - c0 < kSumChunk ? kEnd : c0 + kSumChunk;
    accumulateFrom<R, W, Prefetch>(acc, a, panel, c0, e, panel + cg * KILN_PANEL);
    chunkDone(sum, acc, e - c0);
  }
  if (kEnd < cg) { // whole chunks so far: all in the totals, acc is zero
#pragma clang loop unroll(full)
    for (int i = 0; i < R; ++i)
#pragma clang loop unroll(full)
      for (int v = 0; v < W; ++v)
        storev(partial + (i * W + v) * KILN_VEC, sum.total[i][v]);
    return;
  }
  chunksFinish(sum, acc, bp);
  kiln_i64 cols = (fg - p * KILN_PANEL < KILN_PANEL ? fg - p * KILN_PANEL : KILN_PANEL) - col;
  storeTile(acc, o, r, rows, cols, (q.flags & kHasResidual) != 0, lo, hi);
  if (q.flags & kGelu)
    geluTile(o, rows, cols);
}

/// A pointwise convolution's block of at most kStreamedRows output rows (a
/// matrix-vector product: a decoder's projections at one token per
/// sequence, a squeeze-excitation layer, an encoder over a few tokens) over
/// one panel, full panel width,
/// reading the panel's rows as kRowStreams ranges of the reduction at once.
/// Such a product reads each weight from memory for one FMA per row, so it
/// runs at the rate one core reads memory, and a core reads several
/// sequential streams faster than one: on a Zen 3 (one core, 113 MB) 12.5
/// GB/s with one stream, 17 with two, 18.4 with four (the hardware
/// prefetcher follows each). Walking the panel from its first row to its
/// last (pointwiseTile, in two half-width passes on AVX2) ran a d = 768
/// decoder's step at 7-10 GB/s. The ranges add into the same accumulators:
/// the same products in another order, still summed in chunks of
/// kSumChunk. Rows past `rows` repeat the first (as pointwiseTile's) and
/// are not stored.
constexpr int kRowStreams = 4;
/// Blocks of at most this many rows take pointwiseRowStreams, in register
/// tiles of kStreamTileRows rows: AVX2's 16 ymm hold 2 x 4 accumulators
/// beside a panel row and a broadcast, AVX-512's 32 zmm 4 x 2, NEON's 32 q
/// 2 x 8. Eight, not four: a BERT-style encoder at 7 tokens (d = 256, one
/// thread, Zen 3) ran in 0.74 ms this way against 0.94-1.10 ms with its
/// 7-row products in MR-row tiles over half panels (kiln-run --bench 200,
/// the two runtime libraries alternating); those read each weight from
/// memory for as few FMAs, twice per panel.
constexpr kiln_i64 kStreamedRows = 8;
constexpr int kStreamTileRows = TNV < NV ? 2 : (16 / NV >= 4 ? 4 : (16 / NV > 0 ? 16 / NV : 1));

/// acc += rows [k0, k0 + steps) of each of the S ranges (`len` rows apart)
/// times the tile's inputs.
template <int R, int W, int S>
INLINE void accumulateStreams(vf (&acc)[R][W], const float *const (&a)[R], const float *panel,
                              kiln_i64 len, kiln_i64 k0, kiln_i64 steps) {
  for (kiln_i64 c = k0; c < k0 + steps; ++c) {
#pragma clang loop unroll(full)
    for (int s = 0; s < S; ++s) {
      kiln_i64 k = s * len + c;
      vf bv[W];
#pragma clang loop unroll(full)
      for (int v = 0; v < W; ++v)
        bv[v] = loadv(panel + k * KILN_PANEL + v * KILN_VEC);
#pragma clang loop unroll(full)
      for (int i = 0; i < R; ++i) {
        vf x = splat(a[i][k]);
#pragma clang loop unroll(full)
        for (int v = 0; v < W; ++v)
          acc[i][v] += x * bv[v];
      }
    }
  }
}

/// The block's rows go in register tiles of R; with more than one tile
/// (AVX2's two tiles of 2 for 4 rows), each chunk of kSumChunk products is
/// taken by every tile in turn, so that the later tiles read the chunk's
/// panel rows (16 KB) from L1 rather than the whole panel again (a 3072-deep
/// panel, 393 KB, from L2 or memory): a chunk ends in a flush of the
/// accumulators into the tile's running total (chunkDone), so the tiles
/// only share registers, and each output is the same sum in the same order
/// as with one tile. (Measured on the d = 768 decoder at batch 4, Zen 3:
/// 9.0-9.7 ms a step against 9.7-10.6 with the tiles one after the other;
/// within this machine's noise.)
template <int R, int W>
INLINE void pointwiseRowStreams(const ConvParams &q, const float *in, const float *w,
                                const float *bias, const float *res, float *out, float lo,
                                float hi, kiln_i64 ldi, kiln_i64 ldo, kiln_i64 n, kiln_i64 g,
                                kiln_i64 p, kiln_i64 m0, int rows) {
  constexpr int S = kRowStreams;
  constexpr kiln_i64 kStepsPerChunk = kSumChunk / S;
  static_assert(kSumChunk % S == 0, "a chunk's steps must end where a chunk ends");
  constexpr int kMaxTiles = (int)((kStreamedRows + R - 1) / R);
  kiln_i64 cg = q.c / q.groups, fg = q.oc / q.groups;
  kiln_i64 panels = (fg + KILN_PANEL - 1) / KILN_PANEL;
  kiln_i64 col0 = g * fg + p * KILN_PANEL;
  const float *panel = w + (g * panels + p) * cg * KILN_PANEL;
  int tiles = (rows + R - 1) / R;
  const float *a[kMaxTiles][R];
  for (int t = 0; t < tiles; ++t)
#pragma clang loop unroll(full)
    for (int i = 0; i < R; ++i) {
      int row = t * R + i < rows ? t * R + i : t * R;
      a[t][i] = in + (n * q.oh * q.ow + m0 + row) * ldi + g * cg;
    }
  vf acc[R][W];
#pragma clang loop unroll(full)
  for (int i = 0; i < R; ++i)
#pragma clang loop unroll(full)
    for (int v = 0; v < W; ++v)
      acc[i][v] = splat(0);
  ChunkedSum<R, W> sums[kMaxTiles];
  kiln_i64 len = cg / S; // each range's rows; the last cg % S rows follow
  kiln_i64 whole = len / kStepsPerChunk * kStepsPerChunk;
  // Whole chunks, every tile in turn (each chunkDone flushes acc to zero).
  for (kiln_i64 c0 = 0; c0 < whole; c0 += kStepsPerChunk)
    for (int t = 0; t < tiles; ++t) {
      accumulateStreams<R, W, S>(acc, a[t], panel, len, c0, kStepsPerChunk);
      chunkDone(sums[t], acc, kStepsPerChunk * S);
    }
  // Each tile's last, partial chunk and the rows after the ranges, then
  // its epilogue.
  kiln_i64 cols = fg - p * KILN_PANEL < KILN_PANEL ? fg - p * KILN_PANEL : KILN_PANEL;
  for (int t = 0; t < tiles; ++t) {
    accumulateStreams<R, W, S>(acc, a[t], panel, len, whole, len - whole);
    accumulateFrom<R, W>(acc, a[t], panel, S * len, cg);
    chunkDone(sums[t], acc, (len - whole) * S + (cg - S * len));
    chunksFinish(sums[t], acc, bias + (g * panels + p) * KILN_PANEL);
    int tileRows = rows - t * R < R ? rows - t * R : R;
    float *o[R];
    const float *r[R];
#pragma clang loop unroll(full)
    for (int i = 0; i < R; ++i) {
      kiln_i64 pixel = n * q.oh * q.ow + m0 + t * R + (i < tileRows ? i : 0);
      o[i] = out + pixel * ldo + col0;
      r[i] = res ? res + pixel * q.oc + col0 : nullptr;
    }
    storeTile(acc, o, r, tileRows, cols, (q.flags & kHasResidual) != 0, lo, hi);
    if (q.flags & kGelu)
      geluTile(o, tileRows, cols);
#pragma clang loop unroll(full)
    for (int i = 0; i < R; ++i)
#pragma clang loop unroll(full)
      for (int v = 0; v < W; ++v)
        acc[i][v] = splat(0);
  }
}

/// The work items of a convolution: (image, block of pixels, group, panel)
/// in one nesting or the other (kiln_conv2d_pixel_major in kiln/kernels.h
/// says which, and why), blocks of kPixelBlock pixels; a tuned layer's
/// flags may choose the order and halve or double the blocks
/// (kiln_conv2d_schedule_of).
constexpr kiln_i64 kPixelBlock = KILN_CONV_PIXEL_BLOCK;

typedef kiln_conv2d_schedule ConvSchedule;

/// One past the last pixel of block b.
INLINE kiln_i64 pixelBlockEnd(const ConvSchedule &s, kiln_i64 b, kiln_i64 m) {
  return b + 1 == s.blocks ? m : (b + 1) * s.block_rows;
}

template <int N> struct Rows {
  static constexpr int value = N;
};

/// Calls tile(Rows<R>) with the register-tile height for `rows` valid rows:
/// 1 for a single row (a matrix product of one row, as in an LSTM step:
/// 3x faster than a full tile), 4 for 2-4 rows (48-pixel blocks of 56x56,
/// 28x28 and 14x14 maps and of 64-row matrix products end in 4 rows: a
/// full tile wasted 11 % of a 64x1024x4096 product), else MR. With MR = 8
/// (AVX-512), 5, 6 and 7 rows get tiles of their own height (kExactRows):
/// on a core with one 512-bit FMA a cycle, 10 to 14 accumulators keep it as
/// busy as 16, so such a tile costs its rows, where an 8-row one computed
/// 1-3 rows for nothing (an encoder's products of 37 rows went 8 x 4 + 5:
/// 40 rows' work).
constexpr bool kExactRows = MR == 8;
template <typename Tile> INLINE void forTileRows(int rows, Tile &&tile) {
  if (rows == 1 && MR > 1)
    tile(Rows<1>());
  else if (rows <= 4 && MR > 4)
    tile(Rows<(MR > 4 ? 4 : MR)>());
  else if (kExactRows && rows == 5)
    tile(Rows<(kExactRows ? 5 : MR)>());
  else if (kExactRows && rows == 6)
    tile(Rows<(kExactRows ? 6 : MR)>());
  else if (kExactRows && rows == 7)
    tile(Rows<(kExactRows ? 7 : MR)>());
  else if (rows <= 8 && MR > 8)
    tile(Rows<(MR > 8 ? 8 : MR)>());
  else
    tile(Rows<MR>());
}

/// Rows of the next register tile when `left` rows of a block remain: MR,
/// except that with MR = 12 (no variant's since AVX-512 took 8) 16 rows go
/// as 8 + 8 (the 16-row blocks that end 64-row matrix products and 28x28
/// maps), not 12 + 4: four rows keep only 8 of the 32 vector registers busy
/// with accumulators. On AVX2 (MR = 6), 7 rows go as
/// 4 + 3 and 8 as 4 + 4, not 6 + 1 and 6 + 2: a tile of one row has 2
/// accumulators, so its FMAs wait on each other's latency (4 cycles a step
/// for 2 FMAs, where 6 rows take 6 for 12), and two rows take a 4-row
/// tile anyway. An encoder's products of 37 rows (6 x 6 + 1) went 67 -> 69
/// GFLOP/s, 13 rows 54 -> 56, 128 rows (ending in 6 + 2) 73 -> 75 (Zen 3,
/// one thread, the two kernels alternating). With exact heights (kExactRows)
/// the rows split into tiles of 4 to 8 with nothing left over wherever
/// there are at least 4: 9 to 11 rows as (5 to 7) + 4, so that no tile of
/// 1 to 3 rows is left (49 pixels of a 7x7 map: 8 x 5 + 5 + 4, not
/// 8 x 6 + 1).
INLINE int nextTileRows(kiln_i64 left) {
  if (MR > 8 && left == MR + 4)
    return 8;
  if (MR == 6 && (left == 7 || left == 8))
    return 4;
  if (kExactRows && left > MR && left < MR + 4)
    return (int)(left - 4);
  return left < MR ? (int)left : MR;
}

/// Whether the tile of pixels [m0, m0 + rows) can take convTile's
/// window-row path. With few input channels (an RGB stem: 7x7 taps of 3
/// channels), a dense NHWC input and no dilation along x, the kw taps of one
/// window row are kw*cg contiguous floats and the weights of one ky are
/// [kx][c] in the same order, so the row is one reduction of length kw*cg
/// instead of kw reductions of cg, each with its own pointer set-up and
/// bounds tests (ResNet's stem ran at 87 GFLOP/s against ~195 for its other
/// convolutions). Every pixel's window row must lie inside the image (rows
/// above or below it read zeros). Chosen per tile here rather than tested
/// inside convTile: a second accumulate in the one tile function made its
/// accumulators spill, and every convolution ran 2.5x slower.
INLINE bool convWindowRows(const ConvParams &q, kiln_i64 ldi, kiln_i64 m0, int rows) {
  kiln_i64 cg = q.c / q.groups;
  if (q.kw == 1 || q.dw != 1 || ldi != cg || cg >= KILN_VEC || q.kw * cg > kZeroFloats)
    return false;
  kiln_i64 ox = m0 % q.ow;
  for (int i = 0; i < rows; ++i) {
    kiln_i64 x = ox * q.sw - q.pw;
    if (x < 0 || x + q.kw > q.w)
      return false;
    if (++ox == q.ow)
      ox = 0;
  }
  return true;
}

struct ConvJob {
  const ConvParams *q;
  const float *in, *w, *bias, *res;
  float *out;
  float lo, hi;
  kiln_i64 ldi, ldo;
};

} // namespace

#endif
