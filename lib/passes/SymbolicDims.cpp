// kiln-symbolic-dims: unknown dims as expressions of the inputs' dims (the
// analysis is lib/ir/SymbolicDims.cpp). Refines result dims whose
// expression is a constant and annotates the function's results with how
// their unknown dims follow from the inputs.
#include "kiln/IR/SymbolicDims.h"
#include "kiln/Passes/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

namespace kiln {
#define GEN_PASS_DEF_KILNSYMBOLICDIMS
#include "kiln/Passes/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace kiln {
namespace {

/// One string per dim of `t`: a number, or what `dims` knows of it.
ArrayAttr describeDims(Builder &b, const SymbolicDims &dims, RankedTensorType t, Value v) {
  SymbolicDims::Exprs d = dims.dimsOf(v);
  SmallVector<Attribute> names;
  for (int64_t k = 0; k < t.getRank(); ++k)
    names.push_back(b.getStringAttr(
        t.isDynamicDim(k) ? (k < (int64_t)d.size() ? dims.print(d[k]) : std::string("?"))
                          : std::to_string(t.getDimSize(k))));
  return b.getArrayAttr(names);
}

/// A shape value (a small integer tensor) that `dims` knows to be
/// constant although folding could not see it (it is computed from the
/// static dims of a tensor that also has unknown ones: Shape(x)[1] of an
/// x[batch, 56, 56, 96]) becomes a kiln.constant, so that what consumes it
/// (a Pad's pads, a Reshape's target) folds and infers as with static
/// shapes.
void foldConstantShapeValue(Operation &op, const SymbolicDims &dims) {
  if (isa<ConstantOp>(op))
    return;
  Value result = op.getResult(0);
  if (result.use_empty())
    return;
  auto values = dims.constantContents(result);
  if (!values)
    return;
  OpBuilder b(op.getContext());
  b.setInsertionPointAfter(&op);
  Value c = ConstantOp::create(b, op.getLoc(), result.getType(), *values);
  result.replaceAllUsesExcept(c, c.getDefiningOp());
}

/// How many dims of the function's ops' results are unknown: the measure
/// of progress of the rounds below.
int64_t countUnknownDims(func::FuncOp func) {
  int64_t n = 0;
  func.walk([&](Operation *op) {
    for (Type t : op->getResultTypes())
      if (auto r = dyn_cast<RankedTensorType>(t))
        n += llvm::count_if(r.getShape(), ShapedType::isDynamic);
      else if (isa<UnrankedTensorType>(t))
        n += 8; // worse than any ranked one
  });
  return n;
}

struct SymbolicDimsPass : impl::KilnSymbolicDimsBase<SymbolicDimsPass> {
  using Base::Base;

  /// One sweep in order: each op's result types refined from what its
  /// operands became, its dims from the analysis, constant shape values
  /// made constants.
  LogicalResult sweep(func::FuncOp func, SymbolicDims &dims) {
    for (Block &block : func.getBody())
      for (Operation &op : block) {
        bool kiln = isa<KilnDialect>(op.getDialect());
        // Operands refined earlier in the sweep may refine this op too.
        if (kiln && failed(refineResultTypes(&op)))
          return failure();
        dims.visit(&op);
        if (!kiln || op.getNumResults() != 1)
          continue;
        Value result = op.getResult(0);
        auto t = dyn_cast<RankedTensorType>(result.getType());
        if (!t)
          continue;
        if (t.hasStaticShape()) {
          foldConstantShapeValue(op, dims);
          continue;
        }
        // Only where every user takes a more precise type: scf.if/while and
        // their yields want types to match exactly.
        if (!llvm::all_of(result.getUsers(), [](Operation *user) {
              return isa<KilnDialect>(user->getDialect()) || isa<func::ReturnOp>(user);
            }))
          continue;
        SymbolicDims::Exprs d = dims.dimsOf(result);
        SmallVector<int64_t> shape(t.getShape());
        bool changed = false;
        for (size_t i = 0; i < shape.size() && i < d.size(); ++i)
          if (auto c = dyn_cast_if_present<AffineConstantExpr>(d[i]);
              c && ShapedType::isDynamic(shape[i]) && c.getValue() >= 0) {
            shape[i] = c.getValue();
            changed = true;
          }
        if (changed)
          result.setType(RankedTensorType::get(shape, t.getElementType()));
      }
    return success();
  }

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    // Nothing is unknown: every dim is a number already.
    auto isStatic = [](Type t) {
      auto r = dyn_cast<RankedTensorType>(t);
      return !r || r.hasStaticShape();
    };
    if (llvm::all_of(func.getArgumentTypes(), isStatic) &&
        llvm::all_of(func.getResultTypes(), isStatic))
      return;
    // Rounds: a sweep, then shape inference and folding, which turn shape
    // arithmetic the sweep made constant into constants that the next
    // sweep reads (a pad list reshaped to [4, 2], reversed and transposed,
    // as PyTorch exports F.pad; Swin's window masks, stage after stage),
    // until nothing more becomes known.
    std::optional<SymbolicDims> dims;
    int64_t unknown = countUnknownDims(func);
    for (int round = 0;; ++round) {
      dims.emplace(func);
      if (failed(sweep(func, *dims)))
        return signalPassFailure();
      if (round + 1 >= rounds)
        break;
      OpPassManager fold(func::FuncOp::getOperationName());
      fold.addPass(createKilnInferShapes());
      fold.addPass(createCanonicalizerPass());
      if (failed(runPipeline(fold, func)))
        return signalPassFailure();
      int64_t now = countUnknownDims(func);
      if (now >= unknown)
        break;
      unknown = now;
    }
    // The annotations from the last sweep's ops, described as code
    // compiled once for every shape sees them: with the bounds of Slices
    // that follow from the input dims assumed to fit, as that code checks
    // at entry (a table sliced to the length has the length's name). The
    // sweeps never assume them: a type or shape value they fixed would
    // hold without the check.
    dims.emplace(func, /*valueSymbols=*/false, /*assumeSliceBounds=*/true);
    dims->visitAll(func);
    Builder b(&getContext());
    if (annotateAll)
      func.walk([&](Operation *op) {
        if (op->getNumResults() != 1)
          return;
        auto t = dyn_cast<RankedTensorType>(op->getResult(0).getType());
        if (t && !t.hasStaticShape())
          op->setAttr(kDimsAttr, describeDims(b, *dims, t, op->getResult(0)));
      });
    auto ret = cast<func::ReturnOp>(func.getBody().back().getTerminator());
    func.setType(FunctionType::get(&getContext(), func.getArgumentTypes(),
                                   ret.getOperandTypes()));
    for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
      auto t = dyn_cast<RankedTensorType>(v.getType());
      if (t && !t.hasStaticShape())
        func.setResultAttr(i, kDimsAttr, describeDims(b, *dims, t, v));
    }
  }
};

} // namespace
} // namespace kiln
