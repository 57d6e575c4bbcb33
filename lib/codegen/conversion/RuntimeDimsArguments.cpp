// kiln-runtime-dims-arguments: the sizes of buffers whose dims are known
// only at run time reach the model function in one i64 array, and a
// generated MODEL_dims function computes the outputs' (see the pass
// description in Passes.td).
#include "kiln/Conversion/DenseBuffers.h"
#include "kiln/Conversion/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"

namespace kiln {
#define GEN_PASS_DEF_KILNRUNTIMEDIMSARGUMENTS
#include "kiln/Conversion/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace kiln {
namespace {

bool hasRuntimeDims(Type t) {
  auto m = dyn_cast<MemRefType>(t);
  return m && !m.hasStaticShape();
}

struct RuntimeDimsArgumentsPass
    : impl::KilnRuntimeDimsArgumentsBase<RuntimeDimsArgumentsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto func = module.lookupSymbol<func::FuncOp>(modelFunction);
    if (!func || func.isExternal() || !llvm::any_of(func.getArgumentTypes(), hasRuntimeDims))
      return;
    MLIRContext *ctx = &getContext();
    Location loc = func.getLoc();
    Type i64 = IntegerType::get(ctx, 64);
    for (Type t : func.getArgumentTypes())
      originalTypes.push_back(dyn_cast<MemRefType>(t));
    // Each argument's first entry in the dims array.
    SmallVector<int64_t> first;
    int64_t total = 0;
    for (Type t : func.getArgumentTypes()) {
      first.push_back(total);
      if (hasRuntimeDims(t))
        total += cast<MemRefType>(t).getNumDynamicDims();
    }
    auto dimsType = MemRefType::get({total}, i64);
    Block &entry = func.getBody().front();
    BlockArgument dims = entry.addArgument(dimsType, loc);
    OpBuilder b = OpBuilder::atBlockBegin(&entry);
    auto load = [&](OpBuilder &b, Value array, int64_t i) -> Value {
      Value v = memref::LoadOp::create(b, loc, array,
                                       ValueRange{arith::ConstantIndexOp::create(b, loc, i)});
      return arith::IndexCastOp::create(b, loc, b.getIndexType(), v);
    };
    SmallVector<Type> argTypes(func.getArgumentTypes());
    for (BlockArgument arg : entry.getArguments().drop_back()) {
      if (!hasRuntimeDims(arg.getType()))
        continue;
      auto type = cast<MemRefType>(arg.getType());
      if (!type.getLayout().isIdentity()) {
        func.emitError() << "argument " << arg.getArgNumber() << " of type " << type
                         << " is not dense row-major";
        return signalPassFailure();
      }
      // Sizes from the array.
      SmallVector<OpFoldResult> sizes(type.getRank());
      for (int64_t i = 0, k = first[arg.getArgNumber()]; i < type.getRank(); ++i)
        sizes[i] = type.isDynamicDim(i) ? OpFoldResult(load(b, dims, k++))
                                        : OpFoldResult(b.getIndexAttr(type.getDimSize(i)));
      auto flat = MemRefType::get({0}, type.getElementType(), AffineMap(), type.getMemorySpace());
      arg.setType(flat);
      argTypes[arg.getArgNumber()] = flat;
      Value whole = codegen::remakeDenseBuffer(b, loc, arg, type, sizes);
      arg.replaceAllUsesExcept(whole, whole.getDefiningOp());
    }
    argTypes.push_back(dimsType);
    func.setType(FunctionType::get(ctx, argTypes, func.getResultTypes()));
    module->setAttr("kiln.runtime_dims", b.getI64IntegerAttr(total));
    if (failed(emitDimsFunction(func, first, dimsType)))
      return signalPassFailure();
  }

