// A copy of a model whose every node output is also a graph output, for
// the tools that look inside a run: kiln-run --check-finite and --verify.
#ifndef KILN_API_INTERMEDIATES_H
#define KILN_API_INTERMEDIATES_H

#include "kiln/Frontend/ModelLoader.h"
#include "kiln/Kiln.h"
#include "onnx/onnx_pb.h"

#include <functional>
#include <set>

namespace kiln {

struct ExposedModel {
  LoadedModel model;        ///< as loaded from the path
  onnx::ModelProto proto;   ///< the copy, with the extra outputs
  std::string bytes;        ///< `proto` serialized
  std::vector<std::string> exposed; ///< the node outputs added, in graph order
  size_t declared = 0;      ///< the model's own outputs (the first ones)
};

/// Every tensor output of a node of the main graph (not those of Loop, If,
/// Optional and sequence ops, which may not be tensors) becomes a graph
/// output, typed by ONNX shape inference where it can.
Status exposeNodeOutputs(const std::string &path, ExposedModel &out);

/// Compiles (or interprets, per options) the copy and runs it.
Status runExposed(const ExposedModel &exposed, const CompileOptions &options,
                  const std::vector<ValueView> &inputs, std::vector<Value> &values,
                  std::vector<TensorInfo> &inputInfo);

/// Where a fault starts: the first node, in graph order, one of whose
/// outputs has a fault although none of its inputs has. `fault(value)`
/// describes a value's fault, "" when it is fine or was not computed.
/// `faulty` holds the values known bad beforehand (graph inputs,
/// initializers) and ends holding every faulty value.
struct FirstFault {
  int node = -1;           ///< index in the graph, -1: none
  std::string output, why; ///< its faulty output and fault()'s description
};
FirstFault findFirstFault(const onnx::GraphProto &graph,
                          const std::function<std::string(const std::string &)> &fault,
                          std::set<std::string> &faulty);

} // namespace kiln

#endif
