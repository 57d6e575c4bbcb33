// Data movement, shape and selection ops, by coordinates: every output
// element is found from its own coordinates, as the ONNX specification
// words each op.
#include "HostTensor.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"

#include <algorithm>
#include <cmath>

using namespace mlir;

namespace kiln::interp {
namespace {



/// `x` with a new shape of the same number of elements.
HostTensor reshaped(const HostTensor &x, Shape shape) {
  if (numElements(shape) != x.size())
    throw InterpError("cannot reshape " + shapeString(x.shape) + " to " + shapeString(shape));
  HostTensor y = x;
  y.shape = std::move(shape);
  return y;
}


HostTensor reshape(Operation *op, const HostTensor &x, const HostTensor &shapeT) {
  std::vector<int64_t> want = toInts(shapeT);
  bool allowZero = op->getAttrOfType<BoolAttr>("allowzero") &&
                   op->getAttrOfType<BoolAttr>("allowzero").getValue();
  int64_t known = 1, infer = -1;
  for (size_t d = 0; d < want.size(); ++d) {
    if (want[d] == 0 && !allowZero) {
      if ((int64_t)d >= x.rank())
        throw InterpError("reshape copies dimension " + std::to_string(d) + " of a rank " +
                          std::to_string(x.rank()) + " input");
      want[d] = x.shape[d];
    }
    if (want[d] == -1) {
      if (infer >= 0)
        throw InterpError("reshape with two -1 dimensions");
      infer = d;
    } else if (want[d] < 0) {
      throw InterpError("reshape to a negative dimension");
    } else {
      known *= want[d];
    }
  }
  if (infer >= 0) {
    if (known == 0 || x.size() % known)
      throw InterpError("cannot infer the -1 of reshape " + shapeString(x.shape) + " to " +
                        shapeString(toInts(shapeT)));
    want[infer] = x.size() / known;
  }
  return reshaped(x, want);
}

HostTensor concat(const Operands &in, int64_t axisAttr, Type elt) {
  if (in.empty())
    throw InterpError("concat of nothing");
  int64_t rank = in[0]->rank(), axis = normalizeAxis(axisAttr, rank);
  Shape shape = in[0]->shape;
  shape[axis] = 0;
  for (const HostTensor *t : in) {
    if (t->rank() != rank)
      throw InterpError("concat of tensors of different ranks");
    shape[axis] += t->shape[axis];
  }
  HostTensor y(elt, shape);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= shape[d];
  for (int64_t d = axis + 1; d < rank; ++d)
    inner *= shape[d];
  int64_t offset = 0;
  for (const HostTensor *t : in) {
    int64_t len = t->shape[axis];
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < len * inner; ++j)
        y.copyElement((o * shape[axis] + offset) * inner + j, *t, o * len * inner + j);
    offset += len;
  }
  return y;
}

HostTensor slice(const Operands &in) {
  const HostTensor &x = *in[0];
  std::vector<int64_t> starts = toInts(*in[1]), ends = toInts(*in[2]), axes = toInts(*in[3]),
                       steps = toInts(*in[4]);
  if (axes.empty())
    for (size_t k = 0; k < starts.size(); ++k)
      axes.push_back(k);
  if (steps.empty())
    steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    throw InterpError("slice starts, ends, axes and steps differ in length");
  Shape begin(x.rank(), 0), step(x.rank(), 1), shape = x.shape;
  for (size_t k = 0; k < starts.size(); ++k) {
    int64_t a = normalizeAxis(axes[k], x.rank()), dim = x.shape[a], s = starts[k], e = ends[k],
            st = steps[k];
    if (st == 0)
      throw InterpError("slice step 0");
    if (s < 0)
      s += dim;
    if (e < 0)
      e += dim;
    if (st > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      shape[a] = e > s ? (e - s + st - 1) / st : 0;
    } else {
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      shape[a] = s > e ? (s - e + (-st) - 1) / (-st) : 0;
    }
    begin[a] = s;
    step[a] = st;
  }
  HostTensor y(x.type, shape);
  Shape xs = stridesOf(x.shape);
  std::vector<int64_t> c;
  for (int64_t k = 0; k < y.size(); ++k) {
    unravel(k, shape, c);
    int64_t at = 0;
    for (int64_t d = 0; d < x.rank(); ++d)
      at += (begin[d] + c[d] * step[d]) * xs[d];
    y.copyElement(k, x, at);
  }
  return y;
}

int64_t checkedIndex(int64_t i, int64_t dim) {
  int64_t j = i < 0 ? i + dim : i;
  if (j < 0 || j >= dim)
    throw InterpError("index " + std::to_string(i) + " out of range for a dimension of " +
                      std::to_string(dim));
  return j;
}

HostTensor gather(const HostTensor &x, const HostTensor &idx, int64_t axisAttr) {
  int64_t axis = normalizeAxis(axisAttr, x.rank());
  Shape shape(x.shape.begin(), x.shape.begin() + axis);
  shape.insert(shape.end(), idx.shape.begin(), idx.shape.end());
  shape.insert(shape.end(), x.shape.begin() + axis + 1, x.shape.end());
  HostTensor y(x.type, shape);
  int64_t outer = 1, inner = 1, n = idx.size(), dim = x.shape[axis];
  for (int64_t d = 0; d < axis; ++d)
    outer *= x.shape[d];
  for (int64_t d = axis + 1; d < x.rank(); ++d)
    inner *= x.shape[d];
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < n; ++j) {
      int64_t src = checkedIndex(idx.integer(j), dim);
      for (int64_t in = 0; in < inner; ++in)
        y.copyElement((o * n + j) * inner + in, x, (o * dim + src) * inner + in);
    }
  return y;
}

