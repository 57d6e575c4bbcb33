// Import rules for ONNX quantization: QuantizeLinear, DequantizeLinear,
// DynamicQuantizeLinear, MatMulInteger and QLinearMatMul, decomposed into
// kiln elementwise ops, reductions and an integer matrix product.
//
// Quantizing rounds half to even (kiln.round) and saturates to the range of
// the zero point's type before the cast, as ONNX specifies. Integer matrix
// products accumulate in i32, which is exact for int8/uint8 operands.
#include "NodeImporter.h"

using namespace mlir;

namespace kiln {
namespace {

using Outs = SmallVectorImpl<Value>;

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

/// (a - a_zp) as i32; a per-row zero point of a matrix lies along its rows.
Value centeredI32(NodeImporter &n, Value a, Value zp, bool rowsOfA) {
  Type i32 = n.b.getI32Type();
  Value v = n.make<CastOp>(a, TypeAttr::get(i32));
  if (!zp)
    return v;
  Value z = n.make<CastOp>(zp, TypeAttr::get(i32));
  auto zt = NodeImporter::rankedType(z);
  if (rowsOfA && zt && zt.getRank() == 1 && zt.getDimSize(0) != 1)
    z = n.make<UnsqueezeOp>(z, n.b.getDenseI64ArrayAttr({1})); // [M] -> [M, 1]
  return n.make<SubOp>(v, z);
}

LogicalResult matMulInteger(NodeImporter &n, Outs &out) {
  Value a = n.required(0), b = n.required(1);
  if (n.failed())
    return failure();
  out.push_back(n.make<MatMulOp>(centeredI32(n, a, n.input(2), true),
                                 centeredI32(n, b, n.input(3), false)));
  return success();
}

/// quantize((a - a_zp) (b - b_zp) * a_scale * b_scale / y_scale, y_zp)
LogicalResult qlinearMatMul(NodeImporter &n, Outs &out) {
  Value a = n.required(0), aScale = n.required(1), aZp = n.required(2), b = n.required(3),
        bScale = n.required(4), bZp = n.required(5), yScale = n.required(6), yZp = n.required(7);
  if (n.failed())
    return failure();
  Type f = NodeImporter::elementType(aScale);
  Value acc = n.make<MatMulOp>(centeredI32(n, a, aZp, true), centeredI32(n, b, bZp, false));
  auto st = NodeImporter::rankedType(aScale);
  if (st && st.getRank() == 1 && st.getDimSize(0) != 1)
    aScale = n.make<UnsqueezeOp>(aScale, n.b.getDenseI64ArrayAttr({1}));
  Value factor = n.make<DivOp>(n.make<MulOp>(aScale, bScale), yScale);
  Value v = n.make<MulOp>(n.make<CastOp>(acc, TypeAttr::get(f)), factor);
  out.push_back(saturateCast(n, v, toFloat(n, yZp, f), NodeImporter::elementType(yZp)));
  return success();
}

/// The convolution of (x - x_zp) and (w - w_zp) accumulated in `acc` (i32:
/// exact for 8-bit operands), with zero padding of the centred input (the
/// padded positions contribute nothing, as in ONNX's reference). It runs on
/// the generic loop path, not the f32 CPU kernels: correct, not yet fast.
Value centeredConv(NodeImporter &n, Value x, Value xZp, Value w, Value wZp, Type acc) {
  auto wt = NodeImporter::rankedType(w);
  if (!wt)
    return (void)n.error("the weight's rank must be known"), Value();
  Value xc = n.make<CastOp>(x, TypeAttr::get(acc));
  if (xZp)
    xc = n.make<SubOp>(xc, n.make<CastOp>(xZp, TypeAttr::get(acc)));
  Value wc = n.make<CastOp>(w, TypeAttr::get(acc));
  if (wZp)
    wc = n.make<SubOp>(wc, perVector(n, n.make<CastOp>(wZp, TypeAttr::get(acc)), wt.getRank(),
                                     0)); // per output channel: the weight's first axis
  return buildConv(n, xc, wc, Value());
}

LogicalResult convInteger(NodeImporter &n, Outs &out) {
  Value x = n.required(0), w = n.required(1);
  if (n.failed())
    return failure();
  Value y = centeredConv(n, x, n.input(2), w, n.input(3), n.b.getI32Type());
  if (!y)
    return failure();
  out.push_back(y);
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
  Type f = NodeImporter::elementType(xScale);
  Value acc = centeredConv(n, x, xZp, w, wZp, n.b.getI32Type());
  if (!acc)
    return failure();
  // The bias and per-output-channel weight scales lie along the output's
  // channel axis.
  if (bias)
    acc = n.make<AddOp>(acc, perVector(n, bias, xt.getRank(), 1));
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
