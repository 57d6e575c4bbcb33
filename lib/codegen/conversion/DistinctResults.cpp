// kiln-distinct-results: a function never returns one tensor value twice.
//
// Two model outputs can become one SSA value after CSE (identical nodes on
// the same inputs, or a graph that lists an output twice). Returned twice,
// the value bufferizes to one buffer returned twice, and MLIR 22's
// buffer-results-to-out-params crashes on that; the runtime also wants every
// output in a buffer of its own. A copy per repeated output costs one pass
// over that output, only in this rare case.
#include "kiln/Conversion/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/DenseSet.h"

namespace kiln {
#define GEN_PASS_DEF_KILNDISTINCTRESULTS
#include "kiln/Conversion/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace kiln {
namespace {

struct DistinctResultsPass : impl::KilnDistinctResultsBase<DistinctResultsPass> {
  void runOnOperation() override {
    getOperation().walk([](func::ReturnOp ret) {
      llvm::SmallDenseSet<Value> seen;
      OpBuilder b(ret);
      for (OpOperand &operand : ret->getOpOperands()) {
        Value v = operand.get();
        auto type = dyn_cast<RankedTensorType>(v.getType());
        if (!type || seen.insert(v).second)
          continue;
        SmallVector<Value> dynamicDims;
        for (int64_t d = 0; d < type.getRank(); ++d)
          if (type.isDynamicDim(d))
            dynamicDims.push_back(tensor::DimOp::create(b, ret.getLoc(), v, d));
        Value empty = tensor::EmptyOp::create(b, ret.getLoc(), type, dynamicDims);
        operand.set(linalg::CopyOp::create(b, ret.getLoc(), v, empty).getResult(0));
      }
    });
  }
};

} // namespace
} // namespace kiln
