// Symbolic dimensions: what each tensor's dims are, and what each small
// integer tensor (a shape value) holds, as affine expressions over the
// model's unknown input dims. An ONNX dim_param names a symbol (two inputs
// that share "batch" share it); an unnamed unknown dim gets its own. With
// concrete input shapes every expression is a constant; without them the
// analysis says how a result's dims follow from the inputs' (a KV cache's
// `past + new`, a reshape's `batch * 12`), which is what compiling once for
// every shape needs.
//
// Not included by widely used headers: it pulls in AffineExpr.
#ifndef KILN_IR_SYMBOLICDIMS_H
#define KILN_IR_SYMBOLICDIMS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AffineExpr.h"
#include "mlir/IR/BuiltinAttributes.h"

#include "llvm/ADT/DenseMap.h"

#include <string>
#include <vector>

namespace kiln {

/// The attribute on a function argument naming its unknown dims (an array
/// of strings, one per dim, "" for a known one); the importer sets it from
/// the inputs' dim_param.
constexpr llvm::StringLiteral kDimNamesAttr = "kiln.dim_names";
/// The attribute the kiln-symbolic-dims pass sets on each function result
/// of unknown dims: one string per dim, a number or an expression over the
/// dim names ("past + new").
constexpr llvm::StringLiteral kDimsAttr = "kiln.dims";

class SymbolicDims {
public:
  /// A null expression is a dim (or value) nothing is known of.
  using Exprs = llvm::SmallVector<mlir::AffineExpr, 4>;

  /// Symbols for `func`'s arguments' unknown dims. With `valueSymbols`,
  /// a dim given by an integer computed at run time (Range's limit, a
  /// ConstantOfShape's shape, from data rather than from the inputs' dims:
  /// a box's size in a detector's loop) gets a symbol of its own too, whose
  /// value is that element (valueSourceOf).
  /// With `assumeSliceBounds`, Slices whose bounds follow from the input
  /// dims get sizes that hold only under assumptions (see assumptions()):
  /// for code that checks them at entry, never for rewriting types or
  /// folding shape values (kiln-symbolic-dims), which would make facts
  /// that hold only under a check permanent without the check.
  explicit SymbolicDims(mlir::func::FuncOp func, bool valueSymbols = false,
                        bool assumeSliceBounds = false);

  /// Computes what `op`'s results are from what its operands are; ops are
  /// visited in order (operands first), as kiln-infer-shapes does.
  void visit(mlir::Operation *op);
  /// visit() on every op of `func`, those in loop and branch bodies
  /// included, in order.
  void visitAll(mlir::func::FuncOp func);

  /// The dims of a ranked tensor value (null entries unknown); empty for an
  /// unranked or unvisited one.
  Exprs dimsOf(mlir::Value v) const;
  /// The elements of a small integer tensor of rank 0 or 1, when known.
  std::optional<Exprs> contentsOf(mlir::Value v) const;
  /// contentsOf(v) as the attribute of a constant of v's type, when every
  /// element is a number (a shape value that folding could not see as
  /// constant, computed from a known dim of a tensor with unknown ones).
  std::optional<mlir::DenseIntElementsAttr> constantContents(mlir::Value v) const;

  /// How many symbols there are, and their names (dim_param or
  /// "input.axis" for an unnamed dim), in the order of AffineSymbolExpr
  /// positions.
  size_t numSymbols() const { return names.size(); }
  const std::string &symbolName(size_t i) const { return names[i]; }

  /// `e` with the symbols' names: "batch", "past + new", "12".
  std::string print(mlir::AffineExpr e) const;

  /// Where a value-defined symbol's value is: element `index` of the
  /// integer tensor `tensor` (rank 0 or 1). Null for an input's dim.
  struct ValueSource {
    mlir::Value tensor;
    int64_t index = 0;
  };
  const ValueSource *valueSourceOf(size_t symbol) const {
    auto it = valueSources.find(symbol);
    return it == valueSources.end() ? nullptr : &it->second;
  }

  /// What the analysis took for granted of the run-time dims where ONNX
  /// would clamp: a Slice of a dim of fixed size D whose bounds follow from
  /// the input dims (a positional table sliced to the sequence length,
  /// `pos[:seq]`, D = the table's length) has ONNX's size min(end, D) -
  /// start, which no affine expression is; the analysis takes end - start,
  /// assuming start <= end <= D. Likewise constant bounds along a dim known
  /// only at run time (x[:, 1:], x[:, -1:]: a negative bound c is D + c,
  /// assumed at least 0; runtimeSliceSize). Each assumption is an
  /// expression over the input dims' symbols (never value-defined ones)
  /// that must be at least 0 at run time: whoever compiles code on these
  /// dims must check them before it runs (kiln.slice_checks), and refuse
  /// inputs that break one.
  struct Assumption {
    mlir::Operation *op;
    mlir::AffineExpr atLeastZero;
  };
  llvm::ArrayRef<Assumption> assumptions() const { return assumed; }
  /// Whether the size of `op` (a Slice) rests on assumptions.
  bool hasAssumptions(mlir::Operation *op) const {
    return llvm::any_of(assumed, [&](const Assumption &a) { return a.op == op; });
  }

private:
  void setDims(mlir::Value v, Exprs dims);
  /// The size of a Slice of a dim of size `dim` (a constant, or an
  /// expression over input dims) from `start` to `end` (expressions over
  /// input dims, step 1), assuming 0 <= start <= end <= dim (recorded as
  /// assumptions of `op`); null where that cannot hold or a bound is not
  /// known.
  mlir::AffineExpr runtimeSliceSize(mlir::Operation *op, mlir::AffineExpr dim,
                                    mlir::AffineExpr start, mlir::AffineExpr end);
  bool onlyInputSymbols(mlir::AffineExpr e) const;
  mlir::AffineExpr symbolFor(const std::string &name);
  /// contentsOf(shape), each unknown element a value-defined symbol when
  /// those are on (and `shape` a small static integer tensor).
  std::optional<Exprs> contentsOrValues(mlir::Value shape);
  mlir::AffineExpr constant(int64_t c) const;
  mlir::AffineExpr simplify(mlir::AffineExpr e) const;
  /// A convolution's or pool's output size along one axis of input size
  /// `in`: (in + padSum - dilation * (k - 1) - 1) floordiv stride + 1.
  mlir::AffineExpr windowOutput(mlir::AffineExpr in, int64_t padSum, int64_t k,
                                int64_t dilation, int64_t stride) const;
  Exprs typeDims(mlir::Value v) const;
  Exprs broadcast(llvm::ArrayRef<Exprs> operands, size_t rank) const;
  std::optional<Exprs>
  zipContents(mlir::Operation *op,
              llvm::function_ref<mlir::AffineExpr(mlir::AffineExpr, mlir::AffineExpr)> f) const;

  mlir::MLIRContext *ctx;
  llvm::DenseMap<mlir::Value, Exprs> dims, contents;
  std::vector<std::string> names; // symbol position -> name
  bool valueSymbols = false, assumeSliceBounds = false;
  llvm::DenseMap<size_t, ValueSource> valueSources; // symbol position -> where
  llvm::SmallVector<Assumption, 4> assumed;
};

} // namespace kiln

#endif
