// The runtime's dtype of an MLIR element type, for the layers above the IR
// that talk to the runtime (the compile driver, the reference interpreter).
#ifndef KILN_IR_DTYPES_H
#define KILN_IR_DTYPES_H

#include "kiln/runtime.h"

#include "mlir/IR/BuiltinTypes.h"

namespace kiln {

/// The kiln_dtype of `t`, or 0 for a type the runtime has no dtype for.
inline kiln_dtype dtypeOf(mlir::Type t) {
  if (t.isF32()) return KILN_FLOAT32;
  if (t.isF64()) return KILN_FLOAT64;
  if (t.isF16()) return KILN_FLOAT16;
  if (t.isBF16()) return KILN_BFLOAT16;
  if (t.isInteger(1)) return KILN_BOOL;
  if (auto it = mlir::dyn_cast<mlir::IntegerType>(t)) {
    bool u = it.isUnsigned();
    switch (it.getWidth()) {
    case 8: return u ? KILN_UINT8 : KILN_INT8;
    case 16: return u ? KILN_UINT16 : KILN_INT16;
    case 32: return u ? KILN_UINT32 : KILN_INT32;
    case 64: return u ? KILN_UINT64 : KILN_INT64;
    }
  }
  return (kiln_dtype)0;
}

} // namespace kiln

#endif
