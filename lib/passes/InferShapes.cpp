// kiln-infer-shapes: one forward sweep that refines result types and folds
// ops whose operands became constant. A sweep in block order suffices
// because ONNX graphs are topologically sorted DAGs: every operand is final
// before its user is visited.
#include "kiln/Passes/Passes.h"

#include "mlir/IR/Matchers.h"

namespace kiln {
#define GEN_PASS_DEF_KILNINFERSHAPES
#include "kiln/Passes/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace kiln {
namespace {

/// Folds `op` if all its operands are constants; returns true if replaced.
bool tryFold(Operation *op, OpBuilder &b) {
  SmallVector<Attribute> operands;
  for (Value v : op->getOperands()) {
    Attribute a;
    if (!matchPattern(v, m_Constant(&a)))
      a = {};
    operands.push_back(a);
  }
  SmallVector<OpFoldResult> results;
  if (failed(op->fold(operands, results)) || results.empty())
    return false;
  SmallVector<Value> replacements;
  b.setInsertionPoint(op);
  for (auto [r, res] : llvm::zip(results, op->getResults())) {
    if (auto v = dyn_cast<Value>(r)) {
      // An in-place fold (the op updated its own operands) keeps the op.
      if (v == res || v.getType() != res.getType())
        return false;
      replacements.push_back(v);
      continue;
    }
    Operation *c = op->getDialect()->materializeConstant(b, cast<Attribute>(r), res.getType(),
                                                         op->getLoc());
    if (!c)
      return false;
    replacements.push_back(c->getResult(0));
  }
  op->replaceAllUsesWith(replacements);
  op->erase();
  return true;
}

struct InferShapesPass : impl::KilnInferShapesBase<InferShapesPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    OpBuilder b(&getContext());
    bool failedAny = false;
    for (Block &block : func.getBody()) {
      for (Operation &op : llvm::make_early_inc_range(block)) {
        if (!isa<KilnDialect>(op.getDialect()))
          continue;
        if (failed(refineResultTypes(&op))) {
          failedAny = true;
          continue;
        }
        if (!isa<ConstantOp>(op))
          tryFold(&op, b);
      }
    }
    if (failedAny)
      return signalPassFailure();
    // The signature follows the refined return values.
    auto ret = cast<func::ReturnOp>(func.getBody().back().getTerminator());
    func.setType(FunctionType::get(&getContext(), func.getArgumentTypes(),
                                   ret.getOperandTypes()));
  }
};

} // namespace
} // namespace kiln
