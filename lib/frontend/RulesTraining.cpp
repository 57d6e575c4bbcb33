// Optimizer updates of the ai.onnx.preview.training domain (Adagrad, Adam,
// Momentum). Each is one deterministic elementwise formula per optimized
// tensor, written here as kiln ops; the formulas follow the ONNX operator
// specification (and its reference implementations in onnx/backend/test).
// Gradient, which needs automatic differentiation, has no rule.
#include "NodeImporter.h"

using namespace mlir;

namespace kiln {
namespace {

using Outs = SmallVectorImpl<Value>;

/// The inputs after R and T split into `groups` equal lists (X, G, ...).
FailureOr<SmallVector<SmallVector<Value>>> tensorGroups(NodeImporter &n, size_t groups) {
  if (n.numInputs() < 2 || (n.numInputs() - 2) % groups != 0 || n.numInputs() == 2)
    return n.error("expects R, T and " + Twine(groups) +
                   " equally long lists of tensors; got " + Twine(n.numInputs()) + " inputs");
  size_t count = (n.numInputs() - 2) / groups;
  SmallVector<SmallVector<Value>> out(groups);
  for (size_t g = 0; g < groups; ++g)
    for (size_t i = 0; i < count; ++i)
      if (!out[g].emplace_back(n.required(2 + g * count + i)))
        return failure();
  return out;
}

/// T > 0 as a boolean scalar, and T as a float scalar like `like`.
std::pair<Value, Value> stepCount(NodeImporter &n, Value like) {
  Value t = n.required(1);
  Value positive = n.make<GreaterOp>(t, n.scalarLike(t, 0));
  Value tf = n.make<CastOp>(t, TypeAttr::get(NodeImporter::elementType(like)));
  return {positive, tf};
}

Value scalar(NodeImporter &n, Value like, double v) { return n.scalarLike(like, v); }

/// G + norm_coefficient * X.
Value regularized(NodeImporter &n, Value x, Value g, float normCoefficient) {
  if (normCoefficient == 0.0f)
    return g;
  return n.make<AddOp>(n.make<MulOp>(scalar(n, x, normCoefficient), x), g);
}

LogicalResult adagrad(NodeImporter &n, Outs &out) {
  auto groups = tensorGroups(n, 3);
  if (failed(groups))
    return failure();
  auto &xs = (*groups)[0], &gs = (*groups)[1], &hs = (*groups)[2];
  float decay = n.getFloat("decay_factor", 0.0f), eps = n.getFloat("epsilon", 1e-6f),
        norm = n.getFloat("norm_coefficient", 0.0f);
  Value r = n.required(0);
  auto [positive, tf] = stepCount(n, r);
  (void)positive;
  // r / (1 + T * decay_factor)
  Value rate = n.make<DivOp>(
      r, n.make<AddOp>(scalar(n, r, 1), n.make<MulOp>(tf, scalar(n, r, decay))));
  SmallVector<Value> hNew;
  for (size_t i = 0; i < xs.size(); ++i) {
    Value g = regularized(n, xs[i], gs[i], norm);
    Value h = n.make<AddOp>(hs[i], n.make<MulOp>(g, g));
    Value denom = n.make<AddOp>(n.make<SqrtOp>(h), scalar(n, h, eps));
    out.push_back(n.make<SubOp>(xs[i], n.make<DivOp>(n.make<MulOp>(rate, g), denom)));
    hNew.push_back(h);
  }
  llvm::append_range(out, hNew);
  return failure(n.failed());
}

LogicalResult momentum(NodeImporter &n, Outs &out) {
  auto groups = tensorGroups(n, 3);
  if (failed(groups))
    return failure();
  auto &xs = (*groups)[0], &gs = (*groups)[1], &vs = (*groups)[2];
  float alpha = n.getFloat("alpha", 0.0f), beta = n.getFloat("beta", 0.0f),
        norm = n.getFloat("norm_coefficient", 0.0f);
  std::string mode = n.getString("mode", "standard");
  if (mode != "standard" && mode != "nesterov")
    return n.error("unknown Momentum mode '" + mode + "'");
  if (!n.attr("alpha") || !n.attr("beta") || !n.attr("norm_coefficient"))
    return n.error("Momentum needs the attributes alpha, beta and norm_coefficient");
  Value r = n.required(0);
  auto [positive, tf] = stepCount(n, r);
  (void)tf;
  // The gradient's coefficient is 1 on the first step (T = 0).
  Value betaAdjusted = n.make<SelectOp>(positive, scalar(n, r, beta), scalar(n, r, 1));
  SmallVector<Value> vNew;
  for (size_t i = 0; i < xs.size(); ++i) {
    Value g = regularized(n, xs[i], gs[i], norm);
    Value v = n.make<AddOp>(n.make<MulOp>(scalar(n, vs[i], alpha), vs[i]),
                            n.make<MulOp>(betaAdjusted, g));
    Value step = mode == "standard"
                     ? v
                     : n.make<AddOp>(g, n.make<MulOp>(scalar(n, v, alpha), v));
    out.push_back(n.make<SubOp>(xs[i], n.make<MulOp>(r, step)));
    vNew.push_back(v);
  }
  llvm::append_range(out, vNew);
  return failure(n.failed());
}

LogicalResult adam(NodeImporter &n, Outs &out) {
  auto groups = tensorGroups(n, 4);
  if (failed(groups))
    return failure();
  auto &xs = (*groups)[0], &gs = (*groups)[1], &vs = (*groups)[2], &hs = (*groups)[3];
  float alpha = n.getFloat("alpha", 0.9f), beta = n.getFloat("beta", 0.999f),
        eps = n.getFloat("epsilon", 1e-6f), norm = n.getFloat("norm_coefficient", 0.0f),
        normPost = n.getFloat("norm_coefficient_post", 0.0f);
  Value r = n.required(0);
  auto [positive, tf] = stepCount(n, r);
  // Bias correction from the second step on: r * sqrt(1 - beta^T) / (1 - alpha^T).
  Value one = scalar(n, r, 1);
  Value corrected = n.make<DivOp>(
      n.make<MulOp>(r, n.make<SqrtOp>(n.make<SubOp>(one, n.make<PowOp>(scalar(n, r, beta), tf)))),
      n.make<SubOp>(one, n.make<PowOp>(scalar(n, r, alpha), tf)));
  Value rate = n.make<SelectOp>(positive, corrected, r);
  SmallVector<Value> vNew, hNew;
  for (size_t i = 0; i < xs.size(); ++i) {
    Value g = regularized(n, xs[i], gs[i], norm);
    Value v = n.make<AddOp>(n.make<MulOp>(scalar(n, vs[i], alpha), vs[i]),
                            n.make<MulOp>(scalar(n, g, 1 - alpha), g));
    Value h = n.make<AddOp>(n.make<MulOp>(scalar(n, hs[i], beta), hs[i]),
                            n.make<MulOp>(scalar(n, g, 1 - beta), n.make<MulOp>(g, g)));
    Value denom = n.make<AddOp>(n.make<SqrtOp>(h), scalar(n, h, eps));
    Value x = n.make<SubOp>(xs[i], n.make<MulOp>(rate, n.make<DivOp>(v, denom)));
    if (normPost != 0.0f)
      x = n.make<MulOp>(scalar(n, x, 1 - normPost), x);
    out.push_back(x);
    vNew.push_back(v);
    hNew.push_back(h);
  }
  llvm::append_range(out, vNew);
  llvm::append_range(out, hNew);
  return failure(n.failed());
}

} // namespace

bool isTrainingDomainOperator(llvm::StringRef opType) {
  return opType == "Adagrad" || opType == "Adam" || opType == "Momentum";
}

void addTrainingRules(std::vector<ImportRule> &rules) {
  // Opsets here are the ai.onnx.preview.training domain's (version 1).
  rules.insert(rules.end(), {
      {"Adagrad", 1, 1, adagrad},
      {"Adam", 1, 1, adam},
      {"Momentum", 1, 1, momentum},
  });
}

} // namespace kiln
