// Result-type inference for the kiln ops. Each op's `inferReturnTypes` is the
// single source of truth for its shape rules: the importer builds ops through
// it, the verifier checks against it, and kiln-infer-shapes refines with it.
#include <cmath>
#include <cstdio>
#include <limits>
#include "kiln/IR/KilnDialect.h"
#include "kiln/IR/ShapeErrors.h"

#include "mlir/IR/Matchers.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"

using namespace mlir;
using namespace kiln;

static constexpr int64_t kDyn = ShapedType::kDynamic;

static RankedTensorType ranked(Value v) {
  return dyn_cast<RankedTensorType>(v.getType());
}

static Type elementTypeOf(Value v) {
  return cast<ShapedType>(v.getType()).getElementType();
}

static Type tensorOf(ArrayRef<int64_t> shape, Type elt) {
  return RankedTensorType::get(shape, elt);
}

/// Refusals reported as errors on this thread (shapeInferenceRefusals);
/// inference without a location (a builder's speculative call) reports
/// nothing and is not counted.
static thread_local uint64_t refusals = 0;

uint64_t kiln::shapeInferenceRefusals() { return refusals; }
void kiln::forgetShapeInferenceRefusals(uint64_t count) { refusals = count; }

static LogicalResult fail(std::optional<Location> loc, const Twine &msg) {
  if (loc)
    ++refusals;
  return emitOptionalError(loc, msg);
}

/// The most dimensions a result may get from the length of a shape operand
/// whose values are unknown (Reshape, Expand, ConstantOfShape). The length
/// comes from a declared type, which a model may set to anything: 10^9
/// would allocate gigabytes here. The runtime takes at most 16 dimensions.
constexpr int64_t kMaxInferredRank = 64;
static LogicalResult checkInferredRank(std::optional<Location> loc, int64_t rank) {
  if (rank > kMaxInferredRank)
    return fail(loc, "a shape operand of " + Twine(rank) + " values would make a tensor of " +
                         Twine(rank) + " dimensions (at most " + Twine(kMaxInferredRank) +
                         " are supported)");
  return success();
}

static bool isConstantDim(int64_t d) { return !ShapedType::isDynamic(d); }

std::optional<SmallVector<int64_t>> kiln::getConstantInts(Value v) {
  DenseIntElementsAttr attr;
  if (!v || !matchPattern(v, m_Constant(&attr)))
    return std::nullopt;
  // Each value as its type reads it: a uint8 200 is 200, a true is 1.
  Type elt = attr.getElementType();
  bool zeroExtend = elt.isUnsignedInteger() || elt.isInteger(1);
  SmallVector<int64_t> out;
  for (const APInt &i : attr.getValues<APInt>())
    out.push_back(zeroExtend ? (int64_t)i.getZExtValue() : i.getSExtValue());
  return out;
}

LogicalResult kiln::broadcastShapes(ArrayRef<int64_t> a, ArrayRef<int64_t> b,
                                    SmallVectorImpl<int64_t> &out) {
  size_t rank = std::max(a.size(), b.size());
  out.assign(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da == 1)
      out[i] = db;
    else if (db == 1)
      out[i] = da;
    else if (ShapedType::isDynamic(da))
      out[i] = db;
    else if (ShapedType::isDynamic(db) || da == db)
      out[i] = da;
    else
      return failure();
  }
  return success();
}

static LogicalResult broadcastAll(std::optional<Location> loc,
                                  ValueRange operands,
                                  std::optional<SmallVector<int64_t>> &shape) {
  SmallVector<int64_t> acc;
  for (Value v : operands) {
    auto t = ranked(v);
    if (!t) {
      shape.reset();
      return success();
    }
    SmallVector<int64_t> next;
    if (failed(broadcastShapes(acc, t.getShape(), next))) {
      std::string a, b;
      llvm::raw_string_ostream(a) << RankedTensorType::get(acc, t.getElementType());
      llvm::raw_string_ostream(b) << t;
      return fail(loc, "operands cannot be broadcast together: " + a + " and " + b);
    }
    acc = next;
  }
  shape = acc;
  return success();
}

static Type maybeRanked(const std::optional<SmallVector<int64_t>> &shape,
                        Type elt) {
  if (!shape)
    return UnrankedTensorType::get(elt);
  return tensorOf(*shape, elt);
}

bool kiln::detail::areCompatibleReturnTypes(TypeRange inferred,
                                            TypeRange actual) {
  if (inferred.size() != actual.size())
    return false;
  for (auto [a, b] : llvm::zip(inferred, actual)) {
    auto sa = dyn_cast<ShapedType>(a), sb = dyn_cast<ShapedType>(b);
    if (!sa || !sb || sa.getElementType() != sb.getElementType())
      return false;
    if (failed(verifyCompatibleShape(a, b)))
      return false;
  }
  return true;
}

LogicalResult kiln::detail::inferBroadcast(std::optional<Location> loc,
                                           ValueRange operands,
                                           bool resultIsBool,
                                           SmallVectorImpl<Type> &types) {
  Type elt = elementTypeOf(operands[0]);
  for (Value v : operands.drop_front())
    if (elementTypeOf(v) != elt)
      return fail(loc, "operand element types differ");
  std::optional<SmallVector<int64_t>> shape;
  if (failed(broadcastAll(loc, operands, shape)))
    return failure();
  Type resultElt = resultIsBool ? IntegerType::get(elt.getContext(), 1) : elt;
  types.push_back(maybeRanked(shape, resultElt));
  return success();
}

LogicalResult kiln::detail::inferReduce(std::optional<Location> loc,
                                        Value input, ArrayRef<int64_t> axes,
                                        bool keepdims,
                                        SmallVectorImpl<Type> &types) {
  Type elt = elementTypeOf(input);
  auto t = ranked(input);
  if (!t) {
    types.push_back(UnrankedTensorType::get(elt));
    return success();
  }
  SmallVector<int64_t> shape;
  for (int64_t i = 0; i < t.getRank(); ++i) {
    bool reduced = llvm::is_contained(axes, i);
    if (!reduced)
      shape.push_back(t.getDimSize(i));
    else if (keepdims)
      shape.push_back(1);
  }
  for (int64_t a : axes)
    if (a < 0 || a >= t.getRank())
      return fail(loc, "reduction axis " + Twine(a) + " out of range for rank " +
                           Twine(t.getRank()));
  types.push_back(tensorOf(shape, elt));
  return success();
}

