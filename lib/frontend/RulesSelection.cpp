// Operators whose output size depends on input values: Compress, NonZero,
// Unique, NonMaxSuppression. Kiln's executables have static shapes, so these
// need the values that decide the size while compiling: Compress its
// condition, NonZero and Unique their whole input. That holds for constants
// and for small graph inputs, on whose values kiln::Model specialises the
// executable when an error says they "must be a constant". On values
// computed at run time, NonMaxSuppression (kiln_nms_f32), NonZero
// (kiln_nonzero_u8) and Compress (a Gather at NonZero's positions) fill
// buffers for the most they can produce, and the output carries its number
// of valid entries along one axis, known at run time (RowCounts.h). Unique
// on run-time values is reported as not supported.
#include "RowCounts.h"

#include "mlir/IR/Matchers.h"

#include <cmath>
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

/// The layout the selection kernels write (SelectionKernels.cpp): element 0
/// of `packed` is the count, then the entries, shaped `shape` here. Gives
/// the entries and sets `count` (a scalar i64 tensor).
Value unpackCounted(NodeImporter &n, Value packed, ArrayRef<int64_t> shape, Value &count) {
  auto slice = [&](int64_t begin, int64_t end) {
    return n.make<SliceOp>(packed, n.i64Tensor({begin}), n.i64Tensor({end}), n.i64Tensor({0}),
                           n.i64Tensor({1}));
  };
  int64_t entries = 1;
  for (int64_t d : shape)
    entries *= d;
  count = n.make<ReshapeOp>(slice(0, 1), n.i64Tensor({}), n.b.getBoolAttr(false));
  return n.make<ReshapeOp>(slice(1, 1 + entries), n.i64Tensor(shape), n.b.getBoolAttr(false));
}

} // namespace

LogicalResult runTimeNonZero(NodeImporter &n, Value x, Value &coords, Value &count) {
  auto t = NodeImporter::rankedType(x);
  if (!t || !t.hasStaticShape() || t.getRank() == 0)
    return n.error("NonZero on values computed at run time needs an input of static shape and "
                   "rank >= 1");
  Type elt = t.getElementType();
  Value zero = n.constant(DenseElementsAttr::get(
      RankedTensorType::get({}, elt),
      isa<FloatType>(elt) ? Attribute(FloatAttr::get(elt, 0.0)) : IntegerAttr::get(elt, 0)));
  Value mask = n.make<CastOp>(n.make<NotOp>(n.make<EqualOp>(x, zero)),
                              TypeAttr::get(IntegerType::get(n.b.getContext(), 8,
                                                             IntegerType::Unsigned)));
  coords = unpackCounted(n, n.make<NonZeroOp>(mask), {t.getRank(), t.getNumElements()}, count);
  return failure(n.failed());
}

