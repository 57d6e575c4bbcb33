// The Gradient operator of ai.onnx.preview.training (see Gradient.cpp).
#ifndef KILN_FRONTEND_GRADIENT_H
#define KILN_FRONTEND_GRADIENT_H

#include "NodeImporter.h"

#include "llvm/ADT/STLFunctionalExtras.h"

namespace kiln {

/// Imports a Gradient node: the derivatives of its y with respect to its
/// xs through `before` (the graph's nodes ahead of it, already imported;
/// `lookup` gives their values by name).
mlir::LogicalResult importGradient(NodeImporter &n,
                                   llvm::ArrayRef<const onnx::NodeProto *> before,
                                   llvm::function_ref<mlir::Value(llvm::StringRef)> lookup,
                                   llvm::SmallVectorImpl<mlir::Value> &outputs);

} // namespace kiln

#endif
