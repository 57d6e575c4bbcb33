// Linear algebra, convolutions, pooling, reductions and the row ops
// (softmax, layer norm), by direct loops in double.
#include "HostTensor.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"

#include <cmath>
#include <limits>

using namespace mlir;

namespace kiln::interp {
namespace {



double f64(Operation *op, StringRef attr, double dflt) {
  auto a = op->getAttrOfType<FloatAttr>(attr);
  return a ? a.getValueAsDouble() : dflt;
}

bool flag(Operation *op, StringRef attr) {
  Attribute a = op->getAttr(attr);
  if (auto b = dyn_cast_or_null<BoolAttr>(a))
    return b.getValue();
  return a && isa<UnitAttr>(a);
}

/// The elements as doubles: the tensor's own storage for floats, else
/// converted into `scratch`.
const double *asDoubles(const HostTensor &t, std::vector<double> &scratch) {
  if (t.isFloat())
    return t.f.data();
  scratch.resize(t.size());
  for (int64_t k = 0; k < t.size(); ++k)
    scratch[k] = t.num(k);
  return scratch.data();
}

/// Moves axis `from` of `x` to position `to` (a transpose).
HostTensor moveAxis(const HostTensor &x, int64_t from, int64_t to) {
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < x.rank(); ++d)
    if (d != from)
      perm.push_back(d);
  perm.insert(perm.begin() + to, from);
  return transpose(x, perm);
}

HostTensor matmul(const HostTensor &a0, const HostTensor &b0, Type outElt) {
  Shape as = a0.shape, bs = b0.shape;
  bool aVec = as.size() == 1, bVec = bs.size() == 1;
  if (aVec)
    as.insert(as.begin(), 1);
  if (bVec)
    bs.push_back(1);
  if (as.size() < 2 || bs.size() < 2)
    throw InterpError("matmul of a scalar");
  int64_t m = as[as.size() - 2], k = as.back(), k2 = bs[bs.size() - 2], n = bs.back();
  if (k != k2)
    throw InterpError("matmul of " + shapeString(a0.shape) + " and " + shapeString(b0.shape));
  Shape ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  Shape batch = broadcastShapes(ab, bb);
  auto ia = broadcastIndices(ab, batch), ib = broadcastIndices(bb, batch);
  Shape outShape = batch;
  if (!aVec)
    outShape.push_back(m);
  if (!bVec)
    outShape.push_back(n);
  HostTensor y(outElt, outShape);
  int64_t nb = numElements(batch);
  for (int64_t t = 0; t < nb; ++t) {
    int64_t ao = ia[t] * m * k, bo = ib[t] * k * n, yo = t * m * n;
    for (int64_t r = 0; r < m; ++r)
      for (int64_t c = 0; c < n; ++c) {
        if (y.isFloat()) {
          double acc = 0;
          for (int64_t p = 0; p < k; ++p)
            acc += a0.f[ao + r * k + p] * b0.f[bo + p * n + c];
          y.f[yo + r * n + c] = acc;
        } else {
          uint64_t acc = 0;
          for (int64_t p = 0; p < k; ++p)
            acc += (uint64_t)a0.i[ao + r * k + p] * (uint64_t)b0.i[bo + p * n + c];
          y.i[yo + r * n + c] = (int64_t)acc;
        }
      }
  }
  return y;
}

/// An integer convolution's input zero point (padding reads it: it adds
/// nothing); 0 when the op has none.
double inputZeroPoint(Operation *op) {
  auto zp = op->getAttrOfType<IntegerAttr>("input_zero_point");
  return zp ? (double)zp.getInt() : 0.0;
}

/// Grouped N-d convolution, NC[D]HW, weights [M, C/group, k...].
HostTensor conv(const HostTensor &x, const HostTensor &w, const HostTensor *bias,
                const std::vector<int64_t> &strides, const std::vector<int64_t> &pads,
                const std::vector<int64_t> &dilations, int64_t group, Type outElt,
                double inputZeroPoint = 0) {
  int64_t sp = x.rank() - 2;
  if (sp < 1 || w.rank() != x.rank() || (int64_t)strides.size() != sp ||
      (int64_t)pads.size() != 2 * sp || (int64_t)dilations.size() != sp || group < 1)
    throw InterpError("convolution operands and attributes disagree");
  int64_t n = x.shape[0], c = x.shape[1], m = w.shape[0], cg = w.shape[1];
  if (c != cg * group || m % group)
    throw InterpError("convolution channels do not match the group count");
  Shape outShape = {n, m};
  for (int64_t d = 0; d < sp; ++d) {
    int64_t span = (w.shape[2 + d] - 1) * dilations[d] + 1;
    int64_t o = (x.shape[2 + d] + pads[d] + pads[sp + d] - span) / strides[d] + 1;
    outShape.push_back(std::max<int64_t>(o, 0));
  }
  HostTensor y(outElt, outShape);
  Shape outSpatial(outShape.begin() + 2, outShape.end()), kSpatial(w.shape.begin() + 2, w.shape.end());
  Shape xSpatial(x.shape.begin() + 2, x.shape.end());
  int64_t outPix = numElements(outSpatial), kPix = numElements(kSpatial), xPix = numElements(xSpatial);
  Shape xs = stridesOf(xSpatial);
  int64_t mPerGroup = m / group;
  std::vector<int64_t> oc, kc;
  // Per output pixel, the input offset of each kernel tap (-1: padding).
  std::vector<int64_t> taps(kPix);
  std::vector<double> xd, wd;
  const double *xp = asDoubles(x, xd), *wp = asDoubles(w, wd);
  for (int64_t op = 0; op < outPix; ++op) {
    unravel(op, outSpatial, oc);
    for (int64_t t = 0; t < kPix; ++t) {
      unravel(t, kSpatial, kc);
      int64_t at = 0;
      for (int64_t d = 0; d < sp && at >= 0; ++d) {
        int64_t p = oc[d] * strides[d] - pads[d] + kc[d] * dilations[d];
        at = p < 0 || p >= xSpatial[d] ? -1 : at + p * xs[d];
      }
      taps[t] = at;
    }
    for (int64_t b = 0; b < n; ++b)
      for (int64_t oCh = 0; oCh < m; ++oCh) {
        int64_t g = oCh / mPerGroup;
        double acc = bias ? bias->num(oCh) : 0.0;
        for (int64_t ci = 0; ci < cg; ++ci) {
          int64_t xBase = (b * c + g * cg + ci) * xPix, wBase = (oCh * cg + ci) * kPix;
          for (int64_t t = 0; t < kPix; ++t)
            if (taps[t] >= 0)
              acc += (xp[xBase + taps[t]] - inputZeroPoint) * wp[wBase + t];
        }
        y.setNum((b * m + oCh) * outPix + op, acc);
      }
  }
  return y;
}

/// Max or average pooling, NC[D]HW.
HostTensor pool(Operation *op, const HostTensor &x, bool isMax) {
  std::vector<int64_t> k = attrInts(op, "kernel_shape"), s = attrInts(op, "strides"), p = attrInts(op, "pads");
  int64_t sp = (int64_t)k.size();
  std::vector<int64_t> d = isMax ? attrInts(op, "dilations") : std::vector<int64_t>(sp, 1);
  std::vector<int64_t> ceilPads = isMax ? std::vector<int64_t>(sp, 0) : attrInts(op, "ceil_pads");
  if (d.empty())
    d.assign(sp, 1);
  if (x.rank() != sp + 2 || (int64_t)s.size() != sp || (int64_t)p.size() != 2 * sp ||
      (int64_t)d.size() != sp || (int64_t)ceilPads.size() != sp)
    throw InterpError("pooling operand and attributes disagree");
  bool includePad = !isMax && flag(op, "count_include_pad");
  Shape outShape = {x.shape[0], x.shape[1]};
  for (int64_t a = 0; a < sp; ++a) {
    int64_t span = (k[a] - 1) * d[a] + 1;
    outShape.push_back(std::max<int64_t>(
        (x.shape[2 + a] + p[a] + p[sp + a] + ceilPads[a] - span) / s[a] + 1, 0));
  }
  HostTensor y(x.type, outShape);
  Shape outSpatial(outShape.begin() + 2, outShape.end()), xSpatial(x.shape.begin() + 2, x.shape.end());
  Shape xs = stridesOf(xSpatial);
  int64_t outPix = numElements(outSpatial), kPix = numElements(k), xPix = numElements(xSpatial);
  std::vector<int64_t> oc, kc;
  for (int64_t plane = 0; plane < x.shape[0] * x.shape[1]; ++plane)
    for (int64_t o = 0; o < outPix; ++o) {
      unravel(o, outSpatial, oc);
      double acc = isMax ? -INFINITY : 0.0;
      int64_t inside = 0, counted = 0;
      for (int64_t t = 0; t < kPix; ++t) {
        unravel(t, k, kc);
        int64_t at = 0;
        bool in = true, inPads = true;
        for (int64_t a = 0; a < sp; ++a) {
          int64_t pos = oc[a] * s[a] - p[a] + kc[a] * d[a];
          in = in && pos >= 0 && pos < xSpatial[a];
          inPads = inPads && pos >= -p[a] && pos < xSpatial[a] + p[sp + a];
          at += pos * xs[a];
        }
        counted += inPads;
        if (!in)
          continue;
        ++inside;
        double v = x.num(plane * xPix + at);
        if (isMax)
          acc = std::isnan(v) || v > acc ? v : acc;
        else
          acc += v;
      }
      if (!isMax)
        acc /= (double)(includePad ? counted : inside);
      if (isMax && !y.isFloat() && inside == 0)
        acc = 0;
      y.setNum(plane * outPix + o, acc);
    }
  return y;
}

HostTensor reduce(StringRef kind, const HostTensor &x, const std::vector<int64_t> &axes,
                  bool keepdims) {
  Shape outShape, keptShape;
  std::vector<bool> reduced(x.rank(), false);
  for (int64_t a : axes)
    reduced[normalizeAxis(a, x.rank())] = true;
  int64_t count = 1;
  for (int64_t d = 0; d < x.rank(); ++d) {
    if (reduced[d]) {
      count *= x.shape[d];
      if (keepdims)
        outShape.push_back(1);
    } else {
      outShape.push_back(x.shape[d]);
    }
    keptShape.push_back(reduced[d] ? 1 : x.shape[d]);
  }
  HostTensor y(x.type, outShape);
  Shape ks = stridesOf(keptShape);
  int64_t n = y.size();
  bool isF = x.isFloat();
  double init = kind == "prod" ? 1.0 : kind == "max" ? -INFINITY : kind == "min" ? INFINITY : 0.0;
  std::vector<double> acc(n, init);
  std::vector<int64_t> iacc(n, kind == "prod" ? 1 : 0);
  std::vector<bool> seen(n, false);
  std::vector<int64_t> c;
  for (int64_t k = 0; k < x.size(); ++k) {
    unravel(k, x.shape, c);
    int64_t o = 0;
    for (int64_t d = 0; d < x.rank(); ++d)
      o += reduced[d] ? 0 : c[d] * ks[d];
    if (isF) {
      double v = x.f[k];
      if (kind == "sum" || kind == "mean") acc[o] += v;
      else if (kind == "prod") acc[o] *= v;
      else if (kind == "max") acc[o] = std::isnan(v) || v > acc[o] ? v : acc[o];
      else acc[o] = std::isnan(v) || v < acc[o] ? v : acc[o];
    } else {
      int64_t v = x.i[k];
      bool u = x.isUnsigned();
      if (kind == "sum" || kind == "mean") iacc[o] = (int64_t)((uint64_t)iacc[o] + (uint64_t)v);
      else if (kind == "prod") iacc[o] = (int64_t)((uint64_t)iacc[o] * (uint64_t)v);
      else if (!seen[o]) iacc[o] = v;
      else if (kind == "max") iacc[o] = u ? (int64_t)std::max<uint64_t>(iacc[o], v) : std::max(iacc[o], v);
      else iacc[o] = u ? (int64_t)std::min<uint64_t>(iacc[o], v) : std::min(iacc[o], v);
    }
    seen[o] = true;
  }
  for (int64_t o = 0; o < n; ++o) {
    if (isF) {
      y.f[o] = kind == "mean" ? acc[o] / (double)count : acc[o];
    } else {
      if (kind == "mean")
        y.i[o] = count ? iacc[o] / count : 0;
      else if ((kind == "max" || kind == "min") && !seen[o])
        y.i[o] = kind == "max" ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max();
      else
        y.i[o] = iacc[o];
    }
  }
  return y;
}

HostTensor argMax(Operation *op, const HostTensor &x) {
  int64_t axis = normalizeAxis(attrInt(op, "axis"), x.rank());
  bool keepdims = flag(op, "keepdims"), last = flag(op, "select_last_index"), isMin = flag(op, "is_min");
  Shape outShape;
  for (int64_t d = 0; d < x.rank(); ++d)
    if (d != axis)
      outShape.push_back(x.shape[d]);
    else if (keepdims)
      outShape.push_back(1);
  HostTensor y(IntegerType::get(x.type.getContext(), 64), outShape);
  int64_t len = x.shape[axis], inner = 1, outer = 1;
  for (int64_t d = axis + 1; d < x.rank(); ++d)
    inner *= x.shape[d];
  for (int64_t d = 0; d < axis; ++d)
    outer *= x.shape[d];
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in) {
      int64_t best = 0;
      for (int64_t j = 1; j < len; ++j) {
        double v = x.num((o * len + j) * inner + in), b = x.num((o * len + best) * inner + in);
        bool better = isMin ? (v < b || (last && v == b)) : (v > b || (last && v == b));
        if (better)
          best = j;
      }
      y.i[o * inner + in] = best;
    }
  return y;
}

