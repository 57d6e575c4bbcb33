// Resize (and the older Upsample) as a separable decomposition: along each
// axis the output is sum_t gather(x, index_t, axis) * weight_t, with the
// tap indices and weights computed here, at import time, from the static
// shapes and constant scales. This follows the ONNX reference
// implementation (onnx/backend/test/case/node/resize.py) tap by tap:
// nearest uses 1 tap, linear 2, cubic 4.
#include "NodeImporter.h"

#include <cmath>

using namespace mlir;

namespace kiln {
namespace {

using Outs = SmallVectorImpl<Value>;

struct AxisTaps {
  std::vector<std::vector<int64_t>> index;  // [tap][output position]
  std::vector<std::vector<double>> weight;  // [tap][output position]
  std::vector<bool> outside;                // tf_crop_and_resize: extrapolate
};

struct ResizeParams {
  std::string mode, transform, nearestMode;
  double cubicA;
  bool excludeOutside;
};

std::vector<double> coefficients(const ResizeParams &p, double ratio) {
  if (p.mode == "nearest") {
    if (ratio == 1.0)
      return {0, 1};
    if (p.nearestMode == "round_prefer_ceil")
      return {double(ratio < 0.5), double(ratio >= 0.5)};
    if (p.nearestMode == "floor")
      return {1, 0};
    if (p.nearestMode == "ceil")
      return {0, 1};
    return {double(ratio <= 0.5), double(ratio > 0.5)}; // round_prefer_floor
  }
  if (p.mode == "linear")
    return {1 - ratio, ratio};
  double A = p.cubicA, r = ratio, s = 1 - ratio;
  return {((A * (r + 1) - 5 * A) * (r + 1) + 8 * A) * (r + 1) - 4 * A,
          ((A + 2) * r - (A + 3)) * r * r + 1, ((A + 2) * s - (A + 3)) * s * s + 1,
          ((A * (s + 1) - 5 * A) * (s + 1) + 8 * A) * (s + 1) - 4 * A};
}

AxisTaps computeTaps(const ResizeParams &p, int64_t in, int64_t out, double scale,
                     double roiStart, double roiEnd) {
  double outWidth = scale * in; // the reference's output_width (not rounded)
  AxisTaps taps;
  int64_t n = p.mode == "cubic" ? 4 : 2;
  taps.index.assign(n, {});
  taps.weight.assign(n, {});
  // The transforms that divide by the scale do so in float32 (by the
  // scale rounded to float32, out / in for sizes), as ONNX Runtime computes
  // the source coordinate (as does applyRunTimeTaps): with a scale that is
  // no power of two (a detector's transform resizing 240x300 to 256x320),
  // coordinates in double moved the taps by ~1e-5 of a pixel, the resized
  // image by up to 8e-4 and, through a ResNet-50, a detection's score by 4%.
  const float scaleF = static_cast<float>(scale);
  for (int64_t x = 0; x < out; ++x) {
    double xo;
    const float xF = static_cast<float>(x);
    bool outside = false;
    const std::string &t = p.transform;
    if (t == "align_corners")
      xo = outWidth == 1 ? 0 : x * (in - 1) / (outWidth - 1);
    else if (t == "asymmetric")
      xo = xF / scaleF;
    else if (t == "tf_crop_and_resize") {
      xo = outWidth == 1 ? (roiEnd - roiStart) * (in - 1) / 2
                         : x * (roiEnd - roiStart) * (in - 1) / (outWidth - 1);
      xo += roiStart * (in - 1);
      outside = xo < 0 || xo > in - 1;
    } else if (t == "pytorch_half_pixel")
      xo = outWidth == 1 ? -0.5 : (xF + 0.5f) / scaleF - 0.5f;
    else if (t == "tf_half_pixel_for_nearest" || t == "tf_half_pixel_for_nn")
      xo = (xF + 0.5f) / scaleF;
    else // half_pixel
      xo = (xF + 0.5f) / scaleF - 0.5f;
    taps.outside.push_back(outside);
    // Neighbours as in the reference: the pixel left of xo is preferred, so
    // an integer xo counts as ratio 1 from the pixel before it.
    int64_t x0 = NodeImporter::saturatingInt64(std::floor(xo));
    double ratio = xo - x0;
    if (ratio == 0) {
      ratio = 1;
      x0 -= 1;
    }
    std::vector<double> c = coefficients(p, ratio);
    int64_t first = n == 4 ? x0 - 1 : x0;
    if (p.excludeOutside) {
      double sum = 0;
      for (int64_t k = 0; k < n; ++k) {
        if (first + k < 0 || first + k >= in)
          c[k] = 0;
        sum += c[k];
      }
      for (double &v : c)
        v = sum != 0 ? v / sum : 0;
    }
    for (int64_t k = 0; k < n; ++k) {
      taps.index[k].push_back(std::clamp<int64_t>(first + k, 0, in - 1));
      taps.weight[k].push_back(c[k]);
    }
  }
  return taps;
}

/// Applies one axis' taps to x.
Value applyTaps(NodeImporter &n, Value x, int64_t axis, const AxisTaps &taps) {
  auto t = NodeImporter::rankedType(x);
  int64_t out = taps.outside.size();
  SmallVector<int64_t> weightShape(t.getRank(), 1);
  weightShape[axis] = out;
  auto weightType = RankedTensorType::get(weightShape, t.getElementType());
  Value acc;
  for (size_t k = 0; k < taps.index.size(); ++k) {
    bool allZero = llvm::all_of(taps.weight[k], [](double w) { return w == 0; });
    if (allZero)
      continue;
    Value g = n.make<GatherOp>(x, n.i64Tensor(taps.index[k]), n.b.getI64IntegerAttr(axis));
    bool allOne = llvm::all_of(taps.weight[k], [](double w) { return w == 1; });
    if (!allOne) {
      SmallVector<APFloat> w;
      for (double v : taps.weight[k]) {
        APFloat f(v);
        bool lost;
        f.convert(cast<FloatType>(t.getElementType()).getFloatSemantics(),
                  APFloat::rmNearestTiesToEven, &lost);
        w.push_back(f);
      }
      g = n.make<MulOp>(g, n.constant(DenseElementsAttr::get(weightType, w)));
    }
    acc = acc ? n.make<AddOp>(acc, g) : g;
  }
  return acc ? acc : n.make<MulOp>(n.make<GatherOp>(x, n.i64Tensor(taps.index[0]),
                                                    n.b.getI64IntegerAttr(axis)),
                                   n.scalarLike(x, 0.0));
}

/// The modes, coordinate transformations and nearest modes ONNX defines.
LogicalResult checkModes(NodeImporter &n, const ResizeParams &p) {
  if (p.mode != "nearest" && p.mode != "linear" && p.mode != "cubic")
    return n.error("unknown Resize mode '" + p.mode + "'");
  static const char *transforms[] = {"half_pixel", "pytorch_half_pixel", "align_corners",
                                     "asymmetric", "tf_half_pixel_for_nearest",
                                     "tf_half_pixel_for_nn", "tf_crop_and_resize"};
  if (!llvm::is_contained(transforms, p.transform))
    return n.error("unknown coordinate_transformation_mode '" + p.transform + "'");
  static const char *nearestModes[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  if (!llvm::is_contained(nearestModes, p.nearestMode))
    return n.error("unknown nearest_mode '" + p.nearestMode + "'");
  return success();
}

LogicalResult resizeWith(NodeImporter &n, Outs &out, Value x, std::optional<SmallVector<double>> scales,
                         std::optional<SmallVector<int64_t>> sizes, SmallVector<double> roi,
                         const ResizeParams &p) {
  auto t = NodeImporter::rankedType(x);
  if (!t || !t.hasStaticShape())
    return n.error("Resize needs an input of static shape");
  if (!isa<FloatType>(t.getElementType()))
    return n.error("Resize supports floating-point inputs only");
  if (failed(checkModes(n, p)))
    return failure();
  int64_t rank = t.getRank();
  if ((scales && (int64_t)scales->size() != rank) || (sizes && (int64_t)sizes->size() != rank))
    return n.error("Resize scales/sizes must have one entry per dimension");
  Value y = x;
  SmallVector<std::vector<bool>> outside(rank);
  bool anyOutside = false;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t in = t.getDimSize(d), outDim;
    double scale;
    if (sizes) {
      outDim = (*sizes)[d];
      scale = (double)outDim / in;
    } else {
      scale = (*scales)[d];
      if (scale <= 0)
        return n.error("Resize scales must be positive");
      outDim = NodeImporter::saturatingInt64(std::floor(in * scale));
    }
    // The taps below are computed per output position: refuse sizes no
    // tensor could have before looping over them.
    if (outDim < 0 || outDim > (int64_t(1) << 32))
      return n.error("Resize output dimension " + Twine(outDim) + " along axis " + Twine(d) +
                     " is out of range");
    double rs = roi.size() == 2 * (size_t)rank ? roi[d] : 0;
    double re = roi.size() == 2 * (size_t)rank ? roi[rank + d] : 1;
    AxisTaps taps = computeTaps(p, in, outDim, scale, rs, re);
    outside[d] = taps.outside;
    anyOutside |= llvm::is_contained(taps.outside, true);
    // An axis that maps every output to the same input position is the identity.
    bool identity = outDim == in && p.transform != "tf_crop_and_resize";
    for (size_t k = 0; identity && k < taps.index.size(); ++k)
      for (int64_t o = 0; identity && o < outDim; ++o)
        identity = taps.weight[k][o] == 0 || (taps.weight[k][o] == 1 && taps.index[k][o] == o);
    if (!identity)
      y = applyTaps(n, y, d, taps);
  }
  if (anyOutside) {
    // tf_crop_and_resize: positions outside the ROI take extrapolation_value.
    auto yt = NodeImporter::rankedType(y);
    SmallVector<bool> inside;
    SmallVector<int64_t> idx(rank, 0);
    for (int64_t e = 0; e < yt.getNumElements(); ++e) {
      bool in = true;
      for (int64_t d = 0; d < rank; ++d)
        in &= !outside[d][idx[d]];
      inside.push_back(in);
      for (int64_t d = rank - 1; d >= 0; --d) {
        if (++idx[d] < yt.getDimSize(d))
          break;
        idx[d] = 0;
      }
    }
    Value mask = n.constant(DenseElementsAttr::get(yt.clone(n.b.getI1Type()), inside));
    y = n.make<SelectOp>(mask, y, n.scalarLike(y, n.getFloat("extrapolation_value", 0.0f)));
  }
  out.push_back(y);
  return success();
}

/// Element `i` of a 1-D integer tensor, seen through the Concat, Cast and
/// Unsqueeze that shape arithmetic builds sizes with, so that the entries
/// known while compiling (a Resize's batch and channels, from a Shape) are
/// constants even where others are computed at run time.
Value elementOf(NodeImporter &n, Value v, int64_t i) {
  Operation *def = v.getDefiningOp();
  if (auto c = dyn_cast_if_present<ConcatOp>(def)) {
    for (Value part : c.getInputs()) {
      auto t = NodeImporter::rankedType(part);
      if (!t || t.getRank() != 1 || t.isDynamicDim(0))
        break;
      if (i < t.getDimSize(0))
        return elementOf(n, part, i);
      i -= t.getDimSize(0);
    }
  } else if (auto c = dyn_cast_if_present<CastOp>(def);
             c && c.getTo() == NodeImporter::elementType(v) &&
             NodeImporter::elementType(c.getInput()).isSignlessInteger(64)) {
    return elementOf(n, c.getInput(), i);
  } else if (auto u = dyn_cast_if_present<UnsqueezeOp>(def);
             u && NodeImporter::rankedType(u.getInput()) &&
             NodeImporter::rankedType(u.getInput()).getRank() == 0 && i == 0) {
    return u.getInput();
  }
  return n.make<GatherOp>(v, n.i64Scalar(i), n.b.getI64IntegerAttr(0));
}

/// The size of the axis being resized: a number while compiling, or the
/// input's dim known only at run time (an image whose size is a graph
/// input's, as a segmentation head resizes its logits to).
struct InSize {
  int64_t value = -1; // when known while compiling
  Value dim;          // else a scalar i64 of it
};

/// Element `i` of a 1-D integer tensor when it is dim `d` of a tensor, seen
/// through the Concat, Cast, Unsqueeze, Slice and Gather that shape
/// arithmetic builds sizes with: {that tensor, d}, or a null value.
std::pair<Value, int64_t> dimAt(Value v, int64_t i) {
  Operation *def = v.getDefiningOp();
  if (auto s = dyn_cast_if_present<ShapeOp>(def)) {
    auto t = NodeImporter::rankedType(s.getInput());
    if (!t)
      return {};
    int64_t start = s.getStart() < 0 ? s.getStart() + t.getRank() : s.getStart();
    start = std::clamp<int64_t>(start, 0, t.getRank());
    if (start + i >= t.getRank())
      return {};
    return {s.getInput(), start + i};
  }
  if (auto c = dyn_cast_if_present<ConcatOp>(def)) {
    for (Value part : c.getInputs()) {
      auto t = NodeImporter::rankedType(part);
      if (!t || t.getRank() != 1 || t.isDynamicDim(0))
        return {};
      if (i < t.getDimSize(0))
        return dimAt(part, i);
      i -= t.getDimSize(0);
    }
    return {};
  }
  if (auto c = dyn_cast_if_present<CastOp>(def))
    return NodeImporter::elementType(c.getInput()).isSignlessInteger() ? dimAt(c.getInput(), i)
                                                                      : std::pair<Value, int64_t>{};
  if (auto u = dyn_cast_if_present<UnsqueezeOp>(def); u && i == 0 &&
                                                      NodeImporter::rankedType(u.getInput()) &&
                                                      NodeImporter::rankedType(u.getInput()).getRank() == 0)
    return dimAt(u.getInput(), 0);
  if (auto g = dyn_cast_if_present<GatherOp>(def); g && g.getAxis() == 0) {
    // A scalar Gather of one position.
    auto idx = getConstantInts(g.getIndices());
    auto it = NodeImporter::rankedType(g.getIndices());
    if (idx && idx->size() == 1 && it && it.getRank() == 0 && (*idx)[0] >= 0 && i == 0)
      return dimAt(g.getInput(), (*idx)[0]);
    return {};
  }
  if (auto sl = dyn_cast_if_present<SliceOp>(def)) {
    auto starts = getConstantInts(sl.getStarts()), steps = getConstantInts(sl.getSteps());
    auto axes = getConstantInts(sl.getAxes());
    if (starts && steps && axes && starts->size() == 1 && steps->size() == 1 &&
        axes->size() == 1 && (*axes)[0] == 0 && (*steps)[0] == 1 && (*starts)[0] >= 0)
      return dimAt(sl.getInput(), (*starts)[0] + i);
  }
  return {};
}

/// Resizes `x` along `axis` (of size `in`) to `size` positions, a scalar
/// i64 known only at run time (a detector's box size, an image's size): the
/// taps of computeTaps, as tensors over the output positions computed in
/// float32 (as ONNX Runtime does) by kiln ops, whose result dim along
/// `axis` is a value-defined dim (or the dim `size` was read from).
Value applyRunTimeTaps(NodeImporter &n, Value x, int64_t axis, InSize in, Value size,
                       const ResizeParams &p) {
  auto t = NodeImporter::rankedType(x);
  Type f32 = n.b.getF32Type();
  auto f = [&](double v) {
    return n.constant(DenseElementsAttr::get(RankedTensorType::get({}, f32), (float)v));
  };
  auto i64 = [&](int64_t v) { return n.i64Scalar(v); };
  auto cast = [&](Value v, Type to) { return n.make<CastOp>(v, TypeAttr::get(to)); };
  // The input's size as f32 and its last index, constants where known.
  Value inF = in.dim ? cast(in.dim, f32) : f(in.value);
  Value inLastF = in.dim ? n.make<SubOp>(inF, f(1)) : f(in.value - 1);
  Value inLast = in.dim ? n.make<SubOp>(in.dim, i64(1)) : i64(in.value - 1);
  Value inI = in.dim ? in.dim : i64(in.value);
  Value outF = cast(size, f32);
  Value pos = cast(n.make<RangeOp>(i64(0), size, i64(1)), f32);
  Value scale = n.make<DivOp>(outF, inF);
  Value half = n.make<AddOp>(pos, f(0.5));
  Value xo;
  const std::string &tr = p.transform;
  if (tr == "align_corners")
    xo = n.make<SelectOp>(n.make<GreaterOp>(outF, f(1)),
                          n.make<DivOp>(n.make<MulOp>(pos, inLastF), n.make<SubOp>(outF, f(1))),
                          f(0));
  else if (tr == "asymmetric")
    xo = n.make<DivOp>(pos, scale);
  else if (tr == "tf_half_pixel_for_nearest" || tr == "tf_half_pixel_for_nn")
    xo = n.make<DivOp>(half, scale);
  else if (tr == "pytorch_half_pixel")
    xo = n.make<SelectOp>(n.make<GreaterOp>(outF, f(1)),
                          n.make<SubOp>(n.make<DivOp>(half, scale), f(0.5)), f(-0.5));
  else // half_pixel
    xo = n.make<SubOp>(n.make<DivOp>(half, scale), f(0.5));
  // The pixel left of xo, an integer xo counting as ratio 1 from the one
  // before it (as computeTaps).
  Value x0f = n.make<FloorOp>(xo);
  Value ratio = n.make<SubOp>(xo, x0f);
  Value atPixel = n.make<EqualOp>(ratio, f(0));
  ratio = n.make<SelectOp>(atPixel, f(1), ratio);
  Value x0 = cast(n.make<SelectOp>(atPixel, n.make<SubOp>(x0f, f(1)), x0f), n.b.getI64Type());
  auto clamped = [&](Value idx) { return n.make<MinOp>(n.make<MaxOp>(idx, i64(0)), inLast); };
  SmallVector<int64_t> weightAxes;
  for (int64_t d = 0; d < t.getRank(); ++d)
    if (d != axis)
      weightAxes.push_back(d);
  auto gather = [&](Value idx) { return n.make<GatherOp>(x, clamped(idx), n.b.getI64IntegerAttr(axis)); };
  if (p.mode == "nearest") {
    // One tap: the pixel after x0 where the rounding says so (ratio 1 is
    // the pixel at xo itself).
    Value after = n.make<EqualOp>(ratio, f(1));
    if (p.nearestMode == "round_prefer_ceil")
      after = n.make<OrOp>(after, n.make<GreaterEqualOp>(ratio, f(0.5)));
    else if (p.nearestMode == "ceil")
      after = n.make<GreaterOp>(ratio, f(-1)); // every position
    else if (p.nearestMode != "floor")
      after = n.make<OrOp>(after, n.make<GreaterOp>(ratio, f(0.5)));
    return gather(n.make<AddOp>(x0, cast(after, n.b.getI64Type())));
  }
  SmallVector<Value> weights;
  if (p.mode == "linear") {
    weights = {n.make<SubOp>(f(1), ratio), ratio};
  } else {
    // cubic, with r = ratio and s = 1 - ratio (coefficients() above).
    double A = p.cubicA;
    Value r = ratio, s = n.make<SubOp>(f(1), ratio);
    auto outer = [&](Value v) { // ((A(v+1) - 5A)(v+1) + 8A)(v+1) - 4A
      Value v1 = n.make<AddOp>(v, f(1));
      Value e = n.make<SubOp>(n.make<MulOp>(v1, f(A)), f(5 * A));
      e = n.make<AddOp>(n.make<MulOp>(e, v1), f(8 * A));
      return n.make<SubOp>(n.make<MulOp>(e, v1), f(4 * A));
    };
    auto inner = [&](Value v) { // ((A+2)v - (A+3)) v v + 1
      Value e = n.make<SubOp>(n.make<MulOp>(v, f(A + 2)), f(A + 3));
      return n.make<AddOp>(n.make<MulOp>(n.make<MulOp>(e, v), v), f(1));
    };
    weights = {outer(r), inner(r), inner(s), outer(s)};
  }
  Value first = p.mode == "cubic" ? n.make<SubOp>(x0, i64(1)) : x0;
  SmallVector<Value> index;
  for (size_t k = 0; k < weights.size(); ++k)
    index.push_back(k == 0 ? first : n.make<AddOp>(first, i64(k)));
  if (p.excludeOutside) {
    Value sum;
    for (size_t k = 0; k < weights.size(); ++k) {
      Value inside = n.make<AndOp>(n.make<GreaterEqualOp>(index[k], i64(0)),
                                   n.make<LessOp>(index[k], inI));
      weights[k] = n.make<SelectOp>(inside, weights[k], f(0));
      sum = sum ? n.make<AddOp>(sum, weights[k]) : weights[k];
    }
    Value zero = n.make<EqualOp>(sum, f(0));
    for (Value &w : weights)
      w = n.make<SelectOp>(zero, f(0), n.make<DivOp>(w, sum));
  }
  Value acc;
  for (size_t k = 0; k < weights.size(); ++k) {
    Value w = weights[k];
    if (t.getElementType() != f32)
      w = cast(w, t.getElementType());
    if (!weightAxes.empty())
      w = n.make<UnsqueezeOp>(w, n.b.getDenseI64ArrayAttr(weightAxes));
    Value term = n.make<MulOp>(gather(index[k]), w);
    acc = acc ? n.make<AddOp>(acc, term) : term;
  }
  return acc;
}

/// Resize to sizes computed at run time (from data, or from dims unknown
/// while compiling): along each axis whose size is a constant and whose
/// input dim is known, the taps computed here; along the others, taps
/// computed at run time. An input dim known only at run time (an image
/// size left to run time) is read from the input; a size that is that same
/// dim (a segmentation head's batch and channels, Shape(x)[0:2]) leaves its
/// axis alone.
LogicalResult resizeToRunTimeSizes(NodeImporter &n, Outs &out, Value x, Value sizes,
                                   const ResizeParams &p, bool sizesFromDims = false) {
  auto t = NodeImporter::rankedType(x);
  auto st = NodeImporter::rankedType(sizes);
  if (!t)
    return n.error("Resize needs an input of known rank");
  if (!isa<FloatType>(t.getElementType()))
    return n.error("Resize supports floating-point inputs only");
  if (!st || st.getRank() != 1 || st.isDynamicDim(0) || st.getDimSize(0) != t.getRank() ||
      !st.getElementType().isSignlessInteger(64))
    return n.error("Resize sizes must be an int64 tensor of one entry per dimension");
  if (failed(checkModes(n, p)))
    return failure();
  if (p.transform == "tf_crop_and_resize")
    return n.error("Resize with tf_crop_and_resize: its sizes must be a constant");
  Value y = x;
  for (int64_t d = 0; d < t.getRank(); ++d) {
    auto [sizeOf, sizeDim] = dimAt(sizes, d);
    if (sizeOf == x && sizeDim == d)
      continue; // the input's own dim: the identity along this axis
    InSize in;
    if (t.isDynamicDim(d)) {
      in.dim = n.make<GatherOp>(n.make<ShapeOp>(x, n.b.getI64IntegerAttr(d),
                                                n.b.getI64IntegerAttr(d + 1)),
                                n.i64Scalar(0), n.b.getI64IntegerAttr(0));
    } else {
      in.value = t.getDimSize(d);
    }
    Value size = elementOf(n, sizes, d);
    if (auto c = getConstantInts(size); c && c->size() == 1) {
      int64_t outDim = (*c)[0];
      if (outDim < 0 || outDim > (int64_t(1) << 32))
        return n.error("Resize output dimension " + Twine(outDim) + " along axis " + Twine(d) +
                       " is out of range");
      if (!in.dim && outDim == in.value)
        continue; // sizes: the identity along this axis
      if (in.dim || !NodeImporter::rankedType(y).hasStaticShape()) {
        // Taps of a constant size along an axis of run-time size, or after
        // one of run-time size.
        y = applyRunTimeTaps(n, y, d, in, size, p);
        continue;
      }
      y = applyTaps(n, y, d, computeTaps(p, in.value, outDim, (double)outDim / in.value, 0, 1));
      continue;
    }
    if (!in.dim && in.value == 0)
      return n.error("Resize of an empty axis " + Twine(d) + " to a run-time size");
    // (A size read from a dim, such as the image's, or a multiple of one,
    // is never negative: no clamp, so that the result keeps that dim's
    // expression.)
    if (!sizeOf && !sizesFromDims)
      size = n.make<MaxOp>(size, n.i64Scalar(0));
    y = applyRunTimeTaps(n, y, d, in, size, p);
    if (n.failed())
      return failure();
  }
  out.push_back(y);
  return success();
}

/// Resize by constant scales of an input whose dims are known only at run
/// time (a U-Net's or an FPN's upsampling by 2 over an image size left to
/// run time): with whole-number scales, the output size along each axis is
/// in * scale exactly and the coordinate transform's scale is out / in, so
/// it is resizeToRunTimeSizes to those sizes. Other scales (ONNX then
/// transforms by the scale, not by out / in) need the input's dims.
LogicalResult resizeByWholeScales(NodeImporter &n, Outs &out, Value x,
                                  ArrayRef<double> scales, const ResizeParams &p) {
  auto t = NodeImporter::rankedType(x);
  if (!t || (int64_t)scales.size() != t.getRank())
    return n.error("Resize scales/sizes must have one entry per dimension");
  SmallVector<Value> parts;
  for (int64_t d = 0; d < t.getRank(); ++d) {
    double sc = scales[d];
    if (!(sc >= 1 && sc <= 1024 && sc == std::floor(sc)))
      return n.error("Resize of an input of run-time shape needs whole-number scales (got " +
                     std::to_string(sc) + " along axis " + std::to_string(d) + ")");
    Value dim = n.make<ShapeOp>(x, n.b.getI64IntegerAttr(d), n.b.getI64IntegerAttr(d + 1));
    parts.push_back(sc == 1 ? dim : n.make<MulOp>(dim, n.i64Tensor({(int64_t)sc})));
  }
  Value sizes = n.make<ConcatOp>(parts, n.b.getI64IntegerAttr(0));
  return resizeToRunTimeSizes(n, out, x, sizes, p, /*sizesFromDims=*/true);
}

LogicalResult resize(NodeImporter &n, Outs &out) {
  ResizeParams p{n.getString("mode", "nearest"),
                 n.getString("coordinate_transformation_mode", "half_pixel"),
                 n.getString("nearest_mode", "round_prefer_floor"),
                 n.getFloat("cubic_coeff_a", -0.75f), n.getInt("exclude_outside", 0) != 0};
  std::optional<SmallVector<double>> scales;
  std::optional<SmallVector<int64_t>> sizes;
  SmallVector<double> roi;
  if (n.opset < 11) {
    p.transform = "asymmetric";
    p.nearestMode = "floor";
    scales = n.constFloats(1);
  } else {
    if (auto r = n.constFloats(1))
      roi = *r;
    if (n.hasInput(3))
      sizes = n.constInts(3);
    else
      scales = n.constFloats(2);
    if (scales && scales->empty()) // an empty scales tensor means "use sizes"
      scales.reset();
  }
  if (!scales && !sizes && n.opset >= 11 && n.hasInput(3))
    return resizeToRunTimeSizes(n, out, n.required(0), n.input(3), p);
  if (!scales && !sizes)
    return n.error("Resize scales must be a constant (sizes may be computed at run time)");
  if (auto t = NodeImporter::rankedType(n.required(0));
      scales && t && !t.hasStaticShape() && p.transform != "tf_crop_and_resize")
    return resizeByWholeScales(n, out, n.required(0), *scales, p);
  return resizeWith(n, out, n.required(0), scales, sizes, roi, p);
}

LogicalResult upsample(NodeImporter &n, Outs &out) {
  std::string mode = n.getString("mode", "nearest");
  if (mode == "bilinear") // Upsample-1's name for it
    mode = "linear";
  ResizeParams p{mode, "asymmetric", "floor", -0.75, false};
  std::optional<SmallVector<double>> scales;
  if (n.opset >= 9) {
    scales = n.constFloats(1);
  } else if (n.opset >= 7) {
    if (auto s = n.getFloats("scales"))
      scales = SmallVector<double>(s->begin(), s->end());
  } else if (n.attr("height_scale") && n.attr("width_scale")) {
    // Upsample-1: NCHW, the two spatial scales as attributes.
    scales = SmallVector<double>{1.0, 1.0, n.getFloat("height_scale", 1.0f),
                                 n.getFloat("width_scale", 1.0f)};
  }
  if (!scales)
    return n.error(n.opset >= 9 ? "Upsample scales must be a constant"
                                : "Upsample needs its scales attribute(s)");
  if (auto t = NodeImporter::rankedType(n.required(0)); t && !t.hasStaticShape())
    return resizeByWholeScales(n, out, n.required(0), *scales, p);
  return resizeWith(n, out, n.required(0), scales, std::nullopt, {}, p);
}

} // namespace

void addResizeRules(std::vector<ImportRule> &r) {
  constexpr int64_t M = kMaxSupportedOpset;
  r.insert(r.end(), {
      {"Resize", 10, M, resize},
      {"Upsample", 1, 9, upsample},
  });
}

} // namespace kiln
