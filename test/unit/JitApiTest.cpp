// The C++ JIT API end to end: compile, signature, run, threads, caching.
#include "kiln/Kiln.h"
#include "kiln/TensorIO.h"
#include "onnx/onnx_pb.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <thread>

#ifndef KILN_EXAMPLES_DIR
#error "KILN_EXAMPLES_DIR must be defined"
#endif
#ifndef KILN_SHARED_MODELS_DIR
#error "KILN_SHARED_MODELS_DIR must be defined"
#endif

namespace {

const std::string kTinyMlp = std::string(KILN_EXAMPLES_DIR) + "/tiny_mlp/model.onnx";

/// The tiny MLP by hand: softmax(relu(x W1 + b1) W2) with the weights of
/// examples/tiny_mlp/model.textproto.
std::vector<double> tinyMlpReference(const float x[4]) {
  double h0 = std::max(0.0, x[0] + x[2] + 0.5), h1 = std::max(0.0, x[1] + x[3] - 0.5);
  double l0 = h0 + h1, l1 = -h0 + h1, m = std::max(l0, l1);
  double e0 = std::exp(l0 - m), e1 = std::exp(l1 - m);
  return {e0 / (e0 + e1), e1 / (e0 + e1)};
}

kiln::Tensor input(const float x[4]) {
  kiln::Tensor t(KILN_FLOAT32, {1, 4});
  std::copy(x, x + 4, t.data<float>());
  return t;
}

TEST(JitApi, SignatureAndRun) {
  std::string err;
  auto model = kiln::Model::load(kTinyMlp, {}, &err);
  ASSERT_TRUE(model) << err;
  ASSERT_EQ(model->inputs().size(), 1u);
  EXPECT_EQ(model->inputs()[0].name, "x");
  EXPECT_EQ(model->inputs()[0].dtype, KILN_FLOAT32);
  EXPECT_EQ(model->inputs()[0].dims, (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(model->outputs()[0].name, "y");

  const float x[4] = {1, 2, 3, 4};
  kiln::Tensor in = input(x);
  std::vector<kiln::Tensor> out;
  kiln::Status s = model->run({in.get()}, out);
  ASSERT_TRUE(s.ok()) << s.message;
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].dims(), (std::vector<int64_t>{1, 2}));
  auto ref = tinyMlpReference(x);
  EXPECT_NEAR(out[0].data<float>()[0], ref[0], 1e-6);
  EXPECT_NEAR(out[0].data<float>()[1], ref[1], 1e-6);
}

TEST(JitApi, CompileFromBytesWithOptions) {
  std::ifstream f(kTinyMlp, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), {});
  kiln::CompileOptions opts;
  opts.optLevel = 0;
  std::string err;
  auto model = kiln::Model::loadFromMemory(bytes.data(), bytes.size(), "", opts, &err);
  ASSERT_TRUE(model) << err;
  const float x[4] = {-5, 0.25f, 2, -1};
  kiln::Tensor in = input(x);
  std::vector<kiln::Tensor> out;
  ASSERT_TRUE(model->run({in.get()}, out).ok());
  auto ref = tinyMlpReference(x);
  EXPECT_NEAR(out[0].data<float>()[0], ref[0], 1e-6);
  EXPECT_NEAR(out[0].data<float>()[1], ref[1], 1e-6);
}

TEST(JitApi, BadOptionsAndInputsAreErrors) {
  std::string err;
  kiln::CompileOptions opts;
  opts.optLevel = 7;
  EXPECT_FALSE(kiln::Model::load(kTinyMlp, opts, &err));
  EXPECT_EQ(err, "optimization level must be 0..3");

  auto model = kiln::Model::load(kTinyMlp, {}, &err);
  ASSERT_TRUE(model);
  kiln::Tensor wrong(KILN_FLOAT32, {2, 4});
  std::vector<kiln::Tensor> out;
  kiln::Status s = model->run({wrong.get()}, out);
  EXPECT_EQ(s.code, KILN_SHAPE_MISMATCH);
  EXPECT_EQ(s.message, "input 0 'x' must have shape [1, 4], got [2, 4]");
  kiln::Tensor ints(KILN_INT64, {1, 4});
  s = model->run({ints.get()}, out);
  EXPECT_EQ(s.code, KILN_DTYPE_MISMATCH);
  s = model->run({}, out);
  EXPECT_EQ(s.code, KILN_INVALID_ARGUMENT);
}

