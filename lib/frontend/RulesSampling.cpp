// Sampling an image at computed positions: GridSample and RoiAlign.
//
// GridSample (opset 16, 2-D): every mode (bilinear, nearest, bicubic) and
// padding mode (zeros, border, reflection), with PyTorch's grid_sample
// semantics, which ONNX adopted. Decomposed into kiln ops: sampling
// coordinates are computed elementwise on [N, Ho, Wo] tensors, and each
// interpolation tap is one GatherElements from the image flattened to
// [N, C, H*W], weighted and summed. Taps outside the image read zeros
// (padding "zeros"); border and reflection move the coordinates inside
// first.
#include "NodeImporter.h"

using namespace mlir;

namespace kiln {
namespace {

using Outs = SmallVectorImpl<Value>;

enum class Padding { Zeros, Border, Reflection };

class Sampler {
public:
  Sampler(NodeImporter &n, Value image, int64_t N, int64_t C, int64_t H, int64_t W, int64_t Ho,
          int64_t Wo, bool alignCorners, Padding padding)
      : n(n), N(N), C(C), H(H), W(W), Ho(Ho), Wo(Wo), align(alignCorners), padding(padding) {
    flat = n.make<ReshapeOp>(image, n.i64Tensor({N, C, H * W}), n.b.getBoolAttr(false));
    like = flat;
  }

  Value k(double v) { return n.scalarLike(like, v); }

  /// Grid value in [-1, 1] -> pixel coordinate.
  Value unnormalize(Value g, int64_t size) {
    Value plusOne = n.make<AddOp>(g, k(1));
    if (align)
      return n.make<MulOp>(plusOne, k((size - 1) / 2.0));
    return n.make<DivOp>(n.make<SubOp>(n.make<MulOp>(plusOne, k(size)), k(1)), k(2));
  }

  Value clip(Value v, int64_t size) {
    return n.make<MinOp>(n.make<MaxOp>(v, k(0)), k(size - 1));
  }

  /// Reflects v into [lo, hi] = [-0.5, size - 0.5] (or [0, size - 1] with
  /// aligned corners), as PyTorch's reflect_coordinates, then clips.
  Value reflect(Value v, int64_t size) {
    double twiceLow = align ? 0 : -1, twiceHigh = align ? 2.0 * (size - 1) : 2.0 * size - 1;
    if (twiceLow == twiceHigh)
      return n.make<MulOp>(v, k(0));
    double low = twiceLow / 2, span = (twiceHigh - twiceLow) / 2;
    Value a = n.make<AbsOp>(n.make<SubOp>(v, k(low)));
    Value extra = n.make<FRemOp>(a, k(span));
    Value flips = n.make<FloorOp>(n.make<DivOp>(a, k(span)));
    Value even = n.make<EqualOp>(n.make<FRemOp>(flips, k(2)), k(0));
    Value r = n.make<SelectOp>(even, n.make<AddOp>(extra, k(low)),
                               n.make<AddOp>(n.make<SubOp>(k(span), extra), k(low)));
    return clip(r, size);
  }

  /// Moves a coordinate inside the image for border and reflection padding.
  Value pad(Value v, int64_t size) {
    switch (padding) {
    case Padding::Border: return clip(v, size);
    case Padding::Reflection: return reflect(v, size);
    case Padding::Zeros: return v;
    }
    return v;
  }

  Value flatPlane(Value v) {
    return n.make<ReshapeOp>(v, n.i64Tensor({N, 1, Ho * Wo}), n.b.getBoolAttr(false));
  }

