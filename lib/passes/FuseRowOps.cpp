// kiln-fuse-row-ops: Softmax, LogSoftmax and layer normalisation, as the
// importer and the exporters write them (reductions plus elementwise ops),
// become kiln.softmax and kiln.layer_norm, which lower to row kernels that
// read each row from memory once (runtime/kernels/RowKernels.cpp). Lowered op by
// op, a layer normalisation is nine passes over its tensor.
//
// Recognised (over trailing axes [a, rank), keepdims, f32, static shapes):
//   softmax:      e = exp(x - reduce_max(x));  e / reduce_sum(e)
//   log-softmax:  s = x - reduce_max(x);       s - log(reduce_sum(exp(s)))
//   layer norm:   d = x - reduce_mean(x);  v = reduce_mean(d^2 or d*d)
//                 d / sqrt(v + eps)   or   d * reciprocal(sqrt(v + eps))
//                 then optionally * scale and + bias (one value per slice
//                 element), which the kernel applies in the same sweep.
//   softmax scale: softmax(x * c), and softmax(Q' K^T) where Q' (or K) is
//                 a transposed/reshaped x * c (attention's 1/sqrt(d)), take
//                 c as the softmax's `scale` (c > 0).
// The intermediate values keep any other users they have.
#include "LayoutPatterns.h"
#include "kiln/Passes/Passes.h"

#include "mlir/IR/Matchers.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <limits>

namespace kiln {
#define GEN_PASS_DEF_KILNFUSEROWOPS
#include "kiln/Passes/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace kiln {
namespace {

/// An f32 tensor of known rank. Its dims may be known only at run time
/// (compiled once for every shape): the row kernels take the number of
/// rows and their length at run time.
RankedTensorType staticF32(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && t.getElementType().isF32() ? t : RankedTensorType();
}

/// `a` when `axes` are exactly the trailing axes [a, rank) of `x`.
std::optional<int64_t> trailingAxis(ArrayRef<int64_t> axes, int64_t rank) {
  if (axes.empty() || rank == 0)
    return std::nullopt;
  SmallVector<int64_t> sorted;
  for (int64_t a : axes)
    sorted.push_back(a < 0 ? a + rank : a);
  llvm::sort(sorted);
  for (size_t i = 0; i < sorted.size(); ++i)
    if (sorted[i] != rank - (int64_t)sorted.size() + (int64_t)i)
      return std::nullopt;
  return sorted.front();
}

/// The axis of `v` = R(x) (keepdims) reducing the trailing axes of x.
template <typename ReduceOp>
std::optional<int64_t> reduceOf(Value v, Value x) {
  auto r = v.getDefiningOp<ReduceOp>();
  if (!r || r.getInput() != x || !r.getKeepdims())
    return std::nullopt;
  return trailingAxis(r.getAxes(), cast<RankedTensorType>(x.getType()).getRank());
}

std::optional<float> splatF32(Value v) {
  DenseElementsAttr attr;
  if (!matchPattern(v, m_Constant(&attr)) || !attr.getElementType().isF32() || !attr.isSplat() ||
      cast<ShapedType>(attr.getType()).getNumElements() != 1)
    return std::nullopt;
  return attr.getSplatValue<float>();
}

/// e / reduce_sum(e), e = exp(x - reduce_max(x)).
struct FormSoftmax : OpRewritePattern<DivOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(DivOp op, PatternRewriter &rw) const override {
    auto e = op.getLhs().getDefiningOp<ExpOp>();
    auto s = e ? e.getInput().getDefiningOp<SubOp>() : SubOp();
    if (!s)
      return failure();
    Value x = s.getLhs();
    if (!staticF32(x) || x.getType() != op.getType() || s.getType() != op.getType())
      return failure();
    auto axis = reduceOf<ReduceMaxOp>(s.getRhs(), x);
    if (!axis || reduceOf<ReduceSumOp>(op.getRhs(), e) != axis)
      return failure();
    rw.replaceOpWithNewOp<SoftmaxOp>(op, op.getType(), x, rw.getI64IntegerAttr(*axis),
                                     rw.getBoolAttr(false), rw.getF32FloatAttr(1.0f));
    return success();
  }
};

/// s - log(reduce_sum(exp(s))), s = x - reduce_max(x).
struct FormLogSoftmax : OpRewritePattern<SubOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SubOp op, PatternRewriter &rw) const override {
    auto s = op.getLhs().getDefiningOp<SubOp>();
    auto log = op.getRhs().getDefiningOp<LogOp>();
    if (!s || !log)
      return failure();
    Value x = s.getLhs();
    if (!staticF32(x) || x.getType() != op.getType() || s.getType() != op.getType())
      return failure();
    auto sum = log.getInput().getDefiningOp<ReduceSumOp>();
    auto e = sum ? sum.getInput().getDefiningOp<ExpOp>() : ExpOp();
    if (!e || e.getInput() != s.getResult())
      return failure();
    auto axis = reduceOf<ReduceMaxOp>(s.getRhs(), x);
    if (!axis || reduceOf<ReduceSumOp>(sum.getResult(), e) != axis)
      return failure();
    rw.replaceOpWithNewOp<SoftmaxOp>(op, op.getType(), x, rw.getI64IntegerAttr(*axis),
                                     rw.getBoolAttr(true), rw.getF32FloatAttr(1.0f));
    return success();
  }
};

