// CPU code generation passes (CpuPasses.td).
#ifndef KILN_CODEGEN_CPUPASSES_H
#define KILN_CODEGEN_CPUPASSES_H

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Pass/Pass.h"

namespace kiln {

#define GEN_PASS_DECL
#include "kiln/Codegen/CpuPasses.h.inc"

#define GEN_PASS_REGISTRATION
#include "kiln/Codegen/CpuPasses.h.inc"

} // namespace kiln

#endif
