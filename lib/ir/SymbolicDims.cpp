// Symbolic dimensions (include/kiln/IR/SymbolicDims.h): the transfer rules
// of shape arithmetic over affine expressions. Like onnx-mlir's DimAnalysis
// it proves dims equal; like IREE's dims as SSA values it keeps how a dim is
// computed (past + new). Expressions are MLIR's AffineExpr over symbols, so
// sums, products by constants and floor divisions simplify on their own
// (products of two symbols stay as semi-affine terms).
#include "kiln/IR/SymbolicDims.h"
#include "kiln/IR/KilnDialect.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/AffineExprVisitor.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/MathExtras.h"

#include <limits>

using namespace mlir;

namespace kiln {

/// Shape values longer than this are not tracked element by element.
constexpr int64_t kMaxContents = 64;

SymbolicDims::SymbolicDims(func::FuncOp func, bool valueSymbols, bool assumeSliceBounds)
    : ctx(func.getContext()), valueSymbols(valueSymbols), assumeSliceBounds(assumeSliceBounds) {
  for (BlockArgument arg : func.getArguments()) {
    auto t = dyn_cast<RankedTensorType>(arg.getType());
    if (!t)
      continue;
    auto named = func.getArgAttrOfType<ArrayAttr>(arg.getArgNumber(), kDimNamesAttr);
    auto argName = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "kiln.name");
    Exprs d;
    for (int64_t i = 0; i < t.getRank(); ++i) {
      if (!t.isDynamicDim(i)) {
        d.push_back(constant(t.getDimSize(i)));
        continue;
      }
      std::string name;
      if (named && i < (int64_t)named.size())
        if (auto s = dyn_cast<StringAttr>(named[i]))
          name = s.str();
      // An unnamed dim is its own symbol, named after where it is.
      if (name.empty())
        name = (argName ? argName.str() : "arg" + std::to_string(arg.getArgNumber())) + "." +
               std::to_string(i);
      d.push_back(symbolFor(name));
    }
    setDims(arg, d);
  }
}

void SymbolicDims::visitAll(func::FuncOp func) {
  func.walk<WalkOrder::PreOrder>([&](Operation *op) {
    if (op != func.getOperation())
      visit(op);
  });
}

AffineExpr SymbolicDims::symbolFor(const std::string &name) {
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name)
      return getAffineSymbolExpr(i, ctx);
  names.push_back(name);
  return getAffineSymbolExpr(names.size() - 1, ctx);
}

std::optional<SymbolicDims::Exprs> SymbolicDims::contentsOrValues(Value shape) {
  auto t = dyn_cast<RankedTensorType>(shape.getType());
  std::optional<Exprs> c = contentsOf(shape);
  if (!valueSymbols || !t || !t.getElementType().isSignlessInteger() || t.getRank() > 1 ||
      !t.hasStaticShape() || t.getNumElements() > kMaxContents)
    return c;
  if (!c)
    c = Exprs(t.getNumElements());
  for (auto [i, e] : llvm::enumerate(*c)) {
    if (e)
      continue;
    // One symbol per element of a value, however many ops read it.
    for (auto &[pos, src] : valueSources)
      if (src.tensor == shape && src.index == (int64_t)i)
        e = getAffineSymbolExpr(pos, ctx);
    if (e)
      continue;
    e = symbolFor("(value " + std::to_string(valueSources.size()) + ")");
    valueSources[cast<AffineSymbolExpr>(e).getPosition()] = {shape, (int64_t)i};
  }
  return c;
}

AffineExpr SymbolicDims::constant(int64_t c) const { return getAffineConstantExpr(c, ctx); }

static std::optional<int64_t> constantOf(AffineExpr e) {
  if (auto c = dyn_cast_if_present<AffineConstantExpr>(e))
    return c.getValue();
  return std::nullopt;
}

static AffineExpr quotientOfProducts(AffineExpr count, ArrayRef<AffineExpr> dims);
static AffineExpr divideExactly(AffineExpr e, int64_t c);

/// Whether `e` is never negative: symbols stand for dims (>= 0), and sums,
/// products and divisions of such by non-negative constants stay so.
/// A lower bound of `e` over every value of its symbols (dims, never
/// negative), where one follows from its form: a convolution's output size
/// (h - 1) floordiv 2 + 1 is at least 0 although h - 1 is not.
static std::optional<int64_t> lowerBound(AffineExpr e) {
  if (!e)
    return std::nullopt;
  if (auto c = constantOf(e))
    return *c;
  if (isa<AffineSymbolExpr>(e))
    return 0;
  auto b = dyn_cast<AffineBinaryOpExpr>(e);
  if (!b)
    return std::nullopt;
  if (b.getKind() == AffineExprKind::Mod)
    return 0;
  auto l = lowerBound(b.getLHS()), r = lowerBound(b.getRHS());
  if (!l || !r)
    return std::nullopt;
  auto c = constantOf(b.getRHS());
  switch (b.getKind()) {
  case AffineExprKind::Add:
    return *l + *r;
  case AffineExprKind::Mul:
    // By a positive constant, or two factors that are never negative.
    if (c && *c > 0)
      return *l * *c;
    if (*l >= 0 && *r >= 0)
      return *l * *r;
    return std::nullopt;
  case AffineExprKind::FloorDiv:
    if (c && *c > 0)
      return llvm::divideFloorSigned(*l, *c);
    return std::nullopt;
  case AffineExprKind::CeilDiv:
    if (c && *c > 0)
      return llvm::divideCeilSigned(*l, *c);
    return std::nullopt;
  default:
    return std::nullopt;
  }
}

static bool isNonNegative(AffineExpr e) {
  auto lb = lowerBound(e);
  return lb && *lb >= 0;
}

