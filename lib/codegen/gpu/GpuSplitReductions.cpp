// kiln-gpu-split-reductions: long reductions with few outputs become two
// kernels (partial results, then their combination), so that a row
// reduction over a few hundred rows keeps thousands of GPU threads busy.
// The transformation is upstream's linalg::splitReduction; this pass only
// decides where and by how much (see Passes.td).
#include "kiln/Codegen/GpuPasses.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

namespace kiln {
#define GEN_PASS_DEF_KILNGPUSPLITREDUCTIONS
#include "kiln/Codegen/GpuPasses.h.inc"
} // namespace kiln

using namespace mlir;

namespace kiln {
namespace {

/// Below this many outputs a reduction's threads cannot fill a GPU.
constexpr int64_t kFewOutputs = 1 << 14;
/// The split op's threads stay at most this many.
constexpr int64_t kMaxSplitThreads = 1 << 16;
constexpr int64_t kMinReduction = 64;
constexpr int64_t kMinRatio = 8;

linalg::SplitReductionOptions chooseSplit(linalg::LinalgOp op) {
  // LLVM 22's split moves the body without renumbering linalg.index (an
  // index of the reduction dim would see only its outer part): none here.
  if (op->getNumResults() != 1 || op.getNumDpsInits() != 1 || op.getNumReductionLoops() != 1 ||
      !op.hasPureTensorSemantics() || op.hasIndexSemantics())
    return {};
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  int64_t outputs = 1, k = 0;
  for (auto [range, type] : llvm::zip(ranges, op.getIteratorTypesArray())) {
    if (ShapedType::isDynamic(range))
      return {};
    if (linalg::isParallelIterator(type))
      outputs *= range;
    else
      k = range;
  }
  if (outputs >= kFewOutputs || k < kMinReduction)
    return {};
  int64_t r = 1;
  while ((2 * r) * (2 * r) <= k && k % (2 * r) == 0 && outputs * 2 * r <= kMaxSplitThreads)
    r *= 2;
  if (r < kMinRatio)
    return {};
  linalg::SplitReductionOptions options;
  options.ratio = r;
  // The partial results' own dim goes last: each output's r partials are
  // contiguous, written by consecutive threads and read in one row.
  options.index = cast<ShapedType>(op.getDpsInitOperand(0)->get().getType()).getRank();
  options.innerParallel = true;
  return options;
}

/// Whether `map`'s result `i` reads a unit dim of `type` at index 0.
bool constantUnitDim(AffineMap map, RankedTensorType type, unsigned i) {
  auto c = dyn_cast<AffineConstantExpr>(map.getResult(i));
  return c && c.getValue() == 0 && type.getDimSize(i) == 1;
}

/// `op` with every input that it reads at a constant index of a unit dim
/// (a dim ONNX's keepdims left: the mean in x - mean reads (d0, d1, 0))
/// collapsed to drop that dim, so that every map is a projected
/// permutation: upstream's split builds invalid maps from a constant index.
/// Null when there is nothing to drop.
linalg::GenericOp dropConstantUnitDims(RewriterBase &rw, linalg::GenericOp op) {
  SmallVector<Value> inputs;
  SmallVector<AffineMap> maps;
  bool changed = false;
  for (OpOperand *in : op.getDpsInputOperands()) {
    AffineMap map = op.getMatchingIndexingMap(in);
    auto type = dyn_cast<RankedTensorType>(in->get().getType());
    SmallVector<unsigned> dropped;
    for (unsigned i = 0; type && i < map.getNumResults(); ++i)
      if (constantUnitDim(map, type, i))
        dropped.push_back(i);
    if (dropped.empty()) {
      inputs.push_back(in->get());
      maps.push_back(map);
      continue;
    }
    changed = true;
    // Each dropped dim joins the group of the next kept dim (the last kept
    // one for trailing dims); with no kept dim the input becomes a scalar.
    SmallVector<ReassociationIndices> groups;
    SmallVector<AffineExpr> kept;
    SmallVector<int64_t> shape;
    ReassociationIndices pending;
    for (unsigned i = 0; i < map.getNumResults(); ++i) {
      pending.push_back(i);
      if (llvm::is_contained(dropped, i))
        continue;
      groups.push_back(pending);
      pending.clear();
      kept.push_back(map.getResult(i));
      shape.push_back(type.getDimSize(i));
    }
    if (!groups.empty())
      groups.back().append(pending.begin(), pending.end());
    auto collapsedType = RankedTensorType::get(shape, type.getElementType());
    inputs.push_back(tensor::CollapseShapeOp::create(rw, op.getLoc(), collapsedType, in->get(),
                                                     groups));
    maps.push_back(AffineMap::get(map.getNumDims(), 0, kept, op.getContext()));
  }
  if (!changed)
    return {};
  SmallVector<Value> outputs = op.getDpsInits();
  for (OpOperand &out : op.getDpsInitsMutable())
    maps.push_back(op.getMatchingIndexingMap(&out));
  auto generic = linalg::GenericOp::create(rw, op.getLoc(), op->getResultTypes(), inputs, outputs,
                                           maps, op.getIteratorTypesArray());
  rw.inlineRegionBefore(op.getRegion(), generic.getRegion(), generic.getRegion().end());
  rw.replaceOp(op, generic->getResults());
  return generic;
}

/// A reduction whose init is a fill used by nothing else takes the fill's
/// value at its first reduction step instead of reading it, and its init
/// becomes the fill's unwritten destination: on the GPU a fill is a kernel
/// launch of its own. Only for the split's two ops, whose one reduction
/// loop is short enough to be unrolled, so the select costs nothing there
/// (in a long loop it would be one more instruction per step).
void startFromFill(RewriterBase &rw, linalg::LinalgOp linalgOp) {
  auto op = dyn_cast<linalg::GenericOp>(linalgOp.getOperation());
  if (!op || op.getNumDpsInits() != 1)
    return;
  auto fill = op.getDpsInits()[0].getDefiningOp<linalg::FillOp>();
  if (!fill || !fill->hasOneUse())
    return;
  SmallVector<unsigned> reductions;
  op.getReductionDims(reductions);
  if (reductions.size() != 1)
    return;
  Block &body = op.getRegion().front();
  BlockArgument acc = body.getArguments().back();
  Location loc = op.getLoc();
  rw.setInsertionPointToStart(&body);
  Value k = linalg::IndexOp::create(rw, loc, reductions.front());
  Value zero = arith::ConstantIndexOp::create(rw, loc, 0);
  Value first = arith::CmpIOp::create(rw, loc, arith::CmpIPredicate::eq, k, zero);
  Value start = arith::SelectOp::create(rw, loc, first, fill.getInputs()[0], acc);
  rw.replaceAllUsesExcept(acc, start, start.getDefiningOp());
  rw.modifyOpInPlace(op, [&] { op.getDpsInitsMutable()[0].set(fill.getOutputs()[0]); });
  rw.eraseOp(fill);
}

struct GpuSplitReductionsPass
    : impl::KilnGpuSplitReductionsBase<GpuSplitReductionsPass> {
  void runOnOperation() override {
    SmallVector<linalg::LinalgOp> candidates;
    getOperation().walk([&](linalg::LinalgOp op) {
      if (chooseSplit(op).ratio > 1)
        candidates.push_back(op);
    });
    IRRewriter rw(&getContext());
    for (linalg::LinalgOp op : candidates) {
      rw.setInsertionPoint(op);
      if (auto generic = dyn_cast<linalg::GenericOp>(op.getOperation()))
        if (linalg::GenericOp simpler = dropConstantUnitDims(rw, generic))
          op = simpler;
      // A reduction upstream cannot split (a combiner it does not know, an
      // input the split dim cannot be expanded in) stays one kernel.
      if (!op.hasOnlyProjectedPermutations())
        continue;
      FailureOr<linalg::SplitReductionResult> split = linalg::splitReduction(rw, op, chooseSplit);
      if (failed(split))
        continue;
      startFromFill(rw, split->splitLinalgOp);
      startFromFill(rw, split->resultCombiningLinalgOp);
    }
  }
};

} // namespace
} // namespace kiln
