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
// becomes a hidden result, and kiln::Model cuts the output to it. Any other
// consumer is an error naming the node: it would mix padding into valid
// values.
#ifndef KILN_FRONTEND_ROWCOUNTS_H
#define KILN_FRONTEND_ROWCOUNTS_H

#include "NodeImporter.h"

namespace kiln {

/// The row count of each of `outputs` of the node `n` has just been
/// imported to, given the counts of its inputs (`inputCounts[i]`, null for
/// an input without one; at least one is set). Fails with an error at the
/// node when it does not keep the counted rows aligned.
mlir::LogicalResult propagateRowCounts(NodeImporter &n, llvm::ArrayRef<CountedAxis> inputCounts,
                                       llvm::ArrayRef<mlir::Value> outputs,
                                       llvm::SmallVectorImpl<CountedAxis> &outputCounts);

} // namespace kiln

#endif