TEST(JitApi, ConcurrentRunsOnOneModel) {
  std::string err;
  auto model = kiln::Model::load(kTinyMlp, {}, &err);
  ASSERT_TRUE(model) << err;
  constexpr int kThreads = 8, kRuns = 200;
  std::vector<int> failures(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRuns; ++r) {
        const float x[4] = {(float)t, (float)r / 10, (float)(t - r) / 7, 1.5f};
        kiln::Tensor in = input(x);
        std::vector<kiln::Tensor> out;
        if (!model->run({in.get()}, out).ok()) {
          ++failures[t];
          continue;
        }
        auto ref = tinyMlpReference(x);
        if (std::fabs(out[0].data<float>()[0] - ref[0]) > 1e-5 ||
            std::fabs(out[0].data<float>()[1] - ref[1]) > 1e-5)
          ++failures[t];
      }
    });
  for (auto &th : threads)
    th.join();
  for (int t = 0; t < kThreads; ++t)
    EXPECT_EQ(failures[t], 0) << "thread " << t;
  // All threads shared one compiled executable.
  EXPECT_EQ(model->stats().compilations, 1);
}

// Runs from several threads at once on a model with its own two-thread pool:
// kernels and loop nests split over the pool while other runs wait their
// turn or run inline; every result still matches ONNX Runtime's.
TEST(JitApi, ConcurrentRunsWithAThreadPool) {
  std::string dir = std::string(KILN_SHARED_MODELS_DIR) + "/squeezenet1_1";
  kiln::CompileOptions options;
  options.numThreads = 2;
  std::string err;
  auto model = kiln::Model::load(dir + "/model.onnx", options, &err);
  ASSERT_TRUE(model) << err;
  kiln::Tensor in, ref;
  ASSERT_TRUE(kiln::readTensorFile(dir + "/test_data_set_0/input_0.pb", in).ok());
  ASSERT_TRUE(kiln::readTensorFile(dir + "/test_data_set_0/output_0.pb", ref).ok());
  constexpr int kCallers = 3, kRuns = 6;
  std::vector<std::string> reports(kCallers);
  std::vector<std::thread> callers;
  for (int t = 0; t < kCallers; ++t)
    callers.emplace_back([&, t] {
      for (int r = 0; r < kRuns; ++r) {
        std::vector<kiln::Tensor> out;
        kiln::Status s = model->run({in.get()}, out);
        std::string report;
        if (!s.ok())
          reports[t] += s.message + "\n";
        else if (!kiln::tensorsClose(out[0], ref, 1e-4, 1e-3, report))
          reports[t] += report + "\n";
      }
    });
  for (auto &c : callers)
    c.join();
  for (int t = 0; t < kCallers; ++t)
    EXPECT_EQ(reports[t], "") << "caller " << t;
  EXPECT_EQ(model->stats().compilations, 1);
}

TEST(JitApi, NegativeThreadCountIsAnError) {
  kiln::CompileOptions options;
  options.numThreads = -1;
  std::string err;
  EXPECT_FALSE(kiln::Model::load(kTinyMlp, options, &err));
  EXPECT_NE(err.find("thread count"), std::string::npos) << err;
}

/// y = ScatterElements(x, [[1, 3]], [[10, 20]], axis = 1), x a graph input.
std::string scatterModel() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  auto *g = m.mutable_graph();
  g->set_name("scatter");
  auto *node = g->add_node();
  node->set_op_type("ScatterElements");
  for (const char *in : {"x", "i", "u"})
    node->add_input(in);
  node->add_output("y");
  auto *axis = node->add_attribute();
  axis->set_name("axis");
  axis->set_type(onnx::AttributeProto::INT);
  axis->set_i(1);
  auto *i = g->add_initializer();
  i->set_name("i");
  i->set_data_type(onnx::TensorProto::INT64);
  i->add_dims(1);
  i->add_dims(2);
  i->add_int64_data(1);
  i->add_int64_data(3);
  auto *u = g->add_initializer();
  u->set_name("u");
  u->set_data_type(onnx::TensorProto::FLOAT);
  u->add_dims(1);
  u->add_dims(2);
  u->add_float_data(10);
  u->add_float_data(20);
  for (const char *name : {"x", "y"}) {
    auto *vi = std::string(name) == "x" ? g->add_input() : g->add_output();
    vi->set_name(name);
    auto *tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    tt->mutable_shape()->add_dim()->set_dim_value(1);
    tt->mutable_shape()->add_dim()->set_dim_value(5);
  }
  return m.SerializeAsString();
}

