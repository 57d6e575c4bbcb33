// The GPU path's loop passes: kiln-gpu-loops (bufferized linalg -> loop nests
// that upstream's parallel-loops-to-gpu turns into kernels, none left on the
// host) and kiln-merge-gpu-modules (one gpu.module, so one PTX module, per
// model).
//
// Upstream's convert-linalg-to-parallel-loops makes an scf.parallel of the
// outermost run of parallel loops only; a linalg.generic whose reduction loop
// sits between parallel ones (Kiln's matrix product is (m, k, n)) would be
// parallel over m alone. And a loop nest with no parallel loop stays a host
// loop, which would read device memory. Both are fixed here rather than in
// the lowering to linalg, which the CPU path shares.
#include "kiln/Passes/Passes.h"

#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace kiln {
#define GEN_PASS_DEF_KILNGPULOOPS
#define GEN_PASS_DEF_KILNMERGEGPUMODULES
#define GEN_PASS_DEF_KILNGPUFUSEELEMENTWISE
#include "kiln/Passes/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace kiln {
namespace {

/// Loop order with every parallel loop before every reduction loop, keeping
/// the relative order within each kind; empty if it already is.
SmallVector<unsigned> parallelFirst(linalg::GenericOp op) {
  SmallVector<unsigned> parallel, reduction;
  for (auto [i, kind] : llvm::enumerate(op.getIteratorTypesArray()))
    (linalg::isParallelIterator(kind) ? parallel : reduction).push_back(i);
  SmallVector<unsigned> order(parallel);
  llvm::append_range(order, reduction);
  for (unsigned i = 0; i < order.size(); ++i)
    if (order[i] != i)
      return order;
  return {};
}

struct GpuLoopsPass : impl::KilnGpuLoopsBase<GpuLoopsPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    IRRewriter rw(&getContext());

    for (auto copy : llvm::to_vector(func.getOps<memref::CopyOp>())) {
      rw.setInsertionPoint(copy);
      rw.replaceOpWithNewOp<linalg::CopyOp>(copy, copy.getSource(), copy.getTarget());
    }
    SmallVector<linalg::LinalgOp> ops;
    func.walk([&](linalg::LinalgOp op) { ops.push_back(op); });
    for (linalg::LinalgOp op : ops) {
      if (auto generic = dyn_cast<linalg::GenericOp>(op.getOperation())) {
        if (SmallVector<unsigned> order = parallelFirst(generic); !order.empty()) {
          rw.setInsertionPoint(generic);
          auto swapped = linalg::interchangeGenericOp(rw, generic, order);
          if (failed(swapped)) {
            generic.emitOpError("cannot reorder its loops for the GPU");
            return signalPassFailure();
          }
          op = *swapped;
        }
      }
      rw.setInsertionPoint(op);
      auto loops = linalg::linalgOpToParallelLoops(rw, op);
      if (failed(loops)) {
        op.emitOpError("cannot be lowered to loops for the GPU");
        return signalPassFailure();
      }
      rw.eraseOp(op);
    }

    // A top-level loop nest without a parallel loop: one GPU thread runs it.
    for (Block &block : func.getBody())
      for (auto loop : llvm::to_vector(block.getOps<scf::ForOp>())) {
        Location loc = loop.getLoc();
        rw.setInsertionPoint(loop);
        Value zero = arith::ConstantIndexOp::create(rw, loc, 0);
        Value one = arith::ConstantIndexOp::create(rw, loc, 1);
        auto wrapper = scf::ParallelOp::create(rw, loc, ValueRange{zero}, ValueRange{one},
                                               ValueRange{one});
        rw.moveOpBefore(loop, wrapper.getBody()->getTerminator());
      }
  }
};

struct GpuFuseElementwisePass : impl::KilnGpuFuseElementwiseBase<GpuFuseElementwisePass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    linalg::ControlFusionFn onceEach = [](OpOperand *use) {
      auto consumer = dyn_cast<linalg::LinalgOp>(use->getOwner());
      if (!consumer || !use->get().getDefiningOp<linalg::GenericOp>())
        return false;
      AffineMap map = consumer.getMatchingIndexingMap(use);
      return map.isPermutation() && map.getNumDims() == consumer.getNumLoops();
    };
    linalg::populateElementwiseOpsFusionPatterns(patterns, onceEach);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

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
