// Attention -> one kernel call: matmul(softmax(mask(matmul(Q, K') [* c])), V),
// the mask an additive one or a Where (masked_fill), or none, becomes
// kiln_attention_f32 or kiln_attention_mask_f32 (runtime/kernels/
// MatMulKernels.cpp), which keep the scores on the stack instead of writing
// them to memory and reading them back twice. Q, K', V and the mask are read
// in place where they are views of other tensors (heads of one projection).
// Run greedily before the op-by-op lowering (populateFusedKernelPatterns),
// which would otherwise lower the inner ops first.
#include "kiln/Conversion/KernelCalls.h"
#include "KernelCallSupport.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <cstddef>
#include <cstdint>

using namespace mlir;

namespace kiln::codegen {
namespace {

/// What an attention's softmax reads: the scores matmul(Q, K'), maybe
/// times a constant, and maybe masked: plus an additive mask (a padding
/// mask, a causal mask, a position bias), or replaced by a constant where a
/// condition holds (masked_fill(cond, -inf), ONNX Where), each op used
/// only there.
struct AttentionScores {
  MatMulOp scores;
  float qkScale = 1.0f;
  Value mask; // an additive mask (null without one)
  /// A Where: the scores are `fill` where `cond` is `fillWhen` (no mask).
  Value cond;
  float fill = 0.0f;
  bool fillWhen = true;
  /// The add or select and the multiplication between the softmax and the
  /// scores, in that order (none without a mask).
  SmallVector<Operation *, 2> between;
  /// The softmax over the scores' last axis (attentionOf).
  SoftmaxOp softmax;
  /// The value the mask's layout is read from (the mask, or the condition
  /// that a float mask is made of: same shape).
  Value maskShape() const { return mask ? mask : cond; }
  bool masked() const { return mask || cond; }
};

/// The scores side of a mask: matmul(Q, K'), matmul(Q, K') * c or
/// matmul(Q, K') / c, of `type`, each used once. Appends the
/// multiplication or division to `between`.
std::optional<std::pair<MatMulOp, float>> scaledScores(Value s, Type type,
                                                       SmallVectorImpl<Operation *> &between) {
  if (s.getType() != type)
    return std::nullopt;
  float qkScale = 1.0f;
  if (auto mul = s.getDefiningOp<MulOp>()) {
    if (!mul->hasOneUse())
      return std::nullopt;
    auto scale = constantFloats(mul.getRhs());
    Value other = mul.getLhs();
    if (!scale) {
      scale = constantFloats(mul.getLhs());
      other = mul.getRhs();
    }
    if (!scale || scale->size() != 1 || other.getType() != type)
      return std::nullopt;
    qkScale = (*scale)[0];
    s = other;
    between.push_back(mul);
  } else if (auto div = s.getDefiningOp<DivOp>()) {
    // scores / c (GPT-2's 1/sqrt(d) as exported) as scores * (1 / c).
    auto scale = constantFloats(div.getRhs());
    if (!div->hasOneUse() || !scale || scale->size() != 1 || (*scale)[0] == 0.0f ||
        div.getLhs().getType() != type)
      return std::nullopt;
    qkScale = 1.0f / (*scale)[0];
    s = div.getLhs();
    between.push_back(div);
  }
  auto mm = s.getDefiningOp<MatMulOp>();
  if (!mm || !mm->hasOneUse())
    return std::nullopt;
  return std::pair(mm, qkScale);
}

std::optional<AttentionScores> attentionScores(Value input) {
  if (auto mm = input.getDefiningOp<MatMulOp>())
    return mm->hasOneUse() ? std::optional(AttentionScores{mm}) : std::nullopt;
  if (auto add = input.getDefiningOp<AddOp>(); add && add->hasOneUse()) {
    for (int side = 0; side < 2; ++side) {
      Value mask = add->getOperand(1 - side);
      auto maskT = dyn_cast<RankedTensorType>(mask.getType());
      if (!maskT || !maskT.getElementType().isF32())
        continue;
      SmallVector<Operation *, 2> between{add};
      if (auto found = scaledScores(add->getOperand(side), add.getType(), between)) {
        AttentionScores a{found->first, found->second, mask};
        a.between = between;
        return a;
      }
    }
    return std::nullopt;
  }
  // Where(cond, c, scores) or Where(cond, scores, c), c one float: the
  // same as scores + Where(cond, c, 0) for c = -inf (what masked_fill
  // exporters write), and for any c far below the scores (-1e9, the
  // float's lowest) the same softmax.
  if (auto sel = input.getDefiningOp<SelectOp>(); sel && sel->hasOneUse()) {
    auto condT = dyn_cast<RankedTensorType>(sel.getCondition().getType());
    if (!condT || !condT.getElementType().isInteger(1))
      return std::nullopt;
    for (int side = 0; side < 2; ++side) {
      Value scores = side == 0 ? sel.getRhs() : sel.getLhs();
      Value fill = side == 0 ? sel.getLhs() : sel.getRhs();
      auto c = constantFloats(fill);
      if (!c || c->empty() || llvm::any_of(*c, [&](float v) { return v != (*c)[0]; }) ||
          !((*c)[0] < -1e8f))
        continue;
      SmallVector<Operation *, 2> between{sel};
      if (auto found = scaledScores(scores, sel.getType(), between)) {
        AttentionScores a{found->first, found->second};
        a.cond = sel.getCondition();
        a.fill = (*c)[0];
        a.fillWhen = side == 0;
        a.between = between;
        return a;
      }
    }
  }
  return std::nullopt;
}

/// matmul(softmax(scores), V), f32, the softmax over the last axis and
/// used only there: the softmax and its scores.
std::optional<AttentionScores> attentionOf(MatMulOp op) {
  auto sm = op.getLhs().getDefiningOp<SoftmaxOp>();
  auto outT = dyn_cast<RankedTensorType>(op.getType());
  if (!sm || !sm->hasOneUse() || sm.getLog() || !outT || !outT.getElementType().isF32() ||
      outT.getRank() < 2 || sm.getAxis() != outT.getRank() - 1)
    return std::nullopt;
  auto found = attentionScores(sm.getInput());
  if (found)
    found->softmax = sm;
  return found;
}

/// The additive mask of a Where (AttentionScores::cond): fill where the
/// condition is fillWhen, 0 elsewhere, of the condition's shape, built at
/// `b`'s insertion point; the mask itself for an additive one.
Value floatMask(OpBuilder &b, Location loc, const AttentionScores &a) {
  if (a.mask)
    return a.mask;
  auto condT = cast<RankedTensorType>(a.cond.getType());
  auto maskT = RankedTensorType::get(condT.getShape(), b.getF32Type());
  float fill = a.fill;
  bool when = a.fillWhen;
  return buildElementwise(
      b, loc, maskT, {a.cond},
      [&](OpBuilder &bb, Location l, ValueRange args) -> Value {
        Value f = f32(bb, l, fill), zero = f32(bb, l, 0.0f);
        return arith::SelectOp::create(bb, l, args[0], when ? f : zero, when ? zero : f);
      },
      dynamicSizes(b, loc, a.cond));
}

/// Which dims of the scores ([batch dims..., M, N], rank r) a mask that
/// broadcasts against them has: its last dim must be N and its row dim M
/// or 1, and the batch dims it does not broadcast along must be adjacent
/// (each batch index b then finds its mask at (b / div) % mod). `unit(d)`:
/// the mask's dim aligned to scores dim d is 1 (or missing); `own(d)`: it
/// is the scores' own; `scoresUnit(d)`: the scores' dim is 1. Shared by
/// the static and run-time layouts, which differ only in how they know
/// dims are equal.
struct MaskDims {
  bool rowsUnit;
  int64_t first = -1, last = -1; // the run of batch dims the mask has
};
std::optional<MaskDims> maskDims(int64_t r, function_ref<bool(int64_t)> unit,
                                 function_ref<bool(int64_t)> own,
                                 function_ref<bool(int64_t)> scoresUnit) {
  if (!own(r - 1) || (!unit(r - 2) && !own(r - 2)))
    return std::nullopt;
  MaskDims m{unit(r - 2)};
  for (int64_t d = 0; d + 2 < r; ++d) {
    if (!unit(d) && !own(d))
      return std::nullopt;
    if (scoresUnit(d) || unit(d))
      continue;
    // Dims between the run and this one must all be of size 1 in the
    // scores (then they do not split the run).
    if (m.first >= 0)
      for (int64_t e = m.last + 1; e < d; ++e)
        if (!scoresUnit(e))
          return std::nullopt;
    if (m.first < 0)
      m.first = d;
    m.last = d;
  }
  return m;
}

/// How kiln_attention_mask_f32 reads a mask of static shape `maskT`
/// against scores of shape `scoresT` (maskDims' rules). Fills the mask
/// fields of `p`.
bool maskLayout(RankedTensorType maskT, RankedTensorType scoresT,
                kiln_attention_mask_params &p) {
  int64_t r = scoresT.getRank(), mr = maskT.getRank();
  if (!maskT.hasStaticShape() || mr > r || mr < 1)
    return false;
  // The mask's dims aligned to the scores' (missing leading ones are 1).
  auto maskDim = [&](int64_t d) { return d < r - mr ? 1 : maskT.getDimSize(d - (r - mr)); };
  auto m = maskDims(
      r, [&](int64_t d) { return maskDim(d) == 1; },
      [&](int64_t d) { return maskDim(d) == scoresT.getDimSize(d); },
      [&](int64_t d) { return scoresT.getDimSize(d) == 1; });
  if (!m)
    return false;
  int64_t N = scoresT.getDimSize(r - 1), rows = m->rowsUnit ? 1 : scoresT.getDimSize(r - 2);
  p.mask_offset = 0;
  p.mask_batch_div = 1;
  p.mask_batch_mod = 1;
  p.mask_batch_stride = 0;
  p.mask_row_stride = rows == 1 ? 0 : N;
  if (m->first >= 0) {
    for (int64_t d = m->last + 1; d + 2 < r; ++d)
      p.mask_batch_div *= scoresT.getDimSize(d);
    for (int64_t d = m->first; d <= m->last; ++d)
      p.mask_batch_mod *= scoresT.getDimSize(d);
    p.mask_batch_stride = rows * N;
  }
  return true;
}

/// matmul(softmax(matmul(Q, K')), V), the softmax over the last axis and
/// each intermediate used once: one kiln_attention_f32 call, so the scores
/// stay on the stack (see attentionTask). Q, K' and V may be strided views
/// of other tensors (heads of one projection), read in place. With an
/// additive mask before the softmax (attentionScores), the call is to
/// kiln_attention_mask_f32, which reads the mask where it is.
struct LowerAttention : OpRewritePattern<MatMulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MatMulOp op, PatternRewriter &rw) const override {
    auto found = attentionOf(op);
    if (!found)
      return failure();
    auto outT = cast<RankedTensorType>(op.getType());
    if (!outT.hasStaticShape())
      return failure();
    SoftmaxOp sm = found->softmax;
    MatMulOp scores = found->scores;
    auto sT = cast<RankedTensorType>(scores.getType());
    if (sT.getRank() != outT.getRank())
      return failure();
    int64_t r = outT.getRank(), M = outT.getDimSize(r - 2), DV = outT.getDimSize(r - 1);
    int64_t N = sT.getDimSize(r - 1);
    auto qT = dyn_cast<RankedTensorType>(scores.getLhs().getType());
    if (!qT || qT.getRank() < 2 || M * DV * N == 0)
      return failure();
    int64_t D = qT.getDimSize(qT.getRank() - 1), batch = outT.getNumElements() / (M * DV);
    auto qv = batchedMatrix(scores.getLhs(), batch);
    auto kv = batchedMatrix(scores.getRhs(), batch);
    auto vv = batchedMatrix(op.getRhs(), batch);
    if (!qv || !kv || !vv || D == 0 || qv->colStride != 1 || vv->colStride != 1 ||
        (kv->colStride != 1 && kv->rowStride != 1))
      return failure();
    bool kTransposed = kv->colStride != 1;
    kiln_attention_params params{batch, M, N, D, DV,
                                 qv->offset, qv->batchStride, qv->rowStride,
                                 kv->offset, kv->batchStride,
                                 kTransposed ? kv->colStride : kv->rowStride, kTransposed ? 1 : 0,
                                 vv->offset, vv->batchStride, vv->rowStride,
                                 M * DV, DV};
    kiln_attention_mask_params masked{params};
    if (found->masked() &&
        !maskLayout(cast<RankedTensorType>(found->maskShape().getType()), sT, masked))
      return failure();
    Location loc = op.getLoc();
    Value scale = f32(rw, loc, sm.getScale().convertToFloat());
    int64_t flops = 2 * batch * M * N * (D + DV);
    if (!found->masked()) {
      SmallVector<Value> args{i64Block(rw, loc, fields(params)), qv->base, kv->base, vv->base,
                              scale};
      rw.replaceOp(op, callWithResult(rw, loc, kAttention, outT, args, 4, {}, flops));
      return success();
    }
    SmallVector<Value> args{i64Block(rw, loc, fields(masked)), qv->base, kv->base, vv->base,
                            floatMask(rw, loc, *found), scale, f32(rw, loc, found->qkScale)};
    rw.replaceOp(op, callWithResult(rw, loc, kAttentionMask, outT, args, 5, {}, flops));
    return success();
  }
};