/// Inputs belong to the caller: an op that updates its input in place
/// (a scatter) must work on a copy.
TEST(JitApi, InputsAreNeverWritten) {
  std::string bytes = scatterModel();
  std::string err;
  auto model = kiln::Model::loadFromMemory(bytes.data(), bytes.size(), "", {}, &err);
  ASSERT_TRUE(model) << err;
  kiln::Tensor x(KILN_FLOAT32, {1, 5});
  for (int k = 0; k < 5; ++k)
    x.data<float>()[k] = k + 1;
  std::vector<kiln::Tensor> out;
  for (int run = 0; run < 2; ++run) {
    ASSERT_TRUE(model->run({x.get()}, out).ok());
    const float expected[5] = {1, 10, 3, 20, 5};
    for (int k = 0; k < 5; ++k) {
      EXPECT_EQ(out[0].data<float>()[k], expected[k]) << "run " << run << " element " << k;
      EXPECT_EQ(x.data<float>()[k], k + 1) << "the input changed";
    }
  }
}

/// encoder4 has a dynamic sequence axis: one Model serves both lengths
/// (ONNX Runtime's outputs at 128 and 37) from one executable whose code
/// takes the length at run time, or, with dynamicShapes off, by compiling
/// one specialisation per length and caching it.
class EncoderLengths : public ::testing::TestWithParam<bool> {};

TEST_P(EncoderLengths, FromOneModel) {
  std::string dir = std::string(KILN_SHARED_MODELS_DIR) + "/encoder4";
  std::string err;
  kiln::CompileOptions options;
  options.dynamicShapes = GetParam();
  options.cache = false;
  auto model = kiln::Model::load(dir + "/model.onnx", options, &err);
  ASSERT_TRUE(model) << err;
  EXPECT_EQ(model->inputs()[0].dims[1], -1) << "the sequence axis is declared dynamic";
  for (int pass = 0; pass < 2; ++pass)
    for (const char *set : {"test_data_set_0", "test_data_set_1"}) {
      kiln::Tensor in, ref;
      ASSERT_TRUE(kiln::readTensorFile(dir + "/" + set + "/input_0.pb", in).ok());
      ASSERT_TRUE(kiln::readTensorFile(dir + "/" + set + "/output_0.pb", ref).ok());
      std::vector<kiln::Tensor> out;
      kiln::Status s = model->run({in.get()}, out);
      ASSERT_TRUE(s.ok()) << s.message;
      std::string report;
      EXPECT_TRUE(kiln::tensorsClose(out[0], ref, 1e-3, 1e-3, report)) << set << ": " << report;
    }
  if (GetParam())
    EXPECT_EQ(model->stats().compilations, 1) << "one compilation for every length";
  else
    EXPECT_EQ(model->stats().compilations, 2) << "one compilation per sequence length";
}

INSTANTIATE_TEST_SUITE_P(JitApi, EncoderLengths, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool> &i) {
                           return i.param ? "RuntimeDims" : "PerShape";
                         });

} // namespace

namespace {

/// A model over a sequence and an optional: joined = Concat(seq) along axis
/// 0, longer = seq with t appended, given = OptionalHasElement(opt).
std::string sequenceModelBytes() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(16);
  onnx::GraphProto *g = m.mutable_graph();
  g->set_name("seq");
  auto node = [&](const std::string &op, std::vector<std::string> ins, std::string out) {
    onnx::NodeProto *n = g->add_node();
    n->set_op_type(op);
    for (auto &i : ins)
      n->add_input(i);
    n->add_output(out);
    return n;
  };
  onnx::AttributeProto *axis = node("ConcatFromSequence", {"seq"}, "joined")->add_attribute();
  axis->set_name("axis");
  axis->set_type(onnx::AttributeProto::INT);
  axis->set_i(0);
  node("SequenceInsert", {"seq", "t"}, "longer");
  node("OptionalHasElement", {"opt"}, "given");
  auto floatVector = [](onnx::TypeProto *type) {
    type->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    type->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_param("n");
  };
  onnx::ValueInfoProto *seq = g->add_input();
  seq->set_name("seq");
  floatVector(seq->mutable_type()->mutable_sequence_type()->mutable_elem_type());
  onnx::ValueInfoProto *t = g->add_input();
  t->set_name("t");
  floatVector(t->mutable_type());
  onnx::ValueInfoProto *opt = g->add_input();
  opt->set_name("opt");
  floatVector(opt->mutable_type()->mutable_optional_type()->mutable_elem_type());
  onnx::ValueInfoProto *joined = g->add_output();
  joined->set_name("joined");
  floatVector(joined->mutable_type());
  onnx::ValueInfoProto *longer = g->add_output();
  longer->set_name("longer");
  floatVector(longer->mutable_type()->mutable_sequence_type()->mutable_elem_type());
  onnx::ValueInfoProto *given = g->add_output();
  given->set_name("given");
  given->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::BOOL);
  given->mutable_type()->mutable_tensor_type()->mutable_shape();
  return m.SerializeAsString();
}

