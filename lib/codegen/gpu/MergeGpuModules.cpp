// kiln-merge-gpu-modules: every kernel in one gpu.module, so one PTX module
// per model (one cuModuleLoadData at load time). Kernels outlined under
// kTf32TileKernelName get their occupancy hint here (GpuPasses.h).
#include "kiln/Codegen/GpuPasses.h"

#include "mlir/IR/SymbolTable.h"

namespace kiln {
#define GEN_PASS_DEF_KILNMERGEGPUMODULES
#include "kiln/Codegen/GpuPasses.h.inc"
} // namespace kiln

using namespace mlir;

namespace kiln {
namespace {

struct MergeGpuModulesPass : impl::KilnMergeGpuModulesBase<MergeGpuModulesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto modules = llvm::to_vector(module.getOps<gpu::GPUModuleOp>());
    if (modules.empty())
      return;
    OpBuilder b(modules.front());
    auto merged = gpu::GPUModuleOp::create(b, modules.front().getLoc(), "kiln_kernels");
    if (auto targets = modules.front().getTargetsAttr())
      merged.setTargetsAttr(targets);
    Block &body = merged.getBodyRegion().front();
    // Old (module, function) -> new function name.
    llvm::DenseMap<std::pair<StringAttr, StringAttr>, StringAttr> renamed;
    for (gpu::GPUModuleOp m : modules) {
      for (Operation &op : llvm::make_early_inc_range(m.getBody()->getOperations())) {
        auto fn = dyn_cast<gpu::GPUFuncOp>(op);
        if (!fn) {
          m.emitError("a kernel module holds something other than kernels");
          return signalPassFailure();
        }
        if (SymbolTable::getSymbolName(fn).getValue() == kTf32TileKernelName) {
          fn->setAttr("nvvm.minctasm", b.getI32IntegerAttr(kTf32TileBlocksPerSm));
          // Its fragments load as 128-bit vectors from its shared tiles.
          for (unsigned i = 0; i < fn.getNumWorkgroupAttributions(); ++i)
            fn.setWorkgroupAttributionAttr(i, LLVM::LLVMDialect::getAlignAttrName(),
                                           b.getI64IntegerAttr(kTf32TileAlignment));
        }
        StringAttr newName = m.getSymNameAttr();
        renamed[{m.getSymNameAttr(), SymbolTable::getSymbolName(fn)}] = newName;
        SymbolTable::setSymbolName(fn, newName);
        op.moveBefore(&body, body.end());
      }
    }
    module.walk([&](gpu::LaunchFuncOp launch) {
      SymbolRefAttr ref = launch.getKernel();
      auto it = renamed.find({ref.getRootReference(), ref.getLeafReference()});
      if (it != renamed.end())
        launch.setKernelAttr(SymbolRefAttr::get(merged.getSymNameAttr(),
                                                {FlatSymbolRefAttr::get(it->second)}));
    });
    for (gpu::GPUModuleOp m : modules)
      m.erase();
  }
};

} // namespace
} // namespace kiln