// ---- Dims known only at run time ----

Value product(OpBuilder &b, Location loc, ArrayRef<Value> factors) {
  Value p = indexConst(b, loc, 1);
  for (Value f : factors)
    p = arith::MulIOp::create(b, loc, p, f);
  return p;
}

/// A batched matrix [batch, rows, cols] that a kernel reads where it is,
/// its strides index values at the call (they may depend on run-time dims).
struct RuntimeMatrix {
  Value base;
  int64_t offset = 0;
  Value batchStride, rowStride, colStride;
};

/// How a run-time-shaped operand is read, decided before any IR is built
/// (a pattern must not change the IR and then fail): a view with static
/// strides (dynamicMatrixView); a transpose of a tensor whose buffer is
/// dense (a head split's [seq, batch * heads, d] read as [batch * heads, d,
/// seq], the batch stride then one of the base's); or the operand's own
/// dense buffer (a copy when it is a view in another layout), whose batch
/// dims always fold into one stride.
struct MatrixReading {
  Value value;
  std::optional<MatrixView> view;
  Value base;
  SmallVector<int64_t> perm; // view dim -> base dim

  /// Whether the column (row) stride is 1: known while compiling, since the
  /// kernels take one of two layouts.
  bool unitCols() const {
    return view ? view->colStride == 1 : perm.back() == (int64_t)perm.size() - 1;
  }
  bool unitRows() const {
    return view ? view->rowStride == 1 : perm[perm.size() - 2] == (int64_t)perm.size() - 1;
  }
};