kiln::Tensor vec(std::vector<float> v) {
  kiln::Tensor t(KILN_FLOAT32, {(int64_t)v.size()});
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}

std::vector<float> values(const kiln::Tensor &t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numElements());
}

} // namespace

TEST(JitApi, SequenceAndOptionalInputsAndOutputs) {
  std::string bytes = sequenceModelBytes(), err;
  auto model = kiln::Model::loadFromMemory(bytes.data(), bytes.size(), "", {}, &err);
  ASSERT_TRUE(model) << err;
  EXPECT_EQ(model->inputs()[0].kind, kiln::ValueKind::Sequence);
  EXPECT_FALSE(model->inputs()[0].optional);
  EXPECT_EQ(model->inputs()[2].kind, kiln::ValueKind::Tensor);
  EXPECT_TRUE(model->inputs()[2].optional);
  EXPECT_EQ(model->outputs()[1].kind, kiln::ValueKind::Sequence);

  // Elements of different lengths; the optional given.
  kiln::Tensor a = vec({1, 2}), b = vec({3}), c = vec({4, 5, 6}), t = vec({7}), o = vec({0});
  std::vector<kiln::Value> out;
  kiln::Status s = model->run({kiln::ValueView::sequence({a.get(), b.get(), c.get()}),
                               kiln::ValueView::tensor(t.get()), kiln::ValueView::tensor(o.get())},
                              out);
  ASSERT_TRUE(s.ok()) << s.message;
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].kind, kiln::ValueKind::Tensor);
  EXPECT_EQ(values(out[0].tensors[0]), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  ASSERT_EQ(out[1].kind, kiln::ValueKind::Sequence);
  ASSERT_EQ(out[1].tensors.size(), 4u);
  EXPECT_EQ(values(out[1].tensors[1]), (std::vector<float>{3}));
  EXPECT_EQ(values(out[1].tensors[3]), (std::vector<float>{7}));
  EXPECT_EQ(out[2].tensors[0].data<uint8_t>()[0], 1);

  // Another length and an empty optional: a second executable.
  s = model->run({kiln::ValueView::sequence({c.get()}), kiln::ValueView::tensor(t.get()),
                  kiln::ValueView::none()},
                 out);
  ASSERT_TRUE(s.ok()) << s.message;
  EXPECT_EQ(values(out[0].tensors[0]), (std::vector<float>{4, 5, 6}));
  EXPECT_EQ(out[1].tensors.size(), 2u);
  EXPECT_EQ(out[2].tensors[0].data<uint8_t>()[0], 0);
  EXPECT_EQ(model->stats().compilations, 2);

  // Kinds that do not match the declaration are errors naming the input.
  s = model->run({kiln::ValueView::tensor(a.get()), kiln::ValueView::tensor(t.get()),
                  kiln::ValueView::none()},
                 out);
  EXPECT_EQ(s.code, KILN_INVALID_ARGUMENT);
  EXPECT_EQ(s.message, "input 0 'seq' is a sequence; a tensor was given");
  s = model->run({kiln::ValueView::sequence({a.get()}), kiln::ValueView::none(),
                  kiln::ValueView::none()},
                 out);
  EXPECT_EQ(s.message, "input 1 't' is not optional; it needs a value");
  kiln::Tensor ints(KILN_INT64, {2});
  s = model->run({kiln::ValueView::sequence({a.get(), ints.get()}),
                  kiln::ValueView::tensor(t.get()), kiln::ValueView::none()},
                 out);
  EXPECT_EQ(s.code, KILN_DTYPE_MISMATCH);
  // The tensors-only run() cannot take a sequence.
  std::vector<kiln::Tensor> tensors;
  s = model->run({a.get(), t.get(), o.get()}, tensors);
  EXPECT_EQ(s.code, KILN_INVALID_ARGUMENT);
}

