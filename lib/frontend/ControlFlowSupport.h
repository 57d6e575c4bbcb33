// What the If, Loop and Scan importers share: helpers (defined in
// ControlFlow.cpp) and the entry points of the Loop (ControlFlowLoop.cpp)
// and Scan (ControlFlowScan.cpp) importers. Frontend-internal.
#ifndef KILN_FRONTEND_CONTROLFLOWSUPPORT_H
#define KILN_FRONTEND_CONTROLFLOWSUPPORT_H

#include "ControlFlow.h"

#include <string>

namespace kiln::controlflow {

/// No Loop runs more iterations than this when the count is known while
/// compiling; a larger count is almost surely a corrupt model.
constexpr int64_t kMaxStaticTripCount = int64_t(1) << 31;
/// Scan outputs of a Loop are preallocated; this bounds their size.
constexpr int64_t kMaxScanOutputBytes = int64_t(1) << 34;

/// The subgraph attribute `name`; null after an error when it is missing.
const onnx::GraphProto *graphAttr(NodeImporter &n, llvm::StringRef name);

/// A type as MLIR prints it (i16, f32, tensor<2xf32>), for diagnostics.
std::string typeName(mlir::Type t);

/// The one element of a one-element tensor, as a scalar.
mlir::Value toScalar(NodeImporter &n, mlir::Value t, llvm::StringRef what);
mlir::Value toTensor(NodeImporter &n, mlir::Value scalar);

/// Moves the ops of `from` to the end of `to`, whose leading arguments take
/// the place of `from`'s.
void moveBody(mlir::Block *from, mlir::Block *to);

/// Initial values of scan-output buffers (the null entries of `inits`):
/// empty tensors of the type of the matching body argument.
void fillEmptyBuffers(mlir::OpBuilder &b, mlir::Location loc,
                      llvm::SmallVectorImpl<mlir::Value> &inits, mlir::ValueRange bodyArgs);

/// A scan output: adds to `body` an argument for a buffer of `rows` rows
/// shaped like `slice` and returns the buffer with `slice` written at `row`.
mlir::Value insertRow(mlir::OpBuilder &b, mlir::Location loc, mlir::Block *body,
                      mlir::Value slice, int64_t rows, mlir::OpFoldResult row);

/// Checks that a loop-carried value keeps its type.
mlir::LogicalResult checkCarried(NodeImporter &n, const onnx::GraphProto &body, size_t outIndex,
                                 mlir::Value out, mlir::Type expected);

/// A Loop node: the run-time form (scf.while), the form that appends to
/// sequences, or unrolled while compiling, whichever the body allows.
mlir::LogicalResult importLoopNode(NodeImporter &n, SubgraphImporter importSubgraph,
                                   llvm::function_ref<bool(llvm::StringRef)> isOuterSequence,
                                   llvm::ArrayRef<const llvm::SmallVector<mlir::Value> *> seqInputs,
                                   llvm::SmallVectorImpl<mlir::Value> &outputs,
                                   SequenceSlots &seqOutputs);

/// A Scan node: scf.for over the scanned axis.
mlir::LogicalResult importScan(NodeImporter &n, SubgraphImporter sub,
                               llvm::SmallVectorImpl<mlir::Value> &outputs);

} // namespace kiln::controlflow

#endif
