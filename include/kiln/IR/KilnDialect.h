// The kiln dialect: ONNX-level tensor ops. MLIR-heavy; include only from
// compiler internals, never from the public API headers.
#ifndef KILN_IR_KILNDIALECT_H
#define KILN_IR_KILNDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace kiln::detail {
// Shared pieces of the ops' type inference (lib/ir/ShapeInference.cpp).
bool areCompatibleReturnTypes(mlir::TypeRange inferred, mlir::TypeRange actual);
llvm::LogicalResult inferBroadcast(std::optional<mlir::Location> loc,
                                   mlir::ValueRange operands, bool resultIsBool,
                                   llvm::SmallVectorImpl<mlir::Type> &types);
llvm::LogicalResult inferReduce(std::optional<mlir::Location> loc,
                                mlir::Value input, llvm::ArrayRef<int64_t> axes,
                                bool keepdims,
                                llvm::SmallVectorImpl<mlir::Type> &types);
} // namespace kiln::detail

#include "kiln/IR/KilnDialect.h.inc"

#define GET_OP_CLASSES
#include "kiln/IR/KilnOps.h.inc"

namespace kiln {
/// Broadcasts two static-or-dynamic shapes with ONNX multidirectional rules.
/// Returns failure when two known dims differ and neither is 1.
llvm::LogicalResult broadcastShapes(llvm::ArrayRef<int64_t> a,
                                    llvm::ArrayRef<int64_t> b,
                                    llvm::SmallVectorImpl<int64_t> &out);
/// Recomputes the result types of `op` (a kiln op) from its operands and
/// writes them back when they are more precise. Emits an error at the op's
/// location and fails when the operands are inconsistent.
llvm::LogicalResult refineResultTypes(mlir::Operation *op);
/// The dims [first, last) that kiln.shape selects from a tensor of `rank`:
/// ONNX Shape's start/end, negative from the back, clamped, last >= first.
std::pair<int64_t, int64_t> shapeDimRange(int64_t rank, int64_t start, int64_t end);
/// ONNX Slice bounds of one axis after clamping: first index, element
/// count and step. std::nullopt for a zero step.
struct SliceBounds {
  int64_t start, size, step;
};
std::optional<SliceBounds> computeSliceBounds(int64_t dim, int64_t start,
                                              int64_t end, int64_t step);
/// Reads a constant integer tensor (e.g. a shape operand) if `v` is one.
std::optional<llvm::SmallVector<int64_t>> getConstantInts(mlir::Value v);
} // namespace kiln

#endif