LogicalResult kiln::refineResultTypes(Operation *op) {
  auto iface = dyn_cast<InferTypeOpInterface>(op);
  if (!iface)
    return success();
  SmallVector<Type> inferred;
  if (failed(iface.inferReturnTypes(op->getContext(), op->getLoc(),
                                    op->getOperands(), op->getRawDictionaryAttrs(),
                                    op->getPropertiesStorage(), op->getRegions(),
                                    inferred)))
    return failure();
  for (auto [result, type] : llvm::zip(op->getResults(), inferred)) {
    Type current = result.getType();
    if (current == type)
      continue;
    auto cur = dyn_cast<TensorType>(current);
    auto inf = cast<TensorType>(type);
    // A result built with a placeholder (importer) takes the inferred type.
    if (!cur || !cur.hasRank() || cur.getElementType() != inf.getElementType()) {
      if (cur && cur.hasRank() && cur.getElementType() != inf.getElementType())
        return op->emitOpError("inferred element type ")
               << inf.getElementType() << " differs from declared "
               << cur.getElementType();
      result.setType(type);
      continue;
    }
    if (!inf.hasRank())
      continue;
    if (failed(verifyCompatibleShape(cur, inf)))
      return op->emitOpError("inferred type ") << inf << " contradicts " << cur;
    SmallVector<int64_t> merged(cur.getShape());
    for (auto [m, d] : llvm::zip(merged, inf.getShape()))
      if (ShapedType::isDynamic(m))
        m = d;
    result.setType(RankedTensorType::get(merged, cur.getElementType()));
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Per-op rules for ops not covered by a TableGen class
//===----------------------------------------------------------------------===//

LogicalResult ConstantOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                           Adaptor a, SmallVectorImpl<Type> &types) {
  types.push_back(cast<TypedAttr>(a.getValue()).getType());
  return success();
}

LogicalResult SelectOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor a, SmallVectorImpl<Type> &types) {
  if (elementTypeOf(a.getLhs()) != elementTypeOf(a.getRhs()))
    return fail(loc, "select branches have different element types");
  std::optional<SmallVector<int64_t>> shape;
  if (failed(broadcastAll(loc, {a.getCondition(), a.getLhs(), a.getRhs()}, shape)))
    return failure();
  types.push_back(maybeRanked(shape, elementTypeOf(a.getLhs())));
  return success();
}

/// The input's shape with element type `to` (cast, random_uniform_like).
static LogicalResult inferShapeWithElementType(Value input, Type to,
                                               SmallVectorImpl<Type> &types) {
  if (auto t = ranked(input))
    types.push_back(t.clone(to));
  else
    types.push_back(UnrankedTensorType::get(to));
  return success();
}

LogicalResult CastOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                       Adaptor a, SmallVectorImpl<Type> &types) {
  return inferShapeWithElementType(a.getInput(), a.getTo(), types);
}

LogicalResult RandomUniformLikeOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                                   Adaptor a, SmallVectorImpl<Type> &types) {
  return inferShapeWithElementType(a.getInput(), a.getDtype(), types);
}

LogicalResult NonMaxSuppressionOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location>,
                                                   Adaptor a, SmallVectorImpl<Type> &types) {
  Type i64 = IntegerType::get(ctx, 64);
  auto bt = ranked(a.getBoxes()), st = ranked(a.getScores());
  if (!bt || !st || bt.getRank() != 3 || st.getRank() != 3 || bt.isDynamicDim(0) ||
      bt.isDynamicDim(1) || st.isDynamicDim(1)) {
    types.push_back(RankedTensorType::get({ShapedType::kDynamic}, i64));
    return success();
  }
  int64_t boxes = bt.getDimSize(1);
  int64_t perClass = std::max<int64_t>(
      0, std::min<int64_t>(a.getMaxOutputBoxesPerClass(), boxes));
  int64_t rows = bt.getDimSize(0) * st.getDimSize(1) * perClass;
  types.push_back(RankedTensorType::get({1 + 3 * rows + boxes}, i64));
  return success();
}

LogicalResult NonZeroOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location>, Adaptor a,
                                          SmallVectorImpl<Type> &types) {
  Type i64 = IntegerType::get(ctx, 64);
  auto t = ranked(a.getMask());
  types.push_back(RankedTensorType::get(
      {t && t.hasStaticShape() ? 1 + t.getRank() * t.getNumElements() : ShapedType::kDynamic},
      i64));
  return success();
}

LogicalResult TopKOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location>, Adaptor a,
                                       SmallVectorImpl<Type> &types) {
  Type i64 = IntegerType::get(ctx, 64);
  auto t = ranked(a.getInput());
  int64_t axis = a.getAxis();
  if (!t || !t.hasStaticShape() || axis < 0 || axis >= t.getRank()) {
    types.push_back(RankedTensorType::get({ShapedType::kDynamic}, i64));
    return success();
  }
  // The positions, [outer][capacity][inner], then a line's scratch.
  int64_t dim = t.getDimSize(axis);
  int64_t positions = dim == 0 ? 0 : t.getNumElements() / dim * a.getCapacity();
  types.push_back(RankedTensorType::get({positions + dim}, i64));
  return success();
}

LogicalResult DetOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> loc, Adaptor a,
                                      SmallVectorImpl<Type> &types) {
  Type f32 = Float32Type::get(ctx);
  auto t = ranked(a.getInput());
  if (!t) {
    types.push_back(UnrankedTensorType::get(f32));
    return success();
  }
  if (t.getRank() < 2)
    return fail(loc, "det needs matrices [..., n, n]");
  types.push_back(RankedTensorType::get(t.getShape().drop_back(2), f32));
  return success();
}