void SymbolicDims::setDims(Value v, Exprs d) { dims[v] = std::move(d); }

bool SymbolicDims::onlyInputSymbols(AffineExpr e) const {
  bool only = true;
  e.walk([&](AffineExpr x) {
    if (auto s = dyn_cast<AffineSymbolExpr>(x))
      only &= !valueSources.count(s.getPosition());
  });
  return only;
}

AffineExpr SymbolicDims::runtimeSliceSize(Operation *op, AffineExpr dim, AffineExpr start,
                                          AffineExpr end) {
  if (!start || !end || !dim)
    return {};
  std::optional<int64_t> fixed = constantOf(dim);
  if (!fixed && !onlyInputSymbols(dim))
    return {}; // assumptions are checked at entry, on the inputs' dims only
  SmallVector<AffineExpr, 3> needed;
  // A constant bound is ONNX's: from the end when negative, clamped to
  // [0, dim] (an end of INT64_MAX: to the end). A bound that follows from
  // the input dims must not be negative for any of them (ONNX would count
  // it from the end), and is assumed to lie within [0, dim]. Of a dim known
  // only at run time (x[:, 1:], x[:, -1:], x[:, :-1] along a sequence), a
  // negative constant counts from the end, dim + c, assumed at least 0; a
  // constant end of at least 2^31 - 1 (PyTorch writes INT64_MAX for "to the
  // end") is the dim, and one of at most -2^31 + 1 (INT64_MIN) is 0 (dims
  // stay below 2^31). A start of c >= 0 assumes c <= the end (below). Not
  // taken: a constant end 0 <= e < 2^31 - 1 (x[:, :512], a truncation),
  // which shorter inputs, the usual ones, would break at every run: such
  // slices still compile per shape.
  auto bound = [&](AffineExpr e, bool isEnd) -> AffineExpr {
    if (auto c = constantOf(e)) {
      if (fixed) {
        int64_t v = *c < 0 ? *c + *fixed : *c;
        return constant(std::clamp<int64_t>(v, 0, *fixed));
      }
      if (*c >= std::numeric_limits<int32_t>::max())
        return dim;
      if (*c <= -std::numeric_limits<int32_t>::max())
        return constant(0);
      if (*c < 0) {
        AffineExpr fromEnd = simplify(dim + *c);
        needed.push_back(fromEnd); // -c <= dim
        return fromEnd;
      }
      return isEnd ? AffineExpr() : e;
    }
    return isNonNegative(e) && onlyInputSymbols(e) ? e : AffineExpr();
  };
  AffineExpr s = bound(start, /*isEnd=*/false), e = bound(end, /*isEnd=*/true);
  if (!s || !e)
    return {};
  AffineExpr size = simplify(e - s);
  if (!constantOf(e) || !fixed)
    needed.push_back(simplify(dim - e)); // end <= dim
  if (!isNonNegative(size))
    needed.push_back(size); // start <= end
  for (AffineExpr x : needed)
    if (auto c = constantOf(x); c && *c < 0)
      return {}; // never holds: leave the size unknown
  for (AffineExpr x : needed)
    if (!constantOf(x) &&
        !llvm::any_of(assumed, [&](const Assumption &a) { return a.op == op && a.atLeastZero == x; }))
      assumed.push_back({op, x});
  return size;
}

SymbolicDims::Exprs SymbolicDims::typeDims(Value v) const {
  Exprs d;
  if (auto t = dyn_cast<RankedTensorType>(v.getType()))
    for (int64_t s : t.getShape())
      d.push_back(ShapedType::isDynamic(s) ? AffineExpr() : constant(s));
  return d;
}

SymbolicDims::Exprs SymbolicDims::dimsOf(Value v) const {
  auto it = dims.find(v);
  return it != dims.end() ? it->second : typeDims(v);
}

std::optional<SymbolicDims::Exprs> SymbolicDims::contentsOf(Value v) const {
  auto it = contents.find(v);
  if (it != contents.end())
    return it->second;
  auto t = dyn_cast<RankedTensorType>(v.getType());
  if (!t || !t.getElementType().isSignlessInteger() || t.getRank() > 1 ||
      !t.hasStaticShape() || t.getNumElements() > kMaxContents)
    return std::nullopt;
  if (auto values = getConstantInts(v)) {
    Exprs out;
    for (int64_t x : *values)
      out.push_back(constant(x));
    return out;
  }
  return std::nullopt;
}

std::optional<DenseIntElementsAttr> SymbolicDims::constantContents(Value v) const {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  if (!t || !t.hasStaticShape() || t.getRank() > 1 || !t.getElementType().isSignlessInteger())
    return std::nullopt;
  auto held = contentsOf(v);
  if (!held || (int64_t)held->size() != t.getNumElements() ||
      !llvm::all_of(*held, [](AffineExpr e) { return isa_and_present<AffineConstantExpr>(e); }))
    return std::nullopt;
  SmallVector<APInt> values;
  for (AffineExpr e : *held)
    values.push_back(APInt(t.getElementType().getIntOrFloatBitWidth(),
                           cast<AffineConstantExpr>(e).getValue(), /*isSigned=*/true));
  return DenseIntElementsAttr::get(t, values);
}

