// kiln-convert-layout: 2-D convolutions (and the pooling, elementwise,
// reduction and concatenation ops between them) move to NHWC.
//
// Each NCHW convolution with constant weights becomes
//   transpose(NCHW -> NHWC) ; kiln.conv2d_nhwc ; transpose(NHWC -> NCHW)
// and the transposes then sink through layout-agnostic ops until they meet
// the next convolution's input transpose and cancel. What is left are
// transposes at the edges of conv chains (the model's input and wherever a
// layout-sensitive op such as Reshape of a feature map needs NCHW). This is
// the ONNX Runtime "NHWC transformer" approach, done with rewrite patterns.
//
// NHWC rather than NCHWc: the microkernels vectorise over output channels
// with weights packed at compile time, so NHWC gives them unit-stride
// channel rows without a blocked layout leaking into every other op.
#include "LayoutPatterns.h"
#include "kiln/Passes/Passes.h"

#include "mlir/IR/Matchers.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <limits>

namespace kiln {
#define GEN_PASS_DEF_KILNCONVERTLAYOUT
#include "kiln/Passes/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace kiln {
namespace {

constexpr int64_t kToNhwc[] = {0, 2, 3, 1};
constexpr int64_t kToNchw[] = {0, 3, 1, 2};

/// A rank-4 f32 NCHW tensor whose channels are known while compiling; its
/// batch and spatial dims may be known only at run time (a CNN compiled
/// once for every batch and image size: the channels_last kernels take
/// those at run time, the packed weights fix only the channels).
RankedTensorType staticF32Rank4(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  if (!t || t.getRank() != 4 || !t.getElementType().isF32() || t.isDynamicDim(1))
    return {};
  return t;
}

/// Static but for a batch known only at run time. A rank-0 tensor (Clip's
/// bounds, a scalar Add) is static: refusing it kept every ReLU6 of
/// MobileNet-V2 between two transposes (2x its run time).
bool staticButBatch(RankedTensorType t) {
  if (t.getRank() == 0)
    return true;
  return llvm::count_if(t.getShape(), ShapedType::isDynamic) == (t.isDynamicDim(0) ? 1 : 0);
}

/// Whether an elementwise op of type `t` may take a transpose `perm` across
/// it: static but for the batch, or, for the NHWC <-> NCHW transposes of a
/// CNN, any dims known only at run time but the channels (an image size
/// known at run time). Other transposes with run-time dims (a
/// transformer's heads) stay where they are.
bool layoutMovable(RankedTensorType t, ArrayRef<int64_t> perm) {
  if (staticButBatch(t))
    return true;
  if (t.getRank() != 4)
    return false;
  if (llvm::equal(perm, kToNchw))
    return !t.isDynamicDim(1);
  if (llvm::equal(perm, kToNhwc))
    return !t.isDynamicDim(3);
  return false;
}

/// Whether an operand of type `vt`, broadcast to `outT` (its dims aligned
/// right), has at most a quarter of its elements. A dim known only at run
/// time is at most the result's there (broadcasting), so it counts as the
/// same size: a squeeze-excitation scale [batch, C, 1, 1] of a feature map
/// [batch, C, H, W] is small for every batch (refusing it left RegNetY's
/// excitation products in NCHW between two transposes under a run-time
/// batch), while an operand as large as the result is not.
bool quarterOrLess(RankedTensorType vt, RankedTensorType outT) {
  int64_t offset = outT.getRank() - vt.getRank(), mine = 1, theirs = 1;
  if (offset < 0)
    return false;
  for (int64_t i = 0; i < outT.getRank(); ++i) {
    int64_t o = outT.getDimSize(i), d = i < offset ? 1 : vt.getDimSize(i - offset);
    // Broadcast along a dim known only at run time (a feature map's height
    // or width when the image size is): counted as 4, which such a dim is
    // in every CNN layer where the re-layout matters.
    if (ShapedType::isDynamic(o) && d == 1) {
      theirs *= 4;
      continue;
    }
    if (ShapedType::isDynamic(o) || ShapedType::isDynamic(d))
      continue;
    mine *= d;
    theirs *= o;
  }
  return mine * 4 <= theirs;
}

/// The transpose producing `v`, if it applies `perm`.
TransposeOp transposeWithPerm(Value v, ArrayRef<int64_t> perm) {
  auto t = v.getDefiningOp<TransposeOp>();
  if (!t || !llvm::equal(t.getPerm(), perm))
    return {};
  return t;
}

SmallVector<int64_t> inversePerm(ArrayRef<int64_t> perm) {
  SmallVector<int64_t> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    inv[perm[i]] = i;
  return inv;
}

Value transpose(PatternRewriter &rw, Location loc, Value v, ArrayRef<int64_t> perm) {
  return TransposeOp::create(rw, loc, v, rw.getDenseI64ArrayAttr(perm));
}

/// staticF32Rank4, or the integer convolution's types: an 8-bit input and
/// its i32 result (the int8 kernels take NHWC too).
bool convLayoutType(ConvOp op) {
  if (staticF32Rank4(op.getInput()) && staticF32Rank4(op.getResult()))
    return true;
  auto in = dyn_cast<RankedTensorType>(op.getInput().getType());
  auto out = dyn_cast<RankedTensorType>(op.getResult().getType());
  auto staticButBatch4 = [](RankedTensorType t) {
    return t.getRank() == 4 &&
           llvm::count_if(t.getShape(), ShapedType::isDynamic) == (t.isDynamicDim(0) ? 1 : 0);
  };
  return in && out && in.getElementType().isInteger(8) && out.getElementType().isInteger(32) &&
         staticButBatch4(in) && staticButBatch4(out);
}

struct ConvToNhwc : OpRewritePattern<ConvOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ConvOp op, PatternRewriter &rw) const override {
    if (!convLayoutType(op) || !matchPattern(op.getWeight(), m_Constant()))
      return rw.notifyMatchFailure(op, "needs a static 2-D f32 conv with constant weights");
    if (Value b = op.getBias(); b && !matchPattern(b, m_Constant()))
      return rw.notifyMatchFailure(op, "needs a constant bias");
    Location loc = op.getLoc();
    float inf = std::numeric_limits<float>::infinity();
    Value x = transpose(rw, loc, op.getInput(), kToNhwc);
    Value y = Conv2DNhwcOp::create(rw, loc, x, op.getWeight(), op.getBias(), Value(),
                                   op.getStridesAttr(), op.getPadsAttr(), op.getDilationsAttr(),
                                   op.getGroupAttr(), rw.getF32FloatAttr(-inf),
                                   rw.getF32FloatAttr(inf), /*gelu=*/nullptr,
                                   op.getInputZeroPointAttr(), /*requant_scale=*/{},
                                   /*requant_zero_point=*/{}, /*requant_type=*/{});
    rw.replaceOp(op, transpose(rw, loc, y, kToNchw));
    return success();
  }
};

