// Masked attention over dims known only at run time (batch, queries,
// keys): a padding mask added to the scores, or a causal mask as
// masked_fill (Where). One compile serves every shape, through the fused
// kernel (kiln_attention_mask_f32) up to KILN_ATTENTION_MAX_KEYS keys and
// through three kernel calls with the mask applied in between beyond, each
// against a double-precision reference computed here.
#include "kiln/Kiln.h"
#include "kiln/kernels.h"
#include "onnx/onnx_pb.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace {

constexpr int64_t kHeads = 2, kDepth = 4;
constexpr float kQkScale = 0.5f;

onnx::NodeProto *node(onnx::GraphProto *g, const std::string &op, const std::string &name,
                      std::vector<std::string> inputs, const std::string &output) {
  onnx::NodeProto *n = g->add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (const std::string &i : inputs)
    n->add_input(i);
  n->add_output(output);
  return n;
}

enum class MaskForm {
  /// softmax(0.5 * q k^T + mask), mask [b, 1, 1, n] (as BERT exports add
  /// a padding mask).
  Padding,
  /// softmax(Where(cond, -inf, 0.5 * q k^T)), cond [m, n] (as decoders
  /// export masked_fill with a causal mask).
  CausalWhere,
};

/// o = softmax(masked scores) v over q [b, 2, m, 4], k and v [b, 2, n, 4],
/// with b, m and n named dims.
std::string maskedAttentionModelBytes(MaskForm form) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  onnx::GraphProto *g = m.mutable_graph();
  g->set_name("masked_attention");
  onnx::TensorProto *c = g->add_initializer();
  c->set_name("qk_scale");
  c->set_data_type(onnx::TensorProto::FLOAT);
  c->add_float_data(kQkScale);
  onnx::NodeProto *t = node(g, "Transpose", "keys_t", {"k"}, "kt");
  onnx::AttributeProto *perm = t->add_attribute();
  perm->set_name("perm");
  perm->set_type(onnx::AttributeProto::INTS);
  for (int64_t p : {0, 1, 3, 2})
    perm->add_ints(p);
  node(g, "MatMul", "scores", {"q", "kt"}, "s");
  node(g, "Mul", "scaled", {"s", "qk_scale"}, "s2");
  if (form == MaskForm::Padding) {
    node(g, "Add", "masked", {"s2", "mask"}, "s3");
  } else {
    onnx::TensorProto *ninf = g->add_initializer();
    ninf->set_name("ninf");
    ninf->set_data_type(onnx::TensorProto::FLOAT);
    ninf->add_float_data(-INFINITY);
    node(g, "Where", "masked", {"mask", "ninf", "s2"}, "s3");
  }
  onnx::NodeProto *sm = node(g, "Softmax", "probs", {"s3"}, "p");
  onnx::AttributeProto *axis = sm->add_attribute();
  axis->set_name("axis");
  axis->set_type(onnx::AttributeProto::INT);
  axis->set_i(-1);
  node(g, "MatMul", "context", {"p", "v"}, "o");
  auto value = [](onnx::ValueInfoProto *v, const std::string &name,
                  std::vector<std::string> dims,
                  onnx::TensorProto::DataType type = onnx::TensorProto::FLOAT) {
    v->set_name(name);
    auto *tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(type);
    for (const std::string &d : dims) {
      if (std::isdigit((unsigned char)d[0]))
        tt->mutable_shape()->add_dim()->set_dim_value(std::stoll(d));
      else
        tt->mutable_shape()->add_dim()->set_dim_param(d);
    }
  };
  value(g->add_input(), "q", {"b", "2", "m", "4"});
  value(g->add_input(), "k", {"b", "2", "n", "4"});
  value(g->add_input(), "v", {"b", "2", "n", "4"});
  if (form == MaskForm::Padding)
    value(g->add_input(), "mask", {"b", "1", "1", "n"});
  else
    value(g->add_input(), "mask", {"m", "n"}, onnx::TensorProto::BOOL);
  value(g->add_output(), "o", {"b", "2", "m", "4"});
  std::string bytes;
  m.SerializeToString(&bytes);
  return bytes;
}

