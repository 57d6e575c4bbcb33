// kiln-run --check-finite: the first node of a model whose output holds a
// NaN or an infinity although what it read was finite.
//
// Why by exposing intermediates rather than by instrumenting kernels: every
// node output becomes a graph output of a copy of the model, compiled by
// the ordinary path, so the trace needs no second code generator and names
// nodes exactly as the ONNX graph does. The copy fuses less (a value with
// another reader is not folded into its consumer), so a NaN that only a
// fused kernel makes would not show; the outputs of the model itself are
// computed by the same kernels either way.
#include "Intermediates.h"
#include "onnx/onnx_pb.h"
#include "onnx/shape_inference/implementation.h"

#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

namespace kiln {
namespace {

/// A name from the model, as report lines quote it.
std::string safe(const std::string &name) { return displaySafe(name, 200); }

/// Node kinds whose outputs may be sequences or optionals: not exposed
/// (a graph output of those kinds needs a declared type).
bool mayGiveNonTensor(const std::string &op) {
  return op.rfind("Sequence", 0) == 0 || op == "SplitToSequence" || op == "Optional" ||
         op == "Loop" || op == "If";
}

struct Finiteness {
  int64_t nan = 0, inf = 0, first = -1;
  double firstValue = 0;
  bool ok() const { return nan == 0 && inf == 0; }
};

template <typename T> void scan(const T *p, int64_t n, Finiteness &f) {
  for (int64_t i = 0; i < n; ++i) {
    double v = (double)p[i];
    if (std::isfinite(v))
      continue;
    (std::isnan(v) ? f.nan : f.inf) += 1;
    if (f.first < 0) {
      f.first = i;
      f.firstValue = v;
    }
  }
}

/// Whether a tensor of a float type is finite; other types always are.
Finiteness check(const kiln_tensor *t) {
  Finiteness f;
  int64_t n = kiln_tensor_num_elements(t);
  const void *data = kiln_tensor_data(const_cast<kiln_tensor *>(t));
  switch (kiln_tensor_dtype(t)) {
  case KILN_FLOAT32: scan(static_cast<const float *>(data), n, f); break;
  case KILN_FLOAT64: scan(static_cast<const double *>(data), n, f); break;
  case KILN_FLOAT16:
  case KILN_BFLOAT16: {
    // Only the exponent field matters: all ones is an infinity or a NaN.
    bool half = kiln_tensor_dtype(t) == KILN_FLOAT16;
    const uint16_t *p = static_cast<const uint16_t *>(data);
    for (int64_t i = 0; i < n; ++i) {
      uint16_t expMask = half ? 0x7c00 : 0x7f80, manMask = half ? 0x03ff : 0x007f;
      if ((p[i] & expMask) != expMask)
        continue;
      bool nan = (p[i] & manMask) != 0;
      (nan ? f.nan : f.inf) += 1;
      if (f.first < 0) {
        f.first = i;
        f.firstValue = nan ? NAN : (p[i] & 0x8000 ? -INFINITY : INFINITY);
      }
    }
    break;
  }
  default: break;
  }
  return f;
}

/// A float32 initializer's finiteness (raw_data or float_data); other
/// types and external data count as finite.
Finiteness checkInitializer(const onnx::TensorProto &t) {
  Finiteness f;
  if (t.data_type() != onnx::TensorProto::FLOAT)
    return f;
  if (!t.raw_data().empty()) {
    size_t n = t.raw_data().size() / 4;
    std::vector<float> v(n);
    std::memcpy(v.data(), t.raw_data().data(), n * 4);
    scan(v.data(), (int64_t)n, f);
  } else {
    scan(t.float_data().data(), t.float_data_size(), f);
  }
  return f;
}

std::string dimsOf(const kiln_tensor *t) {
  std::string s = "[";
  for (int32_t d = 0; d < kiln_tensor_rank(t); ++d)
    s += (d ? "x" : "") + std::to_string(kiln_tensor_dims(t)[d]);
  return s + "]";
}

std::string describe(const Finiteness &f) {
  std::ostringstream os;
  os << f.nan << " NaN and " << f.inf << " infinite values (first at flat index " << f.first
     << ": " << (std::isnan(f.firstValue) ? "nan" : f.firstValue < 0 ? "-inf" : "inf") << ")";
  return os.str();
}

} // namespace

Status exposeNodeOutputs(const std::string &path, ExposedModel &out) {
  std::string error;
  if (!loadModelFromFile(path, out.model, error))
    return Status::error(KILN_COMPILE_ERROR, error);
  out.proto = *out.model.proto;
  onnx::GraphProto &graph = *out.proto.mutable_graph();
  std::set<std::string> outputs;
  for (const auto &o : graph.output())
    outputs.insert(o.name());
  out.declared = graph.output_size();
  // ONNX's checker wants a type on every graph output: ONNX shape inference
  // gives most; Kiln's importer does not read declared output types, so a
  // value it cannot type gets an undefined element type.
  std::map<std::string, onnx::TypeProto> types;
  try {
    onnx::ModelProto inferred = out.proto;
    onnx::shape_inference::InferShapes(inferred);
    for (const auto &vi : inferred.graph().value_info())
      types[vi.name()] = vi.type();
  } catch (const std::exception &) {
    // A model ONNX cannot infer compiles all the same.
  }
  out.exposed.clear();
  for (const auto &node : graph.node()) {
    if (mayGiveNonTensor(node.op_type()))
      continue;
    for (const std::string &name : node.output())
      if (!name.empty() && outputs.insert(name).second) {
        onnx::ValueInfoProto *o = graph.add_output();
        o->set_name(name);
        auto known = types.find(name);
        if (known != types.end() && known->second.has_tensor_type() &&
            known->second.tensor_type().has_shape()) {
          *o->mutable_type() = known->second;
        } else {
          auto *tensorType = o->mutable_type()->mutable_tensor_type();
          tensorType->set_elem_type(known != types.end() && known->second.has_tensor_type()
                                        ? known->second.tensor_type().elem_type()
                                        : (int)onnx::TensorProto::UNDEFINED);
          tensorType->mutable_shape();
        }
        out.exposed.push_back(name);
      }
  }
  if (!out.proto.SerializeToString(&out.bytes))
    return Status::error(KILN_INTERNAL, "cannot serialize the model with its intermediates "
                                        "exposed (over 2 GB?)");
  return {};
}

Status runExposed(const ExposedModel &exposed, const CompileOptions &options,
                  const std::vector<ValueView> &inputs, std::vector<Value> &values,
                  std::vector<TensorInfo> &inputInfo) {
  std::string error;
  std::unique_ptr<Model> traced = Model::loadFromMemory(
      exposed.bytes.data(), exposed.bytes.size(), exposed.model.baseDir, options, &error);
  if (!traced)
    return Status::error(KILN_COMPILE_ERROR,
                         "the model with every node output exposed does not compile: " + error);
  inputInfo = traced->inputs();
  return traced->run(inputs, values);
}

FirstFault findFirstFault(const onnx::GraphProto &graph,
                          const std::function<std::string(const std::string &)> &fault,
                          std::set<std::string> &faulty) {
  FirstFault first;
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto &node = graph.node(i);
    bool inputsFine = true;
    for (const std::string &in : node.input())
      inputsFine = inputsFine && (in.empty() || !faulty.count(in));
    for (const std::string &out : node.output()) {
      std::string why = out.empty() ? std::string() : fault(out);
      if (why.empty())
        continue;
      faulty.insert(out);
      if (inputsFine && first.node < 0)
        first = {i, out, why};
    }
  }
  return first;
}