/// ONNX multidirectional broadcasting of dims, aligned at the end: a 1
/// takes the other side; two equal expressions (the same symbol) agree.
SymbolicDims::Exprs SymbolicDims::broadcast(ArrayRef<Exprs> operands, size_t rank) const {
  Exprs out(rank);
  for (size_t i = 0; i < rank; ++i) {
    AffineExpr acc;
    bool known = true, any = false;
    for (const Exprs &o : operands) {
      if (i + o.size() < rank)
        continue; // this operand has no such dim: a 1
      AffineExpr d = o[i + o.size() - rank];
      if (d && constantOf(d) == 1)
        continue;
      if (!d) {
        known = false;
        continue;
      }
      if (any && acc != d) {
        known = false;
        continue;
      }
      acc = d;
      any = true;
    }
    // An unknown operand dim could be the 1 that the others broadcast over
    // or the size itself; only a size other than 1 decides it.
    if (any && (known || (constantOf(acc) && *constantOf(acc) != 1)))
      out[i] = acc;
    else if (!any && known)
      out[i] = constant(1);
  }
  return out;
}

namespace {
/// Prints an expression with the symbols' names.
struct Printer : AffineExprVisitor<Printer, std::string> {
  const std::vector<std::string> &names;
  explicit Printer(const std::vector<std::string> &names) : names(names) {}
  std::string visitSymbolExpr(AffineSymbolExpr e) { return names[e.getPosition()]; }
  std::string visitDimExpr(AffineDimExpr e) { return "d" + std::to_string(e.getPosition()); }
  std::string visitConstantExpr(AffineConstantExpr e) { return std::to_string(e.getValue()); }
  std::string binary(AffineBinaryOpExpr e, StringRef op) {
    auto wrap = [&](AffineExpr x) {
      std::string s = visit(x);
      return isa<AffineBinaryOpExpr>(x) ? "(" + s + ")" : s;
    };
    // a + -1 * b reads as a - b.
    if (op == "+")
      if (auto mul = dyn_cast<AffineBinaryOpExpr>(e.getRHS());
          mul && mul.getKind() == AffineExprKind::Mul && constantOf(mul.getRHS()) &&
          *constantOf(mul.getRHS()) < 0) {
        int64_t k = -*constantOf(mul.getRHS());
        return visit(e.getLHS()) + " - " + (k == 1 ? wrap(mul.getLHS()) :
                                             wrap(mul.getLHS()) + " * " + std::to_string(k));
      }
    if (op == "+")
      if (auto c = constantOf(e.getRHS()); c && *c < 0)
        return visit(e.getLHS()) + " - " + std::to_string(-*c);
    return (op == "+" ? visit(e.getLHS()) : wrap(e.getLHS())) + " " + op.str() + " " +
           (op == "+" ? visit(e.getRHS()) : wrap(e.getRHS()));
  }
  std::string visitAddExpr(AffineBinaryOpExpr e) { return binary(e, "+"); }
  std::string visitMulExpr(AffineBinaryOpExpr e) { return binary(e, "*"); }
  std::string visitModExpr(AffineBinaryOpExpr e) { return binary(e, "mod"); }
  std::string visitFloorDivExpr(AffineBinaryOpExpr e) { return binary(e, "floordiv"); }
  std::string visitCeilDivExpr(AffineBinaryOpExpr e) { return binary(e, "ceildiv"); }
};
} // namespace

std::string SymbolicDims::print(AffineExpr e) const {
  if (!e)
    return "?";
  return Printer(names).visit(e);
}

/// Element-wise arithmetic on shape values. Division is ONNX's integer
/// division (truncating), which is floor division for the non-negative
/// values dims are; a constant divisor is required.
static AffineExpr arith(Operation *op, AffineExpr a, AffineExpr b) {
  if (!a || !b)
    return {};
  auto ca = constantOf(a), cb = constantOf(b);
  if (isa<AddOp>(op))
    return a + b;
  if (isa<SubOp>(op))
    return a - b;
  if (isa<MulOp>(op))
    return a * b;
  if (isa<DivOp>(op)) {
    if (ca && cb && *cb != 0 && !(*ca == INT64_MIN && *cb == -1))
      return getAffineConstantExpr(*ca / *cb, a.getContext()); // truncating, like ONNX
    // ONNX truncates; that is floor division only where a is never negative.
    return cb && *cb > 0 && isNonNegative(a) ? a.floorDiv(*cb) : AffineExpr();
  }
  if (isa<MaxOp>(op))
    return ca && cb ? getAffineConstantExpr(std::max(*ca, *cb), a.getContext())
                    : (a == b ? a : AffineExpr());
  if (isa<MinOp>(op))
    return ca && cb ? getAffineConstantExpr(std::min(*ca, *cb), a.getContext())
                    : (a == b ? a : AffineExpr());
  return {};
}

/// Whether `e` (a reshape target's entry) can be 0 only where the input,
/// of dims `in`, has no elements. Then taking `e` as the dim, rather than
/// ONNX's "0 copies the input's dim", differs from ONNX only where ONNX
/// Runtime fails (the copied dim does not exist or does not give the
/// element count) or where both results are empty. `e` must be built from
/// symbols and positive constants by + and *, so that it is 0 only where
/// one of its symbols is; the input's element count must be 0 whenever any
/// one of those symbols is, checked at two assignments of the others.
static bool emptyWhenZero(AffineExpr e, ArrayRef<AffineExpr> in) {
  llvm::SmallSetVector<unsigned, 4> symbols;
  bool plain = true;
  e.walk([&](AffineExpr x) {
    if (auto s = dyn_cast<AffineSymbolExpr>(x))
      symbols.insert(s.getPosition());
    else if (auto c = dyn_cast<AffineConstantExpr>(x))
      plain &= c.getValue() > 0;
    else if (isa<AffineBinaryOpExpr>(x))
      plain &= x.getKind() == AffineExprKind::Add || x.getKind() == AffineExprKind::Mul;
    else
      plain = false;
  });
  if (!plain || symbols.empty() || in.empty() || llvm::any_of(in, [](AffineExpr d) { return !d; }))
    return false;
  unsigned numSymbols = 0;
  for (AffineExpr d : in)
    d.walk([&](AffineExpr x) {
      if (auto s = dyn_cast<AffineSymbolExpr>(x))
        numSymbols = std::max(numSymbols, s.getPosition() + 1);
    });
  for (unsigned s : symbols)
    numSymbols = std::max(numSymbols, s + 1);
  MLIRContext *ctx = e.getContext();
  for (unsigned zero : symbols)
    for (int64_t base : {29, 97}) {
      SmallVector<AffineExpr> values;
      for (unsigned i = 0; i < numSymbols; ++i)
        values.push_back(getAffineConstantExpr(i == zero ? 0 : base + 2 * i, ctx));
      bool empty = false;
      for (AffineExpr d : in) {
        auto c = constantOf(simplifyAffineExpr(d.replaceSymbols(values), 0, numSymbols));
        if (!c)
          return false;
        empty |= *c == 0;
      }
      if (!empty)
        return false;
    }
  return true;
}

