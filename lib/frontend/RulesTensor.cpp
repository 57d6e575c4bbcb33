// Import rules for data-movement and shape operators.
#include "NodeImporter.h"

using namespace mlir;

namespace kiln {
namespace {

using Outs = SmallVectorImpl<Value>;

LogicalResult constant(NodeImporter &n, Outs &out) {
  MLIRContext *ctx = n.b.getContext();
  if (const auto *a = n.attr("value")) {
    std::string err;
    auto attr = tensorToAttr(ctx, a->t(), err);
    if (failed(attr))
      return n.error(err);
    out.push_back(n.constant(*attr));
    return success();
  }
  if (const auto *a = n.attr("value_float")) {
    out.push_back(n.constant(DenseElementsAttr::get(
        RankedTensorType::get({}, n.b.getF32Type()), a->f())));
    return success();
  }
  if (const auto *a = n.attr("value_floats")) {
    SmallVector<float> v(a->floats().begin(), a->floats().end());
    out.push_back(n.constant(DenseElementsAttr::get(
        RankedTensorType::get({(int64_t)v.size()}, n.b.getF32Type()), ArrayRef<float>(v))));
    return success();
  }
  if (const auto *a = n.attr("value_int")) {
    out.push_back(n.i64Scalar(a->i()));
    return success();
  }
  if (const auto *a = n.attr("value_ints")) {
    out.push_back(n.i64Tensor(SmallVector<int64_t>(a->ints().begin(), a->ints().end())));
    return success();
  }
  return n.error("Constant without a supported value attribute (sparse and string "
                 "constants are not supported)");
}

LogicalResult reshape(NodeImporter &n, Outs &out) {
  if (n.opset < 5) { // the shape was an attribute
    auto shape = n.getInts("shape");
    if (!shape)
      return n.error("Reshape needs a 'shape' attribute before opset 5");
    out.push_back(n.make<ReshapeOp>(n.required(0), n.i64Tensor(*shape), n.b.getBoolAttr(false)));
    return success();
  }
  out.push_back(n.make<ReshapeOp>(n.required(0), n.required(1),
                                  n.b.getBoolAttr(n.getInt("allowzero", 0) != 0)));
  return success();
}

LogicalResult flatten(NodeImporter &n, Outs &out) {
  out.push_back(n.make<FlattenOp>(n.required(0), n.b.getI64IntegerAttr(n.getInt("axis", 1))));
  return success();
}

LogicalResult squeeze(NodeImporter &n, Outs &out) {
  auto axes = axesFrom(n, 13, 1);
  if (!axes)
    return failure();
  out.push_back(n.make<SqueezeOp>(n.required(0), n.b.getDenseI64ArrayAttr(*axes)));
  return success();
}

LogicalResult unsqueeze(NodeImporter &n, Outs &out) {
  auto axes = axesFrom(n, 13, 1);
  if (!axes)
    return failure();
  out.push_back(n.make<UnsqueezeOp>(n.required(0), n.b.getDenseI64ArrayAttr(*axes)));
  return success();
}

LogicalResult transpose(NodeImporter &n, Outs &out) {
  Value x = n.required(0);
  auto rank = n.rankOf(x);
  if (!rank)
    return failure();
  SmallVector<int64_t> perm;
  if (auto p = n.getInts("perm"))
    perm = *p;
  else
    for (int64_t i = *rank - 1; i >= 0; --i)
      perm.push_back(i);
  out.push_back(n.make<TransposeOp>(x, n.b.getDenseI64ArrayAttr(perm)));
  return success();
}

LogicalResult concat(NodeImporter &n, Outs &out) {
  SmallVector<Value> ins;
  for (size_t i = 0; i < n.numInputs(); ++i)
    ins.push_back(n.required(i));
  if (n.failed())
    return failure();
  // Before opset 4 the axis was optional, with 1 as its default.
  if (n.opset >= 4 && !n.attr("axis"))
    return n.error("Concat needs an 'axis' attribute");
  out.push_back(n.make<ConcatOp>(ins, n.b.getI64IntegerAttr(n.getInt("axis", 1))));
  return success();
}

LogicalResult slice(NodeImporter &n, Outs &out) {
  Value x = n.required(0);
  auto rank = n.rankOf(x);
  if (!rank)
    return failure();
  Value starts, ends, axes, steps;
  size_t count;
  if (n.opset < 10) {
    auto s = n.getInts("starts"), e = n.getInts("ends");
    if (!s || !e)
      return n.error("Slice needs starts and ends");
    auto a = n.getInts("axes");
    SmallVector<int64_t> ax;
    if (a)
      ax = *a;
    else
      for (size_t i = 0; i < s->size(); ++i)
        ax.push_back(i);
    starts = n.i64Tensor(*s);
    ends = n.i64Tensor(*e);
    axes = n.i64Tensor(ax);
    steps = n.i64Tensor(SmallVector<int64_t>(s->size(), 1));
  } else {
    starts = n.required(1);
    ends = n.required(2);
    auto st = NodeImporter::rankedType(starts);
    if (!st || st.getRank() != 1 || st.isDynamicDim(0))
      return n.error("Slice starts must be a 1-D tensor of known length");
    count = st.getDimSize(0);
    if (n.hasInput(3)) {
      axes = n.input(3);
    } else {
      SmallVector<int64_t> ax;
      for (size_t i = 0; i < count; ++i)
        ax.push_back(i);
      axes = n.i64Tensor(ax);
    }
    steps = n.hasInput(4) ? n.input(4) : n.i64Tensor(SmallVector<int64_t>(count, 1));
    // Index tensors may be i32; kiln.slice takes i64.
    auto toI64 = [&](Value v) {
      if (NodeImporter::elementType(v).isInteger(64))
        return v;
      return n.make<CastOp>(v, TypeAttr::get(n.b.getI64Type()));
    };
    starts = toI64(starts);
    ends = toI64(ends);
    axes = toI64(axes);
    steps = toI64(steps);
  }
  out.push_back(n.make<SliceOp>(x, starts, ends, axes, steps));
  return success();
}

LogicalResult gather(NodeImporter &n, Outs &out) {
  out.push_back(n.make<GatherOp>(n.required(0), n.required(1),
                                 n.b.getI64IntegerAttr(n.getInt("axis", 0))));
  return success();
}

LogicalResult gatherElements(NodeImporter &n, Outs &out) {
  out.push_back(n.make<GatherElementsOp>(n.required(0), n.required(1),
                                         n.b.getI64IntegerAttr(n.getInt("axis", 0))));
  return success();
}

LogicalResult gatherND(NodeImporter &n, Outs &out) {
  out.push_back(n.make<GatherNDOp>(n.required(0), n.required(1),
                                   n.b.getI64IntegerAttr(n.getInt("batch_dims", 0))));
  return success();
}

LogicalResult scatterElements(NodeImporter &n, Outs &out) {
  out.push_back(n.make<ScatterElementsOp>(n.required(0), n.required(1), n.required(2),
                                          n.b.getI64IntegerAttr(n.getInt("axis", 0)),
                                          n.b.getStringAttr(n.getString("reduction", "none"))));
  return success();
}

LogicalResult scatterND(NodeImporter &n, Outs &out) {
  out.push_back(n.make<ScatterNDOp>(n.required(0), n.required(1), n.required(2),
                                    n.b.getStringAttr(n.getString("reduction", "none"))));
  return success();
}

LogicalResult expand(NodeImporter &n, Outs &out) {
  out.push_back(n.make<ExpandOp>(n.required(0), n.required(1)));
  return success();
}

LogicalResult tile(NodeImporter &n, Outs &out) {
  if (n.opset < 6) {
    // Tile-1: one axis (input 2) repeated `tiles` (input 1) times.
    Value x = n.required(0);
    auto rank = n.rankOf(x);
    auto tiles = n.constInts(1), axis = n.constInts(2);
    if (!rank)
      return failure();
    if (!tiles || tiles->size() != 1 || !axis || axis->size() != 1)
      return n.error("Tile before opset 6 needs constant scalar 'tiles' and 'axis' inputs");
    int64_t a = (*axis)[0] < 0 ? (*axis)[0] + *rank : (*axis)[0];
    if (a < 0 || a >= *rank)
      return n.error("Tile axis " + Twine((*axis)[0]) + " is out of range for rank " +
                     Twine(*rank));
    SmallVector<int64_t> repeats(*rank, 1);
    repeats[a] = (*tiles)[0];
    out.push_back(n.make<TileOp>(x, n.i64Tensor(repeats)));
    return success();
  }
  out.push_back(n.make<TileOp>(n.required(0), n.required(1)));
  return success();
}

LogicalResult pad(NodeImporter &n, Outs &out) {
  Value x = n.required(0);
  if (n.failed())
    return failure();
  std::string mode = n.getString("mode", "constant");
  Value pads, value;
  if (n.opset < 11) {
    // Pad-1 called them "paddings", in the same order.
    auto p = n.getInts(n.opset < 2 ? "paddings" : "pads");
    if (!p)
      return n.error(n.opset < 2 ? "Pad needs paddings" : "Pad needs pads");
    pads = n.i64Tensor(*p);
    value = n.scalarLike(x, n.getFloat("value", 0.0f));
  } else {
    pads = n.required(1);
    value = n.hasInput(2) ? n.input(2) : n.scalarLike(x, 0.0);
    if (value && NodeImporter::rankedType(value) &&
        NodeImporter::rankedType(value).getRank() == 1)
      value = n.make<ReshapeOp>(value, n.i64Tensor({}), n.b.getBoolAttr(false));
  }
  out.push_back(n.make<PadOp>(x, pads, value, n.b.getStringAttr(mode)));
  return success();
}

LogicalResult shape(NodeImporter &n, Outs &out) {
  int64_t start = n.getInt("start", 0);
  int64_t end = n.getInt("end", std::numeric_limits<int64_t>::max());
  out.push_back(n.make<ShapeOp>(n.required(0), n.b.getI64IntegerAttr(start),
                                n.b.getI64IntegerAttr(end)));
  return success();
}

LogicalResult size(NodeImporter &n, Outs &out) {
  Value x = n.required(0);
  auto t = NodeImporter::rankedType(x);
  if (!t || !t.hasStaticShape())
    return n.error("Size needs an input of static shape");
  out.push_back(n.i64Scalar(t.getNumElements()));
  return success();
}

LogicalResult constantOfShape(NodeImporter &n, Outs &out) {
  ElementsAttr value;
  if (const auto *a = n.attr("value")) {
    std::string err;
    auto attr = tensorToAttr(n.b.getContext(), a->t(), err);
    if (failed(attr))
      return n.error(err);
    value = *attr;
  } else {
    value = DenseElementsAttr::get(RankedTensorType::get({1}, n.b.getF32Type()), 0.0f);
  }
  out.push_back(n.make<ConstantOfShapeOp>(n.required(0), value));
  return success();
}

LogicalResult range(NodeImporter &n, Outs &out) {
  out.push_back(n.make<RangeOp>(n.required(0), n.required(1), n.required(2)));
  return success();
}

LogicalResult split(NodeImporter &n, Outs &out) {
  Value x = n.required(0);
  auto t = NodeImporter::rankedType(x);
  if (!t)
    return n.error("Split needs an input of known rank");
  auto normalized = n.normalizeAxis(n.getInt("axis", 0), t.getRank(), "Split axis");
  if (!normalized)
    return failure();
  int64_t axis = *normalized;
  if (t.isDynamicDim(axis))
    return n.error("Split along a dimension of unknown size is not supported");
  int64_t dim = t.getDimSize(axis), parts = n.node.output_size();
  SmallVector<int64_t> sizes;
  if ((n.opset >= 13 || n.opset == 1) && n.hasInput(1)) { // Split-1 had both forms
    auto s = n.constInts(1);
    if (!s)
      return n.error("Split sizes must be a constant");
    sizes = *s;
  } else if (auto s = n.getInts("split")) {
    sizes = *s;
  } else {
    if (parts <= 0 || dim % parts != 0)
      return n.error("Split of " + Twine(dim) + " into " + Twine(parts) + " equal parts");
    sizes.assign(parts, dim / parts);
  }
  int64_t start = 0;
  for (int64_t s : sizes) {
    out.push_back(n.make<SliceOp>(x, n.i64Tensor({start}), n.i64Tensor({start + s}),
                                  n.i64Tensor({axis}), n.i64Tensor({1})));
    start += s;
  }
  return success();
}

/// DepthToSpace / SpaceToDepth as reshape-transpose-reshape (static shapes).
LogicalResult depthToSpace(NodeImporter &n, Outs &out) {
  Value x = n.required(0);
  auto t = NodeImporter::rankedType(x);
  if (!t || t.getRank() != 4 || !t.hasStaticShape())
    return n.error("DepthToSpace needs a 4-D input of static shape");
  int64_t bs = n.getInt("blocksize", 0);
  int64_t N = t.getDimSize(0), C = t.getDimSize(1), H = t.getDimSize(2), W = t.getDimSize(3);
  // (bs > C first: bs * bs of a huge blocksize overflows.)
  if (bs <= 0 || bs > C || C % (bs * bs))
    return n.error("DepthToSpace channels are not divisible by blocksize^2");
  bool crd = n.getString("mode", "DCR") == "CRD";
  auto noZero = n.b.getBoolAttr(false);
  SmallVector<int64_t> shape1 = crd ? SmallVector<int64_t>{N, C / (bs * bs), bs, bs, H, W}
                                    : SmallVector<int64_t>{N, bs, bs, C / (bs * bs), H, W};
  SmallVector<int64_t> perm = crd ? SmallVector<int64_t>{0, 1, 4, 2, 5, 3}
                                  : SmallVector<int64_t>{0, 3, 4, 1, 5, 2};
  Value r = n.make<ReshapeOp>(x, n.i64Tensor(shape1), noZero);
  r = n.make<TransposeOp>(r, n.b.getDenseI64ArrayAttr(perm));
  out.push_back(n.make<ReshapeOp>(r, n.i64Tensor({N, C / (bs * bs), H * bs, W * bs}), noZero));
  return success();
}

LogicalResult spaceToDepth(NodeImporter &n, Outs &out) {
  Value x = n.required(0);
  auto t = NodeImporter::rankedType(x);
  if (!t || t.getRank() != 4 || !t.hasStaticShape())
    return n.error("SpaceToDepth needs a 4-D input of static shape");
  int64_t bs = n.getInt("blocksize", 0);
  int64_t N = t.getDimSize(0), C = t.getDimSize(1), H = t.getDimSize(2), W = t.getDimSize(3);
  if (bs <= 0 || H % bs || W % bs)
    return n.error("SpaceToDepth spatial dims are not divisible by blocksize");
  auto noZero = n.b.getBoolAttr(false);
  Value r = n.make<ReshapeOp>(x, n.i64Tensor({N, C, H / bs, bs, W / bs, bs}), noZero);
  r = n.make<TransposeOp>(r, n.b.getDenseI64ArrayAttr({0, 3, 5, 1, 2, 4}));
  out.push_back(n.make<ReshapeOp>(r, n.i64Tensor({N, C * bs * bs, H / bs, W / bs}), noZero));
  return success();
}

/// The node's `seed` attribute, or one derived from its first output's name
/// (ONNX leaves an unseeded generator's seed to the implementation; this
/// one is repeatable).
int64_t seedOf(NodeImporter &n) {
  if (n.attr("seed"))
    return NodeImporter::saturatingInt64(n.getFloat("seed", 0));
  return (int64_t)llvm::hash_value(n.node.output_size() ? n.node.output(0) : n.node.name());
}

/// Uniform numbers in [low, high) of element type `elt` shaped like `like`,
/// from generator stream `seed`.
Value uniform(NodeImporter &n, Value like, Type elt, double low, double high, int64_t seed) {
  return n.make<RandomUniformLikeOp>(like, TypeAttr::get(elt), n.b.getF64FloatAttr(low),
                                     n.b.getF64FloatAttr(high), n.b.getI64IntegerAttr(seed));
}

Type dtypeAttr(NodeImporter &n, Value input) {
  if (!n.attr("dtype"))
    return NodeImporter::elementType(input);
  return onnxElementType(n.b.getContext(), (int32_t)n.getInt("dtype", 1));
}

LogicalResult randomUniformLike(NodeImporter &n, Outs &out) {
  Value x = n.required(0);
  if (!x)
    return failure();
  Type elt = dtypeAttr(n, x);
  if (!isa_and_present<FloatType>(elt))
    return n.error("RandomUniformLike needs a floating-point dtype");
  out.push_back(uniform(n, x, elt, n.getFloat("low", 0.0f), n.getFloat("high", 1.0f), seedOf(n)));
  return failure(n.failed());
}

/// Normal numbers by Box-Muller from two independent uniform streams:
/// mean + scale * sqrt(-2 ln(1 - u1)) * cos(2 pi u2) (1 - u1 is in (0, 1]).
Value normal(NodeImporter &n, Value like, Type elt, double mean, double scale, int64_t seed) {
  Value u1 = uniform(n, like, elt, 0.0, 1.0, seed);
  Value u2 = uniform(n, like, elt, 0.0, 1.0, seed ^ 0x5DEECE66DLL);
  Value radius = n.make<SqrtOp>(n.make<MulOp>(
      n.scalarLike(u1, -2.0), n.make<LogOp>(n.make<SubOp>(n.scalarLike(u1, 1.0), u1))));
  Value z = n.make<MulOp>(radius, n.make<CosOp>(n.make<MulOp>(u2, n.scalarLike(u2, 2 * M_PI))));
  return n.make<AddOp>(n.make<MulOp>(z, n.scalarLike(z, scale)), n.scalarLike(z, mean));
}

/// RandomUniform / RandomNormal: like the *Like forms, shaped by `shape`.
template <bool isNormal>
LogicalResult randomOfShape(NodeImporter &n, Outs &out) {
  auto shape = n.getInts("shape");
  if (!shape)
    return n.error("needs the attribute shape");
  int64_t count = 1;
  for (int64_t d : *shape) {
    if (d < 0 || (d > 0 && count > (int64_t(1) << 40) / d))
      return n.error("shape has a negative or huge dimension");
    count *= d;
  }
  Type elt = onnxElementType(n.b.getContext(), (int32_t)n.getInt("dtype", 1));
  auto ft = dyn_cast_if_present<FloatType>(elt);
  if (!ft)
    return n.error("needs a floating-point dtype");
  // A splat constant costs nothing and carries the shape.
  Value like = n.constant(DenseElementsAttr::get(RankedTensorType::get(*shape, ft),
                                                 FloatAttr::get(ft, 0.0).getValue()));
  out.push_back(isNormal ? normal(n, like, ft, n.getFloat("mean", 0), n.getFloat("scale", 1),
                                  seedOf(n))
                         : uniform(n, like, ft, n.getFloat("low", 0), n.getFloat("high", 1),
                                   seedOf(n)));
  return failure(n.failed());
}

LogicalResult randomNormalLike(NodeImporter &n, Outs &out) {
  Value x = n.required(0);
  if (!x)
    return failure();
  Type elt = dtypeAttr(n, x);
  if (!isa_and_present<FloatType>(elt))
    return n.error("RandomNormalLike needs a floating-point dtype");
  out.push_back(normal(n, x, elt, n.getFloat("mean", 0), n.getFloat("scale", 1), seedOf(n)));
  return failure(n.failed());
}

/// 1 with probability p (the input), else 0: uniform u < p.
LogicalResult bernoulli(NodeImporter &n, Outs &out) {
  Value p = n.required(0);
  if (!p)
    return failure();
  Type elt = dtypeAttr(n, p);
  if (!elt)
    return n.error("unsupported dtype " + Twine(n.getInt("dtype", 0)));
  Value u = uniform(n, p, NodeImporter::elementType(p), 0.0, 1.0, seedOf(n));
  out.push_back(n.make<CastOp>(n.make<LessOp>(u, p), TypeAttr::get(elt)));
  return failure(n.failed());
}

/// Multinomial: `sample_size` draws per row from softmax(input) by inverse
/// transform: with the unnormalised cumulative weights c of exp(x - max),
/// a draw u in [0, 1) picks the number of c_i <= u * c_last (a class of
/// weight 0 is never picked).
LogicalResult multinomial(NodeImporter &n, Outs &out) {
  Value x = n.required(0);
  auto t = NodeImporter::rankedType(x);
  if (!t || t.getRank() != 2 || !t.hasStaticShape())
    return n.error("Multinomial needs an input [batch, classes] of static shape");
  int64_t batch = t.getDimSize(0), classes = t.getDimSize(1), samples = n.getInt("sample_size", 1);
  if (samples < 1 || classes < 1)
    return n.error("Multinomial needs at least one class and sample_size >= 1");
  Type elt = t.getElementType();
  Type dtype = onnxElementType(n.b.getContext(), (int32_t)n.getInt("dtype", 6));
  if (!dtype || !(dtype.isInteger(32) || dtype.isInteger(64)))
    return n.error("Multinomial's dtype must be int32 or int64");
  Value weights = n.make<ExpOp>(n.make<SubOp>(
      x, n.make<ReduceMaxOp>(x, n.b.getDenseI64ArrayAttr({1}), n.b.getBoolAttr(true))));
  SmallVector<Attribute> upper;
  for (int64_t i = 0; i < classes; ++i)
    for (int64_t j = 0; j < classes; ++j)
      upper.push_back(FloatAttr::get(elt, i <= j ? 1.0 : 0.0));
  Value cumulative = n.make<MatMulOp>(
      weights, n.constant(DenseElementsAttr::get(RankedTensorType::get({classes, classes}, elt),
                                                 upper)));
  Value total = n.make<SliceOp>(cumulative, n.i64Tensor({classes - 1}), n.i64Tensor({classes}),
                                n.i64Tensor({1}), n.i64Tensor({1}));
  Value shape = n.constant(DenseElementsAttr::get(
      RankedTensorType::get({batch, samples}, elt), FloatAttr::get(elt, 0.0)));
  Value target = n.make<MulOp>(uniform(n, shape, elt, 0.0, 1.0, seedOf(n)), total);
  Value below = n.make<LessEqualOp>(n.make<UnsqueezeOp>(cumulative, n.b.getDenseI64ArrayAttr({1})),
                                    n.make<UnsqueezeOp>(target, n.b.getDenseI64ArrayAttr({2})));
  Value index = n.make<ReduceSumOp>(n.make<CastOp>(below, TypeAttr::get(n.b.getI64Type())),
                                    n.b.getDenseI64ArrayAttr({2}), n.b.getBoolAttr(false));
  index = n.make<MinOp>(index, n.i64Tensor({classes - 1}));
  out.push_back(n.make<CastOp>(index, TypeAttr::get(dtype)));
  return failure(n.failed());
}

LogicalResult dropout(NodeImporter &n, Outs &out) {
  // Inference, or training with a zero ratio: the identity, and a mask
  // that keeps everything. Training with a ratio r keeps each element with
  // probability 1 - r, scaled by 1 / (1 - r).
  if (n.opset >= 12 && n.hasInput(2)) {
    auto training = getConstantBool(n.input(2));
    if (!training)
      return n.error("Dropout's training_mode must be a constant");
    std::optional<SmallVector<double>> ratio =
        n.hasInput(1) ? n.constFloats(1) : SmallVector<double>{0.5};
    if (*training && !(ratio && ratio->size() == 1 && (*ratio)[0] == 0.0)) {
      Value x = n.required(0);
      Value r = n.hasInput(1) ? n.input(1) : n.scalarLike(x, 0.5);
      if (!x)
        return failure();
      if (ratio && ((*ratio)[0] < 0 || (*ratio)[0] >= 1))
        return n.error("Dropout's ratio " + std::to_string((*ratio)[0]) + " is outside [0, 1)");
      Value u = uniform(n, x, NodeImporter::elementType(x), 0.0, 1.0, seedOf(n));
      Value keep = n.make<GreaterEqualOp>(u, r);
      Value scale = n.make<DivOp>(n.scalarLike(x, 1.0), n.make<SubOp>(n.scalarLike(x, 1.0), r));
      Value kept = n.make<CastOp>(keep, TypeAttr::get(NodeImporter::elementType(x)));
      out.push_back(n.make<MulOp>(n.make<MulOp>(x, kept), scale));
      out.push_back(keep);
      return failure(n.failed());
    }
  }
  Value x = n.required(0);
  out.push_back(x);
  if (n.node.output_size() > 1 && !n.node.output(1).empty()) {
    // The mask of an inference-mode dropout keeps everything.
    auto t = NodeImporter::rankedType(x);
    if (t && t.hasStaticShape()) {
      out.push_back(n.constant(DenseElementsAttr::get(t.clone(n.b.getI1Type()), true)));
    } else {
      // The shape is known only later (or at run time): all-true of x's shape.
      auto one = DenseElementsAttr::get(RankedTensorType::get({1}, n.b.getI1Type()), true);
      Value shape = n.make<ShapeOp>(x, n.b.getI64IntegerAttr(0),
                                    n.b.getI64IntegerAttr(std::numeric_limits<int64_t>::max()));
      out.push_back(n.make<ConstantOfShapeOp>(shape, one));
    }
  }
  return success();
}

/// Reverses the first sequence_lens[b] entries along the time axis of each
/// batch entry b: a GatherElements with index t' = t < len ? len - 1 - t : t,
/// computed at run time from the lengths.
LogicalResult reverseSequence(NodeImporter &n, Outs &out) {
  Value x = n.required(0), lens = n.required(1);
  auto t = NodeImporter::rankedType(x);
  if (!t || !t.hasStaticShape() || t.getRank() < 2)
    return n.error("ReverseSequence needs an input of static shape and rank >= 2");
  int64_t timeAxis = n.getInt("time_axis", 0), batchAxis = n.getInt("batch_axis", 1);
  if (!((timeAxis == 0 && batchAxis == 1) || (timeAxis == 1 && batchAxis == 0)))
    return n.error("ReverseSequence needs time_axis and batch_axis to be 0 and 1 (got " +
                   Twine(timeAxis) + " and " + Twine(batchAxis) + ")");
  auto lt = NodeImporter::rankedType(lens);
  if (!lt || lt.getRank() != 1 ||
      (!lt.isDynamicDim(0) && lt.getDimSize(0) != t.getDimSize(batchAxis)))
    return n.error("ReverseSequence's sequence_lens must be a vector of the batch size " +
                   Twine(t.getDimSize(batchAxis)));
  int64_t rank = t.getRank();
  SmallVector<int64_t> lenShape(rank, 1);
  lenShape[batchAxis] = t.getDimSize(batchAxis);
  Value len = n.make<ReshapeOp>(n.make<CastOp>(lens, TypeAttr::get(n.b.getI64Type())),
                                n.i64Tensor(lenShape), n.b.getBoolAttr(false));
  // Lengths outside [0, T] (run-time values) must not index outside.
  len = n.make<MinOp>(n.make<MaxOp>(len, n.i64Tensor({0})), n.i64Tensor({t.getDimSize(timeAxis)}));
  Value pos = n.positionsAlong(rank, timeAxis, t.getDimSize(timeAxis));
  Value reversed = n.make<SubOp>(n.make<SubOp>(len, n.scalarLike(len, 1)), pos);
  Value index = n.make<SelectOp>(n.make<LessOp>(pos, len), reversed, pos);
  index = n.make<ExpandOp>(index, n.i64Tensor(t.getShape()));
  out.push_back(n.make<GatherElementsOp>(x, index, n.b.getI64IntegerAttr(timeAxis)));
  return failure(n.failed());
}

/// Keeps the upper (or lower) triangle of the last two dims, shifted by k.
LogicalResult trilu(NodeImporter &n, Outs &out) {
  Value x = n.required(0);
  auto t = NodeImporter::rankedType(x);
  if (!t || t.getRank() < 2 || t.isDynamicDim(t.getRank() - 1) || t.isDynamicDim(t.getRank() - 2))
    return n.error("Trilu needs an input whose last two dims are static");
  int64_t k = 0;
  if (n.hasInput(1)) {
    auto kv = n.constInts(1);
    if (!kv || kv->size() != 1)
      return n.error("Trilu's k must be a constant scalar");
    k = (*kv)[0];
  }
  bool upper = n.getInt("upper", 1) != 0;
  int64_t rows = t.getDimSize(t.getRank() - 2), cols = t.getDimSize(t.getRank() - 1);
  // The mask j - i >= k (or <= k) from row and column positions: the
  // constants grow with rows + cols, not rows * cols.
  Value diag = n.make<SubOp>(n.positionsAlong(2, 1, cols), n.positionsAlong(2, 0, rows));
  Value kk = n.i64Tensor({k});
  Value mask = upper ? n.make<GreaterEqualOp>(diag, kk) : n.make<LessEqualOp>(diag, kk);
  out.push_back(n.make<SelectOp>(mask, x, n.scalarLike(x, 0)));
  return success();
}

/// Cumulative sum as a product with a constant 0/1 matrix over the axis
/// (moved last): exact for integers, and L is small in practice.
LogicalResult cumsum(NodeImporter &n, Outs &out) {
  Value x = n.required(0);
  auto t = NodeImporter::rankedType(x);
  auto axisVals = n.constInts(1);
  if (!t || !axisVals || axisVals->size() != 1)
    return n.error("CumSum axis must be a constant (and the input of known rank)");
  int64_t rank = t.getRank(), axis = (*axisVals)[0];
  if (axis < 0)
    axis += rank;
  if (axis < 0 || axis >= rank || t.isDynamicDim(axis))
    return n.error("CumSum axis out of range or of unknown size");
  int64_t len = t.getDimSize(axis);
  bool exclusive = n.getInt("exclusive", 0), reverse = n.getInt("reverse", 0);
  Type elt = t.getElementType();
  auto matType = RankedTensorType::get({len, len}, elt);
  SmallVector<Attribute> entries;
  for (int64_t i = 0; i < len; ++i)
    for (int64_t j = 0; j < len; ++j) {
      bool contributes = reverse ? (exclusive ? i > j : i >= j) : (exclusive ? i < j : i <= j);
      entries.push_back(isa<FloatType>(elt) ? (Attribute)FloatAttr::get(elt, contributes)
                                            : (Attribute)IntegerAttr::get(elt, contributes));
    }
  Value tri = n.constant(DenseElementsAttr::get(matType, entries));
  SmallVector<int64_t> perm, inverse(rank);
  for (int64_t i = 0; i < rank; ++i)
    if (i != axis)
      perm.push_back(i);
  perm.push_back(axis);
  for (int64_t i = 0; i < rank; ++i)
    inverse[perm[i]] = i;
  Value moved = n.make<TransposeOp>(x, n.b.getDenseI64ArrayAttr(perm));
  Value summed = n.make<MatMulOp>(moved, tri);
  out.push_back(n.make<TransposeOp>(summed, n.b.getDenseI64ArrayAttr(inverse)));
  return success();
}

/// A constant: ones on diagonal k of a 2-D tensor shaped like the input.
LogicalResult eyeLike(NodeImporter &n, Outs &out) {
  Value x = n.required(0);
  auto t = NodeImporter::rankedType(x);
  if (!t || t.getRank() != 2 || !t.hasStaticShape())
    return n.error("EyeLike needs a 2-D input of static shape");
  Type elt = t.getElementType();
  if (n.attr("dtype")) {
    elt = onnxElementType(n.b.getContext(), n.getInt("dtype", 1));
    if (!elt)
      return n.error("unsupported EyeLike dtype");
  }
  int64_t k = n.getInt("k", 0), rows = t.getDimSize(0), cols = t.getDimSize(1);
  SmallVector<Attribute> values;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      bool one = j - i == k;
      values.push_back(isa<FloatType>(elt) ? (Attribute)FloatAttr::get(elt, one)
                                           : (Attribute)IntegerAttr::get(elt, one));
    }
  out.push_back(n.constant(DenseElementsAttr::get(t.clone(elt), values)));
  return success();
}

/// values[1] where the (wrapped) index equals the position along `axis`,
/// values[0] elsewhere.
LogicalResult oneHot(NodeImporter &n, Outs &out) {
  Value indices = n.required(0), values = n.required(2);
  auto depthVals = n.constInts(1);
  auto depthFloats = n.constFloats(1);
  if (!depthVals && depthFloats)
    depthVals = SmallVector<int64_t>{NodeImporter::saturatingInt64((*depthFloats)[0])};
  auto it = NodeImporter::rankedType(indices);
  if (!depthVals || depthVals->size() != 1 || !it)
    return n.error("OneHot depth must be a constant (and indices of known rank)");
  int64_t depth = (*depthVals)[0], rank = it.getRank() + 1;
  auto normalized = n.normalizeAxis(n.getInt("axis", -1), rank);
  if (!normalized)
    return failure();
  int64_t axis = *normalized;
  Value idx = indices;
  if (!NodeImporter::elementType(idx).isInteger(64))
    idx = n.make<CastOp>(idx, TypeAttr::get(n.b.getI64Type()));
  Value neg = n.make<LessOp>(idx, n.scalarLike(idx, 0));
  idx = n.make<SelectOp>(neg, n.make<AddOp>(idx, n.scalarLike(idx, depth)), idx);
  idx = n.make<UnsqueezeOp>(idx, n.b.getDenseI64ArrayAttr({axis}));
  Value positions = n.positionsAlong(rank, axis, depth);
  auto pick = [&](int64_t i) {
    return n.make<GatherOp>(values, n.i64Scalar(i), n.b.getI64IntegerAttr(0));
  };
  out.push_back(n.make<SelectOp>(n.make<EqualOp>(idx, positions), pick(1), pick(0)));
  return success();
}

} // namespace

