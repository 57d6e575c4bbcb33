// Data movement and shape ops -> tensor / linalg. By the time these run all
// shapes are static, and shape-carrying operands (reshape targets, slice
// bounds, pads) have folded to constants.
#include "LoweringUtils.h"

#include "mlir/Dialect/Utils/StaticValueUtils.h"

#include <cmath>

using namespace mlir;

namespace kiln::codegen {

Value reshapeTo(OpBuilder &b, Location loc, Value v, RankedTensorType type,
                ValueRange dynamicSizes) {
  auto from = tensorType(v);
  if (from == type && type.hasStaticShape())
    return v;
  // Rank-0 on either side: collapse/expand with an empty reassociation.
  if (type.getRank() == 0)
    return tensor::CollapseShapeOp::create(b, loc, type, v, ArrayRef<ReassociationIndices>{});
  if (from.getRank() == 0)
    return tensor::ExpandShapeOp::create(b, loc, type, v, ArrayRef<ReassociationIndices>{});
  if (!type.hasStaticShape()) {
    // Sizes known at run time: the shape operand is built from them.
    SmallVector<Value> dims;
    for (int64_t i = 0, k = 0; i < type.getRank(); ++i)
      dims.push_back(type.isDynamicDim(i)
                         ? arith::IndexCastOp::create(b, loc, b.getI64Type(), dynamicSizes[k++])
                               .getResult()
                         : arith::ConstantIntOp::create(b, loc, type.getDimSize(i), 64)
                               .getResult());
    Value shape = tensor::FromElementsOp::create(b, loc, dims);
    return tensor::ReshapeOp::create(b, loc, type, v, shape);
  }
  Value shape = arith::ConstantOp::create(
      b, loc, DenseIntElementsAttr::get(
                  RankedTensorType::get({type.getRank()}, b.getI64Type()), type.getShape()));
  return tensor::ReshapeOp::create(b, loc, type, v, shape);
}

Value padSpatial(OpBuilder &b, Location loc, Value input, ArrayRef<int64_t> pads,
                 Value padValue) {
  auto t = tensorType(input);
  int64_t spatial = t.getRank() - 2;
  if (llvm::all_of(pads, [](int64_t p) { return p == 0; }))
    return input;
  SmallVector<int64_t> lo{0, 0}, hi{0, 0}, shape(t.getShape());
  for (int64_t i = 0; i < spatial; ++i) {
    lo.push_back(pads[i]);
    hi.push_back(pads[spatial + i]);
    shape[2 + i] += pads[i] + pads[spatial + i];
  }
  auto padded = RankedTensorType::get(shape, t.getElementType());
  return tensor::PadOp::create(b, loc, padded, input, getAsIndexOpFoldResult(b.getContext(), lo),
                               getAsIndexOpFoldResult(b.getContext(), hi), padValue);
}

Value toIndex(OpBuilder &b, Location loc, Value v) {
  return arith::IndexCastOp::create(b, loc, b.getIndexType(), v);
}

Value indexConst(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

// Indices read at run time are wrapped (negative counts from the end) and then
// clamped into [0, dim - 1]. ONNX calls an out-of-range index an error, but the
// generated code has no error channel; clamping (what XLA does for gather)
// keeps a bad index from reading or writing outside the tensor, at the cost of
// two selects per index.
Value wrapIndex(OpBuilder &b, Location loc, Value i, int64_t dim) {
  Value neg = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, i, indexConst(b, loc, 0));
  Value wrapped = arith::AddIOp::create(b, loc, i, indexConst(b, loc, dim));
  Value idx = arith::SelectOp::create(b, loc, neg, wrapped, i);
  if (ShapedType::isDynamic(dim) || dim <= 0)
    return idx;
  idx = arith::MaxSIOp::create(b, loc, idx, indexConst(b, loc, 0));
  return arith::MinSIOp::create(b, loc, idx, indexConst(b, loc, dim - 1));
}

Value wrapIndex(OpBuilder &b, Location loc, Value i, Value dim) {
  Value neg = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, i, indexConst(b, loc, 0));
  Value idx = arith::SelectOp::create(b, loc, neg, arith::AddIOp::create(b, loc, i, dim), i);
  idx = arith::MinSIOp::create(b, loc, idx,
                               arith::SubIOp::create(b, loc, dim, indexConst(b, loc, 1)));
  return arith::MaxSIOp::create(b, loc, idx, indexConst(b, loc, 0));
}