std::optional<MatrixReading> readingOf(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  if (!t || t.getRank() < 2 || !t.getElementType().isF32())
    return std::nullopt;
  if (auto view = dynamicMatrixView(v))
    return MatrixReading{v, view, view->base, {}};
  int64_t r = t.getRank();
  if (auto tr = v.getDefiningOp<TransposeOp>(); tr && hasRuntimeDims(tr.getInput())) {
    // The batch dims that are not a static 1 must fold into one stride, the
    // innermost one's (materializeReading): in the base, in the same order
    // and next to each other, or apart by dims of a static 1 only. A
    // decoder's keys [batch, heads, past, d] read as K^T [batch, heads, d,
    // past] do; with only one such dim allowed, every step of a decoder
    // compiled for every batch size copied its keys into the transpose
    // (d = 768, batch 4: 0.22 ms a layer).
    auto baseT = cast<RankedTensorType>(tr.getInput().getType());
    ArrayRef<int64_t> perm = tr.getPerm();
    bool folds = true;
    int64_t last = -1;
    for (int64_t d = 0; d + 2 < r && folds; ++d) {
      if (!t.isDynamicDim(d) && t.getDimSize(d) == 1)
        continue;
      if (last >= 0) {
        folds = perm[d] > last;
        for (int64_t g = last + 1; folds && g < perm[d]; ++g)
          folds = !baseT.isDynamicDim(g) && baseT.getDimSize(g) == 1;
      }
      last = perm[d];
    }
    if (folds)
      return MatrixReading{v, std::nullopt, tr.getInput(), SmallVector<int64_t>(perm)};
  }
  if (!hasRuntimeDims(v))
    return std::nullopt;
  SmallVector<int64_t> identity;
  for (int64_t d = 0; d < r; ++d)
    identity.push_back(d);
  return MatrixReading{v, std::nullopt, v, identity};
}

