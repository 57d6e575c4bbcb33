// The selection kernels (runtime/kernels/SelectionKernels.cpp), compiled
// natively. NonMaxSuppression: ONNX's own examples (expected selections from
// the operator's specification) and random detector-like inputs against a
// plain reference written from the specification (a sort, every pair's
// IoU). NonZero and TopK: positions worked out by hand, and TopK on random
// lines against std::stable_sort.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <random>
#include <vector>

extern "C" void kiln_nms_f32(intptr_t, intptr_t, intptr_t, intptr_t, float, float);
extern "C" void kiln_nonzero_u8(intptr_t, intptr_t, intptr_t);
extern "C" void kiln_topk_f32(intptr_t, intptr_t, intptr_t, intptr_t, intptr_t);

namespace {

intptr_t addr(const void *p) { return reinterpret_cast<intptr_t>(p); }

using Triple = std::array<int64_t, 3>;

/// Runs the kernel; the selected triples, after checking the buffer's
/// layout (count, rows zero past it).
std::vector<Triple> nms(const std::vector<float> &boxes, const std::vector<float> &scores,
                        int64_t batches, int64_t classes, int64_t n, int64_t maxPerClass,
                        float iou, float scoreThreshold, bool center = false) {
  int64_t perClass = std::min(maxPerClass, n);
  int64_t capacity = batches * classes * perClass;
  std::vector<int64_t> out(1 + 3 * capacity + n, -7);
  int64_t params[] = {batches, classes, n, maxPerClass, center ? 1 : 0};
  kiln_nms_f32(addr(params), addr(boxes.data()), addr(scores.data()), addr(out.data()), iou,
               scoreThreshold);
  int64_t count = out[0];
  EXPECT_GE(count, 0);
  EXPECT_LE(count, capacity);
  std::vector<Triple> selected;
  for (int64_t i = 0; i < count; ++i)
    selected.push_back({out[1 + 3 * i], out[2 + 3 * i], out[3 + 3 * i]});
  for (int64_t i = 1 + 3 * count; i < 1 + 3 * capacity; ++i)
    EXPECT_EQ(out[i], 0) << "padding at " << i;
  return selected;
}

/// The ONNX specification's examples share these six boxes: three near
/// (0, 0), two near (0, 10), one at (0, 100).
const std::vector<float> kBoxes = {0, 0, 1, 1,  0, 0.1f, 1, 1.1f,  0, -0.1f, 1, 0.9f,
                                   0, 10, 1, 11, 0, 10.1f, 1, 11.1f, 0, 100, 1, 101};
const std::vector<float> kScores = {0.9f, 0.75f, 0.6f, 0.95f, 0.5f, 0.3f};

TEST(SelectionKernels, SuppressByIou) {
  EXPECT_EQ(nms(kBoxes, kScores, 1, 1, 6, 3, 0.5f, 0.0f),
            (std::vector<Triple>{{0, 0, 3}, {0, 0, 0}, {0, 0, 5}}));
}

TEST(SelectionKernels, SuppressByIouAndScores) {
  EXPECT_EQ(nms(kBoxes, kScores, 1, 1, 6, 3, 0.5f, 0.4f),
            (std::vector<Triple>{{0, 0, 3}, {0, 0, 0}}));
}

TEST(SelectionKernels, LimitAndCenterFormat) {
  EXPECT_EQ(nms(kBoxes, kScores, 1, 1, 6, 2, 0.5f, 0.0f),
            (std::vector<Triple>{{0, 0, 3}, {0, 0, 0}}));
  // The same boxes as [x_center, y_center, width, height].
  std::vector<float> center = {0.5f, 0.5f, 1, 1, 0.5f, 0.6f, 1, 1, 0.5f, 0.4f, 1, 1,
                               0.5f, 10.5f, 1, 1, 0.5f, 10.6f, 1, 1, 0.5f, 100.5f, 1, 1};
  EXPECT_EQ(nms(center, kScores, 1, 1, 6, 3, 0.5f, 0.0f, true),
            (std::vector<Triple>{{0, 0, 3}, {0, 0, 0}, {0, 0, 5}}));
}

TEST(SelectionKernels, IdenticalBoxesAndTiesKeepTheLowestIndex) {
  std::vector<float> boxes(10 * 4), scores(10, 0.9f);
  for (int i = 0; i < 10; ++i) {
    boxes[4 * i + 2] = 1;
    boxes[4 * i + 3] = 1;
  }
  EXPECT_EQ(nms(boxes, scores, 1, 1, 10, 3, 0.5f, 0.0f), (std::vector<Triple>{{0, 0, 0}}));
}

TEST(SelectionKernels, NothingToSelect) {
  EXPECT_TRUE(nms(kBoxes, kScores, 1, 1, 6, 0, 0.5f, 0.0f).empty());
  EXPECT_TRUE(nms(kBoxes, kScores, 1, 1, 6, 3, 0.5f, 0.99f).empty());
}

/// NMS as the specification describes it, written plainly.
std::vector<Triple> reference(const std::vector<float> &boxes, const std::vector<float> &scores,
                              int64_t batches, int64_t classes, int64_t n, int64_t maxPerClass,
                              float iouThreshold, float scoreThreshold) {
  auto iou = [](const float *a, const float *b) {
    float ay0 = std::min(a[0], a[2]), ay1 = std::max(a[0], a[2]);
    float ax0 = std::min(a[1], a[3]), ax1 = std::max(a[1], a[3]);
    float by0 = std::min(b[0], b[2]), by1 = std::max(b[0], b[2]);
    float bx0 = std::min(b[1], b[3]), bx1 = std::max(b[1], b[3]);
    float ih = std::min(ay1, by1) - std::max(ay0, by0);
    float iw = std::min(ax1, bx1) - std::max(ax0, bx0);
    if (ih <= 0 || iw <= 0)
      return 0.0f;
    float inter = ih * iw;
    return inter / ((ay1 - ay0) * (ax1 - ax0) + (by1 - by0) * (bx1 - bx0) - inter);
  };
  std::vector<Triple> out;
  for (int64_t b = 0; b < batches; ++b)
    for (int64_t c = 0; c < classes; ++c) {
      const float *s = &scores[(b * classes + c) * n];
      std::vector<int64_t> order;
      for (int64_t i = 0; i < n; ++i)
        if (s[i] > scoreThreshold)
          order.push_back(i);
      std::sort(order.begin(), order.end(), [&](int64_t x, int64_t y) {
        return s[x] > s[y] || (s[x] == s[y] && x < y);
      });
      std::vector<int64_t> kept;
      for (int64_t i : order) {
        if ((int64_t)kept.size() >= maxPerClass)
          break;
        bool keep = true;
        for (int64_t k : kept)
          keep = keep && !(iou(&boxes[(b * n + i) * 4], &boxes[(b * n + k) * 4]) > iouThreshold);
        if (keep)
          kept.push_back(i);
      }
      for (int64_t k : kept)
        out.push_back({b, c, k});
    }
  return out;
}

TEST(SelectionKernels, RandomDetectionsMatchTheReference) {
  std::mt19937 gen(42);
  std::uniform_real_distribution<float> pos(0, 50), size(2, 12), score(0, 1);
  for (int trial = 0; trial < 20; ++trial) {
    int64_t batches = 1 + trial % 2, classes = 1 + trial % 3, n = 50 + 37 * trial;
    std::vector<float> boxes(batches * n * 4), scores(batches * classes * n);
    for (int64_t i = 0; i < batches * n; ++i) {
      float y = pos(gen), x = pos(gen);
      boxes[4 * i] = y;
      boxes[4 * i + 1] = x;
      boxes[4 * i + 2] = y + size(gen);
      boxes[4 * i + 3] = x + size(gen);
    }
    for (float &s : scores)
      s = score(gen);
    int64_t maxPerClass = trial % 4 == 0 ? n : 10 + trial;
    EXPECT_EQ(nms(boxes, scores, batches, classes, n, maxPerClass, 0.45f, 0.2f),
              reference(boxes, scores, batches, classes, n, maxPerClass, 0.45f, 0.2f))
        << "trial " << trial;
  }
}

TEST(SelectionKernels, NonZeroCoordinatesAndPadding) {
  // [[1, 0, 1], [0, 0, 1]]: entries (0, 0), (0, 2), (1, 2).
  const unsigned char mask[] = {1, 0, 1, 0, 0, 1};
  int64_t params[] = {6, 2, 2, 3};
  std::vector<int64_t> out(1 + 2 * 6, -7);
  kiln_nonzero_u8(addr(params), addr(mask), addr(out.data()));
  EXPECT_EQ(out, (std::vector<int64_t>{3, 0, 0, 1, 0, 0, 0, 0, 2, 2, 0, 0, 0}));
  const unsigned char none[] = {0, 0, 0, 0, 0, 0};
  kiln_nonzero_u8(addr(params), addr(none), addr(out.data()));
  EXPECT_EQ(out, std::vector<int64_t>(13, 0));
}

} // namespace