namespace {

template <typename OpTy>
LogicalResult lowerReshapeLike(OpTy op, PatternRewriter &rw) {
  rw.replaceOp(op, reshapeTo(rw, op.getLoc(), op.getInput(),
                             cast<RankedTensorType>(op.getType()),
                             dynamicSizes(rw, op.getLoc(), op.getResult())));
  return success();
}

LogicalResult lowerConstant(ConstantOp op, PatternRewriter &rw) {
  rw.replaceOpWithNewOp<arith::ConstantOp>(op, op.getType(), cast<TypedAttr>(op.getValue()));
  return success();
}

/// Ops that must have folded once shapes are static; if one survives, its
/// value is still the constant its static result type implies.
LogicalResult lowerShape(ShapeOp op, PatternRewriter &rw) {
  auto it = tensorType(op.getInput());
  auto [first, last] = shapeDimRange(it.getRank(), op.getStart(), op.getEnd());
  SmallVector<int64_t> dims(it.getShape().slice(first, last - first));
  rw.replaceOpWithNewOp<arith::ConstantOp>(
      op, DenseIntElementsAttr::get(cast<RankedTensorType>(op.getType()), dims));
  return success();
}

LogicalResult lowerConstantOfShape(ConstantOfShapeOp op, PatternRewriter &rw) {
  auto v = dyn_cast<DenseElementsAttr>(op.getValue());
  if (!v)
    return failure();
  auto type = cast<RankedTensorType>(op.getType());
  if (!type.hasStaticShape()) {
    // Dims known only at run time (the shape operand, shape arithmetic, is
    // dead once they are): a fill.
    Value scalar = arith::ConstantOp::create(rw, op.getLoc(),
                                             cast<TypedAttr>(*v.getValues<Attribute>().begin()));
    rw.replaceOp(op, filledTensor(rw, op.getLoc(), type, scalar,
                                  dynamicSizes(rw, op.getLoc(), op.getResult())));
    return success();
  }
  rw.replaceOpWithNewOp<arith::ConstantOp>(
      op, DenseElementsAttr::get(cast<RankedTensorType>(op.getType()),
                                 *v.getValues<Attribute>().begin()));
  return success();
}

LogicalResult lowerRange(RangeOp op, PatternRewriter &rw) {
  Location loc = op.getLoc();
  auto outT = cast<RankedTensorType>(op.getType());
  Type elt = outT.getElementType();
  Value start = tensor::ExtractOp::create(rw, loc, op.getStart(), ValueRange{});
  Value delta = tensor::ExtractOp::create(rw, loc, op.getDelta(), ValueRange{});
  SmallVector<AffineMap> maps{AffineMap::getMultiDimIdentityMap(1, rw.getContext())};
  auto g = linalg::GenericOp::create(
      rw, loc, outT, ValueRange{},
      emptyTensor(rw, loc, outT, dynamicSizes(rw, loc, op.getResult())), maps,
      {utils::IteratorType::parallel}, [&](OpBuilder &b, Location l, ValueRange) {
        Value i = arith::IndexCastOp::create(b, l, b.getI64Type(), linalg::IndexOp::create(b, l, 0));
        Value r;
        if (isa<FloatType>(elt)) {
          Value fi = arith::SIToFPOp::create(b, l, elt, i);
          r = arith::AddFOp::create(b, l, start, arith::MulFOp::create(b, l, fi, delta));
        } else {
          Value ci = elt.isInteger(64) ? i : (Value)arith::TruncIOp::create(b, l, elt, i);
          r = arith::AddIOp::create(b, l, start, arith::MulIOp::create(b, l, ci, delta));
        }
        linalg::YieldOp::create(b, l, r);
      });
  rw.replaceOp(op, g.getResult(0));
  return success();
}

/// SplitMix64 of (seed, flat index): one 64-bit hash per element, whose top
/// bits make the uniform number. Stateless, so vectorisable and the same
/// whatever the loop order or thread split.
LogicalResult lowerRandomUniformLike(RandomUniformLikeOp op, PatternRewriter &rw) {
  Location loc = op.getLoc();
  auto outT = dyn_cast<RankedTensorType>(op.getType());
  if (!outT || !outT.hasStaticShape())
    return failure();
  auto ft = dyn_cast<FloatType>(outT.getElementType());
  if (!ft || ft.getWidth() > 64)
    return failure();
  int64_t rank = outT.getRank();
  SmallVector<AffineMap> maps{AffineMap::getMultiDimIdentityMap(rank, rw.getContext())};
  SmallVector<utils::IteratorType> iters(rank, utils::IteratorType::parallel);
  double low = op.getLow().convertToDouble(), high = op.getHigh().convertToDouble();
  uint64_t seedMix = (uint64_t)op.getSeed() * 0x9E3779B97F4A7C15ull;
  auto g = linalg::GenericOp::create(
      rw, loc, outT, ValueRange{}, emptyTensor(rw, loc, outT), maps, iters,
      [&](OpBuilder &b, Location l, ValueRange) {
        Type i64 = b.getI64Type();
        auto c = [&](uint64_t v) { return arith::ConstantIntOp::create(b, l, (int64_t)v, 64); };
        Value flat = c(0);
        for (int64_t d = 0; d < rank; ++d) {
          Value i = arith::IndexCastOp::create(b, l, i64, linalg::IndexOp::create(b, l, d));
          flat = arith::AddIOp::create(b, l, arith::MulIOp::create(b, l, flat, c(outT.getDimSize(d))), i);
        }
        Value z = arith::AddIOp::create(b, l, flat, c(seedMix + 0x9E3779B97F4A7C15ull));
        auto mix = [&](Value v, uint64_t shift, uint64_t mul) {
          Value x = arith::XOrIOp::create(b, l, v, arith::ShRUIOp::create(b, l, v, c(shift)));
          return mul ? (Value)arith::MulIOp::create(b, l, x, c(mul)) : x;
        };
        z = mix(z, 30, 0xBF58476D1CE4E5B9ull);
        z = mix(z, 27, 0x94D049BB133111EBull);
        z = mix(z, 31, 0);
        // The top 24 (f32 and narrower) or 53 (f64) bits, scaled to [0, 1).
        unsigned bits = ft.getWidth() == 64 ? 53 : 24;
        Value top = arith::ShRUIOp::create(b, l, z, c(64 - bits));
        Type wide = ft.getWidth() == 64 ? (Type)b.getF64Type() : (Type)b.getF32Type();
        Value u = arith::MulFOp::create(
            b, l, arith::UIToFPOp::create(b, l, wide, top),
            arith::ConstantOp::create(b, l, wide, b.getFloatAttr(wide, std::ldexp(1.0, -(int)bits))));
        Value r = arith::AddFOp::create(
            b, l, arith::ConstantOp::create(b, l, wide, b.getFloatAttr(wide, low)),
            arith::MulFOp::create(b, l, u,
                                  arith::ConstantOp::create(b, l, wide,
                                                            b.getFloatAttr(wide, high - low))));
        if (wide != ft)
          r = arith::TruncFOp::create(b, l, ft, r);
        // Rounding (to a narrow type, or of low + u * (high - low)) can
        // reach `high`; the interval is half-open, so that draw becomes low.
        Value highT = arith::ConstantOp::create(b, l, ft, b.getFloatAttr(ft, high));
        Value lowT = arith::ConstantOp::create(b, l, ft, b.getFloatAttr(ft, low));
        Value atHigh = arith::CmpFOp::create(b, l, arith::CmpFPredicate::OGE, r, highT);
        r = arith::SelectOp::create(b, l, atHigh, lowT, r);
        linalg::YieldOp::create(b, l, r);
      });
  rw.replaceOp(op, g.getResult(0));
  return success();
}

LogicalResult lowerTranspose(TransposeOp op, PatternRewriter &rw) {
  Location loc = op.getLoc();
  auto outT = cast<RankedTensorType>(op.getType());
  rw.replaceOp(op, linalg::TransposeOp::create(
                       rw, loc, op.getInput(),
                       emptyTensor(rw, loc, outT, dynamicSizes(rw, loc, op.getResult())),
                       op.getPerm())
                       .getResult()[0]);
  return success();
}

LogicalResult lowerConcat(ConcatOp op, PatternRewriter &rw) {
  Location loc = op.getLoc();
  auto outT = cast<RankedTensorType>(op.getType());
  int64_t axis = op.getAxis() < 0 ? op.getAxis() + outT.getRank() : op.getAxis();
  if (!outT.hasStaticShape() ||
      llvm::any_of(op.getInputs(), [](Value v) { return !tensorType(v).hasStaticShape(); })) {
    // Dims known only at run time (a KV cache's past + new): each input's
    // sizes from the input, its offset along the axis the sum of those
    // before it.
    Value acc = emptyTensor(rw, loc, outT, dynamicSizes(rw, loc, op.getResult()));
    Value offset = arith::ConstantIndexOp::create(rw, loc, 0);
    for (Value in : op.getInputs()) {
      auto t = tensorType(in);
      SmallVector<OpFoldResult> offsets(outT.getRank(), rw.getIndexAttr(0)), sizes,
          strides(outT.getRank(), rw.getIndexAttr(1));
      offsets[axis] = getAsOpFoldResult(offset);
      for (int64_t d = 0; d < t.getRank(); ++d)
        sizes.push_back(t.isDynamicDim(d) ? OpFoldResult(dimSize(rw, loc, in, d))
                                          : OpFoldResult(rw.getIndexAttr(t.getDimSize(d))));
      acc = tensor::InsertSliceOp::create(rw, loc, in, acc, offsets, sizes, strides);
      offset = arith::AddIOp::create(rw, loc, offset, dimSize(rw, loc, in, axis));
    }
    rw.replaceOp(op, acc);
    return success();
  }
  Value acc = emptyTensor(rw, loc, outT);
  int64_t offset = 0;
  for (Value in : op.getInputs()) {
    auto t = tensorType(in);
    SmallVector<OpFoldResult> offsets(outT.getRank(), rw.getIndexAttr(0)), sizes,
        strides(outT.getRank(), rw.getIndexAttr(1));
    offsets[axis] = rw.getIndexAttr(offset);
    for (int64_t d : t.getShape())
      sizes.push_back(rw.getIndexAttr(d));
    if (t.getNumElements() > 0)
      acc = tensor::InsertSliceOp::create(rw, loc, in, acc, offsets, sizes, strides);
    offset += t.getDimSize(axis);
  }
  rw.replaceOp(op, acc);
  return success();
}

/// A linalg.generic over the result whose body computes a source
/// coordinate per output element and extracts it from `source`.
Value gatherGeneric(OpBuilder &b, Location loc, RankedTensorType outT, Value source,
                    ValueRange inputs, ArrayRef<AffineMap> inputMaps,
                    function_ref<SmallVector<Value>(OpBuilder &, Location, ValueRange outIdx,
                                                    ValueRange inputVals)>
                        coords,
                    ValueRange dynamicSizes = {}) {
  MLIRContext *ctx = b.getContext();
  SmallVector<AffineMap> maps(inputMaps);
  maps.push_back(AffineMap::getMultiDimIdentityMap(outT.getRank(), ctx));
  return linalg::GenericOp::create(
             b, loc, outT, inputs, emptyTensor(b, loc, outT, dynamicSizes), maps,
             SmallVector<utils::IteratorType>(outT.getRank(), utils::IteratorType::parallel),
             [&](OpBuilder &nb, Location l, ValueRange args) {
               SmallVector<Value> idx;
               for (int64_t i = 0; i < outT.getRank(); ++i)
                 idx.push_back(linalg::IndexOp::create(nb, l, i));
               SmallVector<Value> src = coords(nb, l, idx, args.drop_back());
               linalg::YieldOp::create(nb, l, tensor::ExtractOp::create(nb, l, source, src).getResult());
             })
      .getResult(0);
}

/// A Slice whose bounds follow from the input dims (`pos[:seq]`), or of a
/// dim known only at run time (`x[:, 1:]`), of unit steps: each start is
/// read at run time and taken as ONNX does (from the end when negative,
/// clamped to the dim, itself read at run time where it is not fixed); the
/// sizes are the result's run-time dims, whose expressions assume the
/// bounds lie within the dim (SymbolicDims::assumptions, checked before the
/// run).
LogicalResult lowerRuntimeSlice(SliceOp op, ArrayRef<int64_t> axes, ArrayRef<int64_t> steps,
                                PatternRewriter &rw) {
  Location loc = op.getLoc();
  auto inT = tensorType(op.getInput());
  auto outT = cast<RankedTensorType>(op.getType());
  SmallVector<OpFoldResult> offsets(inT.getRank(), rw.getIndexAttr(0)), sizes;
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t ax = axes[i] < 0 ? axes[i] + inT.getRank() : axes[i];
    if (ax < 0 || ax >= inT.getRank() || i >= steps.size() || steps[i] != 1)
      return op.emitOpError("a slice with bounds or dims known only at run time needs unit "
                            "steps; give concrete input shapes");
    Value start = arith::IndexCastOp::create(
        rw, loc, rw.getIndexType(),
        tensor::ExtractOp::create(rw, loc, op.getStarts(), ValueRange{indexConst(rw, loc, i)}));
    Value dim = inT.isDynamicDim(ax)
                    ? tensor::DimOp::create(rw, loc, op.getInput(), ax).getResult()
                    : indexConst(rw, loc, inT.getDimSize(ax));
    Value zero = indexConst(rw, loc, 0);
    Value fromEnd = arith::AddIOp::create(rw, loc, start, dim);
    Value negative = arith::CmpIOp::create(rw, loc, arith::CmpIPredicate::slt, start, zero);
    start = arith::SelectOp::create(rw, loc, negative, fromEnd, start);
    start = arith::MaxSIOp::create(rw, loc, start, zero);
    offsets[ax] = arith::MinSIOp::create(rw, loc, start, dim).getResult();
  }
  SmallVector<Value> dyn = dynamicSizes(rw, loc, op.getResult());
  for (int64_t i = 0, k = 0; i < outT.getRank(); ++i)
    sizes.push_back(outT.isDynamicDim(i) ? OpFoldResult(dyn[k++])
                                         : rw.getIndexAttr(outT.getDimSize(i)));
  SmallVector<OpFoldResult> strides(outT.getRank(), rw.getIndexAttr(1));
  rw.replaceOpWithNewOp<tensor::ExtractSliceOp>(op, outT, op.getInput(), offsets, sizes, strides);
  return success();
}

