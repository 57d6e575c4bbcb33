// Matrix products with a run-time right operand, and fused attention.
// Why hand-written, and how they are built: KernelSupport.h.

#include "ConvSupport.h"

namespace {

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
                        kiln_i64 cols, kiln_i64 K, float *packed, bool addToC = false) {
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
    int rows;
    for (kiln_i64 m0 = m0Begin; m0 < mStop; m0 += rows) {
      rows = nextTileRows(mStop - m0);
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
        // See tileRowsAlias. In the tile's scope: a[] points into it.
        alignas(64) float copy[CopyRows ? (R / 3 + 1) * kCopyStride : 1];
        if constexpr (CopyRows) {
          for (int i = 2; i < R; i += 3) {
            copyFloats(copy + i / 3 * kCopyStride, a[i], kc);
            a[i] = copy + i / 3 * kCopyStride;
          }
        }
        // The panel in register tiles of TNV vectors: one, or two on AVX2
        // (KernelSupport.h).
        for (kiln_i64 col = 0; col < cols; col += TNV * KILN_VEC) {
          vf acc[R][TNV];
          for (int i = 0; i < R; ++i)
            for (int v = 0; v < TNV; ++v)
              acc[i][v] = splat(0);
          accumulate(acc, a, packed + col, kc);
          float *oc[R];
          const float *rc[R];
          for (int i = 0; i < R; ++i) {
            oc[i] = o[i] + col;
            rc[i] = r[i] + col;
          }
          // Later K blocks add to what the earlier ones stored.
          storeTile(acc, oc, rc, rows, cols - col, addToC || k0 > 0, -__builtin_inff(),
                    __builtin_inff());
        }
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
/// Query rows per work item for N keys: as many as a block of scores holds
/// for the keys of one pass (all of them, or a chunk of
/// KILN_ATTENTION_MAX_KEYS: attentionChunked).
INLINE kiln_i64 attentionBlockRows(kiln_i64 N) {
  return attentionRows(N < KILN_ATTENTION_MAX_KEYS ? N : KILN_ATTENTION_MAX_KEYS);
}

struct AttentionJob {
  const kiln_attention_params *q;
  const float *qb, *kb, *vb;
  float *out;
  float scale;
  // kiln_attention_mask_f32's: null without a mask.
  const kiln_attention_mask_params *mq = nullptr;
  const float *mask = nullptr;
  float qkScale = 1.0f;
};

/// Row 0 of batch bi's mask (see kiln_attention_mask_params).
INLINE const float *maskOfBatch(const AttentionJob &j, kiln_i64 bi) {
  const kiln_attention_mask_params *mq = j.mq;
  return j.mask + mq->mask_offset +
         (bi / mq->mask_batch_div) % mq->mask_batch_mod * mq->mask_batch_stride;
}

/// scores[i][j] = qkScale * scores[i][j] + the mask's entry (i, j), for the
/// block's rows (queries m0 ...) of batch bi.
void addMask(const AttentionJob &j, float *scores, kiln_i64 bi, kiln_i64 m0, kiln_i64 rows,
             kiln_i64 N, kiln_i64 firstKey = 0) {
  const kiln_attention_mask_params *mq = j.mq;
  const float *base = maskOfBatch(j, bi);
  float s = j.qkScale;
  for (kiln_i64 i = 0; i < rows; ++i) {
    const float *m = base + (m0 + i) * mq->mask_row_stride + firstKey;
    float *row = scores + i * N;
    kiln_i64 c = 0;
    for (; c + KILN_VEC <= N; c += KILN_VEC)
      storev(row + c, splat(s) * loadv(row + c) + loadv(m + c));
    for (; c < N; ++c)
      row[c] = s * row[c] + m[c];
  }
}

/// How many of the N keys the block's rows (queries m0 ... of batch bi)
/// need: one past the last key that the mask leaves open to any of them.
/// A key is closed to a row where its mask entry is -inf or so negative
/// that scale * entry <= -1e30 (a padding mask written with the float
/// minimum, as Hugging Face's models write it): its probability is exactly
/// 0 once the row has an open key (exp of less than -1e29 minus a finite
/// max), so the keys after every row's last open key add nothing and are
/// not computed. Causal masks close about half of a block's keys, padding
/// masks the padding; a BERT-style encoder at 4 x 384 with rows padded to
/// 384, 288, 192 and 96 tokens spent 30 % of its time in attention.
/// Without a mask, with a row that has no open key (the whole softmax is
/// then ONNX's NaN or, for finite entries, uniform), or with a scale that
/// is not positive, all N. The sums over the kept keys are the same terms
/// in another grouping, so the result may differ in the last bit.
INLINE kiln_i64 attentionKeys(const AttentionJob &j, kiln_i64 bi, kiln_i64 m0, kiln_i64 rows,
                              kiln_i64 N) {
  if (!j.mask || !(j.scale > 0.0f))
    return N;
  const kiln_attention_mask_params *mq = j.mq;
  const float *base = maskOfBatch(j, bi);
  float closed = -1e30f / j.scale;
  kiln_i64 keys = 0;
  // A mask with one row for every query (a padding mask) is scanned once.
  kiln_i64 distinctRows = mq->mask_row_stride == 0 ? 1 : rows;
  for (kiln_i64 i = 0; i < distinctRows; ++i) {
    const float *m = base + (m0 + i) * mq->mask_row_stride;
    // Closed: at most `closed` (a NaN entry is open: it makes the row NaN,
    // as ONNX's softmax does).
    kiln_i64 last = N - 1;
    while (last >= keys && m[last] <= closed)
      --last;
    if (last < keys) {
      // Nothing open past `keys`: open before it, or nowhere at all.
      kiln_i64 k = keys - 1;
      while (k >= 0 && m[k] <= closed)
        --k;
      if (k < 0)
        return N;
      continue;
    }
    keys = last + 1;
  }
  return keys;
}

/// Softmax over keys in chunks ("online", as flash attention does it), for
/// one row of one chunk: x (n scores) becomes exp(c * x - m') with m' =
/// max(m, c * max(x)); m and l (the row's running max and sum) follow.
/// Returns exp(m - m'), the factor by which what the earlier chunks added
/// to the row's output must shrink. A row whose keys so far are all masked
/// (-inf) keeps m = -inf and adds nothing (l stays 0: the end divides 0 by
/// 0, the NaN that the whole softmax gives too).
INLINE float onlineSoftmaxRow(float *x, kiln_i64 n, float c, float &m, float &l) {
  kiln_i64 full = n - n % KILN_VEC, tail = n - full;
  vf mx = splat(-kInf);
  for (kiln_i64 i = 0; i < full; i += KILN_VEC)
    mx = __builtin_elementwise_max(mx, loadv(x + i));
  if (tail)
    mx = __builtin_elementwise_max(mx, loadPartial(x + full, tail, -kInf));
  float chunkMax = maxLanes(mx) * c;
  float next = chunkMax > m ? chunkMax : m;
  if (next == -kInf) {
    for (kiln_i64 i = 0; i < n; ++i)
      x[i] = 0.0f;
    return 1.0f;
  }
  float shrink = m == -kInf ? 0.0f : expv(splat(m - next))[0];
  vf vc = splat(c), vnext = splat(next), sum = splat(0.0f);
  for (kiln_i64 i = 0; i < full; i += KILN_VEC) {
    vf e = expv(loadv(x + i) * vc - vnext);
    storev(x + i, e);
    sum += e;
  }
  if (tail) {
    vf e = expv(loadPartial(x + full, tail, -kInf) * vc - vnext);
    storePartial(x + full, e, tail);
    sum += e;
  }
  l = l * shrink + sumLanes(sum);
  m = next;
  return shrink;
}

/// Attention over more keys than a block of scores holds (N >
/// KILN_ATTENTION_MAX_KEYS): the keys in chunks of that many, the output
/// rows accumulating each chunk's P V, rescaled as the running max grows
/// (onlineSoftmaxRow), and divided by the sum at the end. Summed in
/// another order than the one-chunk path, so not bit-identical to it.
/// Q, K, V and O: batch bi's, from query row m0.
void attentionChunked(const AttentionJob &j, kiln_i64 bi, kiln_i64 m0, kiln_i64 rows,
                      kiln_i64 N, const float *Q, const float *K, const float *V, float *O,
                      float *scores, float *packed) {
  const kiln_attention_params *q = j.q;
  kiln_i64 D = q->d, DV = q->dv;
  float rowMax[kMatMulRows], rowSum[kMatMulRows];
  for (kiln_i64 i = 0; i < rows; ++i) {
    rowMax[i] = -kInf;
    rowSum[i] = 0.0f;
  }
  bool transK = q->k_transposed != 0;
  for (kiln_i64 c0 = 0; c0 < N; c0 += KILN_ATTENTION_MAX_KEYS) {
    kiln_i64 L = N - c0 < KILN_ATTENTION_MAX_KEYS ? N - c0 : KILN_ATTENTION_MAX_KEYS;
    // K's chunk: rows c0... of K (transK), else columns c0... of K^T.
    const float *Kc = K + (transK ? c0 * q->k_row_stride : c0);
    for (kiln_i64 n0 = 0; n0 < L; n0 += KILN_PANEL)
      matmulPanel(Q, q->q_row_stride, Kc, q->k_row_stride, transK, scores, L, 0, rows, n0,
                  L - n0 < KILN_PANEL ? L - n0 : KILN_PANEL, D, packed);
    if (j.mask)
      addMask(j, scores, bi, m0, rows, L, c0);
    for (kiln_i64 i = 0; i < rows; ++i) {
      float shrink = onlineSoftmaxRow(scores + i * L, L, j.scale, rowMax[i], rowSum[i]);
      if (c0 > 0 && shrink != 1.0f)
        for (kiln_i64 d = 0; d < DV; ++d)
          O[i * q->out_row_stride + d] *= shrink;
    }
    for (kiln_i64 n0 = 0; n0 < DV; n0 += KILN_PANEL)
      matmulPanel(scores, L, V + c0 * q->v_row_stride, q->v_row_stride, false, O,
                  q->out_row_stride, 0, rows, n0, DV - n0 < KILN_PANEL ? DV - n0 : KILN_PANEL,
                  L, packed, /*addToC=*/c0 > 0);
  }
  for (kiln_i64 i = 0; i < rows; ++i)
    for (kiln_i64 d = 0; d < DV; ++d)
      O[i * q->out_row_stride + d] /= rowSum[i];
}

/// Blocks of at most this many query rows (a decode step: one query row a
/// head) take attentionDirect.
constexpr kiln_i64 kDirectAttentionRows = 4;

/// Attention for a few query rows, straight from K and V: each score a dot
/// product with a row of K (or, for K^T, the scores as sums of K^T's rows),
/// and each output row a sum of V's rows weighted by its probabilities. The
/// panel path packs K and V first, one element at a time for K's rows: for
/// one query row against 65 keys of 192 floats (a d = 768 decoder at
/// batch 4) that packing made each of the four layers' attention 0.22-0.29
/// ms, 2.7 GFLOP/s; K and V are read once either way, from cache.
/// `rows * N` scores fit the block (attentionTask checks).
INLINE void attentionDirect(const AttentionJob &j, kiln_i64 bi, kiln_i64 m0, kiln_i64 rows,
                            kiln_i64 N, const float *Q, const float *K, const float *V, float *O,
                            float *scores) {
  const kiln_attention_params *q = j.q;
  kiln_i64 D = q->d, DV = q->dv;
  kiln_i64 dFull = D - D % KILN_VEC, dTail = D - dFull;
  if (q->k_transposed) {
    for (kiln_i64 n = 0; n < N; ++n) {
      const float *k = K + n * q->k_row_stride;
      for (kiln_i64 i = 0; i < rows; ++i) {
        const float *x = Q + i * q->q_row_stride;
        // Two accumulators: the FMAs of one dot product do not wait on
        // each other.
        vf acc0 = splat(0.0f), acc1 = splat(0.0f);
        kiln_i64 d = 0;
        for (; d + 2 * KILN_VEC <= dFull; d += 2 * KILN_VEC) {
          acc0 += loadv(x + d) * loadv(k + d);
          acc1 += loadv(x + d + KILN_VEC) * loadv(k + d + KILN_VEC);
        }
        if (d < dFull)
          acc0 += loadv(x + d) * loadv(k + d);
        if (dTail)
          acc1 += loadPartial(x + dFull, dTail, 0.0f) * loadPartial(k + dFull, dTail, 0.0f);
        scores[i * N + n] = sumLanes(acc0 + acc1);
      }
    }
  } else {
    // K^T: D rows of N keys; each query row's scores add up those rows.
    kiln_i64 nFull = N - N % KILN_VEC, nTail = N - nFull;
    for (kiln_i64 i = 0; i < rows; ++i) {
      const float *x = Q + i * q->q_row_stride;
      float *s = scores + i * N;
      for (kiln_i64 n = 0; n < N; ++n)
        s[n] = 0.0f;
      for (kiln_i64 d = 0; d < D; ++d) {
        const float *kt = K + d * q->k_row_stride;
        vf w = splat(x[d]);
        for (kiln_i64 n = 0; n < nFull; n += KILN_VEC)
          storev(s + n, loadv(s + n) + w * loadv(kt + n));
        if (nTail)
          storePartial(s + nFull, loadPartial(s + nFull, nTail, 0.0f) +
                                      w * loadPartial(kt + nFull, nTail, 0.0f), nTail);
      }
    }
  }
  if (j.mask)
    addMask(j, scores, bi, m0, rows, N);
  for (kiln_i64 i = 0; i < rows; ++i)
    softmaxRow(scores + i * N, scores + i * N, N, false, j.scale);
  // O = P V, four vectors of columns at a time.
  constexpr kiln_i64 kCols = 4 * KILN_VEC;
  for (kiln_i64 i = 0; i < rows; ++i) {
    const float *p = scores + i * N;
    float *o = O + i * q->out_row_stride;
    for (kiln_i64 c0 = 0; c0 < DV; c0 += kCols) {
      kiln_i64 cols = DV - c0 < kCols ? DV - c0 : kCols;
      vf acc[4] = {splat(0.0f), splat(0.0f), splat(0.0f), splat(0.0f)};
      if (cols == kCols) {
        for (kiln_i64 n = 0; n < N; ++n) {
          const float *v = V + n * q->v_row_stride + c0;
          vf w = splat(p[n]);
          for (int u = 0; u < 4; ++u)
            acc[u] += w * loadv(v + u * KILN_VEC);
        }
        for (int u = 0; u < 4; ++u)
          storev(o + c0 + u * KILN_VEC, acc[u]);
      } else {
        for (kiln_i64 n = 0; n < N; ++n) {
          const float *v = V + n * q->v_row_stride + c0;
          vf w = splat(p[n]);
          for (kiln_i64 u = 0; u * KILN_VEC < cols; ++u) {
            kiln_i64 len = cols - u * KILN_VEC < KILN_VEC ? cols - u * KILN_VEC : KILN_VEC;
            acc[u] += w * loadPartial(v + u * KILN_VEC, len, 0.0f);
          }
        }
        for (kiln_i64 u = 0; u * KILN_VEC < cols; ++u) {
          kiln_i64 len = cols - u * KILN_VEC < KILN_VEC ? cols - u * KILN_VEC : KILN_VEC;
          storePartial(o + c0 + u * KILN_VEC, acc[u], len);
        }
      }
    }
  }
}

void attentionTask(void *ctx, kiln_i64 begin, kiln_i64 end) {
  const AttentionJob &j = *(const AttentionJob *)ctx;
  const kiln_attention_params *q = j.q;
  kiln_i64 M = q->m, N = q->n, D = q->d, DV = q->dv;
  kiln_i64 blockRows = attentionBlockRows(N), blocks = (M + blockRows - 1) / blockRows;
  alignas(64) float packed[KC * KILN_PANEL];
  alignas(64) float scores[kAttentionScoreFloats];
  for (kiln_i64 item = begin; item < end; ++item) {
    kiln_i64 bi = item / blocks, m0 = (item % blocks) * blockRows;
    kiln_i64 rows = M - m0 < blockRows ? M - m0 : blockRows;
    const float *Q = j.qb + q->q_offset + bi * q->q_batch_stride + m0 * q->q_row_stride;
    const float *K = j.kb + q->k_offset + bi * q->k_batch_stride;
    const float *V = j.vb + q->v_offset + bi * q->v_batch_stride;
    float *O = j.out + bi * q->out_batch_stride + m0 * q->out_row_stride;
    // The keys the block's rows need (the mask may close the rest); a
    // block that needs fewer than all N computes as if there were only
    // those.
    kiln_i64 keys = attentionKeys(j, bi, m0, rows, N);
    if (rows <= kDirectAttentionRows && rows * keys <= kAttentionScoreFloats) {
      attentionDirect(j, bi, m0, rows, keys, Q, K, V, O, scores);
      continue;
    }
    if (keys > KILN_ATTENTION_MAX_KEYS) {
      attentionChunked(j, bi, m0, rows, keys, Q, K, V, O, scores, packed);
      continue;
    }
    for (kiln_i64 n0 = 0; n0 < keys; n0 += KILN_PANEL)
      matmulPanel(Q, q->q_row_stride, K, q->k_row_stride, q->k_transposed != 0, scores, keys, 0,
                  rows, n0, keys - n0 < KILN_PANEL ? keys - n0 : KILN_PANEL, D, packed);
    if (j.mask)
      addMask(j, scores, bi, m0, rows, keys);
    for (kiln_i64 i = 0; i < rows; ++i)
      softmaxRow(scores + i * keys, scores + i * keys, keys, false, j.scale);
    for (kiln_i64 n0 = 0; n0 < DV; n0 += KILN_PANEL)
      matmulPanel(scores, keys, V, q->v_row_stride, false, O, q->out_row_stride, 0, rows, n0,
                  DV - n0 < KILN_PANEL ? DV - n0 : KILN_PANEL, keys, packed);
  }
}

} // namespace

extern "C" {

/// Batched C[b] = A[b] x B[b] with a run-time B (attention, activations x
/// activations). params: batch, M, N, K, strideA, strideB, strideC (batch
/// strides in floats; 0 broadcasts), lda, ldb, ldc, transB, offsetA,
/// offsetB (floats from the given addresses: A and B may be strided views,
/// such as attention heads inside one projection's output). B is packed on
/// the fly, one KC x KILN_PANEL block at a time, into a stack buffer that
/// stays in L1 while every row tile of A streams past it.
/// Sizes known only at run time may be 0 (an empty KV cache): a product
/// over no terms is 0, and no rows or columns is nothing to write.
static void zeroMatrices(float *out, kiln_i64 batch, kiln_i64 batchStride, kiln_i64 rows,
                         kiln_i64 cols, kiln_i64 rowStride) {
  for (kiln_i64 b = 0; b < batch; ++b)
    for (kiln_i64 i = 0; i < rows; ++i)
      for (kiln_i64 j = 0; j < cols; ++j)
        out[b * batchStride + i * rowStride + j] = 0.0f;
}

void kiln_matmul_f32(kiln_addr params, kiln_addr aAddr, kiln_addr bAddr, kiln_addr cAddr) {
  const kiln_matmul_params *q = (const kiln_matmul_params *)params;
  if (q->k <= 0) {
    zeroMatrices((float *)cAddr, q->batch, q->stride_c, q->m, q->n, q->ldc);
    return;
  }
  MatMulJob job{q, (const float *)aAddr, (const float *)bAddr, (float *)cAddr};
  kiln_i64 batch = q->batch, M = q->m, N = q->n, K = q->k;
  kiln_i64 items = batch * ((N + KILN_PANEL - 1) / KILN_PANEL) *
                   ((M + kMatMulRows - 1) / kMatMulRows);
  parallelFor<matmulTask>(items, kMatMulRows * KILN_PANEL * K, &job);
}

/// Both attention entry points: the work items of attentionTask.
static void runAttention(AttentionJob job) {
  const kiln_attention_params *q = job.q;
  if (q->n <= 0) { // no keys: softmax of nothing times nothing
    zeroMatrices(job.out, q->batch, q->out_batch_stride, q->m, q->dv, q->out_row_stride);
    return;
  }
  kiln_i64 blockRows = attentionBlockRows(q->n), blocks = (q->m + blockRows - 1) / blockRows;
  // An item's rows: a block's, or all of them when there are fewer (a decode
  // step's one query row), so that small steps stay on one thread.
  kiln_i64 itemRows = q->m < blockRows ? q->m : blockRows;
  parallelFor<attentionTask>(q->batch * blocks, itemRows * q->n * (q->d + q->dv), &job);
}

/// softmax(scale * Q K^T) V for each batch; see attentionTask for params.
void kiln_attention_f32(kiln_addr params, kiln_addr qAddr, kiln_addr kAddr, kiln_addr vAddr,
                        kiln_addr outAddr, float scale) {
  const kiln_attention_params *q = (const kiln_attention_params *)params;
  runAttention(AttentionJob{q, (const float *)qAddr, (const float *)kAddr,
                            (const float *)vAddr, (float *)outAddr, scale});
}

/// The same with an additive mask; see kiln_attention_mask_params.
void kiln_attention_mask_f32(kiln_addr params, kiln_addr qAddr, kiln_addr kAddr, kiln_addr vAddr,
                             kiln_addr maskAddr, kiln_addr outAddr, float scale, float qkScale) {
  const kiln_attention_mask_params *mq = (const kiln_attention_mask_params *)params;
  runAttention(AttentionJob{&mq->attention, (const float *)qAddr, (const float *)kAddr,
                            (const float *)vAddr, (float *)outAddr, scale, mq,
                            (const float *)maskAddr, qkScale});
}

} // extern "C"
