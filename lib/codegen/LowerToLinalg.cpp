// The kiln-lower-to-linalg pass: checks that every value has a static shape
// and a supported element type (with an error naming the op, and so the ONNX
// node), then applies the lowering patterns as a partial conversion.
#include "LoweringUtils.h"
#include "kiln/Passes/Passes.h"

#include "mlir/Transforms/DialectConversion.h"

namespace kiln {
#define GEN_PASS_DEF_KILNLOWERTOLINALG
#include "kiln/Passes/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace kiln {
namespace {

LogicalResult checkCodegenType(Operation *op, Type type, StringRef what) {
  auto t = dyn_cast<RankedTensorType>(type);
  if (!t)
    return op->emitError() << what << " has unknown rank; give concrete input shapes";
  if (!t.hasStaticShape())
    return op->emitError() << what << " has dynamic shape " << t
                           << "; give concrete input shapes";
  Type elt = t.getElementType();
  if (auto it = dyn_cast<IntegerType>(elt); it && !it.isSignless())
    return op->emitError() << what << " has unsigned element type " << elt
                           << ", which code generation does not support yet";
  if (!elt.isIntOrFloat())
    return op->emitError() << what << " has unsupported element type " << elt;
  return success();
}

struct LowerToLinalgPass : impl::KilnLowerToLinalgBase<LowerToLinalgPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    bool ok = true;
    func.walk([&](Operation *op) {
      if (!isa<KilnDialect>(op->getDialect()))
        return;
      for (Value v : op->getOperands())
        ok &= succeeded(checkCodegenType(op, v.getType(), "an operand"));
      for (Value v : op->getResults())
        ok &= succeeded(checkCodegenType(op, v.getType(), "the result"));
    });
    for (BlockArgument arg : func.getArguments())
      ok &= succeeded(checkCodegenType(func, arg.getType(), "a model input"));
    if (!ok)
      return signalPassFailure();

    RewritePatternSet patterns(&getContext());
    codegen::populateElementwiseLoweringPatterns(patterns);
    codegen::populateStructuredLoweringPatterns(patterns);
    codegen::populateDataMovementLoweringPatterns(patterns);
    ConversionTarget target(getContext());
    target.addIllegalDialect<KilnDialect>();
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    if (failed(applyPartialConversion(func, target, std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
} // namespace kiln
