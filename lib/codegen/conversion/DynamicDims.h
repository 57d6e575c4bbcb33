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
  /// Runs the analysis over `func`'s ops, those in loop and branch bodies
  /// included (in order, operands first), with value-defined symbols: a
  /// dim computed from data (a Range to a size read from a tensor) is read
  /// from that tensor where it is computed.
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
  /// Reads every value-defined symbol now, where its tensor is defined:
  /// before the conversion, which then rewires those reads to the lowered
  /// tensors as it does for any other user.
  void materializeValueSymbols() {
    for (size_t i = inputSymbols; i < sources.size(); ++i)
      (void)symbolValue(i);
  }
  /// Whether any symbol is value-defined.
  bool hasValueSymbols() const { return sources.size() > inputSymbols; }
  const SymbolicDims &symbolic() const { return dims; }
  /// Where symbol `i` is read: (argument number, dim); (~0u, -1) for a
  /// value-defined symbol (SymbolicDims::valueSourceOf) or one nothing gives.
  std::pair<unsigned, int64_t> sourceOf(size_t i) const { return sources[i]; }
  /// How many symbols are input dims: they come first.
  size_t numInputSymbols() const { return inputSymbols; }

private:
  mlir::func::FuncOp func;
  SymbolicDims dims;
  std::vector<std::pair<unsigned, int64_t>> sources; // symbol -> (arg, dim)
  size_t inputSymbols = 0;
  /// Per symbol, its index value once built: a tensor.dim at the entry, or
  /// for a value-defined one the element read where its tensor is defined.
  llvm::SmallVector<mlir::Value> symbolValues;
  mlir::Value symbolValue(size_t i);
};

} // namespace kiln::codegen

#endif