/// Elementwise ops (with broadcasting) and row ops: the result has the
/// (broadcast) dims of the operands.
static bool keepsOperandDims(Operation *op, int64_t rank) {
  if (!isa<KilnDialect>(op->getDialect()) || op->getNumOperands() == 0)
    return false;
  for (Type t : op->getOperandTypes()) {
    auto r = dyn_cast<RankedTensorType>(t);
    if (!r || r.getRank() > rank)
      return false;
  }
  if (isa<AddOp, SubOp, MulOp, DivOp, PowOp, MaxOp, MinOp, SelectOp, EqualOp, LessOp, GreaterOp,
          LessEqualOp, GreaterEqualOp, AndOp, OrOp, XorOp, CastOp, SoftmaxOp, LayerNormOp>(op))
    return true;
  // The unary elementwise ops (kiln's other one-operand ops that keep the
  // element type change the shape and are handled before).
  return op->getNumOperands() == 1 &&
         op->hasTrait<OpTrait::SameOperandsAndResultElementType>() &&
         !isa<ReshapeOp, FlattenOp, SqueezeOp, UnsqueezeOp, TransposeOp>(op);
}

/// `f` of the two operands' contents element by element, a one-element
/// side broadcast; nullopt when either is unknown or they do not pair up.
std::optional<SymbolicDims::Exprs>
SymbolicDims::zipContents(Operation *op,
                          function_ref<AffineExpr(AffineExpr, AffineExpr)> f) const {
  auto l = contentsOf(op->getOperand(0)), r = contentsOf(op->getOperand(1));
  if (!l || !r || (l->size() != r->size() && l->size() != 1 && r->size() != 1))
    return std::nullopt;
  Exprs out;
  for (size_t i = 0, n = std::max(l->size(), r->size()); i < n; ++i)
    out.push_back(f((*l)[l->size() == 1 ? 0 : i], (*r)[r->size() == 1 ? 0 : i]));
  return out;
}