LogicalResult lowerSlice(SliceOp op, PatternRewriter &rw) {
  Location loc = op.getLoc();
  auto inT = tensorType(op.getInput());
  auto outT = cast<RankedTensorType>(op.getType());
  auto starts = getConstantInts(op.getStarts()), ends = getConstantInts(op.getEnds()),
       axes = getConstantInts(op.getAxes()), steps = getConstantInts(op.getSteps());
  // Only where the analysis assumed the bounds fit, which the entry checks:
  // otherwise a start read at run time could take the slice past its input.
  if ((!starts || !ends) && axes && steps && hasSliceAssumptions(op) &&
      hasRuntimeDims(op.getResult()))
    return lowerRuntimeSlice(op, *axes, *steps, rw);
  // Constant bounds along a dim known only at run time: the start (and so
  // the offset) depends on the dim where it counts from the end.
  if (starts && ends && axes && steps && hasRuntimeDims(op.getResult()) &&
      llvm::any_of(*axes, [&](int64_t a) {
        return inT.isDynamicDim(a < 0 ? a + inT.getRank() : a);
      }))
    return lowerRuntimeSlice(op, *axes, *steps, rw);
  if (!starts || !ends || !axes || !steps)
    return op.emitOpError("slice bounds must be constants for code generation");
  SmallVector<int64_t> begin(inT.getRank(), 0), step(inT.getRank(), 1);
  for (size_t i = 0; i < axes->size(); ++i) {
    int64_t ax = (*axes)[i] < 0 ? (*axes)[i] + inT.getRank() : (*axes)[i];
    if (inT.isDynamicDim(ax))
      return op.emitOpError("slicing a dim known only at run time needs concrete input shapes");
    auto bounds = computeSliceBounds(inT.getDimSize(ax), (*starts)[i], (*ends)[i], (*steps)[i]);
    if (!bounds)
      return failure();
    begin[ax] = bounds->start;
    step[ax] = bounds->step;
  }
  if (outT.hasStaticShape() && outT.getNumElements() == 0) {
    rw.replaceOp(op, emptyTensor(rw, loc, outT));
    return success();
  }
  if (llvm::all_of(step, [](int64_t s) { return s > 0; })) {
    if (!outT.hasStaticShape()) {
      // The dims known only at run time are whole (not sliced) dims.
      SmallVector<Value> dyn = dynamicSizes(rw, loc, op.getResult());
      SmallVector<OpFoldResult> sizes;
      for (int64_t i = 0, k = 0; i < outT.getRank(); ++i)
        sizes.push_back(outT.isDynamicDim(i) ? OpFoldResult(dyn[k++])
                                             : rw.getIndexAttr(outT.getDimSize(i)));
      rw.replaceOpWithNewOp<tensor::ExtractSliceOp>(
          op, outT, op.getInput(), getAsIndexOpFoldResult(rw.getContext(), begin), sizes,
          getAsIndexOpFoldResult(rw.getContext(), step));
      return success();
    }
    rw.replaceOpWithNewOp<tensor::ExtractSliceOp>(op, outT, op.getInput(), ValueRange{},
                                                  ValueRange{}, ValueRange{}, begin,
                                                  outT.getShape(), step);
    return success();
  }
  // Negative steps: compute source coordinates per element.
  if (!outT.hasStaticShape())
    return op.emitOpError("a negative step with dims known only at run time needs concrete "
                          "input shapes");
  rw.replaceOp(op, gatherGeneric(rw, loc, outT, op.getInput(), {}, {},
                                 [&](OpBuilder &b, Location l, ValueRange idx, ValueRange) {
                                   SmallVector<Value> src;
                                   for (int64_t d = 0; d < outT.getRank(); ++d) {
                                     Value s = arith::MulIOp::create(b, l, idx[d], indexConst(b, l, step[d]));
                                     src.push_back(arith::AddIOp::create(b, l, s, indexConst(b, l, begin[d])));
                                   }
                                   return src;
                                 }));
  return success();
}