/// Softmax (or log-softmax) and layer norm over the trailing axes [axis, rank).
HostTensor rowOp(Operation *op, const Operands &in, bool softmax) {
  const HostTensor &x = *in[0];
  int64_t axis = normalizeAxis(attrInt(op, "axis"), x.rank());
  int64_t row = 1;
  for (int64_t d = axis; d < x.rank(); ++d)
    row *= x.shape[d];
  int64_t rows = row ? x.size() / row : 0;
  HostTensor y(x.type, x.shape);
  if (softmax) {
    double scale = f64(op, "scale", 1.0);
    bool log = flag(op, "log");
    for (int64_t r = 0; r < rows; ++r) {
      const double *p = &x.f[r * row];
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < row; ++j)
        mx = std::max(mx, scale * p[j]);
      for (int64_t j = 0; j < row; ++j)
        sum += std::exp(scale * p[j] - mx);
      for (int64_t j = 0; j < row; ++j)
        y.f[r * row + j] = log ? scale * p[j] - mx - std::log(sum) : std::exp(scale * p[j] - mx) / sum;
    }
    return y;
  }
  // layer_norm: operands input, [scale], [bias] (operandSegmentSizes).
  const HostTensor *scale = nullptr, *bias = nullptr;
  auto seg = op->getAttrOfType<DenseI32ArrayAttr>("operandSegmentSizes");
  if (seg && seg.size() == 3) {
    size_t next = 1;
    if (seg[1])
      scale = in[next++];
    if (seg[2])
      bias = in[next++];
  }
  Shape rowShape(x.shape.begin() + axis, x.shape.end());
  std::vector<int64_t> is = scale ? broadcastIndices(scale->shape, rowShape) : std::vector<int64_t>();
  std::vector<int64_t> ib = bias ? broadcastIndices(bias->shape, rowShape) : std::vector<int64_t>();
  double eps = f64(op, "epsilon", 1e-5);
  for (int64_t r = 0; r < rows; ++r) {
    const double *p = &x.f[r * row];
    double mean = 0, var = 0;
    for (int64_t j = 0; j < row; ++j)
      mean += p[j];
    mean /= row;
    for (int64_t j = 0; j < row; ++j)
      var += (p[j] - mean) * (p[j] - mean);
    var /= row;
    double inv = 1.0 / std::sqrt(var + eps);
    for (int64_t j = 0; j < row; ++j) {
      double v = (p[j] - mean) * inv;
      if (scale)
        v *= scale->f[is[j]];
      if (bias)
        v += bias->f[ib[j]];
      y.f[r * row + j] = v;
    }
  }
  return y;
}

