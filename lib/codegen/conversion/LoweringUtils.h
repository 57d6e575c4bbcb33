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

/// tensor.empty of a static type.
Value emptyTensor(OpBuilder &b, Location loc, RankedTensorType type);
/// A tensor of `type` filled with `scalar`.
Value filledTensor(OpBuilder &b, Location loc, RankedTensorType type, Value scalar);

/// Indexing map that reads an operand of `operandType` (right-aligned ONNX
/// broadcasting) inside a loop nest over `resultShape`.
mlir::AffineMap broadcastMap(mlir::MLIRContext *ctx, llvm::ArrayRef<int64_t> operandShape,
                             llvm::ArrayRef<int64_t> resultShape);

using ScalarBuilder = llvm::function_ref<Value(OpBuilder &, Location, ValueRange)>;
/// One linalg.generic over `resultType` that broadcasts `inputs` to it and
/// computes each element with `body`.
Value buildElementwise(OpBuilder &b, Location loc, RankedTensorType resultType,
                       ValueRange inputs, ScalarBuilder body);

/// Reshapes a static tensor to `type` (same element count).
Value reshapeTo(OpBuilder &b, Location loc, Value v, RankedTensorType type);

/// Pads the spatial dims (2..) of an NC... tensor with `padValue`.
Value padSpatial(OpBuilder &b, Location loc, Value input, llvm::ArrayRef<int64_t> pads,
                 Value padValue);

/// Index value of a scalar integer read from a tensor element.
Value toIndex(OpBuilder &b, Location loc, Value v);
Value indexConst(OpBuilder &b, Location loc, int64_t v);
/// ONNX indices may be negative: i < 0 ? i + dim : i.
Value wrapIndex(OpBuilder &b, Location loc, Value i, int64_t dim);

void populateElementwiseLoweringPatterns(mlir::RewritePatternSet &patterns);
void populateStructuredLoweringPatterns(mlir::RewritePatternSet &patterns);
void populateDataMovementLoweringPatterns(mlir::RewritePatternSet &patterns);
void populateScatterLoweringPatterns(mlir::RewritePatternSet &patterns);

} // namespace kiln::codegen

#endif
