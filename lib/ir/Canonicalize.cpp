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

} // namespace

void PowOp::getCanonicalizationPatterns(RewritePatternSet &patterns, MLIRContext *ctx) {
  patterns.add<PowByWholeNumber>(ctx);
}
