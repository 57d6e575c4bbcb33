// Which float max/min/relu ops can never see a NaN: a range analysis over
// the elementwise chains that integer casts start (a quantized model's
// dequantize -> add -> relu -> quantize). Why: arith.maximumf must return
// NaN when either operand is one, which x86 has no single instruction for;
// LLVM emits max + compare-unordered + blend, three instructions where
// one does. A quantized ResNet-50's residual Add + Relu + QuantizeLinear
// (7 % of its time) carries three such ops per element. Marked ops lower
// with the nnan flag: the same results, since no operand is ever NaN.
#include "LoweringUtils.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"

#include <algorithm>
#include <cmath>

using namespace mlir;

namespace kiln::codegen {
namespace {

/// A closed range holding every value of a tensor as the f32 ops compute
/// it: each op's exact range widened outward by more than its rounding can
/// move it (a relative 2^-23, twice the f32 bound, plus the smallest
/// subnormal), so that a divisor whose exact range excludes zero but whose
/// rounded one need not (1 + 2^-30 - 1) is refused.
struct Range {
  double lo, hi;
};

// Ranges past this are not trusted to stay finite in f32 (3.4e38).
constexpr double kFiniteBound = 1e30;

std::optional<Range> finite(double lo, double hi) {
  double slack = std::max(std::fabs(lo), std::fabs(hi)) * 0x1p-23 + 0x1p-149;
  lo -= slack;
  hi += slack;
  if (!(lo >= -kFiniteBound && hi <= kFiniteBound && lo <= hi))
    return std::nullopt; // also catches NaN bounds
  return Range{lo, hi};
}

/// The values of integer type `t` (signless reads as signed, as the
/// importer writes ONNX's signed types; i1 is a bool).
Range integerRange(IntegerType t) {
  unsigned w = t.getWidth();
  if (w == 1)
    return {0, 1};
  if (t.isUnsigned())
    return {0, std::ldexp(1.0, w) - 1};
  return {-std::ldexp(1.0, w - 1), std::ldexp(1.0, w - 1) - 1};
}

/// The range of a constant f32 tensor's values, when all are finite (a
/// splat, or up to 4096 elements: scales and zero points, not weights).
std::optional<Range> constantRange(ConstantOp op) {
  auto dense = dyn_cast<DenseElementsAttr>(op.getValue());
  if (!dense || !dense.getElementType().isF32() ||
      (!dense.isSplat() && dense.getNumElements() > 4096))
    return std::nullopt;
  double lo = INFINITY, hi = -INFINITY;
  for (float v : dense.getValues<float>()) {
    if (!std::isfinite(v)) // std::min/max would skip a NaN
      return std::nullopt;
    lo = std::min(lo, (double)v);
    hi = std::max(hi, (double)v);
    if (dense.isSplat())
      break;
  }
  return finite(lo, hi);
}

Range minMax(std::initializer_list<double> values) {
  return {std::min(values), std::max(values)};
}

bool isF32Tensor(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && t.getElementType().isF32();
}

} // namespace

void markNanFreeClamps(Operation *root) {
  llvm::DenseMap<Value, Range> ranges;
  auto rangeOf = [&](Value v) -> std::optional<Range> {
    auto it = ranges.find(v);
    if (it == ranges.end())
      return std::nullopt;
    return it->second;
  };
  root->walk([&](Operation *op) {
    if (op->getNumResults() != 1 || !isF32Tensor(op->getResult(0)))
      return;
    // Every float operand's range (allKnown: none is missing).
    SmallVector<Range, 2> in;
    bool allKnown = true;
    for (Value v : op->getOperands()) {
      if (!isF32Tensor(v))
        continue;
      std::optional<Range> r = rangeOf(v);
      allKnown &= r.has_value();
      if (r)
        in.push_back(*r);
    }
    // An operand of unknown range: nothing is known of the result.
    if (!allKnown)
      return;
    std::optional<Range> out = llvm::TypeSwitch<Operation *, std::optional<Range>>(op)
        .Case([&](ConstantOp c) { return constantRange(c); })
        .Case([&](CastOp c) -> std::optional<Range> {
          auto from = dyn_cast<RankedTensorType>(c.getInput().getType());
          auto it = from ? dyn_cast<IntegerType>(from.getElementType()) : IntegerType();
          if (!it)
            return std::nullopt;
          Range r = integerRange(it);
          return finite(r.lo, r.hi);
        })
        .Case([&](AddOp) -> std::optional<Range> {
          if (in.size() != 2)
            return std::nullopt;
          return finite(in[0].lo + in[1].lo, in[0].hi + in[1].hi);
        })
        .Case([&](SubOp) -> std::optional<Range> {
          if (in.size() != 2)
            return std::nullopt;
          return finite(in[0].lo - in[1].hi, in[0].hi - in[1].lo);
        })
        .Case([&](MulOp) -> std::optional<Range> {
          if (in.size() != 2)
            return std::nullopt;
          Range r = minMax({in[0].lo * in[1].lo, in[0].lo * in[1].hi, in[0].hi * in[1].lo,
                            in[0].hi * in[1].hi});
          return finite(r.lo, r.hi);
        })
        .Case([&](DivOp) -> std::optional<Range> {
          // A divisor whose range excludes zero (a scale).
          if (in.size() != 2 || !(in[1].lo > 0 || in[1].hi < 0))
            return std::nullopt;
          Range r = minMax({in[0].lo / in[1].lo, in[0].lo / in[1].hi, in[0].hi / in[1].lo,
                            in[0].hi / in[1].hi});
          return finite(r.lo, r.hi);
        })
        .Case([&](MaxOp) -> std::optional<Range> {
          if (in.size() != 2)
            return std::nullopt;
          return finite(std::max(in[0].lo, in[1].lo), std::max(in[0].hi, in[1].hi));
        })
        .Case([&](MinOp) -> std::optional<Range> {
          if (in.size() != 2)
            return std::nullopt;
          return finite(std::min(in[0].lo, in[1].lo), std::min(in[0].hi, in[1].hi));
        })
        .Case([&](ReluOp) -> std::optional<Range> {
          if (in.size() != 1)
            return std::nullopt;
          return finite(std::max(in[0].lo, 0.0), std::max(in[0].hi, 0.0));
        })
        .Case([&](RoundOp) -> std::optional<Range> {
          if (in.size() != 1)
            return std::nullopt;
          return finite(std::floor(in[0].lo), std::ceil(in[0].hi));
        })
        .Case([&](NegOp) -> std::optional<Range> {
          if (in.size() != 1)
            return std::nullopt;
          return finite(-in[0].hi, -in[0].lo);
        })
        .Default([](Operation *) { return std::nullopt; });
    if (isa<MaxOp, MinOp, ReluOp>(op) && !in.empty())
      op->setAttr(kNanFreeAttr, UnitAttr::get(op->getContext()));
    if (out)
      ranges[op->getResult(0)] = *out;
  });
}

} // namespace kiln::codegen
