// Patterns of the kiln-level optimisation passes (layout, epilogue and
// row-op fusion), shared by their drivers. Internal to lib/passes.
#ifndef KILN_PASSES_LAYOUTPATTERNS_H
#define KILN_PASSES_LAYOUTPATTERNS_H

#include "kiln/IR/KilnDialect.h"

#include "mlir/IR/PatternMatch.h"

namespace kiln {

/// NCHW 2-D convolutions with constant weights -> kiln.conv2d_nhwc, pooling
/// after them -> channels_last, and transposes sunk through elementwise,
/// reduction and concatenation ops so that they cancel.
void populateConvertLayoutPatterns(mlir::RewritePatternSet &patterns);

/// Folds BatchNorm-style per-channel scale/shift, bias, residual adds and
/// Relu/Clip into kiln.conv2d_nhwc.
void populateFuseEpiloguePatterns(mlir::RewritePatternSet &patterns);

/// Softmax, LogSoftmax and layer normalisation written as reductions ->
/// kiln.softmax / kiln.layer_norm (with scale and bias absorbed).
void populateFuseRowOpsPatterns(mlir::RewritePatternSet &patterns);

/// Elementwise ops that commute with any permutation of their operand(s).
bool isLayoutAgnosticUnary(mlir::Operation *op);
bool isLayoutAgnosticBinary(mlir::Operation *op);

/// kiln.reshape of `v` to the static `shape`.
mlir::Value reshapeTo(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v,
                      llvm::ArrayRef<int64_t> shape);
/// kiln.reshape of `v` to `shape`, whose dynamic dims (more than one) are
/// those of `dimsSource` at the same positions; with one at most, as above.
mlir::Value reshapeTo(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v,
                      llvm::ArrayRef<int64_t> shape, mlir::Value dimsSource);

} // namespace kiln

#endif