LogicalResult lowerGather(GatherOp op, PatternRewriter &rw) {
  Location loc = op.getLoc();
  MLIRContext *ctx = rw.getContext();
  auto inT = tensorType(op.getInput());
  auto idxT = tensorType(op.getIndices());
  auto outT = cast<RankedTensorType>(op.getType());
  int64_t axis = op.getAxis() < 0 ? op.getAxis() + inT.getRank() : op.getAxis();
  int64_t q = idxT.getRank();
  SmallVector<AffineExpr> e;
  for (int64_t k = 0; k < q; ++k)
    e.push_back(getAffineDimExpr(axis + k, ctx));
  AffineMap idxMap = AffineMap::get(outT.getRank(), 0, e, ctx);
  // A gathered dim known only at run time (a loop body's map resized to a
  // box): indices wrap and clamp against its size there.
  Value runTimeDim =
      inT.isDynamicDim(axis) ? dimSize(rw, loc, op.getInput(), axis) : Value();
  rw.replaceOp(op, gatherGeneric(rw, loc, outT, op.getInput(), op.getIndices(), idxMap,
                                 [&](OpBuilder &b, Location l, ValueRange idx, ValueRange in) {
                                   SmallVector<Value> src(idx.take_front(axis));
                                   Value i = toIndex(b, l, in[0]);
                                   src.push_back(runTimeDim ? wrapIndex(b, l, i, runTimeDim)
                                                            : wrapIndex(b, l, i,
                                                                        inT.getDimSize(axis)));
                                   llvm::append_range(src, idx.drop_front(axis + q));
                                   return src;
                                 },
                                 dynamicSizes(rw, loc, op.getResult())));
  return success();
}