Status traceNonFinite(const std::string &path, const CompileOptions &options,
                      const std::vector<ValueView> &inputs, NonFiniteReport &report) {
  report = NonFiniteReport();
  ExposedModel exposedModel;
  if (Status s = exposeNodeOutputs(path, exposedModel); !s.ok())
    return s;
  const onnx::GraphProto &graph = exposedModel.proto.graph();
  const std::vector<std::string> &exposed = exposedModel.exposed;
  size_t declared = exposedModel.declared;
  std::vector<Value> values;
  std::vector<TensorInfo> inputInfo;
  if (Status s = runExposed(exposedModel, options, inputs, values, inputInfo); !s.ok())
    return s;

  // Every value computed by the run, the graph's inputs and initializers.
  std::map<std::string, const kiln_tensor *> tensors;
  for (size_t j = 0; j < inputs.size() && j < inputInfo.size(); ++j)
    if (inputs[j].kind == ValueKind::Tensor && inputs[j].tensors.size() == 1)
      tensors[inputInfo[j].name] = inputs[j].tensors[0];
  for (size_t k = 0; k < values.size() && k < (size_t)graph.output_size(); ++k)
    if (values[k].kind == ValueKind::Tensor && values[k].tensors.size() == 1)
      tensors[graph.output((int)k).name()] = values[k].tensors[0].get();
  std::map<std::string, const onnx::TensorProto *> initializers;
  for (const auto &init : graph.initializer())
    initializers[init.name()] = &init;
  report.valuesChecked = exposed.size() + declared;

  std::set<std::string> bad; // values holding a NaN or an infinity
  for (size_t j = 0; j < inputInfo.size(); ++j) {
    auto it = tensors.find(inputInfo[j].name);
    if (it == tensors.end())
      continue;
    Finiteness f = check(it->second);
    if (f.ok())
      continue;
    bad.insert(inputInfo[j].name);
    report.lines.push_back("graph input '" + safe(inputInfo[j].name) + "' " + dimsOf(it->second) +
                           " holds " + describe(f));
  }
  for (const auto &[name, init] : initializers)
    if (Finiteness f = checkInitializer(*init); !f.ok()) {
      bad.insert(name);
      report.lines.push_back("initializer '" + safe(name) + "' holds " + describe(f));
    }

  FirstFault first = findFirstFault(
      graph,
      [&](const std::string &name) {
        auto it = tensors.find(name);
        Finiteness f = it == tensors.end() ? Finiteness() : check(it->second);
        return f.ok() ? std::string() : describe(f);
      },
      bad);
  if (first.node >= 0) {
    const onnx::NodeProto &node = graph.node(first.node);
    report.found = true;
    report.node = node.name();
    report.opType = node.op_type();
    report.nodeIndex = first.node;
    std::string line = "node '" + safe(node.name()) + "' (" + safe(node.op_type()) + "), node " +
                       std::to_string(first.node) + " of the graph: output '" +
                       safe(first.output) + "' " + dimsOf(tensors[first.output]) + " holds " +
                       first.why + " although its inputs are finite:";
    for (const std::string &in : node.input()) {
      if (in.empty())
        continue;
      auto t = tensors.find(in);
      line += " '" + safe(in) + "'" +
              (t != tensors.end() ? " " + dimsOf(t->second)
               : initializers.count(in) ? " (initializer)"
                                        : "");
    }
    report.lines.push_back(line);
  }
  if (!report.found && !bad.empty())
    report.lines.push_back("every NaN or infinity comes from the graph's inputs or initializers");
  return {};
}

} // namespace kiln
