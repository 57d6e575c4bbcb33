// kiln-fuse-epilogues: what follows a convolution and touches each output
// element once is done by the convolution's kernel while the tile is still
// in registers, instead of by another pass over memory:
//   mul/add by a per-channel constant (BatchNormalization)  -> weights, bias
//   add of a same-shaped tensor (residual connection)       -> residual
//   relu, max/min with a scalar constant (Relu, Clip, ReLU6) -> clamp
//   x/2 * (1 + erf(x/sqrt(2))) (GELU as exporters write it)  -> gelu
// The kernel computes clamp(gelu(conv + bias + residual)), so each rewrite
// checks that it keeps that order (no residual after a clamp, no scale
// after a residual, nothing after a GELU, a GELU only before any clamp).
//
// A matrix product with constant weights [K, N] is a 1x1 convolution over
// the rows of its left operand, so it becomes one here (viewed through
// reshapes) and gets the same epilogues: a Linear layer's bias, Relu and
// residual add are done in the kernel, not in three more passes. The
// epilogue ops sit behind the reshape back to the product's shape, so they
// move in front of it first.
#include "LayoutPatterns.h"
#include "kiln/Passes/Passes.h"

#include "mlir/IR/Matchers.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>
#include <limits>

namespace kiln {
#define GEN_PASS_DEF_KILNFUSEEPILOGUES
#include "kiln/Passes/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace kiln {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

bool hasClamp(Conv2DNhwcOp c) {
  return c.getClampMin().convertToFloat() != -kInf || c.getClampMax().convertToFloat() != kInf;
}

/// A conv2d_nhwc result that nothing else reads, with its epilogue still
/// open for `stage` (0: scale/shift, 1: residual, 2: clamp).
Conv2DNhwcOp fusableConv(Value v, int stage) {
  auto c = v.getDefiningOp<Conv2DNhwcOp>();
  // The integer form has no epilogue (its requantization stays elementwise).
  if (!c || !c->hasOneUse() || c.getGelu() || !getElementTypeOrSelf(c.getType()).isF32())
    return {};
  if (stage < 2 && hasClamp(c))
    return {};
  if (stage < 1 && c.getResidual())
    return {};
  return c;
}

/// The per-output-channel values of constant `v` broadcast against an NHWC
/// result with `channels` channels (a scalar or a [..., 1, C] tensor).
std::optional<SmallVector<float>> perChannel(Value v, int64_t channels) {
  DenseElementsAttr attr;
  if (!matchPattern(v, m_Constant(&attr)) || !attr.getElementType().isF32())
    return std::nullopt;
  auto t = cast<ShapedType>(attr.getType());
  for (int64_t i = 0; i + 1 < t.getRank(); ++i)
    if (t.getDimSize(i) != 1)
      return std::nullopt;
  int64_t n = t.getRank() ? t.getDimSize(t.getRank() - 1) : 1;
  if (t.getRank() > 4 || (n != 1 && n != channels))
    return std::nullopt;
  SmallVector<float> values(attr.getValues<float>());
  if (values.size() == 1)
    values.assign(channels, values[0]);
  return values;
}

std::optional<float> scalarConstant(Value v) {
  DenseElementsAttr attr;
  if (!matchPattern(v, m_Constant(&attr)) || !attr.getElementType().isF32() || !attr.isSplat())
    return std::nullopt;
  return attr.getSplatValue<float>();
}

SmallVector<float> constantValues(Value v) {
  DenseElementsAttr attr;
  if (!v || !matchPattern(v, m_Constant(&attr)))
    return {};
  return SmallVector<float>(attr.getValues<float>());
}

Value f32Constant(PatternRewriter &rw, Location loc, ArrayRef<int64_t> shape,
                  ArrayRef<float> values) {
  auto t = RankedTensorType::get(shape, rw.getF32Type());
  return ConstantOp::create(rw, loc, DenseElementsAttr::get(t, values));
}

/// Replaces `user` (the op being folded) by a copy of `c` with some parts
/// replaced, created at `user` (so that a residual operand dominates it),
/// and erases `c`, whose only user that was.
LogicalResult replaceWithConv(PatternRewriter &rw, Operation *user, Conv2DNhwcOp c,
                              Value weight, Value bias, Value residual, float lo, float hi) {
  rw.setInsertionPoint(user);
  // Both nodes' locations: profiles and diagnostics name every node fused.
  Location loc = rw.getFusedLoc({c.getLoc(), user->getLoc()});
  Value conv = Conv2DNhwcOp::create(rw, loc, c.getInput(), weight, bias, residual,
                                    c.getStridesAttr(), c.getPadsAttr(), c.getDilationsAttr(),
                                    c.getGroupAttr(), rw.getF32FloatAttr(lo),
                                    rw.getF32FloatAttr(hi), /*gelu=*/nullptr, IntegerAttr(),
                                    /*requant_scale=*/{}, /*requant_zero_point=*/{},
                                    /*requant_type=*/{});
  rw.replaceOp(user, conv);
  rw.eraseOp(c);
  return success();
}

float lo(Conv2DNhwcOp c) { return c.getClampMin().convertToFloat(); }
float hi(Conv2DNhwcOp c) { return c.getClampMax().convertToFloat(); }

/// conv * s  (s per channel): weights and bias scaled.
struct FoldScale : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MulOp op, PatternRewriter &rw) const override {
    for (int i = 0; i < 2; ++i) {
      Conv2DNhwcOp c = fusableConv(op->getOperand(i), 0);
      if (!c || c.getType() != op.getType())
        continue;
      auto wt = cast<RankedTensorType>(c.getWeight().getType());
      int64_t oc = wt.getDimSize(0);
      auto scale = perChannel(op->getOperand(1 - i), oc);
      SmallVector<float> w = constantValues(c.getWeight());
      if (!scale || w.empty())
        continue;
      // Integer weights are a quantized convolution accumulating exact
      // integers in f32 (RulesQuantize.cpp, exactInF32): its requantization
      // must scale the exact sum, as an integer kernel does, so a fractional
      // scale stays out of the weights (folded in, 110 of 200704 outputs of
      // two QLinearConvs came out one quantum off ONNX Runtime's).
      auto isInteger = [](float x) { return x == std::nearbyint(x); };
      if (llvm::all_of(w, isInteger) && !llvm::all_of(*scale, isInteger))
        continue;
      int64_t perOut = w.size() / oc;
      for (int64_t o = 0; o < oc; ++o)
        for (int64_t k = 0; k < perOut; ++k)
          w[o * perOut + k] *= (*scale)[o];
      Value bias;
      if (SmallVector<float> b = constantValues(c.getBias()); !b.empty()) {
        for (int64_t o = 0; o < oc; ++o)
          b[o] *= (*scale)[o];
        bias = f32Constant(rw, c.getLoc(), {oc}, b);
      }
      Value weight = f32Constant(rw, c.getLoc(), wt.getShape(), w);
      return replaceWithConv(rw, op, c, weight, bias, Value(), lo(c), hi(c));
    }
    return failure();
  }
};

