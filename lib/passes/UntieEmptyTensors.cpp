// kiln-untie-empty-tensors: one tensor.empty per user, so that one-shot
// bufferization's in-place analysis does not compare every write into a
// CSE-merged empty tensor with every other (quadratic in the number of
// same-shaped results; see Passes.td).
#include "kiln/Passes/Passes.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"

namespace kiln {
#define GEN_PASS_DEF_KILNUNTIEEMPTYTENSORS
#include "kiln/Passes/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace kiln {
namespace {

struct UntieEmptyTensorsPass : impl::KilnUntieEmptyTensorsBase<UntieEmptyTensorsPass> {
  void runOnOperation() override {
    SmallVector<tensor::EmptyOp> shared;
    getOperation().walk([&](tensor::EmptyOp e) {
      if (!e->hasOneUse() && !e->use_empty())
        shared.push_back(e);
    });
    OpBuilder b(&getContext());
    for (tensor::EmptyOp e : shared) {
      SmallVector<OpOperand *> uses;
      for (OpOperand &use : e->getUses())
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
      // other user (its dynamic sizes, if any, dominate the original and so
      // the user).
      for (OpOperand *use : llvm::drop_begin(uses)) {
        b.setInsertionPoint(use->getOwner());
        use->set(b.clone(*e)->getResult(0));
      }
    }
  }
};

} // namespace
} // namespace kiln