// The reference interpreter (CompileOptions::interpret) gives the
// hand-derived result too, and kiln::verify finds a deliberate miscompile
// at the node that makes it: fc1 + 1 makes h = relu(z1 + 1), which every
// later node passes on.
TEST(JitApi, InterpreterAndVerify) {
  const float x[4] = {1, -2, 0.5f, 3};
  kiln::Tensor in = input(x);
  auto ref = tinyMlpReference(x);
  kiln::CompileOptions interp;
  interp.interpret = true;
  std::string err;
  auto model = kiln::Model::load(kTinyMlp, interp, &err);
  ASSERT_TRUE(model) << err;
  std::vector<kiln::Tensor> out;
  kiln::Status s = model->run({in.get()}, out);
  ASSERT_TRUE(s.ok()) << s.message;
  EXPECT_NEAR(out[0].data<float>()[0], ref[0], 1e-7);
  EXPECT_NEAR(out[0].data<float>()[1], ref[1], 1e-7);

  std::vector<kiln::ValueView> views{{kiln::ValueKind::Tensor, {in.get()}}};
  kiln::CompileOptions opts;
  opts.cache = false;
  kiln::VerifyReport report;
  s = kiln::verify(kTinyMlp, opts, views, 1e-5, 1e-5, report);
  ASSERT_TRUE(s.ok()) << s.message;
  EXPECT_TRUE(report.outputsMatch);
  EXPECT_FALSE(report.found);

  opts.testPerturbNode = "fc1";
  s = kiln::verify(kTinyMlp, opts, views, 1e-5, 1e-5, report);
  ASSERT_TRUE(s.ok()) << s.message;
  EXPECT_FALSE(report.outputsMatch);
  ASSERT_TRUE(report.found);
  EXPECT_EQ(report.node, "fc1");
  EXPECT_EQ(report.opType, "Gemm");
  EXPECT_EQ(report.nodeIndex, 0);
}

namespace {
/// y = a + b, both declared [1, seq]: the one dim_param names one length.
std::string sharedDimModelBytes() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  onnx::GraphProto *g = m.mutable_graph();
  g->set_name("shared");
  onnx::NodeProto *add = g->add_node();
  add->set_op_type("Add");
  add->add_input("a");
  add->add_input("b");
  add->add_output("y");
  auto row = [](onnx::ValueInfoProto *v, const std::string &name, const std::string &dim) {
    v->set_name(name);
    auto *t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    t->mutable_shape()->add_dim()->set_dim_value(1);
    t->mutable_shape()->add_dim()->set_dim_param(dim);
  };
  row(g->add_input(), "a", "seq");
  row(g->add_input(), "b", "seq");
  row(g->add_output(), "y", "seq");
  std::string bytes;
  m.SerializeToString(&bytes);
  return bytes;
}
} // namespace

/// Inputs that disagree on a dim the model names in both are refused before
/// anything compiles, naming both inputs, the dim and the values; ONNX
/// broadcasting would otherwise accept a length of 1 against 3. The model
/// stays usable.
/// CompileOptions::dimBounds: a length outside the declared bounds is
/// refused before anything compiles, naming the input, the dim and the
/// bounds, and the model stays usable; names and ranges are checked at load.
/// (encoder4's test sets have lengths 128 and 37.)
TEST(JitApi, DeclaredDimBoundsAreCheckedBeforeCompiling) {
  std::string dir = std::string(KILN_SHARED_MODELS_DIR) + "/encoder4";
  std::string err;
  kiln::CompileOptions options;
  options.cache = false;
  options.dimBounds = {{"seq", {1, 64}}};
  for (bool dynamic : {true, false}) {
    options.dynamicShapes = dynamic;
    auto model = kiln::Model::load(dir + "/model.onnx", options, &err);
    ASSERT_TRUE(model) << err;
    kiln::Tensor longer, shorter, ref;
    ASSERT_TRUE(kiln::readTensorFile(dir + "/test_data_set_0/input_0.pb", longer).ok());
    ASSERT_TRUE(kiln::readTensorFile(dir + "/test_data_set_1/input_0.pb", shorter).ok());
    ASSERT_TRUE(kiln::readTensorFile(dir + "/test_data_set_1/output_0.pb", ref).ok());
    std::vector<kiln::Tensor> out;
    kiln::Status s = model->run({longer.get()}, out);
    EXPECT_EQ(s.code, KILN_SHAPE_MISMATCH);
    EXPECT_EQ(s.message, "input 0 'input' has 128 in dim 1 ('seq'), outside the bounds 1..64 "
                         "declared for it");
    EXPECT_EQ(model->stats().compilations, 0) << "refused before compiling";
    s = model->run({shorter.get()}, out);
    ASSERT_TRUE(s.ok()) << s.message;
    std::string report;
    EXPECT_TRUE(kiln::tensorsClose(out[0], ref, 1e-3, 1e-3, report)) << report;
  }
  options.dimBounds = {{"sequence", {1, 64}}};
  EXPECT_FALSE(kiln::Model::load(dir + "/model.onnx", options, &err));
  EXPECT_EQ(err, "bounds are given for the dim 'sequence', which no input of the model names "
                 "(its dim_params)");
  options.dimBounds = {{"seq", {65, 64}}};
  EXPECT_FALSE(kiln::Model::load(dir + "/model.onnx", options, &err));
  EXPECT_EQ(err, "the bounds of the dim 'seq' are 65..64: the least must be 0 or more and at "
                 "most the greatest");
}