/// Runs the model at (b, m, n) and compares with the softmax computed in
/// double. Padding: sequence i's last i * 3 + 1 keys padded (-inf in the
/// mask); causal: query i sees keys up to i + n - m.
void checkShape(kiln::Model &model, MaskForm form, int64_t b, int64_t m, int64_t n) {
  kiln::Tensor q(KILN_FLOAT32, {b, kHeads, m, kDepth}), k(KILN_FLOAT32, {b, kHeads, n, kDepth}),
      v(KILN_FLOAT32, {b, kHeads, n, kDepth}),
      mask = form == MaskForm::Padding ? kiln::Tensor(KILN_FLOAT32, {b, 1, 1, n})
                                       : kiln::Tensor(KILN_BOOL, {m, n});
  for (int64_t i = 0; i < q.numElements(); ++i)
    q.data<float>()[i] = std::cos(0.37f * (float)i);
  for (int64_t i = 0; i < k.numElements(); ++i) {
    k.data<float>()[i] = std::sin(0.11f * (float)i);
    v.data<float>()[i] = std::cos(0.23f * (float)i + 1.0f);
  }
  // The additive mask of (sequence s, query i, key j).
  auto maskAt = [&](int64_t s, int64_t i, int64_t j) -> double {
    if (form == MaskForm::Padding)
      return j >= n - (s * 3 + 1) ? -INFINITY : 0.0;
    return j > i + n - m ? -INFINITY : 0.0;
  };
  if (form == MaskForm::Padding) {
    for (int64_t s = 0; s < b; ++s)
      for (int64_t j = 0; j < n; ++j)
        mask.data<float>()[s * n + j] = (float)maskAt(s, 0, j);
  } else {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        mask.data<uint8_t>()[i * n + j] = maskAt(0, i, j) != 0.0;
  }
  std::vector<kiln::Tensor> out;
  kiln::Status st = model.run({q.get(), k.get(), v.get(), mask.get()}, out);
  ASSERT_TRUE(st.ok()) << st.message;
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].dims(), (std::vector<int64_t>{b, kHeads, m, kDepth}));
  const float *o = out[0].data<float>();
  int64_t wrong = 0;
  for (int64_t s = 0; s < b; ++s)
    for (int64_t h = 0; h < kHeads; ++h)
      for (int64_t i = 0; i < m; ++i) {
        const float *qi = q.data<float>() + ((s * kHeads + h) * m + i) * kDepth;
        const float *kb = k.data<float>() + (s * kHeads + h) * n * kDepth;
        const float *vb = v.data<float>() + (s * kHeads + h) * n * kDepth;
        std::vector<double> e(n);
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < n; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < kDepth; ++d)
            dot += (double)qi[d] * kb[j * kDepth + d];
          e[j] = kQkScale * dot + maskAt(s, i, j);
          mx = std::max(mx, e[j]);
        }
        for (int64_t j = 0; j < n; ++j)
          sum += (e[j] = std::exp(e[j] - mx));
        for (int64_t d = 0; d < kDepth; ++d) {
          double want = 0;
          for (int64_t j = 0; j < n; ++j)
            want += e[j] / sum * vb[j * kDepth + d];
          float got = o[((s * kHeads + h) * m + i) * kDepth + d];
          if (!(std::fabs(got - want) <= 1e-5 + 1e-4 * std::fabs(want)) && wrong++ < 5)
            ADD_FAILURE() << "b=" << b << " m=" << m << " n=" << n << " at (" << s << ", " << h
                          << ", " << i << ", " << d << "): " << got << ", want " << want;
        }
      }
  EXPECT_EQ(wrong, 0);
}

void checkForm(MaskForm form) {
  std::string bytes = maskedAttentionModelBytes(form), err;
  auto model = kiln::Model::loadFromMemory(bytes.data(), bytes.size(), "", {}, &err);
  ASSERT_TRUE(model) << err;
  checkShape(*model, form, 1, 3, 5);
  checkShape(*model, form, 2, 7, 37);
  checkShape(*model, form, 3, 1, 9); // one query: a decoder's step
  // More keys than the fused kernel's scores block holds: the product,
  // the mask, the softmax and the product in memory.
  checkShape(*model, form, 2, 2, KILN_ATTENTION_MAX_KEYS + 5);
  EXPECT_EQ(model->stats().compilations, 1);
}

} // namespace

TEST(DynamicAttention, PaddingMaskOverRunTimeDimsWithOneCompile) {
  checkForm(MaskForm::Padding);
}
TEST(DynamicAttention, CausalWhereOverRunTimeDimsWithOneCompile) {
  checkForm(MaskForm::CausalWhere);
}
