#include "kiln/Target/ConstantPool.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectResourceBlobManager.h"

#include <algorithm>
#include <cstring>

using namespace mlir;

namespace kiln {

/// The bytes of `value` as the LLVM global lays them out (dense, row-major),
/// or an empty ref when the attribute has no such plain form (splats, i1
/// bit-packing, strings).
static ArrayRef<char> rawBytes(Attribute value) {
  if (auto dense = dyn_cast<DenseElementsAttr>(value)) {
    Type elem = dense.getElementType();
    if (dense.isSplat() || !elem.isIntOrFloat() || elem.getIntOrFloatBitWidth() % 8 != 0)
      return {};
    return dense.getRawData();
  }
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(value)) {
    Type elem = resource.getElementType();
    if (!elem.isIntOrFloat() || elem.getIntOrFloatBitWidth() % 8 != 0)
      return {};
    if (AsmResourceBlob *blob = resource.getRawHandle().getBlob())
      return blob->getData();
  }
  return {};
}

void extractConstants(ModuleOp module, size_t minBytes, ConstantPool &pool) {
  struct Moved {
    LLVM::GlobalOp global;
    ArrayRef<char> bytes;
    size_t offset;
  };
  std::vector<Moved> moved;
  size_t size = 0, baseAlign = 64;
  for (auto global : module.getOps<LLVM::GlobalOp>()) {
    if (!global.getConstant() || !global.getValueAttr() || global.getAddrSpace() != 0 ||
        !global.getInitializerRegion().empty())
      continue;
    ArrayRef<char> bytes = rawBytes(global.getValueAttr());
    if (bytes.size() < minBytes)
      continue;
    size_t align = std::max<size_t>(64, global.getAlignment().value_or(1));
    baseAlign = std::max(baseAlign, align);
    size = (size + align - 1) / align * align;
    moved.push_back({global, bytes, size});
    size += bytes.size();
  }
  if (moved.empty())
    return;
  // Out of memory: the constants simply stay in the code.
  char *data = static_cast<char *>(
      std::aligned_alloc(baseAlign, (size + baseAlign - 1) / baseAlign * baseAlign));
  if (!data)
    return;
  pool.size = size;
  pool.data.reset(data, ConstantPool::FreeDeleter());
  unsigned index = 0;
  for (Moved &m : moved) {
    std::memcpy(data + m.offset, m.bytes.data(), m.bytes.size());
    // A name of Kiln's own, so that no symbol of the process can answer
    // for it.
    std::string name = "__kiln_pool_" + std::to_string(index++);
    auto newName = StringAttr::get(module.getContext(), name);
    if (failed(SymbolTable::replaceAllSymbolUses(m.global, newName, module)))
      continue; // stays embedded
    SymbolTable::setSymbolName(m.global, newName);
    pool.symbols.emplace_back(name, m.offset);
    m.global.removeValueAttr();
    m.global.setLinkage(LLVM::Linkage::External);
    m.global.removeUnnamedAddrAttr();
    m.global.setDsoLocal(false);
  }
}

} // namespace kiln