/// The reading's strides, built at `b`'s insertion point.
RuntimeMatrix materializeReading(OpBuilder &b, Location loc, const MatrixReading &m) {
  if (m.view)
    return {m.base,
            m.view->offset,
            indexConst(b, loc, m.view->batchStride),
            indexConst(b, loc, m.view->rowStride),
            indexConst(b, loc, m.view->colStride)};
  int64_t r = cast<RankedTensorType>(m.base.getType()).getRank();
  // The dense base's strides.
  SmallVector<Value> strides(r);
  Value stride = indexConst(b, loc, 1);
  for (int64_t d = r - 1; d >= 0; --d) {
    strides[d] = stride;
    stride = arith::MulIOp::create(b, loc, stride, runtimeDim(b, loc, m.base, d));
  }
  RuntimeMatrix out{m.base, 0, indexConst(b, loc, 0), strides[m.perm[r - 2]],
                    strides[m.perm[r - 1]]};
  if (r == 2)
    return out;
  if (m.base == m.value) {
    out.batchStride = strides[r - 3]; // rows * cols: the batch dims fold
    return out;
  }
  auto vt = cast<RankedTensorType>(m.value.getType());
  for (int64_t d = 0; d + 2 < r; ++d)
    if (vt.isDynamicDim(d) || vt.getDimSize(d) != 1)
      out.batchStride = strides[m.perm[d]];
  return out;
}