/// A convolution's result element type: its input's, except that an 8-bit
/// integer input (a quantized convolution) accumulates in i32.
static Type convResultElementType(Value input) {
  Type elt = elementTypeOf(input);
  if (elt.isInteger(8))
    return IntegerType::get(elt.getContext(), 32);
  return elt;
}

LogicalResult MatMulOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor a, SmallVectorImpl<Type> &types) {
  // 8-bit integer operands (a quantized product, u8/s8 x s8) accumulate in
  // i32, as an integer convolution's.
  Type elt = convResultElementType(a.getLhs());
  auto lt = ranked(a.getLhs()), rt = ranked(a.getRhs());
  if (!lt || !rt) {
    types.push_back(UnrankedTensorType::get(elt));
    return success();
  }
  if (lt.getRank() == 0 || rt.getRank() == 0)
    return fail(loc, "matmul operands must have rank >= 1");
  SmallVector<int64_t> l(lt.getShape()), r(rt.getShape());
  bool lhsVec = l.size() == 1, rhsVec = r.size() == 1;
  if (lhsVec)
    l.insert(l.begin(), 1);
  if (rhsVec)
    r.push_back(1);
  int64_t kl = l.back(), kr = r[r.size() - 2];
  if (isConstantDim(kl) && isConstantDim(kr) && kl != kr)
    return fail(loc, "matmul contraction sizes differ: " + Twine(kl) + " vs " + Twine(kr));
  SmallVector<int64_t> batch;
  if (failed(broadcastShapes(ArrayRef(l).drop_back(2), ArrayRef(r).drop_back(2), batch)))
    return fail(loc, "matmul batch dimensions cannot be broadcast");
  if (!lhsVec)
    batch.push_back(l[l.size() - 2]);
  if (!rhsVec)
    batch.push_back(r.back());
  types.push_back(tensorOf(batch, elt));
  return success();
}

// Output extent of a sliding window along spatial axis `axis`; shared by
// conv and pooling. A window larger than the padded input (or a kernel
// extent that is not positive, or sizes whose arithmetic overflows) is an
// error, as in ONNX's shape inference: C++ division truncates toward zero,
// so (in + pads - span) / stride + 1 would otherwise give 1 for a window
// one position too large, and a negative extent for a much larger one.
static LogicalResult windowOutput(std::optional<Location> loc, size_t axis, int64_t in,
                                  int64_t padSum, int64_t k, int64_t stride, int64_t dilation,
                                  SmallVectorImpl<int64_t> &shape) {
  if (ShapedType::isDynamic(in) || ShapedType::isDynamic(k)) {
    shape.push_back(kDyn);
    return success();
  }
  int64_t span, padded, rest;
  if (k <= 0)
    return fail(loc, "kernel extent " + Twine(k) + " along spatial axis " + Twine(axis) +
                         " is not positive");
  if (__builtin_mul_overflow(dilation, k - 1, &span) ||
      __builtin_add_overflow(span, 1, &span) || __builtin_add_overflow(in, padSum, &padded))
    return fail(loc, "window sizes along spatial axis " + Twine(axis) + " are out of range");
  if (__builtin_sub_overflow(padded, span, &rest) || rest < 0)
    return fail(loc, "the window (" + Twine(span) + ") is larger than the padded input (" +
                         Twine(padded) + ") along spatial axis " + Twine(axis));
  shape.push_back(rest / stride + 1);
  return success();
}

static LogicalResult checkSpatial(std::optional<Location> loc, size_t spatial,
                                  ArrayRef<int64_t> strides, ArrayRef<int64_t> pads,
                                  ArrayRef<int64_t> dilations) {
  if (strides.size() != spatial || pads.size() != 2 * spatial ||
      dilations.size() != spatial)
    return fail(loc, "strides/pads/dilations do not match " + Twine(spatial) +
                         " spatial dimensions");
  for (int64_t s : strides)
    if (s <= 0)
      return fail(loc, "strides must be positive");
  for (int64_t d : dilations)
    if (d <= 0)
      return fail(loc, "dilations must be positive");
  return success();
}

/// `channels` input channels split into `group` groups of the weight's
/// `weightChannels`.
static LogicalResult checkGroups(std::optional<Location> loc, int64_t group, int64_t channels,
                                 int64_t weightChannels) {
  if (group <= 0)
    return fail(loc, "group must be positive");
  if (isConstantDim(channels) && isConstantDim(weightChannels) &&
      channels != weightChannels * group)
    return fail(loc, "conv input has " + Twine(channels) + " channels but weight expects " +
                         Twine(weightChannels) + " x group " + Twine(group));
  return success();
}

/// The integer form of a convolution: an 8-bit input, i8 weights, an i32
/// bias and an input zero point within the input's range.
static LogicalResult verifyIntegerConv(Operation *op, Value input, Value weight, Value bias,
                                       std::optional<int64_t> zeroPoint) {
  Type in = elementTypeOf(input), w = elementTypeOf(weight);
  if (!in.isInteger(8)) {
    if (zeroPoint)
      return op->emitOpError("input_zero_point needs an 8-bit integer input");
    return success();
  }
  if (!w.isInteger(8) || w.isUnsignedInteger())
    return op->emitOpError("an 8-bit integer input needs i8 weights");
  if (bias && !elementTypeOf(bias).isInteger(32))
    return op->emitOpError("an 8-bit integer input needs an i32 bias");
  if (zeroPoint) {
    bool isUnsigned = in.isUnsignedInteger();
    int64_t lo = isUnsigned ? 0 : -128, hi = isUnsigned ? 255 : 127;
    if (*zeroPoint < lo || *zeroPoint > hi)
      return op->emitOpError("input_zero_point ")
             << *zeroPoint << " is outside the input type's range [" << lo << ", " << hi << "]";
  }
  return success();
}

