// kiln-symbolic-dims: unknown dims as expressions of the inputs' dims (the
// analysis is lib/ir/SymbolicDims.cpp). Refines result dims whose
// expression is a constant and annotates the function's results with how
// their unknown dims follow from the inputs.
#include "kiln/IR/SymbolicDims.h"
#include "kiln/Passes/Passes.h"

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

struct SymbolicDimsPass : impl::KilnSymbolicDimsBase<SymbolicDimsPass> {
  using Base::Base;
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
    SymbolicDims dims(func);
    for (Block &block : func.getBody())
      for (Operation &op : block) {
        bool kiln = isa<KilnDialect>(op.getDialect());
        // Operands refined earlier in the sweep may refine this op too.
        if (kiln && failed(refineResultTypes(&op)))
          return signalPassFailure();
        dims.visit(&op);
        if (!kiln || op.getNumResults() != 1)
          continue;
        Value result = op.getResult(0);
        auto t = dyn_cast<RankedTensorType>(result.getType());
        if (!t || t.hasStaticShape())
          continue;
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
    Builder b(&getContext());
    if (annotateAll)
      func.walk([&](Operation *op) {
        if (op->getNumResults() != 1)
          return;
        auto t = dyn_cast<RankedTensorType>(op->getResult(0).getType());
        if (t && !t.hasStaticShape())
          op->setAttr(kDimsAttr, describeDims(b, dims, t, op->getResult(0)));
      });
    auto ret = cast<func::ReturnOp>(func.getBody().back().getTerminator());
    func.setType(FunctionType::get(&getContext(), func.getArgumentTypes(),
                                   ret.getOperandTypes()));
    for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
      auto t = dyn_cast<RankedTensorType>(v.getType());
      if (t && !t.hasStaticShape())
        func.setResultAttr(i, kDimsAttr, describeDims(b, dims, t, v));
    }
  }
};

} // namespace
} // namespace kiln
