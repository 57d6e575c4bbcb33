// Passing run-time counts through the ops that keep the counted entries
// apart from the padding (see RowCounts.h). The list is what detection
// tails do with NonMaxSuppression's and NonZero's outputs: take a column
// (Gather or Slice), gather boxes and scores by it (Gather, GatherND),
// scale, cast, compare, stack columns (Concat), reorder axes (Transpose),
// drop or add unit axes.
#include "RowCounts.h"

using namespace mlir;

namespace kiln {
namespace {

bool isElementwise(StringRef op) {
  return llvm::is_contained(
      {"Identity", "Cast", "Neg", "Abs", "Relu", "Sigmoid", "Exp", "Log", "Sqrt", "Floor", "Ceil",
       "Round", "Not", "Sign", "Tanh", "Reciprocal", "Clip", "Add", "Sub", "Mul", "Div", "Min",
       "Max", "Pow", "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "And", "Or",
       "Xor", "Where", "Mod", "LeakyRelu", "HardSigmoid", "HardSwish", "Elu", "Selu", "Celu",
       "Softplus", "Softsign", "Erf", "Gelu", "Mish", "PRelu", "ThresholdedRelu", "Sin", "Cos",
       "IsNaN", "IsInf"},
      op);
}

/// Ops that compute each entry of axis 0 (an image, a detection's crop) from
/// that entry alone: a keypoint or mask head's convolutions over the crops
/// that a NonMaxSuppression kept leave the padding crops apart.
bool isPerImage(StringRef op) {
  return llvm::is_contained({"Conv", "ConvTranspose", "MaxPool", "AveragePool", "LpPool",
                             "GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool",
                             "BatchNormalization", "InstanceNormalization", "LRN", "Resize",
                             "Upsample", "DepthToSpace", "SpaceToDepth"},
                            op);
}

int64_t rankOf(Value v) {
  auto t = NodeImporter::rankedType(v);
  return t ? t.getRank() : -1;
}

/// Squeeze's or Unsqueeze's axes (axesFrom), normalised to `rank`; nullopt
/// when not given, as Squeeze then drops every unit axis, which may be the
/// counted one.
std::optional<SmallVector<int64_t>> axesOf(NodeImporter &n, int64_t rank) {
  std::optional<SmallVector<int64_t>> axes = axesFrom(n, 13, 1);
  if (!axes || axes->empty())
    return std::nullopt;
  for (int64_t &a : *axes)
    a = a < 0 ? a + rank : a;
  return axes;
}

/// Where the counted axis `a` of the counted inputs lands in the node's
/// first output, or nullopt when the node would mix in padding.
std::optional<int64_t> outputAxis(NodeImporter &n, ArrayRef<CountedAxis> in,
                                  ArrayRef<size_t> counted, int64_t a, ArrayRef<Value> outputs) {
  StringRef op = n.node.op_type();
  bool onlyFirst = counted.size() == 1 && counted[0] == 0;
  if (isElementwise(op)) {
    // Same rank as the output: broadcasting adds no leading axis.
    int64_t rank = outputs.empty() ? -1 : rankOf(outputs[0]);
    if (rank >= 0 && llvm::all_of(counted, [&](size_t i) { return rankOf(n.input(i)) == rank; }))
      return a;
    return std::nullopt;
  }
  if (op == "Gather") {
    int64_t rank = rankOf(n.input(0)), g = n.getInt("axis", 0);
    g = g < 0 ? g + rank : g;
    if (onlyFirst && a != g) // other entries of counted data
      return a < g ? a : a + rankOf(n.input(1)) - 1;
    if (counted.size() == 1 && counted[0] == 1) // counted indices
      return g + a;
    return std::nullopt;
  }
  if (op == "GatherND" && counted.size() == 1 && counted[0] == 1 &&
      n.getInt("batch_dims", 0) == 0 && a < rankOf(n.input(1)) - 1)
    return a; // counted index tuples: the output's leading axes are theirs
  if (op == "Slice" && onlyFirst) {
    // The counted axis only as a whole.
    auto t = NodeImporter::rankedType(n.input(0));
    auto axes = n.hasInput(3) ? n.constInts(3) : std::optional<SmallVector<int64_t>>();
    if (!n.hasInput(3) && t) {
      axes.emplace();
      for (int64_t k = 0; k < t.getRank(); ++k)
        axes->push_back(k);
    }
    auto starts = n.constInts(1), ends = n.constInts(2);
    auto steps = n.hasInput(4) ? n.constInts(4) : std::optional<SmallVector<int64_t>>();
    if (!t || !axes || !starts || !ends || starts->size() != axes->size())
      return std::nullopt;
    for (size_t k = 0; k < axes->size(); ++k) {
      int64_t ax = (*axes)[k] < 0 ? (*axes)[k] + t.getRank() : (*axes)[k];
      if (ax == a && ((*starts)[k] != 0 || (*ends)[k] < t.getDimSize(a) ||
                      (steps && (*steps)[k] != 1)))
        return std::nullopt;
    }
    return a;
  }
  if (op == "Squeeze" && onlyFirst) {
    auto axes = axesOf(n, rankOf(n.input(0)));
    if (!axes || llvm::is_contained(*axes, a))
      return std::nullopt;
    return a - llvm::count_if(*axes, [&](int64_t x) { return x < a; });
  }
  if (op == "Unsqueeze" && onlyFirst) {
    auto axes = axesOf(n, rankOf(outputs[0]));
    if (!axes)
      return std::nullopt;
    SmallVector<int64_t> sorted(*axes);
    llvm::sort(sorted);
    for (int64_t x : sorted)
      if (x <= a)
        ++a;
    return a;
  }
  if ((op == "Gemm" && !n.getInt("transA", 0) && a == 0) ||
      (op == "MatMul" && a < rankOf(n.input(0)) - 1)) {
    // Rows of the first operand: each output row is its own.
    if (!onlyFirst || outputs.empty())
      return std::nullopt;
    return a + rankOf(outputs[0]) - rankOf(n.input(0));
  }
  if ((op == "Softmax" || op == "LogSoftmax" || op == "Hardmax") && onlyFirst) {
    // Along another axis; before opset 13 over every axis from `axis` on.
    int64_t rank = rankOf(n.input(0)), axis = n.getInt("axis", n.opset < 13 ? 1 : -1);
    axis = axis < 0 ? axis + rank : axis;
    return (n.opset < 13 ? a < axis : a != axis) ? std::optional<int64_t>(a) : std::nullopt;
  }
  if (op == "Split" && onlyFirst) {
    int64_t rank = rankOf(n.input(0)), axis = n.getInt("axis", 0);
    return (axis < 0 ? axis + rank : axis) == a ? std::nullopt : std::optional<int64_t>(a);
  }
  if (op == "TopK" && onlyFirst) { // along another axis (CountedOps.cpp has the counted one)
    int64_t rank = rankOf(n.input(0)), axis = n.getInt("axis", -1);
    return (axis < 0 ? axis + rank : axis) == a ? std::nullopt : std::optional<int64_t>(a);
  }
  if (op == "Reshape" && onlyFirst && !outputs.empty()) {
    // Dims up to the counted one unchanged: each valid entry keeps its
    // elements, only the trailing dims regroup.
    auto it = NodeImporter::rankedType(n.input(0)), ot = NodeImporter::rankedType(outputs[0]);
    if (!it || !ot || !it.hasStaticShape() || !ot.hasStaticShape() || a >= ot.getRank())
      return std::nullopt;
    for (int64_t d = 0; d <= a; ++d)
      if (it.getDimSize(d) != ot.getDimSize(d))
        return std::nullopt;
    return a;
  }
  if (op == "Flatten" && onlyFirst && a == 0 && n.getInt("axis", 1) == 1)
    return 0;
  if (isPerImage(op) && onlyFirst && a == 0 && !outputs.empty()) {
    // Batch statistics (training mode) and crops along axis 0 mix images.
    if (op == "BatchNormalization" && (n.getInt("training_mode", 0) != 0 || outputs.size() > 1))
      return std::nullopt;
    if ((op == "Resize" || op == "Upsample") &&
        n.getString("coordinate_transformation_mode", "") == "tf_crop_and_resize")
      return std::nullopt;
    // Axis 0 kept as it is (a Resize whose scale along it is 1).
    auto it = NodeImporter::rankedType(n.input(0)), ot = NodeImporter::rankedType(outputs[0]);
    if (it && ot && it.getRank() == ot.getRank() && it.getRank() > 0 &&
        !it.isDynamicDim(0) && it.getDimSize(0) == ot.getDimSize(0))
      return 0;
    return std::nullopt;
  }
  if (op == "Concat") {
    // Along another axis, of inputs of one rank.
    int64_t rank = rankOf(n.input(counted[0])), c = n.getInt("axis", 0);
    c = c < 0 ? c + rank : c;
    if (c == a || llvm::any_of(counted, [&](size_t i) { return rankOf(n.input(i)) != rank; }))
      return std::nullopt;
    return a;
  }
  if (op == "Transpose" && onlyFirst) {
    auto perm = n.getInts("perm");
    int64_t rank = rankOf(n.input(0));
    if (!perm) // reversed axes
      return rank > 0 ? std::optional<int64_t>(rank - 1 - a) : std::nullopt;
    auto *at = llvm::find(*perm, a);
    return at == perm->end() ? std::nullopt : std::optional<int64_t>(at - perm->begin());
  }
  return std::nullopt;
}

/// The count of a Slice along the counted axis with constant, non-negative
/// starts and ends and step 1: clamp(min(count, end) - start, 0), where the
/// slice's static size is already min(padded, end) - start. Nullopt for any
/// other Slice of the counted axis (or one that leaves it whole: no change).
std::optional<CountedAxis> slicedCount(NodeImporter &n, CountedAxis c, ArrayRef<Value> outputs) {
  auto t = NodeImporter::rankedType(n.input(0));
  auto starts = n.constInts(1), ends = n.constInts(2);
  if (!t || !starts || !ends || starts->size() != ends->size() || !n.hasInput(3))
    return std::nullopt;
  auto axes = n.constInts(3);
  auto steps = n.hasInput(4) ? n.constInts(4) : std::optional<SmallVector<int64_t>>();
  if (!axes || axes->size() != starts->size() || (n.hasInput(4) && !steps))
    return std::nullopt;
  for (size_t k = 0; k < axes->size(); ++k) {
    int64_t ax = (*axes)[k] < 0 ? (*axes)[k] + t.getRank() : (*axes)[k];
    if (ax != c.axis)
      continue;
    int64_t start = (*starts)[k], end = (*ends)[k];
    if (start < 0 || end < 0 || (steps && (*steps)[k] != 1))
      return std::nullopt;
    if (start == 0 && end >= t.getDimSize(c.axis))
      return std::nullopt; // whole: outputAxis passes the count on
    Value cut = n.make<MinOp>(c.count, n.i64Scalar(std::min(end, t.getDimSize(c.axis))));
    cut = n.make<MaxOp>(n.make<SubOp>(cut, n.i64Scalar(start)), n.i64Scalar(0));
    return CountedAxis{cut, c.axis};
  }
  return std::nullopt;
}

/// The count of a Reshape that merges the counted axis with the axes after
/// it (per-class boxes [n, classes, 4] -> [n * classes, 4]): each valid
/// entry becomes `merged` consecutive ones, so count * merged are valid.
std::optional<CountedAxis> mergedCount(NodeImporter &n, CountedAxis c, ArrayRef<Value> outputs) {
  auto it = NodeImporter::rankedType(n.input(0));
  auto ot = outputs.empty() ? RankedTensorType() : NodeImporter::rankedType(outputs[0]);
  if (!it || !ot || !it.hasStaticShape() || !ot.hasStaticShape() || c.axis >= ot.getRank())
    return std::nullopt;
  for (int64_t d = 0; d < c.axis; ++d)
    if (it.getDimSize(d) != ot.getDimSize(d))
      return std::nullopt;
  int64_t merged = 1, d = c.axis + 1;
  while (d < it.getRank() && it.getDimSize(c.axis) * merged < ot.getDimSize(c.axis))
    merged *= it.getDimSize(d++);
  if (merged == 1 || it.getDimSize(c.axis) * merged != ot.getDimSize(c.axis) ||
      it.getRank() - d != ot.getRank() - c.axis - 1)
    return std::nullopt;
  for (int64_t k = 0; d + k < it.getRank(); ++k)
    if (it.getDimSize(d + k) != ot.getDimSize(c.axis + 1 + k))
      return std::nullopt;
  return CountedAxis{n.make<MulOp>(c.count, n.i64Scalar(merged)), c.axis};
}

} // namespace

LogicalResult propagateRowCounts(NodeImporter &n, ArrayRef<CountedAxis> inputCounts,
                                 ArrayRef<Value> outputs,
                                 SmallVectorImpl<CountedAxis> &outputCounts) {
  StringRef op = n.node.op_type();
  SmallVector<CountedAxis> in(inputCounts);
  // Gathering from data counted along the gathered axis reads valid entries
  // only (ONNX requires indices within the actual length): the data's count
  // no longer matters, the indices' (if any) counts the output.
  if ((op == "Gather" || op == "GatherElements") && in[0]) {
    int64_t rank = rankOf(n.input(0)), g = n.getInt("axis", 0);
    if (in[0].axis == (g < 0 ? g + rank : g))
      in[0] = CountedAxis();
  }
  // A Slice of the leading entries along the counted axis: the count is cut
  // to the slice.
  if (op == "Slice" && in[0] && llvm::all_of(ArrayRef(in).drop_front(), [](CountedAxis c) {
        return !c;
      })) {
    if (auto cut = slicedCount(n, in[0], outputs); cut) {
      outputCounts.assign(outputs.size(), *cut);
      return failure(n.failed());
    }
  }
  if (op == "Reshape" && in[0] && !in[1]) {
    if (auto merged = mergedCount(n, in[0], outputs)) {
      outputCounts.assign(outputs.size(), *merged);
      return failure(n.failed());
    }
  }
  if (llvm::none_of(in, [](CountedAxis c) { return (bool)c; }))
    return success();
  CountedAxis first;
  SmallVector<size_t> counted;
  for (auto [i, c] : llvm::enumerate(in)) {
    if (!c)
      continue;
    if (first && (c.count != first.count || c.axis != first.axis))
      return n.error("its inputs have different numbers of valid entries, each known only at "
                     "run time");
    first = c;
    counted.push_back(i);
  }
  std::optional<int64_t> axis = outputAxis(n, in, counted, first.axis, outputs);
  if (!axis)
    return n.error("input " + Twine(counted.front()) +
                   " has a number of valid entries along axis " + Twine(first.axis) +
                   " known only at run time (from a NonMaxSuppression or NonZero on run-time "
                   "values); '" + op + "' here would not keep them apart from the padding. "
                   "Kiln supports such values flowing to graph outputs through Gather, "
                   "GatherND, Slice, Split, Squeeze, Unsqueeze, Reshape, Flatten, Concat, "
                   "Transpose, TopK, Softmax, Gemm, MatMul, reductions, RoiAlign, "
                   "convolutions, pooling and Resize over counted images (axis 0), and "
                   "elementwise operators that leave the counted axis whole");
  outputCounts.assign(outputs.size(), CountedAxis{first.count, *axis});
  return success();
}

} // namespace kiln
