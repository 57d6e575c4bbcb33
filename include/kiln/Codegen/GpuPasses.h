// GPU code generation passes (GpuPasses.td).
#ifndef KILN_CODEGEN_GPUPASSES_H
#define KILN_CODEGEN_GPUPASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Pass/Pass.h"

namespace kiln {

/// Where kiln-gpu-host-calls places each weight in the device's weights
/// buffer: at a multiple of this many bytes (CUDA's allocation
/// granularity), which the GPU kernel passes rely on (`global-alignment`).
constexpr int64_t kGpuWeightAlignment = 256;

/// The name kiln-gpu-tile-contractions gives its TF32 kernels (the
/// gpu.launch's `function`), by which kiln-merge-gpu-modules, after
/// outlining (which keeps no other mark of the launch), asks ptxas for two
/// blocks of them per SM (`nvvm.minctasm`: at most 128 registers a thread,
/// which they fit without spilling).
constexpr llvm::StringLiteral kTf32TileKernelName = "tf32_tiles";
constexpr int kTf32TileBlocksPerSm = 2;
/// ... and aligns their shared tiles for the 128-bit loads they make.
constexpr int64_t kTf32TileAlignment = 16;

#define GEN_PASS_DECL
#include "kiln/Codegen/GpuPasses.h.inc"

#define GEN_PASS_REGISTRATION
#include "kiln/Codegen/GpuPasses.h.inc"

} // namespace kiln

#endif
