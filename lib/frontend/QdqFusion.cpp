// QDQ fusion (see QdqFusion.h). It works on the ONNX graph, before import,
// as ONNX Runtime's QDQ transformers do: in kiln IR a DequantizeLinear is
// already a cast, a subtraction and a multiplication spread over the graph,
// while here it is one node whose constants can be checked directly.
#include "QdqFusion.h"

#include "llvm/ADT/StringMap.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>

namespace kiln {
namespace {

using onnx::NodeProto;
using onnx::TensorProto;

/// The values of a small constant tensor as doubles: float, int8, uint8 and
/// int32, from raw_data or the typed field. None for other types.
std::optional<std::vector<double>> constantValues(const TensorProto &t) {
  int64_t n = 1;
  for (int64_t d : t.dims()) {
    if (d < 0 || d > 1 << 20)
      return std::nullopt;
    n *= d;
  }
  if (n > 1 << 20)
    return std::nullopt;
  std::vector<double> v;
  const std::string &raw = t.raw_data();
  auto fromRaw = [&](size_t bytes, auto read) -> bool {
    if (raw.size() != (size_t)n * bytes)
      return false;
    for (int64_t i = 0; i < n; ++i)
      v.push_back(read(raw.data() + i * bytes));
    return true;
  };
  switch (t.data_type()) {
  case TensorProto::FLOAT:
    if (t.has_raw_data()) {
      if (!fromRaw(4, [](const char *p) {
            float f;
            std::memcpy(&f, p, 4);
            return (double)f;
          }))
        return std::nullopt;
    } else {
      v.assign(t.float_data().begin(), t.float_data().end());
    }
    break;
  case TensorProto::INT8:
  case TensorProto::UINT8:
  case TensorProto::INT32: {
    bool isU8 = t.data_type() == TensorProto::UINT8;
    size_t bytes = t.data_type() == TensorProto::INT32 ? 4 : 1;
    if (t.has_raw_data()) {
      if (!fromRaw(bytes, [&](const char *p) {
            if (bytes == 4) {
              int32_t i;
              std::memcpy(&i, p, 4);
              return (double)i;
            }
            return isU8 ? (double)(uint8_t)*p : (double)(int8_t)*p;
          }))
        return std::nullopt;
    } else {
      v.assign(t.int32_data().begin(), t.int32_data().end());
    }
    break;
  }
  default:
    return std::nullopt;
  }
  if ((int64_t)v.size() != n)
    return std::nullopt;
  return v;
}

const onnx::AttributeProto *attribute(const NodeProto &node, const char *name) {
  for (const auto &a : node.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

struct Graph {
  const onnx::GraphProto &g;
  llvm::StringMap<size_t> producer;             // value -> index of the node writing it
  llvm::StringMap<const TensorProto *> constants; // initializers and Constant values
  llvm::StringMap<int> readers;                 // value -> number of reads (+1 if an output)

  explicit Graph(const onnx::GraphProto &graph) : g(graph) {
    for (const TensorProto &t : g.initializer())
      constants[t.name()] = &t;
    for (size_t i = 0; i < (size_t)g.node_size(); ++i) {
      const NodeProto &n = g.node(i);
      for (const std::string &out : n.output())
        producer[out] = i;
      if (n.op_type() == "Constant" && n.domain().empty() && n.output_size() == 1)
        if (const auto *value = attribute(n, "value"); value && value->has_t())
          constants[n.output(0)] = &value->t();
      countReads(n);
    }
    for (const auto &out : g.output())
      ++readers[out.name()];
  }

  /// Subgraphs read names of this graph too: count every input name in
  /// them (a name a subgraph defines itself only makes the count larger,
  /// which keeps a fusion from happening, never wrongly allows one).
  void countReads(const NodeProto &n) {
    for (const std::string &in : n.input())
      if (!in.empty())
        ++readers[in];
    for (const auto &a : n.attribute()) {
      if (a.has_g())
        for (const NodeProto &inner : a.g().node())
          countReads(inner);
      for (const auto &sub : a.graphs())
        for (const NodeProto &inner : sub.node())
          countReads(inner);
    }
  }

  const NodeProto *producerOf(const std::string &value, const char *op) const {
    auto it = producer.find(value);
    if (it == producer.end())
      return nullptr;
    const NodeProto &n = g.node(it->second);
    return n.op_type() == op && n.domain().empty() ? &n : nullptr;
  }

  /// The only node reading `value`, when it is a `op` node.
  std::optional<size_t> onlyReader(const std::string &value, const char *op) const {
    auto count = readers.find(value);
    if (count == readers.end() || count->second != 1)
      return std::nullopt;
    for (size_t i = 0; i < (size_t)g.node_size(); ++i) {
      const NodeProto &n = g.node(i);
      for (const std::string &in : n.input())
        if (in == value)
          return n.op_type() == op && n.domain().empty() ? std::optional<size_t>(i)
                                                          : std::nullopt;
    }
    return std::nullopt;
  }

  const TensorProto *constant(const std::string &name) const {
    auto it = constants.find(name);
    return it == constants.end() ? nullptr : it->second;
  }
};

/// A DequantizeLinear or QuantizeLinear with constant scale and zero point
/// of an 8-bit type, without the attributes of newer opsets that change
/// its meaning (block quantization, an explicit output type).
struct QParams {
  std::vector<double> scale, zeroPoint;
  int zeroPointType = 0;
  int64_t axis = 1;
};

std::optional<QParams> quantParams(const Graph &g, const NodeProto &n, bool eightBit) {
  if (n.input_size() < 3 || n.input(2).empty() || attribute(n, "block_size") ||
      attribute(n, "output_dtype"))
    return std::nullopt;
  const TensorProto *s = g.constant(n.input(1)), *z = g.constant(n.input(2));
  if (!s || !z || s->dims_size() > 1 || z->dims_size() != s->dims_size() ||
      (s->dims_size() == 1 && s->dims(0) != z->dims(0)))
    return std::nullopt;
  QParams q;
  q.zeroPointType = z->data_type();
  bool is8 = q.zeroPointType == TensorProto::UINT8 || q.zeroPointType == TensorProto::INT8;
  if (eightBit ? !is8 : q.zeroPointType != TensorProto::INT32)
    return std::nullopt;
  auto sv = constantValues(*s), zv = constantValues(*z);
  if (!sv || !zv || sv->empty() || s->data_type() != TensorProto::FLOAT)
    return std::nullopt;
  for (double v : *sv)
    if (!(v > 0) || !std::isfinite(v))
      return std::nullopt;
  q.scale = std::move(*sv);
  q.zeroPoint = std::move(*zv);
  if (const auto *a = attribute(n, "axis"))
    q.axis = a->i();
  return q;
}

bool perTensor(const QParams &q) { return q.scale.size() == 1; }

NodeProto makeNode(const std::string &op, const std::string &name,
                   std::initializer_list<std::string> inputs, const std::string &output) {
  NodeProto n;
  n.set_op_type(op);
  n.set_name(name);
  for (const std::string &in : inputs)
    n.add_input(in);
  n.add_output(output);
  return n;
}

/// Whether a bias's DequantizeLinear parameters are what QLinearConv adds to
/// the integer sum: zero points 0 and the scale x_scale * w_scale, per
/// tensor or per output (`channels` of them).
bool biasInProductScale(const QParams &b, const QParams &x, const QParams &w, size_t channels) {
  if (!perTensor(b) && b.axis != 0)
    return false;
  for (double z : b.zeroPoint)
    if (z != 0)
      return false;
  for (size_t c = 0; c < channels; ++c) {
    double want = (double)((float)x.scale[0] * (float)w.scale[perTensor(w) ? 0 : c]);
    double got = b.scale[perTensor(b) ? 0 : c];
    if (std::abs(got - want) > 1e-6 * want)
      return false;
  }
  return true;
}

struct Fusion {
  size_t op, relu, quantize; // relu == quantize when there is none
  size_t clip = SIZE_MAX;     // a Clip after the Relu (PyTorch's ReLU6: Relu, then Clip)
  NodeProto fused;
  std::optional<NodeProto> clamp; // the Relu as a Max against the zero point
  std::vector<NodeProto> before;  // nodes the fused one reads (Gemm's)
  std::vector<std::string> dequantized; // DQ outputs the op no longer reads
};

/// The Relu (optional) and QuantizeLinear that follow node `op`, with the
/// name its fused form writes and, for a Relu, the Max that replaces it.
bool matchTail(const Graph &g, size_t op, const std::string &name, Fusion &f,
               std::string &fusedOutput) {
  const NodeProto &n = g.g.node(op);
  if (n.output_size() != 1)
    return false;
  f.op = op;
  std::string value = n.output(0);
  f.relu = SIZE_MAX;
  // The activation's range: Relu [0, inf), Clip [min, max] (constants).
  constexpr double inf = std::numeric_limits<double>::infinity();
  double lo = -inf, hi = inf;
  if (auto relu = g.onlyReader(value, "Relu")) {
    f.relu = *relu;
    value = g.g.node(*relu).output(0);
    lo = 0;
  }
  if (auto clip = g.onlyReader(value, "Clip")) {
    const NodeProto &c = g.g.node(*clip);
    // Opset 11 on: min and max are inputs; before, attributes.
    for (int k = 1; k <= 2; ++k) {
      if (c.input_size() <= k || c.input(k).empty())
        continue;
      const TensorProto *t = g.constant(c.input(k));
      std::optional<std::vector<double>> v = t ? constantValues(*t) : std::nullopt;
      if (!v || v->size() != 1)
        return false;
      if (k == 1)
        lo = std::max(lo, (*v)[0]);
      else
        hi = std::min(hi, (*v)[0]);
    }
    if (const auto *a = attribute(c, "min"); a && a->has_f())
      lo = std::max(lo, (double)a->f());
    if (const auto *a = attribute(c, "max"); a && a->has_f())
      hi = std::min(hi, (double)a->f());
    if (c.output_size() != 1)
      return false;
    (f.relu == SIZE_MAX ? f.relu : f.clip) = *clip;
    value = c.output(0);
  }
  auto q = g.onlyReader(value, "QuantizeLinear");
  if (!q)
    return false;
  f.quantize = *q;
  const NodeProto &qn = g.g.node(*q);
  auto qp = quantParams(g, qn, /*eightBit=*/true);
  if (!qp || !perTensor(*qp) || qn.output_size() != 1)
    return false;
  fusedOutput = qn.output(0);
  if (f.relu == SIZE_MAX) {
    f.relu = f.quantize;
    return true;
  }
  // A Relu or Clip whose range holds the quantized type's (a Relu before a
  // zero point at the type's minimum; MobileNet's ReLU6 before a scale of at
  // most 6/255) does nothing that the saturation does not do already:
  // Q(clip(v)) = saturate(Q(v)) since Q is monotonic. A margin of 0.4 of a
  // step keeps the rounding of the bound itself from mattering.
  bool u8 = qp->zeroPointType == TensorProto::UINT8;
  double lowest = u8 ? 0 : -128, highest = u8 ? 255 : 127;
  double scale = qp->scale[0], zp = qp->zeroPoint[0];
  if (lo == 0 && hi == inf)
    return zp == lowest; // a Relu: exactly as before
  return lo <= (lowest - zp + 0.4) * scale && hi >= (highest - zp - 0.4) * scale;
}

/// DQ(xq) -> Conv(., DQ(wq), DQ(bq)?) [-> Relu or Clip] -> Q.
std::optional<Fusion> matchConv(const Graph &g, size_t index) {
  const NodeProto &conv = g.g.node(index);
  if (conv.input_size() < 2)
    return std::nullopt;
  const NodeProto *dx = g.producerOf(conv.input(0), "DequantizeLinear");
  const NodeProto *dw = g.producerOf(conv.input(1), "DequantizeLinear");
  if (!dx || !dw)
    return std::nullopt;
  auto x = quantParams(g, *dx, true), w = quantParams(g, *dw, true);
  if (!x || !w || !perTensor(*x))
    return std::nullopt;
  // Per output channel: the weight's first axis.
  const TensorProto *wq = g.constant(dw->input(0));
  if (!perTensor(*w) && (w->axis != 0 || !wq || wq->dims_size() < 1 ||
                         wq->dims(0) != (int64_t)w->scale.size()))
    return std::nullopt;
  std::string name = conv.name().empty() ? "Conv#" + std::to_string(index) : conv.name();
  Fusion f;
  std::string output;
  if (!matchTail(g, index, name, f, output))
    return std::nullopt;
  NodeProto fused = makeNode("QLinearConv", name,
                             {dx->input(0), dx->input(1), dx->input(2), dw->input(0),
                              dw->input(1), dw->input(2),
                              g.g.node(f.quantize).input(1), g.g.node(f.quantize).input(2)},
                             output);
  f.dequantized = {conv.input(0), conv.input(1)};
  if (conv.input_size() > 2 && !conv.input(2).empty()) {
    // The bias must be int32 in the scale x_scale * w_scale with zero point
    // 0: what QLinearConv adds to the integer sum.
    const NodeProto *db = g.producerOf(conv.input(2), "DequantizeLinear");
    if (!db)
      return std::nullopt;
    auto bq = quantParams(g, *db, /*eightBit=*/false);
    if (!bq || !biasInProductScale(*bq, *x, *w, std::max(bq->scale.size(), w->scale.size())))
      return std::nullopt;
    fused.add_input(db->input(0));
    f.dequantized.push_back(conv.input(2));
  }
  for (const auto &a : conv.attribute())
    *fused.add_attribute() = a;
  f.fused = std::move(fused);
  return f;
}

/// DQ(aq) -> MatMul(., DQ(bq)) [-> Relu] -> Q, with B per tensor or per
/// column of a matrix.
std::optional<Fusion> matchMatMul(const Graph &g, size_t index) {
  const NodeProto &mm = g.g.node(index);
  if (mm.input_size() != 2)
    return std::nullopt;
  const NodeProto *da = g.producerOf(mm.input(0), "DequantizeLinear");
  const NodeProto *db = g.producerOf(mm.input(1), "DequantizeLinear");
  if (!da || !db)
    return std::nullopt;
  auto a = quantParams(g, *da, true), bp = quantParams(g, *db, true);
  if (!a || !bp || !perTensor(*a))
    return std::nullopt;
  const TensorProto *bq = g.constant(db->input(0));
  if (!perTensor(*bp) && (!bq || bq->dims_size() != 2 || (bp->axis != 1 && bp->axis != -1) ||
                          bq->dims(1) != (int64_t)bp->scale.size()))
    return std::nullopt;
  std::string name = mm.name().empty() ? "MatMul#" + std::to_string(index) : mm.name();
  Fusion f;
  std::string output;
  if (!matchTail(g, index, name, f, output))
    return std::nullopt;
  f.fused = makeNode("QLinearMatMul", name,
                     {da->input(0), da->input(1), da->input(2), db->input(0), db->input(1),
                      db->input(2), g.g.node(f.quantize).input(1),
                      g.g.node(f.quantize).input(2)},
                     output);
  f.dequantized = {mm.input(0), mm.input(1)};
  return f;
}

/// The values of a constant 8-bit tensor (any size), as int8 bytes.
std::optional<std::vector<int8_t>> int8Values(const TensorProto &t) {
  if (t.data_type() != TensorProto::INT8)
    return std::nullopt;
  int64_t n = 1;
  for (int64_t d : t.dims())
    n *= d;
  std::vector<int8_t> v;
  if (t.has_raw_data()) {
    if ((int64_t)t.raw_data().size() != n)
      return std::nullopt;
    v.assign(t.raw_data().begin(), t.raw_data().end());
  } else {
    if (t.int32_data_size() != n)
      return std::nullopt;
    for (int32_t x : t.int32_data())
      v.push_back((int8_t)x);
  }
  return v;
}

NodeProto constantNode(const std::string &output, TensorProto value) {
  NodeProto n;
  n.set_op_type("Constant");
  n.set_name(output);
  n.add_output(output);
  value.set_name(output);
  auto *a = n.add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  *a->mutable_t() = std::move(value);
  return n;
}

/// DQ(aq) -> Gemm(., DQ(bq), DQ(bias)?) [-> Relu/Clip] -> Q, as ONNX
/// Runtime's quantize_static writes a Linear layer (transB = 1, alpha and
/// beta 1, s8 weights per tensor or per output, an i32 bias in the scale
/// a_scale x b_scale): MatMulInteger on the quantized values (B transposed
/// now, as a constant) + the bias, times a_scale x b_scale / y_scale, then
/// QuantizeLinear with scale 1 and y's zero point: QLinearConv's form. The
/// float Gemm on dequantized weights read 4 bytes per weight (ResNet-50's
/// classifier: 0.8 ms of 15).
std::optional<Fusion> matchGemm(const Graph &g, size_t index) {
  const NodeProto &gemm = g.g.node(index);
  if (gemm.input_size() < 2)
    return std::nullopt;
  for (const char *attr : {"alpha", "beta"})
    if (const auto *a = attribute(gemm, attr); a && a->f() != 1.0f)
      return std::nullopt;
  if (const auto *a = attribute(gemm, "transA"); a && a->i() != 0)
    return std::nullopt;
  const auto *tb = attribute(gemm, "transB");
  bool transB = tb && tb->i() != 0;
  const NodeProto *da = g.producerOf(gemm.input(0), "DequantizeLinear");
  const NodeProto *db = g.producerOf(gemm.input(1), "DequantizeLinear");
  if (!da || !db)
    return std::nullopt;
  auto a = quantParams(g, *da, true), bp = quantParams(g, *db, true);
  const TensorProto *bq = g.constant(db->input(0));
  if (!a || !bp || !perTensor(*a) || !bq || bq->dims_size() != 2)
    return std::nullopt;
  int64_t rows = bq->dims(0), cols = bq->dims(1);
  int64_t K = transB ? cols : rows, N = transB ? rows : cols;
  // Per output: B's first axis when transposed, else its second.
  if (!perTensor(*bp) &&
      ((int64_t)bp->scale.size() != N || (transB ? bp->axis != 0 : (bp->axis != 1 && bp->axis != -1))))
    return std::nullopt;
  for (double z : bp->zeroPoint)
    if (z != 0)
      return std::nullopt;
  std::optional<std::vector<int8_t>> w = int8Values(*bq);
  if (!w)
    return std::nullopt;
  std::string name = gemm.name().empty() ? "Gemm#" + std::to_string(index) : gemm.name();
  Fusion f;
  std::string output;
  if (!matchTail(g, index, name, f, output))
    return std::nullopt;
  const NodeProto &q = g.g.node(f.quantize);
  auto yp = quantParams(g, q, true);
  if (!yp)
    return std::nullopt;
  f.dequantized = {gemm.input(0), gemm.input(1)};
  std::string base = name + "/kiln_qgemm_";
  // B as [K, N] s8, and its zero points (0) per column.
  TensorProto wt;
  wt.set_data_type(TensorProto::INT8);
  wt.add_dims(K);
  wt.add_dims(N);
  std::string bytes(K * N, '\0');
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n)
      bytes[k * N + n] = (char)(*w)[transB ? n * cols + k : k * cols + n];
  wt.set_raw_data(bytes);
  f.before.push_back(constantNode(base + "weight", std::move(wt)));
  TensorProto wz;
  wz.set_data_type(TensorProto::INT8);
  wz.add_dims(N);
  wz.set_raw_data(std::string(N, '\0'));
  f.before.push_back(constantNode(base + "weight_zero_point", std::move(wz)));
  f.before.push_back(makeNode("MatMulInteger", base + "matmul",
                              {da->input(0), base + "weight", da->input(2),
                               base + "weight_zero_point"},
                              base + "sum"));
  std::string acc = base + "sum";
  if (gemm.input_size() > 2 && !gemm.input(2).empty()) {
    // The bias: i32, zero point 0, in the scale a_scale x b_scale.
    const NodeProto *dbias = g.producerOf(gemm.input(2), "DequantizeLinear");
    if (!dbias)
      return std::nullopt;
    auto bb = quantParams(g, *dbias, /*eightBit=*/false);
    const TensorProto *bt = g.constant(dbias->input(0));
    if (!bb || !bt || bt->dims_size() != 1 || bt->dims(0) != N ||
        !biasInProductScale(*bb, *a, *bp, N))
      return std::nullopt;
    f.before.push_back(makeNode("Add", base + "bias", {acc, dbias->input(0)}, base + "biased"));
    acc = base + "biased";
    f.dequantized.push_back(gemm.input(2));
  }
  NodeProto cast = makeNode("Cast", base + "cast", {acc}, base + "float");
  auto *to = cast.add_attribute();
  to->set_name("to");
  to->set_type(onnx::AttributeProto::INT);
  to->set_i(TensorProto::FLOAT);
  f.before.push_back(std::move(cast));
  // a_scale x b_scale / y_scale per output, in float as QLinearConv's.
  TensorProto m;
  m.set_data_type(TensorProto::FLOAT);
  m.add_dims(N);
  for (int64_t n = 0; n < N; ++n)
    m.add_float_data((float)((float)a->scale[0] * (float)bp->scale[perTensor(*bp) ? 0 : n]) /
                     (float)yp->scale[0]);
  f.before.push_back(constantNode(base + "multiplier", std::move(m)));
  f.before.push_back(makeNode("Mul", base + "scale", {base + "float", base + "multiplier"},
                              base + "scaled"));
  TensorProto one;
  one.set_data_type(TensorProto::FLOAT);
  one.add_float_data(1.0f);
  f.before.push_back(constantNode(base + "one", std::move(one)));
  f.fused = makeNode("QuantizeLinear", name, {base + "scaled", base + "one", q.input(2)}, output);
  return f;
}

/// DQ(xq) -> MaxPool -> Q with Q's scale, zero point and type equal to
/// DQ's: MaxPool on xq itself (ONNX defines it on 8-bit integers from opset
/// 12). Exact: DQ is increasing, so the maximum commutes with it, and
/// Q(DQ(v)) = v for each 8-bit v (fl(fl(a s) / s) rounds back to the small
/// integer a). Why: ResNet's stem pooled 4-byte floats between a
/// dequantization and a quantization of their own (2.5 % of a quantized
/// ResNet-50), where ONNX Runtime pools the bytes.
std::optional<Fusion> matchMaxPool(const Graph &g, size_t index) {
  const NodeProto &pool = g.g.node(index);
  if (pool.input_size() != 1 || pool.output_size() != 1)
    return std::nullopt; // Indices: not the same on the bytes' ties
  const NodeProto *dx = g.producerOf(pool.input(0), "DequantizeLinear");
  auto q = g.onlyReader(pool.output(0), "QuantizeLinear");
  if (!dx || !q)
    return std::nullopt;
  const NodeProto &qn = g.g.node(*q);
  auto x = quantParams(g, *dx, true), y = quantParams(g, qn, true);
  if (!x || !y || !perTensor(*x) || !perTensor(*y) || qn.output_size() != 1 ||
      x->zeroPointType != y->zeroPointType || x->zeroPoint != y->zeroPoint ||
      (float)x->scale[0] != (float)y->scale[0])
    return std::nullopt;
  Fusion f;
  f.op = index;
  f.relu = f.quantize = *q;
  std::string name = pool.name().empty() ? "MaxPool#" + std::to_string(index) : pool.name();
  NodeProto fused = makeNode("MaxPool", name, {dx->input(0)}, qn.output(0));
  for (const auto &a : pool.attribute())
    *fused.add_attribute() = a;
  f.fused = std::move(fused);
  f.dequantized = {pool.input(0)};
  return f;
}

} // namespace

QdqFusionPlan planQdqFusion(const onnx::GraphProto &graph) {
  QdqFusionPlan plan;
  Graph g(graph);
  for (size_t i = 0; i < (size_t)graph.node_size(); ++i) {
    const NodeProto &n = graph.node(i);
    if (!n.domain().empty())
      continue;
    std::optional<Fusion> f;
    if (n.op_type() == "Conv")
      f = matchConv(g, i);
    else if (n.op_type() == "MatMul")
      f = matchMatMul(g, i);
    else if (n.op_type() == "Gemm")
      f = matchGemm(g, i);
    else if (n.op_type() == "MaxPool")
      f = matchMaxPool(g, i);
    if (!f)
      continue;
    // The fused node goes where the QuantizeLinear was: every value it
    // reads (the DQ inputs, before the op; Q's scale and zero point, before
    // the Q) exists by then.
    plan.replaced[f->op] = {};
    plan.replaced[f->relu] = {};
    if (f->clip != SIZE_MAX)
      plan.replaced[f->clip] = {};
    std::vector<NodeProto> &at = plan.replaced[f->quantize];
    for (NodeProto &b : f->before)
      at.push_back(std::move(b));
    at.push_back(std::move(f->fused));
    if (f->clamp)
      at.push_back(std::move(*f->clamp));
    (n.op_type() == "Conv" ? plan.convs : n.op_type() == "MaxPool" ? plan.pools : plan.matmuls) += 1;
    for (const std::string &v : f->dequantized)
      --g.readers[v];
  }
  // DequantizeLinear nodes nothing reads any more (weights, mostly): their
  // float copies would only be folded and thrown away.
  for (size_t i = 0; i < (size_t)graph.node_size(); ++i) {
    const NodeProto &n = graph.node(i);
    if (n.op_type() == "DequantizeLinear" && n.domain().empty() && n.output_size() == 1 &&
        g.readers.lookup(n.output(0)) == 0 && !plan.replaced.count(i))
      plan.replaced[i] = {};
  }
  return plan;
}

} // namespace kiln