/// sqrt(v + eps) -> (v, eps).
std::optional<std::pair<Value, float>> sqrtOfSumWithConstant(Value v) {
  auto sq = v.getDefiningOp<SqrtOp>();
  auto add = sq ? sq.getInput().getDefiningOp<AddOp>() : AddOp();
  if (!add)
    return std::nullopt;
  for (int i = 0; i < 2; ++i)
    if (auto eps = splatF32(add->getOperand(1 - i)))
      return std::make_pair(add->getOperand(i), *eps);
  return std::nullopt;
}

/// d / sqrt(var + eps) or d * reciprocal(sqrt(var + eps)), with
/// d = x - reduce_mean(x) and var = reduce_mean(d * d or d ^ 2).
struct FormLayerNorm : RewritePattern {
  FormLayerNorm(MLIRContext *ctx) : RewritePattern(MatchAnyOpTypeTag(), 1, ctx) {}
  LogicalResult matchAndRewrite(Operation *op, PatternRewriter &rw) const override {
    Value d, denom;
    if (auto div = dyn_cast<DivOp>(op)) {
      d = div.getLhs();
      denom = div.getRhs();
    } else if (auto mul = dyn_cast<MulOp>(op)) {
      for (int i = 0; i < 2 && !denom; ++i)
        if (auto rec = mul->getOperand(1 - i).getDefiningOp<ReciprocalOp>()) {
          d = mul->getOperand(i);
          denom = rec.getInput();
        }
    }
    if (!denom)
      return failure();
    auto sub = d.getDefiningOp<SubOp>();
    auto varEps = sqrtOfSumWithConstant(denom);
    if (!sub || !varEps)
      return failure();
    Value x = sub.getLhs();
    Type t = op->getResult(0).getType();
    if (!staticF32(x) || x.getType() != t || sub.getType() != t)
      return failure();
    auto axis = reduceOf<ReduceMeanOp>(sub.getRhs(), x);
    auto var = varEps->first.getDefiningOp<ReduceMeanOp>();
    if (!axis || !var)
      return failure();
    Operation *square = var.getInput().getDefiningOp();
    bool isSquare = false;
    if (auto m = dyn_cast_or_null<MulOp>(square))
      isSquare = m.getLhs() == d && m.getRhs() == d;
    else if (auto p = dyn_cast_or_null<PowOp>(square))
      isSquare = p.getLhs() == d && splatF32(p.getRhs()) == 2.0f;
    if (!isSquare || reduceOf<ReduceMeanOp>(var.getResult(), square->getResult(0)) != axis)
      return failure();
    rw.replaceOpWithNewOp<LayerNormOp>(op, t, x, Value(), Value(), rw.getI64IntegerAttr(*axis),
                                       rw.getF32FloatAttr(varEps->second));
    return success();
  }
};

/// A layer_norm, used only by `op`, and the operand of `op` that is not it
/// when that holds one value per element of a normalised slice,
/// broadcast over the leading axes only.
std::optional<std::pair<LayerNormOp, Value>> layerNormAndVector(Operation *op) {
  for (int i = 0; i < 2; ++i) {
    auto ln = op->getOperand(i).getDefiningOp<LayerNormOp>();
    Value v = op->getOperand(1 - i);
    auto vt = staticF32(v);
    if (!ln || !ln->hasOneUse() || !vt || !vt.hasStaticShape() ||
        op->getResult(0).getType() != ln.getType())
      continue;
    ArrayRef<int64_t> slice = ln.getType().getShape().drop_front(ln.getAxis());
    ArrayRef<int64_t> shape = vt.getShape();
    while (!shape.empty() && shape.front() == 1 && shape.size() > slice.size())
      shape = shape.drop_front();
    if (shape == slice)
      return std::make_pair(ln, v);
  }
  return std::nullopt;
}

struct AbsorbScale : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MulOp op, PatternRewriter &rw) const override {
    auto m = layerNormAndVector(op);
    if (!m || m->first.getScale() || m->first.getBias())
      return failure();
    LayerNormOp ln = m->first;
    rw.replaceOpWithNewOp<LayerNormOp>(op, ln.getType(), ln.getInput(), m->second, Value(),
                                       ln.getAxisAttr(), ln.getEpsilonAttr());
    return success();
  }
};

