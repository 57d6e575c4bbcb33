// Import rules for the semantics of opsets 1-6 that later versions changed:
// binary operators with explicit `broadcast`/`axis` attributes. Old versions
// that only dropped an attribute (Clip's consumed_inputs, Concat's default
// axis, Reshape's shape attribute, ...) and PRelu's per-channel slope are
// handled by the current rules, which look at the node's opset; this file is
// for the rules that would otherwise read differently.
//
// Why rules and not ONNX's version converter: libonnx's converter has no
// adapters for several of these steps (PRelu 6 -> 7 keeps a [C] slope that
// opset 7 broadcasts against the last axis), and it rewrites the whole
// graph, which would lose the node names that Kiln's diagnostics report.
#include "NodeImporter.h"

using namespace mlir;

namespace kiln {
namespace {

using Outs = SmallVectorImpl<Value>;

/// B laid against A as the opset 1-6 `broadcast`/`axis` attributes say:
/// with an axis, B's dims match A's from `axis` on, so B gets trailing unit
/// dims to become numpy-broadcastable; without one, B matches A's trailing
/// dims, which numpy broadcasting already does.
Value alignLegacyOperand(NodeImporter &n, Value a, Value b) {
  if (!n.getInt("broadcast", 0) || !n.attr("axis"))
    return b;
  auto rankA = n.rankOf(a), rankB = n.rankOf(b);
  if (!rankA || !rankB)
    return {};
  int64_t axis = n.getInt("axis", 0);
  if (axis < 0)
    axis += *rankA;
  int64_t trailing = *rankA - axis - *rankB;
  if (axis < 0 || trailing < 0) {
    (void)n.error("broadcast axis " + Twine(n.getInt("axis", 0)) + " places a rank-" +
                  Twine(*rankB) + " second input outside the rank-" + Twine(*rankA) +
                  " first input");
    return {};
  }
  return n.alongAxis(b, *rankA, axis);
}

template <typename OpTy>
LogicalResult legacyBinary(NodeImporter &n, Outs &out) {
  Value a = n.required(0), b = n.required(1);
  if (n.failed())
    return failure();
  b = alignLegacyOperand(n, a, b);
  if (!b)
    return failure();
  out.push_back(n.make<OpTy>(a, b));
  return success();
}

} // namespace

void addLegacyRules(std::vector<ImportRule> &r) {
  r.insert(r.end(), {
      {"Add", 1, 6, legacyBinary<AddOp>},
      {"Sub", 1, 6, legacyBinary<SubOp>},
      {"Mul", 1, 6, legacyBinary<MulOp>},
      {"Div", 1, 6, legacyBinary<DivOp>},
      {"Pow", 1, 6, legacyBinary<PowOp>},
      {"And", 1, 6, legacyBinary<AndOp>},
      {"Or", 1, 6, legacyBinary<OrOp>},
      {"Xor", 1, 6, legacyBinary<XorOp>},
      {"Equal", 1, 6, legacyBinary<EqualOp>},
      {"Less", 1, 6, legacyBinary<LessOp>},
      {"Greater", 1, 6, legacyBinary<GreaterOp>},
  });
}

} // namespace kiln
