// Kiln's CPU microkernels: convolution (direct, "indirect GEMM" style),
// depthwise convolution, matrix product with a run-time right operand,
// fused attention, and NHWC pooling.
//
// Why hand-written kernels and not MLIR vector codegen: the register tile
// must keep MR x NV vector accumulators live across the whole reduction,
// with the A operand broadcast from memory straight into the FMA. Written
// here with clang's generic vector types, LLVM produces exactly that loop
// (24 zmm accumulators on AVX-512, 12 ymm on AVX2), and the same source
// serves x86-64 and AArch64. This file is compiled at build time once per
// target variant into an object of the runtime, its entry points suffixed
// with the variant's name, and generated code calls the variant its target
// can run (see CMakeLists.txt); only x86-64 targets older than x86-64-v3
// link the AVX2 variant's bitcode into the module. It is freestanding: no
// headers, no libc, no allocation: scratch lives on the stack.
//
// The unit tests compile this same file natively and compare every entry
// point with plain reference loops.
//
// Pointers arrive as integers (`kiln_addr`): the generated MLIR passes
// `memref.extract_aligned_pointer_as_index` values, which become i64.
//
// Threads: each kernel splits its outer tiles with the runtime's
// kiln_parallel_for (runtime/include/kiln/runtime.h), the only symbol this
// file needs from outside; small calls stay on the calling thread.

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

