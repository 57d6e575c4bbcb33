// A copy of a model whose every node output is also a graph output, for
// the tools that look inside a run: kiln-run --check-finite and --verify.
#ifndef KILN_API_INTERMEDIATES_H
#define KILN_API_INTERMEDIATES_H

#include "kiln/Frontend/ModelLoader.h"
#include "kiln/Kiln.h"
#include "onnx/onnx_pb.h"

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

} // namespace kiln

#endif
