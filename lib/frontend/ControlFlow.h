// ONNX control flow (If, Loop, Scan), imported as scf.if / scf.while /
// scf.for around the kiln ops of their subgraphs (see ControlFlow.cpp).
#ifndef KILN_FRONTEND_CONTROLFLOW_H
#define KILN_FRONTEND_CONTROLFLOW_H

#include "NodeImporter.h"

#include "llvm/ADT/STLFunctionalExtras.h"

#include <map>

namespace kiln {

/// Imports `graph` at the builder's insertion point with its inputs bound to
/// `args` (in order); names it does not define resolve in the enclosing
/// graphs. Its outputs' values go to `outputs`.
using SubgraphImporter = llvm::function_ref<mlir::LogicalResult(
    const onnx::GraphProto &graph, llvm::ArrayRef<mlir::Value> args,
    llvm::SmallVectorImpl<mlir::Value> &outputs)>;

/// Whether the importer handles `opType` as a control-flow operator.
bool isControlFlowOperator(llvm::StringRef opType);

/// Imports one If, Loop or Scan node; its results go to `outputs`. A Loop
/// may carry sequences (`seqInputs[i]` is the list for input i when it names
/// a sequence); a sequence result goes to `seqOutputs[i]` (its entry in
/// `outputs` is null).
mlir::LogicalResult
importControlFlowNode(NodeImporter &n, SubgraphImporter importSubgraph,
                      llvm::ArrayRef<const llvm::SmallVector<mlir::Value> *> seqInputs,
                      llvm::SmallVectorImpl<mlir::Value> &outputs,
                      std::map<size_t, llvm::SmallVector<mlir::Value>> &seqOutputs);

} // namespace kiln

#endif
