// What the quantization rules share (RulesQuantize.cpp defines these;
// RulesQuantizeContrib.cpp, the com.microsoft QOperator ops, uses them).
#ifndef KILN_FRONTEND_QUANTIZESUPPORT_H
#define KILN_FRONTEND_QUANTIZESUPPORT_H

#include "NodeImporter.h"

namespace kiln {

/// A scale and zero point checked as ONNX defines them (one value, or one
/// per entry of an axis of `axisSize` entries when `perEntry`; the zero
/// point of type `quantized`; a constant scale finite and non-zero): an
/// error naming the node and `what` otherwise.
mlir::LogicalResult checkQuantParams(NodeImporter &n, llvm::StringRef what, mlir::Value scale,
                                     mlir::Value zp, mlir::Type quantized, int64_t axisSize,
                                     bool perEntry, llvm::StringRef axisText);
/// round_half_even(v) + zp, saturated to the range of `to` and cast to it.
mlir::Value saturateCast(NodeImporter &n, mlir::Value v, mlir::Value zeroPointF, mlir::Type to);
/// `v` cast to the float type `f` (as it is when it has it, or is null).
mlir::Value toFloat(NodeImporter &n, mlir::Value v, mlir::Type f);

} // namespace kiln

#endif