HostTensor gatherElements(const HostTensor &x, const HostTensor &idx, int64_t axisAttr) {
  int64_t axis = normalizeAxis(axisAttr, x.rank());
  if (idx.rank() != x.rank())
    throw InterpError("gather_elements indices of another rank");
  HostTensor y(x.type, idx.shape);
  Shape xs = stridesOf(x.shape);
  std::vector<int64_t> c;
  for (int64_t k = 0; k < y.size(); ++k) {
    unravel(k, idx.shape, c);
    c[axis] = checkedIndex(idx.integer(k), x.shape[axis]);
    y.copyElement(k, x, ravel(c, xs));
  }
  return y;
}

/// GatherND/ScatterND addressing: for each tuple of `idx` (its last axis),
/// the flat offset in `x` of the slice it names, and that slice's size.
struct NdAddressing {
  Shape tupleShape; ///< indices.shape[:-1]
  int64_t sliceSize = 1;
  std::vector<int64_t> offsets;
};

NdAddressing addressNd(const HostTensor &x, const HostTensor &idx, int64_t batchDims) {
  if (idx.rank() < 1)
    throw InterpError("ND indices of rank 0");
  int64_t q = idx.shape.back();
  if (batchDims + q > x.rank())
    throw InterpError("ND index tuples longer than the data's rank");
  NdAddressing a;
  a.tupleShape.assign(idx.shape.begin(), idx.shape.end() - 1);
  for (int64_t d = batchDims + q; d < x.rank(); ++d)
    a.sliceSize *= x.shape[d];
  Shape xs = stridesOf(x.shape);
  int64_t tuples = numElements(a.tupleShape), perBatch = 1;
  for (int64_t d = batchDims; d < (int64_t)a.tupleShape.size(); ++d)
    perBatch *= a.tupleShape[d];
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t batch = perBatch ? t / perBatch : 0, off = 0;
    // The batch coordinates of this tuple, in x's leading axes.
    int64_t rest = batch;
    for (int64_t d = batchDims; d-- > 0;) {
      off += (rest % x.shape[d]) * xs[d];
      rest /= x.shape[d];
    }
    for (int64_t j = 0; j < q; ++j)
      off += checkedIndex(idx.integer(t * q + j), x.shape[batchDims + j]) * xs[batchDims + j];
    a.offsets.push_back(off);
  }
  return a;
}

HostTensor gatherNd(const HostTensor &x, const HostTensor &idx, int64_t batchDims) {
  NdAddressing a = addressNd(x, idx, batchDims);
  Shape shape = a.tupleShape;
  shape.insert(shape.end(), x.shape.begin() + batchDims + idx.shape.back(), x.shape.end());
  HostTensor y(x.type, shape);
  for (size_t t = 0; t < a.offsets.size(); ++t)
    for (int64_t j = 0; j < a.sliceSize; ++j)
      y.copyElement(t * a.sliceSize + j, x, a.offsets[t] + j);
  return y;
}

