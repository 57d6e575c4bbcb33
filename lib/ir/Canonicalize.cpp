// Canonicalization patterns of kiln ops (rewrites that create ops; the
// folders in Folders.cpp only return existing values or constants).
#include "kiln/IR/KilnDialect.h"

#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"

#include <cmath>

using namespace mlir;
using namespace kiln;

namespace {

/// The value of a splat constant of any float or integer type, if it is a
/// small whole number.
std::optional<int64_t> splatWholeNumber(Value v) {
  DenseElementsAttr attr;
  if (!matchPattern(v, m_Constant(&attr)) || !attr.isSplat())
    return std::nullopt;
  Type t = attr.getElementType();
  if (isa<FloatType>(t)) {
    llvm::APFloat f = attr.getSplatValue<llvm::APFloat>();
    bool lossy = false;
    f.convert(llvm::APFloat::IEEEdouble(), llvm::APFloat::rmNearestTiesToEven, &lossy);
    double d = f.convertToDouble();
    if (!(d >= -8 && d <= 8) || d != std::trunc(d))
      return std::nullopt;
    return (int64_t)d;
  }
  if (auto it = dyn_cast<IntegerType>(t); it && it.getWidth() > 1)
    return attr.getSplatValue<APInt>().getSExtValue();
  return std::nullopt;
}

/// pow(x, c) for a splat c of 1, 2 or 3, when the exponent does not
/// broadcast x: x, x*x, (x*x)*x. Two and three match ONNX Runtime's own
/// special cases; other exponents keep powf, whose rounding a product chain
/// would not reproduce.
struct PowByWholeNumber : OpRewritePattern<PowOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(PowOp op, PatternRewriter &rw) const override {
    Value x = op.getLhs();
    // No broadcast by the exponent: one element, of no higher rank than a
    // ranked x (type equality alone would let an unranked x through).
    auto xType = dyn_cast<RankedTensorType>(x.getType());
    auto cType = dyn_cast<RankedTensorType>(op.getRhs().getType());
    if (!xType || !cType || x.getType() != op.getType() || !cType.hasStaticShape() ||
        cType.getNumElements() != 1 || cType.getRank() > xType.getRank())
      return failure();
    std::optional<int64_t> n = splatWholeNumber(op.getRhs());
    if (!n || *n < 1 || *n > 3)
      return failure();
    Value r = x;
    if (*n >= 2)
      r = MulOp::create(rw, op.getLoc(), op.getType(), x, x);
    if (*n == 3)
      r = MulOp::create(rw, op.getLoc(), op.getType(), r, x);
    rw.replaceOp(op, r);
    return success();
  }
};

/// avg_pool(pad(x, zeros around the spatial dims)) with no pads of its own
/// -> avg_pool(x) with those pads, counted in the divisor. The same sums
/// and divisors: every window of the padded tensor lies inside it, so the
/// old divisor is the window's size, and count_include_pad counts the same
/// zeros. PyTorch exports avg_pool2d(padding=p) this way (Inception's
/// branch pools); as a Pad, it stopped the pool from reaching the NHWC
/// pooling kernel (kiln-convert-layout moves a pool whose input is a
/// transpose) and ran as a loop nest, 14 % of Inception-v3's time.
struct ZeroPadIntoAvgPool : OpRewritePattern<AvgPoolOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AvgPoolOp op, PatternRewriter &rw) const override {
    auto pad = op.getInput().getDefiningOp<PadOp>();
    if (!pad || pad.getMode() != "constant" || op.getChannelsLast() ||
        llvm::any_of(op.getPads(), [](int64_t p) { return p != 0; }) ||
        llvm::any_of(op.getCeilPads(), [](int64_t p) { return p != 0; }))
      return failure();
    auto xType = dyn_cast<RankedTensorType>(pad.getInput().getType());
    DenseIntElementsAttr pads;
    DenseElementsAttr value;
    if (!xType || !matchPattern(pad.getPads(), m_Constant(&pads)) ||
        !matchPattern(pad.getValue(), m_Constant(&value)) || !value.isSplat())
      return failure();
    Type elt = value.getElementType();
    if (!isa<FloatType>(elt) || !value.getSplatValue<llvm::APFloat>().isZero())
      return failure();
    int64_t rank = xType.getRank(), spatial = rank - 2;
    SmallVector<int64_t> p;
    for (const APInt &v : pads.getValues<APInt>())
      p.push_back(v.getSExtValue());
    if ((int64_t)p.size() != 2 * rank || p[0] || p[1] || p[rank] || p[rank + 1] ||
        llvm::any_of(p, [](int64_t v) { return v < 0; }))
      return failure();
    SmallVector<int64_t> poolPads;
    for (int64_t i = 0; i < spatial; ++i)
      poolPads.push_back(p[2 + i]);
    for (int64_t i = 0; i < spatial; ++i)
      poolPads.push_back(p[rank + 2 + i]);
    rw.replaceOpWithNewOp<AvgPoolOp>(op, op.getType(), pad.getInput(), op.getKernelShapeAttr(),
                                     op.getStridesAttr(), rw.getDenseI64ArrayAttr(poolPads),
                                     op.getCeilPadsAttr(), rw.getBoolAttr(true), UnitAttr());
    return success();
  }
};

