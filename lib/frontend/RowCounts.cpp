// Passing run-time row counts through the ops that keep rows aligned (see
// RowCounts.h). The list is what detection tails do with NonMaxSuppression's
// output: take a column (Gather or Slice on axis 1), gather boxes and
// scores by it (Gather on axis 0), scale, cast, stack columns (Concat on
// axis 1), reorder other axes.
#include "RowCounts.h"

using namespace mlir;

namespace kiln {
namespace {

bool isElementwise(StringRef op) {
  return llvm::is_contained(
      {"Identity", "Cast", "Neg", "Abs", "Relu", "Sigmoid", "Exp", "Log", "Sqrt", "Floor", "Ceil",
       "Round", "Not", "Sign", "Tanh", "Reciprocal", "Clip", "Add", "Sub", "Mul", "Div", "Min",
       "Max", "Pow", "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "And", "Or",
       "Xor", "Where", "Mod"},
      op);
}

/// The constant axes of attribute `name` (opset < 13 forms) or input `index`,
/// normalised to `rank`; nullopt when not known.
std::optional<SmallVector<int64_t>> axesOf(NodeImporter &n, StringRef name, size_t index,
                                           int64_t rank) {
  std::optional<SmallVector<int64_t>> axes =
      n.attr(name) ? n.getInts(name) : n.constInts(index);
  if (!axes)
    return std::nullopt;
  for (int64_t &a : *axes)
    a = a < 0 ? a + rank : a;
  return axes;
}

} // namespace

LogicalResult propagateRowCounts(NodeImporter &n, ArrayRef<Value> inputCounts,
                                 ArrayRef<Value> outputs, SmallVectorImpl<Value> &outputCounts) {
  StringRef op = n.node.op_type();
  Value count;
  SmallVector<size_t> counted;
  for (auto [i, c] : llvm::enumerate(inputCounts)) {
    if (!c)
      continue;
    if (count && c != count)
      return n.error("its inputs have different numbers of valid rows, each known only at run "
                     "time");
    count = c;
    counted.push_back(i);
  }
  auto reject = [&](const Twine &why) {
    return n.error("input " + Twine(counted.front()) +
                   " has a number of valid rows known only at run time (it comes from a "
                   "NonMaxSuppression on run-time boxes); " + why);
  };
  auto rankOf = [&](size_t i) -> int64_t {
    auto t = NodeImporter::rankedType(n.input(i));
    return t ? t.getRank() : -1;
  };
  bool keepsRows = false;
  if (isElementwise(op)) {
    // Each counted input's rows line up with the output's: same rank, so
    // broadcasting adds no leading axis.
    auto out = outputs.empty() ? RankedTensorType() : NodeImporter::rankedType(outputs[0]);
    keepsRows = out && llvm::all_of(counted, [&](size_t i) { return rankOf(i) == out.getRank(); });
  } else if (op == "Gather") {
    int64_t rank = rankOf(0);
    int64_t axis = n.getInt("axis", 0);
    axis = axis < 0 ? axis + rank : axis;
    bool dataCounted = inputCounts[0] != nullptr;
    bool indicesCounted = inputCounts.size() > 1 && inputCounts[1];
    // Rows of the data along another axis, or rows of the indices choosing
    // along axis 0: either way the output's axis 0 is the counted one.
    keepsRows = (dataCounted && !indicesCounted && axis > 0) ||
                (!dataCounted && indicesCounted && axis == 0 && rankOf(1) >= 1);
  } else if (op == "Slice" && counted == SmallVector<size_t>{0}) {
    int64_t rank = rankOf(0);
    auto axes = n.hasInput(3) ? n.constInts(3) : std::optional<SmallVector<int64_t>>();
    if (!n.hasInput(3) && rank >= 0) {
      axes.emplace();
      for (int64_t a = 0; a < rank; ++a)
        axes->push_back(a);
    }
    auto starts = n.constInts(1), ends = n.constInts(2);
    auto steps = n.hasInput(4) ? n.constInts(4) : std::optional<SmallVector<int64_t>>();
    keepsRows = axes && starts && ends && starts->size() == axes->size();
    for (size_t k = 0; keepsRows && k < axes->size(); ++k) {
      int64_t a = (*axes)[k] < 0 ? (*axes)[k] + rank : (*axes)[k];
      if (a != 0)
        continue;
      // Axis 0 may be sliced only as a whole.
      auto t = NodeImporter::rankedType(n.input(0));
      keepsRows = t && (*starts)[k] == 0 && (*ends)[k] >= t.getDimSize(0) &&
                  (!steps || (*steps)[k] == 1);
    }
  } else if (op == "Squeeze" || op == "Unsqueeze") {
    int64_t rank = op == "Squeeze" ? rankOf(0) : NodeImporter::rankedType(outputs[0]).getRank();
    auto axes = axesOf(n, "axes", 1, rank);
    keepsRows = counted == SmallVector<size_t>{0} && axes && !llvm::is_contained(*axes, 0);
  } else if (op == "Flatten") {
    keepsRows = counted == SmallVector<size_t>{0} && n.getInt("axis", 1) >= 1;
  } else if (op == "Concat") {
    int64_t rank = rankOf(counted.front());
    int64_t axis = n.getInt("axis", 0);
    keepsRows = (axis < 0 ? axis + rank : axis) != 0 &&
                llvm::all_of(counted, [&](size_t i) { return rankOf(i) == rank; });
  } else if (op == "Transpose") {
    auto perm = n.getInts("perm");
    keepsRows = counted == SmallVector<size_t>{0} && perm && !perm->empty() && (*perm)[0] == 0;
  }
  if (!keepsRows)
    return reject("'" + op + "' here would not keep its rows apart from the padding. Kiln "
                  "supports such values flowing to graph outputs through Gather, Slice, "
                  "Squeeze, Unsqueeze, Flatten, Concat, Transpose and elementwise operators "
                  "that keep axis 0");
  outputCounts.assign(outputs.size(), count);
  return success();
}

} // namespace kiln
