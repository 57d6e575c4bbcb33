// The kiln-lower-to-linalg pass: checks that every value has a static shape
// and a supported element type (with an error naming the op, and so the ONNX
// node), then applies the lowering patterns as a partial conversion.
#include "kiln/Conversion/KernelCalls.h"
#include "LoweringUtils.h"
#include "kiln/Conversion/Passes.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Transforms/DialectConversion.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace kiln {
#define GEN_PASS_DEF_KILNLOWERTOLINALG
#include "kiln/Conversion/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace kiln {
namespace {

LogicalResult checkCodegenType(Operation *op, Type type, StringRef what) {
  auto t = dyn_cast<RankedTensorType>(type);
  if (!t)
    return op->emitError() << what << " has unknown rank; give concrete input shapes";
  if (!t.hasStaticShape())
    return op->emitError() << what << " has dynamic shape " << t
                           << "; give concrete input shapes";
  Type elt = t.getElementType();
  if (!elt.isIntOrFloat())
    return op->emitError() << what << " has unsupported element type " << elt;
  return success();
}

Type signlessOf(Type t) {
  if (auto it = dyn_cast<IntegerType>(t); it && !it.isSignless())
    return IntegerType::get(t.getContext(), it.getWidth());
  if (auto st = dyn_cast<RankedTensorType>(t))
    return st.clone(signlessOf(st.getElementType()));
  return t;
}

/// Once the patterns have chosen unsigned arith ops where signedness
/// matters, unsigned integer types have done their job: the rest of the
/// pipeline (arith, bufferization, LLVM) wants signless integers. Retypes
/// every value, constant and the signature, and drops the bitcasts that the
/// patterns used as the bridge.
void eraseSignedness(func::FuncOp func) {
  func.walk([](Operation *op) {
    for (Region &region : op->getRegions())
      for (Block &block : region)
        for (BlockArgument arg : block.getArguments())
          arg.setType(signlessOf(arg.getType()));
    for (OpResult r : op->getResults())
      r.setType(signlessOf(r.getType()));
    if (auto c = dyn_cast<arith::ConstantOp>(op))
      if (auto dense = dyn_cast<DenseElementsAttr>(c.getValue());
          dense && signlessOf(dense.getElementType()) != dense.getElementType())
        c.setValueAttr(dense.bitcast(signlessOf(dense.getElementType())));
  });
  func.walk([](tensor::BitcastOp cast) {
    if (cast.getSource().getType() == cast.getType()) {
      cast.replaceAllUsesWith(cast.getSource());
      cast.erase();
    }
  });
  SmallVector<Type> args, results;
  for (Type t : func.getArgumentTypes())
    args.push_back(signlessOf(t));
  for (Type t : func.getResultTypes())
    results.push_back(signlessOf(t));
  func.setType(FunctionType::get(func.getContext(), args, results));
}

/// kiln.loop_guard -> a call of the runtime's kiln_loop_guard(iteration,
/// node name), the name a NUL-terminated constant of the module.
struct LowerLoopGuard : OpRewritePattern<LoopGuardOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(LoopGuardOp op, PatternRewriter &rewriter) const override {
    auto module = op->getParentOfType<ModuleOp>();
    Location loc = op.getLoc();
    Type i64 = rewriter.getI64Type(), i32 = rewriter.getI32Type(), i8 = rewriter.getI8Type();
    constexpr StringLiteral kGuard = "kiln_loop_guard";
    if (!module.lookupSymbol(kGuard)) {
      OpBuilder top(module.getBodyRegion());
      auto f = func::FuncOp::create(top, loc, kGuard, top.getFunctionType({i64, i64}, {i32}));
      f.setPrivate();
    }
    std::string bytes = op.getNode().str();
    bytes.push_back('\0');
    auto type = MemRefType::get({(int64_t)bytes.size()}, i8);
    std::string name;
    for (unsigned k = 0; module.lookupSymbol(name = "kiln_loop_node_" + std::to_string(k)); ++k)
      ;
    {
      OpBuilder top(module.getBodyRegion());
      auto data = DenseElementsAttr::getFromRawBuffer(
          RankedTensorType::get(type.getShape(), i8), ArrayRef<char>(bytes.data(), bytes.size()));
      memref::GlobalOp::create(top, loc, name, top.getStringAttr("private"), type, data,
                               /*constant=*/true, /*alignment=*/nullptr);
    }
    Value global = memref::GetGlobalOp::create(rewriter, loc, type, name);
    Value address = arith::IndexCastOp::create(
        rewriter, loc, i64,
        memref::ExtractAlignedPointerAsIndexOp::create(rewriter, loc, global));
    Value answer =
        func::CallOp::create(rewriter, loc, kGuard, TypeRange{i32},
                             ValueRange{op.getIteration(), address})
            .getResult(0);
    Value zero = arith::ConstantIntOp::create(rewriter, loc, 0, 32);
    rewriter.replaceOpWithNewOp<arith::CmpIOp>(op, arith::CmpIPredicate::ne, answer, zero);
    return success();
  }
};