void combine(HostTensor &y, int64_t at, const HostTensor &u, int64_t from, StringRef reduction) {
  if (reduction == "none") {
    y.copyElement(at, u, from);
    return;
  }
  if (y.isFloat()) {
    double a = y.f[at], b = u.f[from];
    y.f[at] = reduction == "add" ? a + b : reduction == "mul" ? a * b
              : reduction == "max" ? std::max(a, b) : std::min(a, b);
  } else {
    int64_t a = y.i[at], b = u.i[from];
    y.i[at] = reduction == "add" ? (int64_t)((uint64_t)a + (uint64_t)b)
              : reduction == "mul" ? (int64_t)((uint64_t)a * (uint64_t)b)
              : reduction == "max" ? std::max(a, b) : std::min(a, b);
  }
}

HostTensor scatterElements(Operation *op, const Operands &in) {
  const HostTensor &x = *in[0], &idx = *in[1], &upd = *in[2];
  int64_t axis = normalizeAxis(attrInt(op, "axis"), x.rank());
  StringRef reduction = op->getAttrOfType<StringAttr>("reduction").getValue();
  HostTensor y = x;
  Shape ys = stridesOf(x.shape);
  std::vector<int64_t> c;
  for (int64_t k = 0; k < idx.size(); ++k) {
    unravel(k, idx.shape, c);
    c[axis] = checkedIndex(idx.integer(k), x.shape[axis]);
    combine(y, ravel(c, ys), upd, k, reduction);
  }
  return y;
}

HostTensor scatterNd(Operation *op, const Operands &in) {
  const HostTensor &x = *in[0], &idx = *in[1], &upd = *in[2];
  StringRef reduction = op->getAttrOfType<StringAttr>("reduction").getValue();
  NdAddressing a = addressNd(x, idx, 0);
  if ((int64_t)a.offsets.size() * a.sliceSize != upd.size())
    throw InterpError("scatter_nd updates of the wrong size");
  HostTensor y = x;
  for (size_t t = 0; t < a.offsets.size(); ++t)
    for (int64_t j = 0; j < a.sliceSize; ++j)
      combine(y, a.offsets[t] + j, upd, t * a.sliceSize + j, reduction);
  return y;
}

HostTensor broadcastTo(const HostTensor &x, const Shape &shape) {
  auto idx = broadcastIndices(x.shape, shape);
  HostTensor y(x.type, shape);
  for (int64_t k = 0; k < y.size(); ++k)
    y.copyElement(k, x, idx[k]);
  return y;
}

HostTensor tile(const HostTensor &x, const HostTensor &repeats) {
  std::vector<int64_t> r = toInts(repeats);
  if ((int64_t)r.size() != x.rank())
    throw InterpError("tile repeats of the wrong length");
  Shape shape = x.shape;
  for (int64_t d = 0; d < x.rank(); ++d)
    shape[d] *= r[d];
  HostTensor y(x.type, shape);
  Shape xs = stridesOf(x.shape);
  std::vector<int64_t> c;
  for (int64_t k = 0; k < y.size(); ++k) {
    unravel(k, shape, c);
    for (int64_t d = 0; d < x.rank(); ++d)
      c[d] %= x.shape[d];
    y.copyElement(k, x, ravel(c, xs));
  }
  return y;
}

HostTensor pad(Operation *op, const Operands &in) {
  const HostTensor &x = *in[0];
  std::vector<int64_t> p = toInts(*in[1]);
  if ((int64_t)p.size() != 2 * x.rank())
    throw InterpError("pad needs 2 x rank pads");
  StringRef mode = op->getAttrOfType<StringAttr>("mode").getValue();
  const HostTensor &value = *in[2];
  Shape shape = x.shape;
  for (int64_t d = 0; d < x.rank(); ++d)
    shape[d] += p[d] + p[x.rank() + d];
  HostTensor y(x.type, shape);
  Shape xs = stridesOf(x.shape);
  std::vector<int64_t> c;
  for (int64_t k = 0; k < y.size(); ++k) {
    unravel(k, shape, c);
    bool inside = true;
    for (int64_t d = 0; d < x.rank(); ++d) {
      int64_t pos = c[d] - p[d], n = x.shape[d];
      if (pos >= 0 && pos < n) {
        c[d] = pos;
        continue;
      }
      if (mode == "constant" || n == 0) {
        inside = false;
        break;
      }
      if (mode == "edge") {
        pos = std::clamp<int64_t>(pos, 0, n - 1);
      } else if (mode == "reflect") {
        if (n == 1) {
          pos = 0;
        } else {
          int64_t period = 2 * (n - 1);
          pos = ((pos % period) + period) % period;
          if (pos >= n)
            pos = period - pos;
        }
      } else if (mode == "wrap") {
        pos = ((pos % n) + n) % n;
      } else {
        throw InterpError("pad mode '" + mode.str() + "'");
      }
      c[d] = pos;
    }
    if (inside)
      y.copyElement(k, x, ravel(c, xs));
    else if (value.size())
      y.copyElement(k, value, 0);
  }
  return y;
}