void addTensorRules(std::vector<ImportRule> &r) {
  constexpr int64_t M = kMaxSupportedOpset;
  r.insert(r.end(), {
      {"Constant", 1, M, constant},
      {"Reshape", 1, M, reshape},
      {"Flatten", 1, M, flatten},
      {"Squeeze", 1, M, squeeze},
      {"Unsqueeze", 1, M, unsqueeze},
      {"Transpose", 1, M, transpose},
      {"Concat", 1, M, concat},
      {"Slice", 1, M, slice},
      {"Gather", 1, M, gather},
      {"GatherElements", 11, M, gatherElements},
      {"GatherND", 11, M, gatherND},
      // Scatter (deprecated in opset 11) is ScatterElements under another name.
      {"Scatter", 9, 10, scatterElements},
      {"ScatterElements", 11, M, scatterElements},
      {"ScatterND", 11, M, scatterND},
      {"Expand", 8, M, expand},
      {"Tile", 1, M, tile},
      {"Pad", 1, M, pad},
      {"Shape", 1, M, shape},
      {"Size", 1, M, size},
      {"ConstantOfShape", 9, M, constantOfShape},
      {"Range", 11, M, range},
      {"Split", 1, M, split},
      {"DepthToSpace", 1, M, depthToSpace},
      {"SpaceToDepth", 1, M, spaceToDepth},
      {"Dropout", 1, M, dropout},
      {"RandomUniformLike", 1, M, randomUniformLike},
      {"RandomNormalLike", 1, M, randomNormalLike},
      {"RandomUniform", 1, M, randomOfShape<false>},
      {"RandomNormal", 1, M, randomOfShape<true>},
      {"Bernoulli", 15, M, bernoulli},
      {"Trilu", 14, M, trilu},
      {"ReverseSequence", 10, M, reverseSequence},
      {"CumSum", 11, M, cumsum},
      {"Multinomial", 7, M, multinomial},
      {"EyeLike", 9, M, eyeLike},
      {"OneHot", 9, M, oneHot},
  });
}

} // namespace kiln