// kilnc's and kiln-run's --dim NAME=LO..HI.
TEST(JitApi, ParseDimBound) {
  std::string name;
  std::pair<int64_t, int64_t> range;
  ASSERT_TRUE(kiln::parseDimBound("seq=1..512", name, range));
  EXPECT_EQ(name, "seq");
  EXPECT_EQ(range.first, 1);
  EXPECT_EQ(range.second, 512);
  ASSERT_TRUE(kiln::parseDimBound("batch=0..0", name, range));
  EXPECT_EQ(range.first, 0);
  EXPECT_EQ(range.second, 0);
  for (const char *bad : {"seq=5", "=1..2", "seq=2..1", "seq=-1..3", "seq=1..x", "seq=..4",
                          "seq=1..", "seq1..4", "a=b=1..2"})
    EXPECT_FALSE(kiln::parseDimBound(bad, name, range)) << bad;
}

TEST(JitApi, InputsDisagreeingOnANamedDimAreRefused) {
  std::string bytes = sharedDimModelBytes(), err;
  auto model = kiln::Model::loadFromMemory(bytes.data(), bytes.size(), "", {}, &err);
  ASSERT_TRUE(model) << err;
  EXPECT_EQ(model->inputs()[0].dimNames, (std::vector<std::string>{"", "seq"}));
  auto row = [](std::vector<float> v) {
    kiln::Tensor t(KILN_FLOAT32, {1, (int64_t)v.size()});
    std::copy(v.begin(), v.end(), t.data<float>());
    return t;
  };
  kiln::Tensor three = row({1, 2, 3}), one = row({10}), otherThree = row({10, 20, 30});
  std::vector<kiln::Tensor> out;
  kiln::Status s = model->run({three.get(), one.get()}, out);
  EXPECT_EQ(s.code, KILN_SHAPE_MISMATCH);
  EXPECT_EQ(s.message, "the inputs disagree on the dim the model names 'seq': 3 in input 0 'a' "
                       "(dim 1), 1 in input 1 'b' (dim 1)");
  EXPECT_EQ(model->stats().compilations, 0);
  // Through the ValueView entry point too.
  std::vector<kiln::Value> viewOut;
  s = model->run({kiln::ValueView::tensor(one.get()), kiln::ValueView::tensor(three.get())},
                 viewOut);
  EXPECT_EQ(s.code, KILN_SHAPE_MISMATCH);
  s = model->run({three.get(), otherThree.get()}, out);
  ASSERT_TRUE(s.ok()) << s.message;
  EXPECT_EQ(values(out[0]), (std::vector<float>{11, 22, 33}));
}