LogicalResult ConvOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                       Adaptor a, SmallVectorImpl<Type> &types) {
  Type elt = convResultElementType(a.getInput());
  auto it = ranked(a.getInput()), wt = ranked(a.getWeight());
  if (!it || !wt) {
    types.push_back(UnrankedTensorType::get(elt));
    return success();
  }
  if (it.getRank() < 3 || it.getRank() != wt.getRank())
    return fail(loc, "conv input and weight must have the same rank >= 3");
  size_t spatial = it.getRank() - 2;
  if (failed(checkSpatial(loc, spatial, a.getStrides(), a.getPads(), a.getDilations())))
    return failure();
  if (failed(checkGroups(loc, a.getGroup(), it.getDimSize(1), wt.getDimSize(1))))
    return failure();
  SmallVector<int64_t> shape{it.getDimSize(0), wt.getDimSize(0)};
  for (size_t i = 0; i < spatial; ++i)
    if (failed(windowOutput(loc, i, it.getDimSize(2 + i),
                            a.getPads()[i] + a.getPads()[spatial + i], wt.getDimSize(2 + i),
                            a.getStrides()[i], a.getDilations()[i], shape)))
      return failure();
  types.push_back(tensorOf(shape, elt));
  return success();
}

LogicalResult Conv2DNhwcOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                             Adaptor a, SmallVectorImpl<Type> &types) {
  // A requantized integer convolution stores its 8-bit results.
  Type elt = a.getRequantType() ? *a.getRequantType() : convResultElementType(a.getInput());
  auto it = ranked(a.getInput()), wt = ranked(a.getWeight());
  if (!it || !wt) {
    types.push_back(UnrankedTensorType::get(elt));
    return success();
  }
  if (it.getRank() != 4 || wt.getRank() != 4)
    return fail(loc, "conv2d_nhwc needs a 4-D input and weight");
  if (failed(checkSpatial(loc, 2, a.getStrides(), a.getPads(), a.getDilations())))
    return failure();
  if (failed(checkGroups(loc, a.getGroup(), it.getDimSize(3), wt.getDimSize(1))))
    return failure();
  SmallVector<int64_t> shape{it.getDimSize(0)};
  for (size_t i = 0; i < 2; ++i)
    if (failed(windowOutput(loc, i, it.getDimSize(1 + i), a.getPads()[i] + a.getPads()[2 + i],
                            wt.getDimSize(2 + i), a.getStrides()[i], a.getDilations()[i],
                            shape)))
      return failure();
  shape.push_back(wt.getDimSize(0));
  types.push_back(tensorOf(shape, elt));
  return success();
}

LogicalResult Conv2DNhwcOp::verify() {
  if (failed(verifyIntegerConv(*this, getInput(), getWeight(), getBias(), getInputZeroPoint())))
    return failure();
  bool requant = getRequantType() || getRequantScale() || getRequantZeroPoint();
  if (elementTypeOf(getInput()).isInteger(8)) {
    constexpr float inf = std::numeric_limits<float>::infinity();
    if (getResidual() || getGelu())
      return emitOpError("an integer convolution has no residual or GELU");
    float lo = getClampMin().convertToFloat(), hi = getClampMax().convertToFloat();
    if (!requant && (lo != -inf || hi != inf))
      return emitOpError("an integer convolution clamps only its requantized result");
    if (requant) {
      if (!getRequantType() || !getRequantScale() || !getRequantZeroPoint())
        return emitOpError("requantization needs requant_type, requant_scale and "
                           "requant_zero_point together");
      Type t = *getRequantType();
      if (!t.isInteger(8))
        return emitOpError("requant_type must be an 8-bit integer type, not ") << t;
      bool isUnsigned = t.isUnsignedInteger();
      float tlo = isUnsigned ? 0.0f : -128.0f, thi = isUnsigned ? 255.0f : 127.0f;
      if (!(lo >= tlo && hi <= thi)) {
        char range[64];
        std::snprintf(range, sizeof range, "[%g, %g]", lo, hi);
        return emitOpError("the requantized result's clamp ")
               << range << " is outside the range of " << t;
      }
      float zp = getRequantZeroPoint()->convertToFloat();
      auto integral = [](float x) { return x == std::nearbyint(x); };
      if (!integral(lo) || !integral(hi) || !integral(zp) || std::fabs(zp) > 255.0f)
        return emitOpError("the requantized result's clamp and zero point must be integers "
                           "(zero point within [-255, 255])");
      auto wt = ranked(getWeight());
      size_t n = getRequantScale()->size();
      if (wt && n != 1 && (int64_t)n != wt.getDimSize(0))
        return emitOpError("requant_scale has ")
               << n << " values for " << wt.getDimSize(0) << " output channels";
    }
  } else if (requant) {
    return emitOpError("only an integer convolution is requantized");
  }
  if (Value b = getBias())
    if (auto bt = ranked(b); bt && bt.getRank() != 1)
      return emitOpError("bias must be 1-D");
  if (Value r = getResidual())
    if (!detail::areCompatibleReturnTypes(TypeRange{r.getType()}, TypeRange{getType()}))
      return emitOpError("residual must have the result's type");
  if (getClampMin().convertToFloat() > getClampMax().convertToFloat())
    return emitOpError("clamp_min exceeds clamp_max");
  return success();
}

static LogicalResult verifyRowAxis(Operation *op, RankedTensorType t, int64_t axis) {
  if (axis < 0 || axis >= std::max<int64_t>(t.getRank(), 1))
    return op->emitOpError("axis ") << axis << " is not an axis of a rank-" << t.getRank()
                                    << " tensor";
  return success();
}

LogicalResult SoftmaxOp::verify() {
  if (!(getScale().convertToFloat() > 0.0f) || std::isinf(getScale().convertToFloat()))
    return emitOpError("scale must be positive and finite");
  return verifyRowAxis(*this, getInput().getType(), getAxis());
}