/// conv + t: a per-channel constant t goes into the bias, a same-shaped
/// tensor becomes the residual.
struct FoldAdd : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AddOp op, PatternRewriter &rw) const override {
    for (int i = 0; i < 2; ++i) {
      Value other = op->getOperand(1 - i);
      Conv2DNhwcOp c = fusableConv(op->getOperand(i), 0);
      if (c && c.getType() == op.getType()) {
        int64_t oc = cast<RankedTensorType>(c.getType()).getDimSize(3);
        if (auto shift = perChannel(other, oc)) {
          SmallVector<float> b = constantValues(c.getBias());
          if (b.empty() && c.getBias())
            continue;
          b.resize(oc, 0.0f);
          for (int64_t o = 0; o < oc; ++o)
            b[o] += (*shift)[o];
          Value bias = f32Constant(rw, c.getLoc(), {oc}, b);
          return replaceWithConv(rw, op, c, c.getWeight(), bias, Value(), lo(c), hi(c));
        }
      }
      // A residual of the same type. With dims known only at run time the
      // type does not say the dims are the same (one may broadcast):
      // kiln-lower-to-linalg lowers such a convolution only where it can
      // prove them equal (dynamicConvSupported) and refuses it otherwise.
      c = fusableConv(op->getOperand(i), 1);
      if (c && !c.getResidual() && other.getType() == c.getType() &&
          op.getType() == c.getType() && other != c.getResult()) {
        return replaceWithConv(rw, op, c, c.getWeight(), c.getBias(), other, lo(c), hi(c));
      }
    }
    return failure();
  }
};