HostTensor det(const HostTensor &x) {
  if (x.rank() < 2 || x.shape[x.rank() - 1] != x.shape[x.rank() - 2])
    throw InterpError("det of a non-square " + shapeString(x.shape));
  int64_t n = x.shape.back();
  Shape outShape(x.shape.begin(), x.shape.end() - 2);
  HostTensor y(x.type, outShape);
  for (int64_t b = 0; b < y.size(); ++b) {
    std::vector<double> a(x.f.begin() + b * n * n, x.f.begin() + (b + 1) * n * n);
    double d = 1;
    for (int64_t col = 0; col < n; ++col) {
      int64_t piv = col;
      for (int64_t r = col + 1; r < n; ++r)
        if (std::fabs(a[r * n + col]) > std::fabs(a[piv * n + col]))
          piv = r;
      if (a[piv * n + col] == 0) {
        d = 0;
        break;
      }
      if (piv != col) {
        for (int64_t j = 0; j < n; ++j)
          std::swap(a[piv * n + j], a[col * n + j]);
        d = -d;
      }
      d *= a[col * n + col];
      for (int64_t r = col + 1; r < n; ++r) {
        double f = a[r * n + col] / a[col * n + col];
        for (int64_t j = col; j < n; ++j)
          a[r * n + j] -= f * a[col * n + j];
      }
    }
    y.f[b] = d;
  }
  return y;
}

} // namespace