LogicalResult LayerNormOp::verify() {
  auto t = getInput().getType();
  if (failed(verifyRowAxis(*this, t, getAxis())))
    return failure();
  ArrayRef<int64_t> slice = t.getShape().drop_front(getAxis());
  for (Value v : {getScale(), getBias()}) {
    if (!v)
      continue;
    auto vt = cast<RankedTensorType>(v.getType());
    if (vt.getElementType() != t.getElementType())
      return emitOpError("scale and bias must have the input's element type");
    if (t.hasStaticShape() && vt.hasStaticShape() &&
        vt.getNumElements() != ShapedType::getNumElements(slice))
      return emitOpError("scale and bias must hold one value per element of a normalised slice");
  }
  return success();
}

LogicalResult ConvOp::verify() {
  if (failed(verifyIntegerConv(*this, getInput(), getWeight(), getBias(), getInputZeroPoint())))
    return failure();
  if (Value b = getBias()) {
    auto bt = ranked(b);
    if (bt && bt.getRank() != 1)
      return emitOpError("bias must be 1-D");
  }
  return success();
}

static LogicalResult inferPool(std::optional<Location> loc, Value input,
                               ArrayRef<int64_t> kernel, ArrayRef<int64_t> strides,
                               ArrayRef<int64_t> pads, ArrayRef<int64_t> dilations,
                               ArrayRef<int64_t> ceilPads, bool channelsLast,
                               SmallVectorImpl<Type> &types) {
  Type elt = elementTypeOf(input);
  auto it = ranked(input);
  if (!it) {
    types.push_back(UnrankedTensorType::get(elt));
    return success();
  }
  if (it.getRank() < 3)
    return fail(loc, "pooling input must have rank >= 3");
  size_t spatial = it.getRank() - 2;
  if (kernel.size() != spatial)
    return fail(loc, "kernel_shape does not match the input's spatial rank");
  if (failed(checkSpatial(loc, spatial, strides, pads, dilations)))
    return failure();
  int64_t firstSpatial = channelsLast ? 1 : 2;
  int64_t channels = it.getDimSize(channelsLast ? it.getRank() - 1 : 1);
  SmallVector<int64_t> shape{it.getDimSize(0)};
  if (!channelsLast)
    shape.push_back(channels);
  for (size_t i = 0; i < spatial; ++i) {
    int64_t padSum = pads[i] + pads[spatial + i] + (ceilPads.empty() ? 0 : ceilPads[i]);
    if (failed(windowOutput(loc, i, it.getDimSize(firstSpatial + i), padSum, kernel[i],
                            strides[i], dilations[i], shape)))
      return failure();
  }
  if (channelsLast)
    shape.push_back(channels);
  types.push_back(tensorOf(shape, elt));
  return success();
}

LogicalResult MaxPoolOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                          Adaptor a, SmallVectorImpl<Type> &types) {
  return inferPool(loc, a.getInput(), a.getKernelShape(), a.getStrides(), a.getPads(),
                   a.getDilations(), {}, a.getChannelsLast(), types);
}

LogicalResult AvgPoolOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                          Adaptor a, SmallVectorImpl<Type> &types) {
  SmallVector<int64_t> ones(a.getKernelShape().size(), 1);
  return inferPool(loc, a.getInput(), a.getKernelShape(), a.getStrides(), a.getPads(),
                   ones, a.getCeilPads(), a.getChannelsLast(), types);
}

LogicalResult ArgMaxOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> loc,
                                         Adaptor a, SmallVectorImpl<Type> &types) {
  SmallVector<Type> reduced;
  if (failed(detail::inferReduce(loc, a.getInput(), {static_cast<int64_t>(a.getAxis())}, a.getKeepdims(),
                                 reduced)))
    return failure();
  types.push_back(cast<TensorType>(reduced[0]).clone(IntegerType::get(ctx, 64)));
  return success();
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor a, SmallVectorImpl<Type> &types) {
  auto it = ranked(a.getInput());
  if (!it) {
    types.push_back(a.getInput().getType());
    return success();
  }
  ArrayRef<int64_t> perm = a.getPerm();
  if ((int64_t)perm.size() != it.getRank())
    return fail(loc, "perm has " + Twine(perm.size()) + " entries for rank " +
                         Twine(it.getRank()));
  SmallVector<int64_t> shape;
  llvm::SmallBitVector seen(perm.size());
  for (int64_t p : perm) {
    if (p < 0 || p >= it.getRank() || seen.test(p))
      return fail(loc, "perm is not a permutation");
    seen.set(p);
    shape.push_back(it.getDimSize(p));
  }
  types.push_back(tensorOf(shape, it.getElementType()));
  return success();
}

LogicalResult ReshapeOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                          Adaptor a, SmallVectorImpl<Type> &types) {
  Type elt = elementTypeOf(a.getInput());
  auto st = ranked(a.getShape());
  if (!st || st.getRank() != 1)
    return fail(loc, "reshape shape must be a 1-D tensor");
  std::optional<SmallVector<int64_t>> target = getConstantInts(a.getShape());
  if (!target) {
    if (st.isDynamicDim(0))
      types.push_back(UnrankedTensorType::get(elt));
    else if (failed(checkInferredRank(loc, st.getDimSize(0))))
      return failure();
    else
      types.push_back(tensorOf(SmallVector<int64_t>(st.getDimSize(0), kDyn), elt));
    return success();
  }
  auto it = ranked(a.getInput());
  SmallVector<int64_t> shape;
  int64_t inferAt = -1, known = 1;
  for (auto [i, d] : llvm::enumerate(*target)) {
    if (d == 0 && !a.getAllowzero()) {
      if (!it || (int64_t)i >= it.getRank())
        return it ? fail(loc, "reshape copies dimension " + Twine(i) +
                                  " that the input does not have")
                  : (types.push_back(tensorOf(SmallVector<int64_t>(target->size(), kDyn), elt)),
                     success());
      d = it.getDimSize(i);
      // A copied dimension that is not known yet is unknown in the result
      // too; its sentinel must not be read as a size (it is negative).
      if (ShapedType::isDynamic(d)) {
        shape.push_back(kDyn);
        known = -1;
        continue;
      }
    }
    if (d == -1) {
      if (inferAt >= 0)
        return fail(loc, "reshape shape has more than one -1");
      inferAt = i;
      shape.push_back(kDyn);
      continue;
    }
    if (d < -1)
      return fail(loc, "reshape shape has negative dimension " + Twine(d));
    shape.push_back(d);
    if (ShapedType::isDynamic(d))
      known = -1;
    else if (known >= 0)
      known *= d;
  }
  if (it && it.hasStaticShape()) {
    int64_t total = it.getNumElements();
    if (inferAt >= 0 && known > 0) {
      if (total % known != 0)
        return fail(loc, "cannot reshape " + Twine(total) + " elements into the requested shape");
      shape[inferAt] = total / known;
    } else if (inferAt >= 0 && known == 0) {
      shape[inferAt] = 0;
    } else if (inferAt < 0 && known >= 0 && known != total) {
      return fail(loc, "cannot reshape " + Twine(total) + " elements into " +
                           Twine(known) + " elements");
    }
  }
  types.push_back(tensorOf(shape, elt));
  return success();
}

