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

DynamicDims::DynamicDims(func::FuncOp func) : func(func), dims(func) {
  if (!func.getBody().empty())
    for (Operation &op : func.getBody().front())
      dims.visit(&op);
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
    // analysis could not relate to the inputs) has no value at run time.
    bool unread = false;
    d[i].walk([&](AffineExpr e) {
      if (auto s = dyn_cast<AffineSymbolExpr>(e))
        unread |= s.getPosition() >= sources.size() || sources[s.getPosition()].first == ~0u;
    });
    if (unread)
      return std::nullopt;
  }
  return d;
}

Value DynamicDims::materialize(OpBuilder &b, Location loc, AffineExpr e) {
  if (auto c = dyn_cast<AffineConstantExpr>(e))
    return arith::ConstantIndexOp::create(b, loc, c.getValue());
  if (symbolValues.empty()) {
    // Every symbol's value, read once at the entry from the first input
    // that has it.
    OpBuilder entry = OpBuilder::atBlockBegin(&func.getBody().front());
    for (auto [arg, k] : sources)
      symbolValues.push_back(
          arg == ~0u ? Value()
                     : (Value)tensor::DimOp::create(entry, func.getLoc(),
                                                    func.getArgument(arg), k));
  }
  if (auto s = dyn_cast<AffineSymbolExpr>(e))
    return symbolValues[s.getPosition()];
  auto map = AffineMap::get(0, symbolValues.size(), e);
  return affine::AffineApplyOp::create(b, loc, map, symbolValues);
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
