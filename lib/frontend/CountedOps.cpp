// Nodes that read counted values (RowCounts.h) and need more than passing
// the count on, and the shape arithmetic on counts (BoundedInts).
//
// A detector's post-processing keeps, per class, the scores above a
// threshold (NonZero: a counted axis), then at most N of them:
//
//   k = ReduceMin(Concat([N], Unsqueeze(Gather(Shape(scores), 0))))
//   TopK(scores, k) ... Concat(per-class boxes) ... NonMaxSuppression
//
// Here Shape gives a run-time value whose element is the count, k is
// bounded by N, and the per-class results are concatenated along the
// counted axis. Kiln sizes every such result by the most it can hold and
// carries the count, as for NonMaxSuppression itself:
//   Shape            the static dims with the count spliced in (run time)
//   TopK             kiln.top_k, sized by k's bound, searching the valid
//                    entries only; counted by min(k, valid)
//   ConstantOfShape, Expand, Reshape to bounded dims, Slice to a bounded
//                    end: sized by the bounds, counted by the run-time dim
//   ScatterElements  of counted indices: their padding sent to a scratch
//                    slice appended to the data
//   Concat           along the counted axis: the parts' valid entries
//                    gathered to the front (NonZero of a validity mask)
//   ReduceMax/Min/Sum, NonMaxSuppression, NonZero over the counted axis:
//                    the padding replaced by the operation's identity first
//   RoiAlign         of counted regions: one counted row per region
#include "RowCounts.h"

#include <limits>

using namespace mlir;

namespace kiln {
namespace {

using Entry = BoundedInts::Entry;

/// A scalar i64 tensor from a one-element tensor (k is [1] in ONNX).
Value toScalar(NodeImporter &n, Value v) {
  return n.make<ReshapeOp>(v, n.i64Tensor({}), n.b.getBoolAttr(false));
}

/// A bool tensor, broadcastable against a rank-`rank` tensor, true at the
/// positions along `axis` below `count`.
Value validMask(NodeImporter &n, int64_t rank, int64_t axis, int64_t size, Value count) {
  return n.make<LessOp>(n.positionsAlong(rank, axis, size), count);
}

/// `x` with its entries past `count` along `axis` replaced by `fill`.
Value maskPadding(NodeImporter &n, Value x, int64_t axis, Value count, double fill) {
  auto t = NodeImporter::rankedType(x);
  return n.make<SelectOp>(validMask(n, t.getRank(), axis, t.getDimSize(axis), count), x,
                          n.scalarLike(x, fill));
}

/// Shape of a tensor counted along one axis: its static dims with the
/// count spliced in at run time.
LogicalResult countedShape(NodeImporter &n, CountedAxis c, SmallVectorImpl<Value> &outputs,
                           SmallVectorImpl<BoundedInts> &bounds) {
  auto t = NodeImporter::rankedType(n.input(0));
  if (!t || !t.hasStaticShape())
    return n.error("Shape of a counted value needs its static padded shape");
  int64_t rank = t.getRank();
  auto clampEnd = [&](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + rank : v, 0, rank); };
  int64_t start = clampEnd(n.getInt("start", 0));
  int64_t end = clampEnd(n.getInt("end", rank));
  SmallVector<Value> pieces;
  BoundedInts out;
  for (int64_t d = start; d < end; ++d) {
    bool counted = d == c.axis;
    pieces.push_back(counted ? n.make<ReshapeOp>(c.count, n.i64Tensor({1}), n.b.getBoolAttr(false))
                             : n.i64Tensor({t.getDimSize(d)}));
    out.entries.push_back(Entry{t.getDimSize(d), !counted, counted ? c.count : Value()});
  }
  if (pieces.empty())
    outputs.push_back(n.constant(DenseIntElementsAttr::get(
        RankedTensorType::get({0}, n.b.getI64Type()), ArrayRef<int64_t>{})));
  else
    outputs.push_back(pieces.size() == 1 ? pieces[0]
                                         : n.make<ConcatOp>(pieces, n.b.getI64IntegerAttr(0)));
  bounds.assign(1, out);
  return failure(n.failed());
}

} // namespace