struct FoldRelu : OpRewritePattern<ReluOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ReluOp op, PatternRewriter &rw) const override {
    Conv2DNhwcOp c = fusableConv(op.getInput(), 2);
    if (!c || c.getType() != op.getType())
      return failure();
    return replaceWithConv(rw, op, c, c.getWeight(), c.getBias(), c.getResidual(),
                           std::max(lo(c), 0.0f), std::max(hi(c), 0.0f));
  }
};

/// max(conv, a) and min(conv, b) with scalar constants: Clip as the
/// importer writes it.
template <typename OpTy, bool isMax>
struct FoldClamp : OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;
  LogicalResult matchAndRewrite(OpTy op, PatternRewriter &rw) const override {
    for (int i = 0; i < 2; ++i) {
      Conv2DNhwcOp c = fusableConv(op->getOperand(i), 2);
      std::optional<float> k = scalarConstant(op->getOperand(1 - i));
      if (!c || !k || c.getType() != op.getType() || std::isnan(*k))
        continue;
      // clamp(x, l, h) then max with k is clamp(x, max(l, k), max(h, k)).
      float l = isMax ? std::max(lo(c), *k) : std::min(lo(c), *k);
      float h = isMax ? std::max(hi(c), *k) : std::min(hi(c), *k);
      return replaceWithConv(rw, op, c, c.getWeight(), c.getBias(), c.getResidual(), l, h);
    }
    return failure();
  }
};

/// A scalar f32 constant, or the f32 cast of a scalar integer one (a
/// zero point as QuantizeLinear's import writes it), exactly.
std::optional<float> scalarOrCastConstant(Value v) {
  if (std::optional<float> k = scalarConstant(v))
    return k;
  auto cast = v.getDefiningOp<CastOp>();
  DenseElementsAttr attr;
  if (!cast || !getElementTypeOrSelf(cast.getType()).isF32() ||
      !matchPattern(cast.getInput(), m_Constant(&attr)) || !attr.isSplat() ||
      !isa<IntegerType>(attr.getElementType()))
    return std::nullopt;
  APInt i = attr.getSplatValue<APInt>();
  int64_t x = attr.getElementType().isUnsignedInteger() ? (int64_t)i.getZExtValue()
                                                         : i.getSExtValue();
  if (std::abs(x) > (1 << 24))
    return std::nullopt;
  return (float)x;
}