/// Replaces the NCHW pool `op` by its channels_last twin reading `nhwc`
/// (the same data, NHWC), transposed back to NCHW. Where the twin's type
/// cannot be inferred the IR is left as it was (`nhwc` erased if it is an
/// op the caller made for it that nothing else reads).
template <typename PoolOp>
LogicalResult replaceByChannelsLast(PatternRewriter &rw, PoolOp op, Value nhwc) {
  auto pool = cast<PoolOp>(rw.clone(*op));
  pool->setOperand(0, nhwc);
  pool.setChannelsLast(true);
  SmallVector<Type> types;
  if (failed(PoolOp::inferReturnTypes(rw.getContext(), pool.getLoc(),
                                      typename PoolOp::Adaptor(pool), types))) {
    rw.eraseOp(pool);
    if (Operation *made = nhwc.getDefiningOp(); made && made->use_empty())
      rw.eraseOp(made);
    return failure();
  }
  pool->getResult(0).setType(types[0]);
  rw.replaceOp(op, transpose(rw, op.getLoc(), pool->getResult(0), kToNchw));
  return success();
}

/// Whether pool `op`'s input has a type the channels_last kernels take:
/// staticF32Rank4, or for a max pool 8-bit integers (a quantized CNN's
/// stem pools its u8 activations: kiln_maxpool2d_nhwc_i8).
template <typename PoolOp>
bool poolLayoutType(PoolOp op) {
  if (staticF32Rank4(op.getInput()))
    return true;
  auto t = dyn_cast<RankedTensorType>(op.getInput().getType());
  return std::is_same_v<PoolOp, MaxPoolOp> && t && t.getRank() == 4 &&
         t.getElementType().isInteger(8) && staticButBatch(t);
}

/// pool(transpose(x, to NCHW)) -> transpose(pool channels_last(x)).
template <typename PoolOp>
struct PoolToNhwc : OpRewritePattern<PoolOp> {
  using OpRewritePattern<PoolOp>::OpRewritePattern;
  LogicalResult matchAndRewrite(PoolOp op, PatternRewriter &rw) const override {
    TransposeOp t = transposeWithPerm(op.getInput(), kToNchw);
    if (op.getChannelsLast() || !t || !poolLayoutType(op))
      return failure();
    return replaceByChannelsLast(rw, op, t.getInput());
  }
};