struct AbsorbBias : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AddOp op, PatternRewriter &rw) const override {
    auto m = layerNormAndVector(op);
    if (!m || m->first.getBias())
      return failure();
    LayerNormOp ln = m->first;
    rw.replaceOpWithNewOp<LayerNormOp>(op, ln.getType(), ln.getInput(), ln.getScale(),
                                       m->second, ln.getAxisAttr(), ln.getEpsilonAttr());
    return success();
  }
};

/// v = x * f or x / (1/f) with a positive finite scalar constant: (x, f).
std::optional<std::pair<Value, float>> scalarFactor(Value v) {
  Operation *op = v.getDefiningOp();
  if (!op || !op->hasOneUse() || !isa<MulOp, DivOp>(op))
    return std::nullopt;
  for (int i = 0; i < 2; ++i) {
    if (isa<DivOp>(op) && i == 1)
      break;
    auto c = splatF32(op->getOperand(1 - i));
    if (!c || op->getOperand(i).getType() != v.getType())
      continue;
    float f = isa<DivOp>(op) ? 1.0f / *c : *c;
    if (f > 0.0f && f < std::numeric_limits<float>::infinity())
      return std::make_pair(op->getOperand(i), f);
  }
  return std::nullopt;
}

/// v, seen through single-use transposes and reshapes, is (x * f): the
/// views (outermost first) and the factor. Attention exporters scale Q (or
/// Q and K) by 1/sqrt(d) before the product; softmax(c * (Q K^T)) does the
/// same in the kernel without a pass over Q.
struct ScaledViews {
  SmallVector<Operation *> views;
  Value x;
  float factor;
};
std::optional<ScaledViews> findFactorThroughViews(Value v) {
  ScaledViews r;
  Value cur = v;
  while (Operation *def = cur.getDefiningOp()) {
    if (!isa<TransposeOp, ReshapeOp>(def) || !def->hasOneUse())
      break;
    r.views.push_back(def);
    cur = def->getOperand(0);
  }
  auto factor = scalarFactor(cur);
  if (!factor)
    return std::nullopt;
  r.x = factor->first;
  r.factor = factor->second;
  return r;
}

/// The views of `s`, rebuilt on its unscaled x.
Value rebuildViews(const ScaledViews &s, PatternRewriter &rw) {
  Value rebuilt = s.x;
  for (Operation *view : llvm::reverse(s.views)) {
    rw.setInsertionPoint(view);
    Operation *copy = rw.clone(*view);
    copy->setOperand(0, rebuilt);
    rebuilt = copy->getResult(0);
  }
  return rebuilt;
}

/// softmax(x * f), softmax(matmul(views(a * f), b)), and the same with b
/// scaled: the factor becomes the softmax's scale.
struct AbsorbSoftmaxScale : OpRewritePattern<SoftmaxOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SoftmaxOp op, PatternRewriter &rw) const override {
    Value in = op.getInput();
    auto direct = scalarFactor(in);
    auto mm = direct ? MatMulOp() : in.getDefiningOp<MatMulOp>();
    std::optional<ScaledViews> l, r;
    if (mm && mm->hasOneUse()) {
      l = findFactorThroughViews(mm.getLhs());
      r = findFactorThroughViews(mm.getRhs());
    }
    if (!direct && !l && !r)
      return failure();
    float scale = op.getScale().convertToFloat() * (direct ? direct->second : 1.0f) *
                  (l ? l->factor : 1.0f) * (r ? r->factor : 1.0f);
    if (!(scale > 0.0f) || scale == std::numeric_limits<float>::infinity())
      return failure();
    if (direct) {
      in = direct->first;
    } else {
      Value lhs = l ? rebuildViews(*l, rw) : mm.getLhs();
      Value rhs = r ? rebuildViews(*r, rw) : mm.getRhs();
      rw.setInsertionPoint(mm);
      in = MatMulOp::create(rw, mm.getLoc(), mm.getType(), lhs, rhs);
    }
    rw.setInsertionPoint(op);
    rw.replaceOpWithNewOp<SoftmaxOp>(op, op.getType(), in, op.getAxisAttr(), op.getLogAttr(),
                                     rw.getF32FloatAttr(scale));
    return success();
  }
};

struct FuseRowOpsPass : impl::KilnFuseRowOpsBase<FuseRowOpsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateFuseRowOpsPatterns(patterns);
    // An optimisation: whatever state it stops in is correct IR.
    (void)applyPatternsGreedily(getOperation(), std::move(patterns));
  }
};

} // namespace

void populateFuseRowOpsPatterns(RewritePatternSet &patterns) {
  patterns.add<FormSoftmax, FormLogSoftmax, FormLayerNorm, AbsorbScale, AbsorbBias,
               AbsorbSoftmaxScale>(patterns.getContext());
}

} // namespace kiln
