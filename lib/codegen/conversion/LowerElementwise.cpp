// kiln elementwise ops -> linalg.generic with broadcasting indexing maps.
// One generic per op; upstream elementwise fusion merges chains afterwards.
#include "LoweringUtils.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace kiln::codegen {

Value scalarConstant(OpBuilder &b, Location loc, Type type, double value) {
  if (auto ft = dyn_cast<FloatType>(type))
    return arith::ConstantOp::create(b, loc, FloatAttr::get(ft, value));
  if (type.isIndex())
    return arith::ConstantIndexOp::create(b, loc, (int64_t)value);
  auto it = cast<IntegerType>(type);
  return arith::ConstantOp::create(
      b, loc, IntegerAttr::get(it, APInt(it.getWidth(), (int64_t)value, /*isSigned=*/true)));
}

Value lowestValue(OpBuilder &b, Location loc, Type type, bool isUnsigned) {
  if (auto ft = dyn_cast<FloatType>(type))
    return arith::ConstantOp::create(
        b, loc, FloatAttr::get(ft, APFloat::getInf(ft.getFloatSemantics(), true)));
  auto it = cast<IntegerType>(type);
  APInt v = it.getWidth() == 1 || isUnsigned ? APInt(it.getWidth(), 0)
                                             : APInt::getSignedMinValue(it.getWidth());
  return arith::ConstantOp::create(b, loc, IntegerAttr::get(it, v));
}

Value highestValue(OpBuilder &b, Location loc, Type type, bool isUnsigned) {
  if (auto ft = dyn_cast<FloatType>(type))
    return arith::ConstantOp::create(
        b, loc, FloatAttr::get(ft, APFloat::getInf(ft.getFloatSemantics(), false)));
  auto it = cast<IntegerType>(type);
  APInt v = it.getWidth() == 1 ? APInt(1, 1)
            : isUnsigned       ? APInt::getMaxValue(it.getWidth())
                               : APInt::getSignedMaxValue(it.getWidth());
  return arith::ConstantOp::create(b, loc, IntegerAttr::get(it, v));
}

bool isUnsignedTensor(Value v) {
  auto it = dyn_cast<IntegerType>(cast<ShapedType>(v.getType()).getElementType());
  return it && it.isUnsigned();
}

RankedTensorType signlessType(RankedTensorType t) {
  auto it = dyn_cast<IntegerType>(t.getElementType());
  if (!it || it.isSignless())
    return t;
  return t.clone(IntegerType::get(t.getContext(), it.getWidth()));
}

Value asSignless(OpBuilder &b, Location loc, Value v) {
  auto t = cast<RankedTensorType>(v.getType());
  auto s = signlessType(t);
  return s == t ? v : (Value)tensor::BitcastOp::create(b, loc, s, v);
}

Value restoreType(OpBuilder &b, Location loc, Value v, Type original) {
  return v.getType() == original ? v : (Value)tensor::BitcastOp::create(b, loc, original, v);
}

Value emptyTensor(OpBuilder &b, Location loc, RankedTensorType type, ValueRange dynamicSizes) {
  return tensor::EmptyOp::create(b, loc, type.getShape(), type.getElementType(), dynamicSizes);
}

Value filledTensor(OpBuilder &b, Location loc, RankedTensorType type, Value scalar,
                   ValueRange dynamicSizes) {
  return linalg::FillOp::create(b, loc, scalar, emptyTensor(b, loc, type, dynamicSizes))
      .getResult(0);
}

AffineMap broadcastMap(MLIRContext *ctx, ArrayRef<int64_t> operandShape,
                       ArrayRef<int64_t> resultShape) {
  SmallVector<AffineExpr> exprs;
  size_t offset = resultShape.size() - operandShape.size();
  for (size_t i = 0; i < operandShape.size(); ++i) {
    if (operandShape[i] == 1 && resultShape[offset + i] != 1)
      exprs.push_back(getAffineConstantExpr(0, ctx));
    else
      exprs.push_back(getAffineDimExpr(offset + i, ctx));
  }
  return AffineMap::get(resultShape.size(), 0, exprs, ctx);
}