/// A convolution whose kernel taps along some axis only ever read padding
/// (for every output position) gets a kernel cropped to the taps that do
/// read the input, with the pads moved so that each output reads the same
/// elements: the same sums, fewer zeros multiplied. Along an axis of input
/// size n, output size m, stride s, dilation d and begin pad p, tap t
/// reads i s + t d - p for i in [0, m): it reads the input for some i iff
/// t d - p < n and (m - 1) s + t d - p >= 0, a contiguous range [lo, hi].
/// Only where the new pads are not negative (a tap range that starts past
/// the begin pad would need a crop) and every axis keeps a tap. DeepLab-v3's
/// ASPP convolutions dilated by 24 and 36 on a 14x14 map become 1x1 ones
/// (1.72x ONNX Runtime's time before).
struct DropDeadConvTaps : OpRewritePattern<ConvOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ConvOp op, PatternRewriter &rw) const override {
    auto x = dyn_cast<RankedTensorType>(op.getInput().getType());
    auto w = dyn_cast<RankedTensorType>(op.getWeight().getType());
    auto y = dyn_cast<RankedTensorType>(op.getType());
    if (!x || !w || !y || !x.hasStaticShape() || !w.hasStaticShape() || !y.hasStaticShape() ||
        x.getRank() < 3 || x.getNumElements() == 0 || y.getNumElements() == 0)
      return failure();
    int64_t spatial = x.getRank() - 2;
    ArrayRef<int64_t> strides = op.getStrides(), pads = op.getPads(), dil = op.getDilations();
    SmallVector<int64_t> starts, ends, newPads(2 * spatial);
    bool cropped = false;
    for (int64_t a = 0; a < spatial; ++a) {
      int64_t n = x.getDimSize(2 + a), m = y.getDimSize(2 + a), k = w.getDimSize(2 + a);
      int64_t s = strides[a], d = dil[a], p = pads[a];
      int64_t lo = k, hi = -1;
      for (int64_t t = 0; t < k; ++t)
        if (t * d - p < n && (m - 1) * s + t * d - p >= 0)
          lo = std::min(lo, t), hi = t;
      if (hi < lo)
        return failure(); // no tap reads the input: leave it
      int64_t begin = p - lo * d;
      int64_t end = (m - 1) * s + (hi - lo) * d + 1 - n - begin;
      if (begin < 0 || end < 0)
        return failure();
      newPads[a] = begin;
      newPads[spatial + a] = end;
      starts.push_back(lo);
      ends.push_back(hi + 1);
      cropped |= lo > 0 || hi < k - 1;
    }
    if (!cropped)
      return failure();
    Location loc = op.getLoc();
    auto i64s = [&](ArrayRef<int64_t> v) -> Value {
      auto t = RankedTensorType::get({(int64_t)v.size()}, rw.getI64Type());
      return ConstantOp::create(rw, loc, t, DenseIntElementsAttr::get(t, v));
    };
    SmallVector<int64_t> axes, shape(w.getShape());
    for (int64_t a = 0; a < spatial; ++a) {
      axes.push_back(2 + a);
      shape[2 + a] = ends[a] - starts[a];
    }
    Value kernel = SliceOp::create(rw, loc, w.clone(shape), op.getWeight(), i64s(starts),
                                   i64s(ends), i64s(axes),
                                   i64s(SmallVector<int64_t>(spatial, 1)));
    rw.replaceOpWithNewOp<ConvOp>(op, y, op.getInput(), kernel, op.getBias(), op.getStridesAttr(),
                                  rw.getDenseI64ArrayAttr(newPads), op.getDilationsAttr(),
                                  op.getGroupAttr(), op.getInputZeroPointAttr());
    return success();
  }
};

} // namespace

void ConvOp::getCanonicalizationPatterns(RewritePatternSet &patterns, MLIRContext *ctx) {
  patterns.add<DropDeadConvTaps>(ctx);
}

void PowOp::getCanonicalizationPatterns(RewritePatternSet &patterns, MLIRContext *ctx) {
  patterns.add<PowByWholeNumber>(ctx);
}

void AvgPoolOp::getCanonicalizationPatterns(RewritePatternSet &patterns, MLIRContext *ctx) {
  patterns.add<ZeroPadIntoAvgPool>(ctx);
}