/// An NCHW pool with dims known only at run time (the batch, the image
/// size) whose input no transpose to NCHW feeds (PoolToNhwc):
/// channels_last between two transposes, since only the channels_last
/// kernel takes run-time dims (MaxViT's pooled shortcut after its window
/// blocks). With static shapes the NCHW lowering stays.
template <typename PoolOp>
struct RunTimeDimsPoolToNhwc : OpRewritePattern<PoolOp> {
  using OpRewritePattern<PoolOp>::OpRewritePattern;
  LogicalResult matchAndRewrite(PoolOp op, PatternRewriter &rw) const override {
    auto t = dyn_cast<RankedTensorType>(op.getInput().getType());
    if (op.getChannelsLast() || !poolLayoutType(op) || t.hasStaticShape() ||
        op->getNumResults() != 1 || transposeWithPerm(op.getInput(), kToNchw))
      return failure();
    return replaceByChannelsLast(rw, op, transpose(rw, op.getLoc(), op.getInput(), kToNhwc));
  }
};

/// transpose(transpose(x, p1), p2) -> transpose(x, p1 o p2).
struct ComposeTransposes : OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(TransposeOp op, PatternRewriter &rw) const override {
    auto inner = op.getInput().getDefiningOp<TransposeOp>();
    if (!inner)
      return failure();
    SmallVector<int64_t> perm;
    for (int64_t p : op.getPerm())
      perm.push_back(inner.getPerm()[p]);
    if (llvm::equal(perm, llvm::seq<int64_t>(0, perm.size())) &&
        inner.getInput().getType() == op.getType()) {
      rw.replaceOp(op, inner.getInput());
      return success();
    }
    rw.replaceOpWithNewOp<TransposeOp>(op, inner.getInput(), rw.getDenseI64ArrayAttr(perm));
    return success();
  }
};

/// A transpose that only moves size-1 dims is a reshape (no data moves):
/// the [N,1,1,C] -> [N,C,1,1] left behind by global pooling.
struct UnitTransposeToReshape : OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(TransposeOp op, PatternRewriter &rw) const override {
    auto inT = dyn_cast<RankedTensorType>(op.getInput().getType());
    auto outT = dyn_cast<RankedTensorType>(op.getType());
    // (A zero-sized tensor has no unit-dim-only form: reshape reads a 0 in
    // its target shape as "keep this dim".)
    // One dim known only at run time at most: the reshape infers it (-1).
    if (!inT || !outT || llvm::count_if(outT.getShape(), ShapedType::isDynamic) > 1 ||
        (outT.hasStaticShape() && outT.getNumElements() == 0))
      return failure();
    SmallVector<int64_t> moved;
    for (int64_t p : op.getPerm())
      if (inT.getDimSize(p) != 1)
        moved.push_back(p);
    if (!llvm::is_sorted(moved))
      return failure();
    rw.replaceOp(op, reshapeTo(rw, op.getLoc(), op.getInput(), outT.getShape()));
    return success();
  }
};

/// unary(transpose(x)) -> transpose(unary(x)) for elementwise unary ops.
struct SinkThroughUnary : RewritePattern {
  explicit SinkThroughUnary(MLIRContext *ctx) : RewritePattern(MatchAnyOpTypeTag(), 1, ctx) {}
  LogicalResult matchAndRewrite(Operation *op, PatternRewriter &rw) const override {
    if (!isLayoutAgnosticUnary(op))
      return failure();
    // Same shape (a cast changes only the element type: a quantized
    // convolution's requantization ends in one).
    auto t = op->getOperand(0).getDefiningOp<TransposeOp>();
    auto rt = dyn_cast<RankedTensorType>(op->getResult(0).getType());
    if (!t || !rt || rt.getShape() != t.getType().getShape())
      return failure();
    Operation *moved = rw.clone(*op);
    moved->setOperand(0, t.getInput());
    moved->getResult(0).setType(cast<RankedTensorType>(t.getInput().getType())
                                    .clone(getElementTypeOrSelf(op->getResult(0).getType())));
    rw.replaceOp(op, transpose(rw, op->getLoc(), moved->getResult(0), t.getPerm()));
    return success();
  }
};