Value buildElementwise(OpBuilder &b, Location loc, RankedTensorType resultType,
                       ValueRange inputs, ScalarBuilder body, ValueRange dynamicSizes) {
  MLIRContext *ctx = b.getContext();
  SmallVector<AffineMap> maps;
  for (Value in : inputs)
    maps.push_back(broadcastMap(ctx, tensorType(in).getShape(), resultType.getShape()));
  maps.push_back(AffineMap::getMultiDimIdentityMap(resultType.getRank(), ctx));
  SmallVector<utils::IteratorType> iters(resultType.getRank(), utils::IteratorType::parallel);
  auto generic = linalg::GenericOp::create(
      b, loc, resultType, inputs, emptyTensor(b, loc, resultType, dynamicSizes), maps, iters,
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        Value r = body(nb, nloc, args.drop_back());
        linalg::YieldOp::create(nb, nloc, r);
      });
  return generic.getResult(0);
}

namespace {

bool isFloat(Type t) { return isa<FloatType>(t); }

/// Integer division and remainder trap on x86 when the divisor is 0, or
/// for INT_MIN / -1. ONNX leaves both undefined; Kiln defines them rather
/// than let a model crash its host: the divisor becomes 1 there, and the
/// caller gives 0 where it was 0 (INT_MIN / -1 wraps to INT_MIN).
/// Returns the safe divisor and whether the real one was 0.
std::pair<Value, Value> safeDivisor(OpBuilder &b, Location loc, Value x, Value d,
                                    bool isUnsigned) {
  auto t = cast<IntegerType>(d.getType());
  auto constant = [&](const APInt &v) -> Value {
    return arith::ConstantOp::create(b, loc, t, b.getIntegerAttr(t, v));
  };
  unsigned w = t.getWidth();
  Value byZero =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, d, constant(APInt(w, 0)));
  Value bad = byZero;
  if (!isUnsigned && w > 1) {
    Value minX = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, x,
                                       constant(APInt::getSignedMinValue(w)));
    Value minusOne = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, d,
                                           constant(APInt::getAllOnes(w)));
    bad = arith::OrIOp::create(b, loc, bad, arith::AndIOp::create(b, loc, minX, minusOne));
  }
  return {arith::SelectOp::create(b, loc, bad, constant(APInt(w, 1)), d), byZero};
}

Value emitCompare(OpBuilder &b, Location loc, Value l, Value r, arith::CmpFPredicate fp,
                  arith::CmpIPredicate ip) {
  if (isFloat(l.getType()))
    return arith::CmpFOp::create(b, loc, fp, l, r);
  return arith::CmpIOp::create(b, loc, ip, l, r);
}

/// Converts one scalar between element types with ONNX Cast semantics.
/// Integers are signless here; the flags say which side is unsigned.
Value emitCast(OpBuilder &b, Location loc, Value v, Type to, bool fromUnsigned, bool toUnsigned) {
  Type from = v.getType();
  if (from == to)
    return v;
  bool fromBool = from.isInteger(1) || fromUnsigned, toBool = to.isInteger(1);
  if (isFloat(from) && isFloat(to))
    return from.getIntOrFloatBitWidth() < to.getIntOrFloatBitWidth()
               ? (Value)arith::ExtFOp::create(b, loc, to, v)
               : (Value)arith::TruncFOp::create(b, loc, to, v);
  if (isFloat(from)) {
    if (toBool)
      return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNE, v,
                                   scalarConstant(b, loc, from, 0.0));
    return toUnsigned ? (Value)arith::FPToUIOp::create(b, loc, to, v)
                      : (Value)arith::FPToSIOp::create(b, loc, to, v);
  }
  if (isFloat(to))
    return fromBool ? (Value)arith::UIToFPOp::create(b, loc, to, v)
                    : (Value)arith::SIToFPOp::create(b, loc, to, v);
  if (toBool)
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, v,
                                 scalarConstant(b, loc, from, 0));
  unsigned fw = from.getIntOrFloatBitWidth(), tw = to.getIntOrFloatBitWidth();
  if (fw > tw)
    return arith::TruncIOp::create(b, loc, to, v);
  return fromBool ? (Value)arith::ExtUIOp::create(b, loc, to, v)
                  : (Value)arith::ExtSIOp::create(b, loc, to, v);
}