/// The requantization of an integer convolution, as the importer writes
/// QuantizeLinear after it:
///   cast<8-bit>(min(max(round(f32(conv) * scale) + zero_point, lo), hi))
/// (the add absent for a zero point of 0, the max and min in either
/// order) -> the convolution's requant_* attributes and clamp, so that its
/// kernel stores the 8-bit result from registers: the i32 sums of a
/// 112x112x96 layer (4.8 MB) went to memory and back in another loop, a
/// tenth of a quantized CNN's time. Each op must be the previous one's only
/// user, with the convolution's shape (no broadcast to a larger one).
struct FoldRequantize : OpRewritePattern<CastOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(CastOp op, PatternRewriter &rw) const override {
    Type to = getElementTypeOrSelf(op.getType());
    if (!to.isInteger(8))
      return failure();
    SmallVector<Operation *> chain; // from the cast back to the conversion
    Value v = op.getInput();
    // `v`'s defining op, when `v` feeds only the op before it in the chain.
    auto next = [&](Value x) -> Operation * {
      Operation *d = x.getDefiningOp();
      if (!d || !x.hasOneUse() || x.getType() != op.getInput().getType())
        return nullptr;
      return d;
    };
    std::optional<float> lo, hi, zeroPoint;
    for (int i = 0; i < 2; ++i) {
      Operation *d = next(v);
      bool isMax = isa_and_nonnull<MaxOp>(d), isMin = isa_and_nonnull<MinOp>(d);
      if ((!isMax || lo) && (!isMin || hi))
        break;
      std::optional<float> k;
      int j = 0;
      for (; j < 2 && !k; ++j)
        k = scalarOrCastConstant(d->getOperand(1 - j));
      if (!k || std::isnan(*k))
        return failure();
      (isMax ? lo : hi) = k;
      v = d->getOperand(j - 1);
      chain.push_back(d);
    }
    if (!lo || !hi)
      return failure();
    if (auto add = dyn_cast_or_null<AddOp>(next(v))) {
      for (int j = 0; j < 2 && !zeroPoint; ++j)
        if ((zeroPoint = scalarOrCastConstant(add->getOperand(1 - j))))
          v = add->getOperand(j);
      if (!zeroPoint)
        return failure();
      chain.push_back(add);
    }
    auto round = dyn_cast_or_null<RoundOp>(next(v));
    if (!round)
      return failure();
    chain.push_back(round);
    auto mul = dyn_cast_or_null<MulOp>(next(round.getInput()));
    if (!mul)
      return failure();
    chain.push_back(mul);
    for (int j = 0; j < 2; ++j) {
      auto toFloat = dyn_cast_or_null<CastOp>(next(mul->getOperand(j)));
      if (!toFloat)
        continue;
      auto c = toFloat.getInput().getDefiningOp<Conv2DNhwcOp>();
      if (!c || !c->hasOneUse() || c.getRequantType() ||
          !getElementTypeOrSelf(c.getType()).isInteger(32))
        continue;
      int64_t oc = cast<RankedTensorType>(c.getType()).getDimSize(3);
      auto scale = perChannel(mul->getOperand(1 - j), oc);
      if (!scale)
        return failure();
      // Integer bounds and zero point (as QuantizeLinear's are), within the
      // type: the kernels clamp before rounding, which only then agrees.
      bool isUnsigned = to.isUnsignedInteger();
      auto integral = [](float x) { return x == std::nearbyint(x); };
      if (*lo < (isUnsigned ? 0.0f : -128.0f) || *hi > (isUnsigned ? 255.0f : 127.0f) ||
          *lo > *hi || !integral(*lo) || !integral(*hi) || !integral(zeroPoint.value_or(0)) ||
          std::fabs(zeroPoint.value_or(0)) > 255.0f)
        return failure();
      chain.push_back(toFloat);
      rw.setInsertionPoint(op);
      SmallVector<Location> locs{c.getLoc()};
      for (Operation *o : chain)
        locs.push_back(o->getLoc());
      locs.push_back(op.getLoc());
      Value conv = Conv2DNhwcOp::create(
          rw, rw.getFusedLoc(locs), c.getInput(), c.getWeight(), c.getBias(), Value(),
          c.getStridesAttr(), c.getPadsAttr(), c.getDilationsAttr(), c.getGroupAttr(),
          rw.getF32FloatAttr(*lo), rw.getF32FloatAttr(*hi), /*gelu=*/nullptr,
          c.getInputZeroPointAttr(), rw.getDenseF32ArrayAttr(*scale),
          rw.getF32FloatAttr(zeroPoint.value_or(0.0f)), TypeAttr::get(to));
      if (conv.getType() != op.getType()) {
        rw.eraseOp(conv.getDefiningOp());
        return failure();
      }
      rw.replaceOp(op, conv);
      for (Operation *o : chain)
        rw.eraseOp(o);
      rw.eraseOp(c);
      return success();
    }
    return failure();
  }
};

/// Whether `v` is a splat f32 constant within a relative 1e-6 of `want`
/// (exporters write 1/sqrt(2) and sqrt(2) to float precision).
bool isConstantNear(Value v, double want) {
  std::optional<float> k = scalarConstant(v);
  return k && std::fabs(*k - want) <= 1e-6 * std::fabs(want);
}

