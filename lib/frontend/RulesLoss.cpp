// Import rules for the loss operators, decomposed into gathers and
// reductions: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.
#include "NodeImporter.h"

using namespace mlir;

namespace kiln {
namespace {

using Outs = SmallVectorImpl<Value>;

SmallVector<int64_t> allAxes(int64_t rank) {
  SmallVector<int64_t> axes;
  for (int64_t i = 0; i < rank; ++i)
    axes.push_back(i);
  return axes;
}

/// loss[n, d...] = -input[n, target[n, d...], d...] * weight[target[n, d...]],
/// zero where target == ignore_index; reduced per `reduction`.
Value nllLoss(NodeImporter &n, Value input, Value target, Value weight) {
  if (n.failed())
    return {};
  auto targetType = NodeImporter::rankedType(target);
  if (!targetType)
    return (void)n.error("loss targets need a known rank"), Value();
  std::string reduction = n.getString("reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean")
    return (void)n.error("unknown reduction '" + reduction + "'"), Value();
  const onnx::AttributeProto *ignore = n.attr("ignore_index");

  Value mask, safeTarget = target;
  if (ignore) {
    Value ii = n.make<CastOp>(n.i64Tensor({ignore->i()}),
                              TypeAttr::get(NodeImporter::elementType(target)));
    mask = n.make<NotOp>(n.make<EqualOp>(target, ii));
    safeTarget = n.make<SelectOp>(mask, target, n.scalarLike(target, 0));
  }
  Value picked = n.make<GatherElementsOp>(
      input, n.make<UnsqueezeOp>(safeTarget, n.b.getDenseI64ArrayAttr({1})),
      n.b.getI64IntegerAttr(1));
  Value loss = n.make<NegOp>(n.make<SqueezeOp>(picked, n.b.getDenseI64ArrayAttr({1})));
  if (n.failed()) // the types below are read from `loss`
    return {};

  // Per-element weights: weight[target], zeroed where ignored.
  Value w;
  if (weight)
    w = n.make<GatherOp>(weight, safeTarget, n.b.getI64IntegerAttr(0));
  if (mask) {
    Value zero = n.scalarLike(loss, 0.0);
    w = w ? n.make<SelectOp>(mask, w, zero)
          : n.make<CastOp>(mask, TypeAttr::get(NodeImporter::elementType(loss)));
  }
  if (w)
    loss = n.make<MulOp>(loss, w);
  if (reduction == "none" || n.failed())
    return loss;
  auto axes = n.b.getDenseI64ArrayAttr(allAxes(targetType.getRank()));
  auto noKeep = n.b.getBoolAttr(false);
  Value sum = n.make<ReduceSumOp>(loss, axes, noKeep);
  if (reduction == "sum")
    return sum;
  if (!w)
    return n.make<ReduceMeanOp>(loss, axes, noKeep);
  return n.make<DivOp>(sum, n.make<ReduceSumOp>(w, axes, noKeep));
}

LogicalResult negativeLogLikelihood(NodeImporter &n, Outs &out) {
  out.push_back(nllLoss(n, n.required(0), n.required(1), n.input(2)));
  return success();
}

LogicalResult softmaxCrossEntropy(NodeImporter &n, Outs &out) {
  Value scores = n.required(0);
  if (n.failed())
    return failure();
  Value logProb = buildSoftmax(n, scores, {1}, /*log=*/true);
  out.push_back(nllLoss(n, logProb, n.required(1), n.input(2)));
  out.push_back(logProb);
  return success();
}

} // namespace

void addLossRules(std::vector<ImportRule> &r) {
  constexpr int64_t M = kMaxSupportedOpset;
  r.insert(r.end(), {
      {"NegativeLogLikelihoodLoss", 12, M, negativeLogLikelihood},
      {"SoftmaxCrossEntropyLoss", 12, M, softmaxCrossEntropy},
  });
}

} // namespace kiln