/// The scalar computation of one kiln elementwise op, or null if the
/// element type is not supported by that op. `u` says the integer operands
/// are unsigned; `uOut` the same of the result.
Value emitScalar(Operation *op, OpBuilder &b, Location loc, ValueRange a, Type resultElt, bool u,
                 bool uOut) {
  Value x = a[0];
  Type t = x.getType();
  bool f = isFloat(t);
  auto c = [&](double v) { return scalarConstant(b, loc, t, v); };
  // No operand is ever NaN (markNanFreeClamps): the flag lets LLVM emit one
  // max/min instruction instead of three.
  auto fm = arith::FastMathFlagsAttr::get(
      b.getContext(), op->hasAttr(kNanFreeAttr) ? arith::FastMathFlags::nnan
                                                : arith::FastMathFlags::none);
  return llvm::TypeSwitch<Operation *, Value>(op)
      .Case([&](NegOp) -> Value {
        return f ? (Value)arith::NegFOp::create(b, loc, x)
                 : (Value)arith::SubIOp::create(b, loc, c(0), x);
      })
      .Case([&](AbsOp) -> Value {
        return f ? (Value)math::AbsFOp::create(b, loc, x) : (Value)math::AbsIOp::create(b, loc, x);
      })
      .Case([&](ExpOp) -> Value { return f ? math::ExpOp::create(b, loc, x) : Value(); })
      .Case([&](LogOp) -> Value { return f ? math::LogOp::create(b, loc, x) : Value(); })
      .Case([&](SqrtOp) -> Value { return f ? math::SqrtOp::create(b, loc, x) : Value(); })
      .Case([&](ReluOp) -> Value {
        return f   ? (Value)arith::MaximumFOp::create(b, loc, x, c(0), fm)
               : u ? x
                   : (Value)arith::MaxSIOp::create(b, loc, x, c(0));
      })
      .Case([&](SigmoidOp) -> Value {
        if (!f)
          return {};
        Value e = math::ExpOp::create(b, loc, arith::NegFOp::create(b, loc, x));
        return arith::DivFOp::create(b, loc, c(1), arith::AddFOp::create(b, loc, c(1), e));
      })
      .Case([&](TanhOp) -> Value { return f ? math::TanhOp::create(b, loc, x) : Value(); })
      .Case([&](ErfOp) -> Value { return f ? math::ErfOp::create(b, loc, x) : Value(); })
      .Case([&](FloorOp) -> Value { return f ? math::FloorOp::create(b, loc, x) : Value(); })
      .Case([&](CeilOp) -> Value { return f ? math::CeilOp::create(b, loc, x) : Value(); })
      .Case([&](RoundOp) -> Value { return f ? math::RoundEvenOp::create(b, loc, x) : Value(); })
      .Case([&](ReciprocalOp) -> Value {
        return f ? arith::DivFOp::create(b, loc, c(1), x) : Value();
      })
      .Case([&](SignOp) -> Value {
        Value pos = emitCompare(b, loc, x, c(0), arith::CmpFPredicate::OGT,
                                arith::CmpIPredicate::sgt);
        Value neg = emitCompare(b, loc, x, c(0), arith::CmpFPredicate::OLT,
                                arith::CmpIPredicate::slt);
        Value r = arith::SelectOp::create(b, loc, neg, c(-1), c(0));
        return arith::SelectOp::create(b, loc, pos, c(1), r);
      })
      .Case([&](NotOp) -> Value {
        return t.isInteger(1) ? arith::XOrIOp::create(b, loc, x, c(1)) : Value();
      })
      .Case([&](SinOp) -> Value { return f ? math::SinOp::create(b, loc, x) : Value(); })
      .Case([&](CosOp) -> Value { return f ? math::CosOp::create(b, loc, x) : Value(); })
      .Case([&](TanOp) -> Value { return f ? math::TanOp::create(b, loc, x) : Value(); })
      .Case([&](AsinOp) -> Value { return f ? math::AsinOp::create(b, loc, x) : Value(); })
      .Case([&](AcosOp) -> Value { return f ? math::AcosOp::create(b, loc, x) : Value(); })
      .Case([&](AtanOp) -> Value { return f ? math::AtanOp::create(b, loc, x) : Value(); })
      .Case([&](SinhOp) -> Value { return f ? math::SinhOp::create(b, loc, x) : Value(); })
      .Case([&](CoshOp) -> Value { return f ? math::CoshOp::create(b, loc, x) : Value(); })
      .Case([&](AsinhOp) -> Value { return f ? math::AsinhOp::create(b, loc, x) : Value(); })
      .Case([&](AcoshOp) -> Value { return f ? math::AcoshOp::create(b, loc, x) : Value(); })
      .Case([&](AtanhOp) -> Value { return f ? math::AtanhOp::create(b, loc, x) : Value(); })
      .Case([&](AddOp) -> Value {
        return f ? (Value)arith::AddFOp::create(b, loc, x, a[1])
                 : (Value)arith::AddIOp::create(b, loc, x, a[1]);
      })
      .Case([&](SubOp) -> Value {
        return f ? (Value)arith::SubFOp::create(b, loc, x, a[1])
                 : (Value)arith::SubIOp::create(b, loc, x, a[1]);
      })
      .Case([&](MulOp) -> Value {
        return f ? (Value)arith::MulFOp::create(b, loc, x, a[1])
                 : (Value)arith::MulIOp::create(b, loc, x, a[1]);
      })
      .Case([&](DivOp) -> Value {
        if (f)
          return arith::DivFOp::create(b, loc, x, a[1]);
        auto [d, byZero] = safeDivisor(b, loc, x, a[1], u);
        Value q = u ? (Value)arith::DivUIOp::create(b, loc, x, d)
                    : (Value)arith::DivSIOp::create(b, loc, x, d);
        return arith::SelectOp::create(b, loc, byZero, c(0), q);
      })
      .Case([&](PowOp) -> Value {
        return f ? (Value)math::PowFOp::create(b, loc, x, a[1])
                 : (Value)math::IPowIOp::create(b, loc, x, a[1]);
      })
      .Case([&](MaxOp) -> Value {
        return f   ? (Value)arith::MaximumFOp::create(b, loc, x, a[1], fm)
               : u ? (Value)arith::MaxUIOp::create(b, loc, x, a[1])
                   : (Value)arith::MaxSIOp::create(b, loc, x, a[1]);
      })
      .Case([&](MinOp) -> Value {
        return f   ? (Value)arith::MinimumFOp::create(b, loc, x, a[1], fm)
               : u ? (Value)arith::MinUIOp::create(b, loc, x, a[1])
                   : (Value)arith::MinSIOp::create(b, loc, x, a[1]);
      })
      .Case([&](RemOp) -> Value {
        if (f)
          return {};
        auto [d, byZero] = safeDivisor(b, loc, x, a[1], u);
        if (u)
          return arith::SelectOp::create(b, loc, byZero, c(0),
                                         arith::RemUIOp::create(b, loc, x, d));
        // Python-style modulo: the result takes the divisor's sign.
        Value r = arith::SelectOp::create(b, loc, byZero, c(0),
                                          arith::RemSIOp::create(b, loc, x, d));
        Value nonZero = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, r, c(0));
        Value rNeg = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, r, c(0));
        Value dNeg = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, a[1], c(0));
        Value differ = arith::XOrIOp::create(b, loc, rNeg, dNeg);
        Value fix = arith::AndIOp::create(b, loc, nonZero, differ);
        return arith::SelectOp::create(b, loc, fix, arith::AddIOp::create(b, loc, r, a[1]), r);
      })
      .Case([&](FRemOp) -> Value {
        if (f)
          return arith::RemFOp::create(b, loc, x, a[1]);
        auto [d, byZero] = safeDivisor(b, loc, x, a[1], u);
        Value r = u ? (Value)arith::RemUIOp::create(b, loc, x, d)
                    : (Value)arith::RemSIOp::create(b, loc, x, d);
        return arith::SelectOp::create(b, loc, byZero, c(0), r);
      })
      .Case([&](AndOp) -> Value { return f ? Value() : arith::AndIOp::create(b, loc, x, a[1]); })
      .Case([&](OrOp) -> Value { return f ? Value() : arith::OrIOp::create(b, loc, x, a[1]); })
      .Case([&](XorOp) -> Value { return f ? Value() : arith::XOrIOp::create(b, loc, x, a[1]); })
      .Case([&](EqualOp) -> Value {
        return emitCompare(b, loc, x, a[1], arith::CmpFPredicate::OEQ, arith::CmpIPredicate::eq);
      })
      .Case([&](LessOp) -> Value {
        return emitCompare(b, loc, x, a[1], arith::CmpFPredicate::OLT,
                           u ? arith::CmpIPredicate::ult : arith::CmpIPredicate::slt);
      })
      .Case([&](LessEqualOp) -> Value {
        return emitCompare(b, loc, x, a[1], arith::CmpFPredicate::OLE,
                           u ? arith::CmpIPredicate::ule : arith::CmpIPredicate::sle);
      })
      .Case([&](GreaterOp) -> Value {
        return emitCompare(b, loc, x, a[1], arith::CmpFPredicate::OGT,
                           u ? arith::CmpIPredicate::ugt : arith::CmpIPredicate::sgt);
      })
      .Case([&](GreaterEqualOp) -> Value {
        return emitCompare(b, loc, x, a[1], arith::CmpFPredicate::OGE,
                           u ? arith::CmpIPredicate::uge : arith::CmpIPredicate::sge);
      })
      .Case([&](SelectOp) -> Value { return arith::SelectOp::create(b, loc, x, a[1], a[2]); })
      .Case([&](CastOp) -> Value { return emitCast(b, loc, x, resultElt, u, uOut); })
      .Case([&](ShiftLeftOp) -> Value { return f ? Value() : arith::ShLIOp::create(b, loc, x, a[1]); })
      .Case([&](ShiftRightOp) -> Value {
        return f ? Value() : arith::ShRUIOp::create(b, loc, x, a[1]);
      })
      .Default([](Operation *) { return Value(); });
}