  /// The image at integer-valued coordinates (x, y) [N, Ho, Wo], zero
  /// outside, as [N, C, Ho*Wo].
  Value tap(Value x, Value y) {
    Value inside = n.make<AndOp>(
        n.make<AndOp>(n.make<GreaterEqualOp>(x, k(0)), n.make<LessEqualOp>(x, k(W - 1))),
        n.make<AndOp>(n.make<GreaterEqualOp>(y, k(0)), n.make<LessEqualOp>(y, k(H - 1))));
    // The index in i64 (a float16 image could not count past 2048 pixels),
    // from coordinates with NaN replaced by 0: fptosi(NaN) is a wild index.
    // Those taps are outside anyway (every comparison with NaN is false).
    auto i64 = TypeAttr::get(n.b.getI64Type());
    auto safe = [&](Value v, int64_t size) {
      return n.make<CastOp>(clip(n.make<SelectOp>(n.make<EqualOp>(v, v), v, k(0)), size), i64);
    };
    Value linear = n.make<AddOp>(n.make<MulOp>(safe(y, H), n.i64Tensor({W})), safe(x, W));
    Value index = flatPlane(linear);
    index = n.make<ExpandOp>(index, n.i64Tensor({N, C, Ho * Wo}));
    Value v = n.make<GatherElementsOp>(flat, index, n.b.getI64IntegerAttr(2));
    Value mask = n.make<CastOp>(flatPlane(inside), TypeAttr::get(NodeImporter::elementType(like)));
    return n.make<MulOp>(v, mask);
  }

  Value weighted(Value value, Value weight) { return n.make<MulOp>(value, flatPlane(weight)); }

  Value bilinear(Value gx, Value gy) {
    Value ix = pad(unnormalize(gx, W), W), iy = pad(unnormalize(gy, H), H);
    Value x0 = n.make<FloorOp>(ix), y0 = n.make<FloorOp>(iy);
    Value x1 = n.make<AddOp>(x0, k(1)), y1 = n.make<AddOp>(y0, k(1));
    Value wx1 = n.make<SubOp>(ix, x0), wy1 = n.make<SubOp>(iy, y0);
    Value wx0 = n.make<SubOp>(k(1), wx1), wy0 = n.make<SubOp>(k(1), wy1);
    Value sum = weighted(tap(x0, y0), n.make<MulOp>(wx0, wy0));
    sum = n.make<AddOp>(sum, weighted(tap(x1, y0), n.make<MulOp>(wx1, wy0)));
    sum = n.make<AddOp>(sum, weighted(tap(x0, y1), n.make<MulOp>(wx0, wy1)));
    return n.make<AddOp>(sum, weighted(tap(x1, y1), n.make<MulOp>(wx1, wy1)));
  }

  Value nearest(Value gx, Value gy) {
    // Round half to even, like PyTorch's nearbyint.
    Value ix = n.make<RoundOp>(pad(unnormalize(gx, W), W));
    Value iy = n.make<RoundOp>(pad(unnormalize(gy, H), H));
    return tap(ix, iy);
  }

  /// Cubic convolution weights (A = -0.75) for the taps at -1, 0, 1, 2
  /// from floor(coordinate), t the fractional part.
  SmallVector<Value> cubicWeights(Value t) {
    const double A = -0.75;
    auto far = [&](Value d) { // ((A d - 5A) d + 8A) d - 4A, for 1 <= d <= 2
      Value p = n.make<SubOp>(n.make<MulOp>(d, k(A)), k(5 * A));
      p = n.make<AddOp>(n.make<MulOp>(p, d), k(8 * A));
      return n.make<SubOp>(n.make<MulOp>(p, d), k(4 * A));
    };
    auto near = [&](Value d) { // ((A + 2) d - (A + 3)) d^2 + 1, for d <= 1
      Value p = n.make<SubOp>(n.make<MulOp>(d, k(A + 2)), k(A + 3));
      return n.make<AddOp>(n.make<MulOp>(n.make<MulOp>(p, d), d), k(1));
    };
    Value oneMinus = n.make<SubOp>(k(1), t);
    return {far(n.make<AddOp>(t, k(1))), near(t), near(oneMinus),
            far(n.make<AddOp>(oneMinus, k(1)))};
  }

