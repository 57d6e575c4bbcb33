// kiln-gpu-fuse-elementwise: the GPU path's elementwise fusion on linalg on
// tensors, which fuses a producer into its consumer only where the consumer
// reads it through a permutation of all its loops, so that no producer
// element is computed twice. The CPU twin is kiln-fuse-elementwise
// (lib/codegen/cpu/FuseElementwise.cpp), whose matrix products are kernel
// calls and so never meet the case this pass avoids.
#include "kiln/Codegen/GpuPasses.h"

#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace kiln {
#define GEN_PASS_DEF_KILNGPUFUSEELEMENTWISE
#include "kiln/Codegen/GpuPasses.h.inc"
} // namespace kiln

using namespace mlir;

namespace kiln {
namespace {

struct GpuFuseElementwisePass : impl::KilnGpuFuseElementwiseBase<GpuFuseElementwisePass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    linalg::ControlFusionFn onceEach = [](OpOperand *use) {
      auto consumer = dyn_cast<linalg::LinalgOp>(use->getOwner());
      if (!consumer || !use->get().getDefiningOp<linalg::GenericOp>())
        return false;
      AffineMap map = consumer.getMatchingIndexingMap(use);
      return map.isPermutation() && map.getNumDims() == consumer.getNumLoops();
    };
    linalg::populateElementwiseOpsFusionPatterns(patterns, onceEach);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
} // namespace kiln