/// Lowers any elementwise kiln op (they all have one result).
struct ElementwisePattern : public RewritePattern {
  ElementwisePattern(MLIRContext *ctx, StringRef name)
      : RewritePattern(name, /*benefit=*/1, ctx) {}

  LogicalResult matchAndRewrite(Operation *op, PatternRewriter &rw) const override {
    auto originalType = cast<RankedTensorType>(op->getResult(0).getType());
    auto resultType = signlessType(originalType);
    bool u = llvm::any_of(op->getOperands(), isUnsignedTensor);
    bool uOut = isUnsignedTensor(op->getResult(0));
    bool unsupported = false;
    // Probe the scalar builder on a throwaway block first, so that an
    // unsupported element type fails the match instead of leaving a
    // half-built generic behind.
    {
      OpBuilder probe(op->getContext());
      Block block;
      SmallVector<Value> args;
      for (Value v : op->getOperands())
        args.push_back(
            block.addArgument(signlessType(tensorType(v)).getElementType(), op->getLoc()));
      probe.setInsertionPointToStart(&block);
      unsupported =
          !emitScalar(op, probe, op->getLoc(), args, resultType.getElementType(), u, uOut);
      while (!block.empty())
        block.back().erase();
    }
    if (unsupported)
      return rw.notifyMatchFailure(op, "element type not supported by this op");
    SmallVector<Value> inputs;
    for (Value v : op->getOperands())
      inputs.push_back(asSignless(rw, op->getLoc(), v));
    Value r = buildElementwise(
        rw, op->getLoc(), resultType, inputs,
        [&](OpBuilder &b, Location loc, ValueRange args) {
          return emitScalar(op, b, loc, args, resultType.getElementType(), u, uOut);
        },
        dynamicSizes(rw, op->getLoc(), op->getResult(0)));
    rw.replaceOp(op, restoreType(rw, op->getLoc(), r, originalType));
    return success();
  }
};

} // namespace

