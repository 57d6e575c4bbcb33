// Elementwise kiln ops, one scalar at a time: unary and binary ops with
// ONNX broadcasting, select and cast.
#include "HostTensor.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/StringSwitch.h"

#include <cmath>
#include <functional>

using namespace mlir;

namespace kiln::interp {
namespace {

double unaryFloat(StringRef name, double x) {
  if (name == "neg") return -x;
  if (name == "abs") return std::fabs(x);
  if (name == "exp") return std::exp(x);
  if (name == "log") return std::log(x);
  if (name == "sqrt") return std::sqrt(x);
  if (name == "relu") return std::isnan(x) ? x : (x > 0 ? x : 0.0);
  if (name == "sigmoid") return 1.0 / (1.0 + std::exp(-x));
  if (name == "tanh") return std::tanh(x);
  if (name == "erf") return std::erf(x);
  if (name == "floor") return std::floor(x);
  if (name == "ceil") return std::ceil(x);
  if (name == "round") return std::nearbyint(x); // the default mode: half to even
  if (name == "reciprocal") return 1.0 / x;
  if (name == "sign") return x > 0 ? 1.0 : x < 0 ? -1.0 : (std::isnan(x) ? x : 0.0);
  if (name == "sin") return std::sin(x);
  if (name == "cos") return std::cos(x);
  if (name == "tan") return std::tan(x);
  if (name == "asin") return std::asin(x);
  if (name == "acos") return std::acos(x);
  if (name == "atan") return std::atan(x);
  if (name == "sinh") return std::sinh(x);
  if (name == "cosh") return std::cosh(x);
  if (name == "asinh") return std::asinh(x);
  if (name == "acosh") return std::acosh(x);
  if (name == "atanh") return std::atanh(x);
  throw InterpError("kiln." + name.str() + " is not defined on floats");
}

int64_t unaryInt(StringRef name, int64_t x, bool isUnsigned, Type t) {
  if (name == "neg") return (int64_t)(0 - (uint64_t)x);
  if (name == "abs") return isUnsigned || x >= 0 ? x : (int64_t)(0 - (uint64_t)x);
  if (name == "relu") return isUnsigned || x > 0 ? x : 0;
  if (name == "sign") return isUnsigned ? (x != 0) : (x > 0) - (x < 0);
  if (name == "not") {
    if (!t.isInteger(1))
      throw InterpError("kiln.not takes booleans");
    return !x;
  }
  throw InterpError("kiln." + name.str() + " is not defined on integers");
}

bool isComparison(StringRef n) {
  return n == "equal" || n == "less" || n == "less_equal" || n == "greater" ||
         n == "greater_equal";
}

bool compare(StringRef n, double a, double b) {
  if (n == "equal") return a == b;
  if (n == "less") return a < b;
  if (n == "less_equal") return a <= b;
  if (n == "greater") return a > b;
  return a >= b;
}

template <typename T> bool compareInts(StringRef n, T a, T b) {
  if (n == "equal") return a == b;
  if (n == "less") return a < b;
  if (n == "less_equal") return a <= b;
  if (n == "greater") return a > b;
  return a >= b;
}

double binaryFloat(StringRef n, double a, double b) {
  if (n == "add") return a + b;
  if (n == "sub") return a - b;
  if (n == "mul") return a * b;
  if (n == "div") return a / b;
  if (n == "pow") return std::pow(a, b);
  // NaN wins, as in ONNX Max/Min.
  if (n == "max") return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b);
  if (n == "min") return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b);
  if (n == "frem") return std::fmod(a, b);
  throw InterpError("kiln." + n.str() + " is not defined on floats");
}

int64_t binaryInt(StringRef n, int64_t a, int64_t b, bool u, unsigned width) {
  uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
  if (n == "add") return (int64_t)(ua + ub);
  if (n == "sub") return (int64_t)(ua - ub);
  if (n == "mul") return (int64_t)(ua * ub);
  if (n == "div" || n == "rem" || n == "frem") {
    if (b == 0)
      return 0; // defined as 0 by Kiln (ONNX leaves it undefined)
    if (u) {
      if (n == "div") return (int64_t)(ua / ub);
      return (int64_t)(ua % ub);
    }
    if (b == -1) // INT_MIN / -1 wraps; the remainder is 0
      return n == "div" ? (int64_t)(0 - ua) : 0;
    if (n == "div") return a / b;
    int64_t r = a % b;
    // rem: Python's modulo, the sign of the divisor; frem: C's fmod.
    if (n == "rem" && r != 0 && ((r < 0) != (b < 0)))
      r += b;
    return r;
  }
  if (n == "pow") {
    if (!u && b < 0)
      return a == 1 ? 1 : a == -1 ? (b % 2 ? -1 : 1) : 0;
    uint64_t r = 1, base = ua;
    for (uint64_t e = ub; e; e >>= 1, base *= base)
      if (e & 1)
        r *= base;
    return (int64_t)r;
  }
  if (n == "max") return u ? (int64_t)std::max(ua, ub) : std::max(a, b);
  if (n == "min") return u ? (int64_t)std::min(ua, ub) : std::min(a, b);
  if (n == "and") return a & b;
  if (n == "or") return a | b;
  if (n == "xor") return a ^ b;
  if (n == "shift_left") return ub >= width ? 0 : (int64_t)(ua << ub);
  if (n == "shift_right") {
    if (ub >= width)
      return 0;
    uint64_t mask = width >= 64 ? ~uint64_t(0) : (uint64_t(1) << width) - 1;
    return (int64_t)((ua & mask) >> ub);
  }
  throw InterpError("kiln." + n.str() + " is not defined on integers");
}

