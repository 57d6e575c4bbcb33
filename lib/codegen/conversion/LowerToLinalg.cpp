// The kiln-lower-to-linalg pass: checks that every value has a supported
// element type and a static shape, or dims known only at run time that its
// op's lowering takes (with an error naming the op, and so the ONNX node),
// then applies the lowering patterns as a partial conversion.
#include "kiln/Conversion/KernelCalls.h"
#include "DynamicDims.h"
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

/// `runtimeDims`: the op's lowering takes `type`'s dynamic dims, which are
/// known as expressions of the inputs' dims.
LogicalResult checkCodegenType(Operation *op, Type type, StringRef what,
                               bool runtimeDims = false) {
  auto t = dyn_cast<RankedTensorType>(type);
  if (!t)
    return op->emitError() << what << " has unknown rank; give concrete input shapes";
  if (!t.hasStaticShape() && !runtimeDims)
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

/// `e` at symbol values `symbols` (none for a symbol past them, an
/// overflow or a division by zero).
std::optional<int64_t> evaluate(AffineExpr e, ArrayRef<int64_t> symbols) {
  if (auto c = dyn_cast<AffineConstantExpr>(e))
    return c.getValue();
  if (auto s = dyn_cast<AffineSymbolExpr>(e)) {
    if (s.getPosition() >= symbols.size())
      return std::nullopt;
    return symbols[s.getPosition()];
  }
  auto bin = dyn_cast<AffineBinaryOpExpr>(e);
  if (!bin)
    return std::nullopt;
  auto l = evaluate(bin.getLHS(), symbols), r = evaluate(bin.getRHS(), symbols);
  if (!l || !r)
    return std::nullopt;
  int64_t out;
  switch (bin.getKind()) {
  case AffineExprKind::Add:
    if (llvm::AddOverflow(*l, *r, out))
      return std::nullopt;
    return out;
  case AffineExprKind::Mul:
    if (llvm::MulOverflow(*l, *r, out))
      return std::nullopt;
    return out;
  case AffineExprKind::FloorDiv:
    return *r == 0 ? std::nullopt : std::optional(llvm::divideFloorSigned(*l, *r));
  case AffineExprKind::CeilDiv:
    return *r == 0 ? std::nullopt : std::optional(llvm::divideCeilSigned(*l, *r));
  case AffineExprKind::Mod:
    return *r <= 0 ? std::nullopt : std::optional(llvm::mod(*l, *r));
  default:
    return std::nullopt;
  }
}

/// Whether a reshape-like op keeps its element count for every value of
/// the run-time dims. The element counts of its operand and result are
/// polynomials in the symbols (with a floordiv where ONNX's -1 divides the
/// input's count by the other dims); they must agree at every one of
/// several assignments of the symbols. A -1 that does not divide for some
/// shapes (an [n, 256] input reshaped to [-1, 7]), or a target taken from
/// another input's dims, makes them differ: such a reshape is left to code
/// specialised to each shape, where a bad shape is an error naming the
/// node, rather than run-time code that would silently round the count
/// down (or read past its input).
bool keepsElementCount(Operation *op, const codegen::DynamicDims &dd) {
  Value in = op->getOperand(0), out = op->getResult(0);
  auto inExprs = dd.exprsOf(in), outExprs = dd.exprsOf(out);
  if (!inExprs || !outExprs)
    return false;
  // A dim without an expression is a static one.
  auto count = [](Value v, const SymbolicDims::Exprs &exprs,
                  ArrayRef<int64_t> symbols) -> std::optional<int64_t> {
    auto type = cast<RankedTensorType>(v.getType());
    int64_t n = 1;
    for (int64_t d = 0; d < type.getRank(); ++d) {
      std::optional<int64_t> size;
      if (!type.isDynamicDim(d))
        size = type.getDimSize(d);
      else if (d < (int64_t)exprs.size() && exprs[d])
        size = evaluate(exprs[d], symbols);
      if (!size || llvm::MulOverflow(n, *size, n))
        return std::nullopt;
    }
    return n;
  };
  static const int64_t kAssignments[][8] = {{1, 1, 1, 1, 1, 1, 1, 1},
                                            {2, 2, 2, 2, 2, 2, 2, 2},
                                            {3, 5, 7, 11, 13, 17, 19, 23},
                                            {29, 31, 37, 41, 43, 47, 53, 59},
                                            {97, 89, 83, 79, 73, 71, 67, 61},
                                            {1, 2, 3, 4, 5, 6, 7, 8}};
  size_t numSymbols = dd.symbolic().numSymbols();
  int compared = 0;
  for (const auto &row : kAssignments) {
    SmallVector<int64_t> symbols;
    for (size_t i = 0; i < numSymbols; ++i)
      symbols.push_back(row[i % 8] + (int64_t)(i / 8)); // distinct past 8 symbols
    auto a = count(in, *inExprs, symbols), b = count(out, *outExprs, symbols);
    if (!a || !b)
      continue; // an overflow at large values: the other assignments decide
    if (*a != *b)
      return false;
    ++compared;
  }
  return compared >= 3;
}

/// Whether the lowering of `op` takes dims known only at run time (each of
/// its values' dims must also have an expression: hasRuntimeDims).
bool takesRuntimeDims(Operation *op, bool useKernels, const codegen::DynamicDims &dd) {
  if (isa<ReshapeOp, SqueezeOp, UnsqueezeOp, FlattenOp>(op))
    return keepsElementCount(op, dd);
  if (isa<TransposeOp, ReduceSumOp, ReduceMaxOp, ReduceMinOp, ReduceProdOp, ReduceMeanOp,
          ArgMaxOp>(op))
    return true;
  if (isa<RangeOp, ConstantOfShapeOp>(op))
    return true;
  if (auto c = dyn_cast<ConcatOp>(op)) {
    // Every input has the result's dims but along the axis (the same
    // expressions), so no part is written out of place.
    auto result = dd.exprsOf(c.getResult());
    if (!result)
      return false;
    int64_t rank = result->size(), axis = c.getAxis() < 0 ? c.getAxis() + rank : c.getAxis();
    for (Value in : c.getInputs()) {
      auto e = dd.exprsOf(in);
      if (!e || (int64_t)e->size() != rank)
        return false;
      for (int64_t i = 0; i < rank; ++i)
        if (i != axis && (*e)[i] != (*result)[i])
          return false;
    }
    return true;
  }
  if (isa<GatherOp>(op)) // indices wrap and clamp against the gathered dim's size
    return true;
  if (isa<MatMulOp>(op))
    return useKernels && codegen::dynamicMatMulSupported(op);
  if (isa<Conv2DNhwcOp>(op))
    return useKernels && codegen::dynamicConvSupported(op);
  if (isa<MaxPoolOp, AvgPoolOp>(op))
    return useKernels && codegen::dynamicPoolSupported(op);
  if (isa<SoftmaxOp, LayerNormOp>(op))
    return useKernels && cast<RankedTensorType>(op->getResult(0).getType()).getElementType().isF32();
  if (auto sl = dyn_cast<SliceOp>(op)) {
    // Along static dims, with constant bounds and positive steps, or with
    // bounds that follow from the input dims and unit steps (`pos[:seq]`,
    // whose size assumes the bounds fit: SymbolicDims::assumptions); along
    // a dim known only at run time, with unit steps and a size the analysis
    // knows (x[:, 1:], x[:, -1:]: lowerRuntimeSlice reads the dim).
    auto inT = cast<RankedTensorType>(sl.getInput().getType());
    auto axes = getConstantInts(sl.getAxes()), steps = getConstantInts(sl.getSteps());
    if (!axes || !steps)
      return false;
    bool constantBounds = getConstantInts(sl.getStarts()) && getConstantInts(sl.getEnds());
    auto result = dd.exprsOf(sl.getResult());
    bool dynamicAxis = llvm::any_of(*axes, [&](int64_t a) {
      return inT.isDynamicDim(a < 0 ? a + inT.getRank() : a);
    });
    for (auto [a, st] : llvm::zip(*axes, *steps)) {
      int64_t ax = a < 0 ? a + inT.getRank() : a;
      if (st <= 0 || ((!constantBounds || dynamicAxis) && st != 1))
        return false;
      if (inT.isDynamicDim(ax) && (st != 1 || !constantBounds || !result ||
                                   ax >= (int64_t)result->size() || !(*result)[ax]))
        return false;
    }
    return true;
  }
  bool expand = isa<ExpandOp>(op);
  if (expand || codegen::isElementwiseOp(op)) {
    // Broadcasting decided at compile time: an operand's dynamic dim is the
    // result's (the same expression); a static 1 broadcasts. Expand is an
    // elementwise copy of its input to its result's dims (the target shape,
    // its second operand, only sized the result).
    auto result = dd.exprsOf(op->getResult(0));
    if (!result)
      return false;
    for (Value v : expand ? op->getOperands().take_front() : op->getOperands()) {
      auto t = cast<RankedTensorType>(v.getType());
      auto e = dd.exprsOf(v);
      if (!e)
        return false;
      int64_t offset = result->size() - t.getRank();
      for (int64_t i = 0; i < t.getRank(); ++i) {
        bool broadcastOne = !t.isDynamicDim(i) && t.getDimSize(i) == 1;
        if (!broadcastOne && (*e)[i] != (*result)[offset + i])
          return false;
      }
    }
    return true;
  }
  return false;
}

/// Small integer tensors that hold shapes (Shape, Gather of it, Concat of
/// dims...) whose values kiln-symbolic-dims knows as expressions of the
/// inputs' dims: built from those values, so that the shape arithmetic,
/// which has no lowering for dims known only at run time, is dead. Reshape
/// takes its target from its result's dims anyway.
void materializeShapeValues(func::FuncOp func, codegen::DynamicDims &dd) {
  SmallVector<Operation *> ops;
  func.walk([&](Operation *op) {
    if (isa<KilnDialect>(op->getDialect()) && !isa<ConstantOp>(op) && op->getNumResults() == 1)
      ops.push_back(op);
  });
  for (Operation *op : ops) {
    auto t = dyn_cast<RankedTensorType>(op->getResult(0).getType());
    if (!t || !t.hasStaticShape() || t.getRank() > 1 || !t.getElementType().isSignlessInteger())
      continue;
    auto held = dd.symbolic().contentsOf(op->getResult(0));
    if (!held || (int64_t)held->size() != t.getNumElements() ||
        llvm::any_of(*held, [](AffineExpr e) { return !e; }))
      continue;
    OpBuilder b(op);
    if (auto values = dd.symbolic().constantContents(op->getResult(0))) {
      // Constants that folding could not see (kiln-symbolic-dims makes
      // most of them constants already).
      op->getResult(0).replaceAllUsesWith(ConstantOp::create(b, op->getLoc(), t, *values));
      continue;
    }
    SmallVector<Value> elements;
    for (AffineExpr e : *held)
      elements.push_back(arith::IndexCastOp::create(b, op->getLoc(), t.getElementType(),
                                                    dd.materialize(b, op->getLoc(), e)));
    Value v = t.getRank() == 0
                  ? tensor::FromElementsOp::create(b, op->getLoc(), t, elements).getResult()
                  : tensor::FromElementsOp::create(b, op->getLoc(), elements).getResult();
    op->getResult(0).replaceAllUsesWith(v);
  }
  // What only fed shapes is dead now (kiln ops have no side effects unless
  // they say so).
  bool changed = true;
  while (changed) {
    changed = false;
    SmallVector<Operation *> dead;
    func.walk([&](Operation *op) {
      if (isa<KilnDialect>(op->getDialect()) && op->use_empty() && op->getNumRegions() == 0 &&
          !isa<LoopGuardOp, CallKernelOp>(op))
        dead.push_back(op);
    });
    for (Operation *op : dead) {
      op->erase();
      changed = true;
    }
  }
}

/// For kiln-runtime-dims-arguments: where each symbol is read
/// (`kiln.runtime_symbols`, [argument, dim] per symbol) and how each
/// result's dims follow from the symbols (`kiln.dim_map` on the result, an
/// affine map with no dims and one symbol per symbol).
void describeRuntimeDims(func::FuncOp func, const codegen::DynamicDims &dd) {
  Builder b(func.getContext());
  size_t n = dd.numInputSymbols(); // outputs sized from data are refused before
  SmallVector<Attribute> sources, names;
  for (size_t i = 0; i < n; ++i) {
    auto [arg, dim] = dd.sourceOf(i);
    sources.push_back(b.getDenseI64ArrayAttr({(int64_t)arg, dim}));
    names.push_back(b.getStringAttr(dd.symbolic().symbolName(i)));
  }
  func->setAttr("kiln.runtime_symbols", b.getArrayAttr(sources));
  func->setAttr("kiln.runtime_symbol_names", b.getArrayAttr(names));
  auto ret = cast<func::ReturnOp>(func.getBody().back().getTerminator());
  for (auto [i, v] : llvm::enumerate(ret.getOperands()))
    if (auto e = dd.exprsOf(v); e && !cast<RankedTensorType>(v.getType()).hasStaticShape())
      func.setResultAttr(i, "kiln.dim_map",
                         AffineMapAttr::get(AffineMap::get(0, n, *e, func.getContext())));
  // The spatial dims of convolutions and pools over sizes known only at
  // run time, each of which must be at least 1 (`kiln.dim_checks`, checked
  // by MODEL_dims before anything runs): an image smaller than a window
  // and its padding would give a size of 0 or less, which ONNX refuses and
  // the kernels and buffers must never see.
  SmallVector<Attribute> checks;
  llvm::SmallDenseSet<AffineExpr, 8> seen;
  func.walk([&](Operation *op) {
    if (!isa<ConvOp, Conv2DNhwcOp, MaxPoolOp, AvgPoolOp>(op))
      return;
    auto t = dyn_cast<RankedTensorType>(op->getResult(0).getType());
    auto e = dd.exprsOf(op->getResult(0)), in = dd.exprsOf(op->getOperand(0));
    if (!t || !e || !in || t.getRank() < 3 || (int64_t)e->size() != t.getRank() ||
        in->size() != e->size())
      return;
    bool nhwc = isa<Conv2DNhwcOp>(op) || op->hasAttr("channels_last");
    int64_t from = nhwc ? 1 : 2, to = nhwc ? t.getRank() - 1 : t.getRank();
    for (int64_t d = from; d < to; ++d) {
      AffineExpr x = (*e)[d];
      bool inputSymbolsOnly = true;
      x.walk([&](AffineExpr s) {
        if (auto sym = dyn_cast<AffineSymbolExpr>(s))
          inputSymbolsOnly &= sym.getPosition() < n;
      });
      // A size that is the input's (a 1x1 window, stride 1, no padding: a
      // matrix product over rows, which may be 0) cannot be too small.
      if (!t.isDynamicDim(d) || !x || isa<AffineConstantExpr>(x) || !inputSymbolsOnly ||
          x == (*in)[d] || !seen.insert(x).second)
        continue;
      checks.push_back(AffineMapAttr::get(AffineMap::get(0, n, x, func.getContext())));
    }
  });
  if (!checks.empty())
    func->setAttr("kiln.dim_checks", b.getArrayAttr(checks));
  // What the dims of Slices with bounds from the inputs' dims, or of dims
  // known only at run time, took for granted (SymbolicDims::assumptions:
  // 0 <= start <= end <= the dim sliced),
  // each an expression that must be at least 0 (`kiln.slice_checks`, also
  // checked by MODEL_dims before anything runs): inputs that break one
  // (a sequence longer than a positional table) are refused.
  SmallVector<Attribute> sliceChecks;
  llvm::SmallDenseSet<AffineExpr, 8> seenSlices;
  for (const SymbolicDims::Assumption &a : dd.symbolic().assumptions())
    if (seenSlices.insert(a.atLeastZero).second)
      sliceChecks.push_back(
          AffineMapAttr::get(AffineMap::get(0, n, a.atLeastZero, func.getContext())));
  if (!sliceChecks.empty())
    func->setAttr("kiln.slice_checks", b.getArrayAttr(sliceChecks));
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
    auto isDynamic = [](Type t) {
      auto r = dyn_cast<RankedTensorType>(t);
      return r && !r.hasStaticShape();
    };
    bool dynamic = llvm::any_of(func.getArgumentTypes(), isDynamic);
    // Dims computed from data (a loop body's Range to a box's size) give
    // ops of run-time dims in a function whose inputs are all static.
    bool valueDefined = !dynamic && func.walk([&](Operation *op) {
                                       return isa<KilnDialect>(op->getDialect()) &&
                                                      llvm::any_of(op->getResultTypes(),
                                                                   isDynamic)
                                                  ? WalkResult::interrupt()
                                                  : WalkResult::advance();
                                     }).wasInterrupted();
    std::optional<codegen::DynamicDims> dd;
    std::optional<codegen::DynamicDims::Scope> scope;
    if (dynamic || valueDefined) {
      dd.emplace(func);
      scope.emplace(&*dd);
      materializeShapeValues(func, *dd);
    }
    auto runtimeDims = [&](Operation *op) {
      if (!dd || !takesRuntimeDims(op, useKernels, *dd))
        return false;
      auto known = [](Value v) { return codegen::hasRuntimeDims(v); };
      return llvm::all_of(op->getOperands(), known) && llvm::all_of(op->getResults(), known);
    };
    bool ok = true;
    func.walk([&](Operation *op) {
      if (!isa<KilnDialect>(op->getDialect()) || isa<LoopGuardOp>(op))
        return;
      bool rt = runtimeDims(op);
      for (Value v : op->getOperands())
        ok &= succeeded(checkCodegenType(op, v.getType(), "an operand", rt));
      for (Value v : op->getResults())
        ok &= succeeded(checkCodegenType(op, v.getType(), "the result", rt));
    });
    for (BlockArgument arg : func.getArguments())
      ok &= succeeded(
          checkCodegenType(func, arg.getType(), "a model input", dd && codegen::hasRuntimeDims(arg)));
    // A returned value no kiln op produced (an If's joined result) is
    // checked at the op that made it, so the error names its node.
    func.walk([&](func::ReturnOp ret) {
      for (Value v : ret.getOperands()) {
        Operation *where = v.getDefiningOp();
        if (where && !isa<KilnDialect>(where->getDialect()))
          ok &= succeeded(checkCodegenType(where, v.getType(), "a model output"));
        else if (!where && dd) // an input returned as it is
          ok &= succeeded(checkCodegenType(func, v.getType(), "a model output",
                                           codegen::hasRuntimeDims(v)));
      }
    });
    // An output whose size is computed from data has no place in the
    // runtime's dims array (which the inputs' dims size).
    if (dd)
      func.walk([&](func::ReturnOp ret) {
        for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
          auto e = dd->exprsOf(v);
          bool fromData = false;
          for (AffineExpr x : e ? *e : SymbolicDims::Exprs())
            x.walk([&](AffineExpr s) {
              if (auto sym = dyn_cast<AffineSymbolExpr>(s))
                fromData |= sym.getPosition() >= dd->numInputSymbols();
            });
          if (fromData) {
            Operation *where = v.getDefiningOp();
            (where ? where : func.getOperation())->emitError()
                << "model output " << i << " has dims computed from data at run time ("
                << v.getType() << "); Kiln sizes outputs from the inputs' dims only";
            ok = false;
          }
        }
      });
    if (!ok)
      return failure();
    if (dynamic)
      describeRuntimeDims(func, *dd);
    replaceEmptyResults(func);

    if (useKernels) {
      RewritePatternSet fused(&getContext());
      codegen::populateFusedKernelPatterns(fused);
      // An optimisation: whatever it leaves is lowered op by op below.
      (void)applyPatternsGreedily(func, std::move(fused));
      // The greedy driver erases dead ops, among them a symbol's
      // `tensor.dim` at the entry that nothing used yet.
      if (dd)
        dd->forgetMaterialized();
    }

    if (dd)
      dd->materializeValueSymbols();
    codegen::markNanFreeClamps(func);
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