  /// MODEL_dims(dims) -> i64: checks the inputs' shared symbols, writes the
  /// outputs' dims.
  LogicalResult emitDimsFunction(func::FuncOp func, ArrayRef<int64_t> first,
                                 MemRefType dimsType) {
    MLIRContext *ctx = &getContext();
    Location loc = func.getLoc();
    auto sources = func->getAttrOfType<ArrayAttr>("kiln.runtime_symbols");
    if (!sources)
      return func.emitError("dims known only at run time without kiln.runtime_symbols");
    OpBuilder top = OpBuilder::atBlockEnd(getOperation().getBody());
    Type i64 = IntegerType::get(ctx, 64);
    auto fn = func::FuncOp::create(top, loc, modelFunction + "_dims",
                                   FunctionType::get(ctx, {dimsType}, {i64}));
    Block *body = fn.addEntryBlock();
    OpBuilder b = OpBuilder::atBlockBegin(body);
    Value dims = body->getArgument(0);
    // The array entry of dim `d` (a dynamic one) of argument `arg`.
    auto entryOf = [&](unsigned arg, int64_t d) -> int64_t {
      int64_t k = first[arg];
      auto t = originalTypes[arg];
      for (int64_t i = 0; i < d; ++i)
        if (t.isDynamicDim(i))
          ++k;
      return k;
    };
    auto load = [&](int64_t i) -> Value {
      return memref::LoadOp::create(b, loc, dims,
                                    ValueRange{arith::ConstantIndexOp::create(b, loc, i)});
    };
    SmallVector<Value> symbols;
    for (Attribute a : sources) {
      auto pair = cast<DenseI64ArrayAttr>(a).asArrayRef();
      if (pair[0] < 0 || pair[0] >= (int64_t)originalTypes.size())
        return func.emitError("a symbol read from no input");
      symbols.push_back(load(entryOf(pair[0], pair[1])));
    }
    // Every other input dim of a symbol must equal it.
    // The code returned: 0, or the first failed check's `code`.
    Value bad = arith::ConstantIntOp::create(b, loc, 0, 64);
    auto failIf = [&](Value failed, int64_t code) {
      Value isFirst = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, bad,
                                            arith::ConstantIntOp::create(b, loc, 0, 64));
      bad = arith::SelectOp::create(b, loc, arith::AndIOp::create(b, loc, failed, isFirst),
                                    arith::ConstantIntOp::create(b, loc, code, 64), bad);
    };
    auto symbolNames = func->getAttrOfType<ArrayAttr>("kiln.runtime_symbol_names");
    for (unsigned arg = 0; arg < originalTypes.size(); ++arg) {
      auto names = func.getArgAttrOfType<ArrayAttr>(arg, "kiln.dim_names");
      MemRefType t = originalTypes[arg];
      if (!names || !t)
        continue;
      for (int64_t d = 0; d < t.getRank(); ++d) {
        if (!t.isDynamicDim(d))
          continue;
        for (auto [s, a] : llvm::enumerate(sources)) {
          auto pair = cast<DenseI64ArrayAttr>(a).asArrayRef();
          if (pair[0] == arg && pair[1] == d)
            continue; // the symbol's own source
          auto dname = d < (int64_t)names.size() ? dyn_cast<StringAttr>(names[d]) : StringAttr();
          if (!symbolNames || !dname || dname.getValue().empty() ||
              cast<StringAttr>(symbolNames[s]).getValue() != dname.getValue())
            continue;
          int64_t k = entryOf(arg, d);
          Value differ = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, load(k),
                                               symbols[s]);
          failIf(differ, k + 1);
        }
      }
    }
    SmallVector<Value> indexSymbols;
    for (Value s : symbols)
      indexSymbols.push_back(arith::IndexCastOp::create(b, loc, b.getIndexType(), s));
    // Sizes inside the model that must be at least `least` (each entry of
    // the function's array attribute `name` an expression over the
    // symbols): `code` where one is not and nothing failed before.
    auto checkAtLeast = [&](StringRef name, int64_t least, int64_t code) -> LogicalResult {
      auto checks = func->getAttrOfType<ArrayAttr>(name);
      if (!checks)
        return success();
      Value bound = arith::ConstantIndexOp::create(b, loc, least);
      for (Attribute a : checks) {
        auto map = dyn_cast<AffineMapAttr>(a);
        if (!map || map.getValue().getNumResults() != 1 ||
            map.getValue().getNumSymbols() != indexSymbols.size())
          return func.emitError("a malformed ") << name << " entry";
        Value v = affine::AffineApplyOp::create(b, loc, map.getValue(), indexSymbols);
        failIf(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, v, bound), code);
      }
      return success();
    };
    // kiln.dim_checks: windows that must fit their padded input (sizes of
    // at least 1), -2; kiln.slice_checks: what Slices whose bounds follow
    // from the input dims assumed (start <= end <= the dim), -3.
    if (failed(checkAtLeast("kiln.dim_checks", 1, -2)) ||
        failed(checkAtLeast("kiln.slice_checks", 0, -3)))
      return failure();
    // The outputs' dims.
    for (unsigned arg = 0; arg < originalTypes.size(); ++arg) {
      auto map = func.getArgAttrOfType<AffineMapAttr>(arg, "kiln.dim_map");
      MemRefType t = originalTypes[arg];
      if (!map || !t)
        continue;
      if ((int64_t)map.getValue().getNumResults() != t.getRank())
        return func.emitError("an output's kiln.dim_map does not match its rank");
      for (int64_t d = 0; d < t.getRank(); ++d) {
        if (!t.isDynamicDim(d))
          continue;
        Value v = affine::AffineApplyOp::create(b, loc, map.getValue().getSubMap({(unsigned)d}),
                                                indexSymbols);
        memref::StoreOp::create(b, loc, arith::IndexCastOp::create(b, loc, i64, v), dims,
                                ValueRange{arith::ConstantIndexOp::create(b, loc, entryOf(arg, d))});
      }
    }
    func::ReturnOp::create(b, loc, bad);
    return success();
  }

  SmallVector<MemRefType> originalTypes;
};

} // namespace
} // namespace kiln