LogicalResult lowerGatherElements(GatherElementsOp op, PatternRewriter &rw) {
  Location loc = op.getLoc();
  auto inT = tensorType(op.getInput());
  auto outT = cast<RankedTensorType>(op.getType());
  int64_t axis = op.getAxis() < 0 ? op.getAxis() + inT.getRank() : op.getAxis();
  AffineMap id = AffineMap::getMultiDimIdentityMap(outT.getRank(), rw.getContext());
  rw.replaceOp(op, gatherGeneric(rw, loc, outT, op.getInput(), op.getIndices(), id,
                                 [&](OpBuilder &b, Location l, ValueRange idx, ValueRange in) {
                                   SmallVector<Value> src(idx);
                                   src[axis] = wrapIndex(b, l, toIndex(b, l, in[0]),
                                                         inT.getDimSize(axis));
                                   return src;
                                 }));
  return success();
}

LogicalResult lowerGatherND(GatherNDOp op, PatternRewriter &rw) {
  auto inT = tensorType(op.getInput());
  auto idxT = tensorType(op.getIndices());
  auto outT = cast<RankedTensorType>(op.getType());
  int64_t b = op.getBatchDims(), q = idxT.getRank(), k = idxT.getDimSize(q - 1);
  Value indices = op.getIndices();
  rw.replaceOp(op, gatherGeneric(rw, op.getLoc(), outT, op.getInput(), {}, {},
                                 [&](OpBuilder &nb, Location l, ValueRange idx, ValueRange) {
                                   SmallVector<Value> src(idx.take_front(b));
                                   SmallVector<Value> at(idx.take_front(q - 1));
                                   at.push_back(Value());
                                   for (int64_t j = 0; j < k; ++j) {
                                     at.back() = indexConst(nb, l, j);
                                     Value v = tensor::ExtractOp::create(nb, l, indices, at);
                                     src.push_back(wrapIndex(nb, l, toIndex(nb, l, v),
                                                             inT.getDimSize(b + j)));
                                   }
                                   llvm::append_range(src, idx.drop_front(q - 1));
                                   return src;
                                 }));
  return success();
}