const std::vector<StringRef> &unaryNames() {
  static const std::vector<StringRef> names = {
      "neg",  "abs",  "exp",  "log",        "sqrt", "relu", "sigmoid", "tanh", "erf",
      "floor", "ceil", "round", "reciprocal", "sign", "not",  "sin",     "cos",  "tan",
      "asin", "acos", "atan", "sinh",       "cosh", "asinh", "acosh",  "atanh"};
  return names;
}

const std::vector<StringRef> &binaryNames() {
  static const std::vector<StringRef> names = {
      "add", "sub", "mul", "div", "pow", "max", "min", "rem", "frem", "and", "or", "xor",
      "shift_left", "shift_right", "equal", "less", "less_equal", "greater", "greater_equal"};
  return names;
}

HostTensor cast(const HostTensor &x, Type to) {
  HostTensor y(to, x.shape);
  bool fromFloat = x.isFloat();
  for (int64_t k = 0; k < x.size(); ++k) {
    if (to.isInteger(1))
      y.i[k] = fromFloat ? x.f[k] != 0.0 : x.i[k] != 0;
    else if (y.isFloat())
      y.f[k] = x.num(k);
    else
      y.i[k] = x.integer(k); // floats truncate toward zero, then wrap
  }
  return y;
}

} // namespace

bool evalElementwise(Operation *op, const Operands &in, std::vector<HostTensor> &out) {
  return evalElementwiseNamed(op->getName().stripDialect(), resultElementType(op), in, out);
}

bool evalElementwiseNamed(StringRef name, Type outElt, const Operands &in,
                          std::vector<HostTensor> &out) {
  if (llvm::is_contained(unaryNames(), name)) {
    const HostTensor &x = *in[0];
    HostTensor y(outElt, x.shape);
    for (int64_t k = 0; k < x.size(); ++k) {
      if (x.isFloat())
        y.f[k] = unaryFloat(name, x.f[k]);
      else
        y.i[k] = unaryInt(name, x.i[k], x.isUnsigned(), x.type);
    }
    out.push_back(std::move(y));
    return true;
  }
  if (llvm::is_contained(binaryNames(), name)) {
    const HostTensor &a = *in[0], &b = *in[1];
    if (a.type != b.type)
      throw InterpError("operands of different element types");
    Shape shape = broadcastShapes(a.shape, b.shape);
    std::vector<int64_t> ia = broadcastIndices(a.shape, shape), ib = broadcastIndices(b.shape, shape);
    HostTensor y(outElt, shape);
    bool cmp = isComparison(name);
    unsigned width = a.isFloat() ? 64 : (a.type.isIndex() ? 64 : a.type.getIntOrFloatBitWidth());
    for (int64_t k = 0; k < y.size(); ++k) {
      if (a.isFloat()) {
        double p = a.f[ia[k]], q = b.f[ib[k]];
        if (cmp)
          y.i[k] = compare(name, p, q);
        else
          y.f[k] = binaryFloat(name, p, q);
      } else {
        int64_t p = a.i[ia[k]], q = b.i[ib[k]];
        if (cmp)
          y.i[k] = a.isUnsigned() ? compareInts<uint64_t>(name, p, q) : compareInts<int64_t>(name, p, q);
        else
          y.i[k] = binaryInt(name, p, q, a.isUnsigned(), width);
      }
    }
    out.push_back(std::move(y));
    return true;
  }
  if (name == "select") {
    const HostTensor &c = *in[0], &a = *in[1], &b = *in[2];
    Shape shape = broadcastShapes(broadcastShapes(c.shape, a.shape), b.shape);
    auto ic = broadcastIndices(c.shape, shape), ia = broadcastIndices(a.shape, shape),
         ib = broadcastIndices(b.shape, shape);
    HostTensor y(outElt, shape);
    for (int64_t k = 0; k < y.size(); ++k) {
      if (c.num(ic[k]) != 0)
        y.copyElement(k, a, ia[k]);
      else
        y.copyElement(k, b, ib[k]);
    }
    out.push_back(std::move(y));
    return true;
  }
  if (name == "cast") {
    out.push_back(cast(*in[0], outElt));
    return true;
  }
  return false;
}

} // namespace kiln::interp