LogicalResult UnsqueezeOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor a, SmallVectorImpl<Type> &types) {
  auto it = ranked(a.getInput());
  if (!it) {
    types.push_back(a.getInput().getType());
    return success();
  }
  int64_t outRank = it.getRank() + a.getAxes().size();
  SmallVector<int64_t> shape(outRank, -2);
  for (int64_t ax : a.getAxes()) {
    if (ax < 0)
      ax += outRank;
    if (ax < 0 || ax >= outRank || shape[ax] == 1)
      return fail(loc, "unsqueeze axes are out of range or repeated");
    shape[ax] = 1;
  }
  int64_t j = 0;
  for (int64_t &d : shape)
    if (d == -2)
      d = it.getDimSize(j++);
  types.push_back(tensorOf(shape, it.getElementType()));
  return success();
}

LogicalResult SqueezeOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                          Adaptor a, SmallVectorImpl<Type> &types) {
  auto it = ranked(a.getInput());
  if (!it) {
    types.push_back(a.getInput().getType());
    return success();
  }
  SmallVector<bool> drop(it.getRank(), false);
  if (a.getAxes().empty()) {
    for (int64_t i = 0; i < it.getRank(); ++i) {
      if (it.isDynamicDim(i)) {
        types.push_back(UnrankedTensorType::get(it.getElementType()));
        return success();
      }
      drop[i] = it.getDimSize(i) == 1;
    }
  }
  for (int64_t ax : a.getAxes()) {
    if (ax < 0)
      ax += it.getRank();
    if (ax < 0 || ax >= it.getRank())
      return fail(loc, "squeeze axis out of range");
    if (isConstantDim(it.getDimSize(ax)) && it.getDimSize(ax) != 1)
      return fail(loc, "squeeze axis " + Twine(ax) + " has size " +
                           Twine(it.getDimSize(ax)) + ", not 1");
    drop[ax] = true;
  }
  SmallVector<int64_t> shape;
  for (int64_t i = 0; i < it.getRank(); ++i)
    if (!drop[i])
      shape.push_back(it.getDimSize(i));
  types.push_back(tensorOf(shape, it.getElementType()));
  return success();
}

static int64_t productOf(ArrayRef<int64_t> dims) {
  int64_t p = 1;
  for (int64_t d : dims) {
    if (ShapedType::isDynamic(d))
      return kDyn;
    p *= d;
  }
  return p;
}

LogicalResult FlattenOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                          Adaptor a, SmallVectorImpl<Type> &types) {
  auto it = ranked(a.getInput());
  if (!it) {
    types.push_back(tensorOf({kDyn, kDyn}, elementTypeOf(a.getInput())));
    return success();
  }
  int64_t axis = a.getAxis();
  if (axis < 0)
    axis += it.getRank();
  if (axis < 0 || axis > it.getRank())
    return fail(loc, "flatten axis out of range");
  types.push_back(tensorOf({productOf(it.getShape().take_front(axis)),
                            productOf(it.getShape().drop_front(axis))},
                           it.getElementType()));
  return success();
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor a, SmallVectorImpl<Type> &types) {
  if (a.getInputs().empty())
    return fail(loc, "concat needs at least one input");
  Type elt = elementTypeOf(a.getInputs()[0]);
  std::optional<int64_t> rank;
  for (Value v : a.getInputs()) {
    if (elementTypeOf(v) != elt)
      return fail(loc, "concat inputs have different element types");
    if (auto t = ranked(v)) {
      if (rank && *rank != t.getRank())
        return fail(loc, "concat inputs have different ranks");
      rank = t.getRank();
    }
  }
  if (!rank) {
    types.push_back(UnrankedTensorType::get(elt));
    return success();
  }
  int64_t axis = a.getAxis() < 0 ? a.getAxis() + *rank : a.getAxis();
  if (axis < 0 || axis >= *rank)
    return fail(loc, "concat axis out of range");
  SmallVector<int64_t> shape(*rank, kDyn);
  int64_t sum = 0;
  for (Value v : a.getInputs()) {
    auto t = ranked(v);
    if (!t) {
      sum = kDyn;
      continue;
    }
    for (int64_t i = 0; i < *rank; ++i) {
      if (i == axis)
        continue;
      int64_t d = t.getDimSize(i);
      if (isConstantDim(d) && isConstantDim(shape[i]) && d != shape[i])
        return fail(loc, "concat inputs differ in dimension " + Twine(i));
      if (isConstantDim(d))
        shape[i] = d;
    }
    if (isConstantDim(sum) && t.isDynamicDim(axis))
      sum = kDyn;
    else if (isConstantDim(sum))
      sum += t.getDimSize(axis);
  }
  shape[axis] = sum;
  types.push_back(tensorOf(shape, elt));
  return success();
}

