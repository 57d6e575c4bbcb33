// The row kernels (runtime/kernels/RowKernels.cpp), compiled natively for each
// vector width, against double-precision references: softmax, log-softmax
// and layer normalisation on row lengths that exercise every tail, with
// masked (-inf) and NaN inputs, and the vector exp against the C library.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

extern "C" {
void kiln_softmax_f32(intptr_t, intptr_t, intptr_t, float);
void kiln_layer_norm_f32(intptr_t, intptr_t, intptr_t, intptr_t, intptr_t, float);
}

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

intptr_t addr(const void *p) { return reinterpret_cast<intptr_t>(p); }

std::vector<float> randoms(size_t n, unsigned seed, float scale) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(-scale, scale);
  std::vector<float> v(n);
  for (float &x : v)
    x = d(gen);
  return v;
}

std::vector<float> softmax(const std::vector<float> &x, int64_t rows, int64_t n, bool log,
                           float scale = 1.0f) {
  std::vector<float> y(x.size(), -1.0f);
  int64_t params[] = {rows, n, log ? 1 : 0};
  kiln_softmax_f32(addr(params), addr(x.data()), addr(y.data()), scale);
  return y;
}

std::vector<double> softmaxReference(const std::vector<float> &x, int64_t rows, int64_t n,
                                     bool log, double scale = 1.0) {
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = x.data() + r * n;
    double mx = -INFINITY, sum = 0;
    for (int64_t i = 0; i < n; ++i)
      mx = std::max(mx, scale * row[i]);
    for (int64_t i = 0; i < n; ++i)
      sum += std::exp(scale * row[i] - mx);
    for (int64_t i = 0; i < n; ++i)
      y[r * n + i] =
          log ? scale * row[i] - mx - std::log(sum) : std::exp(scale * row[i] - mx) / sum;
  }
  return y;
}

const int64_t kLengths[] = {1, 2, 15, 16, 17, 31, 33, 64, 77, 128, 1000};

TEST(RowKernels, SoftmaxMatchesDoubleReference) {
  for (int64_t n : kLengths)
    for (int64_t rows : {1, 3, 70}) {
      auto x = randoms(rows * n, 7 * n + rows, 12.0f);
      auto got = softmax(x, rows, n, false);
      auto want = softmaxReference(x, rows, n, false);
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_NEAR(got[i], want[i], 2e-6 * want[i] + 1e-12)
            << "n " << n << " rows " << rows << " index " << i;
    }
}

TEST(RowKernels, LogSoftmaxMatchesDoubleReference) {
  for (int64_t n : kLengths)
    for (int64_t rows : {1, 4, 70}) {
      auto x = randoms(rows * n, 11 * n + rows, 30.0f);
      auto got = softmax(x, rows, n, true);
      auto want = softmaxReference(x, rows, n, true);
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_NEAR(got[i], want[i], 2e-6 * std::fabs(want[i]) + 2e-6)
            << "n " << n << " rows " << rows << " index " << i;
    }
}

// Attention's scores times 1/sqrt(d), folded into the softmax.
TEST(RowKernels, ScaledSoftmaxAndLogSoftmax) {
  for (int64_t n : {7, 64, 129})
    for (bool log : {false, true}) {
      int64_t rows = 9;
      auto x = randoms(rows * n, 23 * n + log, 40.0f);
      auto got = softmax(x, rows, n, log, 0.125f);
      auto want = softmaxReference(x, rows, n, log, 0.125);
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_NEAR(got[i], want[i], 2e-6 * std::fabs(want[i]) + (log ? 2e-6 : 1e-12))
            << "n " << n << " log " << log << " index " << i;
    }
}

// Enough rows for the call to split over the thread pool when one is
// attached (the kernel test binary attaches one for every test).
TEST(RowKernels, ManyRowsSplitAcrossThreads) {
  int64_t rows = 2000, n = 300;
  auto x = randoms(rows * n, 5, 8.0f);
  auto got = softmax(x, rows, n, false);
  auto want = softmaxReference(x, rows, n, false);
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 2e-6 * want[i] + 1e-12) << "index " << i;
}