HostTensor range(const Operands &in, Type elt) {
  HostTensor y;
  if (isFloatType(elt)) {
    double s = in[0]->num(0), l = in[1]->num(0), d = in[2]->num(0);
    int64_t n = std::max<int64_t>((int64_t)std::ceil((l - s) / d), 0);
    y = HostTensor(elt, {n});
    for (int64_t k = 0; k < n; ++k)
      y.f[k] = s + k * d;
  } else {
    int64_t s = in[0]->integer(0), l = in[1]->integer(0), d = in[2]->integer(0);
    if (d == 0)
      throw InterpError("range with delta 0");
    int64_t n = d > 0 ? (l > s ? (l - s + d - 1) / d : 0) : (s > l ? (s - l - d - 1) / (-d) : 0);
    y = HostTensor(elt, {n});
    for (int64_t k = 0; k < n; ++k)
      y.i[k] = s + k * d;
  }
  return y;
}

/// The op's definition: SplitMix64 of (seed, flat index); the top 24 bits
/// (53 for f64) scaled to [0, 1), then to [low, high).
HostTensor randomUniformLike(Operation *op, const HostTensor &x, Type elt) {
  HostTensor y(elt, x.shape);
  double low = op->getAttrOfType<FloatAttr>("low").getValueAsDouble();
  double high = op->getAttrOfType<FloatAttr>("high").getValueAsDouble();
  uint64_t golden = 0x9E3779B97F4A7C15ull, seedMix = (uint64_t)attrInt(op, "seed") * golden;
  unsigned bits = elt.isF64() ? 53 : 24;
  for (int64_t k = 0; k < y.size(); ++k) {
    uint64_t z = (uint64_t)k + seedMix + golden;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z = z ^ (z >> 31);
    double u = std::ldexp((double)(z >> (64 - bits)), -(int)bits);
    y.f[k] = low + u * (high - low);
  }
  return y;
}

/// ONNX NonMaxSuppression: per (batch, class), candidates above the score
/// threshold by descending score (ties: lower index first); each kept box
/// suppresses later ones whose IoU with it exceeds the threshold.
HostTensor nonMaxSuppression(Operation *op, const Operands &in, Type elt) {
  const HostTensor &boxes = *in[0], &scores = *in[1];
  int64_t batches = boxes.shape[0], n = boxes.shape[1], classes = scores.shape[1];
  int64_t perClass = std::clamp<int64_t>(attrInt(op, "max_output_boxes_per_class"), 0, n);
  double iouMax = op->getAttrOfType<FloatAttr>("iou_threshold").getValueAsDouble();
  double minScore = op->getAttrOfType<FloatAttr>("score_threshold").getValueAsDouble();
  bool center = attrInt(op, "center_point_box") != 0;
  int64_t capacity = batches * classes * perClass;
  HostTensor y(elt, {1 + 3 * capacity + n});
  auto corners = [&](int64_t b, int64_t i, float c[4]) { // y0, x0, y1, x1
    const double *p = &boxes.f[(b * n + i) * 4];
    if (center) {
      float xc = p[0], yc = p[1], w = p[2], h = p[3];
      c[0] = yc - h / 2, c[1] = xc - w / 2, c[2] = yc + h / 2, c[3] = xc + w / 2;
    } else {
      c[0] = std::min(p[0], p[2]), c[1] = std::min(p[1], p[3]);
      c[2] = std::max(p[0], p[2]), c[3] = std::max(p[1], p[3]);
    }
  };
  auto iou = [&](int64_t b, int64_t i, int64_t j) {
    float a[4], c[4];
    corners(b, i, a);
    corners(b, j, c);
    float h = std::min(a[2], c[2]) - std::max(a[0], c[0]);
    float w = std::min(a[3], c[3]) - std::max(a[1], c[1]);
    if (h <= 0 || w <= 0)
      return 0.0f;
    float inter = h * w, areaA = (a[2] - a[0]) * (a[3] - a[1]), areaC = (c[2] - c[0]) * (c[3] - c[1]);
    float uni = areaA + areaC - inter;
    return areaA <= 0 || areaC <= 0 || uni <= 0 ? 0.0f : inter / uni;
  };
  int64_t count = 0;
  for (int64_t b = 0; b < batches; ++b)
    for (int64_t c = 0; c < classes; ++c) {
      const double *s = &scores.f[(b * classes + c) * n];
      std::vector<int64_t> cand;
      for (int64_t i = 0; i < n; ++i)
        if ((float)s[i] > (float)minScore)
          cand.push_back(i);
      std::stable_sort(cand.begin(), cand.end(), [&](int64_t p, int64_t q) { return s[p] > s[q]; });
      std::vector<int64_t> kept;
      for (int64_t i : cand) {
        if ((int64_t)kept.size() >= perClass)
          break;
        bool keep = true;
        for (int64_t j : kept)
          keep = keep && !(iou(b, i, j) > (float)iouMax);
        if (!keep)
          continue;
        kept.push_back(i);
        y.i[1 + 3 * count] = b, y.i[2 + 3 * count] = c, y.i[3 + 3 * count] = i;
        ++count;
      }
    }
  y.i[0] = count;
  return y;
}