  Value bicubic(Value gx, Value gy) {
    Value ix = unnormalize(gx, W), iy = unnormalize(gy, H);
    Value x0 = n.make<FloorOp>(ix), y0 = n.make<FloorOp>(iy);
    SmallVector<Value> wx = cubicWeights(n.make<SubOp>(ix, x0));
    SmallVector<Value> wy = cubicWeights(n.make<SubOp>(iy, y0));
    Value sum;
    for (int i = 0; i < 4; ++i) {
      Value y = pad(n.make<AddOp>(y0, k(i - 1)), H);
      for (int j = 0; j < 4; ++j) {
        Value x = pad(n.make<AddOp>(x0, k(j - 1)), W);
        Value term = weighted(tap(x, y), n.make<MulOp>(wx[j], wy[i]));
        sum = sum ? n.make<AddOp>(sum, term) : term;
      }
    }
    return sum;
  }

private:
  NodeImporter &n;
  int64_t N, C, H, W, Ho, Wo;
  bool align;
  Padding padding;
  Value flat, like;
};

LogicalResult gridSample(NodeImporter &n, Outs &out) {
  Value x = n.required(0), grid = n.required(1);
  auto xt = NodeImporter::rankedType(x), gt = NodeImporter::rankedType(grid);
  if (!xt || !gt || !xt.hasStaticShape() || !gt.hasStaticShape())
    return n.error("GridSample needs inputs of static shape");
  if (xt.getRank() != 4 || gt.getRank() != 4 || gt.getDimSize(3) != 2 ||
      gt.getDimSize(0) != xt.getDimSize(0))
    return n.error("GridSample needs X [N, C, H, W] and grid [N, Ho, Wo, 2]");
  if (!isa<FloatType>(xt.getElementType()) || xt.getElementType() != gt.getElementType())
    return n.error("GridSample needs X and grid of the same floating-point type");
  std::string mode = n.getString("mode", "bilinear"), padName = n.getString("padding_mode", "zeros");
  Padding padding;
  if (padName == "zeros")
    padding = Padding::Zeros;
  else if (padName == "border")
    padding = Padding::Border;
  else if (padName == "reflection")
    padding = Padding::Reflection;
  else
    return n.error("unknown padding_mode '" + padName + "'");
  if (mode != "bilinear" && mode != "nearest" && mode != "bicubic")
    return n.error("unknown mode '" + mode + "'");
  int64_t N = xt.getDimSize(0), C = xt.getDimSize(1), H = xt.getDimSize(2), W = xt.getDimSize(3);
  int64_t Ho = gt.getDimSize(1), Wo = gt.getDimSize(2);
  auto last = n.b.getDenseI64ArrayAttr({3});
  auto coord = [&](int64_t i) {
    Value s = n.make<SliceOp>(grid, n.i64Tensor({i}), n.i64Tensor({i + 1}), n.i64Tensor({3}),
                              n.i64Tensor({1}));
    return n.make<SqueezeOp>(s, last);
  };
  Value gx = coord(0), gy = coord(1);
  Sampler s(n, x, N, C, H, W, Ho, Wo, n.getInt("align_corners", 0) != 0, padding);
  Value y = mode == "bilinear" ? s.bilinear(gx, gy)
            : mode == "nearest" ? s.nearest(gx, gy)
                                : s.bicubic(gx, gy);
  out.push_back(n.make<ReshapeOp>(y, n.i64Tensor({N, C, Ho, Wo}), n.b.getBoolAttr(false)));
  return failure(n.failed());
}

/// Per-axis sampling positions of RoiAlign, as ONNX Runtime computes them:
/// for R rois, `bins` output bins of `grid` samples each along one axis.
struct AxisSamples {
  Value low, high;   // [R, S] integer positions (i64)
  Value wLow, wHigh; // [R, S] interpolation weights, zero outside the image
};

AxisSamples roiAxis(NodeImporter &n, Value start, Value end, int64_t size, int64_t bins,
                    int64_t grid, bool halfPixel, float scale) {
  auto k = [&](double v) { return n.scalarLike(start, v); };
  double offset = halfPixel ? 0.5 : 0.0;
  Value s = n.make<SubOp>(n.make<MulOp>(start, k(scale)), k(offset));
  Value e = n.make<SubOp>(n.make<MulOp>(end, k(scale)), k(offset));
  Value len = n.make<SubOp>(e, s);
  if (!halfPixel) // output_half_pixel (RoiAlign-10): rois at least one pixel
    len = n.make<MaxOp>(len, k(1));
  Value bin = n.make<DivOp>(len, k(bins)); // [R, 1]
  // Sample j of bin p at p * bin + (j + 0.5) * bin / grid.
  SmallVector<double> steps;
  for (int64_t p = 0; p < bins; ++p)
    for (int64_t j = 0; j < grid; ++j)
      steps.push_back(p + (j + 0.5) / grid);
  Value stepConst = n.floatTable({1, (int64_t)steps.size()},
                                 cast<FloatType>(NodeImporter::elementType(start)), steps);
  Value pos = n.make<AddOp>(s, n.make<MulOp>(stepConst, bin)); // [R, S]
  // A NaN roi samples nothing (and must not become an index).
  pos = n.make<SelectOp>(n.make<EqualOp>(pos, pos), pos, k(-2.0));
  Value outside = n.make<OrOp>(n.make<LessOp>(pos, k(-1.0)), n.make<GreaterOp>(pos, k(size)));
  pos = n.make<MaxOp>(pos, k(0));
  Value low = n.make<FloorOp>(pos);
  Value atEdge = n.make<GreaterEqualOp>(low, k(size - 1));
  low = n.make<SelectOp>(atEdge, k(size - 1), low);
  pos = n.make<SelectOp>(atEdge, low, pos);
  Value high = n.make<SelectOp>(atEdge, low, n.make<AddOp>(low, k(1)));
  Value frac = n.make<SubOp>(pos, low);
  Value keep = n.make<CastOp>(n.make<NotOp>(outside), TypeAttr::get(NodeImporter::elementType(start)));
  Type i64 = n.b.getI64Type();
  return {n.make<CastOp>(low, TypeAttr::get(i64)), n.make<CastOp>(high, TypeAttr::get(i64)),
          n.make<MulOp>(n.make<SubOp>(k(1), frac), keep), n.make<MulOp>(frac, keep)};
}

/// RoiAlign with a fixed sampling_ratio: samples are separable, so the
/// positions and weights are computed per axis ([R, bins * ratio]) and each
/// of the four bilinear taps is one Gather of [R, C, Sy, Sx] elements from
/// the flattened image; avg mode means over each bin's samples, max mode
/// takes the largest weighted tap (ONNX Runtime's definition).
LogicalResult roiAlign(NodeImporter &n, Outs &out) {
  Value x = n.required(0), rois = n.required(1), batch = n.required(2);
  auto xt = NodeImporter::rankedType(x), rt = NodeImporter::rankedType(rois);
  if (!xt || !rt || !xt.hasStaticShape() || !rt.hasStaticShape() || xt.getRank() != 4 ||
      rt.getRank() != 2 || rt.getDimSize(1) != 4)
    return n.error("RoiAlign needs X [N, C, H, W] and rois [R, 4] of static shape");
  int64_t sr = n.getInt("sampling_ratio", 0);
  if (sr <= 0)
    return n.error("RoiAlign with sampling_ratio 0 (adaptive, a number of samples that depends "
                   "on each roi's size) is not supported");
  std::string mode = n.getString("mode", "avg");
  if (mode != "avg" && mode != "max")
    return n.error("unknown RoiAlign mode '" + mode + "'");
  bool halfPixel = n.opset >= 16 && n.getString("coordinate_transformation_mode", "half_pixel") ==
                                        "half_pixel";
  int64_t oh = n.getInt("output_height", 1), ow = n.getInt("output_width", 1);
  if (oh < 1 || ow < 1 || oh > 4096 || ow > 4096 || sr > 64)
    return n.error("RoiAlign's output size " + Twine(oh) + "x" + Twine(ow) +
                   " or sampling_ratio " + Twine(sr) + " is out of range");
  float scale = n.getFloat("spatial_scale", 1.0f);
  int64_t N = xt.getDimSize(0), C = xt.getDimSize(1), H = xt.getDimSize(2), W = xt.getDimSize(3);
  int64_t R = rt.getDimSize(0);
  rois = n.make<CastOp>(rois, TypeAttr::get(xt.getElementType()));
  auto col = [&](int64_t i) {
    return n.make<SliceOp>(rois, n.i64Tensor({i}), n.i64Tensor({i + 1}), n.i64Tensor({1}),
                           n.i64Tensor({1})); // [R, 1]
  };
  AxisSamples ys = roiAxis(n, col(1), col(3), H, oh, sr, halfPixel, scale);
  AxisSamples xs = roiAxis(n, col(0), col(2), W, ow, sr, halfPixel, scale);
  if (n.failed())
    return failure();
  int64_t Sy = oh * sr, Sx = ow * sr;
  Value flat = n.make<ReshapeOp>(x, n.i64Tensor({N * C * H * W}), n.b.getBoolAttr(false));
  auto i64 = TypeAttr::get(n.b.getI64Type());
  // (batch_r * C + c) * H * W, as [R, C, 1, 1].
  Value plane = n.make<MulOp>(
      n.make<AddOp>(n.make<MulOp>(n.make<ReshapeOp>(n.make<CastOp>(batch, i64),
                                                    n.i64Tensor({R, 1, 1, 1}),
                                                    n.b.getBoolAttr(false)),
                                  n.i64Tensor({C})),
                    n.positionsAlong(4, 1, C)),
      n.i64Tensor({H * W}));
  auto rowsOf = [&](Value v) { // [R, Sy] -> [R, 1, Sy, 1]
    return n.make<ReshapeOp>(v, n.i64Tensor({R, 1, Sy, 1}), n.b.getBoolAttr(false));
  };
  auto colsOf = [&](Value v) { // [R, Sx] -> [R, 1, 1, Sx]
    return n.make<ReshapeOp>(v, n.i64Tensor({R, 1, 1, Sx}), n.b.getBoolAttr(false));
  };
  Value result;
  for (auto [yi, wy] : {std::pair{ys.low, ys.wLow}, std::pair{ys.high, ys.wHigh}})
    for (auto [xi, wx] : {std::pair{xs.low, xs.wLow}, std::pair{xs.high, xs.wHigh}}) {
      Value index = n.make<AddOp>(
          plane, n.make<AddOp>(n.make<MulOp>(rowsOf(yi), n.i64Tensor({W})), colsOf(xi)));
      Value v = n.make<GatherOp>(flat, index, n.b.getI64IntegerAttr(0)); // [R, C, Sy, Sx]
      Value term = n.make<MulOp>(v, n.make<MulOp>(rowsOf(wy), colsOf(wx)));
      result = !result ? term
               : mode == "avg" ? n.make<AddOp>(result, term)
                               : n.make<MaxOp>(result, term);
    }
  Value bins = n.make<ReshapeOp>(result, n.i64Tensor({R, C, oh, sr, ow, sr}),
                                 n.b.getBoolAttr(false));
  auto axes = n.b.getDenseI64ArrayAttr({3, 5});
  out.push_back(mode == "avg" ? n.make<ReduceMeanOp>(bins, axes, n.b.getBoolAttr(false))
                              : n.make<ReduceMaxOp>(bins, axes, n.b.getBoolAttr(false)));
  return failure(n.failed());
}

} // namespace

void addSamplingRules(std::vector<ImportRule> &rules) {
  rules.push_back({"GridSample", 16, kMaxSupportedOpset, gridSample});
  rules.push_back({"RoiAlign", 10, kMaxSupportedOpset, roiAlign});
}

} // namespace kiln