/// x, when `v` is 1 + erf(x / sqrt(2)) (or erf(x * (1/sqrt(2))), either
/// operand order of the add and the multiply).
Value onePlusErfOf(Value v) {
  auto add = v.getDefiningOp<AddOp>();
  if (!add || !add->hasOneUse())
    return {};
  for (int i = 0; i < 2; ++i) {
    auto erf = add->getOperand(i).getDefiningOp<ErfOp>();
    if (!erf || !erf->hasOneUse() || !isConstantNear(add->getOperand(1 - i), 1.0))
      continue;
    Operation *scale = erf.getInput().getDefiningOp();
    if (!scale || !scale->hasOneUse())
      continue;
    if (auto div = dyn_cast<DivOp>(scale); div && isConstantNear(div.getRhs(), M_SQRT2))
      return div.getLhs();
    if (isa<MulOp>(scale))
      for (int j = 0; j < 2; ++j)
        if (isConstantNear(scale->getOperand(1 - j), M_SQRT1_2))
          return scale->getOperand(j);
  }
  return {};
}

/// x * (1 + erf(x / sqrt(2))) * 0.5, the product in any association ->
/// the convolution that computes x, with `gelu` set. x is the convolution's
/// result or a reshape of it (a matrix product seen as a 1x1 convolution)
/// that keeps the channel axis, read only by the GELU's two uses; the
/// convolution must have no clamp and one group (what the kernel does).
struct FoldGelu : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MulOp op, PatternRewriter &rw) const override {
    // The three factors: one operand of the root, and the two of the
    // single-use product that is its other operand.
    for (int outer = 0; outer < 2; ++outer) {
      auto inner = op->getOperand(1 - outer).getDefiningOp<MulOp>();
      if (!inner || !inner->hasOneUse())
        continue;
      Value factors[3] = {op->getOperand(outer), inner.getLhs(), inner.getRhs()};
      for (int half = 0; half < 3; ++half) {
        if (!isConstantNear(factors[half], 0.5))
          continue;
        for (int erf = 0; erf < 3; ++erf) {
          int x = 3 - half - erf;
          if (erf == half || onePlusErfOf(factors[erf]) != factors[x])
            continue;
          if (succeeded(fuse(op, factors[x], rw)))
            return success();
        }
      }
    }
    return failure();
  }

  static LogicalResult fuse(MulOp root, Value x, PatternRewriter &rw) {
    // x's two uses: the scale inside erf and one factor of the product.
    if (!x.hasNUses(2))
      return failure();
    auto reshape = x.getDefiningOp<ReshapeOp>();
    Value convResult = reshape ? reshape.getInput() : x;
    auto c = convResult.getDefiningOp<Conv2DNhwcOp>();
    if (!c || c.getGelu() || c.getGroup() != 1 || hasClamp(c) ||
        !getElementTypeOrSelf(c.getType()).isF32() ||
        (reshape && !c->hasOneUse()))
      return failure();
    auto convT = cast<RankedTensorType>(c.getType());
    auto rootT = dyn_cast<RankedTensorType>(root.getType());
    if (!rootT || rootT != x.getType())
      return failure();
    if (reshape && (rootT.getRank() == 0 || rootT.isDynamicDim(rootT.getRank() - 1) ||
                    rootT.getDimSize(rootT.getRank() - 1) != convT.getDimSize(3)))
      return failure();
    rw.setInsertionPoint(root);
    Location loc = rw.getFusedLoc({c.getLoc(), root.getLoc()});
    Value conv = Conv2DNhwcOp::create(rw, loc, c.getInput(), c.getWeight(), c.getBias(),
                                      c.getResidual(), c.getStridesAttr(), c.getPadsAttr(),
                                      c.getDilationsAttr(), c.getGroupAttr(),
                                      c.getClampMinAttr(), c.getClampMaxAttr(),
                                      rw.getUnitAttr(), IntegerAttr(), /*requant_scale=*/{},
                                      /*requant_zero_point=*/{}, /*requant_type=*/{});
    // Back to the product's shape with the reshape's own target (dims
    // known only at run time included).
    rw.replaceOp(root, reshape ? ReshapeOp::create(rw, loc, rootT, conv, reshape.getShape(),
                                                   rw.getBoolAttr(false))
                                     .getResult()
                               : conv);
    return success();
  }
};

/// matmul(x, W) with a constant 2-D W -> reshape(conv2d_nhwc(x as
/// [1, 1, rows, K], W^T as [N, K, 1, 1])).
struct MatMulToConv : OpRewritePattern<MatMulOp> {
  using OpRewritePattern::OpRewritePattern;