std::pair<int64_t, int64_t> kiln::shapeDimRange(int64_t rank, int64_t start, int64_t end) {
  auto norm = [rank](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + rank : v, 0, rank); };
  int64_t first = norm(start);
  return {first, std::max(first, norm(end))};
}

namespace kiln {
std::optional<SliceBounds> computeSliceBounds(int64_t dim, int64_t start, int64_t end,
                                              int64_t step) {
  if (step == 0)
    return std::nullopt;
  if (start < 0)
    start += dim;
  if (end < 0)
    end += dim;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
    int64_t size = end > start ? (end - start + step - 1) / step : 0;
    return SliceBounds{start, size, step};
  }
  start = std::clamp<int64_t>(start, 0, dim - 1);
  end = std::clamp<int64_t>(end, -1, dim - 1);
  int64_t size = start > end ? (start - end + (-step) - 1) / (-step) : 0;
  return SliceBounds{start, size, step};
}
} // namespace kiln

LogicalResult SliceOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                        Adaptor a, SmallVectorImpl<Type> &types) {
  auto it = ranked(a.getInput());
  if (!it) {
    types.push_back(a.getInput().getType());
    return success();
  }
  auto starts = getConstantInts(a.getStarts()), ends = getConstantInts(a.getEnds()),
       axes = getConstantInts(a.getAxes()), steps = getConstantInts(a.getSteps());
  SmallVector<int64_t> shape(it.getShape());
  if (!axes) {
    types.push_back(tensorOf(SmallVector<int64_t>(it.getRank(), kDyn), it.getElementType()));
    return success();
  }
  for (size_t i = 0; i < axes->size(); ++i) {
    int64_t ax = (*axes)[i] < 0 ? (*axes)[i] + it.getRank() : (*axes)[i];
    if (ax < 0 || ax >= it.getRank())
      return fail(loc, "slice axis out of range");
    if (!starts || !ends || !steps || it.isDynamicDim(ax)) {
      shape[ax] = kDyn;
      continue;
    }
    if (starts->size() != axes->size() || ends->size() != axes->size() ||
        steps->size() != axes->size())
      return fail(loc, "slice starts/ends/axes/steps differ in length");
    auto b = computeSliceBounds(it.getDimSize(ax), (*starts)[i], (*ends)[i], (*steps)[i]);
    if (!b)
      return fail(loc, "slice step must not be 0");
    shape[ax] = b->size;
  }
  types.push_back(tensorOf(shape, it.getElementType()));
  return success();
}

LogicalResult GatherOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor a, SmallVectorImpl<Type> &types) {
  auto it = ranked(a.getInput()), xt = ranked(a.getIndices());
  Type elt = elementTypeOf(a.getInput());
  if (!isa<IntegerType>(elementTypeOf(a.getIndices())))
    return fail(loc, "gather indices must be integers");
  if (!it || !xt) {
    types.push_back(UnrankedTensorType::get(elt));
    return success();
  }
  int64_t axis = a.getAxis() < 0 ? a.getAxis() + it.getRank() : a.getAxis();
  if (axis < 0 || axis >= it.getRank())
    return fail(loc, "gather axis out of range");
  // Constant indices can be checked now; run-time ones are clamped by codegen.
  int64_t dim = it.getDimSize(axis);
  if (isConstantDim(dim) && xt.hasStaticShape() && xt.getNumElements() <= (1 << 16))
    if (auto idx = getConstantInts(a.getIndices()))
      for (int64_t i : *idx)
        if (i < -dim || i >= dim)
          return fail(loc, "gather index " + Twine(i) + " out of range for axis " +
                               Twine(axis) + " of size " + Twine(dim));
  SmallVector<int64_t> shape(it.getShape().take_front(axis));
  llvm::append_range(shape, xt.getShape());
  llvm::append_range(shape, it.getShape().drop_front(axis + 1));
  types.push_back(tensorOf(shape, elt));
  return success();
}

LogicalResult GatherElementsOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                                 Adaptor a, SmallVectorImpl<Type> &types) {
  auto it = ranked(a.getInput()), xt = ranked(a.getIndices());
  Type elt = elementTypeOf(a.getInput());
  if (it && xt && it.getRank() != xt.getRank())
    return fail(loc, "gather_elements input and indices ranks differ");
  if (it && (a.getAxis() < -it.getRank() || a.getAxis() >= it.getRank()))
    return fail(loc, "gather_elements axis out of range");
  if (!xt) {
    types.push_back(UnrankedTensorType::get(elt));
    return success();
  }
  types.push_back(xt.clone(elt));
  return success();
}

LogicalResult GatherNDOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                           Adaptor a, SmallVectorImpl<Type> &types) {
  Type elt = elementTypeOf(a.getInput());
  auto it = ranked(a.getInput()), xt = ranked(a.getIndices());
  if (xt && xt.getRank() == 0)
    return fail(loc, "gather_nd indices must have rank 1 or more");
  if (!it || !xt || xt.isDynamicDim(xt.getRank() - 1)) {
    types.push_back(UnrankedTensorType::get(elt));
    return success();
  }
  int64_t b = a.getBatchDims(), k = xt.getDimSize(xt.getRank() - 1);
  if (xt.getRank() < 1 || b < 0 || b >= xt.getRank() || b + k > it.getRank())
    return fail(loc, "gather_nd indices do not fit the input");
  SmallVector<int64_t> shape(xt.getShape().drop_back());
  llvm::append_range(shape, it.getShape().drop_front(b + k));
  types.push_back(tensorOf(shape, elt));
  return success();
}

static LogicalResult inferScatter(std::optional<Location> loc, Value input, Value updates,
                                  StringRef reduction, SmallVectorImpl<Type> &types) {
  if (elementTypeOf(input) != elementTypeOf(updates))
    return fail(loc, "scatter updates and input have different element types");
  if (reduction != "none" && reduction != "add" && reduction != "mul")
    return fail(loc, "unsupported scatter reduction '" + reduction + "'");
  types.push_back(input.getType());
  return success();
}