namespace {
/// y = Reshape(x [n, 256], [-1, 7]): valid only where 7 divides 256 n.
std::string floorReshapeModelBytes() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  onnx::GraphProto *g = m.mutable_graph();
  g->set_name("floor_reshape");
  onnx::TensorProto *shape = g->add_initializer();
  shape->set_name("shape");
  shape->set_data_type(onnx::TensorProto::INT64);
  shape->add_dims(2);
  shape->add_int64_data(-1);
  shape->add_int64_data(7);
  onnx::NodeProto *reshape = g->add_node();
  reshape->set_op_type("Reshape");
  reshape->set_name("reshape_7");
  reshape->add_input("x");
  reshape->add_input("shape");
  reshape->add_output("y");
  auto tensor = [](onnx::ValueInfoProto *v, const std::string &name, const std::string &dim,
                   int64_t size) {
    v->set_name(name);
    auto *t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    t->mutable_shape()->add_dim()->set_dim_param(dim);
    t->mutable_shape()->add_dim()->set_dim_value(size);
  };
  tensor(g->add_input(), "x", "n", 256);
  tensor(g->add_output(), "y", "m", 7);
  std::string bytes;
  m.SerializeToString(&bytes);
  return bytes;
}
} // namespace

/// A Reshape whose -1 divides the element count for some shapes only is not
/// compiled for every shape (that code would round 256 / 7 down and return
/// 36 rows): at a shape it does not divide, the run is an error naming the
/// node, as ONNX Runtime's is; at one it divides, the values come through.
TEST(JitApi, ReshapeThatDividesForSomeShapesOnlyIsCheckedPerShape) {
  std::string bytes = floorReshapeModelBytes(), err;
  auto model = kiln::Model::loadFromMemory(bytes.data(), bytes.size(), "", {}, &err);
  ASSERT_TRUE(model) << err;
  auto rows = [](int64_t n) {
    kiln::Tensor t(KILN_FLOAT32, {n, 256});
    for (int64_t i = 0; i < n * 256; ++i)
      t.data<float>()[i] = (float)i;
    return t;
  };
  kiln::Tensor one = rows(1), seven = rows(7);
  std::vector<kiln::Tensor> out;
  kiln::Status s = model->run({one.get()}, out);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message.find("reshape_7"), std::string::npos) << s.message;
  s = model->run({seven.get()}, out);
  ASSERT_TRUE(s.ok()) << s.message;
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].dims(), (std::vector<int64_t>{256, 7}));
  std::vector<float> y = values(out[0]);
  for (int64_t i = 0; i < 7 * 256; ++i)
    ASSERT_EQ(y[i], (float)i) << "element " << i;
}

namespace {
/// y = MatMul(s, W) + s with s = Softmax(MatMul(x, W)), x [n, 8] and
/// W[i][j] = (i - 2j) / 8: three intermediates of n x 8 floats, two of them
/// (the products) live at different times.
std::string runTimeRowsModelBytes() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  onnx::GraphProto *g = m.mutable_graph();
  g->set_name("run_time_rows");
  onnx::TensorProto *w = g->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(8);
  w->add_dims(8);
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 8; ++j)
      w->add_float_data((i - 2.0f * j) / 8);
  auto node = [&](const char *op, std::vector<std::string> in, const std::string &out) {
    onnx::NodeProto *n = g->add_node();
    n->set_op_type(op);
    n->set_name(out);
    for (const std::string &i : in)
      n->add_input(i);
    n->add_output(out);
  };
  node("MatMul", {"x", "w"}, "h");
  node("Softmax", {"h"}, "s");
  node("MatMul", {"s", "w"}, "t");
  node("Add", {"t", "s"}, "y");
  auto rows = [](onnx::ValueInfoProto *v, const std::string &name) {
    v->set_name(name);
    auto *t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    t->mutable_shape()->add_dim()->set_dim_param("n");
    t->mutable_shape()->add_dim()->set_dim_value(8);
  };
  rows(g->add_input(), "x");
  rows(g->add_output(), "y");
  std::string bytes;
  m.SerializeToString(&bytes);
  return bytes;
}
} // namespace

