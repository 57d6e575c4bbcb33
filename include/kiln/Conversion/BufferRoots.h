// Which buffer a memref value is a view of, and whether two such roots are
// known to be distinct memory: what `noalias` (CPU loop nests) and the GPU
// path's accumulation in registers both rest on.
#ifndef KILN_CONVERSION_BUFFERROOTS_H
#define KILN_CONVERSION_BUFFERROOTS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace kiln::codegen {

/// The buffer `v` is a view of: through view-like ops back to an argument,
/// an allocation, a global or the workspace view (a view of the workspace
/// is a planned buffer itself, not a view of another one).
inline mlir::Value rootBuffer(mlir::Value v) {
  while (mlir::Operation *def = v.getDefiningOp()) {
    auto viewLike = mlir::dyn_cast<mlir::ViewLikeOpInterface>(def);
    if (!viewLike || mlir::isa<mlir::memref::ViewOp>(def))
      break;
    v = viewLike.getViewSource();
  }
  return v;
}

/// Whether distinct roots are known to be distinct memory: a function
/// argument (the ABI makes them disjoint), an allocation, a planned buffer
/// (a workspace view) or a global. Anything else (a select between
/// buffers, a loop result) could be either of several buffers. Buffers of
/// one op are live together, so the static plan never overlaps them.
inline bool isKnownRoot(mlir::Value root) {
  if (auto arg = mlir::dyn_cast<mlir::BlockArgument>(root))
    return mlir::isa<mlir::func::FuncOp>(arg.getParentRegion()->getParentOp());
  return mlir::isa<mlir::memref::AllocOp, mlir::memref::ViewOp, mlir::memref::GetGlobalOp>(
      root.getDefiningOp());
}

} // namespace kiln::codegen

#endif
