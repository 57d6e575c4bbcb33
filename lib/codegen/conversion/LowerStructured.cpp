// Contractions, convolutions, pooling and reductions -> linalg.generic.
//
// Loop order matters for the naive path: each generic lists its reduction
// dims before the innermost output dim, so that after lowering to loops the
// innermost loop walks the output contiguously and LLVM can vectorize it.
#include "LoweringUtils.h"

#include "mlir/Dialect/Utils/StructuredOpsUtils.h"

using namespace mlir;

namespace kiln::codegen {
namespace {

using utils::IteratorType;

Value mulAdd(OpBuilder &b, Location loc, Value acc, Value x, Value y) {
  if (isa<FloatType>(acc.getType()))
    return arith::AddFOp::create(b, loc, acc, arith::MulFOp::create(b, loc, x, y));
  return arith::AddIOp::create(b, loc, acc, arith::MulIOp::create(b, loc, x, y));
}

LogicalResult lowerMatMul(MatMulOp op, PatternRewriter &rw) {
  Location loc = op.getLoc();
  MLIRContext *ctx = rw.getContext();
  auto lt = tensorType(op.getLhs()), rt = tensorType(op.getRhs());
  auto outT = cast<RankedTensorType>(op.getType());
  bool lhsVec = lt.getRank() == 1, rhsVec = rt.getRank() == 1;
  int64_t batch = outT.getRank() - (lhsVec ? 0 : 1) - (rhsVec ? 0 : 1);
  // Dims: batch..., [m], k, [n]  (k before n: see the file comment).
  int64_t nd = 0;
  SmallVector<AffineExpr> batchDims;
  for (int64_t i = 0; i < batch; ++i)
    batchDims.push_back(getAffineDimExpr(nd++, ctx));
  AffineExpr m = lhsVec ? AffineExpr() : getAffineDimExpr(nd++, ctx);
  AffineExpr k = getAffineDimExpr(nd++, ctx);
  AffineExpr n = rhsVec ? AffineExpr() : getAffineDimExpr(nd++, ctx);
  ArrayRef<int64_t> outBatch = outT.getShape().take_front(batch);

  auto operandMap = [&](RankedTensorType t, bool isLhs) {
    SmallVector<AffineExpr> e;
    int64_t opBatch = t.getRank() - 2;
    if ((isLhs && lhsVec) || (!isLhs && rhsVec))
      return AffineMap::get(nd, 0, {k}, ctx);
    for (int64_t i = 0; i < opBatch; ++i) {
      int64_t outIdx = batch - opBatch + i;
      e.push_back(t.getDimSize(i) == 1 && outBatch[outIdx] != 1
                      ? getAffineConstantExpr(0, ctx)
                      : batchDims[outIdx]);
    }
    if (isLhs) {
      e.push_back(m);
      e.push_back(k);
    } else {
      e.push_back(k);
      e.push_back(n);
    }
    return AffineMap::get(nd, 0, e, ctx);
  };
  SmallVector<AffineExpr> outExprs(batchDims);
  if (m)
    outExprs.push_back(m);
  if (n)
    outExprs.push_back(n);
  SmallVector<AffineMap> maps{operandMap(lt, true), operandMap(rt, false),
                              AffineMap::get(nd, 0, outExprs, ctx)};
  SmallVector<IteratorType> iters(nd, IteratorType::parallel);
  iters[batch + (lhsVec ? 0 : 1)] = IteratorType::reduction;
  Value init = filledTensor(rw, loc, outT, scalarConstant(rw, loc, outT.getElementType(), 0));
  // 8-bit operands of an i32 product (a quantized one): each extended to
  // i32 (u8 with zeros, s8 with its sign).
  Type elt = outT.getElementType();
  bool widen = elt.isInteger(32) && lt.getElementType().isInteger(8);
  bool lhsUnsigned = lt.getElementType().isUnsignedInteger(),
       rhsUnsigned = rt.getElementType().isUnsignedInteger();
  Value lhs = widen ? asSignless(rw, loc, op.getLhs()) : op.getLhs();
  Value rhs = widen ? asSignless(rw, loc, op.getRhs()) : op.getRhs();
  auto g = linalg::GenericOp::create(
      rw, loc, outT, ValueRange{lhs, rhs}, init, maps, iters,
      [&](OpBuilder &b, Location l, ValueRange a) {
        Value x = a[0], y = a[1];
        if (widen) {
          x = lhsUnsigned ? (Value)arith::ExtUIOp::create(b, l, elt, x)
                          : (Value)arith::ExtSIOp::create(b, l, elt, x);
          y = rhsUnsigned ? (Value)arith::ExtUIOp::create(b, l, elt, y)
                          : (Value)arith::ExtSIOp::create(b, l, elt, y);
        }
        linalg::YieldOp::create(b, l, mulAdd(b, l, a[2], x, y));
      });
  rw.replaceOp(op, g.getResult(0));
  return success();
}

/// Splits dim 1 of a static tensor of rank r into (groups, dim/groups).
Value splitChannels(OpBuilder &b, Location loc, Value v, int64_t dim, int64_t groups) {
  auto t = tensorType(v);
  SmallVector<int64_t> shape(t.getShape());
  int64_t c = shape[dim];
  shape[dim] = c / groups;
  shape.insert(shape.begin() + dim, groups);
  SmallVector<ReassociationIndices> reassoc;
  for (int64_t i = 0, j = 0; i < t.getRank(); ++i) {
    if (i == dim) {
      reassoc.push_back({j, j + 1});
      j += 2;
    } else {
      reassoc.push_back({j++});
    }
  }
  return tensor::ExpandShapeOp::create(b, loc, RankedTensorType::get(shape, t.getElementType()),
                                       v, reassoc);
}

LogicalResult lowerConv(ConvOp op, PatternRewriter &rw) {
  Location loc = op.getLoc();
  MLIRContext *ctx = rw.getContext();
  auto outT = cast<RankedTensorType>(op.getType());
  auto wt = tensorType(op.getWeight());
  Type elt = outT.getElementType();
  int64_t spatial = outT.getRank() - 2, G = op.getGroup();
  int64_t F = wt.getDimSize(0), Cg = wt.getDimSize(1), Fg = F / G;
  if (F % G)
    return op.emitOpError("output channels are not divisible by group");

  // The integer form (8-bit input, i8 weights, i32 result): padding reads
  // the input zero point, and each product is (x - zero point) * w in i32.
  Type inElt = getElementTypeOrSelf(op.getInput().getType());
  bool quantized = inElt.isInteger(8) && elt.isInteger(32);
  bool unsignedInput = quantized && inElt.isUnsignedInteger();
  int64_t zeroPoint = op.getInputZeroPoint().value_or(0);
  Value input = quantized ? asSignless(rw, loc, op.getInput()) : op.getInput();
  input = padSpatial(rw, loc, input, op.getPads(),
                     quantized ? scalarConstant(rw, loc, rw.getI8Type(), (int8_t)(zeroPoint & 0xff))
                               : scalarConstant(rw, loc, elt, 0));
  input = splitChannels(rw, loc, input, 1, G);   // N, G, Cg, spatial...
  Value weight = splitChannels(rw, loc, op.getWeight(), 0, G); // G, Fg, Cg, k...

  // Output init: bias broadcast over N, spatial (or zeros), shaped N,G,Fg,o...
  SmallVector<int64_t> outShape{outT.getDimSize(0), G, Fg};
  llvm::append_range(outShape, outT.getShape().drop_front(2));
  auto groupedT = RankedTensorType::get(outShape, elt);
  Value init;
  if (Value bias = op.getBias()) {
    Value b2 = tensor::ExpandShapeOp::create(rw, loc, RankedTensorType::get({G, Fg}, elt), bias,
                                             SmallVector<ReassociationIndices>{{0, 1}});
    SmallVector<AffineExpr> e{getAffineDimExpr(1, ctx), getAffineDimExpr(2, ctx)};
    SmallVector<AffineMap> maps{AffineMap::get(groupedT.getRank(), 0, e, ctx),
                                AffineMap::getMultiDimIdentityMap(groupedT.getRank(), ctx)};
    init = linalg::GenericOp::create(
               rw, loc, groupedT, ValueRange{b2}, emptyTensor(rw, loc, groupedT), maps,
               SmallVector<IteratorType>(groupedT.getRank(), IteratorType::parallel),
               [](OpBuilder &b, Location l, ValueRange a) { linalg::YieldOp::create(b, l, a[0]); })
               .getResult(0);
  } else {
    init = filledTensor(rw, loc, groupedT, scalarConstant(rw, loc, elt, 0));
  }

  // Dims: n, g, f, c, k..., o...
  int64_t nd = 4 + 2 * spatial;
  auto d = [&](int64_t i) { return getAffineDimExpr(i, ctx); };
  AffineExpr n = d(0), g = d(1), f = d(2), c = d(3);
  SmallVector<AffineExpr> inE{n, g, c}, wE{g, f, c}, oE{n, g, f};
  for (int64_t i = 0; i < spatial; ++i) {
    AffineExpr k = d(4 + i), o = d(4 + spatial + i);
    inE.push_back(o * op.getStrides()[i] + k * op.getDilations()[i]);
    wE.push_back(k);
    oE.push_back(o);
  }
  SmallVector<AffineMap> maps{AffineMap::get(nd, 0, inE, ctx), AffineMap::get(nd, 0, wE, ctx),
                              AffineMap::get(nd, 0, oE, ctx)};
  SmallVector<IteratorType> iters(nd, IteratorType::parallel);
  for (int64_t i = 3; i < 4 + spatial; ++i)
    iters[i] = IteratorType::reduction;
  Value conv = linalg::GenericOp::create(
                   rw, loc, groupedT, ValueRange{input, weight}, init, maps, iters,
                   [&](OpBuilder &b, Location l, ValueRange a) {
                     if (!quantized) {
                       linalg::YieldOp::create(b, l, mulAdd(b, l, a[2], a[0], a[1]));
                       return;
                     }
                     Value x = unsignedInput ? (Value)arith::ExtUIOp::create(b, l, elt, a[0])
                                             : (Value)arith::ExtSIOp::create(b, l, elt, a[0]);
                     x = arith::SubIOp::create(b, l, x, scalarConstant(b, l, elt, zeroPoint));
                     Value w = arith::ExtSIOp::create(b, l, elt, a[1]);
                     linalg::YieldOp::create(b, l, mulAdd(b, l, a[2], x, w));
                   })
                   .getResult(0);
  SmallVector<ReassociationIndices> collapse{{0}, {1, 2}};
  for (int64_t i = 0; i < spatial; ++i)
    collapse.push_back({3 + i});
  rw.replaceOpWithNewOp<tensor::CollapseShapeOp>(op, outT, conv, collapse);
  return success();
}

/// Window reduction shared by max and sum pooling: dims n, c, k..., o...
Value poolWindow(OpBuilder &b, Location loc, Value padded, RankedTensorType outT,
                 ArrayRef<int64_t> kernel, ArrayRef<int64_t> strides,
                 ArrayRef<int64_t> dilations, Value initScalar, bool isMax,
                 bool isUnsigned = false) {
  MLIRContext *ctx = b.getContext();
  int64_t spatial = kernel.size(), nd = 2 + 2 * spatial;
  auto d = [&](int64_t i) { return getAffineDimExpr(i, ctx); };
  SmallVector<AffineExpr> inE{d(0), d(1)}, kE, oE{d(0), d(1)};
  for (int64_t i = 0; i < spatial; ++i) {
    AffineExpr k = d(2 + i), o = d(2 + spatial + i);
    inE.push_back(o * strides[i] + k * dilations[i]);
    kE.push_back(k);
    oE.push_back(o);
  }
  Value window = tensor::EmptyOp::create(b, loc, kernel, outT.getElementType());
  SmallVector<AffineMap> maps{AffineMap::get(nd, 0, inE, ctx), AffineMap::get(nd, 0, kE, ctx),
                              AffineMap::get(nd, 0, oE, ctx)};
  SmallVector<IteratorType> iters(nd, IteratorType::parallel);
  for (int64_t i = 0; i < spatial; ++i)
    iters[2 + i] = IteratorType::reduction;
  bool isFloat = isa<FloatType>(outT.getElementType());
  return linalg::GenericOp::create(
             b, loc, outT, ValueRange{padded, window}, filledTensor(b, loc, outT, initScalar),
             maps, iters,
             [&](OpBuilder &nb, Location l, ValueRange a) {
               Value r;
               if (isMax)
                 r = isFloat      ? (Value)arith::MaximumFOp::create(nb, l, a[2], a[0])
                     : isUnsigned ? (Value)arith::MaxUIOp::create(nb, l, a[2], a[0])
                                  : (Value)arith::MaxSIOp::create(nb, l, a[2], a[0]);
               else
                 r = isFloat ? (Value)arith::AddFOp::create(nb, l, a[2], a[0])
                             : (Value)arith::AddIOp::create(nb, l, a[2], a[0]);
               linalg::YieldOp::create(nb, l, r);
             })
      .getResult(0);
}

LogicalResult lowerMaxPool(MaxPoolOp op, PatternRewriter &rw) {
  if (op.getChannelsLast())
    return rw.notifyMatchFailure(op, "channels_last pooling is a kernel call");
  Location loc = op.getLoc();
  auto originalT = cast<RankedTensorType>(op.getType());
  auto outT = signlessType(originalT);
  bool u = isUnsignedTensor(op.getInput());
  Value lowest = lowestValue(rw, loc, outT.getElementType(), u);
  Value padded = padSpatial(rw, loc, asSignless(rw, loc, op.getInput()), op.getPads(), lowest);
  Value r = poolWindow(rw, loc, padded, outT, op.getKernelShape(), op.getStrides(),
                       op.getDilations(), lowest, /*isMax=*/true, u);
  rw.replaceOp(op, restoreType(rw, loc, r, originalT));
  return success();
}

LogicalResult lowerAvgPool(AvgPoolOp op, PatternRewriter &rw) {
  if (op.getChannelsLast())
    return rw.notifyMatchFailure(op, "channels_last pooling is a kernel call");
  Location loc = op.getLoc();
  auto outT = cast<RankedTensorType>(op.getType());
  auto inT = tensorType(op.getInput());
  Type elt = outT.getElementType();
  if (!isa<FloatType>(elt))
    return rw.notifyMatchFailure(op, "average pooling needs floats");
  ArrayRef<int64_t> kernel = op.getKernelShape(), strides = op.getStrides(), pads = op.getPads(),
                    ceil = op.getCeilPads();
  int64_t spatial = kernel.size();
  SmallVector<int64_t> allPads(pads);
  for (int64_t i = 0; i < spatial; ++i)
    allPads[spatial + i] += ceil[i];
  Value zero = scalarConstant(rw, loc, elt, 0);
  Value padded = padSpatial(rw, loc, op.getInput(), allPads, zero);
  SmallVector<int64_t> ones(spatial, 1);
  Value sum = poolWindow(rw, loc, padded, outT, kernel, strides, ones, zero, false);

  // Shapes are static, so the divisor of every output position is computed
  // here, per axis (the window is a box, so counts multiply).
  SmallVector<SmallVector<int64_t>> counts(spatial);
  for (int64_t i = 0; i < spatial; ++i) {
    int64_t in = inT.getDimSize(2 + i), pb = pads[i], pe = pads[spatial + i];
    int64_t lo = op.getCountIncludePad() ? -pb : 0;
    int64_t hi = op.getCountIncludePad() ? in + pe : in; // exclusive
    for (int64_t o = 0; o < outT.getDimSize(2 + i); ++o) {
      int64_t start = o * strides[i] - pb, end = start + kernel[i];
      counts[i].push_back(std::max<int64_t>(std::min(end, hi) - std::max(start, lo), 1));
    }
  }
  SmallVector<int64_t> divShape(outT.getShape().drop_front(2));
  auto divT = RankedTensorType::get(divShape, elt);
  SmallVector<APFloat> values;
  SmallVector<int64_t> idx(spatial, 0);
  for (int64_t n = 0; n < divT.getNumElements(); ++n) {
    double c = 1;
    for (int64_t i = 0; i < spatial; ++i)
      c *= counts[i][idx[i]];
    APFloat v(c);
    bool lost;
    v.convert(cast<FloatType>(elt).getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
    values.push_back(v);
    for (int64_t i = spatial - 1; i >= 0; --i) {
      if (++idx[i] < divShape[i])
        break;
      idx[i] = 0;
    }
  }
  Value divisor = arith::ConstantOp::create(rw, loc, DenseElementsAttr::get(divT, values));
  rw.replaceOp(op, buildElementwise(rw, loc, outT, ValueRange{sum, divisor},
                                    [](OpBuilder &b, Location l, ValueRange a) {
                                      return arith::DivFOp::create(b, l, a[0], a[1]);
                                    }));
  return success();
}

enum class ReduceKind { Sum, Max, Min, Prod, Mean };

/// The loop nest of a reduction over `axes` of `in`: the kept dims are
/// parallel and indexed by the output map; the reduced ones are reductions.
struct ReductionSpace {
  SmallVector<int64_t> keptShape;
  AffineMap outMap;
  SmallVector<IteratorType> iters;
  int64_t reducedCount = 1;
};

ReductionSpace reductionSpace(RankedTensorType in, ArrayRef<int64_t> axes, MLIRContext *ctx) {
  ReductionSpace space;
  SmallVector<AffineExpr> outE;
  for (int64_t i = 0; i < in.getRank(); ++i) {
    if (llvm::is_contained(axes, i)) {
      space.iters.push_back(IteratorType::reduction);
      space.reducedCount *= in.getDimSize(i);
    } else {
      space.iters.push_back(IteratorType::parallel);
      outE.push_back(getAffineDimExpr(i, ctx));
      space.keptShape.push_back(in.getDimSize(i));
    }
  }
  space.outMap = AffineMap::get(in.getRank(), 0, outE, ctx);
  return space;
}

template <typename OpTy, ReduceKind kind>
LogicalResult lowerReduce(OpTy op, PatternRewriter &rw) {
  Location loc = op.getLoc();
  MLIRContext *ctx = rw.getContext();
  bool u = isUnsignedTensor(op.getInput());
  Value input = asSignless(rw, loc, op.getInput());
  auto inT = tensorType(input);
  auto originalOutT = cast<RankedTensorType>(op.getType());
  auto outT = signlessType(originalOutT);
  Type elt = inT.getElementType();
  bool isFloat = isa<FloatType>(elt);
  if (kind == ReduceKind::Mean && !isFloat)
    return rw.notifyMatchFailure(op, "mean of integers");
  ReductionSpace space = reductionSpace(inT, op.getAxes(), ctx);
  auto redT = RankedTensorType::get(space.keptShape, elt);
  // Dims known only at run time: the kept ones sized from the input, the
  // count of a mean computed from the reduced ones.
  SmallVector<Value> keptSizes;
  Value runtimeCount;
  if (!inT.hasStaticShape())
    for (int64_t i = 0; i < inT.getRank(); ++i) {
      bool reduced = llvm::is_contained(op.getAxes(), i);
      if (!reduced && inT.isDynamicDim(i))
        keptSizes.push_back(dimSize(rw, loc, input, i));
      if (reduced)
        runtimeCount = runtimeCount ? (Value)arith::MulIOp::create(rw, loc, runtimeCount,
                                                                   dimSize(rw, loc, input, i))
                                    : dimSize(rw, loc, input, i);
    }
  Value initScalar;
  switch (kind) {
  case ReduceKind::Sum:
  case ReduceKind::Mean: initScalar = scalarConstant(rw, loc, elt, 0); break;
  case ReduceKind::Prod: initScalar = scalarConstant(rw, loc, elt, 1); break;
  case ReduceKind::Max: initScalar = lowestValue(rw, loc, elt, u); break;
  case ReduceKind::Min: initScalar = highestValue(rw, loc, elt, u); break;
  }
  SmallVector<AffineMap> maps{AffineMap::getMultiDimIdentityMap(inT.getRank(), ctx),
                              space.outMap};
  Value r = linalg::GenericOp::create(
                rw, loc, redT, ValueRange{input},
                filledTensor(rw, loc, redT, initScalar, keptSizes), maps, space.iters,
                [&](OpBuilder &b, Location l, ValueRange a) {
                  Value x = a[0], acc = a[1], v;
                  switch (kind) {
                  case ReduceKind::Sum:
                  case ReduceKind::Mean:
                    v = isFloat ? (Value)arith::AddFOp::create(b, l, acc, x)
                                : (Value)arith::AddIOp::create(b, l, acc, x);
                    break;
                  case ReduceKind::Prod:
                    v = isFloat ? (Value)arith::MulFOp::create(b, l, acc, x)
                                : (Value)arith::MulIOp::create(b, l, acc, x);
                    break;
                  case ReduceKind::Max:
                    v = isFloat ? (Value)arith::MaximumFOp::create(b, l, acc, x)
                        : u     ? (Value)arith::MaxUIOp::create(b, l, acc, x)
                                : (Value)arith::MaxSIOp::create(b, l, acc, x);
                    break;
                  case ReduceKind::Min:
                    v = isFloat ? (Value)arith::MinimumFOp::create(b, l, acc, x)
                        : u     ? (Value)arith::MinUIOp::create(b, l, acc, x)
                                : (Value)arith::MinSIOp::create(b, l, acc, x);
                    break;
                  }
                  linalg::YieldOp::create(b, l, v);
                })
                .getResult(0);
  if (kind == ReduceKind::Mean) {
    Value n = inT.hasStaticShape()
                  ? scalarConstant(rw, loc, elt, (double)space.reducedCount)
                  : (Value)arith::SIToFPOp::create(
                        rw, loc, elt,
                        arith::IndexCastOp::create(rw, loc, rw.getI64Type(), runtimeCount));
    r = buildElementwise(
        rw, loc, redT, ValueRange{r},
        [&](OpBuilder &b, Location l, ValueRange a) { return arith::DivFOp::create(b, l, a[0], n); },
        keptSizes);
  }
  rw.replaceOp(op, restoreType(rw, loc,
                               r.getType() == outT
                                   ? r
                                   : reshapeTo(rw, loc, r, outT,
                                               dynamicSizes(rw, loc, op.getResult())),
                               originalOutT));
  return success();
}

LogicalResult lowerArgMax(ArgMaxOp op, PatternRewriter &rw) {
  Location loc = op.getLoc();
  MLIRContext *ctx = rw.getContext();
  bool u = isUnsignedTensor(op.getInput());
  Value input = asSignless(rw, loc, op.getInput());
  auto inT = tensorType(input);
  auto outT = cast<RankedTensorType>(op.getType());
  Type elt = inT.getElementType();
  bool isFloat = isa<FloatType>(elt), isMin = op.getIsMin(), last = op.getSelectLastIndex();
  int64_t axis = op.getAxis();
  ReductionSpace space = reductionSpace(inT, {axis}, ctx);
  auto valT = RankedTensorType::get(space.keptShape, elt);
  auto idxT = RankedTensorType::get(space.keptShape, rw.getI64Type());
  Value initVal = isMin ? highestValue(rw, loc, elt, u) : lowestValue(rw, loc, elt, u);
  Value initIdx = scalarConstant(rw, loc, rw.getI64Type(), -1);
  // Dims known only at run time: the kept ones sized from the input (as
  // lowerReduce).
  SmallVector<Value> keptSizes;
  for (int64_t i = 0; i < inT.getRank(); ++i)
    if (i != axis && inT.isDynamicDim(i))
      keptSizes.push_back(dimSize(rw, loc, input, i));
  SmallVector<AffineMap> maps{AffineMap::getMultiDimIdentityMap(inT.getRank(), ctx),
                              space.outMap, space.outMap};
  auto g = linalg::GenericOp::create(
      rw, loc, TypeRange{valT, idxT}, ValueRange{input},
      ValueRange{filledTensor(rw, loc, valT, initVal, keptSizes),
                 filledTensor(rw, loc, idxT, initIdx, keptSizes)},
      maps, space.iters, [&](OpBuilder &b, Location l, ValueRange a) {
        Value x = a[0], best = a[1], bestIdx = a[2];
        Value i = arith::IndexCastOp::create(b, l, b.getI64Type(),
                                             linalg::IndexOp::create(b, l, axis));
        arith::CmpFPredicate fp = isMin ? (last ? arith::CmpFPredicate::OLE : arith::CmpFPredicate::OLT)
                                        : (last ? arith::CmpFPredicate::OGE : arith::CmpFPredicate::OGT);
        arith::CmpIPredicate ip =
            u ? (isMin ? (last ? arith::CmpIPredicate::ule : arith::CmpIPredicate::ult)
                       : (last ? arith::CmpIPredicate::uge : arith::CmpIPredicate::ugt))
              : (isMin ? (last ? arith::CmpIPredicate::sle : arith::CmpIPredicate::slt)
                       : (last ? arith::CmpIPredicate::sge : arith::CmpIPredicate::sgt));
        Value better = isFloat ? (Value)arith::CmpFOp::create(b, l, fp, x, best)
                               : (Value)arith::CmpIOp::create(b, l, ip, x, best);
        // The first element always wins, so an all -inf row still gets index 0.
        Value first = arith::CmpIOp::create(b, l, arith::CmpIPredicate::slt, bestIdx,
                                            scalarConstant(b, l, b.getI64Type(), 0));
        Value take = arith::OrIOp::create(b, l, better, first);
        linalg::YieldOp::create(b, l,
                                ValueRange{arith::SelectOp::create(b, l, take, x, best),
                                           arith::SelectOp::create(b, l, take, i, bestIdx)});
      });
  rw.replaceOp(op, reshapeTo(rw, loc, g.getResult(1), outT,
                             dynamicSizes(rw, loc, op.getResult())));
  return success();
}

} // namespace

void populateStructuredLoweringPatterns(RewritePatternSet &patterns) {
  patterns.add(lowerMatMul);
  patterns.add(lowerConv);
  patterns.add(lowerMaxPool);
  patterns.add(lowerAvgPool);
  patterns.add(lowerReduce<ReduceSumOp, ReduceKind::Sum>);
  patterns.add(lowerReduce<ReduceMaxOp, ReduceKind::Max>);
  patterns.add(lowerReduce<ReduceMinOp, ReduceKind::Min>);
  patterns.add(lowerReduce<ReduceProdOp, ReduceKind::Prod>);
  patterns.add(lowerReduce<ReduceMeanOp, ReduceKind::Mean>);
  patterns.add(lowerArgMax);
}

} // namespace kiln::codegen
