// Helpers shared by the kiln -> linalg lowering patterns.
#ifndef KILN_CODEGEN_LOWERINGUTILS_H
#define KILN_CODEGEN_LOWERINGUTILS_H

#include "kiln/IR/KilnDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"

namespace kiln::codegen {

using mlir::Location;
using mlir::OpBuilder;
using mlir::RankedTensorType;
using mlir::Type;
using mlir::Value;
using mlir::ValueRange;

inline RankedTensorType tensorType(Value v) {
  return mlir::cast<RankedTensorType>(v.getType());
}

/// A scalar arith constant of `type` (float or integer/index).
Value scalarConstant(OpBuilder &b, Location loc, Type type, double value);
/// The smallest / largest value of `type` (-inf / +inf for floats). Integer
/// types are signless here; `isUnsigned` selects the unsigned range.
Value lowestValue(OpBuilder &b, Location loc, Type type, bool isUnsigned = false);
Value highestValue(OpBuilder &b, Location loc, Type type, bool isUnsigned = false);

// Unsigned integers: arith works on signless integers, so tensors of
// unsigned type are bitcast to signless for the computation (and back), and
// the signedness picks the arith op where it matters (div, rem, min/max,
// compares, conversions).
bool isUnsignedTensor(Value v);
RankedTensorType signlessType(RankedTensorType t);
Value asSignless(OpBuilder &b, Location loc, Value v);
Value restoreType(OpBuilder &b, Location loc, Value v, Type original);

// ---- Dims known only at run time ----
//
// While kiln-lower-to-linalg runs on a function whose inputs have dims
// unknown at compile time, the patterns of the ops that take such dims ask
// for their results' sizes here: each unknown dim is an expression of the
// inputs' dims (kiln-symbolic-dims), materialised where it is needed from
// `tensor.dim`s of the inputs taken once at the function's entry. Outside
// such a function every size is static and these return no values.

/// The run-time sizes of the dynamic dims of `original` (a kiln op's result
/// being lowered), in order, built at `b`'s insertion point; empty when the
/// value is static. Only for values that `hasRuntimeDims` accepted.
llvm::SmallVector<Value> dynamicSizes(OpBuilder &b, Location loc, Value original);
/// The size of dim `i` of `original` (as dynamicSizes: from the inputs'
/// dims, not from the value, which need not dominate the insertion point).
Value runtimeDim(OpBuilder &b, Location loc, Value original, int64_t i);
/// Whether every dynamic dim of `v` has an expression over the inputs' dims.
bool hasRuntimeDims(Value v);
/// Whether the run-time dims' analysis took the bounds of `op` (a Slice
/// whose bounds follow from the input dims) to lie within its input, which
/// the entry then checks (SymbolicDims::assumptions, kiln.slice_checks).
bool hasSliceAssumptions(mlir::Operation *op);
/// Whether the first `n` dims of `a` and `b` are the same at run time (equal
/// constants or the same expression).
bool sameDims(Value a, Value b, size_t n);
/// Whether dim `i` of `a` and dim `j` of `b` are the same at run time.
bool sameDim(Value a, int64_t i, Value b, int64_t j);
/// The size of dim `i` of a lowered tensor: a constant or a tensor.dim.
Value dimSize(OpBuilder &b, Location loc, Value tensor, int64_t i);
/// Index values of every dim of a lowered tensor.
llvm::SmallVector<Value> dimSizes(OpBuilder &b, Location loc, Value tensor);
/// Of `sizes` (one per dim of `type`), those of its dynamic dims.
llvm::SmallVector<Value> dynamicOnly(RankedTensorType type, ValueRange sizes);

/// tensor.empty of `type`, with the sizes of its dynamic dims (none for a
/// static type).
Value emptyTensor(OpBuilder &b, Location loc, RankedTensorType type,
                  ValueRange dynamicSizes = {});
/// A tensor of `type` filled with `scalar`.
Value filledTensor(OpBuilder &b, Location loc, RankedTensorType type, Value scalar,
                   ValueRange dynamicSizes = {});

/// Indexing map that reads an operand of `operandType` (right-aligned ONNX
/// broadcasting) inside a loop nest over `resultShape`.
mlir::AffineMap broadcastMap(mlir::MLIRContext *ctx, llvm::ArrayRef<int64_t> operandShape,
                             llvm::ArrayRef<int64_t> resultShape);

using ScalarBuilder = llvm::function_ref<Value(OpBuilder &, Location, ValueRange)>;
/// One linalg.generic over `resultType` that broadcasts `inputs` to it and
/// computes each element with `body`.
/// `dynamicSizes`: those of the result's dynamic dims.
Value buildElementwise(OpBuilder &b, Location loc, RankedTensorType resultType,
                       ValueRange inputs, ScalarBuilder body, ValueRange dynamicSizes = {});

/// Reshapes a tensor to `type` (same element count); `dynamicSizes`: those
/// of `type`'s dynamic dims.
Value reshapeTo(OpBuilder &b, Location loc, Value v, RankedTensorType type,
                ValueRange dynamicSizes = {});

/// Pads the spatial dims (2..) of an NC... tensor with `padValue`.
Value padSpatial(OpBuilder &b, Location loc, Value input, llvm::ArrayRef<int64_t> pads,
                 Value padValue);

/// Index value of a scalar integer read from a tensor element.
Value toIndex(OpBuilder &b, Location loc, Value v);
Value indexConst(OpBuilder &b, Location loc, int64_t v);
/// ONNX indices may be negative: i < 0 ? i + dim : i.
Value wrapIndex(OpBuilder &b, Location loc, Value i, int64_t dim);
/// The same against a dim of run-time size `dim` (an index value).
Value wrapIndex(OpBuilder &b, Location loc, Value i, Value dim);

/// Whether `op` is one of the elementwise ops lowered by
/// populateElementwiseLoweringPatterns.
bool isElementwiseOp(mlir::Operation *op);
/// Marks (kNanFreeAttr) the f32 max, min and relu ops under `root` whose
/// operands can never be NaN (NanFreeClamps.cpp); their lowering then
/// carries the nnan flag.
void markNanFreeClamps(mlir::Operation *root);
inline constexpr const char kNanFreeAttr[] = "kiln.nan_free";
void populateElementwiseLoweringPatterns(mlir::RewritePatternSet &patterns);
void populateStructuredLoweringPatterns(mlir::RewritePatternSet &patterns);
void populateDataMovementLoweringPatterns(mlir::RewritePatternSet &patterns);
void populateScatterLoweringPatterns(mlir::RewritePatternSet &patterns);

} // namespace kiln::codegen

#endif