namespace {

/// kiln_topk_f32 on `in` seen as [outer][dim][inner]: the positions it
/// writes, after checking that the scratch follows them untouched in size.
std::vector<int64_t> topK(const std::vector<float> &in, int64_t outer, int64_t dim,
                          int64_t inner, int64_t capacity, bool largest, int64_t k,
                          int64_t valid) {
  std::vector<int64_t> out(outer * capacity * inner + dim, -7);
  int64_t params[] = {outer, dim, inner, capacity, largest ? 1 : 0};
  kiln_topk_f32(addr(params), addr(in.data()), addr(&k), addr(&valid), addr(out.data()));
  out.resize(outer * capacity * inner);
  return out;
}

} // namespace

// The valid prefix only: 9.0 at position 4 is padding.
TEST(SelectionKernels, TopKOfValidEntries) {
  std::vector<float> x = {0.5f, 0.9f, 0.1f, 0.7f, 9.0f};
  EXPECT_EQ(topK(x, 1, 5, 1, 3, true, 3, 4), (std::vector<int64_t>{1, 3, 0}));
  // Fewer valid entries than k: the rest of the capacity is zero.
  EXPECT_EQ(topK(x, 1, 5, 1, 3, true, 3, 2), (std::vector<int64_t>{1, 0, 0}));
  // Smallest first; k below the capacity.
  EXPECT_EQ(topK(x, 1, 5, 1, 4, false, 2, 5), (std::vector<int64_t>{2, 0, 0, 0}));
  // Nothing valid, or k = 0.
  EXPECT_EQ(topK(x, 1, 5, 1, 2, true, 2, 0), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(topK(x, 1, 5, 1, 2, true, 0, 5), (std::vector<int64_t>{0, 0}));
}

// Ties keep the lower position first, as ONNX Runtime orders them.
TEST(SelectionKernels, TopKTies) {
  std::vector<float> x = {1, 2, 2, 1, 2};
  EXPECT_EQ(topK(x, 1, 5, 1, 4, true, 4, 5), (std::vector<int64_t>{1, 2, 4, 0}));
  EXPECT_EQ(topK(x, 1, 5, 1, 3, false, 3, 5), (std::vector<int64_t>{0, 3, 1}));
}

// Along a middle axis ([2][6][3]) of random lines, against std::stable_sort.
TEST(SelectionKernels, TopKMiddleAxis) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> value(0, 9); // with ties
  int64_t outer = 2, dim = 6, inner = 3, capacity = 4, k = 4, valid = 5;
  std::vector<float> x(outer * dim * inner);
  for (float &v : x)
    v = (float)value(rng);
  for (bool largest : {true, false}) {
    std::vector<int64_t> got = topK(x, outer, dim, inner, capacity, largest, k, valid);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t c = 0; c < inner; ++c) {
        auto at = [&](int64_t i) { return x[(o * dim + i) * inner + c]; };
        std::vector<int64_t> order(valid);
        for (int64_t i = 0; i < valid; ++i)
          order[i] = i;
        std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
          return largest ? at(a) > at(b) : at(a) < at(b);
        });
        for (int64_t j = 0; j < capacity; ++j)
          EXPECT_EQ(got[(o * capacity + j) * inner + c], order[j])
              << "line " << o << "," << c << " slot " << j << (largest ? " largest" : " smallest");
      }
  }
}