/// ONNX NonZero into the op's buffer: the count, then `rank` rows of
/// `numel` coordinates in row-major order of the non-zero elements.
HostTensor nonZero(const HostTensor &mask, Type elt) {
  int64_t n = mask.size(), rank = mask.rank();
  HostTensor y(elt, {1 + rank * n});
  std::vector<int64_t> c;
  int64_t count = 0;
  for (int64_t k = 0; k < n; ++k) {
    if (mask.num(k) == 0)
      continue;
    unravel(k, mask.shape, c);
    for (int64_t d = 0; d < rank; ++d)
      y.i[1 + d * n + count] = c[d];
    ++count;
  }
  y.i[0] = count;
  return y;
}

/// kiln.top_k: per line along the axis, the positions of the best
/// min(k, valid) of its first `valid` entries (ties: lower position first),
/// `capacity` slots, zero past them; then the kernel's `dim` of scratch.
HostTensor topK(Operation *op, const Operands &in, Type elt) {
  const HostTensor &x = *in[0];
  int64_t axis = attrInt(op, "axis"), capacity = attrInt(op, "capacity");
  bool largest = op->getAttrOfType<BoolAttr>("largest").getValue();
  int64_t dim = x.shape.at(axis), outer = 1, inner = 1;
  for (int64_t d = 0; d < x.rank(); ++d)
    if (d != axis)
      (d < axis ? outer : inner) *= x.shape[d];
  int64_t n = std::clamp<int64_t>(in[2]->integer(0), 0, dim);
  int64_t m = std::min({std::max<int64_t>(in[1]->integer(0), 0), n, capacity});
  HostTensor y(elt, {outer * capacity * inner + dim});
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < inner; ++c) {
      auto at = [&](int64_t i) { return (float)x.num((o * dim + i) * inner + c); };
      std::vector<int64_t> order(n);
      for (int64_t i = 0; i < n; ++i)
        order[i] = i;
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
        return largest ? at(a) > at(b) : at(a) < at(b);
      });
      for (int64_t j = 0; j < m; ++j)
        y.i[(o * capacity + j) * inner + c] = order[j];
    }
  return y;
}

} // namespace

