// kiln.random_uniform_like: the numbers must look uniform (moments and a
// chi-square test over 64 bins on 2^16 draws, with bounds far outside
// what a good generator misses), stay inside [low, high), repeat for a
// seed and change with it. The ops built on it (RandomNormal(Like),
// RandomUniform, Multinomial) must follow their distributions.
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

// RandomNormalLike and RandomUniform through the importer (a model built
// in memory): Box-Muller normals with the requested mean and scale, and
// uniform numbers of a shape attribute.
#include "kiln/Kiln.h"
#include "onnx/onnx_pb.h"

namespace {

std::string randomModel(const std::string &op, bool likeInput) {
  onnx::ModelProto m;
  m.set_ir_version(7);
  m.add_opset_import()->set_version(13);
  auto *g = m.mutable_graph();
  g->set_name("g");
  auto *node = g->add_node();
  node->set_op_type(op);
  node->add_output("y");
  auto addFloat = [&](const char *name, float v) {
    auto *a = node->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  };
  auto shapeOf = [](onnx::ValueInfoProto *v, int64_t n) {
    auto *t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    t->mutable_shape()->add_dim()->set_dim_value(n);
  };
  if (likeInput) {
    node->add_input("x");
    addFloat("mean", 1.0f);
    addFloat("scale", 2.0f);
    auto *in = g->add_input();
    in->set_name("x");
    shapeOf(in, kDraws);
  } else {
    auto *a = node->add_attribute();
    a->set_name("shape");
    a->set_type(onnx::AttributeProto::INTS);
    a->add_ints(kDraws);
    addFloat("low", 2.0f);
    addFloat("high", 3.0f);
  }
  auto *out = g->add_output();
  out->set_name("y");
  shapeOf(out, kDraws);
  std::string bytes;
  m.SerializeToString(&bytes);
  return bytes;
}

std::vector<float> runRandomModel(const std::string &bytes, bool likeInput) {
  std::string err;
  auto model = kiln::Model::loadFromMemory(bytes.data(), bytes.size(), "", {}, &err);
  EXPECT_TRUE(model) << err;
  if (!model)
    return {};
  std::vector<kiln::Tensor> inputs;
  std::vector<const kiln_tensor *> raw;
  if (likeInput) {
    inputs.emplace_back(KILN_FLOAT32, std::vector<int64_t>{kDraws});
    raw.push_back(inputs.back().get());
  }
  std::vector<kiln::Tensor> out;
  kiln::Status s = model->run(raw, out);
  EXPECT_TRUE(s.ok()) << s.message;
  if (!s.ok())
    return {};
  return std::vector<float>(out[0].data<float>(), out[0].data<float>() + kDraws);
}

TEST(RandomNormal, MeanScaleAndShape) {
  std::vector<float> z = runRandomModel(randomModel("RandomNormalLike", true), true);
  ASSERT_EQ(z.size(), (size_t)kDraws);
  double sum = 0, sumSq = 0;
  int64_t withinOne = 0;
  for (float v : z) {
    ASSERT_TRUE(std::isfinite(v));
    sum += v;
    sumSq += (double)v * v;
    withinOne += std::fabs(v - 1.0f) < 2.0f;
  }
  double mean = sum / kDraws, sd = std::sqrt(sumSq / kDraws - mean * mean);
  // Standard errors: 2/sqrt(n) = 0.008 for the mean, ~0.006 for the sd.
  EXPECT_NEAR(mean, 1.0, 0.04);
  EXPECT_NEAR(sd, 2.0, 0.03);
  // P(|z| < 1) = 0.6827 for a normal; standard error 0.0018.
  EXPECT_NEAR((double)withinOne / kDraws, 0.6827, 0.01);
}

TEST(RandomUniform, ShapeAttribute) {
  std::vector<float> u = runRandomModel(randomModel("RandomUniform", false), false);
  ASSERT_EQ(u.size(), (size_t)kDraws);
  auto [lo, hi] = std::minmax_element(u.begin(), u.end());
  EXPECT_GE(*lo, 2.0f);
  EXPECT_LT(*hi, 3.0f);
  EXPECT_LT(*lo, 2.01f);
  EXPECT_GT(*hi, 2.99f);
}

} // namespace

namespace {

/// Multinomial over logits log([0.2, 0.3, 0.5]) (one row), 20000 draws.
std::vector<int64_t> multinomialDraws() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  auto *g = m.mutable_graph();
  g->set_name("g");
  auto *node = g->add_node();
  node->set_op_type("Multinomial");
  node->add_input("x");
  node->add_output("y");
  auto *size = node->add_attribute();
  size->set_name("sample_size");
  size->set_type(onnx::AttributeProto::INT);
  size->set_i(20000);
  auto *dtype = node->add_attribute();
  dtype->set_name("dtype");
  dtype->set_type(onnx::AttributeProto::INT);
  dtype->set_i(onnx::TensorProto::INT64);
  auto *in = g->add_input();
  in->set_name("x");
  in->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  in->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(1);
  in->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(3);
  auto *out = g->add_output();
  out->set_name("y");
  out->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::INT64);
  out->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(1);
  out->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(20000);
  std::string bytes = m.SerializeAsString(), err;
  auto model = kiln::Model::loadFromMemory(bytes.data(), bytes.size(), "", {}, &err);
  EXPECT_TRUE(model) << err;
  if (!model)
    return {};
  kiln::Tensor x(KILN_FLOAT32, {1, 3});
  const float logits[] = {std::log(0.2f), std::log(0.3f), std::log(0.5f)};
  std::copy(logits, logits + 3, x.data<float>());
  std::vector<kiln::Tensor> y;
  kiln::Status s = model->run({x.get()}, y);
  EXPECT_TRUE(s.ok()) << s.message;
  if (!s.ok())
    return {};
  return std::vector<int64_t>(y[0].data<int64_t>(), y[0].data<int64_t>() + y[0].numElements());
}

} // namespace

TEST(Multinomial, FrequenciesFollowTheSoftmax) {
  std::vector<int64_t> draws = multinomialDraws();
  ASSERT_EQ(draws.size(), 20000u);
  int64_t counts[3] = {0, 0, 0};
  for (int64_t d : draws) {
    ASSERT_GE(d, 0);
    ASSERT_LE(d, 2);
    ++counts[d];
  }
  // Standard errors sqrt(p (1 - p) / n) <= 0.0036; 5 of them each way.
  const double p[] = {0.2, 0.3, 0.5};
  for (int c = 0; c < 3; ++c)
    EXPECT_NEAR(counts[c] / 20000.0, p[c], 0.018) << "class " << c;
}