// Attention masks add -inf: those positions get exactly 0. A NaN makes its
// row NaN; a row that is all -inf is NaN too (-inf - -inf), as the ONNX
// definition computes it.
TEST(RowKernels, SoftmaxOfMaskedAndNaNRows) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  int64_t n = 19;
  std::vector<float> x(3 * n, 0.5f);
  for (int64_t i = 0; i < n; i += 2)
    x[i] = -kInf;
  x[n + 17] = nan;
  for (int64_t i = 0; i < n; ++i)
    x[2 * n + i] = -kInf;
  auto y = softmax(x, 3, n, false);
  for (int64_t i = 0; i < n; ++i) {
    if (i % 2 == 0)
      EXPECT_EQ(y[i], 0.0f) << i;
    else
      EXPECT_NEAR(y[i], 1.0f / 9, 1e-7) << i;
    EXPECT_TRUE(std::isnan(y[n + i])) << i;
    EXPECT_TRUE(std::isnan(y[2 * n + i])) << i;
  }
}

// softmax([0, x]) = [1, e^x] / (1 + e^x): the ratio of the two outputs is
// the kernel's e^x (to one rounding of the division). Over every x where
// e^x is a normal float, against the C library's expf.
TEST(RowKernels, VectorExpAgainstTheCLibrary) {
  std::vector<float> xs;
  for (float x = -87.0f; x <= 0.0f; x += 0.0009765625f)
    xs.push_back(x);
  std::vector<float> in(2 * xs.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    in[2 * i] = 0.0f;
    in[2 * i + 1] = xs[i];
  }
  auto y = softmax(in, xs.size(), 2, false);
  double worst = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    double got = (double)y[2 * i + 1] / y[2 * i], want = std::exp((double)xs[i]);
    worst = std::max(worst, std::fabs(got - want) / want);
  }
  // 2 ulp (2.4e-7) for exp, one for the division, one for each output.
  EXPECT_LT(worst, 5e-7) << "largest relative error of exp";
  std::printf("vector exp: largest relative error %.3g over [-87, 0]\n", worst);
}

std::vector<double> layerNormReference(const std::vector<float> &x, int64_t rows, int64_t n,
                                       const float *scale, const float *bias, float eps) {
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = x.data() + r * n;
    double mean = 0, var = 0;
    for (int64_t i = 0; i < n; ++i)
      mean += row[i];
    mean /= n;
    for (int64_t i = 0; i < n; ++i)
      var += (row[i] - mean) * (row[i] - mean);
    var /= n;
    for (int64_t i = 0; i < n; ++i) {
      double v = (row[i] - mean) / std::sqrt(var + eps);
      y[r * n + i] = v * (scale ? scale[i] : 1.0) + (bias ? bias[i] : 0.0);
    }
  }
  return y;
}

TEST(RowKernels, LayerNormMatchesDoubleReference) {
  for (int64_t n : kLengths)
    for (int flags : {0, 2, 4, 6})
      for (int64_t rows : {1, 5, 600}) {
        // An offset: the variance must not cancel (E[x^2] - mean^2 would).
        // Not for the shortest rows, whose deviations can be as small as
        // the offset's rounding.
        auto x = randoms(rows * n, 3 * n + rows + flags, 2.0f);
        for (float &v : x)
          v += n >= 15 ? 100.0f : 0.0f;
        auto scale = randoms(n, 17, 1.5f), bias = randoms(n, 19, 1.0f);
        std::vector<float> y(x.size(), -1.0f);
        int64_t params[] = {rows, n, flags};
        float eps = 1e-5f;
        kiln_layer_norm_f32(addr(params), addr(x.data()), addr(scale.data()), addr(bias.data()),
                            addr(y.data()), eps);
        auto want = layerNormReference(x, rows, n, flags & 2 ? scale.data() : nullptr,
                                       flags & 4 ? bias.data() : nullptr, eps);
        for (size_t i = 0; i < y.size(); ++i)
          ASSERT_NEAR(y[i], want[i], 1e-4 + 1e-4 * std::fabs(want[i]))
              << "n " << n << " flags " << flags << " rows " << rows << " index " << i;
      }
}

} // namespace
