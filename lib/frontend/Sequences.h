// ONNX sequence operators, imported as lists of tensor Values (see
// Sequences.cpp).
#ifndef KILN_FRONTEND_SEQUENCES_H
#define KILN_FRONTEND_SEQUENCES_H

#include "NodeImporter.h"

namespace kiln {

/// Whether the importer handles `opType` as a sequence operator.
bool isSequenceOperator(llvm::StringRef opType);

/// Imports one sequence operator. `seqInputs[i]` is the list for input i
/// when that input names a sequence (null otherwise; its tensor, if any, is
/// n.input(i)). A sequence result goes to `seqOut`, a tensor one to
/// `tensorOut`.
mlir::LogicalResult importSequenceNode(NodeImporter &n,
                                       llvm::ArrayRef<const llvm::SmallVector<mlir::Value> *> seqInputs,
                                       llvm::SmallVector<mlir::Value> &seqOut,
                                       mlir::Value &tensorOut);

} // namespace kiln

#endif
