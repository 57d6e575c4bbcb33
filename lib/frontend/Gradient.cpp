// The Gradient operator (ai.onnx.preview.training): reverse-mode
// differentiation of y with respect to xs through the nodes of the graph
// before the Gradient node, at import time, into ordinary kiln ops. The
// seed is ones shaped like y (the gradient of sum(y)). Operands that were
// broadcast get their adjoint summed back to their own shape.
//
// Differentiable here: Add, Sub, Mul, Div, Neg, Identity, Relu, Sigmoid,
// Tanh, Exp, Log, Sqrt and 2-D MatMul. Any other op on a path from xs to y
// is an error naming it.
#include "Gradient.h"

#include "llvm/ADT/StringSet.h"

using namespace mlir;

namespace kiln {
namespace {

/// Sums `g` down to the shape of `like` (undoing ONNX broadcasting).
Value unbroadcast(NodeImporter &n, Value g, Value like) {
  auto gt = NodeImporter::rankedType(g), lt = NodeImporter::rankedType(like);
  if (!gt || !lt || gt == lt)
    return g;
  int64_t extra = gt.getRank() - lt.getRank();
  if (extra > 0) {
    g = n.make<ReduceSumOp>(g, n.b.getDenseI64ArrayAttr(llvm::to_vector(llvm::seq<int64_t>(0, extra))),
                            n.b.getBoolAttr(false));
    gt = NodeImporter::rankedType(g);
  }
  SmallVector<int64_t> axes;
  for (int64_t i = 0; gt && i < lt.getRank(); ++i)
    if (lt.getDimSize(i) == 1 && gt.getDimSize(i) != 1)
      axes.push_back(i);
  if (!axes.empty())
    g = n.make<ReduceSumOp>(g, n.b.getDenseI64ArrayAttr(axes), n.b.getBoolAttr(true));
  return g;
}

Value ones(NodeImporter &n, Value like) {
  auto t = NodeImporter::rankedType(like);
  if (!t || !t.hasStaticShape() || !isa<FloatType>(t.getElementType())) {
    (void)n.error("Gradient needs y of static shape and a floating-point type");
    return {};
  }
  return n.constant(DenseElementsAttr::get(
      t, cast<TypedAttr>(FloatAttr::get(t.getElementType(), 1.0))));
}

} // namespace

LogicalResult importGradient(NodeImporter &n, ArrayRef<const onnx::NodeProto *> before,
                             llvm::function_ref<Value(llvm::StringRef)> lookup,
                             SmallVectorImpl<Value> &outputs) {
  auto xs = [&]() -> std::optional<SmallVector<std::string>> {
    const onnx::AttributeProto *a = n.attr("xs");
    if (!a)
      return std::nullopt;
    return SmallVector<std::string>(a->strings().begin(), a->strings().end());
  }();
  std::string yName = n.getString("y", "");
  if (!xs || yName.empty())
    return n.error("Gradient needs the attributes xs and y");
  if (n.attr("zs"))
    return n.error("Gradient with zs is not supported");
  Value y = lookup(yName);
  if (!y)
    return n.error("Gradient's y '" + yName + "' is not produced before it");

  // Only nodes on a path from xs carry gradients: the others (shape
  // arithmetic, casts of constants) are not differentiated at all.
  llvm::StringSet<> dependsOnX;
  for (const std::string &x : *xs)
    dependsOnX.insert(x);
  for (const onnx::NodeProto *node : before)
    if (llvm::any_of(node->input(), [&](const std::string &in) { return dependsOnX.count(in); }))
      for (const std::string &out : node->output())
        dependsOnX.insert(out);

  llvm::StringMap<Value> adjoint;
  adjoint[yName] = ones(n, y);
  auto accumulate = [&](const std::string &name, Value g) {
    if (!g)
      return;
    Value &slot = adjoint[name];
    slot = slot ? n.make<AddOp>(slot, g) : g;
  };
  for (const onnx::NodeProto *node : llvm::reverse(before)) {
    if (node->output_size() < 1 || !adjoint.count(node->output(0)) ||
        !dependsOnX.count(node->output(0)))
      continue;
    Value g = adjoint[node->output(0)];
    const std::string &op = node->op_type();
    auto in = [&](int i) { return i < node->input_size() ? lookup(node->input(i)) : Value(); };
    Value out = lookup(node->output(0));
    Value a = in(0), b = in(1);
    auto give = [&](int i, Value grad) {
      if (i < node->input_size() && !node->input(i).empty() && dependsOnX.count(node->input(i)))
        accumulate(node->input(i), unbroadcast(n, grad, in(i)));
    };
    if (op == "Add") {
      give(0, g);
      give(1, g);
    } else if (op == "Sub") {
      give(0, g);
      give(1, n.make<NegOp>(g));
    } else if (op == "Mul") {
      give(0, n.make<MulOp>(g, b));
      give(1, n.make<MulOp>(g, a));
    } else if (op == "Div") {
      give(0, n.make<DivOp>(g, b));
      give(1, n.make<NegOp>(n.make<DivOp>(n.make<MulOp>(g, a), n.make<MulOp>(b, b))));
    } else if (op == "Neg") {
      give(0, n.make<NegOp>(g));
    } else if (op == "Identity") {
      give(0, g);
    } else if (op == "Relu") {
      Value positive = n.make<GreaterOp>(a, n.scalarLike(a, 0));
      give(0, n.make<MulOp>(g, n.make<CastOp>(positive, TypeAttr::get(NodeImporter::elementType(a)))));
    } else if (op == "Sigmoid") {
      give(0, n.make<MulOp>(g, n.make<MulOp>(out, n.make<SubOp>(n.scalarLike(out, 1), out))));
    } else if (op == "Tanh") {
      give(0, n.make<MulOp>(g, n.make<SubOp>(n.scalarLike(out, 1), n.make<MulOp>(out, out))));
    } else if (op == "Exp") {
      give(0, n.make<MulOp>(g, out));
    } else if (op == "Log") {
      give(0, n.make<DivOp>(g, a));
    } else if (op == "Sqrt") {
      give(0, n.make<DivOp>(g, n.make<MulOp>(out, n.scalarLike(out, 2))));
    } else if (op == "MatMul" && NodeImporter::rankedType(a) &&
               NodeImporter::rankedType(a).getRank() == 2 && NodeImporter::rankedType(b) &&
               NodeImporter::rankedType(b).getRank() == 2) {
      auto swap = n.b.getDenseI64ArrayAttr({1, 0});
      give(0, n.make<MatMulOp>(g, n.make<TransposeOp>(b, swap)));
      give(1, n.make<MatMulOp>(n.make<TransposeOp>(a, swap), g));
    } else {
      std::string name = node->name().empty() ? node->op_type() : node->name();
      return n.error("Gradient cannot differentiate through node '" + name + "' (" + op + ")");
    }
    if (n.failed())
      return failure();
  }
  for (const std::string &x : *xs) {
    Value v = lookup(x);
    if (!v)
      return n.error("Gradient's x '" + x + "' is not a value of the graph");
    auto it = adjoint.find(x);
    if (it != adjoint.end()) {
      outputs.push_back(it->second);
      continue;
    }
    // y does not depend on x: a zero gradient.
    auto t = NodeImporter::rankedType(v);
    if (!t || !t.hasStaticShape())
      return n.error("Gradient needs x '" + x + "' of static shape");
    outputs.push_back(n.constant(DenseElementsAttr::get(t, cast<TypedAttr>(n.b.getZeroAttr(t.getElementType())))));
  }
  return failure(n.failed());
}

} // namespace kiln
