// The run-time dims of a function being lowered by kiln-lower-to-linalg
// (see "Dims known only at run time" in LoweringUtils.h): kiln-symbolic-dims'
// expressions, and their values materialised as index SSA values.
#ifndef KILN_CODEGEN_DYNAMICDIMS_H
#define KILN_CODEGEN_DYNAMICDIMS_H

#include "kiln/IR/SymbolicDims.h"

#include "mlir/IR/Builders.h"

namespace kiln::codegen {

class DynamicDims {
public:
  /// Runs the analysis over `func`'s top-level ops (a subgraph's values have
  /// no expressions, so ops there need static shapes).
  explicit DynamicDims(mlir::func::FuncOp func);
  /// Makes this the function that `dynamicSizes` and `hasRuntimeDims`
  /// answer for while it lives.
  struct Scope {
    explicit Scope(DynamicDims *d);
    ~Scope();
    DynamicDims *previous;
  };

  /// The expressions of `v`'s dims, when each dynamic one has one.
  std::optional<SymbolicDims::Exprs> exprsOf(mlir::Value v) const;
  /// The value of `e` (over the symbols) at `b`'s insertion point.
  mlir::Value materialize(mlir::OpBuilder &b, mlir::Location loc, mlir::AffineExpr e);
  /// Forgets the symbols' values read so far (the next materialize reads
  /// them again): for after something that may have erased the unused ones.
  void forgetMaterialized() { symbolValues.clear(); }
  const SymbolicDims &symbolic() const { return dims; }
  /// Where symbol `i` is read: (argument number, dim).
  std::pair<unsigned, int64_t> sourceOf(size_t i) const { return sources[i]; }

private:
  mlir::func::FuncOp func;
  SymbolicDims dims;
  std::vector<std::pair<unsigned, int64_t>> sources; // symbol -> (arg, dim)
  llvm::SmallVector<mlir::Value> symbolValues;      // tensor.dim at entry
};

} // namespace kiln::codegen

#endif
