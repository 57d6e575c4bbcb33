// kiln.random_uniform_like: the numbers must look uniform (moments and a
// chi-square test over 64 bins on 2^16 draws, with bounds far outside
// what a good generator misses), stay inside [low, high), repeat for a
// seed and change with it.
#include "JitTestSupport.h"

#include <algorithm>
#include <cmath>

namespace {

constexpr int64_t kDraws = 1 << 16;

std::string source(int64_t seed, double low, double high) {
  return "func.func @main(%x: tensor<65536xf32>) -> tensor<65536xf32> {\n"
         "  %u = kiln.random_uniform_like %x {dtype = f32, low = " +
         std::to_string(low) + " : f64, high = " + std::to_string(high) +
         " : f64, seed = " + std::to_string(seed) +
         " : i64} : (tensor<65536xf32>) -> tensor<65536xf32>\n"
         "  return %u : tensor<65536xf32>\n}\n";
}

std::vector<float> draw(int64_t seed, double low = 0.0, double high = 1.0) {
  kiln::testing::Lowered lowered = kiln::testing::lower(source(seed, low, high));
  kiln::testing::Jitted code = kiln::testing::jit(std::move(lowered), 2);
  std::vector<float> x(kDraws, 0.0f), y(kDraws, -1.0f);
  if (!code.entry)
    return y;
  alignas(64) static char scratch[1 << 16];
  void *buffers[] = {x.data(), y.data(), scratch};
  code.entry(buffers);
  return y;
}

TEST(RandomUniform, LooksUniform) {
  std::vector<float> u = draw(7);
  double sum = 0, sumSq = 0;
  std::vector<int64_t> bins(64, 0);
  for (float v : u) {
    ASSERT_GE(v, 0.0f);
    ASSERT_LT(v, 1.0f);
    sum += v;
    sumSq += (double)v * v;
    ++bins[std::min<int64_t>(63, (int64_t)(v * 64))];
  }
  double mean = sum / kDraws, var = sumSq / kDraws - mean * mean;
  // Standard errors: 1/sqrt(12 n) = 0.0011 for the mean, ~0.0003 for the
  // variance; these bounds are about 5 of them.
  EXPECT_NEAR(mean, 0.5, 0.006);
  EXPECT_NEAR(var, 1.0 / 12, 0.0015);
  double expected = (double)kDraws / 64, chi2 = 0;
  for (int64_t b : bins)
    chi2 += (b - expected) * (b - expected) / expected;
  // 63 degrees of freedom: P(chi2 > 120) < 1e-5.
  EXPECT_LT(chi2, 120.0);
  // Neighbouring elements are not correlated (lag-1 autocorrelation).
  double cov = 0;
  for (int64_t i = 0; i + 1 < kDraws; ++i)
    cov += (u[i] - mean) * (u[i + 1] - mean);
  EXPECT_NEAR(cov / (kDraws - 1) / var, 0.0, 0.02);
}

TEST(RandomUniform, RangeAndSeed) {
  std::vector<float> a = draw(1, -2.0, 3.0), b = draw(1, -2.0, 3.0), c = draw(2, -2.0, 3.0);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  auto [lo, hi] = std::minmax_element(a.begin(), a.end());
  EXPECT_GE(*lo, -2.0f);
  EXPECT_LT(*hi, 3.0f);
  EXPECT_LT(*lo, -1.99f);
  EXPECT_GT(*hi, 2.99f);
}

} // namespace
