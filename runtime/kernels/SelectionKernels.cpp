// Selection kernels whose output size depends on the values: NonMaxSuppression
// on boxes and scores computed at run time (a detector's head), NonZero
// (also behind Compress) on a run-time mask, and TopK of a k computed at run
// time (a detector's "at most N per class").
//
// Kiln's executables have static shapes, so such a kernel writes a buffer
// sized for the most it can select, and the number it did select: the
// importer tracks that count along the value to the graph outputs, where
// kiln::Model trims the padding (see lib/frontend/RowCounts.cpp).
//
// Freestanding like the other kernels (no libc); the unit tests compile it
// natively and compare with ONNX's reference semantics.

#include "KernelSupport.h"

namespace {

typedef kiln_nms_params NmsParams;

INLINE float minf(float a, float b) { return a < b ? a : b; }
INLINE float maxf(float a, float b) { return a > b ? a : b; }

/// Box `i`'s corners as (y_min, x_min, y_max, x_max), from [y1, x1, y2, x2]
/// with the corners in either order or [x_center, y_center, width, height].
INLINE void corners(const float *box, bool center, float &y0, float &x0, float &y1, float &x1) {
  if (center) {
    x0 = box[0] - box[2] / 2;
    x1 = box[0] + box[2] / 2;
    y0 = box[1] - box[3] / 2;
    y1 = box[1] + box[3] / 2;
  } else {
    y0 = minf(box[0], box[2]);
    y1 = maxf(box[0], box[2]);
    x0 = minf(box[1], box[3]);
    x1 = maxf(box[1], box[3]);
  }
}

/// Whether IoU(a, b) > threshold, with ONNX Runtime's float arithmetic and
/// its treatment of empty boxes (never suppress).
INLINE bool suppresses(const float *a, const float *b, bool center, float threshold) {
  // No fused multiply-adds (the kernels build with -ffp-contract=fast): a
  // box on the threshold must fall the way ONNX Runtime's does.
#pragma clang fp contract(off)
  float ay0, ax0, ay1, ax1, by0, bx0, by1, bx1;
  corners(a, center, ay0, ax0, ay1, ax1);
  corners(b, center, by0, bx0, by1, bx1);
  float ix0 = maxf(ax0, bx0), ix1 = minf(ax1, bx1);
  float iy0 = maxf(ay0, by0), iy1 = minf(ay1, by1);
  if (ix1 <= ix0 || iy1 <= iy0)
    return false;
  float inter = (ix1 - ix0) * (iy1 - iy0);
  float areaA = (ax1 - ax0) * (ay1 - ay0), areaB = (bx1 - bx0) * (by1 - by0);
  float uni = areaA + areaB - inter;
  if (inter <= 0 || areaA <= 0 || areaB <= 0 || uni <= 0)
    return false;
  return inter / uni > threshold;
}

/// Candidate order: higher score first, then lower index (ONNX Runtime's).
INLINE bool before(const float *score, kiln_i64 a, kiln_i64 b) {
  return score[a] > score[b] || (score[a] == score[b] && a < b);
}

/// Heap sort of `idx[0, n)` into the order `before(a, b)` defines: in place,
/// no allocation, O(n log n) for the tens of thousands of anchors of a
/// detector.
template <typename Before>
void heapSort(kiln_i64 *idx, kiln_i64 n, Before before) {
  auto siftDown = [&](kiln_i64 root, kiln_i64 end) {
    for (;;) {
      kiln_i64 child = 2 * root + 1;
      if (child >= end)
        return;
      // A max-heap under "after", so that popping puts the last in order at
      // the back.
      if (child + 1 < end && before(idx[child], idx[child + 1]))
        ++child;
      if (!before(idx[root], idx[child]))
        return;
      kiln_i64 t = idx[root];
      idx[root] = idx[child];
      idx[child] = t;
      root = child;
    }
  };
  for (kiln_i64 i = n / 2; i-- > 0;)
    siftDown(i, n);
  for (kiln_i64 end = n; end-- > 1;) {
    kiln_i64 t = idx[0];
    idx[0] = idx[end];
    idx[end] = t;
    siftDown(0, end);
  }
}

/// Candidates by descending score, ties by index.
void sortCandidates(kiln_i64 *idx, kiln_i64 n, const float *score) {
  heapSort(idx, n, [&](kiln_i64 a, kiln_i64 b) { return before(score, a, b); });
}

} // namespace

