// Finding the CUDA toolkit's libdevice and reading the PTX that
// gpu-module-to-binary left in the module.
#include "kiln/Target/GpuTarget.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectResourceBlobManager.h"

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

/// Appends the little-endian bytes of one element.
static void appendElement(const llvm::APInt &bits, unsigned bytes, std::string &out) {
  for (unsigned i = 0; i < bytes; ++i)
    out.push_back((char)bits.extractBitsAsZExtValue(8, 8 * i));
}

/// The bytes of a global's value as its LLVM type lays them out in memory
/// (i1 takes a byte), or false if the value has no such plain form.
static bool valueBytes(mlir::Attribute value, std::string &out) {
  out.clear();
  auto scalarBits = [](mlir::Attribute a) -> std::optional<llvm::APInt> {
    if (auto i = llvm::dyn_cast<mlir::IntegerAttr>(a))
      return i.getValue();
    if (auto f = llvm::dyn_cast<mlir::FloatAttr>(a))
      return f.getValue().bitcastToAPInt();
    return std::nullopt;
  };
  if (auto bits = scalarBits(value)) {
    appendElement(*bits, std::max(1u, (bits->getBitWidth() + 7) / 8), out);
    return true;
  }
  if (auto resource = llvm::dyn_cast<mlir::DenseResourceElementsAttr>(value)) {
    mlir::Type elem = resource.getElementType();
    mlir::AsmResourceBlob *blob = resource.getRawHandle().getBlob();
    if (!blob || !elem.isIntOrFloat() || elem.getIntOrFloatBitWidth() % 8 != 0)
      return false;
    out.assign(blob->getData().data(), blob->getData().size());
    return true;
  }
  auto dense = llvm::dyn_cast<mlir::DenseElementsAttr>(value);
  if (!dense || !dense.getElementType().isIntOrFloat())
    return false;
  unsigned width = dense.getElementType().getIntOrFloatBitWidth();
  if (width != 1 && width % 8 != 0)
    return false;
  int64_t n = dense.getNumElements();
  if (width == 1) {
    for (bool v : dense.getValues<bool>())
      out.push_back(v ? 1 : 0);
    return true;
  }
  if (!dense.isSplat()) {
    out.assign(dense.getRawData().data(), dense.getRawData().size());
    return true;
  }
  llvm::ArrayRef<char> one = dense.getRawData();
  out.reserve(one.size() * n);
  for (int64_t i = 0; i < n; ++i)
    out.append(one.data(), one.size());
  return true;
}

bool packGpuConstants(mlir::ModuleOp module, std::string &blob, std::string &error) {
  blob.clear();
  auto size = module->getAttrOfType<mlir::IntegerAttr>("kiln.gpu_constants_size");
  if (!size)
    return true;
  blob.assign(size.getInt(), '\0');
  std::string bytes;
  for (auto global : llvm::to_vector(module.getOps<mlir::LLVM::GlobalOp>())) {
    auto offset = global->getAttrOfType<mlir::IntegerAttr>("kiln.gpu_constant_offset");
    if (!offset)
      continue;
    if (!valueBytes(global.getValueAttr(), bytes)) {
      error = "internal error: the weight '" + global.getSymName().str() +
              "' has no plain byte form for the device";
      return false;
    }
    if (offset.getInt() < 0 || offset.getInt() + bytes.size() > blob.size()) {
      error = "internal error: the weight '" + global.getSymName().str() +
              "' does not fit the weights buffer";
      return false;
    }
    std::copy(bytes.begin(), bytes.end(), blob.begin() + offset.getInt());
    global.erase();
  }
  return true;
}

void defineCudaObjectData(mlir::ModuleOp module, const std::string &name, const std::string &ptx,
                          const std::vector<std::string> &kernels, const std::string &weights) {
  using namespace mlir;
  MLIRContext *ctx = module.getContext();
  OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
  Location loc = module.getLoc();
  auto i8 = IntegerType::get(ctx, 8);
  auto i64 = IntegerType::get(ctx, 64);
  auto ptr = LLVM::LLVMPointerType::get(ctx);
  auto bytes = [&](const std::string &symbol, llvm::StringRef data, LLVM::Linkage linkage,
                   unsigned alignment) {
    auto type = LLVM::LLVMArrayType::get(i8, data.size());
    auto tensor = RankedTensorType::get({(int64_t)data.size()}, i8);
    auto value = DenseElementsAttr::getFromRawBuffer(tensor, llvm::ArrayRef<char>(data.data(), data.size()));
    return LLVM::GlobalOp::create(b, loc, type, /*isConstant=*/true, linkage, symbol, value,
                                  alignment);
  };
  std::string text = ptx;
  text.push_back('\0');
  bytes(name + "_ptx", text, LLVM::Linkage::External, 1);
  SmallVector<LLVM::GlobalOp> names;
  for (size_t k = 0; k < kernels.size(); ++k)
    names.push_back(bytes(name + "_kernel_" + std::to_string(k),
                          llvm::StringRef(kernels[k].c_str(), kernels[k].size() + 1),
                          LLVM::Linkage::Private, 1));
  auto tableType = LLVM::LLVMArrayType::get(ptr, std::max<size_t>(kernels.size(), 1));
  auto table = LLVM::GlobalOp::create(b, loc, tableType, /*isConstant=*/true,
                                      LLVM::Linkage::External, name + "_kernels", Attribute());
  {
    Block *init = b.createBlock(&table.getInitializerRegion());
    OpBuilder ib = OpBuilder::atBlockEnd(init);
    Value array = LLVM::UndefOp::create(ib, loc, tableType);
    if (kernels.empty())
      array = LLVM::InsertValueOp::create(ib, loc, array, LLVM::ZeroOp::create(ib, loc, ptr),
                                          llvm::ArrayRef<int64_t>{0});
    for (auto [k, g] : llvm::enumerate(names))
      array = LLVM::InsertValueOp::create(ib, loc, array, LLVM::AddressOfOp::create(ib, loc, g),
                                          llvm::ArrayRef<int64_t>{(int64_t)k});
    LLVM::ReturnOp::create(ib, loc, array);
  }
  b.setInsertionPointToEnd(module.getBody());
  LLVM::GlobalOp::create(b, loc, i64, true, LLVM::Linkage::External, name + "_num_kernels",
                         b.getI64IntegerAttr((int64_t)kernels.size()));
  // A zero-length array has no initializer form: one unused byte instead.
  bytes(name + "_weights", weights.empty() ? llvm::StringRef("", 1) : llvm::StringRef(weights),
        LLVM::Linkage::External, 256);
  LLVM::GlobalOp::create(b, loc, i64, true, LLVM::Linkage::External, name + "_weights_size",
                         b.getI64IntegerAttr((int64_t)weights.size()));
}

int64_t ptxParameterCount(const std::string &ptx, const std::string &kernel) {
  std::string head = ".entry " + kernel + "(";
  size_t at = ptx.find(head);
  if (at == std::string::npos)
    return -1;
  size_t end = ptx.find(')', at);
  if (end == std::string::npos)
    return -1;
  int64_t count = 0;
  for (size_t p = ptx.find(".param", at); p < end; p = ptx.find(".param", p + 1))
    ++count;
  return count;
}

} // namespace kiln