void SymbolicDims::visit(Operation *op) {
  if (op->getNumResults() != 1)
    return;
  Value result = op->getResult(0);
  auto rt = dyn_cast<RankedTensorType>(result.getType());
  if (!rt)
    return;
  Exprs d = typeDims(result);
  auto setIfKnown = [&](size_t i, AffineExpr e) {
    if (i < d.size() && e && !d[i])
      d[i] = e;
  };
  auto fromContents = [&](Value shape) -> std::optional<Exprs> {
    auto c = contentsOf(shape);
    if (!c || c->size() != d.size())
      return std::nullopt;
    return c;
  };

  // ---- what the result holds (shape values) ----
  std::optional<Exprs> held;
  if (auto s = dyn_cast<ShapeOp>(op)) {
    Exprs in = dimsOf(s.getInput());
    auto [first, last] = shapeDimRange(in.size(), s.getStart(), s.getEnd());
    if (!in.empty())
      held = Exprs(in.begin() + first, in.begin() + last);
  } else if (auto g = dyn_cast<GatherOp>(op)) {
    auto data = contentsOf(g.getInput());
    auto idx = getConstantInts(g.getIndices());
    if (data && idx && g.getAxis() == 0) {
      Exprs picked;
      for (int64_t k : *idx) {
        int64_t j = k < 0 ? k + (int64_t)data->size() : k;
        if (j < 0 || j >= (int64_t)data->size())
          break;
        picked.push_back((*data)[j]);
      }
      if (picked.size() == idx->size())
        held = picked;
    }
  } else if (auto c = dyn_cast<ConcatOp>(op)) {
    Exprs all;
    bool ok = true;
    for (Value v : c.getInputs()) {
      auto part = contentsOf(v);
      if (!part) {
        ok = false;
        break;
      }
      llvm::append_range(all, *part);
    }
    if (ok && rt.getRank() == 1)
      held = all;
  } else if (isa<UnsqueezeOp, SqueezeOp, ReshapeOp, FlattenOp, CastOp>(op)) {
    // Same elements in the same order; casts only to integers wide enough
    // for dims (a cast to bool or i8 changes the values).
    if (rt.getElementType().isSignlessInteger() &&
        (!isa<CastOp>(op) || rt.getElementType().getIntOrFloatBitWidth() >= 32))
      held = contentsOf(op->getOperand(0));
  } else if (auto sl = dyn_cast<SliceOp>(op)) {
    auto data = contentsOf(sl.getInput());
    auto starts = getConstantInts(sl.getStarts()), ends = getConstantInts(sl.getEnds()),
         steps = getConstantInts(sl.getSteps());
    if (data && starts && ends && steps && starts->size() == 1) {
      if (auto b = computeSliceBounds(data->size(), (*starts)[0], (*ends)[0], (*steps)[0])) {
        Exprs part;
        for (int64_t k = 0, j = b->start; k < b->size; ++k, j += b->step)
          part.push_back((*data)[j]);
        held = part;
      }
    }
  } else if (isa<AddOp, SubOp, MulOp, DivOp, MaxOp, MinOp>(op)) {
    held = zipContents(op, [&](AffineExpr a, AffineExpr b) { return arith(op, a, b); });
  } else if (isa<EqualOp>(op)) {
    // Dims are never negative: a dim against -1 (PyTorch's "keep this
    // dim" marker) is known to differ.
    held = zipContents(op, [&](AffineExpr a, AffineExpr b) {
      auto ca = constantOf(a), cb = constantOf(b);
      if (a && b && a == b)
        return constant(1);
      if (ca && cb)
        return constant(*ca == *cb);
      if ((ca && *ca < 0 && isNonNegative(b)) || (cb && *cb < 0 && isNonNegative(a)))
        return constant(0);
      return AffineExpr();
    });
  } else if (auto sel = dyn_cast<SelectOp>(op)) {
    auto c = contentsOf(sel.getCondition());
    auto l = contentsOf(sel.getLhs()), r = contentsOf(sel.getRhs());
    if (c && l && r) {
      size_t n = std::max({c->size(), l->size(), r->size()});
      Exprs out;
      for (size_t i = 0; i < n; ++i) {
        auto at = [&](const Exprs &v) { return v[v.size() == 1 ? 0 : std::min(i, v.size() - 1)]; };
        auto pick = constantOf(at(*c));
        out.push_back(!pick ? AffineExpr() : *pick ? at(*l) : at(*r));
      }
      held = out;
    }
  }
  if (held)
    for (AffineExpr &e : *held)
      e = simplify(e);
  if (held && (int64_t)held->size() <= kMaxContents &&
      llvm::any_of(*held, [](AffineExpr e) { return (bool)e; }))
    contents[result] = *held;

  // ---- the result's dims ----
  if (auto s = dyn_cast<ShapeOp>(op)) {
    (void)s; // a 1-D tensor of known length: the type says it
  } else if (auto r = dyn_cast<ReshapeOp>(op)) {
    if (auto target = fromContents(r.getShape())) {
      Exprs in = dimsOf(r.getInput());
      for (size_t i = 0; i < d.size(); ++i) {
        AffineExpr e = (*target)[i];
        AffineExpr copied = i < in.size() ? in[i] : AffineExpr();
        if (!r.getAllowzero() && constantOf(e) == 0)
          e = copied;
        if (e && constantOf(e) == -1)
          continue; // the inferred dim: its product is the input's
        // A symbolic entry that is 0 at run time copies the input's dim:
        // trusted where that gives the same (it is that dim, or a multiple
        // of it), or where it can only be 0 when the input is empty
        // (emptyWhenZero), the case of a target gathered from another
        // tensor's dims ([batch, 1, 1, seq] for a mask).
        if (e && !constantOf(e) && !r.getAllowzero()) {
          bool same = copied && (e == copied || (isa<AffineBinaryOpExpr>(e) &&
                                                 cast<AffineBinaryOpExpr>(e).getKind() ==
                                                     AffineExprKind::Mul &&
                                                 cast<AffineBinaryOpExpr>(e).getLHS() == copied &&
                                                 constantOf(cast<AffineBinaryOpExpr>(e).getRHS())
                                                     .value_or(0) >= 1));
          // (Also where it is one of the input's dims, whatever its form:
          // a channel shuffle's [batch, groups, c, h, w] over a feature map
          // whose h and w are floordivs of the image size.)
          if (!same && !llvm::is_contained(in, e) && !emptyWhenZero(e, in))
            continue;
        }
        setIfKnown(i, e);
      }
    }
    // One dim left: the element count is the input's, so it is that over
    // the product of the others (exact for a valid reshape).
    Exprs in = dimsOf(r.getInput());
    if (llvm::count_if(d, [](AffineExpr e) { return !e; }) == 1 && !in.empty() &&
        llvm::all_of(in, [](AffineExpr e) { return (bool)e; })) {
      AffineExpr total = constant(1);
      for (AffineExpr e : in)
        total = total * e;
      int64_t others = 1;
      bool constantOthers = true;
      for (AffineExpr e : d)
        if (e) {
          auto c = constantOf(e);
          constantOthers &= c.has_value() && *c > 0;
          others *= c.value_or(1);
        }
      // Symbolic others ([batch, -1, h, w] in a channel shuffle): each is
      // a factor of the count; the dim is what remains.
      AffineExpr q = constantOthers ? total.floorDiv(others) : quotientOfProducts(total, d);
      for (AffineExpr &e : d)
        if (!e && q)
          e = simplify(q);
    }
  } else if (auto e = dyn_cast<ExpandOp>(op)) {
    if (auto target = contentsOf(e.getShape())) {
      Exprs b = broadcast({dimsOf(e.getInput()), *target}, d.size());
      for (size_t i = 0; i < d.size(); ++i)
        setIfKnown(i, b[i]);
    }
  } else if (auto c = dyn_cast<ConstantOfShapeOp>(op)) {
    if (auto target = contentsOrValues(c.getShape()); target && target->size() == d.size())
      for (size_t i = 0; i < d.size(); ++i)
        setIfKnown(i, (*target)[i]);
  } else if (auto t = dyn_cast<TileOp>(op)) {
    Exprs in = dimsOf(t.getInput());
    if (auto reps = fromContents(t.getRepeats()); reps && in.size() == d.size())
      for (size_t i = 0; i < d.size(); ++i)
        if (in[i] && (*reps)[i] && (constantOf(in[i]) || constantOf((*reps)[i])))
          setIfKnown(i, in[i] * (*reps)[i]);
  } else if (auto rg = dyn_cast<RangeOp>(op)) {
    auto s = contentsOrValues(rg.getStart()), l = contentsOrValues(rg.getLimit());
    auto delta = getConstantInts(rg.getDelta());
    if (s && l && delta && s->size() == 1 && l->size() == 1 && (*s)[0] && (*l)[0] &&
        delta->size() == 1 && (*delta)[0] > 0 && d.size() == 1) {
      // max(ceil((limit - start) / delta), 0): only a span known not to be
      // negative is kept.
      AffineExpr span = simplify((*l)[0] - (*s)[0]);
      if (isNonNegative(span))
        setIfKnown(0, span.ceilDiv((*delta)[0]));
    }
  } else if (auto t = dyn_cast<TransposeOp>(op)) {
    Exprs in = dimsOf(t.getInput());
    if (in.size() == d.size())
      for (auto [i, p] : llvm::enumerate(t.getPerm()))
        setIfKnown(i, in[p]);
  } else if (auto c = dyn_cast<ConcatOp>(op)) {
    int64_t axis = c.getAxis() < 0 ? c.getAxis() + d.size() : c.getAxis();
    AffineExpr sum = constant(0);
    for (Value v : c.getInputs()) {
      Exprs in = dimsOf(v);
      if (in.size() != d.size())
        return setDims(result, d);
      sum = sum && in[axis] ? sum + in[axis] : AffineExpr();
      for (size_t i = 0; i < d.size(); ++i)
        if ((int64_t)i != axis)
          setIfKnown(i, in[i]);
    }
    setIfKnown(axis, sum);
  } else if (auto u = dyn_cast<UnsqueezeOp>(op)) {
    Exprs in = dimsOf(u.getInput());
    SmallVector<bool> inserted(d.size(), false);
    for (int64_t a : u.getAxes())
      inserted[a < 0 ? a + d.size() : a] = true;
    for (size_t i = 0, j = 0; i < d.size(); ++i)
      if (!inserted[i] && j < in.size())
        setIfKnown(i, in[j++]);
  } else if (isa<ReduceSumOp, ReduceMaxOp, ReduceMinOp, ReduceProdOp, ReduceMeanOp, ArgMaxOp>(
                 op)) {
    // The reduced axes go (or become 1 with keepdims); ArgMax reduces its one axis.
    Exprs in = dimsOf(op->getOperand(0));
    SmallVector<int64_t> axes;
    if (auto am = dyn_cast<ArgMaxOp>(op))
      axes.push_back(am.getAxis());
    else if (auto a = op->getAttrOfType<DenseI64ArrayAttr>("axes"))
      llvm::append_range(axes, a.asArrayRef());
    auto keep = op->getAttrOfType<BoolAttr>("keepdims");
    if ((isa<ArgMaxOp>(op) || op->getAttr("axes")) && keep) {
      Exprs out;
      for (size_t i = 0; i < in.size(); ++i) {
        bool reduced = llvm::is_contained(axes, (int64_t)i);
        if (!reduced)
          out.push_back(in[i]);
        else if (keep.getValue())
          out.push_back(constant(1));
      }
      if (out.size() == d.size())
        for (size_t i = 0; i < d.size(); ++i)
          setIfKnown(i, out[i]);
    }
  } else if (auto sl = dyn_cast<SliceOp>(op)) {
    // The axes not sliced keep their dims; a sliced one of a constant dim
    // with bounds known as constants (often computed from other dims, which
    // shape inference cannot fold when some dims are unknown) is a constant.
    Exprs in = dimsOf(sl.getInput());
    auto axes = getConstantInts(sl.getAxes());
    auto starts = contentsOf(sl.getStarts()), ends = contentsOf(sl.getEnds()),
         steps = contentsOf(sl.getSteps());
    if (axes && in.size() == d.size())
      for (size_t i = 0; i < d.size(); ++i) {
        int64_t rank = d.size();
        auto at = llvm::find_if(*axes, [&](int64_t a) { return (a < 0 ? a + rank : a) == (int64_t)i; });
        if (at == axes->end()) {
          setIfKnown(i, in[i]);
          continue;
        }
        size_t k = at - axes->begin();
        if (!in[i] || !starts || !ends || !steps || k >= starts->size() || k >= ends->size() ||
            k >= steps->size())
          continue;
        auto dim = constantOf(in[i]);
        auto st = constantOf((*starts)[k]), en = constantOf((*ends)[k]),
             sp = constantOf((*steps)[k]);
        if (dim && st && en && sp) {
          if (auto b = computeSliceBounds(*dim, *st, *en, *sp))
            setIfKnown(i, constant(b->size));
        } else if (sp && *sp == 1 && assumeSliceBounds) {
          // Also where the type already says the size (a window x[p : p +
          // 4] of a tensor with other unknown dims): its bounds must still
          // be checked. And a dim known only at run time sliced with
          // constant bounds (x[:, 1:]).
          setIfKnown(i, runtimeSliceSize(op, in[i], (*starts)[k], (*ends)[k]));
        }
      }
  } else if (auto c = dyn_cast<ConvOp>(op)) {
    // NCHW: the batch is the input's, each spatial dim
    // (in + pads - dilation * (k - 1) - 1) floordiv stride + 1 (a floor, as
    // ONNX's output size is; AffineExpr's floordiv is one for negative
    // numerators too).
    Exprs in = dimsOf(c.getInput()), w = dimsOf(c.getWeight());
    size_t spatial = d.size() >= 2 ? d.size() - 2 : 0;
    if (in.size() == d.size() && w.size() == d.size() && c.getStrides().size() == spatial &&
        c.getDilations().size() == spatial && c.getPads().size() == 2 * spatial) {
      setIfKnown(0, in[0]);
      for (size_t i = 0; i < spatial; ++i) {
        auto k = constantOf(w[2 + i]);
        if (!in[2 + i] || !k || c.getStrides()[i] <= 0)
          continue;
        setIfKnown(2 + i, windowOutput(in[2 + i], c.getPads()[i] + c.getPads()[spatial + i], *k,
                                       c.getDilations()[i], c.getStrides()[i]));
      }
    }
  } else if (isa<MaxPoolOp, AvgPoolOp>(op)) {
    // NCHW or channels_last: the batch is the input's, each spatial dim as
    // a convolution's from the window (its pads with AveragePool's ceil
    // mode extra; MaxPool's ceil mode is in its end pads already), the
    // channels the input's.
    Exprs in = dimsOf(op->getOperand(0));
    auto kernel = op->getAttrOfType<DenseI64ArrayAttr>("kernel_shape");
    auto strides = op->getAttrOfType<DenseI64ArrayAttr>("strides");
    auto pads = op->getAttrOfType<DenseI64ArrayAttr>("pads");
    auto dilations = op->getAttrOfType<DenseI64ArrayAttr>("dilations");
    auto ceilPads = op->getAttrOfType<DenseI64ArrayAttr>("ceil_pads");
    bool channelsLast = op->hasAttr("channels_last");
    size_t spatial = d.size() >= 2 ? d.size() - 2 : 0;
    if (!in.empty() && in.size() == d.size()) {
      setIfKnown(0, in[0]);
      setIfKnown(channelsLast ? d.size() - 1 : 1, in[channelsLast ? d.size() - 1 : 1]);
      if (kernel && strides && pads && kernel.size() == (int64_t)spatial &&
          strides.size() == (int64_t)spatial && pads.size() == 2 * (int64_t)spatial &&
          (!dilations || dilations.size() == (int64_t)spatial) &&
          (!ceilPads || ceilPads.size() == (int64_t)spatial))
        for (size_t i = 0; i < spatial; ++i) {
          size_t at = (channelsLast ? 1 : 2) + i;
          int64_t dil = dilations ? dilations[i] : 1, k = kernel[i], st = strides[i];
          if (!in[at] || st <= 0)
            continue;
          int64_t padSum = pads[i] + pads[spatial + i] + (ceilPads ? ceilPads[i] : 0);
          setIfKnown(at, windowOutput(in[at], padSum, k, dil, st));
        }
    }
  } else if (auto c = dyn_cast<Conv2DNhwcOp>(op)) {
    // NHWC with OIHW weights: the batch is the input's, H and W as for
    // ConvOp, the channels the weights' outputs.
    Exprs in = dimsOf(c.getInput()), w = dimsOf(c.getWeight());
    if (in.size() == 4 && w.size() == 4 && d.size() == 4 && c.getStrides().size() == 2 &&
        c.getDilations().size() == 2 && c.getPads().size() == 4) {
      setIfKnown(0, in[0]);
      setIfKnown(3, w[0]);
      for (size_t i = 0; i < 2; ++i) {
        auto k = constantOf(w[2 + i]);
        if (!in[1 + i] || !k || c.getStrides()[i] <= 0)
          continue;
        setIfKnown(1 + i, windowOutput(in[1 + i], c.getPads()[i] + c.getPads()[2 + i], *k,
                                       c.getDilations()[i], c.getStrides()[i]));
      }
    }
  } else if (auto m = dyn_cast<MatMulOp>(op)) {
    Exprs l = dimsOf(m.getLhs()), r = dimsOf(m.getRhs());
    if (l.size() >= 2 && r.size() >= 2 && d.size() >= 2) {
      setIfKnown(d.size() - 2, l[l.size() - 2]);
      setIfKnown(d.size() - 1, r.back());
      Exprs lb(l.begin(), l.end() - 2), rb(r.begin(), r.end() - 2);
      Exprs b = broadcast({lb, rb}, d.size() - 2);
      for (size_t i = 0; i + 2 < d.size(); ++i)
        setIfKnown(i, b[i]);
    }
  } else if (isa<GatherOp>(op)) {
    auto g = cast<GatherOp>(op);
    Exprs in = dimsOf(g.getInput()), idx = dimsOf(g.getIndices());
    int64_t axis = g.getAxis() < 0 ? g.getAxis() + in.size() : g.getAxis();
    if (!in.empty() && in.size() + idx.size() == d.size() + 1) {
      Exprs all(in.begin(), in.begin() + axis);
      llvm::append_range(all, idx);
      all.append(in.begin() + axis + 1, in.end());
      for (size_t i = 0; i < d.size(); ++i)
        setIfKnown(i, all[i]);
    }
  } else if (keepsOperandDims(op, rt.getRank())) {
    // Elementwise (with broadcasting) and row ops keep their operands' dims.
    SmallVector<Exprs> operands;
    for (Value v : op->getOperands())
      operands.push_back(dimsOf(v));
    if (isa<SoftmaxOp, LayerNormOp>(op))
      operands.resize(1);
    Exprs b = broadcast(operands, d.size());
    for (size_t i = 0; i < d.size(); ++i)
      setIfKnown(i, b[i]);
  } else if (auto f = dyn_cast<FlattenOp>(op)) {
    // [product of the dims before axis, product of the rest].
    Exprs in = dimsOf(f.getInput());
    int64_t axis = f.getAxis() < 0 ? f.getAxis() + (int64_t)in.size() : f.getAxis();
    if (d.size() == 2 && axis >= 0 && axis <= (int64_t)in.size() &&
        llvm::all_of(in, [](AffineExpr e) { return (bool)e; })) {
      AffineExpr outer = constant(1), inner = constant(1);
      for (int64_t i = 0; i < (int64_t)in.size(); ++i)
        (i < axis ? outer : inner) = (i < axis ? outer : inner) * in[i];
      setIfKnown(0, simplify(outer));
      setIfKnown(1, simplify(inner));
    }
  } else if (auto p = dyn_cast<PadOp>(op)) {
    // Each dim grows by its begin and end pads (ONNX order: every begin,
    // then every end), whose values may come from shape arithmetic (Swin's
    // pad of its windows to a multiple of their size).
    Exprs in = dimsOf(p.getInput());
    auto pads = contentsOf(p.getPads());
    if (pads && in.size() == d.size() && pads->size() == 2 * d.size())
      for (size_t i = 0; i < d.size(); ++i)
        if (in[i] && (*pads)[i] && (*pads)[d.size() + i])
          setIfKnown(i, simplify(in[i] + (*pads)[i] + (*pads)[d.size() + i]));
  } else if (auto c = dyn_cast<tensor::CastOp>(op)) {
    Exprs in = dimsOf(c.getSource());
    if (in.size() == d.size())
      for (size_t i = 0; i < d.size(); ++i)
        setIfKnown(i, in[i]);
  }
  for (AffineExpr &e : d)
    e = simplify(e);
  setDims(result, d);
}