/// maskLayout for dims known only at run time: the same rules (maskDims),
/// each dim of the mask a static 1 or the scores' own (the same
/// expression), with the fields as index values at `b`'s insertion point:
/// (offset, div, mod, batch stride, row stride). With a null `b`, only
/// whether the mask can be read this way (an empty list).
std::optional<SmallVector<Value>> runtimeMaskLayout(OpBuilder *b, Location loc, Value mask,
                                                    Value scores) {
  auto maskT = cast<RankedTensorType>(mask.getType());
  auto sT = cast<RankedTensorType>(scores.getType());
  int64_t r = sT.getRank(), mr = maskT.getRank();
  if (mr > r || mr < 1 || !hasRuntimeDims(mask))
    return std::nullopt;
  auto m = maskDims(
      r,
      [&](int64_t d) {
        return d < r - mr ||
               (!maskT.isDynamicDim(d - (r - mr)) && maskT.getDimSize(d - (r - mr)) == 1);
      },
      [&](int64_t d) { return d >= r - mr && sameDim(mask, d - (r - mr), scores, d); },
      [&](int64_t d) { return !sT.isDynamicDim(d) && sT.getDimSize(d) == 1; });
  if (!m)
    return std::nullopt;
  if (!b)
    return SmallVector<Value>{};
  SmallVector<Value> div, mod;
  if (m->first >= 0) {
    for (int64_t d = m->last + 1; d + 2 < r; ++d)
      div.push_back(runtimeDim(*b, loc, scores, d));
    for (int64_t d = m->first; d <= m->last; ++d)
      mod.push_back(runtimeDim(*b, loc, scores, d));
  }
  Value N = runtimeDim(*b, loc, scores, r - 1);
  Value rows = m->rowsUnit ? indexConst(*b, loc, 1) : runtimeDim(*b, loc, scores, r - 2);
  Value batchStride = m->first >= 0 ? arith::MulIOp::create(*b, loc, rows, N).getResult()
                                    : indexConst(*b, loc, 0);
  return SmallVector<Value>{indexConst(*b, loc, 0), product(*b, loc, div),
                            product(*b, loc, mod), batchStride,
                            m->rowsUnit ? indexConst(*b, loc, 0) : N};
}