/// A kiln op whose results all have zero elements computes nothing: any
/// tensor of each result's type serves its users. Replacing such ops before
/// the patterns run spares every lowering, and the microkernels (which take
/// no empty shapes), the empty case: a softmax over an empty KV cache, a
/// MatMul of an empty batch, a Gather of no detections.
void replaceEmptyResults(func::FuncOp func) {
  auto isEmpty = [](Type t) {
    auto r = dyn_cast<RankedTensorType>(t);
    return r && r.hasStaticShape() && r.getNumElements() == 0;
  };
  SmallVector<Operation *> ops;
  func.walk([&](Operation *op) {
    if (isa<KilnDialect>(op->getDialect()) && !isa<ConstantOp, LoopGuardOp, CallKernelOp>(op) &&
        op->getNumResults() > 0 && llvm::all_of(op->getResultTypes(), isEmpty))
      ops.push_back(op);
  });
  for (Operation *op : ops) {
    OpBuilder b(op);
    SmallVector<Value> values;
    for (Type t : op->getResultTypes()) {
      auto r = cast<RankedTensorType>(t);
      values.push_back(tensor::EmptyOp::create(b, op->getLoc(), r.getShape(), r.getElementType()));
    }
    op->replaceAllUsesWith(values);
    op->erase();
  }
}

struct LowerToLinalgPass : impl::KilnLowerToLinalgBase<LowerToLinalgPass> {
  using KilnLowerToLinalgBase::KilnLowerToLinalgBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    codegen::declareKernelFunctions(module);
    for (auto func : llvm::to_vector(module.getOps<func::FuncOp>()))
      if (!func.isDeclaration() && failed(lowerFunction(func)))
        return signalPassFailure();
    // Keep only the kernel declarations that a call uses.
    for (auto func : llvm::to_vector(module.getOps<func::FuncOp>()))
      if (func.isDeclaration() && func.isPrivate() &&
          SymbolTable::symbolKnownUseEmpty(func, module))
        func.erase();
  }

  LogicalResult lowerFunction(func::FuncOp func) {
    bool ok = true;
    func.walk([&](Operation *op) {
      if (!isa<KilnDialect>(op->getDialect()) || isa<LoopGuardOp>(op))
        return;
      for (Value v : op->getOperands())
        ok &= succeeded(checkCodegenType(op, v.getType(), "an operand"));
      for (Value v : op->getResults())
        ok &= succeeded(checkCodegenType(op, v.getType(), "the result"));
    });
    for (BlockArgument arg : func.getArguments())
      ok &= succeeded(checkCodegenType(func, arg.getType(), "a model input"));
    // A returned value no kiln op produced (an If's joined result) is
    // checked at the op that made it, so the error names its node.
    func.walk([&](func::ReturnOp ret) {
      for (Value v : ret.getOperands()) {
        Operation *where = v.getDefiningOp();
        if (where && !isa<KilnDialect>(where->getDialect()))
          ok &= succeeded(checkCodegenType(where, v.getType(), "a model output"));
      }
    });
    if (!ok)
      return failure();
    replaceEmptyResults(func);

    if (useKernels) {
      RewritePatternSet fused(&getContext());
      codegen::populateFusedKernelPatterns(fused);
      // An optimisation: whatever it leaves is lowered op by op below.
      (void)applyPatternsGreedily(func, std::move(fused));
    }

    RewritePatternSet patterns(&getContext());
    if (useKernels)
      codegen::populateKernelLoweringPatterns(patterns);
    codegen::populateElementwiseLoweringPatterns(patterns);
    codegen::populateStructuredLoweringPatterns(patterns);
    codegen::populateDataMovementLoweringPatterns(patterns);
    codegen::populateScatterLoweringPatterns(patterns);
    patterns.add<LowerLoopGuard>(&getContext());
    ConversionTarget target(getContext());
    target.addIllegalDialect<KilnDialect>();
    target.addLegalOp<CallKernelOp>();
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    if (failed(applyPartialConversion(func, target, std::move(patterns))))
      return failure();
    eraseSignedness(func);
    // Model inputs belong to the caller: bufferization must never write into
    // them in place (a scatter would otherwise update the input buffer).
    for (unsigned i = 0; i < func.getNumArguments(); ++i)
      func.setArgAttr(i, bufferization::BufferizationDialect::kWritableAttrName,
                      BoolAttr::get(&getContext(), false));
    return success();
  }
};

} // namespace
} // namespace kiln