bool evalDataMovement(Operation *op, const Operands &in, std::vector<HostTensor> &out) {
  StringRef name = op->getName().stripDialect();
  Type elt = resultElementType(op);
  if (name == "transpose") {
    out.push_back(transpose(*in[0], attrInts(op, "perm")));
  } else if (name == "reshape") {
    out.push_back(reshape(op, *in[0], *in[1]));
  } else if (name == "unsqueeze") {
    std::vector<int64_t> axes = attrInts(op, "axes");
    int64_t rank = in[0]->rank() + (int64_t)axes.size();
    std::vector<bool> added(rank, false);
    for (int64_t a : axes)
      added[normalizeAxis(a, rank)] = true;
    Shape shape;
    size_t next = 0;
    for (int64_t d = 0; d < rank; ++d)
      shape.push_back(added[d] ? 1 : in[0]->shape.at(next++));
    out.push_back(reshaped(*in[0], shape));
  } else if (name == "squeeze") {
    std::vector<int64_t> axes = attrInts(op, "axes");
    const HostTensor &x = *in[0];
    std::vector<bool> drop(x.rank(), axes.empty());
    for (int64_t a : axes)
      drop[normalizeAxis(a, x.rank())] = true;
    Shape shape;
    for (int64_t d = 0; d < x.rank(); ++d) {
      if (drop[d] && x.shape[d] != 1 && !axes.empty())
        throw InterpError("squeeze of a dimension of size " + std::to_string(x.shape[d]));
      if (!(drop[d] && x.shape[d] == 1))
        shape.push_back(x.shape[d]);
    }
    out.push_back(reshaped(x, shape));
  } else if (name == "flatten") {
    const HostTensor &x = *in[0];
    int64_t axis = attrInt(op, "axis");
    if (axis < 0)
      axis += x.rank();
    if (axis < 0 || axis > x.rank())
      throw InterpError("flatten axis out of range");
    int64_t lead = 1;
    for (int64_t d = 0; d < axis; ++d)
      lead *= x.shape[d];
    out.push_back(reshaped(x, {lead, lead ? x.size() / lead : 0}));
  } else if (name == "concat") {
    out.push_back(concat(in, attrInt(op, "axis"), elt));
  } else if (name == "slice") {
    out.push_back(slice(in));
  } else if (name == "gather") {
    out.push_back(gather(*in[0], *in[1], attrInt(op, "axis")));
  } else if (name == "gather_elements") {
    out.push_back(gatherElements(*in[0], *in[1], attrInt(op, "axis")));
  } else if (name == "gather_nd") {
    out.push_back(gatherNd(*in[0], *in[1], attrInt(op, "batch_dims")));
  } else if (name == "scatter_elements") {
    out.push_back(scatterElements(op, in));
  } else if (name == "scatter_nd") {
    out.push_back(scatterNd(op, in));
  } else if (name == "expand") {
    out.push_back(broadcastTo(*in[0], broadcastShapes(in[0]->shape, toInts(*in[1]))));
  } else if (name == "tile") {
    out.push_back(tile(*in[0], *in[1]));
  } else if (name == "pad") {
    out.push_back(pad(op, in));
  } else if (name == "shape") {
    int64_t rank = in[0]->rank(), start = attrInt(op, "start"), end = attrInt(op, "end");
    start = std::clamp<int64_t>(start < 0 ? start + rank : start, 0, rank);
    end = std::clamp<int64_t>(end < 0 ? end + rank : end, 0, rank);
    HostTensor y(elt, {std::max<int64_t>(end - start, 0)});
    for (int64_t d = start; d < end; ++d)
      y.i[d - start] = in[0]->shape[d];
    out.push_back(std::move(y));
  } else if (name == "constant_of_shape") {
    HostTensor y(elt, toInts(*in[0]));
    auto value = op->getAttrOfType<DenseElementsAttr>("value");
    if (!value)
      throw InterpError("constant_of_shape without a dense value");
    double v = 0;
    int64_t iv = 0;
    if (y.isFloat())
      v = (*value.getValues<llvm::APFloat>().begin()).convertToDouble();
    else
      iv = (*value.getValues<llvm::APInt>().begin()).getSExtValue();
    for (int64_t k = 0; k < y.size(); ++k)
      y.isFloat() ? (void)(y.f[k] = v) : (void)(y.i[k] = iv);
    out.push_back(std::move(y));
  } else if (name == "range") {
    out.push_back(range(in, elt));
  } else if (name == "random_uniform_like") {
    out.push_back(randomUniformLike(op, *in[0], elt));
  } else if (name == "non_max_suppression") {
    out.push_back(nonMaxSuppression(op, in, elt));
  } else if (name == "non_zero") {
    out.push_back(nonZero(*in[0], elt));
  } else if (name == "top_k") {
    out.push_back(topK(op, in, elt));
  } else {
    return false;
  }
  return true;
}

} // namespace kiln::interp