/// binary(transpose(x, p), y) -> transpose(binary(x, y'), p), where y is a
/// transpose with the same permutation, a scalar, or a smaller broadcast
/// operand (a per-channel constant, a squeeze-excitation scale) that is
/// cheap to re-lay-out.
struct SinkThroughBinary : RewritePattern {
  explicit SinkThroughBinary(MLIRContext *ctx) : RewritePattern(MatchAnyOpTypeTag(), 1, ctx) {}
  LogicalResult matchAndRewrite(Operation *op, PatternRewriter &rw) const override {
    if (!isLayoutAgnosticBinary(op))
      return failure();
    auto outT = dyn_cast<RankedTensorType>(op->getResult(0).getType());
    if (!outT)
      return failure();
    ArrayRef<int64_t> perm;
    for (Value v : op->getOperands())
      if (auto t = v.getDefiningOp<TransposeOp>(); t && t.getType() == outT.clone(
                                                         getElementTypeOrSelf(t.getType())))
        perm = t.getPerm();
    if (perm.empty() || !layoutMovable(outT, perm))
      return failure();
    SmallVector<int64_t> inv = inversePerm(perm);
    int64_t rank = perm.size();
    SmallVector<Value> operands;
    for (Value v : op->getOperands()) {
      auto vt = dyn_cast<RankedTensorType>(v.getType());
      // (Each operand's dims are the result's or 1 where they broadcast:
      // layoutMovable(outT) covers them.)
      if (!vt)
        return failure();
      if (auto t = transposeWithPerm(v, perm); t && vt.getShape() == outT.getShape()) {
        operands.push_back(t.getInput());
        continue;
      }
      if (vt.getRank() == 0) {
        operands.push_back(v);
        continue;
      }
      if (!matchPattern(v, m_Constant()) && !quarterOrLess(vt, outT))
        return failure(); // re-laying out a full-size operand costs as much as it saves
      Value padded = v;
      if (vt.getRank() < rank) {
        auto axes = llvm::to_vector(llvm::seq<int64_t>(0, rank - vt.getRank()));
        padded = UnsqueezeOp::create(rw, op->getLoc(), v, rw.getDenseI64ArrayAttr(axes));
      }
      operands.push_back(transpose(rw, op->getLoc(), padded, inv));
    }
    Operation *moved = rw.clone(*op);
    moved->setOperands(operands);
    SmallVector<int64_t> shape;
    for (int64_t i = 0; i < rank; ++i)
      shape.push_back(outT.getDimSize(inv[i]));
    moved->getResult(0).setType(outT.clone(shape));
    rw.replaceOp(op, transpose(rw, op->getLoc(), moved->getResult(0), perm));
    return success();
  }
};

/// reduce(transpose(x, p), axes, keepdims) -> transpose(reduce(x, p[axes])).
/// Without keepdims the kept axes keep their order among themselves, so the
/// result needs a transpose only where that order differs from x's: a
/// global mean over H and W of an NHWC feature map ([N, C], ShuffleNet's
/// and RegNet's x.mean([2, 3])) needs none, where the transpose back to
/// NCHW before the mean cost 70-240 us at batch 3.
template <typename ReduceOp>
struct SinkThroughReduce : OpRewritePattern<ReduceOp> {
  using OpRewritePattern<ReduceOp>::OpRewritePattern;
  LogicalResult matchAndRewrite(ReduceOp op, PatternRewriter &rw) const override {
    auto t = op.getInput().template getDefiningOp<TransposeOp>();
    if (!t)
      return failure();
    ArrayRef<int64_t> perm = t.getPerm();
    int64_t rank = perm.size();
    SmallVector<int64_t> axes;
    for (int64_t a : op.getAxes())
      axes.push_back(perm[a < 0 ? a + rank : a]);
    llvm::sort(axes);
    auto r = ReduceOp::create(rw, op.getLoc(), t.getInput(), rw.getDenseI64ArrayAttr(axes),
                              rw.getBoolAttr(op.getKeepdims()));
    if (op.getKeepdims()) {
      rw.replaceOp(op, transpose(rw, op.getLoc(), r, perm));
      return success();
    }
    // The kept axes of x in the result's order, renumbered among themselves.
    SmallVector<int64_t> kept;
    for (int64_t i = 0; i < rank; ++i)
      if (!llvm::is_contained(axes, perm[i]))
        kept.push_back(perm[i]);
    SmallVector<int64_t> order(kept.size());
    for (auto [i, k] : llvm::enumerate(kept))
      order[i] = llvm::count_if(kept, [&](int64_t o) { return o < k; });
    if (llvm::is_sorted(order))
      rw.replaceOp(op, r.getResult());
    else
      rw.replaceOp(op, transpose(rw, op.getLoc(), r, order));
    return success();
  }
};

