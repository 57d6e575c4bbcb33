// Operators whose output size depends on input values: Compress, NonZero,
// Unique. Kiln's executables have static shapes, so these need the values
// that decide the size while compiling: Compress its condition, NonZero and
// Unique their whole input. That holds for constants and for small graph
// inputs, on whose values kiln::Model specialises the executable when an
// error says they "must be a constant". Values computed at run time inside
// the graph are reported as not supported.
#include "NodeImporter.h"

#include "mlir/IR/Matchers.h"

#include <map>

using namespace mlir;

namespace kiln {
namespace {

using Outs = SmallVectorImpl<Value>;

DenseElementsAttr constantOf(Value v) {
  DenseElementsAttr attr;
  if (v && matchPattern(v, m_Constant(&attr)))
    return attr;
  return {};
}

/// Elements of a constant as doubles, for comparisons (exact for integers
/// below 2^53 and for every float).
SmallVector<double> asDoubles(DenseElementsAttr attr) {
  SmallVector<double> out;
  Type elt = attr.getElementType();
  if (isa<FloatType>(elt)) {
    for (const APFloat &f : attr.getValues<APFloat>())
      out.push_back(f.convertToDouble());
  } else {
    bool isUnsigned = elt.isUnsignedInteger() || elt.isInteger(1);
    for (const APInt &i : attr.getValues<APInt>())
      out.push_back(isUnsigned ? (double)i.getZExtValue() : (double)i.getSExtValue());
  }
  return out;
}

Value i64Constant(NodeImporter &n, ArrayRef<int64_t> shape, ArrayRef<int64_t> values) {
  return n.constant(
      DenseIntElementsAttr::get(RankedTensorType::get(shape, n.b.getI64Type()), values));
}

LogicalResult compress(NodeImporter &n, Outs &out) {
  Value x = n.required(0);
  DenseElementsAttr cond = constantOf(n.required(1));
  if (n.failed())
    return failure();
  if (!cond)
    return n.error("Compress's condition decides the output size; it must be a constant");
  auto t = NodeImporter::rankedType(x);
  if (!t || !t.hasStaticShape())
    return n.error("Compress needs an input of static shape");
  int64_t axis = 0, dim = t.getNumElements();
  if (n.attr("axis")) {
    axis = n.getInt("axis", 0);
    if (axis < 0)
      axis += t.getRank();
    if (axis < 0 || axis >= t.getRank())
      return n.error("Compress axis " + Twine(n.getInt("axis", 0)) +
                     " is out of range for rank " + Twine(t.getRank()));
    dim = t.getDimSize(axis);
  } else {
    x = n.make<ReshapeOp>(x, n.i64Tensor({-1}), n.b.getBoolAttr(false));
  }
  SmallVector<double> c = asDoubles(cond);
  if ((int64_t)c.size() > dim)
    return n.error("Compress's condition has " + Twine(c.size()) + " entries for a length of " +
                   Twine(dim));
  SmallVector<int64_t> kept;
  for (auto [i, v] : llvm::enumerate(c))
    if (v != 0)
      kept.push_back(i);
  out.push_back(n.make<GatherOp>(x, i64Constant(n, {(int64_t)kept.size()}, kept),
                                 n.b.getI64IntegerAttr(axis)));
  return failure(n.failed());
}

LogicalResult nonZero(NodeImporter &n, Outs &out) {
  DenseElementsAttr x = constantOf(n.required(0));
  if (n.failed())
    return failure();
  if (!x)
    return n.error("NonZero's input decides the output size; it must be a constant");
  auto t = cast<RankedTensorType>(x.getType());
  SmallVector<double> v = asDoubles(x);
  int64_t rank = t.getRank();
  SmallVector<SmallVector<int64_t>> coords(std::max<int64_t>(rank, 1));
  for (auto [flat, value] : llvm::enumerate(v)) {
    if (value == 0)
      continue;
    int64_t rest = flat;
    for (int64_t d = rank - 1; d >= 0; --d) {
      coords[d].push_back(rest % t.getDimSize(d));
      rest /= t.getDimSize(d);
    }
    if (rank == 0)
      coords[0].push_back(0);
  }
  int64_t count = coords[0].size();
  SmallVector<int64_t> flatOut;
  for (int64_t d = 0; d < rank; ++d)
    llvm::append_range(flatOut, coords[d]);
  out.push_back(i64Constant(n, {rank, count}, flatOut));
  return success();
}

LogicalResult unique(NodeImporter &n, Outs &out) {
  Value input = n.required(0);
  DenseElementsAttr x = constantOf(input);
  if (n.failed())
    return failure();
  if (!x)
    return n.error("Unique's input decides the output size; it must be a constant");
  auto t = cast<RankedTensorType>(x.getType());
  bool sorted = n.getInt("sorted", 1);
  bool hasAxis = n.attr("axis") != nullptr;
  int64_t axis = 0;
  SmallVector<int64_t> shape(t.getShape());
  if (hasAxis) {
    axis = n.getInt("axis", 0);
    if (axis < 0)
      axis += t.getRank();
    if (axis < 0 || axis >= t.getRank())
      return n.error("Unique axis " + Twine(n.getInt("axis", 0)) + " is out of range for rank " +
                     Twine(t.getRank()));
  } else {
    shape = {t.getNumElements()};
  }
  // Rows: the slices along `axis` (single elements without an axis).
  int64_t rows = shape[axis];
  int64_t inner = 1, outer = 1;
  for (int64_t d = axis + 1; d < (int64_t)shape.size(); ++d)
    inner *= shape[d];
  for (int64_t d = 0; d < axis; ++d)
    outer *= shape[d];
  SmallVector<double> v = asDoubles(x);
  SmallVector<SmallVector<double>> row(rows);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < inner; ++i)
        row[r].push_back(v[(o * rows + r) * inner + i]);
  // First occurrence of each distinct row, in order of appearance.
  std::map<SmallVector<double>, int64_t> firstOf;
  SmallVector<int64_t> firsts;
  for (int64_t r = 0; r < rows; ++r)
    if (firstOf.emplace(row[r], r).second)
      firsts.push_back(r);
  if (sorted)
    llvm::sort(firsts, [&](int64_t a, int64_t b) { return row[a] < row[b]; });
  std::map<SmallVector<double>, int64_t> position;
  for (auto [k, r] : llvm::enumerate(firsts))
    position[row[r]] = k;
  SmallVector<int64_t> inverse, counts(firsts.size(), 0);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t k = position[row[r]];
    inverse.push_back(k);
    ++counts[k];
  }
  int64_t unique = firsts.size();
  Value flat = hasAxis ? input : n.make<ReshapeOp>(input, n.i64Tensor({-1}), n.b.getBoolAttr(false));
  out.push_back(n.make<GatherOp>(flat, i64Constant(n, {unique}, firsts),
                                 n.b.getI64IntegerAttr(axis)));
  out.push_back(i64Constant(n, {unique}, firsts));
  out.push_back(i64Constant(n, {rows}, inverse));
  out.push_back(i64Constant(n, {unique}, counts));
  return failure(n.failed());
}

} // namespace

void addSelectionRules(std::vector<ImportRule> &rules) {
  constexpr int64_t M = kMaxSupportedOpset;
  rules.insert(rules.end(), {
      {"Compress", 9, M, compress},
      {"NonZero", 9, M, nonZero},
      {"Unique", 11, M, unique},
  });
}

} // namespace kiln
