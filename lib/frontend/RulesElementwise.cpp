// Import rules for elementwise ONNX operators. Activations without a kiln
// op of their own are decomposed here into kiln elementwise ops, which the
// code generator fuses back into one loop nest.
#include "NodeImporter.h"

using namespace mlir;

namespace kiln {
namespace {

using Outs = SmallVectorImpl<Value>;

template <typename OpTy>
LogicalResult unary(NodeImporter &n, Outs &out) {
  out.push_back(n.make<OpTy>(n.required(0)));
  return success();
}

template <typename OpTy>
LogicalResult binary(NodeImporter &n, Outs &out) {
  out.push_back(n.make<OpTy>(n.required(0), n.required(1)));
  return success();
}

/// Max/Min/Sum take any number of inputs.
template <typename OpTy>
LogicalResult variadic(NodeImporter &n, Outs &out) {
  Value acc = n.required(0);
  for (size_t i = 1; i < n.numInputs(); ++i)
    acc = n.make<OpTy>(acc, n.required(i));
  out.push_back(acc);
  return success();
}

LogicalResult mean(NodeImporter &n, Outs &out) {
  Value acc = n.required(0);
  for (size_t i = 1; i < n.numInputs(); ++i)
    acc = n.make<AddOp>(acc, n.required(i));
  out.push_back(n.make<DivOp>(acc, n.scalarLike(acc, (double)n.numInputs())));
  return success();
}

LogicalResult identity(NodeImporter &n, Outs &out) {
  out.push_back(n.required(0));
  return success();
}

LogicalResult pow(NodeImporter &n, Outs &out) {
  Value x = n.required(0), y = n.required(1);
  if (n.failed())
    return failure();
  // ONNX allows an exponent of another numeric type.
  if (NodeImporter::elementType(y) != NodeImporter::elementType(x))
    y = n.make<CastOp>(y, TypeAttr::get(NodeImporter::elementType(x)));
  out.push_back(n.make<PowOp>(x, y));
  return success();
}

LogicalResult mod(NodeImporter &n, Outs &out) {
  Value x = n.required(0), y = n.required(1);
  if (n.failed())
    return failure();
  bool isFloat = isa<FloatType>(NodeImporter::elementType(x));
  if (isFloat && !n.getInt("fmod", 0))
    return n.error("Mod on floating-point inputs requires fmod=1");
  out.push_back(n.getInt("fmod", 0) ? n.make<FRemOp>(x, y) : n.make<RemOp>(x, y));
  return success();
}

LogicalResult where(NodeImporter &n, Outs &out) {
  out.push_back(n.make<SelectOp>(n.required(0), n.required(1), n.required(2)));
  return success();
}

/// Opsets 1-5 name Cast's target type as a string ("FLOAT", "INT64", ...).
int32_t legacyTypeCode(const std::string &name) {
  static const char *const names[] = {"UNDEFINED", "FLOAT",  "UINT8",   "INT8",   "UINT16",
                                      "INT16",     "INT32",  "INT64",   "STRING", "BOOL",
                                      "FLOAT16",   "DOUBLE", "UINT32",  "UINT64", "COMPLEX64",
                                      "COMPLEX128", "BFLOAT16"};
  for (int32_t i = 1; i < (int32_t)(sizeof names / sizeof *names); ++i)
    if (name == names[i])
      return i;
  return 0;
}

LogicalResult cast(NodeImporter &n, Outs &out) {
  const onnx::AttributeProto *toAttr = n.attr("to");
  if (!toAttr)
    return n.error("Cast needs a 'to' attribute");
  int32_t code = toAttr->type() == onnx::AttributeProto::STRING
                     ? legacyTypeCode(toAttr->s())
                     : (int32_t)n.getInt("to", 0);
  Type to = onnxElementType(n.b.getContext(), code);
  if (!to)
    return n.error("unsupported Cast target type " +
                   (toAttr->type() == onnx::AttributeProto::STRING ? "'" + toAttr->s() + "'"
                                                                    : std::to_string(code)));
  out.push_back(n.make<CastOp>(n.required(0), TypeAttr::get(to)));
  return success();
}

LogicalResult castLike(NodeImporter &n, Outs &out) {
  Value x = n.required(0), like = n.required(1);
  if (n.failed())
    return failure();
  out.push_back(n.make<CastOp>(x, TypeAttr::get(NodeImporter::elementType(like))));
  return success();
}

LogicalResult clip(NodeImporter &n, Outs &out) {
  Value x = n.required(0);
  if (n.failed())
    return failure();
  Value lo, hi;
  if (n.opset < 11) {
    if (n.attr("min"))
      lo = n.scalarLike(x, n.getFloat("min", 0));
    if (n.attr("max"))
      hi = n.scalarLike(x, n.getFloat("max", 0));
  } else {
    lo = n.input(1);
    hi = n.input(2);
  }
  if (lo)
    x = n.make<MaxOp>(x, lo);
  if (hi)
    x = n.make<MinOp>(x, hi);
  out.push_back(x);
  return success();
}

/// x < 0 ? negative : x
Value negativeBranch(NodeImporter &n, Value x, Value negative) {
  Value isNeg = n.make<LessOp>(x, n.scalarLike(x, 0.0));
  return n.make<SelectOp>(isNeg, negative, x);
}

LogicalResult leakyRelu(NodeImporter &n, Outs &out) {
  Value x = n.required(0);
  Value ax = n.make<MulOp>(x, n.scalarLike(x, n.getFloat("alpha", 0.01f)));
  out.push_back(negativeBranch(n, x, ax));
  return success();
}

LogicalResult prelu(NodeImporter &n, Outs &out) {
  Value x = n.required(0), slope = n.required(1);
  if (n.failed())
    return failure();
  // Opsets 1-6 apply a one-dimensional slope of C values per channel (axis
  // 1), where opset 7 broadcasts it against the last axis.
  auto xt = NodeImporter::rankedType(x), st = NodeImporter::rankedType(slope);
  if (n.opset < 7 && xt && st && st.getRank() == 1 && st.getDimSize(0) != 1)
    slope = n.alongAxis(slope, xt.getRank(), 1);
  out.push_back(negativeBranch(n, x, n.make<MulOp>(x, slope)));
  return success();
}

/// alpha * (exp(x) - 1)
Value expm1Scaled(NodeImporter &n, Value x, double alpha) {
  Value em1 = n.make<SubOp>(n.make<ExpOp>(x), n.scalarLike(x, 1.0));
  return n.make<MulOp>(em1, n.scalarLike(x, alpha));
}

LogicalResult elu(NodeImporter &n, Outs &out) {
  Value x = n.required(0);
  out.push_back(negativeBranch(n, x, expm1Scaled(n, x, n.getFloat("alpha", 1.0f))));
  return success();
}

LogicalResult selu(NodeImporter &n, Outs &out) {
  Value x = n.required(0);
  double alpha = n.getFloat("alpha", 1.67326319217681884765625f);
  double gamma = n.getFloat("gamma", 1.05070102214813232421875f);
  Value inner = negativeBranch(n, x, expm1Scaled(n, x, alpha));
  out.push_back(n.make<MulOp>(inner, n.scalarLike(x, gamma)));
  return success();
}

LogicalResult celu(NodeImporter &n, Outs &out) {
  Value x = n.required(0);
  double alpha = n.getFloat("alpha", 1.0f);
  Value scaled = n.make<DivOp>(x, n.scalarLike(x, alpha));
  Value neg = n.make<MinOp>(n.scalarLike(x, 0.0), expm1Scaled(n, scaled, alpha));
  out.push_back(n.make<AddOp>(n.make<ReluOp>(x), neg));
  return success();
}

Value hardSigmoidOf(NodeImporter &n, Value x, double alpha, double beta) {
  Value lin = n.make<AddOp>(n.make<MulOp>(x, n.scalarLike(x, alpha)), n.scalarLike(x, beta));
  return n.make<MaxOp>(n.make<MinOp>(lin, n.scalarLike(x, 1.0)), n.scalarLike(x, 0.0));
}

LogicalResult hardSigmoid(NodeImporter &n, Outs &out) {
  Value x = n.required(0);
  out.push_back(hardSigmoidOf(n, x, n.getFloat("alpha", 0.2f), n.getFloat("beta", 0.5f)));
  return success();
}

LogicalResult hardSwish(NodeImporter &n, Outs &out) {
  Value x = n.required(0);
  out.push_back(n.make<MulOp>(x, hardSigmoidOf(n, x, 1.0 / 6.0, 0.5)));
  return success();
}

LogicalResult softplus(NodeImporter &n, Outs &out) {
  Value x = n.required(0);
  out.push_back(n.make<LogOp>(n.make<AddOp>(n.make<ExpOp>(x), n.scalarLike(x, 1.0))));
  return success();
}

LogicalResult softsign(NodeImporter &n, Outs &out) {
  Value x = n.required(0);
  Value denom = n.make<AddOp>(n.make<AbsOp>(x), n.scalarLike(x, 1.0));
  out.push_back(n.make<DivOp>(x, denom));
  return success();
}

LogicalResult thresholdedRelu(NodeImporter &n, Outs &out) {
  Value x = n.required(0);
  Value keep = n.make<GreaterOp>(x, n.scalarLike(x, n.getFloat("alpha", 1.0f)));
  out.push_back(n.make<SelectOp>(keep, x, n.scalarLike(x, 0.0)));
  return success();
}

LogicalResult isNaN(NodeImporter &n, Outs &out) {
  Value x = n.required(0);
  out.push_back(n.make<NotOp>(n.make<EqualOp>(x, x)));
  return success();
}

LogicalResult isInf(NodeImporter &n, Outs &out) {
  Value x = n.required(0);
  if (n.failed())
    return failure();
  Value inf = n.scalarLike(x, std::numeric_limits<double>::infinity());
  Value pos = n.make<EqualOp>(x, inf);
  Value neg = n.make<EqualOp>(x, n.make<NegOp>(inf));
  bool detectPos = n.getInt("detect_positive", 1), detectNeg = n.getInt("detect_negative", 1);
  if (detectPos && detectNeg)
    out.push_back(n.make<OrOp>(pos, neg));
  else if (detectPos)
    out.push_back(pos);
  else if (detectNeg)
    out.push_back(neg);
  else
    out.push_back(n.make<AndOp>(pos, neg));
  return success();
}

LogicalResult bitShift(NodeImporter &n, Outs &out) {
  std::string dir = n.getString("direction", "");
  if (dir == "LEFT")
    return binary<ShiftLeftOp>(n, out);
  if (dir == "RIGHT")
    return binary<ShiftRightOp>(n, out);
  return n.error("BitShift direction must be LEFT or RIGHT, got '" + dir + "'");
}

LogicalResult shrink(NodeImporter &n, Outs &out) {
  Value x = n.required(0);
  double lambd = n.getFloat("lambd", 0.5f), bias = n.getFloat("bias", 0.0f);
  Value below = n.make<LessOp>(x, n.scalarLike(x, -lambd));
  Value above = n.make<GreaterOp>(x, n.scalarLike(x, lambd));
  Value inner = n.make<SelectOp>(above, n.make<SubOp>(x, n.scalarLike(x, bias)),
                                 n.scalarLike(x, 0));
  out.push_back(n.make<SelectOp>(below, n.make<AddOp>(x, n.scalarLike(x, bias)), inner));
  return success();
}

LogicalResult lessOrEqual(NodeImporter &n, Outs &out) { return binary<LessEqualOp>(n, out); }

} // namespace

void addElementwiseRules(std::vector<ImportRule> &r) {
  constexpr int64_t M = kMaxSupportedOpset;
  r.insert(r.end(), {
      {"Neg", 1, M, unary<NegOp>},
      {"Abs", 1, M, unary<AbsOp>},
      {"Exp", 1, M, unary<ExpOp>},
      {"Log", 1, M, unary<LogOp>},
      {"Sqrt", 1, M, unary<SqrtOp>},
      {"Relu", 1, M, unary<ReluOp>},
      {"Sigmoid", 1, M, unary<SigmoidOp>},
      {"Tanh", 1, M, unary<TanhOp>},
      {"Erf", 9, M, unary<ErfOp>},
      {"Floor", 1, M, unary<FloorOp>},
      {"Ceil", 1, M, unary<CeilOp>},
      {"Round", 11, M, unary<RoundOp>},
      {"Reciprocal", 1, M, unary<ReciprocalOp>},
      {"Sign", 9, M, unary<SignOp>},
      {"Not", 1, M, unary<NotOp>},
      {"Sin", 7, M, unary<SinOp>},
      {"Cos", 7, M, unary<CosOp>},
      {"Tan", 7, M, unary<TanOp>},
      {"Asin", 7, M, unary<AsinOp>},
      {"Acos", 7, M, unary<AcosOp>},
      {"Atan", 7, M, unary<AtanOp>},
      {"Sinh", 9, M, unary<SinhOp>},
      {"Cosh", 9, M, unary<CoshOp>},
      {"Asinh", 9, M, unary<AsinhOp>},
      {"Acosh", 9, M, unary<AcoshOp>},
      {"Atanh", 9, M, unary<AtanhOp>},
      {"Identity", 1, M, identity},
      // Opsets 1-6 of the binary operators: RulesLegacy.cpp.
      {"Add", 7, M, binary<AddOp>},
      {"Sub", 7, M, binary<SubOp>},
      {"Mul", 7, M, binary<MulOp>},
      {"Div", 7, M, binary<DivOp>},
      {"Pow", 7, M, pow},
      {"Mod", 10, M, mod},
      {"And", 7, M, binary<AndOp>},
      {"Or", 7, M, binary<OrOp>},
      {"Xor", 7, M, binary<XorOp>},
      {"Equal", 7, M, binary<EqualOp>},
      {"Less", 7, M, binary<LessOp>},
      {"LessOrEqual", 12, M, lessOrEqual},
      {"Greater", 7, M, binary<GreaterOp>},
      {"GreaterOrEqual", 12, M, binary<GreaterEqualOp>},
      // Before opset 8 the inputs had one shape: a case of broadcasting.
      {"Max", 1, M, variadic<MaxOp>},
      {"Min", 1, M, variadic<MinOp>},
      {"Sum", 1, M, variadic<AddOp>},
      {"Mean", 1, M, mean},
      {"Where", 9, M, where},
      {"Cast", 1, M, cast},
      {"CastLike", 15, M, castLike},
      {"Clip", 1, M, clip},
      {"LeakyRelu", 1, M, leakyRelu},
      {"PRelu", 1, M, prelu},
      {"Elu", 1, M, elu},
      {"Selu", 1, M, selu},
      {"Celu", 12, M, celu},
      {"HardSigmoid", 1, M, hardSigmoid},
      {"HardSwish", 14, M, hardSwish},
      {"Softplus", 1, M, softplus},
      {"Softsign", 1, M, softsign},
      {"ThresholdedRelu", 10, M, thresholdedRelu},
      {"IsNaN", 9, M, isNaN},
      {"IsInf", 10, M, isInf},
      {"BitShift", 11, M, bitShift},
      {"Shrink", 9, M, shrink},
  });
}

} // namespace kiln