LogicalResult ScatterElementsOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                                  Adaptor a, SmallVectorImpl<Type> &types) {
  if (auto it = ranked(a.getInput());
      it && (a.getAxis() < -it.getRank() || a.getAxis() >= it.getRank()))
    return fail(loc, "scatter_elements axis out of range");
  return inferScatter(loc, a.getInput(), a.getUpdates(), a.getReduction(), types);
}

LogicalResult ScatterNDOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor a, SmallVectorImpl<Type> &types) {
  return inferScatter(loc, a.getInput(), a.getUpdates(), a.getReduction(), types);
}

LogicalResult ExpandOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor a, SmallVectorImpl<Type> &types) {
  Type elt = elementTypeOf(a.getInput());
  auto it = ranked(a.getInput());
  auto target = getConstantInts(a.getShape());
  auto st = ranked(a.getShape());
  if (!it || !st || st.getRank() != 1) {
    types.push_back(UnrankedTensorType::get(elt));
    return success();
  }
  if (!target) {
    if (st.isDynamicDim(0)) {
      types.push_back(UnrankedTensorType::get(elt));
      return success();
    }
    int64_t rank = std::max<int64_t>(it.getRank(), st.getDimSize(0));
    if (failed(checkInferredRank(loc, rank)))
      return failure();
    types.push_back(tensorOf(SmallVector<int64_t>(rank, kDyn), elt));
    return success();
  }
  SmallVector<int64_t> shape;
  if (failed(broadcastShapes(it.getShape(), *target, shape)))
    return fail(loc, "expand: input cannot be broadcast to the requested shape");
  types.push_back(tensorOf(shape, elt));
  return success();
}

LogicalResult TileOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                       Adaptor a, SmallVectorImpl<Type> &types) {
  auto it = ranked(a.getInput());
  if (!it) {
    types.push_back(a.getInput().getType());
    return success();
  }
  auto reps = getConstantInts(a.getRepeats());
  SmallVector<int64_t> shape(it.getRank(), kDyn);
  if (reps) {
    if ((int64_t)reps->size() != it.getRank())
      return fail(loc, "tile repeats length differs from input rank");
    for (int64_t i = 0; i < it.getRank(); ++i)
      shape[i] = it.isDynamicDim(i) ? kDyn : it.getDimSize(i) * (*reps)[i];
  }
  types.push_back(tensorOf(shape, it.getElementType()));
  return success();
}

LogicalResult PadOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                      Adaptor a, SmallVectorImpl<Type> &types) {
  auto it = ranked(a.getInput());
  if (!it) {
    types.push_back(a.getInput().getType());
    return success();
  }
  StringRef mode = a.getMode();
  if (mode != "constant" && mode != "edge" && mode != "reflect")
    return fail(loc, "unknown pad mode '" + mode + "'");
  auto pads = getConstantInts(a.getPads());
  SmallVector<int64_t> shape(it.getRank(), kDyn);
  if (pads) {
    if ((int64_t)pads->size() != 2 * it.getRank())
      return fail(loc, "pads must have 2 * rank entries");
    for (int64_t i = 0; i < it.getRank(); ++i)
      shape[i] = it.isDynamicDim(i)
                     ? kDyn
                     : it.getDimSize(i) + (*pads)[i] + (*pads)[i + it.getRank()];
  }
  types.push_back(tensorOf(shape, it.getElementType()));
  return success();
}

LogicalResult ShapeOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location>,
                                        Adaptor a, SmallVectorImpl<Type> &types) {
  Type i64 = IntegerType::get(ctx, 64);
  auto it = ranked(a.getInput());
  if (!it) {
    types.push_back(tensorOf({kDyn}, i64));
    return success();
  }
  auto [first, last] = shapeDimRange(it.getRank(), a.getStart(), a.getEnd());
  types.push_back(tensorOf({last - first}, i64));
  return success();
}

LogicalResult ConstantOfShapeOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                                  Adaptor a, SmallVectorImpl<Type> &types) {
  Type elt = cast<ShapedType>(cast<TypedAttr>(a.getValue()).getType()).getElementType();
  auto st = ranked(a.getShape());
  if (auto dims = getConstantInts(a.getShape())) {
    for (int64_t d : *dims)
      if (d < 0)
        return fail(loc, "constant_of_shape has a negative dimension");
    types.push_back(tensorOf(*dims, elt));
  } else if (st && st.getRank() == 1 && !st.isDynamicDim(0)) {
    if (failed(checkInferredRank(loc, st.getDimSize(0))))
      return failure();
    types.push_back(tensorOf(SmallVector<int64_t>(st.getDimSize(0), kDyn), elt));
  } else {
    types.push_back(UnrankedTensorType::get(elt));
  }
  return success();
}

/// Number of elements of Range(start, limit, delta), per the ONNX spec.
static std::optional<int64_t> rangeLength(Value start, Value limit, Value delta) {
  DenseElementsAttr s, l, d;
  if (!matchPattern(start, m_Constant(&s)) || !matchPattern(limit, m_Constant(&l)) ||
      !matchPattern(delta, m_Constant(&d)))
    return std::nullopt;
  auto asDouble = [](DenseElementsAttr attr) -> double {
    if (isa<FloatType>(attr.getElementType()))
      return (*attr.getValues<APFloat>().begin()).convertToDouble();
    return (double)(*attr.getValues<APInt>().begin()).getSExtValue();
  };
  double ds = asDouble(s), dl = asDouble(l), dd = asDouble(d);
  if (dd == 0)
    return std::nullopt;
  return std::max<int64_t>((int64_t)std::ceil((dl - ds) / dd), 0);
}

LogicalResult RangeOp::inferReturnTypes(MLIRContext *, std::optional<Location>, Adaptor a,
                                        SmallVectorImpl<Type> &types) {
  Type elt = elementTypeOf(a.getStart());
  auto n = rangeLength(a.getStart(), a.getLimit(), a.getDelta());
  types.push_back(tensorOf({n ? *n : kDyn}, elt));
  return success();
}
