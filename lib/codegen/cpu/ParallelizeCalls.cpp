// kiln-parallelize-calls: a call marked `kiln.parallel = [trips, grain]`
// (kiln-outline-loop-nests marks them; the callee's last two arguments are
// an i64 [begin, end) range) becomes a kiln_parallel_for over [0, trips).
//
// Done on the LLVM dialect, where the callee's arguments are plain
// pointers and scalars: they go into an array of 8-byte slots on the
// caller's stack, and a task function `CALLEE_task(ctx, begin, end)` loads
// them back and calls the callee on its range.
#include "kiln/Codegen/CpuPasses.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

namespace kiln {
#define GEN_PASS_DEF_KILNPARALLELIZECALLS
#include "kiln/Codegen/CpuPasses.h.inc"
} // namespace kiln

using namespace mlir;

namespace kiln {
namespace {

constexpr const char *kParallelFor = "kiln_parallel_for";

/// Every captured argument fits an 8-byte slot.
bool slottable(Type t) {
  return isa<LLVM::LLVMPointerType>(t) || t.isInteger(64) || t.isInteger(32) || t.isF32() ||
         t.isF64() || t.isInteger(1) || t.isInteger(8) || t.isInteger(16);
}

struct ParallelizeCallsPass : impl::KilnParallelizeCallsBase<ParallelizeCallsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<LLVM::CallOp> calls;
    module.walk([&](LLVM::CallOp call) {
      if (call->hasAttr("kiln.parallel"))
        calls.push_back(call);
    });
    if (calls.empty())
      return;
    MLIRContext *ctx = module.getContext();
    auto ptr = LLVM::LLVMPointerType::get(ctx);
    auto i64 = IntegerType::get(ctx, 64);
    OpBuilder b(module.getBodyRegion());
    b.setInsertionPointToStart(module.getBody());
    if (!module.lookupSymbol(kParallelFor))
      LLVM::LLVMFuncOp::create(b, module.getLoc(), kParallelFor,
                               LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx),
                                                           {i64, i64, ptr, ptr}));
    DenseMap<StringAttr, LLVM::LLVMFuncOp> tasks;
    for (LLVM::CallOp call : calls) {
      auto range = call->getAttrOfType<DenseI64ArrayAttr>("kiln.parallel");
      call->removeAttr("kiln.parallel");
      auto callee = call.getCalleeAttr();
      unsigned n = call.getArgOperands().size();
      if (!callee || !range || range.size() != 2 || n < 2)
        continue;
      SmallVector<Value> captured(call.getArgOperands().drop_back(2));
      if (!llvm::all_of(ValueRange(captured).getTypes(), slottable))
        continue; // stays a serial call over the whole range
      LLVM::LLVMFuncOp &task = tasks[callee.getAttr()];
      if (!task)
        task = makeTask(module, callee.getAttr(), ValueRange(captured).getTypes());
      emitParallelFor(call, captured, task, range[0], range[1]);
    }
  }

  /// CALLEE_task(ctx, begin, end): loads the arguments back from the slots
  /// and calls CALLEE on [begin, end).
  LLVM::LLVMFuncOp makeTask(ModuleOp module, StringAttr callee, TypeRange types) {
    MLIRContext *ctx = module.getContext();
    auto ptr = LLVM::LLVMPointerType::get(ctx);
    auto i64 = IntegerType::get(ctx, 64);
    OpBuilder b(module.getBodyRegion());
    b.setInsertionPointToEnd(module.getBody());
    Location loc = module.getLoc();
    auto fn = LLVM::LLVMFuncOp::create(
        b, loc, (callee.getValue() + "_task").str(),
        LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx), {ptr, i64, i64}),
        LLVM::Linkage::Internal);
    Block *body = fn.addEntryBlock(b);
    b.setInsertionPointToStart(body);
    SmallVector<Value> args;
    for (auto [i, t] : llvm::enumerate(types)) {
      Value slot = LLVM::GEPOp::create(b, loc, ptr, i64, body->getArgument(0),
                                       ArrayRef<LLVM::GEPArg>{(int32_t)i});
      args.push_back(LLVM::LoadOp::create(b, loc, t, slot));
    }
    args.push_back(body->getArgument(1));
    args.push_back(body->getArgument(2));
    LLVM::CallOp::create(b, loc, TypeRange{}, FlatSymbolRefAttr::get(callee), args);
    LLVM::ReturnOp::create(b, loc, ValueRange{});
    return fn;
  }

  void emitParallelFor(LLVM::CallOp call, ArrayRef<Value> captured, LLVM::LLVMFuncOp task,
                       int64_t trips, int64_t grain) {
    MLIRContext *ctx = call.getContext();
    auto ptr = LLVM::LLVMPointerType::get(ctx);
    auto i64 = IntegerType::get(ctx, 64);
    Location loc = call.getLoc();
    // The slots live in the caller's entry block: one alloca per call site,
    // not one per execution of a loop around it.
    auto parent = call->getParentOfType<LLVM::LLVMFuncOp>();
    OpBuilder entry(&parent.getBody().front(), parent.getBody().front().begin());
    Value count = LLVM::ConstantOp::create(entry, loc, i64,
                                           entry.getI64IntegerAttr(std::max<size_t>(1, captured.size())));
    Value slots = LLVM::AllocaOp::create(entry, loc, ptr, i64, count, /*alignment=*/8);

    OpBuilder b(call);
    for (auto [i, v] : llvm::enumerate(captured)) {
      Value slot = LLVM::GEPOp::create(b, loc, ptr, i64, slots, ArrayRef<LLVM::GEPArg>{(int32_t)i});
      LLVM::StoreOp::create(b, loc, v, slot);
    }
    Value fn = LLVM::AddressOfOp::create(b, loc, ptr, task.getSymName());
    Value n = LLVM::ConstantOp::create(b, loc, i64, b.getI64IntegerAttr(trips));
    Value g = LLVM::ConstantOp::create(b, loc, i64, b.getI64IntegerAttr(grain));
    auto pf = LLVM::CallOp::create(b, loc, TypeRange{}, FlatSymbolRefAttr::get(ctx, kParallelFor),
                                   ValueRange{n, g, fn, slots});
    if (Attribute flops = call->getAttr("kiln.flops"))
      pf->setAttr("kiln.flops", flops);
    call->erase();
  }
};

} // namespace
} // namespace kiln
