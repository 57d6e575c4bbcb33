// Direct convolution ("indirect GEMM" style), NHWC, grouped.
// Why hand-written, and how they are built: KernelSupport.h.

#include "ConvSupport.h"

namespace {

/// AVX2's pointwise convolutions over many input channels (a transformer's
/// 1024-deep projections, as 1x1 convolutions of its tokens): the block's
/// tiles take kKBlock channels at a time, so that the half panel's rows for
/// them (16 KB) stay in L1 while every tile of the block reads them. Tile
/// by tile over the whole reduction, each tile read all of them from L2
/// (64 tokens x 1024 -> 4096: 67 GFLOP/s, against 80 for the matrix
/// product kernel, which packs its blocks of B). Between K blocks the tiles'
/// running totals (chunkDone's) wait in `partial`, so every output is the
/// same sum in the same order as tile by tile. AVX-512's tiles cover the
/// whole 32-wide panel (8 rows: 16 FMAs per panel row read, against 12 for
/// AVX2's 6 x 16 half panels) and do not take this path.
constexpr kiln_i64 kKBlock = 2 * kSumChunk;
static_assert(kKBlock % kSumChunk == 0, "K blocks must end where chunks end");

template <int W>
INLINE void pointwiseBlockByK(const ConvJob &j, kiln_i64 n, kiln_i64 g, kiln_i64 p,
                              kiln_i64 start, kiln_i64 stop, kiln_i64 col) {
  const ConvParams &q = *j.q;
  kiln_i64 cg = q.c / q.groups;
  // A block has fewer than twice its rows (kiln_conv2d_pixel_blocks), at
  // most 2 * kPixelBlock (KILN_CONV_DOUBLE_BLOCKS); a tile may run MR - 1
  // rows past its end (repeating its first).
  alignas(64) float partial[(4 * kPixelBlock + MR) * W * KILN_VEC];
  for (kiln_i64 k0 = 0; k0 < cg; k0 += kKBlock) {
    kiln_i64 k1 = cg - k0 < kKBlock ? cg : k0 + kKBlock;
    int rows;
    for (kiln_i64 m0 = start; m0 < stop; m0 += rows) {
      rows = nextTileRows(stop - m0);
      forTileRows(rows, [&](auto rowsTag) {
        constexpr int R = decltype(rowsTag)::value;
        pointwiseTile<R, W>(q, j.in, j.w, j.bias, j.res, j.out, j.lo, j.hi, j.ldi, j.ldo, n, g,
                            p, m0, rows, col, k0, k1,
                            partial + (m0 - start) * W * KILN_VEC);
      });
    }
  }
}

void convTask(void *ctx, kiln_i64 begin, kiln_i64 end) {
  const ConvJob &j = *(const ConvJob *)ctx;
  const ConvParams &q = *j.q;
  kiln_i64 fg = q.oc / q.groups;
  kiln_i64 panels = (fg + KILN_PANEL - 1) / KILN_PANEL;
  kiln_i64 m = q.oh * q.ow;
  ConvSchedule schedule = kiln_conv2d_schedule_of(&q);
  kiln_i64 blocks = schedule.blocks;
  bool pixelMajor = schedule.pixel_major != 0;
  bool copyRows = tileRowsAlias(q, j.ldi);
  // No padding at either end: the end pads are implied by oh and ow (a 1x1
  // convolution padded at the end, as a strided ConvTranspose's phases
  // make, reads zeros past the input, which pointwiseTile does not do).
  bool pointwise = q.kh == 1 && q.kw == 1 && q.sh == 1 && q.sw == 1 && q.ph == 0 && q.pw == 0 &&
                   q.oh == q.h && q.ow == q.w;
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
    kiln_i64 start = b * schedule.block_rows, stop = pixelBlockEnd(schedule, b, m);
    kiln_i64 panelCols = fg - p * KILN_PANEL < KILN_PANEL ? fg - p * KILN_PANEL : KILN_PANEL;
    bool half = panelCols <= KILN_PANEL / 2;
    if (pointwise && stop - start <= kStreamedRows) {
      // A few rows: the weights stream from memory once (pointwiseRowStreams).
      // Rows 4 KB apart (copyRows) crowd an L1 set only in MR-row tiles.
      constexpr int kHalf = NV > 1 ? NV / 2 : NV;
      int rows = (int)(stop - start);
      auto streamed = [&](auto rowsTag) {
        constexpr int R = decltype(rowsTag)::value;
        if (half)
          pointwiseRowStreams<R, kHalf>(q, j.in, j.w, j.bias, j.res, j.out, j.lo, j.hi, j.ldi,
                                        j.ldo, n, g, p, start, rows);
        else
          pointwiseRowStreams<R, NV>(q, j.in, j.w, j.bias, j.res, j.out, j.lo, j.hi, j.ldi,
                                     j.ldo, n, g, p, start, rows);
      };
      if (rows == 1)
        streamed(Rows<1>());
      else
        streamed(Rows<kStreamTileRows>());
      continue;
    }
    // AVX2 covers a panel in two tiles of TNV vectors (KernelSupport.h): all
    // of the block's rows take the first half, then the second, so that a
    // pass over the block streams half the panel's weights (a 3x3 layer of
    // 512 channels: 590 KB a panel, more than Zen 3's 512 KB L2). Chosen
    // for that reason; its gain was not measured apart from the 6x16 tiles
    // (7x7 512 -> 512 went 36 -> 65 GFLOP/s with both).
    kiln_i64 tileCols = TNV < NV ? TNV * KILN_VEC : KILN_PANEL;
    for (kiln_i64 col = 0; col < panelCols; col += tileCols) {
      if constexpr (TNV < NV) {
        if (pointwise && !copyRows && q.c / q.groups > kKBlock) {
          pointwiseBlockByK<TNV>(j, n, g, p, start, stop, col);
          continue;
        }
      }
      int rows;
      for (kiln_i64 m0 = start; m0 < stop; m0 += rows) {
        rows = nextTileRows(stop - m0);
        // One register tile of R rows and W vectors at column `col` of the
        // panel (0 but on AVX2). The full-width tiles (W == TNV) have the
        // forms below, most of them for MR rows only; narrower ones (a last
        // panel of at most half its width) the general one.
        auto tileAt = [&](auto rowsTag, auto widthTag) {
          constexpr int R = decltype(rowsTag)::value, W = decltype(widthTag)::value;
          if constexpr (W == TNV) {
            // The first tile of a panel's first block fetches the next panel
            // into the cache while it works: panel-major items of a large
            // matrix product stream each panel from memory once.
            bool prefetch = !pixelMajor && col == 0 && b == 0 && m0 == 0 && p + 1 < panels &&
                            q.kh * q.kw == 1;
            if (pointwise && !copyRows) {
              // At every height: the last rows of a block too (kExactRows'
              // 5-7, or 1-4) skip convTile's window set-up, and the first
              // tile of a 9-11-row block (5-7 + 4) prefetches as an MR-row
              // one does.
              if (prefetch)
                pointwiseTile<R, W, true>(q, j.in, j.w, j.bias, j.res, j.out, j.lo, j.hi, j.ldi,
                                          j.ldo, n, g, p, m0, rows, col);
              else
                pointwiseTile<R, W>(q, j.in, j.w, j.bias, j.res, j.out, j.lo, j.hi, j.ldi, j.ldo,
                                    n, g, p, m0, rows, col);
              return;
            }
            if constexpr (R == MR) {
              if (copyRows) {
                if (prefetch)
                  convTile<R, W, false, true, true>(q, j.in, j.w, j.bias, j.res, j.out, j.lo,
                                                    j.hi, j.ldi, j.ldo, n, g, p, m0, rows, col);
                else
                  convTile<R, W, false, false, true>(q, j.in, j.w, j.bias, j.res, j.out, j.lo,
                                                     j.hi, j.ldi, j.ldo, n, g, p, m0, rows, col);
                return;
              }
              if (prefetch) {
                convTile<R, W, false, true>(q, j.in, j.w, j.bias, j.res, j.out, j.lo, j.hi, j.ldi,
                                            j.ldo, n, g, p, m0, rows, col);
                return;
              }
              if (convWindowRows(q, j.ldi, m0, rows)) {
                convTile<R, W, true>(q, j.in, j.w, j.bias, j.res, j.out, j.lo, j.hi, j.ldi, j.ldo,
                                     n, g, p, m0, rows, col);
                return;
              }
            } else if constexpr (R > 6) {
              // 7 rows 4 KB apart crowd an L1 set too (tileRowsAlias).
              if (copyRows) {
                convTile<R, W, false, false, true>(q, j.in, j.w, j.bias, j.res, j.out, j.lo,
                                                   j.hi, j.ldi, j.ldo, n, g, p, m0, rows, col);
                return;
              }
            }
          }
          convTile<R, W>(q, j.in, j.w, j.bias, j.res, j.out, j.lo, j.hi, j.ldi, j.ldo, n, g, p,
                         m0, rows, col);
        };
        auto tile = [&](auto rowsTag) {
          if constexpr (TNV < NV)
            tileAt(rowsTag, Rows<TNV>());
          else if (half)
            tileAt(rowsTag, Rows<NV / 2>());
          else
            tileAt(rowsTag, Rows<NV>());
        };
        forTileRows(rows, tile);
      }
    }
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
  ConvSchedule schedule = kiln_conv2d_schedule_of(&q);
  parallelFor<convTask>(q.n * q.groups * panels * schedule.blocks,
                        schedule.block_rows * KILN_PANEL * q.kh * q.kw * (q.c / q.groups), &job);
}

} // extern "C"