  /// The quantized product (8-bit A, constant s8 B, i32 result) as the
  /// integer convolution (the int8 kernel), input zero point 0: the
  /// importer subtracts A's zero point's share itself (it may be known only
  /// at run time, as DynamicQuantizeLinear's).
  static LogicalResult integerProduct(MatMulOp op, RankedTensorType lt, RankedTensorType rt,
                                      RankedTensorType outT, PatternRewriter &rw) {
    DenseElementsAttr attr;
    Type we = rt.getElementType();
    if (!we.isInteger(8) || we.isUnsignedInteger() || !matchPattern(op.getRhs(), m_Constant(&attr)))
      return failure();
    int64_t K = rt.getDimSize(0), N = rt.getDimSize(1);
    if (K == 0 || lt.getDimSize(lt.getRank() - 1) != K)
      return failure();
    SmallVector<int8_t> w;
    for (const APInt &v : attr.getValues<APInt>())
      w.push_back((int8_t)v.getSExtValue());
    SmallVector<int8_t> wt(N * K);
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n)
        wt[n * K + k] = w[k * N + n];
    auto wType = RankedTensorType::get({N, K, 1, 1}, rw.getI8Type());
    Value weight = ConstantOp::create(rw, op.getLoc(),
                                      DenseElementsAttr::get(wType, ArrayRef<int8_t>(wt)));
    return replaceByPointwiseConv(op, lt, weight, rw.getI32Type(), rw.getI64IntegerAttr(0), rw);
  }

  /// matmul(x, W) -> reshape(conv2d_nhwc(x as [1, 1, rows, K], weight
  /// [N, K, 1, 1])) with the result element type `elt` (and, for the
  /// integer form, its input zero point).
  static LogicalResult replaceByPointwiseConv(MatMulOp op, RankedTensorType lt, Value weight,
                                              Type elt, IntegerAttr zeroPoint,
                                              PatternRewriter &rw) {
    auto wt = cast<RankedTensorType>(weight.getType());
    int64_t N = wt.getDimSize(0), K = wt.getDimSize(1);
    int64_t rows = lt.hasStaticShape() ? lt.getNumElements() / K : ShapedType::kDynamic;
    Location loc = op.getLoc();
    Value x = reshapeTo(rw, loc, op.getLhs(), {1, 1, rows, K});
    auto convT = RankedTensorType::get({1, 1, rows, N}, elt);
    Value conv = Conv2DNhwcOp::create(
        rw, loc, convT, x, weight, Value(), Value(), rw.getDenseI64ArrayAttr({1, 1}),
        rw.getDenseI64ArrayAttr({0, 0, 0, 0}), rw.getDenseI64ArrayAttr({1, 1}),
        rw.getI64IntegerAttr(1), rw.getF32FloatAttr(-kInf), rw.getF32FloatAttr(kInf),
        /*gelu=*/nullptr, zeroPoint, /*requant_scale=*/{}, /*requant_zero_point=*/{},
        /*requant_type=*/{});
    rw.replaceOp(op, reshapeTo(rw, loc, conv, cast<RankedTensorType>(op.getType()).getShape(),
                               op.getLhs()));
    return success();
  }

  LogicalResult matchAndRewrite(MatMulOp op, PatternRewriter &rw) const override {
    auto lt = dyn_cast<RankedTensorType>(op.getLhs().getType());
    auto rt = dyn_cast<RankedTensorType>(op.getRhs().getType());
    auto outT = dyn_cast<RankedTensorType>(op.getType());
    // Dims known only at run time (compiled once for every shape): the
    // rows' reshape infers their count (-1); the reshape back takes the
    // left operand's leading dims.
    auto channelKnown = [](RankedTensorType t) { return !t.isDynamicDim(t.getRank() - 1); };
    if (!lt || !rt || !outT || !channelKnown(lt) || !channelKnown(outT) ||
        lt.getRank() < 2 || rt.getRank() != 2 || !rt.hasStaticShape() ||
        (outT.hasStaticShape() && outT.getNumElements() == 0))
      return failure();
    int64_t K = rt.getDimSize(0), N = rt.getDimSize(1);
    if (lt.getElementType().isInteger(8) && outT.getElementType().isInteger(32))
      return integerProduct(op, lt, rt, outT, rw);
    if (!outT.getElementType().isF32() || !lt.getElementType().isF32())
      return failure();
    SmallVector<float> w = constantValues(op.getRhs());
    if (w.empty() || K == 0 || lt.getDimSize(lt.getRank() - 1) != K)
      return failure();
    SmallVector<float> wt(N * K);
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n)
        wt[n * K + k] = w[k * N + n];
    Value weight = f32Constant(rw, op.getLoc(), {N, K, 1, 1}, wt);
    return replaceByPointwiseConv(op, lt, weight, rw.getF32Type(), IntegerAttr(), rw);
  }
};