/// A parameter block from index values (tensor.from_elements of i64s).
Value runtimeBlock(OpBuilder &b, Location loc, ArrayRef<Value> fields) {
  SmallVector<Value> elements;
  for (Value v : fields)
    elements.push_back(arith::IndexCastOp::create(b, loc, b.getI64Type(), v));
  return tensor::FromElementsOp::create(b, loc, elements);
}

/// LowerAttention where dims are known only at run time (compiled once for
/// every shape): the same kernels, with the lengths, the batch (heads, or
/// batch x heads) and the strides computed at the call. The kernels take
/// any number of keys (beyond one block of scores, in chunks), so there is
/// one call and no run-time choice of path.
struct LowerDynamicAttention : OpRewritePattern<MatMulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MatMulOp op, PatternRewriter &rw) const override {
    auto found = attentionOf(op);
    if (!found)
      return failure();
    auto outT = cast<RankedTensorType>(op.getType());
    if (outT.hasStaticShape() || !hasRuntimeDims(op.getResult()))
      return failure();
    SoftmaxOp sm = found->softmax;
    MatMulOp scores = found->scores;
    auto sT = cast<RankedTensorType>(scores.getType());
    auto qT = dyn_cast<RankedTensorType>(scores.getLhs().getType());
    int64_t r = outT.getRank();
    if (sT.getRank() != r || !qT || qT.getRank() != r || qT.isDynamicDim(r - 1) ||
        outT.isDynamicDim(r - 1) || !hasRuntimeDims(scores.getResult()))
      return failure();
    int64_t D = qT.getDimSize(r - 1), DV = outT.getDimSize(r - 1);
    // Every operand has the result's batch dims (no broadcast).
    auto full = [&](Value v) {
      auto t = cast<RankedTensorType>(v.getType());
      return t.getRank() == r && sameDims(v, op.getResult(), r - 2);
    };
    if (D == 0 || DV == 0 || !full(scores.getLhs()) || !full(scores.getRhs()) ||
        !full(op.getRhs()))
      return failure();
    auto qr = readingOf(scores.getLhs()), kr = readingOf(scores.getRhs()),
         vr = readingOf(op.getRhs());
    if (!qr || !kr || !vr)
      return failure();
    if (!qr->unitCols() || !vr->unitCols() || (!kr->unitCols() && !kr->unitRows()))
      return failure();
    if (found->masked() &&
        !runtimeMaskLayout(nullptr, op.getLoc(), found->maskShape(), scores.getResult()))
      return failure();

