// kiln-untie-shared-tensors: one tensor.empty or tensor constant per user,
// so that one-shot bufferization's in-place analysis, which gathers every
// use of an operand's value for each operand, stays linear in the number of
// users (see Passes.td).
#include "kiln/Conversion/Passes.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"

namespace kiln {
#define GEN_PASS_DEF_KILNUNTIESHAREDTENSORS
#include "kiln/Conversion/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace kiln {
namespace {

/// An op whose clone is the same value: a tensor.empty (its dynamic sizes
/// dominate the original and so every user) or a tensor constant.
bool isUntiable(Operation *op) {
  if (op->getNumResults() != 1 || !isa<TensorType>(op->getResult(0).getType()) ||
      op->getNumRegions() != 0)
    return false;
  if (isa<tensor::EmptyOp>(op))
    return true;
  return op->hasTrait<OpTrait::ConstantLike>() && op->getNumOperands() == 0;
}

struct UntieSharedTensorsPass : impl::KilnUntieSharedTensorsBase<UntieSharedTensorsPass> {
  void runOnOperation() override {
    SmallVector<Operation *> shared;
    getOperation().walk([&](Operation *op) {
      if (isUntiable(op) && !op->hasOneUse() && !op->use_empty())
        shared.push_back(op);
    });
    OpBuilder b(&getContext());
    for (Operation *op : shared) {
      SmallVector<OpOperand *> uses;
      for (OpOperand &use : op->getUses())
        uses.push_back(&use);
      // Use lists run newest first: in program order, the first user keeps
      // the original (deterministic output).
      Block *block = uses.front()->getOwner()->getBlock();
      if (llvm::all_of(uses, [&](OpOperand *u) { return u->getOwner()->getBlock() == block; }))
        llvm::sort(uses, [](OpOperand *a, OpOperand *b) {
          if (a->getOwner() == b->getOwner())
            return a->getOperandNumber() < b->getOperandNumber();
          return a->getOwner()->isBeforeInBlock(b->getOwner());
        });
      // The first use keeps the original; a clone sits right before each
      // other user.
      for (OpOperand *use : llvm::drop_begin(uses)) {
        b.setInsertionPoint(use->getOwner());
        use->set(b.clone(*op)->getResult(0));
      }
    }
  }
};

} // namespace
} // namespace kiln