LogicalResult lowerExpand(ExpandOp op, PatternRewriter &rw) {
  rw.replaceOp(op, buildElementwise(rw, op.getLoc(), cast<RankedTensorType>(op.getType()),
                                    op.getInput(),
                                    [](OpBuilder &, Location, ValueRange a) { return a[0]; },
                                    dynamicSizes(rw, op.getLoc(), op.getResult())));
  return success();
}

LogicalResult lowerTile(TileOp op, PatternRewriter &rw) {
  auto inT = tensorType(op.getInput());
  auto outT = cast<RankedTensorType>(op.getType());
  rw.replaceOp(op, gatherGeneric(rw, op.getLoc(), outT, op.getInput(), {}, {},
                                 [&](OpBuilder &b, Location l, ValueRange idx, ValueRange) {
                                   SmallVector<Value> src;
                                   for (int64_t d = 0; d < outT.getRank(); ++d)
                                     src.push_back(arith::RemUIOp::create(
                                         b, l, idx[d], indexConst(b, l, inT.getDimSize(d))));
                                   return src;
                                 }));
  return success();
}

LogicalResult lowerPad(PadOp op, PatternRewriter &rw) {
  Location loc = op.getLoc();
  auto inT = tensorType(op.getInput());
  auto outT = cast<RankedTensorType>(op.getType());
  auto pads = getConstantInts(op.getPads());
  if (!pads)
    return op.emitOpError("pads must be constant for code generation");
  int64_t r = inT.getRank();
  if (llvm::any_of(*pads, [](int64_t p) { return p < 0; }))
    return op.emitOpError("negative pads (cropping) are not supported");
  if (op.getMode() == "constant") {
    Value v = tensor::ExtractOp::create(rw, loc, op.getValue(), ValueRange{});
    SmallVector<int64_t> lo(pads->begin(), pads->begin() + r), hi(pads->begin() + r, pads->end());
    rw.replaceOpWithNewOp<tensor::PadOp>(op, outT, op.getInput(),
                                         getAsIndexOpFoldResult(rw.getContext(), lo),
                                         getAsIndexOpFoldResult(rw.getContext(), hi), v);
    return success();
  }
  bool edge = op.getMode() == "edge";
  rw.replaceOp(op, gatherGeneric(rw, loc, outT, op.getInput(), {}, {},
                                 [&](OpBuilder &b, Location l, ValueRange idx, ValueRange) {
                                   SmallVector<Value> src;
                                   for (int64_t d = 0; d < r; ++d) {
                                     int64_t dim = inT.getDimSize(d);
                                     Value i = arith::SubIOp::create(b, l, idx[d], indexConst(b, l, (*pads)[d]));
                                     Value zero = indexConst(b, l, 0), last = indexConst(b, l, dim - 1);
                                     if (edge) {
                                       i = arith::MaxSIOp::create(b, l, i, zero);
                                       i = arith::MinSIOp::create(b, l, i, last);
                                     } else {
                                       // reflect: -i below 0, 2(dim-1)-i above dim-1
                                       Value neg = arith::CmpIOp::create(b, l, arith::CmpIPredicate::slt, i, zero);
                                       i = arith::SelectOp::create(b, l, neg, arith::SubIOp::create(b, l, zero, i), i);
                                       Value over = arith::CmpIOp::create(b, l, arith::CmpIPredicate::sgt, i, last);
                                       Value refl = arith::SubIOp::create(b, l, indexConst(b, l, 2 * (dim - 1)), i);
                                       i = arith::SelectOp::create(b, l, over, refl, i);
                                     }
                                     src.push_back(i);
                                   }
                                   return src;
                                 }));
  return success();
}

} // namespace

void populateDataMovementLoweringPatterns(RewritePatternSet &patterns) {
  patterns.add(lowerConstant);
  patterns.add(lowerShape);
  patterns.add(lowerConstantOfShape);
  patterns.add(lowerRange);
  patterns.add(lowerRandomUniformLike);
  patterns.add(lowerReshapeLike<ReshapeOp>);
  patterns.add(lowerReshapeLike<UnsqueezeOp>);
  patterns.add(lowerReshapeLike<SqueezeOp>);
  patterns.add(lowerReshapeLike<FlattenOp>);
  patterns.add(lowerTranspose);
  patterns.add(lowerConcat);
  patterns.add(lowerSlice);
  patterns.add(lowerGather);
  patterns.add(lowerGatherElements);
  patterns.add(lowerGatherND);
  patterns.add(lowerExpand);
  patterns.add(lowerTile);
  patterns.add(lowerPad);
}

} // namespace kiln::codegen