static ArrayRef<StringRef> elementwiseOpNames() {
  static const SmallVector<StringRef> names{NegOp::getOperationName(), AbsOp::getOperationName(), ExpOp::getOperationName(),
        LogOp::getOperationName(), SqrtOp::getOperationName(), ReluOp::getOperationName(),
        SigmoidOp::getOperationName(), TanhOp::getOperationName(), ErfOp::getOperationName(),
        FloorOp::getOperationName(), CeilOp::getOperationName(), RoundOp::getOperationName(),
        ReciprocalOp::getOperationName(), SignOp::getOperationName(), NotOp::getOperationName(),
        SinOp::getOperationName(), CosOp::getOperationName(), TanOp::getOperationName(),
        AsinOp::getOperationName(), AcosOp::getOperationName(), AtanOp::getOperationName(),
        SinhOp::getOperationName(), CoshOp::getOperationName(), AsinhOp::getOperationName(),
        AcoshOp::getOperationName(), AtanhOp::getOperationName(), AddOp::getOperationName(),
        SubOp::getOperationName(), MulOp::getOperationName(), DivOp::getOperationName(),
        PowOp::getOperationName(), MaxOp::getOperationName(), MinOp::getOperationName(),
        RemOp::getOperationName(), FRemOp::getOperationName(), AndOp::getOperationName(),
        OrOp::getOperationName(), XorOp::getOperationName(), EqualOp::getOperationName(),
        LessOp::getOperationName(), LessEqualOp::getOperationName(),
        GreaterOp::getOperationName(), GreaterEqualOp::getOperationName(),
        SelectOp::getOperationName(), CastOp::getOperationName(),
        ShiftLeftOp::getOperationName(), ShiftRightOp::getOperationName()};
  return names;
}

bool isElementwiseOp(Operation *op) {
  return llvm::is_contained(elementwiseOpNames(), op->getName().getStringRef());
}

void populateElementwiseLoweringPatterns(RewritePatternSet &patterns) {
  for (StringRef name : elementwiseOpNames())
    patterns.add<ElementwisePattern>(patterns.getContext(), name);
}

} // namespace kiln::codegen