void sortedTopK(NodeImporter &n, Value x, int64_t axis, Value k, int64_t capacity, Value valid,
                SmallVectorImpl<Value> &outputs) {
  auto t = NodeImporter::rankedType(x);
  Value buffer = n.make<TopKOp>(x, k, valid, n.b.getI64IntegerAttr(axis),
                                n.b.getI64IntegerAttr(capacity),
                                n.b.getBoolAttr(n.getInt("largest", 1) != 0));
  SmallVector<int64_t> shape(t.getShape());
  shape[axis] = capacity;
  int64_t positions = 1;
  for (int64_t d : shape)
    positions *= d;
  Value indices = n.make<ReshapeOp>(
      n.make<SliceOp>(buffer, n.i64Tensor({0}), n.i64Tensor({positions}), n.i64Tensor({0}),
                      n.i64Tensor({1})),
      n.i64Tensor(shape), n.b.getBoolAttr(false));
  outputs.push_back(n.make<GatherElementsOp>(x, indices, n.b.getI64IntegerAttr(axis)));
  outputs.push_back(indices);
}

namespace {

/// TopK whose k is bounded (not constant) or whose input is counted along
/// the TopK axis: kiln.top_k over the valid entries, counted by min(k, valid).
LogicalResult countedTopK(NodeImporter &n, CountedAxis in, const BoundedInts &kBounds,
                          SmallVectorImpl<Value> &outputs,
                          SmallVectorImpl<CountedAxis> &counts) {
  Value x = n.input(0);
  auto t = NodeImporter::rankedType(x);
  if (!t || !t.hasStaticShape() || !t.getElementType().isF32())
    return n.error("TopK of a run-time k or over a counted axis needs a float32 input of "
                   "static shape");
  auto axis = n.normalizeAxis(n.getInt("axis", -1), t.getRank());
  if (!axis)
    return failure();
  int64_t dim = t.getDimSize(*axis);
  int64_t kMax;
  Value k;
  if (auto known = n.constInts(1); known && known->size() == 1) {
    kMax = (*known)[0];
    if (kMax < 0)
      return n.error("TopK k = " + Twine(kMax) + " is negative");
    k = n.i64Scalar(kMax);
  } else if (kBounds.entries.size() == 1) {
    kMax = kBounds.entries[0].max;
    k = toScalar(n, n.input(1));
  } else {
    return n.error("TopK's k must be a constant or a bounded count");
  }
  Value valid = in && in.axis == *axis ? in.count : n.i64Scalar(dim);
  sortedTopK(n, x, *axis, k, std::clamp<int64_t>(kMax, 0, dim), valid, outputs);
  Value count = n.make<MinOp>(k, valid);
  counts.assign(2, CountedAxis{count, *axis});
  return failure(n.failed());
}

/// `shape` (a bounded shape input) as constant dims, each run-time dim at
/// its bound; `runTime` the position of the one run-time dim, if any.
std::optional<SmallVector<int64_t>> boundedDims(NodeImporter &n, const BoundedInts &shape,
                                                std::optional<int64_t> &runTime) {
  SmallVector<int64_t> dims;
  for (auto [d, e] : llvm::enumerate(shape.entries)) {
    dims.push_back(e.max);
    if (e.known)
      continue;
    if (runTime) {
      (void)n.error("the shape has more than one dim known only at run time");
      return std::nullopt;
    }
    runTime = d;
  }
  return dims;
}

/// The run-time value of dim `d` of a bounded shape input `i`.
Value runTimeDim(NodeImporter &n, const BoundedInts &shape, size_t i, int64_t d) {
  if (Value same = shape.entries[d].same)
    return same;
  return toScalar(n, n.make<SliceOp>(n.input(i), n.i64Tensor({d}), n.i64Tensor({d + 1}),
                                     n.i64Tensor({0}), n.i64Tensor({1})));
}

/// ConstantOfShape of a shape with one run-time dim: sized by its bound,
/// counted by its value.
LogicalResult boundedConstantOfShape(NodeImporter &n, const BoundedInts &shape, RunRule runRule,
                                     SmallVectorImpl<Value> &outputs,
                                     SmallVectorImpl<CountedAxis> &counts) {
  std::optional<int64_t> runTime;
  auto dims = boundedDims(n, shape, runTime);
  if (!dims)
    return failure();
  SmallVector<Value> inputs{n.i64Tensor(*dims)};
  if (failed(runRule(inputs, outputs)))
    return failure();
  if (runTime)
    counts.assign(1, CountedAxis{runTimeDim(n, shape, 0, *runTime), *runTime});
  return failure(n.failed());
}

/// Concat along the counted axis: the parts concatenated as they are, then
/// the valid entries of each gathered to the front, in order; the count is
/// the sum of the parts' counts.
LogicalResult compactingConcat(NodeImporter &n, ArrayRef<CountedAxis> inputCounts, int64_t axis,
                               RunRule runRule, CountedState &state,
                               SmallVectorImpl<Value> &outputs,
                               SmallVectorImpl<CountedAxis> &counts) {
  SmallVector<Value> inputs;
  for (size_t i = 0; i < n.numInputs(); ++i)
    inputs.push_back(n.input(i));
  SmallVector<Value> joined;
  if (failed(runRule(inputs, joined)))
    return failure();
  std::vector<std::pair<void *, int64_t>> key;
  for (auto [i, v] : llvm::enumerate(inputs)) {
    auto t = NodeImporter::rankedType(v);
    if (!t || !t.hasStaticShape())
      return n.error("Concat of counted values needs inputs of static shape");
    Value c = i < inputCounts.size() && inputCounts[i] ? inputCounts[i].count : Value();
    key.emplace_back(c.getAsOpaquePointer(), t.getDimSize(axis));
  }
  auto [it, fresh] = state.compactions.try_emplace(key);
  if (fresh) {
    SmallVector<Value> masks;
    Value total = n.i64Scalar(0);
    for (auto [c, size] : key) {
      Value count = c ? Value::getFromOpaquePointer(c) : n.i64Scalar(size);
      masks.push_back(validMask(n, 1, 0, size, count));
      total = n.make<AddOp>(total, count);
    }
    Value mask = masks.size() == 1 ? masks[0] : n.make<ConcatOp>(masks, n.b.getI64IntegerAttr(0));
    Value coords, ignored;
    if (failed(runTimeNonZero(n, mask, coords, ignored)))
      return failure();
    it->second = {n.make<SqueezeOp>(coords, n.b.getDenseI64ArrayAttr({0})), total};
  }
  outputs.push_back(n.make<GatherOp>(joined[0], it->second.first, n.b.getI64IntegerAttr(axis)));
  counts.assign(1, CountedAxis{it->second.second, axis});
  return failure(n.failed());
}

/// The axes a Reduce* node reduces (normalised), or nullopt when they are
/// not constant.
std::optional<SmallVector<int64_t>> reducedAxes(NodeImporter &n, int64_t rank) {
  StringRef op = n.node.op_type();
  int64_t inputSince = op == "ReduceSum" ? 13 : 18;
  SmallVector<int64_t> axes;
  if (n.opset >= inputSince) {
    if (n.hasInput(1)) {
      auto given = n.constInts(1);
      if (!given)
        return std::nullopt;
      axes = *given;
    }
  } else if (auto given = n.getInts("axes")) {
    axes = *given;
  }
  if (axes.empty()) {
    if (n.getInt("noop_with_empty_axes", 0))
      return axes;
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  }
  for (int64_t &a : axes)
    a = a < 0 ? a + rank : a;
  return axes;
}

/// ReduceMax/Min/Sum of a counted input: over the counted axis the padding
/// becomes the reduction's identity; along the others the count passes on.
LogicalResult countedReduce(NodeImporter &n, CountedAxis in, RunRule runRule,
                            SmallVectorImpl<Value> &outputs,
                            SmallVectorImpl<CountedAxis> &counts) {
  Value x = n.input(0);
  auto t = NodeImporter::rankedType(x);
  if (!t)
    return n.error("a reduction of a counted value needs its rank");
  auto axes = reducedAxes(n, t.getRank());
  if (!axes)
    return n.error("a reduction of a counted value needs constant axes");
  SmallVector<Value> inputs;
  for (size_t i = 0; i < n.numInputs(); ++i)
    inputs.push_back(n.input(i));
  bool overCount = llvm::is_contained(*axes, in.axis);
  if (overCount) {
    StringRef op = n.node.op_type();
    bool isFloat = isa<FloatType>(t.getElementType());
    double inf = std::numeric_limits<double>::infinity();
    double lowest = isFloat ? -inf : (double)std::numeric_limits<int64_t>::min();
    double highest = isFloat ? inf : (double)std::numeric_limits<int64_t>::max();
    double identity = op == "ReduceMax" ? lowest : op == "ReduceMin" ? highest : 0.0;
    inputs[0] = maskPadding(n, x, in.axis, in.count, identity);
  }
  if (failed(runRule(inputs, outputs)))
    return failure();
  if (!overCount) {
    int64_t axis = in.axis;
    if (!n.getInt("keepdims", 1))
      axis -= llvm::count_if(*axes, [&](int64_t a) { return a < in.axis; });
    counts.assign(1, CountedAxis{in.count, axis});
  }
  return failure(n.failed());
}

/// NonMaxSuppression of counted scores (and boxes): padded boxes get a
/// score of -inf and the score threshold becomes at least the lowest float,
/// so that only valid boxes are candidates.
LogicalResult countedNonMaxSuppression(NodeImporter &n, ArrayRef<CountedAxis> inputCounts,
                                       RunRule runRule, SmallVectorImpl<Value> &outputs) {
  CountedAxis scores = inputCounts.size() > 1 ? inputCounts[1] : CountedAxis();
  if (!scores || scores.axis != 2)
    return n.error("NonMaxSuppression of counted boxes needs their scores counted along the "
                   "boxes axis");
  if (llvm::any_of(inputCounts.drop_front(2), [](CountedAxis c) { return (bool)c; }))
    return n.error("NonMaxSuppression's thresholds must be constants");
  SmallVector<Value> inputs;
  for (size_t i = 0; i < 5; ++i)
    inputs.push_back(n.input(i));
  inputs[1] = maskPadding(n, n.input(1), 2, scores.count,
                          -std::numeric_limits<double>::infinity());
  float lowest = std::numeric_limits<float>::lowest();
  std::optional<SmallVector<double>> given =
      inputs[4] ? n.constFloats(4) : std::optional<SmallVector<double>>();
  if (!inputs[4] || (given && given->size() == 1 && (*given)[0] < lowest))
    inputs[4] = n.constant(
        DenseFPElementsAttr::get(RankedTensorType::get({1}, n.b.getF32Type()), lowest));
  if (n.failed())
    return failure();
  return runRule(inputs, outputs);
}

/// Expand or Reshape to a shape with a run-time dim (or of a counted
/// input): the padded tensor takes the shape at its bounds. The result is
/// counted along the run-time dim, by the input's count when the input is
/// counted there (a count's shape arithmetic gives the count back), by
/// the dim's value otherwise.
LogicalResult boundedShapeOp(NodeImporter &n, CountedAxis in, const BoundedInts &shape,
                             RunRule runRule, SmallVectorImpl<Value> &outputs,
                             SmallVectorImpl<CountedAxis> &counts) {
  std::optional<int64_t> runTime;
  auto dims = boundedDims(n, shape, runTime);
  if (!dims)
    return failure();
  SmallVector<Value> inputs{n.input(0), n.i64Tensor(*dims)};
  if (failed(runRule(inputs, outputs)))
    return failure();
  if (!runTime) // every dim known: a count on the input passes as for constants
    return success();
  auto it = NodeImporter::rankedType(n.input(0));
  auto ot = NodeImporter::rankedType(outputs[0]);
  if (!it || !ot)
    return n.error("needs ranked types");
  Value count;
  if (in) {
    // Only where the counted axis lands on the run-time dim, with the
    // entries up to it unchanged (Reshape) or aligned (Expand).
    int64_t shift = n.node.op_type() == "Expand" ? ot.getRank() - it.getRank() : 0;
    if (in.axis + shift != *runTime || ot.getDimSize(*runTime) != it.getDimSize(in.axis))
      return n.error("the shape's run-time dim is not the input's counted axis");
    count = in.count;
  } else {
    count = runTimeDim(n, shape, 1, *runTime);
  }
  counts.assign(1, CountedAxis{count, *runTime});
  return failure(n.failed());
}

/// ScatterElements whose indices (and updates) are counted: the padding
/// entries of the indices are sent to one scratch slice appended to the
/// data along the scatter axis, and cut off after. The data's count (if
/// any) is the result's.
LogicalResult countedScatterElements(NodeImporter &n, ArrayRef<CountedAxis> counts, RunRule runRule,
                                     SmallVectorImpl<Value> &outputs,
                                     SmallVectorImpl<CountedAxis> &outputCounts) {
  auto dt = NodeImporter::rankedType(n.input(0));
  auto it = NodeImporter::rankedType(n.input(1));
  if (!dt || !it || !dt.hasStaticShape() || !it.hasStaticShape())
    return n.error("ScatterElements of counted values needs static shapes");
  auto axis = n.normalizeAxis(n.getInt("axis", 0), dt.getRank());
  if (!axis)
    return failure();
  CountedAxis data = counts[0], indices = counts.size() > 1 ? counts[1] : CountedAxis();
  if (data && data.axis != *axis)
    return n.error("ScatterElements into data counted along an axis other than its own");
  if (!indices)
    return n.error("ScatterElements of counted updates needs counted indices");
  if (n.getString("reduction", "none") != "none")
    return n.error("ScatterElements with a reduction of counted values is not supported");
  SmallVector<int64_t> scratchShape(dt.getShape());
  int64_t size = scratchShape[*axis];
  scratchShape[*axis] = 1;
  auto scratchType = RankedTensorType::get(scratchShape, dt.getElementType());
  Value scratch =
      n.constant(DenseElementsAttr::get(scratchType, n.b.getZeroAttr(dt.getElementType())));
  SmallVector<Value> inputs{
      n.make<ConcatOp>(ValueRange{n.input(0), scratch}, n.b.getI64IntegerAttr(*axis)),
      n.make<SelectOp>(validMask(n, it.getRank(), indices.axis, it.getDimSize(indices.axis),
                                 indices.count),
                       n.input(1), n.i64Scalar(size)),
      n.input(2)};
  SmallVector<Value> scattered;
  if (n.failed() || failed(runRule(inputs, scattered)))
    return failure();
  SmallVector<int64_t> starts(dt.getRank(), 0), ends(dt.getShape()), steps(dt.getRank(), 1);
  SmallVector<int64_t> axes;
  for (int64_t d = 0; d < dt.getRank(); ++d)
    axes.push_back(d);
  outputs.push_back(n.make<SliceOp>(scattered[0], n.i64Tensor(starts), n.i64Tensor(ends),
                                    n.i64Tensor(axes), n.i64Tensor(steps)));
  if (data)
    outputCounts.assign(1, data);
  return failure(n.failed());
}

/// Slice whose end along one axis is known only at run time (a count:
/// `boxes[:n]`): the padded slice takes the end's bound, and the result is
/// counted along that axis by clamp(min(count, end) - start, 0); a slice
/// from 0 to the input's own count keeps that count.
LogicalResult boundedSlice(NodeImporter &n, CountedAxis in, const BoundedInts &ends,
                           RunRule runRule, SmallVectorImpl<Value> &outputs,
                           SmallVectorImpl<CountedAxis> &counts) {
  auto t = NodeImporter::rankedType(n.input(0));
  auto starts = n.constInts(1);
  auto axes = n.hasInput(3) ? n.constInts(3) : std::optional<SmallVector<int64_t>>();
  auto steps = n.hasInput(4) ? n.constInts(4) : std::optional<SmallVector<int64_t>>();
  if (!t || !t.hasStaticShape() || !starts || starts->size() != ends.entries.size() ||
      (n.hasInput(3) && !axes) || (n.hasInput(4) && !steps))
    return n.error("a Slice to a run-time end needs constant starts, axes and steps");
  std::optional<int64_t> runTime;
  auto bounds = boundedDims(n, ends, runTime);
  if (!bounds)
    return failure();
  int64_t k = *runTime;
  int64_t axis = axes ? (*axes)[k] : k;
  axis = axis < 0 ? axis + t.getRank() : axis;
  int64_t start = (*starts)[k];
  if (start < 0 || (steps && (*steps)[k] != 1) || (in && in.axis != axis))
    return n.error("a Slice to a run-time end needs a non-negative start and step 1 along the "
                   "counted axis");
  SmallVector<Value> inputs;
  for (size_t i = 0; i < n.numInputs(); ++i)
    inputs.push_back(n.input(i));
  inputs[2] = n.i64Tensor(*bounds);
  if (failed(runRule(inputs, outputs)))
    return failure();
  Value end = runTimeDim(n, ends, 2, k);
  Value count;
  if (in && start == 0 && end == in.count) {
    count = in.count;
  } else {
    Value limit = in ? in.count : n.i64Scalar(t.getDimSize(axis));
    count = n.make<MaxOp>(n.make<SubOp>(n.make<MinOp>(limit, end), n.i64Scalar(start)),
                          n.i64Scalar(0));
  }
  counts.assign(1, CountedAxis{count, axis});
  return failure(n.failed());
}

} // namespace