/// concat(transpose(a, p), transpose(b, p), axis) -> transpose(concat(a, b, p[axis])).
struct SinkThroughConcat : OpRewritePattern<ConcatOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ConcatOp op, PatternRewriter &rw) const override {
    auto first = op.getInputs().empty() ? TransposeOp()
                                        : op.getInputs()[0].getDefiningOp<TransposeOp>();
    if (!first)
      return failure();
    ArrayRef<int64_t> perm = first.getPerm();
    SmallVector<Value> inputs;
    for (Value v : op.getInputs()) {
      TransposeOp t = transposeWithPerm(v, perm);
      if (!t)
        return failure();
      inputs.push_back(t.getInput());
    }
    int64_t rank = perm.size(), axis = op.getAxis() < 0 ? op.getAxis() + rank : op.getAxis();
    auto c = ConcatOp::create(rw, op.getLoc(), inputs, rw.getI64IntegerAttr(perm[axis]));
    rw.replaceOp(op, transpose(rw, op.getLoc(), c, perm));
    return success();
  }
};

struct ConvertLayoutPass : impl::KilnConvertLayoutBase<ConvertLayoutPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateConvertLayoutPatterns(patterns);
    populateFuseEpiloguePatterns(patterns);
    // An optimisation: whatever state it stops in is correct IR.
    (void)applyPatternsGreedily(getOperation(), std::move(patterns));
  }
};

} // namespace

bool isLayoutAgnosticUnary(Operation *op) {
  return isa<NegOp, AbsOp, ExpOp, LogOp, SqrtOp, ReluOp, SigmoidOp, TanhOp, ErfOp, FloorOp,
             CeilOp, RoundOp, ReciprocalOp, SignOp, NotOp, SinOp, CosOp, CastOp>(op);
}

bool isLayoutAgnosticBinary(Operation *op) {
  return isa<AddOp, SubOp, MulOp, DivOp, PowOp, MaxOp, MinOp>(op);
}

Value reshapeTo(OpBuilder &b, Location loc, Value v, ArrayRef<int64_t> shape) {
  auto st = RankedTensorType::get({(int64_t)shape.size()}, b.getI64Type());
  // One dim known only at run time: ONNX's -1, inferred from the others.
  SmallVector<int64_t> target(shape);
  assert(llvm::count_if(target, ShapedType::isDynamic) <= 1 && "one unknown dim at most");
  for (int64_t &d : target)
    if (ShapedType::isDynamic(d))
      d = -1;
  Value s = ConstantOp::create(b, loc, DenseElementsAttr::get(st, ArrayRef<int64_t>(target)));
  return ReshapeOp::create(b, loc, v, s, b.getBoolAttr(false));
}

Value reshapeTo(OpBuilder &b, Location loc, Value v, ArrayRef<int64_t> shape,
                Value dimsSource) {
  if (llvm::count_if(shape, ShapedType::isDynamic) <= 1)
    return reshapeTo(b, loc, v, shape);
  // Several dims known only at run time: the target is built from
  // `dimsSource`'s dims (kiln.shape of each), which the symbolic dims
  // analysis reads back as the same expressions.
  auto i64x1 = RankedTensorType::get({1}, b.getI64Type());
  SmallVector<Value> parts;
  for (auto [i, d] : llvm::enumerate(shape)) {
    if (ShapedType::isDynamic(d))
      parts.push_back(ShapeOp::create(b, loc, i64x1, dimsSource, b.getI64IntegerAttr(i),
                                      b.getI64IntegerAttr(i + 1)));
    else
      parts.push_back(ConstantOp::create(b, loc, DenseElementsAttr::get(i64x1, ArrayRef(d))));
  }
  auto st = RankedTensorType::get({(int64_t)shape.size()}, b.getI64Type());
  Value target = ConcatOp::create(b, loc, st, parts, b.getI64IntegerAttr(0));
  return ReshapeOp::create(b, loc, RankedTensorType::get(shape, cast<RankedTensorType>(
                                                                    v.getType()).getElementType()),
                           v, target, b.getBoolAttr(false));
}

void populateConvertLayoutPatterns(RewritePatternSet &patterns) {
  MLIRContext *ctx = patterns.getContext();
  patterns.add<ConvToNhwc, PoolToNhwc<MaxPoolOp>, PoolToNhwc<AvgPoolOp>,
               RunTimeDimsPoolToNhwc<MaxPoolOp>, RunTimeDimsPoolToNhwc<AvgPoolOp>, ComposeTransposes,
               UnitTransposeToReshape, SinkThroughUnary, SinkThroughBinary,
               SinkThroughReduce<ReduceMeanOp>, SinkThroughReduce<ReduceSumOp>,
               SinkThroughReduce<ReduceMaxOp>, SinkThroughConcat>(ctx);
}

} // namespace kiln
