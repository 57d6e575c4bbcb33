// Import rules for neural-network operators: convolution, pooling, matrix
// products and normalizations. Composite operators (Gemm, Softmax, the
// normalizations) are decomposed into kiln ops; constant parts such as
// BatchNorm's scale/sqrt(var+eps) then fold at compile time.
#include "NodeImporter.h"

using namespace mlir;

namespace kiln {
namespace {

using Outs = SmallVectorImpl<Value>;

/// Resolves ONNX auto_pad / pads for `spatial` axes into begin..., end...
LogicalResult resolvePads(NodeImporter &n, RankedTensorType in, ArrayRef<int64_t> kernel,
                          ArrayRef<int64_t> strides, ArrayRef<int64_t> dilations,
                          SmallVectorImpl<int64_t> &pads) {
  size_t spatial = kernel.size();
  // Windows larger than this are corrupt attributes, not models.
  constexpr int64_t kMaxWindow = int64_t(1) << 24;
  auto inRange = [&](ArrayRef<int64_t> v, int64_t lo, StringRef what) -> LogicalResult {
    for (int64_t x : v)
      if (x < lo || x > kMaxWindow)
        return n.error(what + " " + Twine(x) + " is outside [" + Twine(lo) + ", 2^24]");
    return success();
  };
  if (failed(inRange(kernel, 1, "kernel size")) || failed(inRange(strides, 1, "stride")) ||
      failed(inRange(dilations, 1, "dilation")))
    return failure();
  std::string autoPad = n.getString("auto_pad", "NOTSET");
  if (autoPad == "NOTSET") {
    if (auto p = n.getInts("pads"))
      pads.assign(p->begin(), p->end());
    else
      pads.assign(2 * spatial, 0);
    if (pads.size() != 2 * spatial)
      return n.error("pads must have 2 entries per spatial axis");
    return inRange(pads, 0, "pad");
  }
  pads.assign(2 * spatial, 0);
  if (autoPad == "VALID")
    return success();
  if (autoPad != "SAME_UPPER" && autoPad != "SAME_LOWER")
    return n.error("unknown auto_pad '" + autoPad + "'");
  for (size_t i = 0; i < spatial; ++i) {
    int64_t dim = in.getDimSize(2 + i);
    if (ShapedType::isDynamic(dim) || ShapedType::isDynamic(kernel[i]))
      return n.error("auto_pad SAME needs static spatial dimensions and kernel");
    int64_t out = (dim + strides[i] - 1) / strides[i];
    int64_t total =
        std::max<int64_t>((out - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 - dim, 0);
    int64_t small = total / 2, big = total - small;
    pads[i] = autoPad == "SAME_UPPER" ? small : big;
    pads[spatial + i] = autoPad == "SAME_UPPER" ? big : small;
  }
  return success();
}

SmallVector<int64_t> intsOr(NodeImporter &n, StringRef name, size_t count, int64_t dflt) {
  if (auto v = n.getInts(name))
    return *v;
  return SmallVector<int64_t>(count, dflt);
}

} // namespace

Value buildConv(NodeImporter &n, Value x, Value w, Value bias) {
  if (n.failed())
    return {};
  auto xt = NodeImporter::rankedType(x), wt = NodeImporter::rankedType(w);
  if (!xt || !wt || xt.getRank() < 3)
    return (void)n.error("Conv needs input and weight of known rank >= 3"), Value();
  if (wt.getRank() != xt.getRank())
    return (void)n.error("Conv's weight has rank " + Twine(wt.getRank()) +
                         " but its input has rank " + Twine(xt.getRank())),
           Value();
  size_t spatial = xt.getRank() - 2;
  SmallVector<int64_t> kernel =
      n.getInts("kernel_shape") ? *n.getInts("kernel_shape")
                                : SmallVector<int64_t>(wt.getShape().drop_front(2));
  SmallVector<int64_t> strides = intsOr(n, "strides", spatial, 1);
  SmallVector<int64_t> dilations = intsOr(n, "dilations", spatial, 1);
  if (kernel.size() != spatial || strides.size() != spatial || dilations.size() != spatial)
    return (void)n.error("kernel_shape/strides/dilations do not match the input rank"), Value();
  // Without kernel_shape the window is the weight's spatial shape; an
  // unknown one must not be read as a (negative) size.
  if (llvm::any_of(kernel, ShapedType::isDynamic))
    return (void)n.error("Conv without kernel_shape needs a weight of known spatial shape"),
           Value();
  SmallVector<int64_t> pads;
  if (failed(resolvePads(n, xt, kernel, strides, dilations, pads)))
    return {};
  return n.make<ConvOp>(x, w, bias, n.b.getDenseI64ArrayAttr(strides),
                        n.b.getDenseI64ArrayAttr(pads), n.b.getDenseI64ArrayAttr(dilations),
                        n.b.getI64IntegerAttr(n.getInt("group", 1)), IntegerAttr());
}

namespace {

LogicalResult conv(NodeImporter &n, Outs &out) {
  Value y = buildConv(n, n.required(0), n.required(1), n.input(2));
  if (!y)
    return failure();
  out.push_back(y);
  return success();
}

/// A strided ConvTranspose as one convolution of its output phases (the
/// "sub-pixel" form), when dilations are 1 and pads are not negative;
/// none otherwise. Along an axis of stride s and kernel k, the output at
/// u = o + pad_begin = q s + r (phase r) is sum_j x[q - j] w[r + s j]: a
/// stride-1 convolution of x, padded by J - 1 before (J = ceil(k / s)),
/// with the phase's taps w[r], w[r + s], ... reversed (zeros past k). All
/// s^n phases share J, so they are one convolution with s^n times the
/// output channels (per group: g, then the phases, then the channel), whose
/// result is interleaved ([.., phases.., Q..] -> [.., Q0, s0, Q1, s1 ..]) and
/// cropped to the output. Every product it does is one the transposed
/// convolution needs, except the zero taps when s does not divide k; the
/// zero-insertion form below does s^n times the work (the inserted zeros).
Value convTransposeByPhases(NodeImporter &n, Value x, Value w, Value bias, int64_t G,
                            ArrayRef<int64_t> kernel, ArrayRef<int64_t> strides,
                            ArrayRef<int64_t> dilations, ArrayRef<int64_t> outPad,
                            ArrayRef<int64_t> pads) {
  auto xt = NodeImporter::rankedType(x), wt = NodeImporter::rankedType(w);
  int64_t spatial = kernel.size();
  if (llvm::all_of(strides, [](int64_t s) { return s == 1; }) ||
      llvm::any_of(dilations, [](int64_t d) { return d != 1; }) ||
      llvm::any_of(pads, [](int64_t p) { return p < 0; }))
    return {};
  int64_t N = xt.getDimSize(0), C = wt.getDimSize(0), Mg = wt.getDimSize(1), Cg = C / G;
  int64_t phases = 1;
  SmallVector<int64_t> J, Q, outSize;
  for (int64_t i = 0; i < spatial; ++i) {
    int64_t in = xt.getDimSize(2 + i), s = strides[i], k = kernel[i];
    int64_t full = s * (in - 1) + k + outPad[i]; // u = 0 .. full - 1
    J.push_back((k + s - 1) / s);
    Q.push_back((full + s - 1) / s);
    outSize.push_back(full - pads[i] - pads[spatial + i]);
    if (outSize.back() <= 0 || Q.back() * s > (int64_t(1) << 31))
      return {};
    phases *= s;
  }
  auto noZero = n.b.getBoolAttr(false);
  auto steps = [&](int64_t v) { return n.i64Tensor(SmallVector<int64_t>(spatial, v)); };

  // Kernel [G * Cg, Mg, k..] -> padded to [.., J s ..] -> [G, Cg, Mg, J0, s0,
  // J1, s1 ..], each J reversed -> [G, s0, s1 .., Mg, Cg, J0, J1 ..] ->
  // [G * phases * Mg, Cg, J..].
  SmallVector<int64_t> grow(2 * (2 + spatial), 0), split{G, Cg, Mg}, perm{0}, merged;
  for (int64_t i = 0; i < spatial; ++i) {
    grow[2 + spatial + 2 + i] = J[i] * strides[i] - kernel[i];
    split.push_back(J[i]);
    split.push_back(strides[i]);
  }
  Value v = w;
  if (llvm::any_of(grow, [](int64_t g) { return g > 0; }))
    v = n.make<PadOp>(v, n.i64Tensor(grow), n.scalarLike(w, 0), n.b.getStringAttr("constant"));
  v = n.make<ReshapeOp>(v, n.i64Tensor(split), noZero);
  SmallVector<int64_t> jAxes;
  for (int64_t i = 0; i < spatial; ++i)
    jAxes.push_back(3 + 2 * i);
  v = n.make<SliceOp>(v, steps(-1), steps(std::numeric_limits<int64_t>::min()),
                      n.i64Tensor(jAxes), steps(-1));
  for (int64_t i = 0; i < spatial; ++i)
    perm.push_back(4 + 2 * i); // the phases
  perm.push_back(2);           // Mg
  perm.push_back(1);           // Cg
  for (int64_t i = 0; i < spatial; ++i)
    perm.push_back(3 + 2 * i); // the taps
  v = n.make<TransposeOp>(v, n.b.getDenseI64ArrayAttr(perm));
  merged = {G * phases * Mg, Cg};
  llvm::append_range(merged, J);
  v = n.make<ReshapeOp>(v, n.i64Tensor(merged), noZero);

  // The bias once per phase: [G * Mg] -> [G, 1, Mg] x phases -> [G * phases * Mg].
  Value b;
  if (bias) {
    Value g = n.make<ReshapeOp>(bias, n.i64Tensor({G, 1, Mg}), noZero);
    b = n.make<ConcatOp>(SmallVector<Value>(phases, g), n.b.getI64IntegerAttr(1));
    b = n.make<ReshapeOp>(b, n.i64Tensor({G * phases * Mg}), noZero);
  }

  // Stride-1 convolution padded by J - 1 before and Q - in after: Q per axis.
  SmallVector<int64_t> convPads(J.begin(), J.end());
  for (int64_t &p : convPads)
    p -= 1;
  for (int64_t i = 0; i < spatial; ++i)
    convPads.push_back(Q[i] - xt.getDimSize(2 + i));
  Value y = n.make<ConvOp>(x, v, b, n.b.getDenseI64ArrayAttr(SmallVector<int64_t>(spatial, 1)),
                           n.b.getDenseI64ArrayAttr(convPads),
                           n.b.getDenseI64ArrayAttr(SmallVector<int64_t>(spatial, 1)),
                           n.b.getI64IntegerAttr(G), IntegerAttr());
  // [N, G * phases * Mg, Q..] -> [N, G, s0, s1 .., Mg, Q0, Q1 ..] ->
  // [N, G, Mg, Q0, s0, Q1, s1 ..] -> [N, G * Mg, Q0 s0, Q1 s1 ..].
  SmallVector<int64_t> unfolded{N, G}, back{0, 1, 2 + spatial}, interleaved{N, G * Mg};
  llvm::append_range(unfolded, strides);
  unfolded.push_back(Mg);
  llvm::append_range(unfolded, Q);
  for (int64_t i = 0; i < spatial; ++i) {
    back.push_back(3 + spatial + i);
    back.push_back(2 + i);
    interleaved.push_back(Q[i] * strides[i]);
  }
  y = n.make<ReshapeOp>(y, n.i64Tensor(unfolded), noZero);
  y = n.make<TransposeOp>(y, n.b.getDenseI64ArrayAttr(back));
  y = n.make<ReshapeOp>(y, n.i64Tensor(interleaved), noZero);
  // The output: u from pad_begin, outSize of it.
  SmallVector<int64_t> starts, ends, axes;
  bool crop = false;
  for (int64_t i = 0; i < spatial; ++i) {
    starts.push_back(pads[i]);
    ends.push_back(pads[i] + outSize[i]);
    axes.push_back(2 + i);
    crop |= pads[i] > 0 || outSize[i] != Q[i] * strides[i];
  }
  if (crop)
    y = n.make<SliceOp>(y, n.i64Tensor(starts), n.i64Tensor(ends), n.i64Tensor(axes), steps(1));
  return y;
}

/// ConvTranspose as a convolution: the input is dilated by the stride (zeros
/// inserted), padded by (k-1)*d minus the ONNX pads (cropped where that is
/// negative), and convolved with the kernel flipped and its in/out channels
/// swapped per group.
LogicalResult convTranspose(NodeImporter &n, Outs &out) {
  Value x = n.required(0), w = n.required(1);
  if (n.failed())
    return failure();
  auto xt = NodeImporter::rankedType(x), wt = NodeImporter::rankedType(w);
  if (!xt || !wt || !xt.hasStaticShape() || !wt.hasStaticShape() || xt.getRank() < 3)
    return n.error("ConvTranspose needs input and weight of static shape");
  if (wt.getRank() != xt.getRank())
    return n.error("ConvTranspose weight has rank " + std::to_string(wt.getRank()) +
                   ", the input " + std::to_string(xt.getRank()));
  int64_t spatial = xt.getRank() - 2, G = n.getInt("group", 1);
  if (G <= 0)
    return n.error("ConvTranspose group must be positive");
  int64_t C = wt.getDimSize(0), Mg = wt.getDimSize(1), Cg = C / G;
  if (C % G || xt.getDimSize(1) != C)
    return n.error("ConvTranspose channels do not match weight and group");
  SmallVector<int64_t> kernel(wt.getShape().drop_front(2));
  SmallVector<int64_t> strides = intsOr(n, "strides", spatial, 1);
  SmallVector<int64_t> dilations = intsOr(n, "dilations", spatial, 1);
  SmallVector<int64_t> outPad = intsOr(n, "output_padding", spatial, 0);
  SmallVector<int64_t> pads = intsOr(n, "pads", 2 * spatial, 0);
  std::string autoPad = n.getString("auto_pad", "NOTSET");
  auto outputShape = n.getInts("output_shape");
  if (autoPad == "VALID")
    pads.assign(2 * spatial, 0);
  if (strides.size() != (size_t)spatial || dilations.size() != (size_t)spatial ||
      outPad.size() != (size_t)spatial || pads.size() != (size_t)(2 * spatial) ||
      (outputShape && outputShape->size() < (size_t)spatial))
    return n.error("ConvTranspose attributes do not match the input rank");
  // Bounds that keep the size arithmetic below far from overflow; anything
  // beyond them is a corrupt attribute, not a model.
  constexpr int64_t kMax = int64_t(1) << 24;
  auto outside = [&](ArrayRef<int64_t> v, int64_t lo, int64_t hi) {
    return llvm::any_of(v, [&](int64_t x) { return x < lo || x > hi; });
  };
  if (outside(kernel, 1, kMax) || outside(strides, 1, kMax) || outside(dilations, 1, kMax) ||
      outside(outPad, 0, kMax) || outside(pads, -kMax, kMax) ||
      outside(xt.getShape(), 0, int64_t(1) << 31) ||
      (outputShape && outside(*outputShape, 0, int64_t(1) << 31)))
    return n.error("ConvTranspose kernel, strides, dilations, pads, output_padding or "
                   "output_shape out of range");
  if (outputShape || autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    for (int64_t i = 0; i < spatial; ++i) {
      int64_t in = xt.getDimSize(2 + i);
      int64_t target = outputShape ? (*outputShape)[outputShape->size() - spatial + i]
                                   : in * strides[i];
      int64_t total = strides[i] * (in - 1) + outPad[i] + (kernel[i] - 1) * dilations[i] + 1 - target;
      bool upper = autoPad == "SAME_UPPER";
      pads[i] = upper ? total / 2 : total - total / 2;
      pads[spatial + i] = upper ? total - total / 2 : total / 2;
      if (total < 0) { // a larger output_shape extends the end, like output_padding
        pads[i] = 0;
        pads[spatial + i] = total;
      }
    }
  }
  auto noZero = n.b.getBoolAttr(false);
  if (Value y = convTransposeByPhases(n, x, w, n.input(2), G, kernel, strides, dilations, outPad,
                                      pads)) {
    out.push_back(y);
    return success();
  }

  // 1. Zero insertion: [N, C, H, W] -> [N, C, H, 1, W, 1] -> pad to
  //    [N, C, H, s, W, s] -> [N, C, H*s, W*s] -> slice to (H-1)*s+1, ...
  Value y = x;
  if (llvm::any_of(strides, [](int64_t s) { return s > 1; })) {
    SmallVector<int64_t> unsq, padv(2 * (2 + 2 * spatial), 0), flat{xt.getDimSize(0), C};
    int64_t r = 2 + 2 * spatial;
    for (int64_t i = 0; i < spatial; ++i) {
      unsq.push_back(2 + 2 * i + 1);
      padv[r + 2 + 2 * i + 1] = strides[i] - 1;
      flat.push_back(xt.getDimSize(2 + i) * strides[i]);
    }
    y = n.make<UnsqueezeOp>(y, n.b.getDenseI64ArrayAttr(unsq));
    y = n.make<PadOp>(y, n.i64Tensor(padv), n.scalarLike(x, 0), n.b.getStringAttr("constant"));
    y = n.make<ReshapeOp>(y, n.i64Tensor(flat), noZero);
    SmallVector<int64_t> starts(spatial, 0), ends, axes;
    for (int64_t i = 0; i < spatial; ++i) {
      ends.push_back((xt.getDimSize(2 + i) - 1) * strides[i] + 1);
      axes.push_back(2 + i);
    }
    y = n.make<SliceOp>(y, n.i64Tensor(starts), n.i64Tensor(ends), n.i64Tensor(axes),
                        n.i64Tensor(SmallVector<int64_t>(spatial, 1)));
  }
  // 2. Full padding minus the ONNX pads; negative amounts crop.
  SmallVector<int64_t> grow(2 * (2 + spatial), 0), cropStart, cropEnd, cropAxes;
  bool crop = false;
  auto yt = NodeImporter::rankedType(y);
  if (!yt)
    return failure();
  for (int64_t i = 0; i < spatial; ++i) {
    int64_t full = (kernel[i] - 1) * dilations[i];
    int64_t before = full - pads[i], after = full - pads[spatial + i] + outPad[i];
    grow[2 + i] = std::max<int64_t>(before, 0);
    grow[2 + spatial + 2 + i] = std::max<int64_t>(after, 0);
    int64_t padded = yt.getDimSize(2 + i) + grow[2 + i] + grow[2 + spatial + 2 + i];
    cropStart.push_back(std::max<int64_t>(-before, 0));
    cropEnd.push_back(padded - std::max<int64_t>(-after, 0));
    cropAxes.push_back(2 + i);
    crop |= before < 0 || after < 0;
  }
  if (llvm::any_of(grow, [](int64_t g) { return g > 0; }))
    y = n.make<PadOp>(y, n.i64Tensor(grow), n.scalarLike(x, 0), n.b.getStringAttr("constant"));
  if (crop)
    y = n.make<SliceOp>(y, n.i64Tensor(cropStart), n.i64Tensor(cropEnd), n.i64Tensor(cropAxes),
                        n.i64Tensor(SmallVector<int64_t>(spatial, 1)));
  // 3. Weight [G*Cg, Mg, k...] -> [G, Cg, Mg, k...] -> [G, Mg, Cg, k...]
  //    -> [G*Mg, Cg, k...], flipped along every spatial axis.
  SmallVector<int64_t> split{G, Cg, Mg}, perm{1, 0, 2}, merged{G * Mg, Cg};
  llvm::append_range(split, kernel);
  llvm::append_range(merged, kernel);
  perm = {0, 2, 1};
  for (int64_t i = 0; i < spatial; ++i)
    perm.push_back(3 + i);
  Value wf = n.make<ReshapeOp>(w, n.i64Tensor(split), noZero);
  wf = n.make<TransposeOp>(wf, n.b.getDenseI64ArrayAttr(perm));
  wf = n.make<ReshapeOp>(wf, n.i64Tensor(merged), noZero);
  SmallVector<int64_t> flipStart(spatial, -1), flipEnd(spatial, std::numeric_limits<int64_t>::min()),
      flipAxes, flipSteps(spatial, -1);
  for (int64_t i = 0; i < spatial; ++i)
    flipAxes.push_back(2 + i);
  wf = n.make<SliceOp>(wf, n.i64Tensor(flipStart), n.i64Tensor(flipEnd), n.i64Tensor(flipAxes),
                       n.i64Tensor(flipSteps));
  out.push_back(n.make<ConvOp>(y, wf, n.input(2),
                               n.b.getDenseI64ArrayAttr(SmallVector<int64_t>(spatial, 1)),
                               n.b.getDenseI64ArrayAttr(SmallVector<int64_t>(2 * spatial, 0)),
                               n.b.getDenseI64ArrayAttr(dilations), n.b.getI64IntegerAttr(G),
                               IntegerAttr()));
  return success();
}

/// Extra end padding that makes floor-based output sizes match ceil_mode.
SmallVector<int64_t> ceilModePads(RankedTensorType in, ArrayRef<int64_t> kernel,
                                  ArrayRef<int64_t> strides, ArrayRef<int64_t> dilations,
                                  ArrayRef<int64_t> pads) {
  size_t spatial = kernel.size();
  SmallVector<int64_t> extra(spatial, 0);
  for (size_t i = 0; i < spatial; ++i) {
    int64_t dim = in.getDimSize(2 + i);
    int64_t padded = dim + pads[i] + pads[spatial + i];
    int64_t span = (kernel[i] - 1) * dilations[i] + 1;
    if (padded < span)
      continue;
    int64_t out = (padded - span + strides[i] - 1) / strides[i] + 1;
    // A window must start inside the input or its begin padding.
    if ((out - 1) * strides[i] >= dim + pads[i])
      --out;
    extra[i] = std::max<int64_t>((out - 1) * strides[i] + span - padded, 0);
  }
  return extra;
}

/// MaxPool's Indices: for each output, the flat index (row-major, or with
/// storage_order = 1 column-major over the two spatial axes) of the first
/// input element in its window that equals the maximum. One strided slice
/// of the -inf-padded input per kernel tap is compared with the result;
/// taps are visited last to first so that the first match wins.
Value maxPoolIndices(NodeImporter &n, Value x, Value y, ArrayRef<int64_t> kernel,
                     ArrayRef<int64_t> strides, ArrayRef<int64_t> pads,
                     ArrayRef<int64_t> dilations) {
  auto xt = NodeImporter::rankedType(x), yt = NodeImporter::rankedType(y);
  if (!xt || !yt)
    return {};
  int64_t spatial = kernel.size(), rank = xt.getRank();
  bool columnMajor = n.getInt("storage_order", 0) != 0;
  if (columnMajor && spatial != 2) {
    (void)n.error("MaxPool's storage_order = 1 is defined for 2-D pooling only");
    return {};
  }
  SmallVector<int64_t> padAll(2 * rank, 0);
  for (int64_t i = 0; i < spatial; ++i) {
    padAll[2 + i] = pads[i];
    padAll[rank + 2 + i] = pads[spatial + i];
  }
  // Pad taps are excluded by position below; -inf only keeps them from
  // looking like maxima in float code (integers pad with 0).
  bool isFloat = isa<FloatType>(xt.getElementType());
  Value padded = n.make<PadOp>(x, n.i64Tensor(padAll), n.scalarLike(x, isFloat ? -INFINITY : 0),
                               n.b.getStringAttr("constant"));
  // Element strides of the spatial axes in the chosen storage order, and
  // the offset of each (batch, channel) plane.
  SmallVector<int64_t> elemStride(spatial, 1);
  int64_t plane = 1;
  for (int64_t i = spatial - 1; i >= 0; --i) {
    elemStride[i] = plane;
    plane *= xt.getDimSize(2 + i);
  }
  if (columnMajor)
    elemStride = {1, xt.getDimSize(2)};
  Value planeBase = n.make<MulOp>(
      n.make<AddOp>(n.make<MulOp>(n.positionsAlong(rank, 0, xt.getDimSize(0)),
                                  n.i64Tensor({xt.getDimSize(1)})),
                    n.positionsAlong(rank, 1, xt.getDimSize(1))),
      n.i64Tensor({plane}));
  int64_t taps = 1;
  for (int64_t k : kernel)
    taps *= k;
  Value indices, matched;
  // Taps from last to first, so that the first match wins; only taps inside
  // the image can match (a -inf input would equal the padding, a NaN
  // window matches nothing). The start value, for windows where nothing
  // matches, is the first tap clamped into the image.
  for (int64_t tap = taps - 1; tap >= -1; --tap) {
    bool fallback = tap < 0;
    SmallVector<int64_t> offset(spatial), starts, ends, axes;
    for (int64_t i = spatial - 1, rest = fallback ? 0 : tap; i >= 0; --i) {
      offset[i] = (rest % kernel[i]) * dilations[i];
      rest /= kernel[i];
    }
    Value index = planeBase, inside;
    for (int64_t i = 0; i < spatial; ++i) {
      int64_t outDim = yt.getDimSize(2 + i), dim = xt.getDimSize(2 + i);
      starts.push_back(offset[i]);
      ends.push_back(offset[i] + (outDim - 1) * strides[i] + 1);
      axes.push_back(2 + i);
      // Input coordinate o * stride + offset - pad_begin along axis i.
      Value coord = n.make<AddOp>(
          n.make<MulOp>(n.positionsAlong(rank, 2 + i, outDim), n.i64Tensor({strides[i]})),
          n.i64Tensor({offset[i] - pads[i]}));
      Value in = n.make<AndOp>(n.make<GreaterEqualOp>(coord, n.i64Tensor({0})),
                               n.make<LessOp>(coord, n.i64Tensor({dim})));
      inside = inside ? n.make<AndOp>(inside, in) : in;
      if (fallback)
        coord = n.make<MinOp>(n.make<MaxOp>(coord, n.i64Tensor({0})), n.i64Tensor({dim - 1}));
      index = n.make<AddOp>(index, n.make<MulOp>(coord, n.i64Tensor({elemStride[i]})));
    }
    index = n.make<ExpandOp>(index, n.i64Tensor(yt.getShape()));
    if (fallback) {
      indices = indices ? n.make<SelectOp>(matched, indices, index) : index;
      break;
    }
    Value value = n.make<SliceOp>(padded, n.i64Tensor(starts), n.i64Tensor(ends),
                                  n.i64Tensor(axes), n.i64Tensor(strides));
    Value hit = n.make<AndOp>(n.make<EqualOp>(value, y), inside);
    matched = matched ? n.make<OrOp>(matched, hit) : hit;
    indices = indices ? n.make<SelectOp>(hit, index, indices) : n.make<SelectOp>(hit, index, n.i64Tensor({0}));
  }
  return indices;
}

template <bool isMax>
LogicalResult pool(NodeImporter &n, Outs &out) {
  Value x = n.required(0);
  if (n.failed())
    return failure();
  auto xt = NodeImporter::rankedType(x);
  // The window's pads follow from the spatial dims; the batch and channels
  // may be known only at run time (a CNN compiled once for every batch).
  auto spatialStatic = [](RankedTensorType t) {
    return llvm::none_of(t.getShape().drop_front(2), ShapedType::isDynamic);
  };
  bool wantIndices = isMax && n.node.output_size() > 1 && !n.node.output(1).empty();
  // Spatial dims unknown here (an image size known only at run time, or
  // shape arithmetic upstream that only kiln-symbolic-dims resolves, as in
  // MaxViT's windows) are taken where the pads do not depend on them:
  // explicit pads or VALID, and ceil_mode only where its extra end padding
  // can be a constant (below). Code generation takes them at run time
  // where its kernels can, else needs them known by then.
  std::string autoPad = n.getString("auto_pad", "NOTSET");
  bool ceilMode = n.getInt("ceil_mode", 0) != 0;
  bool padsFixed = autoPad == "NOTSET" || autoPad == "VALID";
  if (!xt || xt.getRank() < 3 || (!spatialStatic(xt) && (!padsFixed || wantIndices)) ||
      (wantIndices && !xt.hasStaticShape()))
    return n.error("pooling needs an input of static shape and rank >= 3");
  size_t spatial = xt.getRank() - 2;
  auto kernel = n.getInts("kernel_shape");
  if (!kernel || kernel->size() != spatial)
    return n.error("pooling needs a kernel_shape per spatial axis");
  SmallVector<int64_t> strides = intsOr(n, "strides", spatial, 1);
  SmallVector<int64_t> dilations = intsOr(n, "dilations", spatial, 1);
  if (!isMax && llvm::any_of(dilations, [](int64_t d) { return d != 1; }))
    return n.error("AveragePool with dilations is not supported");
  SmallVector<int64_t> pads;
  if (failed(resolvePads(n, xt, *kernel, strides, dilations, pads)))
    return failure();
  SmallVector<int64_t> extra(spatial, 0);
  if (ceilMode && spatialStatic(xt)) {
    extra = ceilModePads(xt, *kernel, strides, dilations, pads);
  } else if (ceilMode) {
    // ceil((in + pads - span) / s) + 1 outputs is floor mode's count with
    // s - 1 more end padding, as long as the last window never starts in
    // the end padding (ONNX drops such a window): that holds for every
    // input size when end pad + s <= span (SqueezeNet's and GoogLeNet's
    // 3x3 stride-2 pools), since then (out - 1) * s <= in + pads - span +
    // s - 1 < in + begin pad. The extra padding is never read (max pooling
    // skips padding, ceil_pads never count in an average's divisor), so
    // a constant serves every size.
    for (size_t i = 0; i < spatial; ++i) {
      int64_t span = (*kernel)[i] > 0 ? ((*kernel)[i] - 1) * dilations[i] + 1 : 1;
      if (strides[i] < 1 || pads[spatial + i] + strides[i] > span)
        return n.error("pooling with ceil_mode needs an input of static spatial shape here "
                       "(end pad + stride > window)");
      extra[i] = strides[i] - 1;
    }
  }
  if (isMax) {
    for (size_t i = 0; i < spatial; ++i)
      pads[spatial + i] += extra[i];
    out.push_back(n.make<MaxPoolOp>(x, n.b.getDenseI64ArrayAttr(*kernel),
                                    n.b.getDenseI64ArrayAttr(strides),
                                    n.b.getDenseI64ArrayAttr(pads),
                                    n.b.getDenseI64ArrayAttr(dilations)));
    if (wantIndices)
      out.push_back(maxPoolIndices(n, x, out.back(), *kernel, strides, pads, dilations));
  } else {
    out.push_back(n.make<AvgPoolOp>(
        x, n.b.getDenseI64ArrayAttr(*kernel), n.b.getDenseI64ArrayAttr(strides),
        n.b.getDenseI64ArrayAttr(pads), n.b.getDenseI64ArrayAttr(extra),
        n.b.getBoolAttr(n.getInt("count_include_pad", 0) != 0)));
  }
  return success();
}

/// MaxUnpool: zeros of the output shape with X written at the flat indices
/// I (as MaxPool's Indices give them), by one ScatterElements on the
/// flattened output.
LogicalResult maxUnpool(NodeImporter &n, Outs &out) {
  Value x = n.required(0), indices = n.required(1);
  auto xt = NodeImporter::rankedType(x);
  if (!xt || !xt.hasStaticShape() || xt.getRank() < 3)
    return n.error("MaxUnpool needs an input of static shape and rank >= 3");
  size_t spatial = xt.getRank() - 2;
  auto kernel = n.getInts("kernel_shape");
  if (!kernel || kernel->size() != spatial)
    return n.error("MaxUnpool needs a kernel_shape per spatial axis");
  SmallVector<int64_t> strides = intsOr(n, "strides", spatial, 1);
  SmallVector<int64_t> pads = intsOr(n, "pads", 2 * spatial, 0);
  SmallVector<int64_t> shape{xt.getDimSize(0), xt.getDimSize(1)};
  for (size_t i = 0; i < spatial; ++i)
    shape.push_back((xt.getDimSize(2 + i) - 1) * strides[i] + (*kernel)[i] - pads[i] -
                    pads[spatial + i]);
  // An output_shape larger than the default one pads at the end of each
  // spatial axis; the indices keep addressing the default shape (as in
  // ONNX Runtime and the ONNX test).
  SmallVector<int64_t> grow(2 * xt.getRank(), 0);
  if (n.hasInput(2)) {
    auto given = n.constInts(2);
    if (!given || given->size() != (size_t)xt.getRank())
      return n.error("MaxUnpool's output_shape must be a constant of rank " +
                     Twine(xt.getRank()));
    for (int64_t i = 0; i < xt.getRank(); ++i) {
      if ((*given)[i] < shape[i] || (i < 2 && (*given)[i] != shape[i]))
        return n.error("MaxUnpool's output_shape dimension " + Twine(i) + " is " +
                       Twine((*given)[i]) + "; it must be at least " + Twine(shape[i]));
      grow[xt.getRank() + i] = (*given)[i] - shape[i];
    }
  }
  int64_t total = 1;
  for (int64_t d : shape) {
    if (d < 0 || (d > 0 && total > (int64_t(1) << 40) / d))
      return n.error("MaxUnpool's output shape has a negative or huge dimension");
    total *= d;
  }
  Value zeros = n.constant(DenseElementsAttr::get(
      RankedTensorType::get({total}, xt.getElementType()),
      cast<TypedAttr>(n.b.getZeroAttr(xt.getElementType()))));
  Value flatX = n.make<ReshapeOp>(x, n.i64Tensor({-1}), n.b.getBoolAttr(false));
  Value flatI = n.make<ReshapeOp>(indices, n.i64Tensor({-1}), n.b.getBoolAttr(false));
  Value y = n.make<ScatterElementsOp>(zeros, flatI, flatX, n.b.getI64IntegerAttr(0),
                                      n.b.getStringAttr("none"));
  y = n.make<ReshapeOp>(y, n.i64Tensor(shape), n.b.getBoolAttr(false));
  if (llvm::any_of(grow, [](int64_t g) { return g > 0; }))
    y = n.make<PadOp>(y, n.i64Tensor(grow), n.scalarLike(x, 0), n.b.getStringAttr("constant"));
  out.push_back(y);
  return failure(n.failed());
}

/// LpPool: (sum over the window of |x|^p)^(1/p), as an average pool of
/// |x|^p that counts the padding (zeros), times the window size.
LogicalResult lpPool(NodeImporter &n, Outs &out) {
  Value x = n.required(0);
  auto xt = NodeImporter::rankedType(x);
  if (!xt || xt.getRank() < 3 || !xt.hasStaticShape() || !isa<FloatType>(xt.getElementType()))
    return n.error("LpPool needs a float input of static shape and rank >= 3");
  size_t spatial = xt.getRank() - 2;
  auto kernel = n.getInts("kernel_shape");
  if (!kernel || kernel->size() != spatial)
    return n.error("LpPool needs a kernel_shape per spatial axis");
  int64_t p = n.getInt("p", 2);
  if (p < 1 || p > 64)
    return n.error("LpPool's p " + Twine(p) + " is outside [1, 64]");
  SmallVector<int64_t> strides = intsOr(n, "strides", spatial, 1);
  SmallVector<int64_t> dilations(spatial, 1), pads;
  if (failed(resolvePads(n, xt, *kernel, strides, dilations, pads)))
    return failure();
  SmallVector<int64_t> extra(spatial, 0);
  if (n.getInt("ceil_mode", 0))
    extra = ceilModePads(xt, *kernel, strides, dilations, pads);
  int64_t window = 1;
  for (int64_t k : *kernel)
    window *= k;
  Value powered = n.make<PowOp>(n.make<AbsOp>(x), n.scalarLike(x, p));
  Value mean = n.make<AvgPoolOp>(powered, n.b.getDenseI64ArrayAttr(*kernel),
                                 n.b.getDenseI64ArrayAttr(strides), n.b.getDenseI64ArrayAttr(pads),
                                 n.b.getDenseI64ArrayAttr(extra), n.b.getBoolAttr(true));
  Value sum = n.make<MulOp>(mean, n.scalarLike(x, window));
  out.push_back(n.make<PowOp>(sum, n.scalarLike(x, 1.0 / p)));
  return failure(n.failed());
}

/// LpNormalization: x / ||x||_p along `axis` (p = 1 or 2).
LogicalResult lpNormalization(NodeImporter &n, Outs &out) {
  Value x = n.required(0);
  auto rank = n.rankOf(x);
  if (!rank)
    return failure();
  auto axis = n.normalizeAxis(n.getInt("axis", -1), *rank);
  int64_t p = n.getInt("p", 2);
  if (!axis)
    return failure();
  if (p != 1 && p != 2)
    return n.error("LpNormalization's p must be 1 or 2, got " + Twine(p));
  auto axes = n.b.getDenseI64ArrayAttr({*axis});
  Value norm = p == 1 ? n.make<ReduceSumOp>(n.make<AbsOp>(x), axes, n.b.getBoolAttr(true))
                      : n.make<SqrtOp>(n.make<ReduceSumOp>(n.make<MulOp>(x, x), axes,
                                                           n.b.getBoolAttr(true)));
  out.push_back(n.make<DivOp>(x, norm));
  return failure(n.failed());
}

SmallVector<int64_t> spatialAxes(int64_t rank, int64_t from = 2) {
  SmallVector<int64_t> axes;
  for (int64_t i = from; i < rank; ++i)
    axes.push_back(i);
  return axes;
}

/// GlobalLpPool: (sum over the spatial axes of |x|^p)^(1/p).
LogicalResult globalLpPool(NodeImporter &n, Outs &out) {
  Value x = n.required(0);
  auto rank = n.rankOf(x);
  if (!rank)
    return failure();
  int64_t p = n.getInt("p", 2);
  if (p < 1 || p > 64)
    return n.error("GlobalLpPool's p " + Twine(p) + " is outside [1, 64]");
  Value sum = n.make<ReduceSumOp>(n.make<PowOp>(n.make<AbsOp>(x), n.scalarLike(x, p)),
                                  n.b.getDenseI64ArrayAttr(spatialAxes(*rank)),
                                  n.b.getBoolAttr(true));
  out.push_back(n.make<PowOp>(sum, n.scalarLike(x, 1.0 / p)));
  return failure(n.failed());
}

template <typename ReduceOpTy>
LogicalResult globalPool(NodeImporter &n, Outs &out) {
  Value x = n.required(0);
  auto rank = n.rankOf(x);
  if (!rank)
    return failure();
  out.push_back(n.make<ReduceOpTy>(x, n.b.getDenseI64ArrayAttr(spatialAxes(*rank)),
                                   n.b.getBoolAttr(true)));
  return success();
}

LogicalResult matmul(NodeImporter &n, Outs &out) {
  out.push_back(n.make<MatMulOp>(n.required(0), n.required(1)));
  return success();
}

LogicalResult gemm(NodeImporter &n, Outs &out) {
  Value a = n.required(0), b = n.required(1);
  if (n.failed())
    return failure();
  auto swap = n.b.getDenseI64ArrayAttr({1, 0});
  if (n.getInt("transA", 0))
    a = n.make<TransposeOp>(a, swap);
  if (n.getInt("transB", 0))
    b = n.make<TransposeOp>(b, swap);
  Value y = n.make<MatMulOp>(a, b);
  float alpha = n.getFloat("alpha", 1.0f), beta = n.getFloat("beta", 1.0f);
  if (alpha != 1.0f)
    y = n.make<MulOp>(y, n.scalarLike(y, alpha));
  if (Value c = n.input(2)) {
    if (beta != 1.0f)
      c = n.make<MulOp>(c, n.scalarLike(c, beta));
    y = n.make<AddOp>(y, c);
  }
  out.push_back(y);
  return success();
}

/// Axes [axis, rank) for the coerced-2D semantics of opset < 13, or {axis}.
SmallVector<int64_t> softmaxAxes(NodeImporter &n, int64_t rank, int64_t dfltAxis) {
  auto axis = n.normalizeAxis(n.getInt("axis", dfltAxis), rank);
  if (!axis)
    return {};
  if (n.opset >= 13)
    return {*axis};
  return spatialAxes(rank, *axis);
}

template <bool isLog>
LogicalResult softmax(NodeImporter &n, Outs &out) {
  Value x = n.required(0);
  auto rank = n.rankOf(x);
  if (!rank)
    return failure();
  out.push_back(buildSoftmax(n, x, softmaxAxes(n, *rank, n.opset >= 13 ? -1 : 1), isLog));
  return success();
}

/// One-hot of the (first) maximum along an axis. Before opset 13 the input
/// is coerced to 2-D at `axis` first.
LogicalResult hardmax(NodeImporter &n, Outs &out) {
  Value x = n.required(0);
  auto t = NodeImporter::rankedType(x);
  if (!t || !t.hasStaticShape())
    return n.error("Hardmax needs an input of static shape");
  auto normalized = n.normalizeAxis(n.getInt("axis", n.opset >= 13 ? -1 : 1), t.getRank());
  if (!normalized)
    return failure();
  int64_t axis = *normalized;
  Value v = x;
  if (n.opset < 13) {
    v = n.make<FlattenOp>(x, n.b.getI64IntegerAttr(axis));
    axis = 1;
  }
  auto vt = NodeImporter::rankedType(v);
  if (n.failed() || !vt)
    return failure();
  Value arg = n.make<ArgMaxOp>(v, n.b.getI64IntegerAttr(axis), n.b.getBoolAttr(true),
                               n.b.getBoolAttr(false), n.b.getBoolAttr(false));
  Value positions = n.positionsAlong(vt.getRank(), axis, vt.getDimSize(axis));
  Value y = n.make<CastOp>(n.make<EqualOp>(positions, arg), TypeAttr::get(t.getElementType()));
  if (n.opset < 13)
    y = n.make<ReshapeOp>(y, n.i64Tensor(t.getShape()), n.b.getBoolAttr(false));
  out.push_back(y);
  return success();
}

/// Reshapes a per-channel vector [C] to [C, 1, ...] so that it broadcasts
/// against an N, C, spatial... tensor of `rank`.
Value perChannel(NodeImporter &n, Value v, int64_t rank) { return n.alongAxis(v, rank, 1); }

/// Training mode (opset 14+): normalised with the batch's own mean and
/// (population) variance over every axis but 1; the running statistics come
/// back updated as mean * momentum + batch_mean * (1 - momentum).
LogicalResult batchNormTraining(NodeImporter &n, Value x, Value scale, Value bias, Value mean,
                                Value var, int64_t rank, Outs &out) {
  if (rank < 2)
    return n.error("BatchNormalization needs rank >= 2");
  SmallVector<int64_t> axesList{0};
  for (int64_t d = 2; d < rank; ++d)
    axesList.push_back(d);
  auto axes = n.b.getDenseI64ArrayAttr(axesList);
  Value batchMean = n.make<ReduceMeanOp>(x, axes, n.b.getBoolAttr(true));
  Value centered = n.make<SubOp>(x, batchMean);
  Value batchVar = n.make<ReduceMeanOp>(n.make<MulOp>(centered, centered), axes,
                                        n.b.getBoolAttr(true));
  Value inv = n.make<ReciprocalOp>(
      n.make<SqrtOp>(n.make<AddOp>(batchVar, n.scalarLike(x, n.getFloat("epsilon", 1e-5f)))));
  Value y = n.make<MulOp>(n.make<MulOp>(centered, inv), perChannel(n, scale, rank));
  out.push_back(n.make<AddOp>(y, perChannel(n, bias, rank)));
  float momentum = n.getFloat("momentum", 0.9f);
  auto running = [&](Value old, Value batch) {
    Value flat = n.make<ReshapeOp>(batch, n.i64Tensor({-1}), n.b.getBoolAttr(false));
    return n.make<AddOp>(n.make<MulOp>(old, n.scalarLike(old, momentum)),
                         n.make<MulOp>(flat, n.scalarLike(old, 1.0 - momentum)));
  };
  out.push_back(running(mean, batchMean));
  out.push_back(running(var, batchVar));
  return failure(n.failed());
}

LogicalResult batchNorm(NodeImporter &n, Outs &out) {
  Value x = n.required(0), scale = n.required(1), bias = n.required(2),
        mean = n.required(3), var = n.required(4);
  auto rank = n.rankOf(x);
  if (!rank)
    return failure();
  if (n.getInt("training_mode", 0))
    return batchNormTraining(n, x, scale, bias, mean, var, *rank, out);
  // Before opset 7, is_test = 0 (the default) with the statistics outputs
  // asked for is training; with only Y asked for, every exporter meant
  // inference (PyTorch writes is_test = 1, Caffe2 converters left it out).
  if (n.opset < 7 && !n.getInt("is_test", 0) && n.node.output_size() > 1)
    return n.error("BatchNormalization in training mode (is_test = 0 with statistics outputs) "
                   "is not supported");
  if (*rank < 2)
    return n.error("BatchNormalization needs rank >= 2");
  Value eps = n.scalarLike(var, n.getFloat("epsilon", 1e-5f));
  // y = x * f + (bias - mean * f) with f = scale / sqrt(var + eps): f and the
  // shift fold to constants for inference models.
  Value f = n.make<DivOp>(scale, n.make<SqrtOp>(n.make<AddOp>(var, eps)));
  Value shift = n.make<SubOp>(bias, n.make<MulOp>(mean, f));
  // spatial = 0 (opsets 1-8): one statistic per activation, shaped like
  // x's dims after the batch, which broadcast as they are.
  if (*rank > 2 && (n.opset >= 9 || n.getInt("spatial", 1) != 0)) {
    f = perChannel(n, f, *rank);
    shift = perChannel(n, shift, *rank);
  }
  out.push_back(n.make<AddOp>(n.make<MulOp>(x, f), shift));
  return success();
}

struct Normalized {
  Value y, mean, invStdDev;
};

/// (x - mean(x)) / sqrt(var(x) + eps) over `axes`, with the statistics.
Normalized normalize(NodeImporter &n, Value x, ArrayRef<int64_t> axesList, float epsilon) {
  auto axes = n.b.getDenseI64ArrayAttr(axesList);
  auto keep = n.b.getBoolAttr(true);
  Value mean = n.make<ReduceMeanOp>(x, axes, keep);
  Value centered = n.make<SubOp>(x, mean);
  Value var = n.make<ReduceMeanOp>(n.make<MulOp>(centered, centered), axes, keep);
  Value inv = n.make<ReciprocalOp>(n.make<SqrtOp>(n.make<AddOp>(var, n.scalarLike(x, epsilon))));
  return {n.make<MulOp>(centered, inv), mean, inv};
}

LogicalResult instanceNorm(NodeImporter &n, Outs &out) {
  Value x = n.required(0), scale = n.required(1), bias = n.required(2);
  auto rank = n.rankOf(x);
  if (!rank)
    return failure();
  Value y = normalize(n, x, spatialAxes(*rank), n.getFloat("epsilon", 1e-5f)).y;
  y = n.make<MulOp>(y, perChannel(n, scale, *rank));
  out.push_back(n.make<AddOp>(y, perChannel(n, bias, *rank)));
  return success();
}

/// Local response normalization across channels: the window sum of squares
/// is a sum of `size` channel-shifted slices of the zero-padded squares.
LogicalResult lrn(NodeImporter &n, Outs &out) {
  Value x = n.required(0);
  auto t = NodeImporter::rankedType(x);
  if (!t || !t.hasStaticShape() || t.getRank() < 3)
    return n.error("LRN needs an input of static shape and rank >= 3");
  int64_t size = n.getInt("size", 0), rank = t.getRank(), C = t.getDimSize(1);
  if (size <= 0)
    return n.error("LRN size must be positive");
  double alpha = n.getFloat("alpha", 1e-4f), beta = n.getFloat("beta", 0.75f),
         bias = n.getFloat("bias", 1.0f);
  SmallVector<int64_t> pads(2 * rank, 0);
  pads[1] = (size - 1) / 2;
  pads[rank + 1] = size - 1 - (size - 1) / 2;
  Value sq = n.make<MulOp>(x, x);
  Value padded = n.make<PadOp>(sq, n.i64Tensor(pads), n.scalarLike(x, 0),
                               n.b.getStringAttr("constant"));
  Value sum;
  for (int64_t j = 0; j < size; ++j) {
    Value slice = n.make<SliceOp>(padded, n.i64Tensor({j}), n.i64Tensor({j + C}),
                                  n.i64Tensor({1}), n.i64Tensor({1}));
    sum = sum ? n.make<AddOp>(sum, slice) : slice;
  }
  Value scaled = n.make<AddOp>(n.make<MulOp>(sum, n.scalarLike(x, alpha / size)),
                               n.scalarLike(x, bias));
  out.push_back(n.make<DivOp>(x, n.make<PowOp>(scaled, n.scalarLike(x, beta))));
  return success();
}

/// (x - mean) / (sqrt(E[x^2] - mean^2) + 1e-9), as ONNX's function body.
LogicalResult meanVarianceNorm(NodeImporter &n, Outs &out) {
  Value x = n.required(0);
  SmallVector<int64_t> axes = n.getInts("axes") ? *n.getInts("axes") : SmallVector<int64_t>{0, 2, 3};
  auto rank = n.rankOf(x);
  if (!rank)
    return failure();
  for (int64_t &a : axes) {
    auto normalized = n.normalizeAxis(a, *rank);
    if (!normalized)
      return failure();
    a = *normalized;
  }
  llvm::sort(axes);
  auto axesAttr = n.b.getDenseI64ArrayAttr(axes);
  auto keep = n.b.getBoolAttr(true);
  Value mean = n.make<ReduceMeanOp>(x, axesAttr, keep);
  Value meanSq = n.make<ReduceMeanOp>(n.make<MulOp>(x, x), axesAttr, keep);
  Value var = n.make<SubOp>(meanSq, n.make<MulOp>(mean, mean));
  Value std = n.make<AddOp>(n.make<SqrtOp>(var), n.scalarLike(x, 1e-9));
  out.push_back(n.make<DivOp>(n.make<SubOp>(x, mean), std));
  return success();
}

LogicalResult layerNorm(NodeImporter &n, Outs &out) {
  Value x = n.required(0), scale = n.required(1);
  auto rank = n.rankOf(x);
  if (!rank)
    return failure();
  auto axis = n.normalizeAxis(n.getInt("axis", -1), *rank);
  if (!axis)
    return failure();
  Normalized norm = normalize(n, x, spatialAxes(*rank, *axis), n.getFloat("epsilon", 1e-5f));
  Value y = n.make<MulOp>(norm.y, scale);
  if (Value bias = n.input(2))
    y = n.make<AddOp>(y, bias);
  out.push_back(y);
  out.push_back(norm.mean);
  out.push_back(norm.invStdDev);
  return success();
}

} // namespace

Value buildSoftmax(NodeImporter &n, Value x, ArrayRef<int64_t> axesList, bool log) {
  auto axes = n.b.getDenseI64ArrayAttr(axesList);
  auto keep = n.b.getBoolAttr(true);
  Value shifted = n.make<SubOp>(x, n.make<ReduceMaxOp>(x, axes, keep));
  Value e = n.make<ExpOp>(shifted);
  Value sum = n.make<ReduceSumOp>(e, axes, keep);
  return log ? n.make<SubOp>(shifted, n.make<LogOp>(sum)) : n.make<DivOp>(e, sum);
}

void addNNRules(std::vector<ImportRule> &r) {
  constexpr int64_t M = kMaxSupportedOpset;
  r.insert(r.end(), {
      {"Conv", 1, M, conv},
      {"ConvTranspose", 1, M, convTranspose},
      {"MaxPool", 1, M, pool<true>},
      {"MaxUnpool", 9, M, maxUnpool},
      {"AveragePool", 1, M, pool<false>},
      {"GlobalAveragePool", 1, M, globalPool<ReduceMeanOp>},
      {"GlobalMaxPool", 1, M, globalPool<ReduceMaxOp>},
      {"LpPool", 1, M, lpPool},
      {"GlobalLpPool", 1, M, globalLpPool},
      {"LpNormalization", 1, M, lpNormalization},
      {"MatMul", 1, M, matmul},
      {"Gemm", 1, M, gemm}, // opsets 1-6: `broadcast` is a case of broadcasting
      {"Softmax", 1, M, softmax<false>},
      {"LogSoftmax", 1, M, softmax<true>},
      {"Hardmax", 1, M, hardmax},
      {"BatchNormalization", 1, M, batchNorm},
      {"InstanceNormalization", 1, M, instanceNorm},
      {"LayerNormalization", 17, M, layerNorm},
      {"LRN", 1, M, lrn},
      {"MeanVarianceNormalization", 9, M, meanVarianceNorm},
  });
}

} // namespace kiln
