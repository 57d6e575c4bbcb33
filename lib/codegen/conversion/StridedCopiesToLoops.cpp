#include "kiln/Conversion/Passes.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"

namespace kiln {
#define GEN_PASS_DEF_KILNSTRIDEDCOPIESTOLOOPS
#include "kiln/Conversion/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace kiln {
namespace {

bool isContiguous(Value v) {
  auto t = dyn_cast<MemRefType>(v.getType());
  return t && t.getLayout().isIdentity();
}

struct StridedCopiesToLoopsPass
    : impl::KilnStridedCopiesToLoopsBase<StridedCopiesToLoopsPass> {
  void runOnOperation() override {
    getOperation().walk([](memref::CopyOp copy) {
      if (isContiguous(copy.getSource()) && isContiguous(copy.getTarget()))
        return;
      OpBuilder b(copy);
      linalg::CopyOp::create(b, copy.getLoc(), copy.getSource(), copy.getTarget());
      copy.erase();
    });
  }
};

} // namespace
} // namespace kiln
