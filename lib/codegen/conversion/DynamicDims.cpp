// Run-time dims during kiln-lower-to-linalg (DynamicDims.h, LoweringUtils.h).
#include "DynamicDims.h"
#include "LoweringUtils.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"

using namespace mlir;

namespace kiln::codegen {

namespace {
// The function being lowered: patterns are built without state and run one
// function at a time on the pass's thread, so the lowering makes its
// DynamicDims current for the duration (DynamicDims::Scope).
thread_local DynamicDims *current = nullptr;
} // namespace

DynamicDims::DynamicDims(func::FuncOp func)
    : func(func), dims(func, /*valueSymbols=*/true, /*assumeSliceBounds=*/true) {
  inputSymbols = dims.numSymbols(); // the analysis makes the inputs' first
  dims.visitAll(func);
  sources.assign(dims.numSymbols(), {~0u, -1});
  for (BlockArgument arg : func.getArguments()) {
    SymbolicDims::Exprs d = dims.dimsOf(arg);
    for (size_t k = 0; k < d.size(); ++k)
      if (auto s = dyn_cast_if_present<AffineSymbolExpr>(d[k]))
        if (sources[s.getPosition()].first == ~0u)
          sources[s.getPosition()] = {arg.getArgNumber(), (int64_t)k};
  }
}

DynamicDims::Scope::Scope(DynamicDims *d) : previous(current) { current = d; }
DynamicDims::Scope::~Scope() { current = previous; }

std::optional<SymbolicDims::Exprs> DynamicDims::exprsOf(Value v) const {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  if (!t)
    return std::nullopt;
  SymbolicDims::Exprs d = dims.dimsOf(v);
  if ((int64_t)d.size() != t.getRank())
    return std::nullopt;
  for (int64_t i = 0; i < t.getRank(); ++i) {
    if (!t.isDynamicDim(i)) {
      d[i] = getAffineConstantExpr(t.getDimSize(i), v.getContext());
      continue;
    }
    if (!d[i])
      return std::nullopt;
    // A symbol that no input's dim gives (a fresh one, for a dim the
    // analysis could not relate to the inputs) has no value at run time,
    // unless it is read from a value.
    bool unread = false;
    d[i].walk([&](AffineExpr e) {
      if (auto s = dyn_cast<AffineSymbolExpr>(e))
        unread |= s.getPosition() >= sources.size() ||
                  (sources[s.getPosition()].first == ~0u &&
                   !dims.valueSourceOf(s.getPosition()));
    });
    if (unread)
      return std::nullopt;
  }
  return d;
}

Value DynamicDims::symbolValue(size_t i) {
  symbolValues.resize(sources.size());
  if (symbolValues[i])
    return symbolValues[i];
  if (sources[i].first != ~0u) {
    // The inputs' dims, each read once at the entry from the first input
    // that has it (all of them at once, in order).
    OpBuilder entry = OpBuilder::atBlockBegin(&func.getBody().front());
    for (auto [j, src] : llvm::enumerate(sources))
      if (src.first != ~0u && !symbolValues[j])
        symbolValues[j] =
            tensor::DimOp::create(entry, func.getLoc(), func.getArgument(src.first), src.second);
    return symbolValues[i];
  }
  const SymbolicDims::ValueSource *src = dims.valueSourceOf(i);
  if (!src)
    return Value();
  // Read right where the tensor is defined, which dominates every op whose
  // dims use it (they are computed from it). A negative number there would
  // be a negative size: ONNX makes that an empty Range (or an error).
  OpBuilder b(func.getContext());
  if (Operation *def = src->tensor.getDefiningOp())
    b.setInsertionPointAfter(def);
  else
    b.setInsertionPointToStart(cast<BlockArgument>(src->tensor).getOwner());
  Location loc = src->tensor.getLoc();
  auto t = cast<RankedTensorType>(src->tensor.getType());
  SmallVector<Value> at;
  if (t.getRank() == 1)
    at.push_back(arith::ConstantIndexOp::create(b, loc, src->index));
  Value element = tensor::ExtractOp::create(b, loc, src->tensor, at);
  Value index = arith::IndexCastOp::create(b, loc, b.getIndexType(), element);
  return symbolValues[i] = arith::MaxSIOp::create(
             b, loc, index, arith::ConstantIndexOp::create(b, loc, 0));
}

Value DynamicDims::materialize(OpBuilder &b, Location loc, AffineExpr e) {
  if (auto c = dyn_cast<AffineConstantExpr>(e))
    return arith::ConstantIndexOp::create(b, loc, c.getValue());
  if (auto s = dyn_cast<AffineSymbolExpr>(e))
    return symbolValue(s.getPosition());
  // The expression's own symbols, the others as zeros (affine.apply takes
  // one operand per symbol of the map).
  SmallVector<Value> operands(sources.size());
  e.walk([&](AffineExpr x) {
    if (auto s = dyn_cast<AffineSymbolExpr>(x))
      operands[s.getPosition()] = symbolValue(s.getPosition());
  });
  Value zero;
  for (Value &v : operands)
    if (!v)
      v = zero ? zero : (zero = arith::ConstantIndexOp::create(b, loc, 0));
  auto map = AffineMap::get(0, operands.size(), e);
  return affine::AffineApplyOp::create(b, loc, map, operands);
}

SmallVector<Value> dynamicSizes(OpBuilder &b, Location loc, Value original) {
  auto t = cast<RankedTensorType>(original.getType());
  SmallVector<Value> sizes;
  if (t.hasStaticShape())
    return sizes;
  assert(current && "dynamic dims outside a function with run-time dims");
  auto exprs = current->exprsOf(original);
  assert(exprs && "hasRuntimeDims said no");
  for (int64_t i = 0; i < t.getRank(); ++i)
    if (t.isDynamicDim(i))
      sizes.push_back(current->materialize(b, loc, (*exprs)[i]));
  return sizes;
}

Value runtimeDim(OpBuilder &b, Location loc, Value original, int64_t i) {
  auto t = cast<RankedTensorType>(original.getType());
  if (!t.isDynamicDim(i))
    return arith::ConstantIndexOp::create(b, loc, t.getDimSize(i));
  assert(current && "dynamic dims outside a function with run-time dims");
  auto exprs = current->exprsOf(original);
  assert(exprs && "hasRuntimeDims said no");
  return current->materialize(b, loc, (*exprs)[i]);
}

bool hasSliceAssumptions(mlir::Operation *op) {
  return current && current->symbolic().hasAssumptions(op);
}

bool hasRuntimeDims(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  if (!t || t.hasStaticShape())
    return (bool)t;
  return current && current->exprsOf(v).has_value();
}

bool sameDims(Value a, Value b, size_t n) {
  if (!current)
    return false;
  auto ea = current->exprsOf(a), eb = current->exprsOf(b);
  if (!ea || !eb || ea->size() < n || eb->size() < n)
    return false;
  for (size_t i = 0; i < n; ++i)
    if ((*ea)[i] != (*eb)[i])
      return false;
  return true;
}

bool sameDim(Value a, int64_t i, Value b, int64_t j) {
  if (!current)
    return false;
  auto ea = current->exprsOf(a), eb = current->exprsOf(b);
  return ea && eb && i < (int64_t)ea->size() && j < (int64_t)eb->size() && (*ea)[i] == (*eb)[j];
}

Value dimSize(OpBuilder &b, Location loc, Value tensor, int64_t i) {
  auto t = cast<RankedTensorType>(tensor.getType());
  if (!t.isDynamicDim(i))
    return arith::ConstantIndexOp::create(b, loc, t.getDimSize(i));
  return tensor::DimOp::create(b, loc, tensor, i);
}

SmallVector<Value> dimSizes(OpBuilder &b, Location loc, Value tensor) {
  SmallVector<Value> out;
  for (int64_t i = 0; i < cast<RankedTensorType>(tensor.getType()).getRank(); ++i)
    out.push_back(dimSize(b, loc, tensor, i));
  return out;
}

SmallVector<Value> dynamicOnly(RankedTensorType type, ValueRange sizes) {
  SmallVector<Value> out;
  for (int64_t i = 0; i < type.getRank(); ++i)
    if (type.isDynamicDim(i))
      out.push_back(sizes[i]);
  return out;
}

} // namespace kiln::codegen