/// A single-use reshape of a single-use conv2d_nhwc that keeps the channel
/// (last) dimension.
ReshapeOp reshapedConv(Value v) {
  auto r = v.getDefiningOp<ReshapeOp>();
  if (!r || !r->hasOneUse() || !fusableConv(r.getInput(), 2))
    return {};
  auto in = cast<RankedTensorType>(r.getInput().getType());
  auto out = dyn_cast<RankedTensorType>(r.getType());
  if (!out || out.getRank() == 0 || out.isDynamicDim(out.getRank() - 1) ||
      out.getDimSize(out.getRank() - 1) != in.getDimSize(3))
    return {};
  return r;
}

/// Moves an epilogue candidate in front of the reshape between it and a
/// convolution: relu/max/min/add/mul(reshape(conv), other) ->
/// reshape(op(conv, other')), where `other` is a constant varying along the
/// channel axis at most (it broadcasts the same way against the conv) or a
/// tensor of the result's shape (reshaped like the conv).
struct HoistEpilogueAboveReshape : RewritePattern {
  explicit HoistEpilogueAboveReshape(MLIRContext *ctx)
      : RewritePattern(MatchAnyOpTypeTag(), 1, ctx) {}
  LogicalResult matchAndRewrite(Operation *op, PatternRewriter &rw) const override {
    if (!isa<ReluOp, AddOp, MulOp, MaxOp, MinOp>(op))
      return failure();
    for (unsigned i = 0; i < op->getNumOperands(); ++i) {
      ReshapeOp r = reshapedConv(op->getOperand(i));
      if (!r || op->getResult(0).getType() != r.getType())
        continue;
      Value conv = r.getInput();
      auto convT = cast<RankedTensorType>(conv.getType());
      SmallVector<Value> operands(op->getOperands());
      operands[i] = conv;
      if (op->getNumOperands() == 2) {
        Value other = op->getOperand(1 - i);
        auto ot = dyn_cast<RankedTensorType>(other.getType());
        if (!ot)
          continue;
        bool channelConstant =
            ot.hasStaticShape() && matchPattern(other, m_Constant()) && ot.getRank() <= 4 &&
            ot.getNumElements() == (ot.getRank() ? ot.getDimSize(ot.getRank() - 1) : 1);
        if (channelConstant)
          ; // broadcasts against [1, 1, rows, C] as against the reshaped result
        else if (ot == r.getType())
          operands[1 - i] = reshapeTo(rw, op->getLoc(), other, convT.getShape());
        else
          continue;
      }
      Operation *moved = rw.clone(*op);
      moved->setOperands(operands);
      moved->getResult(0).setType(convT);
      // Back with the reshape's own target (dims known only at run time
      // included).
      rw.replaceOp(op, ReshapeOp::create(rw, op->getLoc(), r.getType(), moved->getResult(0),
                                         r.getShape(), rw.getBoolAttr(false)));
      return success();
    }
    return failure();
  }
};

struct FuseEpiloguesPass : impl::KilnFuseEpiloguesBase<FuseEpiloguesPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateFuseEpiloguePatterns(patterns);
    // An optimisation: whatever state it stops in is correct IR.
    (void)applyPatternsGreedily(getOperation(), std::move(patterns));
  }
};

} // namespace

void populateFuseEpiloguePatterns(RewritePatternSet &patterns) {
  patterns.add<MatMulToConv, HoistEpilogueAboveReshape, FoldScale, FoldAdd, FoldRelu,
               FoldClamp<MaxOp, true>, FoldClamp<MinOp, false>, FoldGelu, FoldRequantize>(
      patterns.getContext());
}

} // namespace kiln
