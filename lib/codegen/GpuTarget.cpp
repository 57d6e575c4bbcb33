// Finding the CUDA toolkit's libdevice and reading the PTX that
// gpu-module-to-binary left in the module.
#include "kiln/Codegen/GpuTarget.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"

#include "llvm/Support/FileSystem.h"

#include <cstdlib>

namespace kiln {

std::string findLibdevice() {
  for (const char *var : {"CUDA_HOME", "CUDA_PATH"})
    if (const char *root = std::getenv(var); root && *root) {
      std::string path = std::string(root) + "/nvvm/libdevice/libdevice.10.bc";
      if (llvm::sys::fs::exists(path))
        return path;
    }
  std::string fallback = "/usr/local/cuda/nvvm/libdevice/libdevice.10.bc";
  return llvm::sys::fs::exists(fallback) ? fallback : std::string();
}

bool isSupportedGpuChip(const std::string &chip) {
  if (chip.size() < 5 || chip.compare(0, 3, "sm_") != 0)
    return false;
  size_t digits = 3;
  while (digits < chip.size() && std::isdigit((unsigned char)chip[digits]))
    ++digits;
  // sm_90a / sm_100a: architecture-specific variants.
  if (digits == 3 || (digits != chip.size() && chip.substr(digits) != "a"))
    return false;
  return std::atoi(chip.c_str() + 3) >= 75;
}

bool extractPtx(mlir::ModuleOp module, std::string &ptx, std::string &error) {
  ptx.clear();
  // Everything that touches tensor data must be in a kernel: a loop, load or
  // store left in the host function would run on the CPU over device memory
  // (upstream leaves loops it cannot map on the host without a word).
  for (auto func : module.getOps<mlir::func::FuncOp>()) {
    if (func.isDeclaration())
      continue;
    mlir::Operation *onHost = nullptr;
    func.walk([&](mlir::Operation *op) {
      llvm::StringRef dialect = op->getDialect() ? op->getDialect()->getNamespace() : "";
      if (!onHost && (mlir::isa<mlir::memref::LoadOp, mlir::memref::StoreOp,
                                mlir::memref::CopyOp>(op) ||
                      dialect == "linalg" || dialect == "scf" || dialect == "cf"))
        onHost = op;
    });
    if (onHost) {
      // The op's location names the ONNX node; the caller prints it.
      onHost->emitError("this node's code would run on the host, which the GPU target does "
                        "not support yet (control flow such as If/Loop/Scan, or '" +
                        onHost->getName().getStringRef().str() + "')");
      error = "code left on the host after mapping to GPU kernels";
      return false;
    }
  }
  int binaries = 0;
  module.walk([&](mlir::gpu::BinaryOp binary) {
    ++binaries;
    for (mlir::Attribute a : binary.getObjects())
      if (auto object = llvm::dyn_cast<mlir::gpu::ObjectAttr>(a))
        ptx += object.getObject().str();
  });
  if (binaries == 0) {
    // A model whose every output is a constant or an input has no kernel.
    return true;
  }
  if (binaries > 1) {
    error = "internal error: the kernels are in " + std::to_string(binaries) +
            " GPU modules, not one";
    return false;
  }
  return true;
}

} // namespace kiln
