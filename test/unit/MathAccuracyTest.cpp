// Accuracy of the vector polynomial approximations that replace libm calls
// in generated loops (kiln-approximate-math: exp, erf, tanh; Sigmoid is
// lowered through exp). Each kiln op is compiled through the real pipeline
// and run on 2^20 evenly spaced points of the range where the function is
// not saturated, plus special values, and compared with the C library in
// double precision.
//
// Stated bounds (maximum relative error, |got - ref| / max(|ref|, 1e-30),
// measured on the AVX-512 development machine in parentheses; float's own
// rounding is 6e-8):
//   exp      x in [-87, 88]     <= 5e-7   (8.2e-8)
//   tanh     x in [-10, 10]     <= 1e-6   (2.7e-7)
//   erf      x in [-4, 4]       <= 1e-6   (2.7e-7)
//   sigmoid  x in [-80, 80]     <= 5e-7   (1.4e-7)
// Outside those ranges the results saturate: exp underflows to 0 (or a
// denormal) and overflows to +inf, tanh and erf reach +-1, sigmoid 0 and 1;
// NaN stays NaN.
#include "JitTestSupport.h"

#include <cmath>
#include <functional>
#include <limits>

namespace {

constexpr int64_t kPoints = 1 << 20;

/// Compiles `y = kiln.OP(x)` over N floats and runs it on `x`.
std::vector<float> run(const std::string &op, const std::vector<float> &x) {
  std::string n = std::to_string(x.size());
  std::string source = "func.func @main(%x: tensor<" + n + "xf32>) -> tensor<" + n +
                       "xf32> {\n  %y = kiln." + op + " %x : (tensor<" + n +
                       "xf32>) -> tensor<" + n + "xf32>\n  return %y : tensor<" + n +
                       "xf32>\n}\n";
  kiln::testing::Jitted code = kiln::testing::jit(kiln::testing::lower(source), 3);
  std::vector<float> y(x.size(), 0.0f);
  if (!code.entry)
    return y;
  void *buffers[] = {const_cast<float *>(x.data()), y.data(), nullptr};
  code.entry(buffers);
  return y;
}

std::vector<float> sweep(double lo, double hi) {
  std::vector<float> x(kPoints);
  for (int64_t i = 0; i < kPoints; ++i)
    x[i] = (float)(lo + (hi - lo) * (double)i / (double)(kPoints - 1));
  return x;
}

/// Maximum relative error of `op` against `ref` over [lo, hi].
double maxRelativeError(const std::string &op, double lo, double hi,
                        const std::function<double(double)> &ref, float *worstAt) {
  std::vector<float> x = sweep(lo, hi);
  std::vector<float> y = run(op, x);
  double worst = 0;
  for (int64_t i = 0; i < kPoints; ++i) {
    double r = ref((double)x[i]);
    double err = std::fabs((double)y[i] - r) / std::max(std::fabs(r), 1e-30);
    if (!(err <= worst)) { // NaN counts as the worst
      worst = std::isnan(err) ? INFINITY : err;
      *worstAt = x[i];
    }
  }
  return worst;
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

TEST(MathAccuracy, Exp) {
  float at = 0;
  double err = maxRelativeError("exp", -87.0, 88.0, [](double x) { return std::exp(x); }, &at);
  std::printf("exp: max relative error %.3g at x = %.9g\n", err, at);
  EXPECT_LE(err, 5e-7) << "at x = " << at;
}

TEST(MathAccuracy, Tanh) {
  float at = 0;
  double err = maxRelativeError("tanh", -10.0, 10.0, [](double x) { return std::tanh(x); }, &at);
  std::printf("tanh: max relative error %.3g at x = %.9g\n", err, at);
  EXPECT_LE(err, 1e-6) << "at x = " << at;
}

TEST(MathAccuracy, Erf) {
  float at = 0;
  double err = maxRelativeError("erf", -4.0, 4.0, [](double x) { return std::erf(x); }, &at);
  std::printf("erf: max relative error %.3g at x = %.9g\n", err, at);
  EXPECT_LE(err, 1e-6) << "at x = " << at;
}

TEST(MathAccuracy, Sigmoid) {
  float at = 0;
  double err = maxRelativeError("sigmoid", -80.0, 80.0, sigmoid, &at);
  std::printf("sigmoid: max relative error %.3g at x = %.9g\n", err, at);
  EXPECT_LE(err, 5e-7) << "at x = " << at;
}

TEST(MathAccuracy, SaturationAndSpecialValues) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  std::vector<float> x{-inf, -1e30f, -200.0f, -100.0f, -0.0f, 0.0f, 1e-30f, 100.0f, 1e30f, inf,
                       nan};
  std::vector<float> e = run("exp", x), t = run("tanh", x), f = run("erf", x),
                     s = run("sigmoid", x);
  for (size_t i = 0; i < x.size(); ++i) {
    SCOPED_TRACE("x = " + std::to_string(x[i]));
    if (std::isnan(x[i])) {
      EXPECT_TRUE(std::isnan(e[i]));
      EXPECT_TRUE(std::isnan(t[i]));
      EXPECT_TRUE(std::isnan(f[i]));
      EXPECT_TRUE(std::isnan(s[i]));
      continue;
    }
    double ex = std::exp((double)x[i]);
    if (ex > 3.4e38)
      EXPECT_EQ(e[i], inf);
    else
      EXPECT_NEAR(e[i], ex, 1e-6 * ex + 1e-37);
    EXPECT_NEAR(t[i], std::tanh((double)x[i]), 1e-6);
    EXPECT_NEAR(f[i], std::erf((double)x[i]), 1e-6);
    EXPECT_NEAR(s[i], sigmoid((double)x[i]), 1e-6);
  }
}

} // namespace