FailureOr<bool> importCountedNode(NodeImporter &n, ArrayRef<CountedAxis> inputCounts,
                                  ArrayRef<BoundedInts> inputBounds, RunRule runRule,
                                  CountedState &state, SmallVectorImpl<Value> &outputs,
                                  SmallVectorImpl<CountedAxis> &outputCounts,
                                  SmallVectorImpl<BoundedInts> &outputBounds) {
  StringRef op = n.node.op_type();
  auto countOf = [&](size_t i) { return i < inputCounts.size() ? inputCounts[i] : CountedAxis(); };
  auto boundsOf = [&](size_t i) { return i < inputBounds.size() ? inputBounds[i] : BoundedInts(); };
  auto done = [](LogicalResult r) -> FailureOr<bool> {
    if (failed(r))
      return failure();
    return true;
  };
  if (op == "Shape" && countOf(0))
    return done(countedShape(n, countOf(0), outputs, outputBounds));
  if (op == "TopK" && n.opset >= 10) {
    auto t = NodeImporter::rankedType(n.input(0));
    int64_t axis = n.getInt("axis", -1);
    if (t && axis < 0)
      axis += t.getRank();
    bool boundedK = boundsOf(1) && !n.constInts(1);
    bool overCount = countOf(0) && countOf(0).axis == axis;
    if (boundedK && countOf(0) && !overCount)
      return n.error("TopK of a run-time k over a value counted along another axis is not "
                     "supported");
    if (boundedK || overCount)
      return done(countedTopK(n, countOf(0), boundsOf(1), outputs, outputCounts));
    return false;
  }
  if ((op == "Expand" || (op == "Reshape" && !n.getInt("allowzero", 0))) &&
      boundsOf(1) && !n.constInts(1))
    return done(boundedShapeOp(n, countOf(0), boundsOf(1), runRule, outputs, outputCounts));
  if (op == "Slice" && boundsOf(2) && !n.constInts(2) && !countOf(1) && !countOf(3) &&
      !countOf(4))
    return done(boundedSlice(n, countOf(0), boundsOf(2), runRule, outputs, outputCounts));
  if (op == "ScatterElements" && (countOf(1) || countOf(2)))
    return done(countedScatterElements(n, inputCounts, runRule, outputs, outputCounts));
  if (op == "ConstantOfShape" && boundsOf(0) && !n.constInts(0))
    return done(boundedConstantOfShape(n, boundsOf(0), runRule, outputs, outputCounts));
  if (op == "Concat") {
    auto t = NodeImporter::rankedType(n.input(0));
    int64_t axis = n.getInt("axis", 0);
    if (t && axis < 0)
      axis += t.getRank();
    bool along = llvm::any_of(inputCounts, [&](CountedAxis c) { return c && c.axis == axis; });
    if (!along)
      return false;
    if (llvm::any_of(inputCounts, [&](CountedAxis c) { return c && c.axis != axis; }))
      return n.error("Concat of values counted along different axes is not supported");
    return done(compactingConcat(n, inputCounts, axis, runRule, state, outputs, outputCounts));
  }
  if (llvm::is_contained({"ReduceMax", "ReduceMin", "ReduceSum"}, op) && countOf(0))
    return done(countedReduce(n, countOf(0), runRule, outputs, outputCounts));
  if ((op == "RoiAlign" || op == "MaxRoiPool") && !countOf(0)) {
    // One output row per region: the padded regions (zeroed, so that they
    // sample inside the image) give padding rows.
    CountedAxis rois = countOf(1) ? countOf(1) : countOf(2);
    if (!rois || rois.axis != 0 || (countOf(2) && countOf(2).axis != 0))
      return false;
    SmallVector<Value> inputs;
    for (size_t i = 0; i < n.numInputs(); ++i)
      inputs.push_back(i == 1 || i == 2 ? maskPadding(n, n.input(i), 0, rois.count, 0)
                                        : n.input(i));
    if (n.failed() || failed(runRule(inputs, outputs)))
      return failure();
    outputCounts.assign(1, rois);
    return true;
  }
  if (op == "NonZero" && countOf(0)) {
    // Padding is zero: not an entry.
    SmallVector<Value> inputs{maskPadding(n, n.input(0), countOf(0).axis, countOf(0).count, 0)};
    return done(n.failed() ? failure() : runRule(inputs, outputs));
  }
  if (op == "NonMaxSuppression" && llvm::any_of(inputCounts, [](CountedAxis c) { return (bool)c; }))
    return done(countedNonMaxSuppression(n, inputCounts, runRule, outputs));
  return false;
}