    // Heads back next to each other ([heads, M, DV] -> [M, heads, DV], what
    // an exporter's output projection reads): the kernels write that
    // layout directly, through the output's strides, and the transpose goes.
    auto merge = op->hasOneUse() ? dyn_cast<TransposeOp>(*op->getUsers().begin()) : TransposeOp();
    bool headsLast = r == 3 && merge && merge.getPerm() == ArrayRef<int64_t>{1, 0, 2};
    Value result = headsLast ? merge.getResult() : op.getResult();
    auto resultT = cast<RankedTensorType>(result.getType());
    Location loc = op.getLoc();
    rw.setInsertionPoint(headsLast ? merge.getOperation() : op.getOperation());
    RuntimeMatrix qv = materializeReading(rw, loc, *qr), kv = materializeReading(rw, loc, *kr),
                  vv = materializeReading(rw, loc, *vr);
    bool kTransposed = !kr->unitCols();
    SmallVector<Value> batchDims;
    for (int64_t d = 0; d + 2 < r; ++d)
      batchDims.push_back(runtimeDim(rw, loc, op.getResult(), d));
    Value batch = product(rw, loc, batchDims);
    Value M = runtimeDim(rw, loc, scores.getResult(), r - 2);
    Value N = runtimeDim(rw, loc, scores.getResult(), r - 1);
    Value dvIndex = indexConst(rw, loc, DV);
    // Where output row i of batch b starts: b * outBatch + i * outRow.
    Value outBatch = headsLast ? dvIndex : arith::MulIOp::create(rw, loc, M, dvIndex).getResult();
    Value outRow = headsLast ? arith::MulIOp::create(rw, loc, batch, dvIndex).getResult() : dvIndex;
    Value scale = f32(rw, loc, sm.getScale().convertToFloat());
    Value qkScale = f32(rw, loc, found->qkScale);
    Value mask = found->masked() ? floatMask(rw, loc, *found) : Value();
    // kiln_attention_params, field by field.
    SmallVector<Value> params{batch,
                              M,
                              N,
                              indexConst(rw, loc, D),
                              dvIndex,
                              indexConst(rw, loc, qv.offset),
                              qv.batchStride,
                              qv.rowStride,
                              indexConst(rw, loc, kv.offset),
                              kv.batchStride,
                              kTransposed ? kv.colStride : kv.rowStride,
                              indexConst(rw, loc, kTransposed ? 1 : 0),
                              indexConst(rw, loc, vv.offset),
                              vv.batchStride,
                              vv.rowStride,
                              outBatch,
                              outRow};
    static_assert(sizeof(kiln_attention_params) == 17 * sizeof(int64_t),
                  "the block above lists every field");
    Value fused;
    if (!mask) {
      SmallVector<Value> args{runtimeBlock(rw, loc, params), qv.base, kv.base, vv.base, scale};
      fused = callWithResult(rw, loc, kAttention, resultT, args, 4, {}, 0,
                             dynamicSizes(rw, loc, result));
    } else {
      params.append(*runtimeMaskLayout(&rw, loc, found->maskShape(), scores.getResult()));
      static_assert(sizeof(kiln_attention_mask_params) == 22 * sizeof(int64_t),
                    "the block above lists every field");
      SmallVector<Value> args{runtimeBlock(rw, loc, params), qv.base, kv.base, vv.base, mask,
                              scale, qkScale};
      fused = callWithResult(rw, loc, kAttentionMask, resultT, args, 5, {}, 0,
                             dynamicSizes(rw, loc, result));
    }
    if (headsLast) {
      rw.replaceOp(merge, fused);
      rw.eraseOp(op);
    } else {
      rw.replaceOp(op, fused);
    }
    rw.eraseOp(sm);
    for (Operation *between : found->between)
      rw.eraseOp(between);
    rw.eraseOp(scores);
    return success();
  }
};

} // namespace

void populateFusedKernelPatterns(RewritePatternSet &patterns) {
  patterns.add<LowerAttention, LowerDynamicAttention>(patterns.getContext());
}

} // namespace kiln::codegen