extern "C" {

/// ONNX NonMaxSuppression, greedy per (batch, class). boxes [batches][boxes][4],
/// scores [batches][classes][boxes]. `out` (i64): [0] the number selected,
/// then the selected (batch, class, box) triples, as many rows as the most
/// that can be selected (batches x classes x min(maxPerClass, boxes)), the
/// rows past the count zero; then `boxes` elements of scratch.
void kiln_nms_f32(kiln_addr paramsAddr, kiln_addr boxesAddr, kiln_addr scoresAddr,
                  kiln_addr outAddr, float iouThreshold, float scoreThreshold) {
  const NmsParams &q = *(const NmsParams *)paramsAddr;
  const float *boxes = (const float *)boxesAddr, *scores = (const float *)scoresAddr;
  kiln_i64 *out = (kiln_i64 *)outAddr;
  kiln_i64 perClass = q.max_per_class < q.boxes ? q.max_per_class : q.boxes;
  if (perClass < 0)
    perClass = 0;
  kiln_i64 capacity = q.batches * q.classes * perClass;
  kiln_i64 *triples = out + 1, *order = out + 1 + 3 * capacity;
  kiln_i64 count = 0;
  bool center = q.center_point_box != 0;
  for (kiln_i64 b = 0; b < q.batches && perClass > 0; ++b) {
    const float *bb = boxes + b * q.boxes * 4;
    for (kiln_i64 c = 0; c < q.classes; ++c) {
      const float *score = scores + (b * q.classes + c) * q.boxes;
      kiln_i64 n = 0;
      for (kiln_i64 i = 0; i < q.boxes; ++i)
        if (score[i] > scoreThreshold)
          order[n++] = i;
      sortCandidates(order, n, score);
      kiln_i64 first = count, kept = 0;
      for (kiln_i64 k = 0; k < n && kept < perClass; ++k) {
        const float *box = bb + order[k] * 4;
        bool keep = true;
        for (kiln_i64 s = first; s < count && keep; ++s)
          keep = !suppresses(box, bb + triples[3 * s + 2] * 4, center, iouThreshold);
        if (!keep)
          continue;
        triples[3 * count] = b;
        triples[3 * count + 1] = c;
        triples[3 * count + 2] = order[k];
        ++count;
        ++kept;
      }
    }
  }
  for (kiln_i64 i = 3 * count; i < 3 * capacity; ++i)
    triples[i] = 0;
  out[0] = count;
}

/// ONNX NonZero of a 0/1 byte mask of `elements` entries with dims
/// params[2 .. 2 + rank): `out` (i64) is [0] the count, then `rank` rows of
/// `elements` coordinates (row d: the d-th coordinate of each non-zero entry
/// in row-major order), zero past the count.
void kiln_nonzero_u8(kiln_addr paramsAddr, kiln_addr maskAddr, kiln_addr outAddr) {
  const kiln_nonzero_params *q = (const kiln_nonzero_params *)paramsAddr;
  kiln_i64 elements = q->elements, rank = q->rank;
  const kiln_i64 *dims = (const kiln_i64 *)(q + 1);
  const unsigned char *mask = (const unsigned char *)maskAddr;
  kiln_i64 *out = (kiln_i64 *)outAddr, *coords = out + 1;
  kiln_i64 count = 0;
  for (kiln_i64 flat = 0; flat < elements; ++flat) {
    if (!mask[flat])
      continue;
    kiln_i64 rest = flat;
    for (kiln_i64 d = rank; d-- > 0;) {
      coords[d * elements + count] = rest % dims[d];
      rest /= dims[d];
    }
    ++count;
  }
  for (kiln_i64 d = 0; d < rank; ++d)
    for (kiln_i64 k = count; k < elements; ++k)
      coords[d * elements + k] = 0;
  out[0] = count;
}

/// ONNX TopK along the middle axis of [outer][dim][inner] floats, searching
/// the first min(*valid, dim) entries of each line and writing the positions
/// of the best min(*k, *valid, capacity) of them in order (largest or
/// smallest first, ties by lower position, as ONNX Runtime orders them) to
/// `out` [outer][capacity][inner], zero past them; `dim` i64 of scratch
/// follow the positions.
void kiln_topk_f32(kiln_addr paramsAddr, kiln_addr inAddr, kiln_addr kAddr, kiln_addr validAddr,
                   kiln_addr outAddr) {
  const kiln_topk_params &q = *(const kiln_topk_params *)paramsAddr;
  const float *in = (const float *)inAddr;
  kiln_i64 *out = (kiln_i64 *)outAddr;
  kiln_i64 *order = out + q.outer * q.capacity * q.inner;
  kiln_i64 valid = *(const kiln_i64 *)validAddr, k = *(const kiln_i64 *)kAddr;
  kiln_i64 n = valid < 0 ? 0 : valid > q.dim ? q.dim : valid;
  kiln_i64 m = k < 0 ? 0 : k > n ? n : k;
  if (m > q.capacity)
    m = q.capacity;
  bool largest = q.largest != 0;
  for (kiln_i64 o = 0; o < q.outer; ++o)
    for (kiln_i64 c = 0; c < q.inner; ++c) {
      const float *line = in + o * q.dim * q.inner + c;
      for (kiln_i64 i = 0; i < n; ++i)
        order[i] = i;
      // Better entries first; equal ones by lower position.
      heapSort(order, n, [&](kiln_i64 a, kiln_i64 b) {
        float x = line[a * q.inner], y = line[b * q.inner];
        return largest ? (x > y || (x == y && a < b)) : (x < y || (x == y && a < b));
      });
      kiln_i64 *dst = out + o * q.capacity * q.inner + c;
      for (kiln_i64 j = 0; j < q.capacity; ++j)
        dst[j * q.inner] = j < m ? order[j] : 0;
    }
}

} // extern "C"