void propagateBounds(NodeImporter &n, ArrayRef<BoundedInts> in, ArrayRef<Value> outputs,
                     SmallVectorImpl<BoundedInts> &out) {
  StringRef op = n.node.op_type();
  auto first = in.empty() ? BoundedInts() : in[0];
  if (outputs.empty() || !outputs[0])
    return;
  auto t = NodeImporter::rankedType(outputs[0]);
  if (!t || !t.hasStaticShape() || t.getRank() > 1 || !t.getElementType().isSignlessInteger())
    return;
  // Element i of an input of n elements (a scalar or one-element input
  // broadcasts), or null.
  auto entryAt = [&](size_t input, int64_t i) -> const Entry * {
    if (input >= in.size() || in[input].entries.empty())
      return nullptr;
    const auto &e = in[input].entries;
    return e.size() == 1 ? &e[0] : i < (int64_t)e.size() ? &e[i] : nullptr;
  };
  BoundedInts result;
  if (llvm::is_contained({"Identity", "Cast", "Unsqueeze", "Squeeze", "Reshape", "Flatten"}, op)) {
    result = first;
  } else if (op == "Gather" && first) {
    auto idx = n.constInts(1);
    if (!idx)
      return;
    for (int64_t i : *idx) {
      i = i < 0 ? i + (int64_t)first.entries.size() : i;
      if (i < 0 || i >= (int64_t)first.entries.size())
        return;
      result.entries.push_back(first.entries[i]);
    }
  } else if (op == "Slice" && first) {
    auto starts = n.constInts(1), ends = n.constInts(2);
    auto steps = n.hasInput(4) ? n.constInts(4) : SmallVector<int64_t>{1};
    if (!starts || !ends || !steps || starts->size() != 1 || (*steps)[0] != 1)
      return;
    int64_t size = first.entries.size();
    auto clampIndex = [&](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + size : v, 0, size); };
    for (int64_t i = clampIndex((*starts)[0]); i < clampIndex((*ends)[0]); ++i)
      result.entries.push_back(first.entries[i]);
  } else if (op == "Concat") {
    for (const BoundedInts &b : in)
      llvm::append_range(result.entries, b.entries);
  } else if (op == "ReduceMin" || op == "ReduceMax" || op == "Min" || op == "Max") {
    // Over every element (a reduction to one value, or elementwise of
    // scalars): the bound of a min is the least bound, of a max the largest.
    SmallVector<Entry> all;
    for (const BoundedInts &b : in)
      llvm::append_range(all, b.entries);
    if (all.empty() || t.getNumElements() != 1)
      return;
    bool isMin = op == "ReduceMin" || op == "Min";
    Entry e = all[0];
    for (const Entry &x : ArrayRef(all).drop_front()) {
      e.max = isMin ? std::min(e.max, x.max) : std::max(e.max, x.max);
      e.known = e.known && x.known && e.max == x.max;
      e.same = Value();
    }
    result.entries.push_back(e);
  } else if (op == "Add") {
    // Of non-negative entries (a count plus an offset); adding a known 0
    // keeps the entry (and its count).
    for (int64_t i = 0; i < t.getNumElements(); ++i) {
      const Entry *a = entryAt(0, i), *b = entryAt(1, i);
      if (!a || !b || (a->known && a->max < 0) || (b->known && b->max < 0))
        return;
      if (a->known && a->max == 0)
        result.entries.push_back(*b);
      else if (b->known && b->max == 0)
        result.entries.push_back(*a);
      else
        result.entries.push_back(Entry{a->max + b->max, a->known && b->known, Value()});
    }
  } else if (op == "Equal") {
    // Run-time entries are counts, never negative: equal to no negative
    // constant (torchvision's `where(shape == -1, 1, shape)`).
    for (int64_t i = 0; i < t.getNumElements(); ++i) {
      const Entry *a = entryAt(0, i), *b = entryAt(1, i);
      if (!a || !b)
        return;
      if (a->known && b->known)
        result.entries.push_back(Entry{a->max == b->max, true, Value()});
      else if ((a->known && a->max < 0) || (b->known && b->max < 0))
        result.entries.push_back(Entry{0, true, Value()});
      else
        result.entries.push_back(Entry{1, false, Value()});
    }
  } else if (op == "Where") {
    for (int64_t i = 0; i < t.getNumElements(); ++i) {
      const Entry *c = entryAt(0, i), *x = entryAt(1, i), *y = entryAt(2, i);
      if (!c || !x || !y)
        return;
      if (c->known) {
        result.entries.push_back(c->max ? *x : *y);
        continue;
      }
      // Either one: kept only while that stays a non-negative count.
      if ((x->known && x->max < 0) || (y->known && y->max < 0))
        return;
      result.entries.push_back(Entry{std::max(x->max, y->max), false, Value()});
    }
  }
  if (result && (int64_t)result.entries.size() == t.getNumElements()) {
    out.resize(outputs.size());
    out[0] = result;
  }
}

} // namespace kiln
