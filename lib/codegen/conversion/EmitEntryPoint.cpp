// kiln-emit-entry-point: `void kiln_entry(void **buffers)` around the model
// function, so the runtime can call any compiled model without knowing MLIR's
// memref calling convention.
#include "kiln/Conversion/EntryGlue.h"
#include "kiln/Conversion/Passes.h"

namespace kiln {
#define GEN_PASS_DEF_KILNEMITENTRYPOINT
#include "kiln/Conversion/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace kiln {
namespace {

/// Marks `f` as entry glue (kEntryGlueAttr): calls, memref descriptors and
/// shape arithmetic, where LLVM's SLP vectorizer finds nothing to gain but
/// spent a sixth of a decoder's compile (SlpOutsideEntryGlue in
/// TargetEmitter.cpp).
void markEntryGlue(LLVM::LLVMFuncOp f) {
  MLIRContext *ctx = f.getContext();
  SmallVector<Attribute> attrs;
  if (ArrayAttr old = f.getPassthroughAttr())
    attrs.append(old.begin(), old.end());
  attrs.push_back(StringAttr::get(ctx, kEntryGlueAttr));
  f.setPassthroughAttr(ArrayAttr::get(ctx, attrs));
}

struct EmitEntryPointPass : impl::KilnEmitEntryPointBase<EmitEntryPointPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto model = module.lookupSymbol<LLVM::LLVMFuncOp>(modelFunction);
    if (!model) {
      module.emitError() << "no lowered function '" << modelFunction << "' to wrap";
      return signalPassFailure();
    }
    auto ptr = LLVM::LLVMPointerType::get(&getContext());
    for (Type t : model.getArgumentTypes())
      if (t != ptr) {
        model.emitError() << "argument of type " << t
                          << " is not a bare pointer; the entry point needs static "
                             "shapes and identity layouts";
        return signalPassFailure();
      }
    // Inlined into the entry point by LLVM; not part of the object's ABI.
    model.setLinkage(LLVM::Linkage::Internal);
    // func-to-llvm carries a func.func's `llvm.no_inline` over as a plain
    // attribute (kiln-outline-loop-nests sets it); make it the real one.
    for (auto f : module.getOps<LLVM::LLVMFuncOp>()) {
      if (f->removeAttr("llvm.no_inline"))
        f.setNoInline(true);
      if (f->removeAttr("llvm.optsize"))
        f.setPassthroughAttr(ArrayAttr::get(&getContext(), {StringAttr::get(&getContext(), "optsize")}));
    }
    // The ABI requires distinct, non-overlapping buffers (the runtime
    // allocates every output itself), so LLVM may assume no aliasing.
    for (unsigned i = 0; i < model.getNumArguments(); ++i)
      model.setArgAttr(i, LLVM::LLVMDialect::getNoAliasAttrName(), UnitAttr::get(&getContext()));

    OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
    Location loc = model.getLoc();
    auto fnType = LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(&getContext()), {ptr});
    auto entry = LLVM::LLVMFuncOp::create(b, loc, entryName, fnType);
    Block *body = entry.addEntryBlock(b);
    b.setInsertionPointToStart(body);
    SmallVector<Value> args;
    for (unsigned i = 0; i < model.getNumArguments(); ++i) {
      Value slot = LLVM::GEPOp::create(b, loc, ptr, ptr, body->getArgument(0),
                                       ArrayRef<LLVM::GEPArg>{(int32_t)i});
      args.push_back(LLVM::LoadOp::create(b, loc, ptr, slot));
    }
    LLVM::CallOp::create(b, loc, model, args);
    LLVM::ReturnOp::create(b, loc, ValueRange{});
    markEntryGlue(model);
    markEntryGlue(entry);

    // Object files carry the workspace size next to the entry point, for
    // callers that link them without the JIT's descriptor.
    int64_t workspace = 0;
    if (auto ws = module->getAttrOfType<IntegerAttr>("kiln.workspace_size"))
      workspace = ws.getInt();
    b.setInsertionPointToEnd(module.getBody());
    auto i64 = IntegerType::get(&getContext(), 64);
    LLVM::GlobalOp::create(b, loc, i64, /*isConstant=*/true, LLVM::Linkage::External,
                           entryName + "_workspace_size", b.getI64IntegerAttr(workspace));

    // Dims known only at run time (kiln-runtime-dims-arguments): their
    // number, and `int64_t NAME_dims(int64_t *dims)`, which checks the
    // inputs' and computes the outputs'.
    if (auto n = module->getAttrOfType<IntegerAttr>("kiln.runtime_dims")) {
      LLVM::GlobalOp::create(b, loc, i64, /*isConstant=*/true, LLVM::Linkage::External,
                             entryName + "_num_dims", b.getI64IntegerAttr(n.getInt()));
      auto dimsFn = module.lookupSymbol<LLVM::LLVMFuncOp>(modelFunction + "_dims");
      if (!dimsFn) {
        module.emitError() << "no lowered function '" << modelFunction << "_dims'";
        return signalPassFailure();
      }
      dimsFn.setLinkage(LLVM::Linkage::Internal);
      auto wrapper = LLVM::LLVMFuncOp::create(b, loc, entryName + "_dims",
                                              LLVM::LLVMFunctionType::get(i64, {ptr}));
      Block *wb = wrapper.addEntryBlock(b);
      b.setInsertionPointToStart(wb);
      Value r = LLVM::CallOp::create(b, loc, dimsFn, ValueRange{wb->getArgument(0)}).getResult();
      LLVM::ReturnOp::create(b, loc, r);
      markEntryGlue(dimsFn);
      markEntryGlue(wrapper);
    }
  }
};

} // namespace
} // namespace kiln
