#include "HostTensor.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/APFloat.h"

#include <cmath>
#include <limits>

using namespace mlir;

namespace kiln::interp {

int64_t numElements(const Shape &shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      throw InterpError("negative dimension in shape " + shapeString(shape));
    n *= d;
  }
  return n;
}

Shape stridesOf(const Shape &shape) {
  Shape s(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;)
    s[d - 1] = s[d] * shape[d];
  return s;
}

std::string shapeString(const Shape &shape) {
  std::string s = "[";
  for (size_t d = 0; d < shape.size(); ++d)
    s += (d ? "x" : "") + std::to_string(shape[d]);
  return s + "]";
}

bool isFloatType(Type t) { return isa<FloatType>(t); }

bool isUnsignedType(Type t) {
  auto it = dyn_cast<IntegerType>(t);
  return it && (it.isUnsigned() || it.getWidth() == 1);
}

HostTensor::HostTensor(Type type, Shape shape) : type(type), shape(std::move(shape)) {
  int64_t n = numElements(this->shape);
  if (n > (int64_t(1) << 34))
    throw InterpError("tensor of " + std::to_string(n) + " elements is too large to interpret");
  if (isFloat())
    f.assign(n, 0.0);
  else
    i.assign(n, 0);
}

bool HostTensor::isFloat() const { return isFloatType(type); }
bool HostTensor::isUnsigned() const { return isUnsignedType(type); }

double HostTensor::num(int64_t k) const {
  if (isFloat())
    return f[k];
  return isUnsigned() ? (double)(uint64_t)i[k] : (double)i[k];
}

int64_t HostTensor::integer(int64_t k) const {
  if (!isFloat())
    return i[k];
  double v = std::trunc(f[k]);
  if (std::isnan(v))
    return 0;
  if (v >= 9223372036854775808.0)
    return v < 18446744073709551616.0 ? (int64_t)(uint64_t)v : std::numeric_limits<int64_t>::max();
  if (v < -9223372036854775808.0)
    return std::numeric_limits<int64_t>::min();
  return (int64_t)v;
}

void HostTensor::setNum(int64_t k, double v) {
  if (isFloat()) {
    f[k] = v;
    return;
  }
  HostTensor tmp(Float64Type::get(type.getContext()), {});
  tmp.f[0] = v;
  i[k] = tmp.integer(0);
}

void HostTensor::setInt(int64_t k, int64_t v) {
  if (isFloat())
    f[k] = isUnsigned() ? (double)(uint64_t)v : (double)v;
  else
    i[k] = v;
}

void HostTensor::copyElement(int64_t k, const HostTensor &src, int64_t from) {
  if (isFloat())
    f[k] = src.f[from];
  else
    i[k] = src.i[from];
}

double roundToType(double v, Type t) {
  if (t.isF64())
    return v;
  if (t.isF32())
    return (double)(float)v;
  const llvm::fltSemantics *sem = nullptr;
  if (t.isF16())
    sem = &llvm::APFloat::IEEEhalf();
  else if (t.isBF16())
    sem = &llvm::APFloat::BFloat();
  else
    throw InterpError("the interpreter does not support float type of width " +
                      std::to_string(t.getIntOrFloatBitWidth()));
  llvm::APFloat a(v);
  bool lost;
  a.convert(*sem, llvm::APFloat::rmNearestTiesToEven, &lost);
  a.convert(llvm::APFloat::IEEEdouble(), llvm::APFloat::rmNearestTiesToEven, &lost);
  return a.convertToDouble();
}

int64_t wrapToType(int64_t v, Type t) {
  if (t.isIndex())
    return v;
  auto it = dyn_cast<IntegerType>(t);
  if (!it)
    throw InterpError("not an integer type");
  unsigned w = it.getWidth();
  if (w >= 64)
    return v;
  if (w == 1)
    return v != 0;
  uint64_t mask = (uint64_t(1) << w) - 1, bits = (uint64_t)v & mask;
  if (!it.isUnsigned() && (bits >> (w - 1)))
    bits |= ~mask;
  return (int64_t)bits;
}

void HostTensor::normalize() {
  if (isFloat()) {
    if (!type.isF64())
      for (double &v : f)
        v = roundToType(v, type);
  } else {
    for (int64_t &v : i)
      v = wrapToType(v, type);
  }
}

