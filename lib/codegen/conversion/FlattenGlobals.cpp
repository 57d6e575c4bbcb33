#include "kiln/Conversion/Passes.h"

namespace kiln {
#define GEN_PASS_DEF_KILNFLATTENGLOBALS
#include "kiln/Conversion/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace kiln {
namespace {

struct FlattenGlobalsPass : impl::KilnFlattenGlobalsBase<FlattenGlobalsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    llvm::StringMap<MemRefType> original;
    for (auto global : module.getOps<memref::GlobalOp>()) {
      MemRefType type = global.getType();
      auto init = dyn_cast_or_null<DenseElementsAttr>(global.getInitialValue().value_or(Attribute()));
      if (type.getRank() < 2 || !type.hasStaticShape() || !type.getLayout().isIdentity() || !init ||
          init.getElementType().isInteger(1))
        continue;
      auto flat = MemRefType::get({type.getNumElements()}, type.getElementType(), AffineMap(),
                                  type.getMemorySpace());
      auto flatInit = init.reshape(RankedTensorType::get({type.getNumElements()},
                                                         init.getElementType()));
      global.setType(flat);
      global.setInitialValueAttr(flatInit);
      original[global.getSymName()] = type;
    }
    if (original.empty())
      return;
    module.walk([&](memref::GetGlobalOp get) {
      auto it = original.find(get.getName());
      if (it == original.end())
        return;
      MemRefType type = it->second;
      OpBuilder b(get);
      auto flat = memref::GetGlobalOp::create(
          b, get.getLoc(),
          MemRefType::get({type.getNumElements()}, type.getElementType(), AffineMap(),
                          type.getMemorySpace()),
          get.getName());
      ReassociationIndices all;
      for (int64_t i = 0; i < type.getRank(); ++i)
        all.push_back(i);
      Value view = memref::ExpandShapeOp::create(b, get.getLoc(), type, flat,
                                                 ArrayRef<ReassociationIndices>{all});
      get.replaceAllUsesWith(view);
      get.erase();
    });
  }
};

} // namespace
} // namespace kiln
