// ONNX Runtime's QOperator ops of the com.microsoft domain (what its
// quantizer writes with QuantFormat.QOperator, next to the standard
// QLinearConv and QLinearMatMul): QLinearAdd, QLinearMul, QLinearConcat,
// QLinearAveragePool, QLinearGlobalAveragePool, QLinearSigmoid and
// QLinearLeakyRelu, schemas as ONNX Runtime's contrib_defs (version 1).
//
// Each is its float op between a dequantization of its inputs and a
// quantization of its result, built by the default domain's own rule for
// that op (so attributes, broadcasting and pooling windows are read one
// way). Kiln's elementwise fusion makes that one loop over the 8-bit
// values, and kiln-convert-layout keeps it NHWC between integer
// convolutions. ONNX Runtime computes some of these in other orders (a
// precomputed scale ratio for QLinearAdd, an integer sum for
// QLinearGlobalAveragePool, a lookup table for Sigmoid and LeakyRelu):
// where a result falls within an ulp of a rounding tie, the two may differ
// by one quantization step.
#include "NodeImporter.h"
#include "QuantizeSupport.h"

using namespace mlir;

namespace kiln {
namespace {

using Outs = SmallVectorImpl<Value>;

/// (x - zp) * scale with one scale and zero point for the tensor (ONNX
/// Runtime's QOperator ops are per tensor); null after an error.
Value dequantize(NodeImporter &n, const Twine &what, Value x, Value scale, Value zp) {
  if (!x || !scale)
    return (void)n.error(what + " or its scale is missing"), Value();
  Type elt = NodeImporter::elementType(x);
  if (!elt.isInteger(8))
    return (void)n.error(what + " must be int8 or uint8"), Value();
  if (failed(checkQuantParams(n, what.str() + "'s", scale, zp, elt, -1, false, "")))
    return {};
  Type f = NodeImporter::elementType(scale);
  Value v = toFloat(n, x, f);
  if (zp)
    v = n.make<SubOp>(v, toFloat(n, zp, f));
  return n.make<MulOp>(v, scale);
}

/// Runs the default domain's rule for `floatOp` on `floatInputs` (this
/// node's attributes), then quantizes its result with (yScale, yZp) to
/// `to` (yZp's type, else the inputs').
LogicalResult viaFloat(NodeImporter &n, Outs &out, StringRef floatOp,
                       ArrayRef<Value> floatInputs, Value yScale, Value yZp, Type to) {
  if (llvm::any_of(floatInputs, [](Value v) { return !v; }) || n.failed())
    return failure();
  if (failed(checkQuantParams(n, "the output's", yScale, yZp, Type(), -1, false, "")))
    return failure();
  if (yZp)
    to = NodeImporter::elementType(yZp);
  if (!to.isInteger(8))
    return n.error("the output must be int8 or uint8");
  ImportFn rule = lookupImportRule(floatOp, 13);
  if (!rule)
    return n.error("no rule for " + floatOp);
  NodeImporter inner(n.b, n.loc, n.node, 13, floatInputs);
  SmallVector<Value> results;
  if (failed(rule(inner, results)) || inner.failed() || results.empty())
    return failure();
  Type f = NodeImporter::elementType(yScale);
  out.push_back(saturateCast(n, n.make<DivOp>(results[0], yScale), toFloat(n, yZp, f), to));
  return success();
}

/// A, A_scale, A_zp, B, B_scale, B_zp, C_scale, C_zp (zero points optional).
template <const char *FloatOp>
LogicalResult qlinearBinary(NodeImporter &n, Outs &out) {
  Value a = n.required(0), b = n.required(3);
  if (n.failed())
    return failure();
  Value fa = dequantize(n, "A", a, n.input(1), n.input(2));
  Value fb = fa ? dequantize(n, "B", b, n.input(4), n.input(5)) : Value();
  return viaFloat(n, out, FloatOp, {fa, fb}, n.required(6), n.input(7),
                  NodeImporter::elementType(a));
}

/// X, X_scale, X_zp, Y_scale, Y_zp (zero points optional).
template <const char *FloatOp>
LogicalResult qlinearUnary(NodeImporter &n, Outs &out) {
  Value x = n.required(0);
  if (n.failed())
    return failure();
  Value fx = dequantize(n, "X", x, n.input(1), n.input(2));
  return viaFloat(n, out, FloatOp, {fx}, n.required(3), n.input(4),
                  NodeImporter::elementType(x));
}

/// channels_last (1: NHWC input and output, as ONNX Runtime's NHWC
/// transformer writes them) is not supported: an error, not a silent
/// misreading.
LogicalResult refuseChannelsLast(NodeImporter &n) {
  if (n.getInt("channels_last", 0) != 0)
    return n.error("channels_last = 1 (NHWC pooling) is not supported");
  return success();
}

constexpr char kAdd[] = "Add", kMul[] = "Mul", kSigmoid[] = "Sigmoid",
               kLeakyRelu[] = "LeakyRelu", kAveragePool[] = "AveragePool",
               kGlobalAveragePool[] = "GlobalAveragePool";

LogicalResult qlinearPool(NodeImporter &n, Outs &out) {
  if (failed(refuseChannelsLast(n)))
    return failure();
  return qlinearUnary<kAveragePool>(n, out);
}

LogicalResult qlinearGlobalPool(NodeImporter &n, Outs &out) {
  if (failed(refuseChannelsLast(n)))
    return failure();
  return qlinearUnary<kGlobalAveragePool>(n, out);
}

/// Y_scale, Y_zp, then (X, X_scale, X_zp) per input; attribute axis.
LogicalResult qlinearConcat(NodeImporter &n, Outs &out) {
  size_t count = n.node.input_size();
  if (count < 5 || (count - 2) % 3 != 0)
    return n.error("QLinearConcat takes Y_scale, Y_zero_point, then (X, X_scale, "
                   "X_zero_point) for each input: " +
                   Twine(count) + " inputs is not that");
  SmallVector<Value> floats;
  Type to;
  for (size_t i = 2; i < count; i += 3) {
    Value x = n.required(i);
    if (n.failed())
      return failure();
    to = to ? to : NodeImporter::elementType(x);
    floats.push_back(dequantize(n, "input " + Twine((i - 2) / 3), x, n.input(i + 1),
                                n.input(i + 2)));
    if (!floats.back())
      return failure();
  }
  return viaFloat(n, out, "Concat", floats, n.required(0), n.input(1), to);
}

} // namespace

ImportFn microsoftRule(llvm::StringRef opType) {
  return llvm::StringSwitch<ImportFn>(opType)
      .Case("QLinearAdd", qlinearBinary<kAdd>)
      .Case("QLinearMul", qlinearBinary<kMul>)
      .Case("QLinearConcat", qlinearConcat)
      .Case("QLinearAveragePool", qlinearPool)
      .Case("QLinearGlobalAveragePool", qlinearGlobalPool)
      .Case("QLinearSigmoid", qlinearUnary<kSigmoid>)
      .Case("QLinearLeakyRelu", qlinearUnary<kLeakyRelu>)
      .Default(nullptr);
}

} // namespace kiln
