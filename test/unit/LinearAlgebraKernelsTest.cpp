// kiln_det_f32 (runtime/kernels/LinearAlgebraKernels.cpp), compiled natively:
// determinants worked out by hand (triangular, permuted, singular) and
// random matrices against the Leibniz formula in double.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

extern "C" void kiln_det_f32(intptr_t, intptr_t, intptr_t);

namespace {

intptr_t addr(const void *p) { return reinterpret_cast<intptr_t>(p); }

std::vector<float> dets(const std::vector<float> &matrices, int64_t n) {
  int64_t count = matrices.size() / (n * n);
  std::vector<float> out(count, -99.0f);
  int64_t params[] = {count, n};
  kiln_det_f32(addr(params), addr(matrices.data()), addr(out.data()));
  return out;
}

TEST(LinearAlgebraKernels, DetByHand) {
  // Upper triangular 5x5 with diagonal 1..5: 120. The same with rows 0 and
  // 1 swapped: -120. A repeated row: 0.
  std::vector<float> a(25, 0.0f);
  for (int i = 0; i < 5; ++i)
    for (int j = i; j < 5; ++j)
      a[i * 5 + j] = i == j ? float(i + 1) : 0.5f;
  std::vector<float> swapped = a;
  std::swap_ranges(swapped.begin(), swapped.begin() + 5, swapped.begin() + 5);
  std::vector<float> singular = a;
  std::copy(singular.begin(), singular.begin() + 5, singular.begin() + 10);
  std::vector<float> all = a;
  all.insert(all.end(), swapped.begin(), swapped.end());
  all.insert(all.end(), singular.begin(), singular.end());
  std::vector<float> d = dets(all, 5);
  EXPECT_FLOAT_EQ(d[0], 120.0f);
  EXPECT_FLOAT_EQ(d[1], -120.0f);
  EXPECT_NEAR(d[2], 0.0f, 1e-5);
}

/// sum over permutations p of sign(p) prod_i a[i, p(i)].
double leibniz(const float *a, int n) {
  std::vector<int> p(n);
  std::iota(p.begin(), p.end(), 0);
  double sum = 0;
  do {
    int inversions = 0;
    for (int i = 0; i < n; ++i)
      for (int j = i + 1; j < n; ++j)
        inversions += p[i] > p[j];
    double term = inversions % 2 ? -1.0 : 1.0;
    for (int i = 0; i < n; ++i)
      term *= a[i * n + p[i]];
    sum += term;
  } while (std::next_permutation(p.begin(), p.end()));
  return sum;
}

TEST(LinearAlgebraKernels, DetMatchesLeibniz) {
  std::mt19937 gen(5);
  std::uniform_real_distribution<float> d(-2, 2);
  for (int n : {5, 6, 7}) {
    std::vector<float> m(4 * n * n);
    for (float &x : m)
      x = d(gen);
    std::vector<float> got = dets(m, n);
    for (int b = 0; b < 4; ++b) {
      double ref = leibniz(&m[b * n * n], n);
      EXPECT_NEAR(got[b], ref, 1e-5 * std::max(1.0, std::fabs(ref))) << n << "x" << n << " #" << b;
    }
  }
}

} // namespace
