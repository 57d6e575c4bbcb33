// ONNX control flow (If, Loop, Scan), imported as scf.if / scf.while /
// scf.for around the kiln ops of their subgraphs (see ControlFlow.cpp).
#ifndef KILN_FRONTEND_CONTROLFLOW_H
#define KILN_FRONTEND_CONTROLFLOW_H

#include "NodeImporter.h"

#include "llvm/ADT/STLFunctionalExtras.h"

#include <map>

namespace kiln {

/// Sequences by position among a subgraph's inputs or outputs. An empty
/// optional travels the same way, as an entry holding one null Value.
using SequenceSlots = std::map<size_t, llvm::SmallVector<mlir::Value>>;
inline llvm::SmallVector<mlir::Value> emptyOptionalSlot() { return {mlir::Value()}; }
inline bool isEmptyOptionalSlot(const llvm::SmallVector<mlir::Value> &slot) {
  return slot.size() == 1 && !slot[0];
}

/// Imports `graph` at the builder's insertion point with its inputs bound to
/// `args` (in order; those in `seqArgs`, if given, to sequences instead);
/// names it does not define resolve in the enclosing graphs. Its outputs'
/// values go to `outputs`; with `seqOutputs`, an output that is a sequence
/// goes there (its entry in `outputs` is null), otherwise it is an error.
using SubgraphImporter = llvm::function_ref<mlir::LogicalResult(
    const onnx::GraphProto &graph, llvm::ArrayRef<mlir::Value> args,
    llvm::SmallVectorImpl<mlir::Value> &outputs, const SequenceSlots *seqArgs,
    SequenceSlots *seqOutputs, llvm::SmallVectorImpl<CountedAxis> *outputCounts)>;

/// Whether the importer handles `opType` as a control-flow operator.
bool isControlFlowOperator(llvm::StringRef opType);

/// Imports one If, Loop or Scan node; its results go to `outputs`. A Loop
/// may carry sequences (`seqInputs[i]` is the list for input i when it names
/// a sequence); a sequence result goes to `seqOutputs[i]` (its entry in
/// `outputs` is null). So may an If whose condition is known while
/// compiling.
/// `isOuterSequence` says whether a name the subgraphs may read is a sequence
/// of the enclosing graphs.
mlir::LogicalResult
importControlFlowNode(NodeImporter &n, SubgraphImporter importSubgraph,
                      llvm::function_ref<bool(llvm::StringRef)> isOuterSequence,
                      llvm::ArrayRef<const llvm::SmallVector<mlir::Value> *> seqInputs,
                      llvm::SmallVectorImpl<mlir::Value> &outputs, SequenceSlots &seqOutputs);

} // namespace kiln

#endif