/// Intermediates of run-time size share one block by liveness
/// (kiln-plan-memory): one compile serves 0, 3, 0 and 5 rows, and each
/// run's values match a direct computation, including after a run with
/// no rows at all.
TEST(JitApi, IntermediatesOfRunTimeSizeAtEveryRowCount) {
  std::string bytes = runTimeRowsModelBytes(), err;
  auto model = kiln::Model::loadFromMemory(bytes.data(), bytes.size(), "", {}, &err);
  ASSERT_TRUE(model) << err;
  auto w = [](int i, int j) { return (i - 2.0 * j) / 8; };
  for (int64_t n : {0, 3, 0, 5}) {
    kiln::Tensor x(KILN_FLOAT32, {n, 8});
    for (int64_t i = 0; i < n * 8; ++i)
      x.data<float>()[i] = std::sin(0.7f * (float)i);
    std::vector<kiln::Tensor> out;
    kiln::Status s = model->run({x.get()}, out);
    ASSERT_TRUE(s.ok()) << "n = " << n << ": " << s.message;
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].dims(), (std::vector<int64_t>{n, 8}));
    std::vector<float> y = values(out[0]);
    for (int64_t r = 0; r < n; ++r) {
      double h[8], sm[8], sum = 0, mx = -1e30;
      for (int j = 0; j < 8; ++j) {
        h[j] = 0;
        for (int k = 0; k < 8; ++k)
          h[j] += x.data<float>()[r * 8 + k] * w(k, j);
        mx = std::max(mx, h[j]);
      }
      for (int j = 0; j < 8; ++j)
        sum += sm[j] = std::exp(h[j] - mx);
      for (int j = 0; j < 8; ++j)
        sm[j] /= sum;
      for (int j = 0; j < 8; ++j) {
        double t = 0;
        for (int k = 0; k < 8; ++k)
          t += sm[k] * w(k, j);
        EXPECT_NEAR(y[r * 8 + j], t + sm[j], 1e-5) << "n = " << n << ", y[" << r << "][" << j << "]";
      }
    }
  }
  EXPECT_EQ(model->stats().compilations, 1);
}

namespace {
/// z = Einsum("bhid,bhjd->bhij", x, y), x [b, 2, 3, 4] and y [b, 2, 5, 4]
/// with the batch named "b": attention scores of a batch of heads.
std::string batchedEinsumModelBytes() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  onnx::GraphProto *g = m.mutable_graph();
  g->set_name("batched_einsum");
  onnx::NodeProto *e = g->add_node();
  e->set_op_type("Einsum");
  e->set_name("scores");
  e->add_input("x");
  e->add_input("y");
  e->add_output("z");
  onnx::AttributeProto *eq = e->add_attribute();
  eq->set_name("equation");
  eq->set_type(onnx::AttributeProto::STRING);
  eq->set_s("bhid,bhjd->bhij");
  auto batched = [](onnx::ValueInfoProto *v, const std::string &name,
                    std::vector<int64_t> dims) {
    v->set_name(name);
    auto *t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    t->mutable_shape()->add_dim()->set_dim_param("b");
    for (int64_t d : dims)
      t->mutable_shape()->add_dim()->set_dim_value(d);
  };
  batched(g->add_input(), "x", {2, 3, 4});
  batched(g->add_input(), "y", {2, 5, 4});
  batched(g->add_output(), "z", {2, 3, 5});
  std::string bytes;
  m.SerializeToString(&bytes);
  return bytes;
}
} // namespace

/// An Einsum over a batch known only at run time contracts through
/// reshapes whose targets are read from its operands' dims: one compile
/// serves batches of 1 and 3, each matching a direct sum of products.
TEST(JitApi, EinsumOverARunTimeBatch) {
  std::string bytes = batchedEinsumModelBytes(), err;
  auto model = kiln::Model::loadFromMemory(bytes.data(), bytes.size(), "", {}, &err);
  ASSERT_TRUE(model) << err;
  for (int64_t b : {1, 3}) {
    kiln::Tensor x(KILN_FLOAT32, {b, 2, 3, 4}), y(KILN_FLOAT32, {b, 2, 5, 4});
    for (int64_t i = 0; i < b * 24; ++i)
      x.data<float>()[i] = std::cos(0.3f * (float)i);
    for (int64_t i = 0; i < b * 40; ++i)
      y.data<float>()[i] = std::sin(0.2f * (float)i);
    std::vector<kiln::Tensor> out;
    kiln::Status s = model->run({x.get(), y.get()}, out);
    ASSERT_TRUE(s.ok()) << "b = " << b << ": " << s.message;
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].dims(), (std::vector<int64_t>{b, 2, 3, 5}));
    std::vector<float> z = values(out[0]);
    for (int64_t n = 0; n < b * 2; ++n)
      for (int64_t i = 0; i < 3; ++i)
        for (int64_t j = 0; j < 5; ++j) {
          double sum = 0;
          for (int64_t d = 0; d < 4; ++d)
            sum += (double)x.data<float>()[(n * 3 + i) * 4 + d] * y.data<float>()[(n * 5 + j) * 4 + d];
          EXPECT_NEAR(z[(n * 3 + i) * 5 + j], sum, 1e-5) << "b = " << b;
        }
  }
  EXPECT_EQ(model->stats().compilations, 1);
}
