// Import rules for reductions. The composite ONNX reductions (L1, L2,
// LogSum, LogSumExp, SumSquare) become an elementwise op plus a kiln
// reduction.
#include "NodeImporter.h"
#include "RowCounts.h"

using namespace mlir;

namespace kiln {
namespace {

using Outs = SmallVectorImpl<Value>;

enum class Pre { None, Abs, Square, Exp };
enum class Post { None, Sqrt, Log };

/// Normalized axes, or std::nullopt for "no reduction" (noop_with_empty_axes).
std::optional<SmallVector<int64_t>> reductionAxes(NodeImporter &n, int64_t rank,
                                                  int64_t axesInputSince) {
  SmallVector<int64_t> axes;
  if (n.opset >= axesInputSince) {
    if (n.hasInput(1)) {
      auto c = n.constInts(1);
      if (!c) {
        (void)n.error("reduction axes must be a constant");
        return SmallVector<int64_t>();
      }
      axes = *c;
    }
  } else if (auto a = n.getInts("axes")) {
    axes = *a;
  }
  if (axes.empty()) {
    if (n.getInt("noop_with_empty_axes", 0))
      return std::nullopt;
    for (int64_t i = 0; i < rank; ++i)
      axes.push_back(i);
  }
  for (int64_t &a : axes) {
    auto normalized = n.normalizeAxis(a, rank);
    if (!normalized)
      return std::nullopt;
    a = *normalized;
  }
  llvm::sort(axes);
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  return axes;
}

template <typename ReduceOpTy, Pre pre = Pre::None, Post post = Post::None,
          int64_t axesInputSince = 18>
LogicalResult reduce(NodeImporter &n, Outs &out) {
  Value x = n.required(0);
  auto rank = n.rankOf(x);
  if (!rank)
    return failure();
  auto axes = reductionAxes(n, *rank, axesInputSince);
  if (n.failed())
    return failure();
  switch (pre) {
  case Pre::None: break;
  case Pre::Abs: x = n.make<AbsOp>(x); break;
  case Pre::Square: x = n.make<MulOp>(x, x); break;
  case Pre::Exp: break; // handled below with a max shift for stability
  }
  if (!axes) {
    out.push_back(x);
    return success();
  }
  auto axesAttr = n.b.getDenseI64ArrayAttr(*axes);
  bool keep = n.getInt("keepdims", 1) != 0;
  Value shift;
  if (pre == Pre::Exp) {
    // log(sum(exp(x))) = m + log(sum(exp(x - m))), m = max(x)
    shift = n.make<ReduceMaxOp>(x, axesAttr, n.b.getBoolAttr(true));
    x = n.make<ExpOp>(n.make<SubOp>(x, shift));
  }
  Value r = n.make<ReduceOpTy>(x, axesAttr, n.b.getBoolAttr(keep));
  switch (post) {
  case Post::None: break;
  case Post::Sqrt: r = n.make<SqrtOp>(r); break;
  case Post::Log: r = n.make<LogOp>(r); break;
  }
  if (shift) {
    if (!keep)
      shift = n.make<SqueezeOp>(shift, axesAttr);
    r = n.make<AddOp>(r, shift);
  }
  out.push_back(r);
  return success();
}

template <bool isMin>
LogicalResult argExtreme(NodeImporter &n, Outs &out) {
  Value x = n.required(0);
  auto rank = n.rankOf(x);
  if (!rank)
    return failure();
  auto axis = n.normalizeAxis(n.getInt("axis", 0), *rank);
  if (!axis)
    return failure();
  out.push_back(n.make<ArgMaxOp>(x, n.b.getI64IntegerAttr(*axis),
                                 n.b.getBoolAttr(n.getInt("keepdims", 1) != 0),
                                 n.b.getBoolAttr(n.getInt("select_last_index", 0) != 0),
                                 n.b.getBoolAttr(isMin)));
  return success();
}

/// TopK as k rounds of arg-max (arg-min for the smallest): each round
/// gathers the winner and masks it out. Ties resolve to the lower index, as
/// ONNX requires, because arg-max keeps the first maximum. O(k * n), meant
/// for the small k of decoding heads; a larger k of float32 values (a
/// region proposal network's 1000 best anchors of 19200) goes to the
/// sorting kernel, whose order is the same.
constexpr int64_t kMaxUnrolledTopK = 8;
LogicalResult topK(NodeImporter &n, Outs &out) {
  Value x = n.required(0);
  auto t = NodeImporter::rankedType(x);
  std::optional<SmallVector<int64_t>> kv =
      n.opset < 10 ? std::optional<SmallVector<int64_t>>(SmallVector<int64_t>{n.getInt("k", 0)})
                   : n.constInts(1);
  if (!t || !t.hasStaticShape() || !kv || kv->size() != 1)
    return n.error("TopK's k must be a constant (and the input of static shape)");
  auto normalized = n.normalizeAxis(n.getInt("axis", -1), t.getRank());
  if (!normalized)
    return failure();
  int64_t axis = *normalized;
  int64_t k = (*kv)[0], dim = t.getDimSize(axis);
  if (k <= 0 || k > dim)
    return n.error("TopK k = " + Twine(k) + " is outside [1, " + Twine(dim) + "]");
  Type elt = t.getElementType();
  if (k > kMaxUnrolledTopK && elt.isF32()) {
    // sorted=0 leaves the order to the implementation: sorted is one.
    sortedTopK(n, x, axis, n.i64Scalar(k), k, n.i64Scalar(dim), out);
    return failure(n.failed());
  }
  if (!n.getInt("sorted", 1))
    return n.error("TopK with sorted=0 is not supported");
  bool largest = n.getInt("largest", 1) != 0;
  if (!isa<FloatType>(elt))
    return n.error("TopK supports floating-point inputs");
  double worst = largest ? -std::numeric_limits<double>::infinity()
                         : std::numeric_limits<double>::infinity();
  Value positions = n.positionsAlong(t.getRank(), axis, dim);
  Value remaining = x;
  SmallVector<Value> values, indices;
  for (int64_t j = 0; j < k; ++j) {
    Value idx = n.make<ArgMaxOp>(remaining, n.b.getI64IntegerAttr(axis), n.b.getBoolAttr(true),
                                 n.b.getBoolAttr(false), n.b.getBoolAttr(!largest));
    values.push_back(n.make<GatherElementsOp>(x, idx, n.b.getI64IntegerAttr(axis)));
    indices.push_back(idx);
    remaining = n.make<SelectOp>(n.make<EqualOp>(positions, idx), n.scalarLike(x, worst),
                                 remaining);
  }
  out.push_back(n.make<ConcatOp>(values, n.b.getI64IntegerAttr(axis)));
  out.push_back(n.make<ConcatOp>(indices, n.b.getI64IntegerAttr(axis)));
  return success();
}

} // namespace

void addReductionRules(std::vector<ImportRule> &r) {
  constexpr int64_t M = kMaxSupportedOpset;
  r.insert(r.end(), {
      // ReduceSum took its axes as an input from opset 13; the others from 18.
      {"ReduceSum", 1, 12, reduce<ReduceSumOp>},
      {"ReduceSum", 13, M, reduce<ReduceSumOp, Pre::None, Post::None, 13>},
      {"ReduceMean", 1, M, reduce<ReduceMeanOp>},
      {"ReduceMax", 1, M, reduce<ReduceMaxOp>},
      {"ReduceMin", 1, M, reduce<ReduceMinOp>},
      {"ReduceProd", 1, M, reduce<ReduceProdOp>},
      {"ReduceL1", 1, M, reduce<ReduceSumOp, Pre::Abs>},
      {"ReduceL2", 1, M, reduce<ReduceSumOp, Pre::Square, Post::Sqrt>},
      {"ReduceSumSquare", 1, M, reduce<ReduceSumOp, Pre::Square>},
      {"ReduceLogSum", 1, M, reduce<ReduceSumOp, Pre::None, Post::Log>},
      {"ReduceLogSumExp", 1, M, reduce<ReduceSumOp, Pre::Exp, Post::Log>},
      {"ArgMax", 1, M, argExtreme<false>},
      {"ArgMin", 1, M, argExtreme<true>},
      {"TopK", 1, M, topK},
  });
}

} // namespace kiln