/// acc[i][v] += sum over the `count` rows a[i][0..k) times the packed panel b.
/// One call covers one window position of a convolution (k input channels).
/// W vectors of the panel are used: NV, or NV / 2 for a panel whose valid
/// columns fit in its first half (a 16- or 48-channel layer would otherwise
/// spend half the FMAs of its last panel on zero padding). With Prefetch,
/// each step also prefetches the step's panel row at `next`.
template <int R, int W, bool Prefetch = false>
INLINE void accumulate(vf (&acc)[R][W], const float *const (&a)[R], const float *b,
                       kiln_i64 k, const float *next = nullptr) {
  for (kiln_i64 c = 0; c < k; ++c) {
    if constexpr (Prefetch) {
      __builtin_prefetch(next + c * KILN_PANEL);
      __builtin_prefetch(next + c * KILN_PANEL + 16);
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

/// Epilogue of one register tile: bias (already in acc), residual, clamp,
/// and a store of the `rows` x `cols` valid part.
template <int R, int W>
INLINE void storeTile(vf (&acc)[R][W], float *const (&out)[R], const float *const (&res)[R],
                      int rows, kiln_i64 cols, bool hasResidual, float lo, float hi) {
  vf vlo = splat(lo), vhi = splat(hi);
  bool bounded = hasBounds(lo, hi);
  for (int i = 0; i < rows; ++i) {
    for (int v = 0; v < W; ++v) {
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
/// AArch64 cores Kiln targets), and MR = 12 rows in a set of 8 ways evict
/// each other on every k step: a 128x1024x256 product ran at 77-86 GFLOP/s
/// against 107-113 for a reduction of 1008. Such tiles copy every third row,
/// a chunk of kCopyChunk channels at a time, into a stack buffer whose rows
/// fall into other sets; the 8 rows left in place fit the set's ways. Copying
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
template <int R, int W, bool WindowRows = false, bool Prefetch = false, bool CopyRows = false>
INLINE void convTile(const ConvParams &q, const float *in, const float *w, const float *bias,
                     const float *res, float *out, float lo, float hi, kiln_i64 ldi, kiln_i64 ldo,
                     kiln_i64 n, kiln_i64 g, kiln_i64 p, kiln_i64 m0, int rows) {
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
  const float *panel = w + (g * panels + p) * q.kh * q.kw * cg * KILN_PANEL;
  const float *bp = bias + (g * panels + p) * KILN_PANEL;

  // The output lines are read for ownership while the tile computes: a
  // store into lines not in the cache stalls when the tile ends.
  {
    kiln_i64 col0 = g * fg + p * KILN_PANEL;
    for (int i = 0; i < R; ++i) {
      kiln_i64 pixel = n * q.oh * q.ow + m0 + (i < rows ? i : 0);
      for (int v = 0; v < W; ++v)
        __builtin_prefetch(out + pixel * ldo + col0 + v * KILN_VEC, 1, 3);
    }
  }
  vf acc[R][W];
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < W; ++v)
      acc[i][v] = loadv(bp + v * KILN_VEC);

  for (kiln_i64 ky = 0; ky < q.kh; ++ky) {
    if constexpr (WindowRows) {
      // convWindowRows said every row's window row lies inside the image.
      const float *a[R];
      for (int i = 0; i < R; ++i) {
        kiln_i64 y = ih0[i] + ky * q.dh;
        a[i] = y >= 0 && y < q.h ? image + (y * q.w + iw0[i]) * ldi : kZeros;
      }
      accumulate(acc, a, panel + ky * q.kw * cg * KILN_PANEL, q.kw * cg);
      continue;
    }
    for (kiln_i64 kx = 0; kx < q.kw; ++kx) {
      const float *kpanel = panel + (ky * q.kw + kx) * cg * KILN_PANEL;
      // Channel chunks keep the zero rows within kZeros.
      for (kiln_i64 c0 = 0; c0 < cg; c0 += kZeroFloats) {
        kiln_i64 k = cg - c0 < kZeroFloats ? cg - c0 : kZeroFloats;
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
      }
    }
  }

  kiln_i64 col0 = g * fg + p * KILN_PANEL;
  kiln_i64 cols = fg - p * KILN_PANEL < KILN_PANEL ? fg - p * KILN_PANEL : KILN_PANEL;
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
/// spills, cost several hundred cycles per 12x32 tile on AVX-512: a hot
/// 48x256x32 product ran at 107 GFLOP/s (111.9 this way), and encoder4's
/// 256-deep projections at 101 against ONNX Runtime's 111.
template <int R, int W, bool Prefetch = false>
INLINE void pointwiseTile(const ConvParams &q, const float *in, const float *w, const float *bias,
                          const float *res, float *out, float lo, float hi, kiln_i64 ldi,
                          kiln_i64 ldo, kiln_i64 n, kiln_i64 g, kiln_i64 p, kiln_i64 m0,
                          int rows) {
  kiln_i64 cg = q.c / q.groups, fg = q.oc / q.groups;
  kiln_i64 panels = (fg + KILN_PANEL - 1) / KILN_PANEL;
  kiln_i64 pixel0 = n * q.oh * q.ow + m0;
  kiln_i64 col0 = g * fg + p * KILN_PANEL;
  const float *panel = w + (g * panels + p) * cg * KILN_PANEL;
  const float *bp = bias + (g * panels + p) * KILN_PANEL;
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
      acc[i][v] = loadv(bp + v * KILN_VEC);
  accumulate<R, W, Prefetch>(acc, a, panel, cg, panel + cg * KILN_PANEL);
  kiln_i64 cols = fg - p * KILN_PANEL < KILN_PANEL ? fg - p * KILN_PANEL : KILN_PANEL;
  storeTile(acc, o, r, rows, cols, (q.flags & kHasResidual) != 0, lo, hi);
  if (q.flags & kGelu)
    geluTile(o, rows, cols);
}

/// The work items of a convolution: (image, block of kPixelBlock output
/// pixels, group, panel), in that nesting, when there are many pixel blocks:
/// a thread's contiguous range is then a range of pixels, the same pixels
/// (rows) that the runtime's static split gives it in the layers before and
/// after, so activations stay in its cache (MobileNet-v2 at two threads: 6.7
/// -> 5.8 ms), and a block's input stays in L1 across panels. With few
/// blocks (late layers: 7x7 = 48 + 1 pixels) pixels cannot be split evenly,
/// and with large weights (a 3x3 conv to 256 channels: 590 KB) every pixel
/// block would stream all of them from L3; then the items nest (image,
/// group, panel, block) instead: one panel's weights stay in L2 while the
/// pixels stream past, and threads split the panels.
constexpr kiln_i64 kMinPixelMajorBlocks = 8;
constexpr kiln_i64 kMaxPixelMajorWeightBytes = 128 << 10;
constexpr kiln_i64 kPixelBlock = 48; // a multiple of every variant's MR

template <int N> struct Rows {
  static constexpr int value = N;
};

/// Calls tile(Rows<R>) with the register-tile height for `rows` valid rows:
/// 1 for a single row (a matrix product of one row, as in an LSTM step:
/// 3x faster than a full tile), 4 for 2-4 rows (48-pixel blocks of 56x56,
/// 28x28 and 14x14 maps and of 64-row matrix products end in 4 rows: a
/// full tile wasted 11 % of a 64x1024x4096 product), else MR. Each height
/// is another copy of the tile code in every module, so there are three.
template <typename Tile> INLINE void forTileRows(int rows, Tile &&tile) {
  if (rows == 1 && MR > 1)
    tile(Rows<1>());
  else if (rows <= 4 && MR > 4)
    tile(Rows<(MR > 4 ? 4 : MR)>());
  else if (rows <= 8 && MR > 8)
    tile(Rows<(MR > 8 ? 8 : MR)>());
  else
    tile(Rows<MR>());
}

/// Rows of the next register tile when `left` rows of a block remain: MR,
/// except that 16 rows go as 8 + 8 (the 16-row blocks that end 64-row matrix
/// products and 28x28 maps), not 12 + 4: four rows keep only 8 of the 32
/// vector registers busy with accumulators.
INLINE int nextTileRows(kiln_i64 left) {
  if (MR > 8 && left == MR + 4)
    return 8;
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

void convTask(void *ctx, kiln_i64 begin, kiln_i64 end) {
  const ConvJob &j = *(const ConvJob *)ctx;
  const ConvParams &q = *j.q;
  kiln_i64 fg = q.oc / q.groups;
  kiln_i64 panels = (fg + KILN_PANEL - 1) / KILN_PANEL;
  kiln_i64 m = q.oh * q.ow;
  kiln_i64 blocks = (m + kPixelBlock - 1) / kPixelBlock;
  kiln_i64 weightBytes = q.groups * panels * KILN_PANEL * q.kh * q.kw * (q.c / q.groups) * 4;
  bool pixelMajor = blocks >= kMinPixelMajorBlocks && weightBytes <= kMaxPixelMajorWeightBytes;
  bool copyRows = tileRowsAlias(q, j.ldi);
  bool pointwise = q.kh == 1 && q.kw == 1 && q.sh == 1 && q.sw == 1 && q.ph == 0 && q.pw == 0;
  for (kiln_i64 item = begin; item < end; ++item) {
    kiln_i64 p, g, b, n;
    if (pixelMajor) {
      p = item % panels;
      kiln_i64 rest = item / panels;
      g = rest % q.groups;
      rest /= q.groups;
      b = rest % blocks;
      n = rest / blocks;
    } else {
      b = item % blocks;
      kiln_i64 rest = item / blocks;
      p = rest % panels;
      rest /= panels;
      g = rest % q.groups;
      n = rest / q.groups;
    }
    kiln_i64 stop = (b + 1) * kPixelBlock < m ? (b + 1) * kPixelBlock : m;
    bool half = fg - p * KILN_PANEL <= KILN_PANEL / 2;
    int rows;
    for (kiln_i64 m0 = b * kPixelBlock; m0 < stop; m0 += rows) {
      rows = nextTileRows(stop - m0);
      auto tile = [&](auto rowsTag) {
        constexpr int R = decltype(rowsTag)::value;
        if constexpr (R == MR) {
          // The first tile of a panel's first block fetches the next panel
          // into the cache while it works: panel-major items of a large
          // matrix product stream each panel from memory once.
          bool prefetch =
              !pixelMajor && !half && b == 0 && m0 == 0 && p + 1 < panels && q.kh * q.kw == 1;
          if (pointwise && !copyRows && !half) {
            if (prefetch)
              pointwiseTile<R, NV, true>(q, j.in, j.w, j.bias, j.res, j.out, j.lo, j.hi, j.ldi,
                                         j.ldo, n, g, p, m0, rows);
            else
              pointwiseTile<R, NV>(q, j.in, j.w, j.bias, j.res, j.out, j.lo, j.hi, j.ldi, j.ldo,
                                   n, g, p, m0, rows);
            return;
          }
          if (copyRows && !half) {
            if (prefetch)
              convTile<R, NV, false, true, true>(q, j.in, j.w, j.bias, j.res, j.out, j.lo, j.hi,
                                                 j.ldi, j.ldo, n, g, p, m0, rows);
            else
              convTile<R, NV, false, false, true>(q, j.in, j.w, j.bias, j.res, j.out, j.lo, j.hi,
                                                  j.ldi, j.ldo, n, g, p, m0, rows);
            return;
          }
          if (prefetch) {
            convTile<R, NV, false, true>(q, j.in, j.w, j.bias, j.res, j.out, j.lo, j.hi, j.ldi,
                                         j.ldo, n, g, p, m0, rows);
            return;
          }
          if (!half && convWindowRows(q, j.ldi, m0, rows)) {
            convTile<R, NV, true>(q, j.in, j.w, j.bias, j.res, j.out, j.lo, j.hi, j.ldi, j.ldo,
                                  n, g, p, m0, rows);
            return;
          }
        }
        if (half)
          convTile<R, NV / 2>(q, j.in, j.w, j.bias, j.res, j.out, j.lo, j.hi, j.ldi, j.ldo, n,
                              g, p, m0, rows);
        else
          convTile<R, NV>(q, j.in, j.w, j.bias, j.res, j.out, j.lo, j.hi, j.ldi, j.ldo, n, g, p,
                          m0, rows);
      };
      forTileRows(rows, tile);
    }
  }
}

struct PoolJob {
  const PoolParams *q;
  const float *in;
  float *out;
  kiln_i64 ldi, ldo;
};

struct MatMulJob {
  const kiln_matmul_params *q;
  const float *a, *b;
  float *c;
};

/// Items: (batch, column panel, block of kMatMulRows rows). Each packs its
/// own copy of the panel's B blocks: K x 32 loads against K x 32 x 192 FMAs.
constexpr kiln_i64 kMatMulRows = 4 * kPixelBlock;

constexpr kiln_i64 KC = 256; // K block of the matrix products

/// C[m0, mStop) x [n0, n0 + cols) = A x B over K for one column panel
/// (cols <= KILN_PANEL), B packed KC rows at a time into `packed`.
template <bool CopyRows = false>
INLINE void matmulPanel(const float *A, kiln_i64 lda, const float *B, kiln_i64 ldb, bool transB,
                        float *C, kiln_i64 ldc, kiln_i64 m0Begin, kiln_i64 mStop, kiln_i64 n0,
                        kiln_i64 cols, kiln_i64 K, float *packed) {
  for (kiln_i64 k0 = 0; k0 < K; k0 += KC) {
    kiln_i64 kc = K - k0 < KC ? K - k0 : KC;
    // The common case as whole-vector copies: in a task function the
    // parameters are not constants that LLVM could specialise on, and a
    // per-element test made this packing cost as much as the FMAs.
    if (!transB && cols == KILN_PANEL) {
      for (kiln_i64 k = 0; k < kc; ++k)
        for (int v = 0; v < NV; ++v)
          storev(packed + k * KILN_PANEL + v * KILN_VEC,
                 loadv(B + (k0 + k) * ldb + n0 + v * KILN_VEC));
    } else if (!transB) {
      for (kiln_i64 k = 0; k < kc; ++k)
        for (kiln_i64 c = 0; c < KILN_PANEL; ++c)
          packed[k * KILN_PANEL + c] = c < cols ? B[(k0 + k) * ldb + n0 + c] : 0.0f;
    } else {
      for (kiln_i64 k = 0; k < kc; ++k)
        for (kiln_i64 c = 0; c < KILN_PANEL; ++c)
          packed[k * KILN_PANEL + c] = c < cols ? B[(n0 + c) * ldb + k0 + k] : 0.0f;
    }
    for (kiln_i64 m0 = m0Begin; m0 < mStop; m0 += MR) {
      int rows = mStop - m0 < MR ? (int)(mStop - m0) : MR;
      forTileRows(rows, [&](auto rowsTag) {
        constexpr int R = decltype(rowsTag)::value;
        const float *a[R];
        float *o[R];
        const float *r[R];
        for (int i = 0; i < R; ++i) {
          kiln_i64 row = m0 + (i < rows ? i : 0);
          a[i] = A + row * lda + k0;
          o[i] = C + row * ldc + n0;
          r[i] = o[i];
        }
        vf acc[R][NV];
        for (int i = 0; i < R; ++i)
          for (int v = 0; v < NV; ++v)
            acc[i][v] = splat(0);
        // See tileRowsAlias. In the tile's scope: a[] points into it.
        alignas(64) float copy[CopyRows ? (R / 3 + 1) * kCopyStride : 1];
        if constexpr (CopyRows) {
          for (int i = 2; i < R; i += 3) {
            copyFloats(copy + i / 3 * kCopyStride, a[i], kc);
            a[i] = copy + i / 3 * kCopyStride;
          }
        }
        accumulate(acc, a, packed, kc);
        // Later K blocks add to what the earlier ones stored.
        storeTile(acc, o, r, rows, cols, k0 > 0, -__builtin_inff(), __builtin_inff());
      });
    }
  }
}

void matmulTask(void *ctx, kiln_i64 begin, kiln_i64 end) {
  const MatMulJob &j = *(const MatMulJob *)ctx;
  const kiln_matmul_params *q = j.q;
  kiln_i64 M = q->m, N = q->n, K = q->k, sa = q->stride_a, sb = q->stride_b, sc = q->stride_c,
           lda = q->lda, ldb = q->ldb, ldc = q->ldc, transB = q->trans_b, offA = q->offset_a,
           offB = q->offset_b;
  kiln_i64 panels = (N + KILN_PANEL - 1) / KILN_PANEL;
  kiln_i64 blocks = (M + kMatMulRows - 1) / kMatMulRows;
  alignas(64) float packed[KC * KILN_PANEL];
  for (kiln_i64 item = begin; item < end; ++item) {
    kiln_i64 mb = item % blocks, rest = item / blocks;
    kiln_i64 n0 = (rest % panels) * KILN_PANEL, bi = rest / panels;
    kiln_i64 cols = N - n0 < KILN_PANEL ? N - n0 : KILN_PANEL;
    kiln_i64 mStop = (mb + 1) * kMatMulRows < M ? (mb + 1) * kMatMulRows : M;
    if (rowsAlias(lda))
      matmulPanel<true>(j.a + offA + bi * sa, lda, j.b + offB + bi * sb, ldb, transB != 0,
                        j.c + bi * sc, ldc, mb * kMatMulRows, mStop, n0, cols, K, packed);
    else
      matmulPanel(j.a + offA + bi * sa, lda, j.b + offB + bi * sb, ldb, transB != 0,
                  j.c + bi * sc, ldc, mb * kMatMulRows, mStop, n0, cols, K, packed);
  }
}

/// Fused attention, per (batch, block of query rows): the scores
/// S = Q K^T for the block go to a stack buffer, softmax(scale * S) is taken
/// in place row by row, and O = S V is written out; the scores never reach
/// memory. params: kiln_attention_params (kiln/kernels.h).
// The scores buffer (192 KB on the stack). A block takes as many query rows
// as fit, up to kMatMulRows: each block packs K and V panel by panel, and
// with one register tile of rows per block that packing cost 9 % of the
// encoder's run time.
constexpr kiln_i64 kAttentionScoreFloats = 49152;
static_assert(kAttentionScoreFloats / KILN_ATTENTION_MAX_KEYS >= MR,
              "a block of scores must hold a register tile of rows at the longest key length");
INLINE kiln_i64 attentionRows(kiln_i64 keys) {
  kiln_i64 rows = kAttentionScoreFloats / keys / MR * MR;
  return rows > kMatMulRows ? kMatMulRows : rows;
}

struct AttentionJob {
  const kiln_attention_params *q;
  const float *qb, *kb, *vb;
  float *out;
  float scale;
};

void attentionTask(void *ctx, kiln_i64 begin, kiln_i64 end) {
  const AttentionJob &j = *(const AttentionJob *)ctx;
  const kiln_attention_params *q = j.q;
  kiln_i64 M = q->m, N = q->n, D = q->d, DV = q->dv;
  kiln_i64 blockRows = attentionRows(N), blocks = (M + blockRows - 1) / blockRows;
  alignas(64) float packed[KC * KILN_PANEL];
  alignas(64) float scores[kAttentionScoreFloats];
  for (kiln_i64 item = begin; item < end; ++item) {
    kiln_i64 bi = item / blocks, m0 = (item % blocks) * blockRows;
    kiln_i64 rows = M - m0 < blockRows ? M - m0 : blockRows;
    const float *Q = j.qb + q->q_offset + bi * q->q_batch_stride + m0 * q->q_row_stride;
    const float *K = j.kb + q->k_offset + bi * q->k_batch_stride;
    const float *V = j.vb + q->v_offset + bi * q->v_batch_stride;
    float *O = j.out + bi * q->out_batch_stride + m0 * q->out_row_stride;
    for (kiln_i64 n0 = 0; n0 < N; n0 += KILN_PANEL)
      matmulPanel(Q, q->q_row_stride, K, q->k_row_stride, q->k_transposed != 0, scores, N, 0,
                  rows, n0,
                  N - n0 < KILN_PANEL ? N - n0 : KILN_PANEL, D, packed);
    for (kiln_i64 i = 0; i < rows; ++i)
      softmaxRow(scores + i * N, scores + i * N, N, false, j.scale);
    for (kiln_i64 n0 = 0; n0 < DV; n0 += KILN_PANEL)
      matmulPanel(scores, N, V, q->v_row_stride, false, O, q->out_row_stride, 0, rows, n0,
                  DV - n0 < KILN_PANEL ? DV - n0 : KILN_PANEL, N, packed);
  }
}

} // namespace

extern "C" {

/// Grouped 2-D convolution, NHWC input and output, weights packed by the
/// compiler as [groups][panels][kh][kw][cin/groups][KILN_PANEL] and bias as
/// [groups][panels][KILN_PANEL] (zero padded). out = clamp(conv + bias
/// (+ residual), lo, hi). Work is split into (image, group, panel, row tile)
/// items: the unit a thread pool will hand out. `inStride` and `outStride`
/// are the distances in floats between consecutive pixels of the input and
/// the output (c and oc when dense; more when the tensor is a channel slice
/// of a concatenation); the residual is dense.
void kiln_conv2d_nhwc_f32(kiln_addr params, kiln_addr in, kiln_addr w, kiln_addr bias,
                          kiln_addr residual, kiln_addr out, float lo, float hi,
                          kiln_i64 inStride, kiln_i64 outStride) {
  const ConvParams &q = *(const ConvParams *)params;
  ConvJob job{&q,     (const float *)in, (const float *)w, (const float *)bias,
              (const float *)residual, (float *)out, lo, hi, inStride, outStride};
  kiln_i64 fg = q.oc / q.groups;
  kiln_i64 panels = (fg + KILN_PANEL - 1) / KILN_PANEL;
  kiln_i64 blocks = (q.oh * q.ow + kPixelBlock - 1) / kPixelBlock;
  parallelFor<convTask>(q.n * q.groups * panels * blocks,
                        kPixelBlock * KILN_PANEL * q.kh * q.kw * (q.c / q.groups), &job);
}

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

/// Batched C[b] = A[b] x B[b] with a run-time B (attention, activations x
/// activations). params: batch, M, N, K, strideA, strideB, strideC (batch
/// strides in floats; 0 broadcasts), lda, ldb, ldc, transB, offsetA,
/// offsetB (floats from the given addresses: A and B may be strided views,
/// such as attention heads inside one projection's output). B is packed on
/// the fly, one KC x KILN_PANEL block at a time, into a stack buffer that
/// stays in L1 while every row tile of A streams past it.
void kiln_matmul_f32(kiln_addr params, kiln_addr aAddr, kiln_addr bAddr, kiln_addr cAddr) {
  const kiln_matmul_params *q = (const kiln_matmul_params *)params;
  MatMulJob job{q, (const float *)aAddr, (const float *)bAddr, (float *)cAddr};
  kiln_i64 batch = q->batch, M = q->m, N = q->n, K = q->k;
  kiln_i64 items = batch * ((N + KILN_PANEL - 1) / KILN_PANEL) *
                   ((M + kMatMulRows - 1) / kMatMulRows);
  parallelFor<matmulTask>(items, kMatMulRows * KILN_PANEL * K, &job);
}

/// softmax(scale * Q K^T) V for each batch; see attentionTask for params.
void kiln_attention_f32(kiln_addr params, kiln_addr qAddr, kiln_addr kAddr, kiln_addr vAddr,
                        kiln_addr outAddr, float scale) {
  const kiln_attention_params *q = (const kiln_attention_params *)params;
  AttentionJob job{q, (const float *)qAddr, (const float *)kAddr, (const float *)vAddr,
                   (float *)outAddr, scale};
  kiln_i64 blockRows = attentionRows(q->n), blocks = (q->m + blockRows - 1) / blockRows;
  parallelFor<attentionTask>(q->batch * blocks, blockRows * q->n * (q->d + q->dv), &job);
}

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