bool evalNeuralNet(Operation *op, const Operands &in, std::vector<HostTensor> &out) {
  StringRef name = op->getName().stripDialect();
  Type outElt = resultElementType(op);
  if (name == "matmul") {
    out.push_back(matmul(*in[0], *in[1], outElt));
  } else if (name == "conv") {
    out.push_back(conv(*in[0], *in[1], in.size() > 2 ? in[2] : nullptr, attrInts(op, "strides"),
                       attrInts(op, "pads"), attrInts(op, "dilations"), attrInt(op, "group"), outElt,
                       inputZeroPoint(op)));
  } else if (name == "conv2d_nhwc") {
    // The requantized integer form exists only after kiln-fuse-epilogues,
    // below what the interpreter runs (imported IR): no rule for it, rather
    // than the raw sums under an 8-bit type.
    if (op->hasAttr("requant_type"))
      return false;
    auto seg = op->getAttrOfType<DenseI32ArrayAttr>("operandSegmentSizes");
    const HostTensor *bias = nullptr, *residual = nullptr;
    size_t next = 2;
    if (seg && seg.size() == 4) {
      if (seg[2])
        bias = in[next++];
      if (seg[3])
        residual = in[next++];
    }
    HostTensor nchw = moveAxis(*in[0], 3, 1);
    HostTensor y = conv(nchw, *in[1], bias, attrInts(op, "strides"), attrInts(op, "pads"),
                        attrInts(op, "dilations"), attrInt(op, "group"), outElt,
                        inputZeroPoint(op));
    y = moveAxis(y, 1, 3);
    if (!outElt.isF32()) { // the integer form has no epilogue (its verifier)
      out.push_back(std::move(y));
      return true;
    }
    double lo = f64(op, "clamp_min", -INFINITY), hi = f64(op, "clamp_max", INFINITY);
    std::vector<int64_t> ir = residual ? broadcastIndices(residual->shape, y.shape) : std::vector<int64_t>();
    for (int64_t k = 0; k < y.size(); ++k) {
      double v = y.f[k] + (residual ? residual->f[ir[k]] : 0.0);
      y.f[k] = std::min(std::max(v, lo), hi);
    }
    out.push_back(std::move(y));
  } else if (name == "max_pool" || name == "avg_pool") {
    bool last = flag(op, "channels_last");
    HostTensor x = last ? moveAxis(*in[0], in[0]->rank() - 1, 1) : *in[0];
    HostTensor y = pool(op, x, name == "max_pool");
    out.push_back(last ? moveAxis(y, 1, y.rank() - 1) : std::move(y));
  } else if (name.starts_with("reduce_")) {
    out.push_back(reduce(name.drop_front(7), *in[0], attrInts(op, "axes"), flag(op, "keepdims")));
  } else if (name == "arg_max") {
    out.push_back(argMax(op, *in[0]));
  } else if (name == "softmax" || name == "layer_norm") {
    out.push_back(rowOp(op, in, name == "softmax"));
  } else if (name == "det") {
    out.push_back(det(*in[0]));
  } else {
    return false;
  }
  return true;
}

} // namespace kiln::interp