/// `e` divided by `c` where that is exact for every value of the symbols:
/// a product with a factor that `c` divides, or a sum of such; null
/// otherwise.
/// `e` less one factor `f` (a product term equal to it; in a sum, from
/// every term), or null where `f` is not a factor.
static AffineExpr removeFactor(AffineExpr e, AffineExpr f) {
  if (e == f)
    return getAffineConstantExpr(1, e.getContext());
  auto b = dyn_cast<AffineBinaryOpExpr>(e);
  if (!b)
    return {};
  if (b.getKind() == AffineExprKind::Mul) {
    if (AffineExpr l = removeFactor(b.getLHS(), f))
      return l * b.getRHS();
    if (AffineExpr r = removeFactor(b.getRHS(), f))
      return b.getLHS() * r;
    return {};
  }
  if (b.getKind() == AffineExprKind::Add) {
    AffineExpr l = removeFactor(b.getLHS(), f), r = removeFactor(b.getRHS(), f);
    return l && r ? l + r : AffineExpr();
  }
  return {};
}

/// count / product of the known entries of `dims` where that divides
/// exactly as expressions: each symbolic entry one of count's factors, the
/// constants' product a divisor of what remains; null otherwise.
static AffineExpr quotientOfProducts(AffineExpr count, ArrayRef<AffineExpr> dims) {
  int64_t constants = 1;
  for (AffineExpr e : dims) {
    if (!e || !count)
      continue;
    if (auto c = constantOf(e)) {
      if (*c <= 0 || constants > (INT64_MAX / *c))
        return {};
      constants *= *c;
    } else {
      count = removeFactor(count, e);
    }
  }
  return count ? divideExactly(count, constants) : AffineExpr();
}

