// kiln-empty-arguments: buffers of zero elements reach the entry point as
// memref<0xT>, whose bare-pointer form upstream's func-to-llvm accepts (see
// the pass description in Passes.td).
#include "kiln/Conversion/Passes.h"

namespace kiln {
#define GEN_PASS_DEF_KILNEMPTYARGUMENTS
#include "kiln/Conversion/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace kiln {
namespace {

/// A static memref of zero elements and rank > 1 (rank 1 converts as is).
bool isEmptyBuffer(Type t) {
  auto m = dyn_cast<MemRefType>(t);
  return m && m.hasStaticShape() && m.getRank() > 1 && m.getNumElements() == 0;
}

struct EmptyArgumentsPass : impl::KilnEmptyArgumentsBase<EmptyArgumentsPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal() || !func.isPublic())
      return;
    Block &entry = func.getBody().front();
    SmallVector<Type> argTypes(func.getArgumentTypes());
    bool changed = false;
    OpBuilder b = OpBuilder::atBlockBegin(&entry);
    for (BlockArgument arg : entry.getArguments()) {
      if (!isEmptyBuffer(arg.getType()))
        continue;
      auto type = cast<MemRefType>(arg.getType());
      // No element of it is ever read or written: any buffer of the type
      // serves its uses.
      Value stand = memref::AllocaOp::create(b, func.getLoc(), type);
      arg.replaceAllUsesWith(stand);
      auto flat = MemRefType::get({0}, type.getElementType(), AffineMap(), type.getMemorySpace());
      arg.setType(flat);
      argTypes[arg.getArgNumber()] = flat;
      changed = true;
    }
    if (changed)
      func.setType(FunctionType::get(&getContext(), argTypes, func.getResultTypes()));
  }
};

} // namespace
} // namespace kiln
