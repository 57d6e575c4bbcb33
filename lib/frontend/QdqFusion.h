// QDQ fusion: DequantizeLinear -> Conv/MatMul (-> Relu) -> QuantizeLinear
// chains imported as one QLinearConv/QLinearMatMul, and DequantizeLinear ->
// MaxPool -> QuantizeLinear as a MaxPool on the 8-bit values.
#ifndef KILN_FRONTEND_QDQFUSION_H
#define KILN_FRONTEND_QDQFUSION_H

#include "onnx/onnx_pb.h"

#include <cstddef>
#include <map>
#include <vector>

namespace kiln {

/// What the importer imports in place of some nodes of a graph.
struct QdqFusionPlan {
  /// Node index -> the nodes to import instead of it. An empty list drops
  /// the node (a Conv, Relu or DequantizeLinear folded into a later one).
  std::map<size_t, std::vector<onnx::NodeProto>> replaced;
  /// Chains fused, for the report.
  size_t convs = 0, matmuls = 0, pools = 0;
};

/// Finds the chains that ONNX Runtime's quantizer writes around Conv and
/// MatMul, in which every scale and zero point is a constant, the input and
/// output per tensor, the weights per tensor or per output channel, and the
/// bias (if any) int32 in the scale input scale x weight scale:
///
///   DQ(xq) -> Conv(., DQ(wq), DQ(bq)) [-> Relu] -> Q -> yq
///
/// becomes QLinearConv(xq, ..., wq, ..., bq) -> yq, with a Max against the
/// output zero point for the Relu when that is not the type's minimum
/// (Q(Relu(v)) = max(Q(v), Q(0)) since Q is monotonic and Q(0) is the
/// zero point). Why: the chain computes on dequantized floats, whose
/// rounding differs from the exact integer sum that ONNX Runtime's fused
/// kernels take, and so a quantized output can land one step away from
/// ONNX Runtime's; the fused form takes the integer sum (exact, see
/// RulesQuantize.cpp). A node whose output is read elsewhere (another
/// node, a subgraph, a graph output) is never folded away.
QdqFusionPlan planQdqFusion(const onnx::GraphProto &graph);

} // namespace kiln

#endif
