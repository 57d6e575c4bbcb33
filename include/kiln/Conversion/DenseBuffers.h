// Dense row-major buffers whose dims are known only at run time, passed
// through the bare-pointer calling convention (which takes static shapes
// only) as one pointer, memref<0xT>, and remade from their sizes.
#ifndef KILN_CONVERSION_DENSEBUFFERS_H
#define KILN_CONVERSION_DENSEBUFFERS_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"

namespace kiln::codegen {

/// `flat` (a memref<0xT>) as the dense row-major buffer of `type` it
/// points to; `sizes` has one entry per dim of `type`.
inline mlir::Value remakeDenseBuffer(mlir::OpBuilder &b, mlir::Location loc, mlir::Value flat,
                                     mlir::MemRefType type,
                                     llvm::ArrayRef<mlir::OpFoldResult> sizes) {
  llvm::SmallVector<mlir::OpFoldResult> strides(type.getRank());
  mlir::OpFoldResult stride = b.getIndexAttr(1);
  for (int64_t i = type.getRank() - 1; i >= 0; --i) {
    strides[i] = stride;
    auto sc = mlir::getConstantIntValue(stride), dc = mlir::getConstantIntValue(sizes[i]);
    stride = sc && dc ? mlir::OpFoldResult(b.getIndexAttr(*sc * *dc))
                      : mlir::OpFoldResult(
                            mlir::arith::MulIOp::create(
                                b, loc, mlir::getValueOrCreateConstantIndexOp(b, loc, stride),
                                mlir::getValueOrCreateConstantIndexOp(b, loc, sizes[i]))
                                .getResult());
  }
  return mlir::memref::ReinterpretCastOp::create(b, loc, type, flat, b.getIndexAttr(0), sizes,
                                                 strides);
}

} // namespace kiln::codegen

#endif