namespace {

LogicalResult compress(NodeImporter &n, Outs &out) {
  Value x = n.required(0);
  DenseElementsAttr cond = constantOf(n.required(1));
  if (n.failed())
    return failure();
  auto t = NodeImporter::rankedType(x);
  if (!t || !t.hasStaticShape())
    return n.error("Compress needs an input of static shape");
  int64_t axis = 0, dim = t.getNumElements();
  if (n.attr("axis")) {
    auto a = n.normalizeAxis(n.getInt("axis", 0), t.getRank(), "Compress axis");
    if (!a)
      return failure();
    axis = *a;
    dim = t.getDimSize(axis);
  } else {
    x = n.make<ReshapeOp>(x, n.i64Tensor({-1}), n.b.getBoolAttr(false));
  }
  if (!cond) {
    // A run-time condition: the positions of its true entries (padded with
    // 0, a valid position) gather along the axis, and their number counts it.
    Value c = n.input(1), coords, count;
    auto ct = NodeImporter::rankedType(c);
    if (!ct || ct.getRank() != 1 || !ct.hasStaticShape() || ct.getDimSize(0) > dim)
      return n.error("Compress's condition must be a 1-D tensor no longer than the axis");
    if (failed(runTimeNonZero(n, c, coords, count)))
      return failure();
    Value positions = n.make<SqueezeOp>(coords, n.b.getDenseI64ArrayAttr({0}));
    out.push_back(n.make<GatherOp>(x, positions, n.b.getI64IntegerAttr(axis)));
    n.setRowCount(0, count, axis);
    return failure(n.failed());
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
  if (!x) {
    Value coords, count;
    if (failed(runTimeNonZero(n, n.input(0), coords, count)))
      return failure();
    out.push_back(coords);
    n.setRowCount(0, count, 1);
    return success();
  }
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
    auto a = n.normalizeAxis(n.getInt("axis", 0), t.getRank(), "Unique axis");
    if (!a)
      return failure();
    axis = *a;
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
  if (llvm::any_of(v, [](double d) { return std::isnan(d); }))
    return n.error("Unique over NaN values is not supported");
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

/// Intersection over union of two boxes, each [y1, x1, y2, x2] with the
/// corners in either order, or [x_center, y_center, width, height].
double iou(const double *a, const double *b, bool centerBox) {
  auto corners = [&](const double *p, double &y1, double &x1, double &y2, double &x2) {
    if (centerBox) {
      x1 = p[0] - p[2] / 2;
      x2 = p[0] + p[2] / 2;
      y1 = p[1] - p[3] / 2;
      y2 = p[1] + p[3] / 2;
    } else {
      y1 = std::min(p[0], p[2]);
      y2 = std::max(p[0], p[2]);
      x1 = std::min(p[1], p[3]);
      x2 = std::max(p[1], p[3]);
    }
  };
  double ay1, ax1, ay2, ax2, by1, bx1, by2, bx2;
  corners(a, ay1, ax1, ay2, ax2);
  corners(b, by1, bx1, by2, bx2);
  double ih = std::max(0.0, std::min(ay2, by2) - std::max(ay1, by1));
  double iw = std::max(0.0, std::min(ax2, bx2) - std::max(ax1, bx1));
  double inter = ih * iw;
  double uni = (ay2 - ay1) * (ax2 - ax1) + (by2 - by1) * (bx2 - bx1) - inter;
  return uni > 0 ? inter / uni : 0.0;
}

/// NonMaxSuppression on boxes and scores computed at run time: the
/// kiln_nms_f32 kernel fills a buffer for the most it can select, and the
/// output is its rows with the number selected as their row count.
LogicalResult runTimeNonMaxSuppression(NodeImporter &n, double maxOut, double iouThreshold,
                                       double scoreThreshold, Outs &out) {
  Value boxes = n.required(0), scores = n.required(1);
  auto bt = NodeImporter::rankedType(boxes), st = NodeImporter::rankedType(scores);
  if (!bt || !st || !bt.hasStaticShape() || !st.hasStaticShape() || bt.getRank() != 3 ||
      bt.getDimSize(2) != 4 || st.getRank() != 3 || st.getDimSize(0) != bt.getDimSize(0) ||
      st.getDimSize(2) != bt.getDimSize(1))
    return n.error("NonMaxSuppression needs boxes [batch, boxes, 4] and scores "
                   "[batch, classes, boxes] of static shapes");
  if (!bt.getElementType().isF32() || !st.getElementType().isF32())
    return n.error("NonMaxSuppression takes float boxes and scores");
  int64_t numBoxes = bt.getDimSize(1);
  int64_t perClass = maxOut <= 0 ? 0 : (int64_t)std::min<double>(maxOut, (double)numBoxes);
  int64_t rows = bt.getDimSize(0) * st.getDimSize(1) * perClass;
  Value packed = n.make<NonMaxSuppressionOp>(
      boxes, scores, n.b.getI64IntegerAttr(perClass),
      n.b.getF32FloatAttr((float)iouThreshold), n.b.getF32FloatAttr((float)scoreThreshold),
      n.b.getI64IntegerAttr(n.getInt("center_point_box", 0)));
  Value count;
  out.push_back(unpackCounted(n, packed, {rows, 3}, count));
  n.setRowCount(0, count);
  return failure(n.failed());
}

/// Greedy per-class NMS, as ONNX Runtime does it: boxes above the score
/// threshold by descending score (ties by index), each kept unless its IoU
/// with a kept box exceeds the threshold, at most max_output per class.
LogicalResult nonMaxSuppression(NodeImporter &n, Outs &out) {
  DenseElementsAttr boxes = constantOf(n.required(0)), scores = constantOf(n.required(1));
  if (n.failed())
    return failure();
  auto optionalScalar = [&](size_t i, double dflt) -> std::optional<double> {
    if (!n.hasInput(i))
      return dflt;
    DenseElementsAttr a = constantOf(n.input(i));
    if (!a || a.getNumElements() != 1)
      return std::nullopt;
    return asDoubles(a)[0];
  };
  auto maxOut = optionalScalar(2, 0), iouThreshold = optionalScalar(3, 0),
       scoreThreshold = optionalScalar(4, -INFINITY);
  if (!maxOut || !iouThreshold || !scoreThreshold)
    return n.error("NonMaxSuppression's max_output_boxes_per_class, iou_threshold and "
                   "score_threshold must be constants");
  if (!boxes || !scores)
    return runTimeNonMaxSuppression(n, *maxOut, *iouThreshold, *scoreThreshold, out);
  auto bt = cast<RankedTensorType>(boxes.getType()), st = cast<RankedTensorType>(scores.getType());
  if (bt.getRank() != 3 || bt.getDimSize(2) != 4 || st.getRank() != 3 ||
      st.getDimSize(0) != bt.getDimSize(0) || st.getDimSize(2) != bt.getDimSize(1))
    return n.error("NonMaxSuppression needs boxes [batch, boxes, 4] and scores "
                   "[batch, classes, boxes]");
  bool centerBox = n.getInt("center_point_box", 0);
  int64_t batches = bt.getDimSize(0), numBoxes = bt.getDimSize(1), classes = st.getDimSize(1);
  SmallVector<double> b = asDoubles(boxes), s = asDoubles(scores);
  int64_t limit = (int64_t)*maxOut;
  SmallVector<int64_t> selected;
  for (int64_t bi = 0; bi < batches; ++bi)
    for (int64_t c = 0; c < classes; ++c) {
      const double *score = &s[(bi * classes + c) * numBoxes];
      SmallVector<int64_t> order;
      for (int64_t i = 0; i < numBoxes; ++i)
        if (score[i] > *scoreThreshold)
          order.push_back(i);
      llvm::stable_sort(order, [&](int64_t x, int64_t y) { return score[x] > score[y]; });
      SmallVector<int64_t> kept;
      for (int64_t i : order) {
        if ((int64_t)kept.size() >= limit)
          break;
        const double *box = &b[(bi * numBoxes + i) * 4];
        if (llvm::all_of(kept, [&](int64_t k) {
              return iou(box, &b[(bi * numBoxes + k) * 4], centerBox) <= *iouThreshold;
            }))
          kept.push_back(i);
      }
      for (int64_t k : kept)
        selected.append({bi, c, k});
    }
  out.push_back(i64Constant(n, {(int64_t)selected.size() / 3, 3}, selected));
  return success();
}

} // namespace

void addSelectionRules(std::vector<ImportRule> &rules) {
  constexpr int64_t M = kMaxSupportedOpset;
  rules.insert(rules.end(), {
      {"Compress", 9, M, compress},
      {"NonZero", 9, M, nonZero},
      {"Unique", 11, M, unique},
      {"NonMaxSuppression", 10, M, nonMaxSuppression},
  });
}

} // namespace kiln