static AffineExpr divideExactly(AffineExpr e, int64_t c) {
  if (c == 1)
    return e;
  if (auto k = constantOf(e))
    return *k % c == 0 ? getAffineConstantExpr(*k / c, e.getContext()) : AffineExpr();
  auto b = dyn_cast<AffineBinaryOpExpr>(e);
  if (!b)
    return {};
  if (b.getKind() == AffineExprKind::Mul) {
    if (AffineExpr r = divideExactly(b.getRHS(), c))
      return b.getLHS() * r;
    if (AffineExpr l = divideExactly(b.getLHS(), c))
      return l * b.getRHS();
    return {};
  }
  if (b.getKind() == AffineExprKind::Add) {
    AffineExpr l = divideExactly(b.getLHS(), c), r = divideExactly(b.getRHS(), c);
    return l && r ? l + r : AffineExpr();
  }
  return {};
}

/// Cancels exact divisions inside `e`: (seq * (batch * 4)) floordiv 4 is
/// seq * batch, which flattening leaves alone (the product is not affine).
static AffineExpr cancelDivisions(AffineExpr e) {
  auto b = dyn_cast<AffineBinaryOpExpr>(e);
  if (!b)
    return e;
  AffineExpr l = cancelDivisions(b.getLHS()), r = cancelDivisions(b.getRHS());
  switch (b.getKind()) {
  case AffineExprKind::Add:
    return l + r;
  case AffineExprKind::Mul:
    return l * r;
  case AffineExprKind::FloorDiv:
  case AffineExprKind::CeilDiv:
    if (auto c = constantOf(r); c && *c > 0)
      if (AffineExpr q = divideExactly(l, *c))
        return q;
    return b.getKind() == AffineExprKind::FloorDiv ? l.floorDiv(r) : l.ceilDiv(r);
  case AffineExprKind::Mod:
    if (auto c = constantOf(r); c && *c > 0 && divideExactly(l, *c))
      return getAffineConstantExpr(0, e.getContext());
    return l % r;
  default:
    return e;
  }
}

AffineExpr SymbolicDims::windowOutput(AffineExpr in, int64_t padSum, int64_t k,
                                      int64_t dilation, int64_t stride) const {
  // A floor, as ONNX's output size is (AffineExpr's floordiv is one for
  // negative numerators too).
  AffineExpr num = simplify(in + (padSum - dilation * (k - 1) - 1));
  return simplify(num.floorDiv(stride) + 1);
}

AffineExpr SymbolicDims::simplify(AffineExpr e) const {
  // Flattening cancels terms (past + new - past is new); semi-affine
  // products come back as they are, so exact divisions of them are
  // cancelled first.
  return e ? simplifyAffineExpr(cancelDivisions(e), 0, names.size()) : e;
}

} // namespace kiln