std::vector<int64_t> toInts(const HostTensor &t) {
  std::vector<int64_t> out(t.size());
  for (int64_t k = 0; k < t.size(); ++k)
    out[k] = t.integer(k);
  return out;
}

Shape broadcastShapes(const Shape &a, const Shape &b) {
  size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (size_t k = 0; k < r; ++k) {
    int64_t da = k < r - a.size() ? 1 : a[k - (r - a.size())];
    int64_t db = k < r - b.size() ? 1 : b[k - (r - b.size())];
    if (da != db && da != 1 && db != 1)
      throw InterpError("shapes " + shapeString(a) + " and " + shapeString(b) +
                        " do not broadcast");
    out[k] = da == 1 ? db : da;
  }
  return out;
}

std::vector<int64_t> broadcastIndices(const Shape &in, const Shape &out) {
  if (in.size() > out.size())
    throw InterpError("cannot broadcast " + shapeString(in) + " to " + shapeString(out));
  size_t lead = out.size() - in.size();
  Shape inStrides = stridesOf(in);
  // Per output axis, the input stride it advances (0 where broadcast).
  Shape step(out.size(), 0);
  for (size_t d = 0; d < in.size(); ++d) {
    if (in[d] != 1 && in[d] != out[lead + d])
      throw InterpError("cannot broadcast " + shapeString(in) + " to " + shapeString(out));
    step[lead + d] = in[d] == 1 ? 0 : inStrides[d];
  }
  int64_t n = numElements(out);
  std::vector<int64_t> idx(n);
  std::vector<int64_t> c(out.size(), 0);
  int64_t at = 0;
  for (int64_t k = 0; k < n; ++k) {
    idx[k] = at;
    for (size_t d = out.size(); d-- > 0;) {
      if (++c[d] < out[d]) {
        at += step[d];
        break;
      }
      at -= step[d] * (out[d] - 1);
      c[d] = 0;
    }
  }
  return idx;
}

Type resultElementType(Operation *op, unsigned k) {
  Type t = op->getResult(k).getType();
  if (auto st = dyn_cast<ShapedType>(t))
    return st.getElementType();
  return t;
}

void unravel(int64_t flat, const Shape &shape, std::vector<int64_t> &coords) {
  coords.resize(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    coords[d] = shape[d] ? flat % shape[d] : 0;
    flat = shape[d] ? flat / shape[d] : 0;
  }
}

int64_t ravel(const std::vector<int64_t> &coords, const Shape &strides) {
  int64_t at = 0;
  for (size_t d = 0; d < coords.size(); ++d)
    at += coords[d] * strides[d];
  return at;
}

int64_t attrInt(Operation *op, StringRef name) {
  auto a = op->getAttrOfType<IntegerAttr>(name);
  if (!a)
    throw InterpError("missing attribute '" + name.str() + "'");
  return a.getValue().getSExtValue();
}

std::vector<int64_t> attrInts(Operation *op, StringRef name) {
  auto a = op->getAttrOfType<DenseI64ArrayAttr>(name);
  if (!a)
    throw InterpError("missing attribute '" + name.str() + "'");
  return std::vector<int64_t>(a.asArrayRef().begin(), a.asArrayRef().end());
}

HostTensor transpose(const HostTensor &x, const std::vector<int64_t> &perm) {
  if ((int64_t)perm.size() != x.rank())
    throw InterpError("transpose permutation of the wrong length");
  Shape shape(x.rank()), xs = stridesOf(x.shape);
  std::vector<int64_t> step(x.rank());
  for (int64_t d = 0; d < x.rank(); ++d) {
    int64_t from = normalizeAxis(perm[d], x.rank());
    shape[d] = x.shape[from];
    step[d] = xs[from];
  }
  HostTensor y(x.type, shape);
  std::vector<int64_t> c;
  for (int64_t k = 0; k < y.size(); ++k) {
    unravel(k, shape, c);
    y.copyElement(k, x, ravel(c, step));
  }
  return y;
}

int64_t normalizeAxis(int64_t axis, int64_t rank) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= std::max<int64_t>(rank, 1))
    throw InterpError("axis " + std::to_string(axis) + " out of range for rank " +
                      std::to_string(rank));
  return a;
}

} // namespace kiln::interp
