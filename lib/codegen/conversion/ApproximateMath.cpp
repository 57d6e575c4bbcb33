// kiln-approximate-math: f32 exp, erf and tanh become MLIR's polynomial
// approximations (upstream populateMathPolynomialApproximationPatterns)
// instead of libm calls, so that the loops around them vectorize (a call
// to erff in the GELU loop of an MLP cost more than the loop's load/store
// traffic). Other math ops keep their libm calls: their inputs reach the
// ranges where the approximations are less accurate (log near 0, tan), and
// they are rare in hot loops.
#include "kiln/Conversion/Passes.h"

#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace kiln {
#define GEN_PASS_DEF_KILNAPPROXIMATEMATH
#include "kiln/Conversion/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace kiln {
namespace {

struct ApproximateMathPass : impl::KilnApproximateMathBase<ApproximateMathPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    auto selected = [](StringRef name) {
      return name == math::ExpOp::getOperationName() || name == math::ErfOp::getOperationName() ||
             name == math::TanhOp::getOperationName();
    };
    populateMathF32ExpansionPatterns(patterns, selected);
    populateMathPolynomialApproximationPatterns(patterns, selected);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
} // namespace kiln
