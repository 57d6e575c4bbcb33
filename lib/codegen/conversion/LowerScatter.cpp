// Scatters write in the order of their updates (later ones win, or
// accumulate), which is a loop with side effects rather than a parallel
// linalg op: each becomes an scf.for nest over the updates that threads the
// output tensor through tensor.insert; bufferization makes it in place.
#include "LoweringUtils.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"

using namespace mlir;

namespace kiln::codegen {
namespace {

Value combine(OpBuilder &b, Location loc, StringRef reduction, Value old, Value update) {
  bool f = isa<FloatType>(update.getType());
  if (reduction == "add")
    return f ? (Value)arith::AddFOp::create(b, loc, old, update)
             : (Value)arith::AddIOp::create(b, loc, old, update);
  if (reduction == "mul")
    return f ? (Value)arith::MulFOp::create(b, loc, old, update)
             : (Value)arith::MulIOp::create(b, loc, old, update);
  return update;
}

/// Loops over every element of `updates`; `target` maps the loop indices to
/// the output coordinates the element goes to.
Value scatterLoop(OpBuilder &b, Location loc, Value input, Value updates, StringRef reduction,
                  function_ref<SmallVector<Value>(OpBuilder &, Location, ValueRange)> target) {
  auto ut = tensorType(updates);
  if (ut.getNumElements() == 0)
    return input;
  SmallVector<Value> lbs, ubs, steps;
  for (int64_t d : ut.getShape()) {
    lbs.push_back(indexConst(b, loc, 0));
    ubs.push_back(indexConst(b, loc, d));
    steps.push_back(indexConst(b, loc, 1));
  }
  scf::LoopNest nest = scf::buildLoopNest(
      b, loc, lbs, ubs, steps, ValueRange{input},
      [&](OpBuilder &nb, Location l, ValueRange ivs, ValueRange iter) -> scf::ValueVector {
        SmallVector<Value> coords = target(nb, l, ivs);
        Value u = tensor::ExtractOp::create(nb, l, updates, ivs);
        if (reduction != "none")
          u = combine(nb, l, reduction, tensor::ExtractOp::create(nb, l, iter[0], coords), u);
        return {tensor::InsertOp::create(nb, l, u, iter[0], coords)};
      });
  return nest.results.front();
}

LogicalResult lowerScatterElements(ScatterElementsOp op, PatternRewriter &rw) {
  Location loc = op.getLoc();
  Value input = asSignless(rw, loc, op.getInput());
  Value updates = asSignless(rw, loc, op.getUpdates());
  auto inT = tensorType(input);
  int64_t axis = op.getAxis() < 0 ? op.getAxis() + inT.getRank() : op.getAxis();
  Value indices = op.getIndices();
  Value r = scatterLoop(rw, loc, input, updates, op.getReduction(),
                        [&](OpBuilder &b, Location l, ValueRange ivs) {
                          SmallVector<Value> coords(ivs);
                          Value i = tensor::ExtractOp::create(b, l, indices, ivs);
                          coords[axis] = wrapIndex(b, l, toIndex(b, l, i), inT.getDimSize(axis));
                          return coords;
                        });
  rw.replaceOp(op, restoreType(rw, loc, r, op.getType()));
  return success();
}

LogicalResult lowerScatterND(ScatterNDOp op, PatternRewriter &rw) {
  Location loc = op.getLoc();
  Value input = asSignless(rw, loc, op.getInput());
  Value updates = asSignless(rw, loc, op.getUpdates());
  auto inT = tensorType(input);
  auto idxT = tensorType(op.getIndices());
  int64_t q = idxT.getRank(), k = idxT.getDimSize(q - 1);
  Value indices = op.getIndices();
  Value r = scatterLoop(rw, loc, input, updates, op.getReduction(),
                        [&](OpBuilder &b, Location l, ValueRange ivs) {
                          SmallVector<Value> coords, at(ivs.take_front(q - 1));
                          at.push_back(Value());
                          for (int64_t j = 0; j < k; ++j) {
                            at.back() = indexConst(b, l, j);
                            Value i = tensor::ExtractOp::create(b, l, indices, at);
                            coords.push_back(wrapIndex(b, l, toIndex(b, l, i), inT.getDimSize(j)));
                          }
                          llvm::append_range(coords, ivs.drop_front(q - 1));
                          return coords;
                        });
  rw.replaceOp(op, restoreType(rw, loc, r, op.getType()));
  return success();
}

} // namespace

void populateScatterLoweringPatterns(RewritePatternSet &patterns) {
  patterns.add(lowerScatterElements);
  patterns.add(lowerScatterND);
}

} // namespace kiln::codegen
