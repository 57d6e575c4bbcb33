// kiln-fuse-elementwise: upstream's elementwise fusion with a bound on the
// size of a fused body. Why our own driver: upstream's pass fuses a chain
// of N elementwise ops by copying the growing body N times (O(N^2): a
// 10,000-node chain took 71 s of a 72 s compile), and its control function
// cannot be set from outside. The pattern set is upstream's; only the
// control function differs.
#include "kiln/Codegen/CpuPasses.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/Transforms.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace kiln {
#define GEN_PASS_DEF_KILNFUSEELEMENTWISE
#include "kiln/Codegen/CpuPasses.h.inc"
} // namespace kiln

using namespace mlir;

namespace kiln {
namespace {

int64_t bodySize(Operation *op) {
  auto generic = dyn_cast_or_null<linalg::GenericOp>(op);
  return generic ? (int64_t)generic.getBody()->getOperations().size() : 0;
}

struct FuseElementwisePass : impl::KilnFuseElementwiseBase<FuseElementwisePass> {
  using KilnFuseElementwiseBase::KilnFuseElementwiseBase;

  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    int64_t bound = maxBodyOps;
    // Upstream's default (a producer with one use), plus the bound.
    linalg::ControlFusionFn control = [bound](OpOperand *fused) {
      Operation *producer = fused->get().getDefiningOp();
      if (!producer || !producer->hasOneUse())
        return false;
      return bodySize(producer) + bodySize(fused->getOwner()) <= bound;
    };
    RewritePatternSet patterns(ctx);
    linalg::populateElementwiseOpsFusionPatterns(patterns, control);
    linalg::populateFoldReshapeOpsByExpansionPatterns(patterns, control);
    tensor::populateBubbleUpExpandShapePatterns(patterns);
    affine::AffineApplyOp::getCanonicalizationPatterns(patterns, ctx);
    linalg::GenericOp::getCanonicalizationPatterns(patterns, ctx);
    tensor::ExpandShapeOp::getCanonicalizationPatterns(patterns, ctx);
    tensor::CollapseShapeOp::getCanonicalizationPatterns(patterns, ctx);
    ctx->getLoadedDialect<linalg::LinalgDialect>()->getCanonicalizationPatterns(patterns);
    linalg::populateConstantFoldLinalgOperations(patterns, control);
    GreedyRewriteConfig config;
    config.setUseTopDownTraversal(true);
    (void)applyPatternsGreedily(getOperation(), std::move(patterns), config);
  }
};

} // namespace
} // namespace kiln
