// Import rules for ONNX quantization: QuantizeLinear, DequantizeLinear,
// DynamicQuantizeLinear, MatMulInteger and QLinearMatMul, decomposed into
// kiln elementwise ops, reductions and an integer matrix product.
//
// Quantizing rounds half to even (kiln.round) and saturates to the range of
// the zero point's type before the cast, as ONNX specifies. Integer matrix
// products and convolutions are exact: in f32 on the CPU kernels when every
// partial sum provably stays below 2^24 (exactInF32), else in i32.
#include "NodeImporter.h"
#include "QuantizeSupport.h"

#include "mlir/IR/Matchers.h"

#include <cmath>

using namespace mlir;

namespace kiln {

using Outs = SmallVectorImpl<Value>;

/// A quantization parameter pair as ONNX defines it, checked before it is
/// used, so that a broken model is an error naming the node and the
/// parameter instead of a broadcast failure or silent infinities: the scale
/// (null for MatMulInteger and ConvInteger, which have zero points alone)
/// has one value, or one per entry of the quantized tensor's axis
/// (`axisSize`, -1 when unknown; `perEntry` false where only one is
/// allowed), the zero point as many and the quantized tensor's element
/// type (`quantized`, null where the zero point decides it); constant
/// scales are finite and not 0 (their reciprocal scales the result).
LogicalResult checkQuantParams(NodeImporter &n, StringRef what, Value scale, Value zp,
                               Type quantized, int64_t axisSize, bool perEntry,
                               StringRef axisText) {
  auto count = [&](Value v) -> int64_t {
    auto t = NodeImporter::rankedType(v);
    return v && t && t.hasStaticShape() ? t.getNumElements() : -1;
  };
  // Each of the pair: one value, or one per entry of the axis.
  for (auto [v, name] : {std::pair(scale, "scale"), std::pair(zp, "zero point")}) {
    int64_t values = count(v);
    if (values <= 1)
      continue;
    if (!perEntry)
      return n.error(Twine(what) + " " + name + " has " + Twine(values) +
                     " values; it must have one");
    if (axisSize >= 0 && values != axisSize)
      return n.error(Twine(what) + " " + name + " has " + Twine(values) + " values for the " +
                     Twine(axisSize) + " entries of " + axisText +
                     "; give one per entry, or one for all");
  }
  if (scale && zp && count(zp) >= 0 && count(scale) >= 0 && count(zp) != count(scale))
    return n.error(Twine(what) + " zero point has " + Twine(count(zp)) + " values and its scale " +
                   Twine(count(scale)) + "; they must have as many");
  if (zp && quantized && NodeImporter::elementType(zp) != quantized) {
    std::string z, q;
    llvm::raw_string_ostream(z) << NodeImporter::elementType(zp);
    llvm::raw_string_ostream(q) << quantized;
    return n.error(Twine(what) + " zero point is " + z + " but the values it offsets are " + q);
  }
  DenseElementsAttr values;
  if (scale && matchPattern(scale, m_Constant(&values)) &&
      isa<FloatType>(values.getElementType()))
    for (APFloat v : values.getValues<APFloat>())
      if (v.isZero() || !v.isFinite())
        return n.error(Twine(what) + " scale is " + (v.isZero() ? "0" : "not finite") +
                       ": a quantization scale must be a finite, non-zero number");
  return success();
}

namespace {

/// The size of `v`'s axis `axis` (negative counts from the end), -1 when
/// unknown.
int64_t axisSizeOf(NodeImporter &n, Value v, int64_t axis) {
  auto t = NodeImporter::rankedType(v);
  if (!t || axis < -t.getRank() || axis >= t.getRank())
    return -1;
  int64_t d = t.getDimSize(axis < 0 ? axis + t.getRank() : axis);
  return ShapedType::isDynamic(d) ? -1 : d;
}

/// A per-axis parameter (scale or zero point) of a rank-1 shape laid along
/// `axis` of a rank-`rank` tensor; a scalar or one-element one as it is.
FailureOr<Value> alongAxis(NodeImporter &n, Value param, int64_t rank, int64_t axis) {
  auto t = NodeImporter::rankedType(param);
  if (!t)
    return n.error("a scale or zero point of unknown rank");
  if (t.getRank() == 0 || (t.getRank() == 1 && t.getDimSize(0) == 1))
    return param;
  if (t.getRank() != 1)
    return n.error("a per-axis scale or zero point must be one-dimensional");
  auto normalized = n.normalizeAxis(axis, rank);
  if (!normalized)
    return failure();
  return n.alongAxis(param, rank, *normalized);
}

/// `v` along `axis` when it is a vector of several values; a scalar or a
/// one-element vector broadcasts as it is.
Value perVector(NodeImporter &n, Value v, int64_t rank, int64_t axis) {
  auto t = NodeImporter::rankedType(v);
  if (!t || t.getRank() != 1 || t.getDimSize(0) == 1)
    return v;
  return n.alongAxis(v, rank, axis);
}

} // namespace

/// round_half_even(v) + zp, saturated to the range of `to` and cast to it.
Value saturateCast(NodeImporter &n, Value v, Value zeroPointF, Type to) {
  Value r = n.make<RoundOp>(v);
  if (zeroPointF)
    r = n.make<AddOp>(r, zeroPointF);
  unsigned bits = to.getIntOrFloatBitWidth();
  bool isUnsigned = to.isUnsignedInteger();
  double lo = isUnsigned ? 0.0 : -std::ldexp(1.0, bits - 1);
  double hi = isUnsigned ? std::ldexp(1.0, bits) - 1 : std::ldexp(1.0, bits - 1) - 1;
  r = n.make<MinOp>(n.make<MaxOp>(r, n.scalarLike(r, lo)), n.scalarLike(r, hi));
  return n.make<CastOp>(r, TypeAttr::get(to));
}

Value toFloat(NodeImporter &n, Value v, Type f) {
  if (!v || NodeImporter::elementType(v) == f)
    return v;
  return n.make<CastOp>(v, TypeAttr::get(f));
}

namespace {

LogicalResult quantizeLinear(NodeImporter &n, Outs &out) {
  Value x = n.required(0), scale = n.required(1), zp = n.input(2);
  auto rank = n.rankOf(x);
  if (!rank || n.failed())
    return failure();
  Type f = NodeImporter::elementType(x);
  Type to = zp ? NodeImporter::elementType(zp)
               : IntegerType::get(n.b.getContext(), 8, IntegerType::Unsigned);
  if (!to.isInteger(8))
    return n.error("QuantizeLinear to an element type other than int8 or uint8 is not supported");
  int64_t axis = n.getInt("axis", 1);
  if (failed(checkQuantParams(n, "the", scale, zp, Type(), axisSizeOf(n, x, axis), true,
                              "axis " + std::to_string(axis) + " of the input")))
    return failure();
  auto s = alongAxis(n, scale, *rank, axis);
  if (failed(s))
    return failure();
  Value zpF;
  if (zp) {
    auto z = alongAxis(n, zp, *rank, axis);
    if (failed(z))
      return failure();
    zpF = toFloat(n, *z, f);
  }
  out.push_back(saturateCast(n, n.make<DivOp>(x, toFloat(n, *s, f)), zpF, to));
  return success();
}

LogicalResult dequantizeLinear(NodeImporter &n, Outs &out) {
  Value x = n.required(0), scale = n.required(1), zp = n.input(2);
  auto rank = n.rankOf(x);
  if (!rank || n.failed())
    return failure();
  Type f = NodeImporter::elementType(scale);
  int64_t axis = n.getInt("axis", 1);
  if (failed(checkQuantParams(n, "the", scale, zp, NodeImporter::elementType(x),
                              axisSizeOf(n, x, axis), true,
                              "axis " + std::to_string(axis) + " of the input")))
    return failure();
  auto s = alongAxis(n, scale, *rank, axis);
  if (failed(s))
    return failure();
  Value v = toFloat(n, x, f);
  if (zp) {
    auto z = alongAxis(n, zp, *rank, axis);
    if (failed(z))
      return failure();
    v = n.make<SubOp>(v, toFloat(n, *z, f));
  }
  out.push_back(n.make<MulOp>(v, *s));
  return success();
}

/// uint8 quantization with a scale and zero point that cover [min(x, 0),
/// max(x, 0)].
LogicalResult dynamicQuantizeLinear(NodeImporter &n, Outs &out) {
  Value x = n.required(0);
  auto rank = n.rankOf(x);
  if (!rank)
    return failure();
  auto all = n.b.getDenseI64ArrayAttr(llvm::to_vector(llvm::seq<int64_t>(0, *rank)));
  auto drop = n.b.getBoolAttr(false);
  Value zero = n.scalarLike(x, 0.0);
  Value lo = n.make<MinOp>(n.make<ReduceMinOp>(x, all, drop), zero);
  Value hi = n.make<MaxOp>(n.make<ReduceMaxOp>(x, all, drop), zero);
  Value scale = n.make<DivOp>(n.make<SubOp>(hi, lo), n.scalarLike(x, 255.0));
  Type u8 = IntegerType::get(n.b.getContext(), 8, IntegerType::Unsigned);
  Value zp = saturateCast(n, n.make<NegOp>(n.make<DivOp>(lo, scale)), Value(), u8);
  Value y = saturateCast(n, n.make<DivOp>(x, scale),
                         toFloat(n, zp, NodeImporter::elementType(x)), u8);
  out.append({y, scale, zp});
  return success();
}

/// Whether a product of 8-bit operands centred on their zero points,
/// reducing over the weight's axes `reduced` (for each index of its axis
/// `kept`), plus `bias`, stays an exact integer in f32 (below 2^24 in every
/// partial sum): then it runs on the f32 kernels, as fast as a float model,
/// and gives what i32 accumulation gives. The activations' centred values
/// are at most 255 in magnitude; the weights' are summed per output when
/// they are constants, else bounded by 255 each.
bool exactInF32(NodeImporter &n, Value a, Value w, Value wZp, int64_t kept, Value bias) {
  auto at = NodeImporter::rankedType(a), wt = NodeImporter::rankedType(w);
  if (!at || !wt || !wt.hasStaticShape() || wt.getRank() < 2 ||
      at.getElementTypeBitWidth() > 8 || wt.getElementTypeBitWidth() > 8)
    return false;
  constexpr double kExact = 16777216.0; // 2^24
  int64_t outputs = wt.getDimSize(kept), reduced = wt.getNumElements() / std::max<int64_t>(outputs, 1);
  SmallVector<double> sums(outputs, 255.0 * reduced); // bound for run-time weights
  DenseElementsAttr values;
  if (matchPattern(w, m_Constant(&values))) {
    // One zero point for all outputs or one per output; anything else takes
    // the i32 path.
    std::optional<SmallVector<int64_t>> zps =
        wZp ? getConstantInts(wZp) : std::optional<SmallVector<int64_t>>(SmallVector<int64_t>{0});
    if (!zps || (zps->size() != 1 && (int64_t)zps->size() != outputs))
      return false;
    bool isUnsigned = wt.getElementType().isUnsignedInteger();
    llvm::fill(sums, 0.0);
    SmallVector<int64_t> strides(wt.getRank(), 1);
    for (int64_t d = wt.getRank() - 1; d > 0; --d)
      strides[d - 1] = strides[d] * wt.getDimSize(d);
    int64_t flat = 0;
    for (const APInt &v : values.getValues<APInt>()) {
      int64_t out = (flat++ / strides[kept]) % outputs;
      int64_t zp = zps->size() == 1 ? (*zps)[0] : (*zps)[out];
      int64_t q = isUnsigned ? (int64_t)v.getZExtValue() : v.getSExtValue();
      sums[out] += std::abs(q - zp);
    }
  }
  std::optional<SmallVector<int64_t>> biases =
      bias ? getConstantInts(bias) : std::optional<SmallVector<int64_t>>(SmallVector<int64_t>{0});
  if (!biases || (biases->size() != 1 && (int64_t)biases->size() != outputs))
    return false;
  for (int64_t out = 0; out < outputs; ++out) {
    int64_t b = biases->size() == 1 ? (*biases)[0] : (*biases)[out];
    if (255.0 * sums[out] + std::abs((double)b) >= kExact)
      return false;
  }
  return true;
}

/// (a - a_zp) in `t` (i32, or f32 for exact f32 accumulation); a per-row
/// zero point of a matrix lies along its rows.
Value centered(NodeImporter &n, Value a, Value zp, bool rowsOfA, Type t) {
  Value v = n.make<CastOp>(a, TypeAttr::get(t));
  if (!zp)
    return v;
  Value z = n.make<CastOp>(zp, TypeAttr::get(t));
  auto zt = NodeImporter::rankedType(z);
  if (rowsOfA && zt && zt.getRank() == 1 && zt.getDimSize(0) != 1)
    z = n.make<UnsqueezeOp>(z, n.b.getDenseI64ArrayAttr({1})); // [M] -> [M, 1]
  return n.make<SubOp>(v, z);
}

Value toI32(NodeImporter &n, Value v) {
  if (!v || NodeImporter::elementType(v).isInteger(32))
    return v;
  return n.make<CastOp>(v, TypeAttr::get(n.b.getI32Type()));
}

/// Splits [0, depth) into contiguous ranges over each of which every one of
/// the `outputs` sums of `magnitude(k, o)` (an output's |w - w_zp| at
/// reduction index k) keeps 255 times itself below 2^24: a product of 8-bit
/// operands over such a range is exact in f32. Empty when one index alone is
/// too much.
SmallVector<std::pair<int64_t, int64_t>>
exactRanges(int64_t depth, int64_t outputs, function_ref<double(int64_t, int64_t)> magnitude) {
  constexpr double kExact = 16777216.0 / 255.0; // 2^24 over the largest |x - x_zp|
  SmallVector<std::pair<int64_t, int64_t>> ranges;
  SmallVector<double> sums(outputs, 0.0);
  int64_t start = 0;
  for (int64_t k = 0; k < depth; ++k) {
    bool fits = true;
    for (int64_t o = 0; fits && o < outputs; ++o)
      fits = sums[o] + magnitude(k, o) < kExact;
    if (!fits) {
      if (k == start)
        return {};
      ranges.push_back({start, k});
      start = k;
      llvm::fill(sums, 0.0);
    }
    for (int64_t o = 0; o < outputs; ++o)
      sums[o] += magnitude(k, o);
  }
  ranges.push_back({start, depth});
  return ranges;
}

/// A constant weight split for exact f32 products: the ranges of its
/// reduction axis (exactRanges) and its values less their zero points,
/// row-major, from which each range's weights are cut.
struct SplitWeights {
  SmallVector<std::pair<int64_t, int64_t>> ranges;
  std::vector<float> centered;
};

/// The ranges of rows of a constant matrix B [K, N] over which (a - a_zp)
/// (B - b_zp) stays exact in f32 (255 x the range's sum of |b - b_zp| below
/// 2^24 in every column), as exactChannelRanges has them for convolutions.
/// No ranges when there is no such split.
SplitWeights exactRowRanges(Value a, Value b, Value bZp) {
  auto at = NodeImporter::rankedType(a), bt = NodeImporter::rankedType(b);
  DenseElementsAttr values;
  if (!at || !bt || !bt.hasStaticShape() || bt.getRank() != 2 ||
      at.getElementTypeBitWidth() > 8 || bt.getElementTypeBitWidth() > 8 ||
      !matchPattern(b, m_Constant(&values)))
    return {};
  int64_t rows = bt.getDimSize(0), cols = bt.getDimSize(1);
  std::optional<SmallVector<int64_t>> zps =
      bZp ? getConstantInts(bZp) : std::optional<SmallVector<int64_t>>(SmallVector<int64_t>{0});
  if (!zps || (zps->size() != 1 && (int64_t)zps->size() != cols))
    return {};
  SplitWeights out;
  out.centered.reserve(bt.getNumElements());
  bool isUnsigned = bt.getElementType().isUnsignedInteger();
  int64_t flat = 0;
  for (const APInt &v : values.getValues<APInt>()) {
    int64_t j = flat++ % cols;
    int64_t zp = zps->size() == 1 ? (*zps)[0] : (*zps)[j];
    out.centered.push_back(
        (float)((isUnsigned ? (int64_t)v.getZExtValue() : v.getSExtValue()) - zp));
  }
  out.ranges = exactRanges(rows, cols, [&](int64_t k, int64_t j) {
    return std::abs(out.centered[k * cols + j]);
  });
  return out;
}

/// (a - a_zp) (b - b_zp), in i32, or in f32 where that is exact (B's
/// columns are the outputs). A constant B too deep for one exact f32 sum
/// (a transformer's 3072-deep projection) is split into ranges of its rows,
/// one exact f32 product each, summed in i32.
/// The quantized product on the int8 kernels (on the CPU a 1x1 integer
/// convolution over A's rows, kiln-fuse-epilogues' MatMulToConv): A 8-bit
/// with one zero point, constant or known only at run time (dynamic
/// quantization's), B a constant s8 matrix whose zero points are all 0.
/// A x B in i32 less a_zp times B's column sums: exact. None otherwise.
Value int8MatMul(NodeImporter &n, Value a, Value aZp, Value b, Value bZp) {
  auto at = NodeImporter::rankedType(a), bt = NodeImporter::rankedType(b);
  if (!at || !bt || at.getRank() < 2 || bt.getRank() != 2 || !bt.hasStaticShape() ||
      at.isDynamicDim(at.getRank() - 1) || !at.getElementType().isInteger(8))
    return {};
  Type be = bt.getElementType();
  DenseElementsAttr values;
  if (!be.isInteger(8) || be.isUnsignedInteger() || !matchPattern(b, m_Constant(&values)))
    return {};
  if (bZp) {
    std::optional<SmallVector<int64_t>> zps = getConstantInts(bZp);
    if (!zps || llvm::any_of(*zps, [](int64_t z) { return z != 0; }))
      return {};
  }
  if (aZp) {
    auto zt = NodeImporter::rankedType(aZp);
    if (!zt || !zt.hasStaticShape() || zt.getNumElements() != 1)
      return {};
  }
  Value y = n.make<MatMulOp>(a, b);
  if (!aZp)
    return y;
  if (std::optional<SmallVector<int64_t>> z = getConstantInts(aZp); z && (*z)[0] == 0)
    return y;
  int64_t K = bt.getDimSize(0), N = bt.getDimSize(1);
  SmallVector<int32_t> sums(N, 0);
  int64_t flat = 0;
  for (const APInt &v : values.getValues<APInt>())
    sums[flat++ % N] += (int32_t)v.getSExtValue();
  (void)K;
  Value colsums = n.constant(
      DenseElementsAttr::get(RankedTensorType::get({N}, n.b.getI32Type()), ArrayRef(sums)));
  Value z = n.make<CastOp>(aZp, TypeAttr::get(n.b.getI32Type()));
  if (auto zt = NodeImporter::rankedType(z); zt && zt.getRank() > 1)
    z = n.make<ReshapeOp>(z, n.i64Tensor({1}), n.b.getBoolAttr(false));
  return n.make<SubOp>(y, n.make<MulOp>(z, colsums));
}

Value centeredMatMul(NodeImporter &n, Value a, Value aZp, Value b, Value bZp) {
  if (Value y = int8MatMul(n, a, aZp, b, bZp); y || n.failed())
    return y;
  auto bt = NodeImporter::rankedType(b);
  bool f32 = bt && bt.getRank() >= 1 && exactInF32(n, a, b, bZp, bt.getRank() - 1, Value());
  SplitWeights split;
  if (!f32)
    split = exactRowRanges(a, b, bZp);
  auto at = NodeImporter::rankedType(a);
  if (split.ranges.size() > 1 && at && at.getRank() >= 1) {
    Value ac = centered(n, a, aZp, true, n.b.getF32Type());
    int64_t cols = bt.getDimSize(1), last = at.getRank() - 1;
    Value sum;
    for (auto [k0, k1] : split.ranges) {
      Value br = n.constant(DenseElementsAttr::get(
          RankedTensorType::get({k1 - k0, cols}, n.b.getF32Type()),
          ArrayRef<float>(split.centered.data() + k0 * cols, (k1 - k0) * cols)));
      Value ar = n.make<SliceOp>(ac, n.i64Tensor({k0}), n.i64Tensor({k1}), n.i64Tensor({last}),
                                 n.i64Tensor({1}));
      Value part = n.make<CastOp>(n.make<MatMulOp>(ar, br), TypeAttr::get(n.b.getI32Type()));
      sum = sum ? n.make<AddOp>(sum, part) : part;
    }
    return sum;
  }
  Type t = f32 ? Type(n.b.getF32Type()) : Type(n.b.getI32Type());
  return n.make<MatMulOp>(centered(n, a, aZp, true, t), centered(n, b, bZp, false, t));
}

LogicalResult matMulInteger(NodeImporter &n, Outs &out) {
  Value a = n.required(0), b = n.required(1);
  if (n.failed())
    return failure();
  if (failed(checkQuantParams(n, "a's", Value(), n.input(2), NodeImporter::elementType(a),
                              axisSizeOf(n, a, -2), true, "a's rows (its second-to-last axis)")) ||
      failed(checkQuantParams(n, "b's", Value(), n.input(3), NodeImporter::elementType(b),
                              axisSizeOf(n, b, -1), true, "b's columns (its last axis)")))
    return failure();
  out.push_back(toI32(n, centeredMatMul(n, a, n.input(2), b, n.input(3))));
  return success();
}

/// quantize((a - a_zp) (b - b_zp) * a_scale * b_scale / y_scale, y_zp)
LogicalResult qlinearMatMul(NodeImporter &n, Outs &out) {
  Value a = n.required(0), aScale = n.required(1), aZp = n.required(2), b = n.required(3),
        bScale = n.required(4), bZp = n.required(5), yScale = n.required(6), yZp = n.required(7);
  if (n.failed())
    return failure();
  // a's parameters per row (its second-to-last axis), b's per column (its
  // last), y's one for all.
  if (failed(checkQuantParams(n, "a's", aScale, aZp, NodeImporter::elementType(a),
                              axisSizeOf(n, a, -2), true, "a's rows (its second-to-last axis)")) ||
      failed(checkQuantParams(n, "b's", bScale, bZp, NodeImporter::elementType(b),
                              axisSizeOf(n, b, -1), true, "b's columns (its last axis)")) ||
      failed(checkQuantParams(n, "y's", yScale, yZp, Type(), -1, false, "")))
    return failure();
  Type f = NodeImporter::elementType(aScale);
  Value acc = centeredMatMul(n, a, aZp, b, bZp);
  auto st = NodeImporter::rankedType(aScale);
  if (st && st.getRank() == 1 && st.getDimSize(0) != 1)
    aScale = n.make<UnsqueezeOp>(aScale, n.b.getDenseI64ArrayAttr({1}));
  Value factor = n.make<DivOp>(n.make<MulOp>(aScale, bScale), yScale);
  Value v = n.make<MulOp>(n.make<CastOp>(acc, TypeAttr::get(f)), factor);
  out.push_back(saturateCast(n, v, toFloat(n, yZp, f), NodeImporter::elementType(yZp)));
  return success();
}

/// Contiguous ranges of the input channels of a constant weight [O, C, k...]
/// over which the product of 8-bit operands stays exact in f32 (255 x the
/// range's sum of |w - w_zp| below 2^24 for every output; exactInF32 for
/// the whole), in order; empty when there is no such split (run-time
/// weights, groups, one channel alone too large).
SplitWeights exactChannelRanges(NodeImporter &n, Value x, Value w, Value wZp) {
  auto xt = NodeImporter::rankedType(x), wt = NodeImporter::rankedType(w);
  DenseElementsAttr values;
  if (!xt || !wt || !wt.hasStaticShape() || wt.getRank() < 3 || n.getInt("group", 1) != 1 ||
      xt.getElementTypeBitWidth() > 8 || wt.getElementTypeBitWidth() > 8 ||
      !matchPattern(w, m_Constant(&values)))
    return {};
  int64_t outputs = wt.getDimSize(0), channels = wt.getDimSize(1);
  int64_t window = wt.getNumElements() / std::max<int64_t>(outputs * channels, 1);
  std::optional<SmallVector<int64_t>> zps =
      wZp ? getConstantInts(wZp) : std::optional<SmallVector<int64_t>>(SmallVector<int64_t>{0});
  if (!zps || (zps->size() != 1 && (int64_t)zps->size() != outputs))
    return {};
  // perChannel[o * C + c]: sum over the window of |w - zp| for output o.
  SmallVector<double> perChannel(outputs * channels, 0.0);
  SplitWeights out;
  out.centered.reserve(wt.getNumElements());
  bool isUnsigned = wt.getElementType().isUnsignedInteger();
  int64_t flat = 0;
  for (const APInt &v : values.getValues<APInt>()) {
    int64_t oc = flat++ / window, o = oc / channels;
    int64_t zp = zps->size() == 1 ? (*zps)[0] : (*zps)[o];
    int64_t centered = (isUnsigned ? (int64_t)v.getZExtValue() : v.getSExtValue()) - zp;
    out.centered.push_back((float)centered);
    perChannel[oc] += std::abs(centered);
  }
  out.ranges = exactRanges(channels, outputs, [&](int64_t c, int64_t o) {
    return perChannel[o * channels + c];
  });
  return out;
}

/// The convolution of (x - x_zp) and (w - w_zp), with zero padding of the
/// centred input (the padded positions contribute nothing, as in ONNX's
/// reference), plus `bias` (i32, per output channel) if given. In f32 on the
/// CPU kernels when that is exact (exactInF32), else accumulated in i32 on
/// the generic loop path. The result is i32 or f32: integer-valued either way.
/// The integer convolution (kiln.conv with an 8-bit input, i8 weights and
/// an i32 result, `input_zero_point`), which the CPU runs on the int8
/// kernels (VNNI where the CPU has it: twice the f32 rate, a quarter of the
/// bytes), where its form is ONNX Runtime's quantize_static output: an
/// ungrouped 2-D convolution, u8 or s8 input with one constant zero point,
/// constant s8 weights whose zero points are all 0 (symmetric, per tensor
/// or per channel), a constant i32 bias; ungrouped or depthwise (one input
/// channel per output, at most 512 taps: the depthwise kernel sums in f32,
/// exactly below 2^24). None otherwise (the exact-f32 or i32 paths below).
/// Other grouped convolutions stay there: a panel of 32 output channels
/// over 1-4 input channels wastes the kernel.
Value int8Conv(NodeImporter &n, Value x, Value xZp, Value w, Value wZp, Value bias) {
  auto xt = NodeImporter::rankedType(x), wt = NodeImporter::rankedType(w);
  if (!xt || !wt || xt.getRank() != 4 || wt.getRank() != 4 || !wt.hasStaticShape())
    return {};
  int64_t group = n.getInt("group", 1);
  bool depthwise = group > 1 && wt.getDimSize(0) == group && wt.getDimSize(1) == 1 &&
                   xt.getDimSize(1) == group && wt.getDimSize(2) * wt.getDimSize(3) <= 512;
  if (group != 1 && !depthwise)
    return {};
  Type we = wt.getElementType();
  if (!xt.getElementType().isInteger(8) || !we.isInteger(8) || we.isUnsignedInteger() ||
      !matchPattern(w, m_Constant()))
    return {};
  if (wZp) {
    std::optional<SmallVector<int64_t>> zps = getConstantInts(wZp);
    if (!zps || llvm::any_of(*zps, [](int64_t z) { return z != 0; }))
      return {};
  }
  int64_t zeroPoint = 0;
  if (xZp) {
    std::optional<SmallVector<int64_t>> zps = getConstantInts(xZp);
    if (!zps || zps->size() != 1)
      return {};
    zeroPoint = (*zps)[0];
  }
  if (bias && (!matchPattern(bias, m_Constant()) ||
               !NodeImporter::elementType(bias).isInteger(32)))
    return {};
  Value y = buildConv(n, x, w, bias);
  if (!y)
    return {};
  y.getDefiningOp()->setAttr("input_zero_point", n.b.getI64IntegerAttr(zeroPoint));
  return y;
}

Value centeredConv(NodeImporter &n, Value x, Value xZp, Value w, Value wZp, Value bias) {
  auto wt = NodeImporter::rankedType(w);
  if (!wt)
    return (void)n.error("the weight's rank must be known"), Value();
  if (Value y = int8Conv(n, x, xZp, w, wZp, bias); y || n.failed())
    return y;
  bool exact = exactInF32(n, x, w, wZp, 0, bias);
  // A deep reduction (ResNet-50's 3x3 convolutions of 256 channels and
  // more) that is not exact in one f32 sum still is over ranges of its
  // input channels: one f32 convolution per range on the CPU kernels, each
  // exact, summed in i32. The generic i32 loop took 100-180 ms for one such
  // layer against about 1 ms at 128 channels.
  SplitWeights split;
  if (!exact)
    split = exactChannelRanges(n, x, w, wZp);
  const auto &ranges = split.ranges;
  Type acc = exact || ranges.size() > 1 ? Type(n.b.getF32Type()) : Type(n.b.getI32Type());
  Value xc = n.make<CastOp>(x, TypeAttr::get(acc));
  if (xZp)
    xc = n.make<SubOp>(xc, n.make<CastOp>(xZp, TypeAttr::get(acc)));
  if (ranges.size() <= 1) {
    Value wc = n.make<CastOp>(w, TypeAttr::get(acc));
    if (wZp)
      wc = n.make<SubOp>(wc, perVector(n, n.make<CastOp>(wZp, TypeAttr::get(acc)), wt.getRank(),
                                       0)); // per output channel: the weight's first axis
    return buildConv(n, xc, wc, bias ? n.make<CastOp>(bias, TypeAttr::get(acc)) : Value());
  }
  // Each range's weights as a constant of their own, so that the kernels
  // pack them at compile time as they do any convolution's.
  int64_t outputs = wt.getDimSize(0), channels = wt.getDimSize(1);
  int64_t window = wt.getNumElements() / (outputs * channels);
  Value sum;
  for (auto [c0, c1] : ranges) {
    SmallVector<int64_t> shape(wt.getShape());
    shape[1] = c1 - c0;
    std::vector<float> part;
    part.reserve(outputs * (c1 - c0) * window);
    for (int64_t o = 0; o < outputs; ++o)
      part.insert(part.end(), split.centered.begin() + (o * channels + c0) * window,
                  split.centered.begin() + (o * channels + c1) * window);
    Value wr = n.constant(DenseElementsAttr::get(
        RankedTensorType::get(shape, n.b.getF32Type()), ArrayRef<float>(part)));
    Value xr = n.make<SliceOp>(xc, n.i64Tensor({c0}), n.i64Tensor({c1}), n.i64Tensor({1}),
                               n.i64Tensor({1}));
    Value conv = buildConv(n, xr, wr, Value());
    if (!conv)
      return {};
    Value partSum = n.make<CastOp>(conv, TypeAttr::get(n.b.getI32Type()));
    sum = sum ? n.make<AddOp>(sum, partSum) : partSum;
  }
  if (bias)
    sum = n.make<AddOp>(sum, perVector(n, toI32(n, bias), wt.getRank(), 1));
  return sum;
}

LogicalResult convInteger(NodeImporter &n, Outs &out) {
  Value x = n.required(0), w = n.required(1);
  if (n.failed())
    return failure();
  if (failed(checkQuantParams(n, "x's", Value(), n.input(2), NodeImporter::elementType(x), -1,
                              false, "")) ||
      failed(checkQuantParams(n, "w's", Value(), n.input(3), NodeImporter::elementType(w),
                              axisSizeOf(n, w, 0), true, "w's output channels (its first axis)")))
    return failure();
  Value y = centeredConv(n, x, n.input(2), w, n.input(3), Value());
  if (!y)
    return failure();
  out.push_back(toI32(n, y));
  return success();
}

/// quantize(conv(x - x_zp, w - w_zp) * x_scale * w_scale / y_scale + bias
/// * x_scale * w_scale / y_scale, y_zp); the bias is i32 in the product's
/// scale.
LogicalResult qlinearConv(NodeImporter &n, Outs &out) {
  Value x = n.required(0), xScale = n.required(1), xZp = n.required(2), w = n.required(3),
        wScale = n.required(4), wZp = n.required(5), yScale = n.required(6), yZp = n.required(7),
        bias = n.input(8);
  if (n.failed())
    return failure();
  auto xt = NodeImporter::rankedType(x);
  if (!xt)
    return n.error("QLinearConv needs an input of known rank");
  // x's and y's parameters one for all, w's one or one per output channel.
  if (failed(checkQuantParams(n, "x's", xScale, xZp, NodeImporter::elementType(x), -1, false,
                              "")) ||
      failed(checkQuantParams(n, "w's", wScale, wZp, NodeImporter::elementType(w),
                              axisSizeOf(n, w, 0), true, "w's output channels (its first axis)")) ||
      failed(checkQuantParams(n, "y's", yScale, yZp, Type(), -1, false, "")))
    return failure();
  Type f = NodeImporter::elementType(xScale);
  Value acc = centeredConv(n, x, xZp, w, wZp, bias);
  if (!acc)
    return failure();
  // The per-output-channel weight scales lie along the output's channel axis.
  Value ws = perVector(n, wScale, xt.getRank(), 1);
  Value factor = n.make<DivOp>(n.make<MulOp>(xScale, ws), yScale);
  Value v = n.make<MulOp>(n.make<CastOp>(acc, TypeAttr::get(f)), factor);
  out.push_back(saturateCast(n, v, toFloat(n, yZp, f), NodeImporter::elementType(yZp)));
  return success();
}

} // namespace

void addQuantizationRules(std::vector<ImportRule> &r) {
  constexpr int64_t M = kMaxSupportedOpset;
  r.insert(r.end(), {
      {"QuantizeLinear", 10, M, quantizeLinear},
      {"DequantizeLinear", 10, M, dequantizeLinear},
      {"DynamicQuantizeLinear", 11, M, dynamicQuantizeLinear},
      {"MatMulInteger", 10, M, matMulInteger},
      {"QLinearMatMul", 10, M, qlinearMatMul},
      {"ConvInteger", 10, M, convInteger},
      {"QLinearConv", 10, M, qlinearConv},
  });
}

} // namespace kiln
