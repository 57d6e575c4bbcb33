// Values whose number of valid rows is known only at run time.
//
// An operator whose output size depends on values computed at run time (a
// NonMaxSuppression on a detector's boxes, a NonZero) cannot have a static
// output shape. Kiln gives it the shape of the most it can produce and a
// count along one axis (CountedAxis): a scalar i64 tensor computed with it,
// saying how many leading entries along that axis are valid; the rest is
// padding. Ops that keep those entries apart from the padding (a Gather of
// those rows, elementwise ops, slices and transposes that move other axes,
// ...) pass the count on, with the axis where it lands; at a graph output it
// becomes a hidden result, and kiln::Model cuts the output to it. Nodes
// that need more than passing a count on (Shape, TopK, Concat along the
// counted axis, reductions over it, ...) are in CountedOps.cpp. Any other
// consumer is an error naming the node: it would mix padding into valid
// values.
#ifndef KILN_FRONTEND_ROWCOUNTS_H
#define KILN_FRONTEND_ROWCOUNTS_H

#include "NodeImporter.h"

#include <map>
#include <vector>

namespace kiln {

/// A small integer tensor (0-D or 1-D) computed at run time from row
/// counts: a Shape of a counted tensor and the shape arithmetic on it
/// (Gather, Concat, Unsqueeze, ReduceMin, ...). Each element has an upper
/// bound known while compiling, and is either known exactly or, when it is
/// a row count itself, equal at run time to `same` (a scalar i64 tensor).
/// Run-time entries are never negative: they come from counts through ops
/// that keep that (min, max, selection, comparisons give 0 or 1).
/// Consumers that size a result by such values (TopK's k, ConstantOfShape)
/// size it by the bounds and count it by the value (CountedOps.cpp).
struct BoundedInts {
  struct Entry {
    int64_t max = 0;
    bool known = false;
    mlir::Value same;
  };
  llvm::SmallVector<Entry> entries;
  explicit operator bool() const { return !entries.empty(); }
};

/// TopK of the float32 `x` (static shape) along `axis` by the sorting
/// kernel (kiln.top_k): the values and positions of the min(k, valid) best
/// of each line's first `valid` entries, in `capacity` slots, appended to
/// `outputs`. For a run-time k or valid length, and for a large constant k
/// (the importer's k rounds of arg-max cost O(k * n), and as many ops).
void sortedTopK(NodeImporter &n, mlir::Value x, int64_t axis, mlir::Value k, int64_t capacity,
                mlir::Value valid, llvm::SmallVectorImpl<mlir::Value> &outputs);

/// NonZero of `x` computed at run time by kiln_nonzero_u8: coordinates
/// [rank, elements] whose valid columns (axis 1) number `count`.
mlir::LogicalResult runTimeNonZero(NodeImporter &n, mlir::Value x, mlir::Value &coords,
                                   mlir::Value &count);

/// Runs the node's import rule on `inputs` (the node's own, or replaced).
using RunRule = llvm::function_ref<mlir::LogicalResult(llvm::ArrayRef<mlir::Value> inputs,
                                                       llvm::SmallVectorImpl<mlir::Value> &outputs)>;

/// What the importer keeps across nodes for counted values: the positions
/// and counts of compacting Concats already built, so that Concats of the
/// same counted parts (a detector's boxes, scores and labels) share one
/// count, which later elementwise ops can then match.
struct CountedState {
  std::map<std::vector<std::pair<void *, int64_t>>, std::pair<mlir::Value, mlir::Value>>
      compactions;
};

/// Imports a node that reads counted or bounded values where it needs more
/// than passing a count on: Shape of a counted tensor, TopK over a counted
/// axis or of a bounded k, ConstantOfShape/Expand/Reshape to bounded dims,
/// Slice to a bounded end, Concat along the counted axis (compacting the
/// parts), ScatterElements of counted indices, reductions,
/// NonMaxSuppression, NonZero and RoiAlign over the counted axis (padding
/// masked out). Returns false, having built nothing, for other nodes.
mlir::FailureOr<bool> importCountedNode(NodeImporter &n, llvm::ArrayRef<CountedAxis> inputCounts,
                                        llvm::ArrayRef<BoundedInts> inputBounds,
                                        RunRule runRule, CountedState &state,
                                        llvm::SmallVectorImpl<mlir::Value> &outputs,
                                        llvm::SmallVectorImpl<CountedAxis> &outputCounts,
                                        llvm::SmallVectorImpl<BoundedInts> &outputBounds);

/// The bounds of the outputs of a node imported by its rule whose inputs
/// include bounded values (`inputBounds[i]` empty for the others; constant
/// inputs are filled in by the caller): shape arithmetic keeps them.
void propagateBounds(NodeImporter &n, llvm::ArrayRef<BoundedInts> inputBounds,
                     llvm::ArrayRef<mlir::Value> outputs,
                     llvm::SmallVectorImpl<BoundedInts> &outputBounds);

/// The row count of each of `outputs` of the node `n` has just been
/// imported to, given the counts of its inputs (`inputCounts[i]`, null for
/// an input without one; at least one is set). Fails with an error at the
/// node when it does not keep the counted rows aligned.
mlir::LogicalResult propagateRowCounts(NodeImporter &n, llvm::ArrayRef<CountedAxis> inputCounts,
                                       llvm::ArrayRef<mlir::Value> outputs,
                                       llvm::SmallVectorImpl<CountedAxis> &outputCounts);

} // namespace kiln

#endif
