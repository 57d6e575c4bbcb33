// Live ranges of buffers in a function's top-level block, shared by the
// memory planner and the output-placement pass.
#ifndef KILN_PASSES_BUFFERLIVENESS_H
#define KILN_PASSES_BUFFERLIVENESS_H

#include "mlir/IR/Block.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <algorithm>

namespace kiln {

/// The top-level op of `block` that contains `op` (null when none does).
inline mlir::Operation *topLevel(mlir::Operation *op, mlir::Block *block) {
  while (op && op->getBlock() != block)
    op = op->getParentOp();
  return op;
}

/// Index (in `index`) of the last top-level op other than `except` that
/// uses `root` or a value derived from it. Derived values are followed
/// through every result of every user: a view, a cast, an extracted pointer
/// and the arithmetic on it. That over-approximates (a loaded scalar extends
/// the range too), which only costs reuse, never correctness.
inline int64_t lastUse(mlir::Value root, mlir::Block *block,
                       const llvm::DenseMap<mlir::Operation *, int64_t> &index,
                       mlir::Operation *except = nullptr) {
  int64_t last = 0;
  llvm::SmallVector<mlir::Value> work{root};
  llvm::DenseSet<mlir::Value> seen{root};
  while (!work.empty()) {
    mlir::Value v = work.pop_back_val();
    for (mlir::Operation *user : v.getUsers()) {
      mlir::Operation *top = topLevel(user, block);
      if (top && user != except)
        last = std::max(last, index.lookup(top));
      // A use inside a region may flow out through a terminator (scf.yield)
      // into the enclosing op's results: follow those too.
      for (mlir::Operation *op : {user, top})
        if (op)
          for (mlir::Value r : op->getResults())
            if (seen.insert(r).second)
              work.push_back(r);
    }
  }
  return last;
}

} // namespace kiln

#endif // KILN_PASSES_BUFFERLIVENESS_H
