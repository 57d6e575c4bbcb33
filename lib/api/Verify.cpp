// kiln-run --verify / kiln::verify: the compiled model against the
// reference interpreter on the same inputs, and, when they differ, the
// first ONNX node whose value differs although what it read agrees.
//
// Localised by exposing every node output (as --check-finite does) in both
// runs rather than by bisection: one compile and one interpretation find
// the node. Exposing values stops fusion across them, so a miscompile that
// only a fused kernel makes may vanish in the exposed copy: the report
// says so when that happens.
#include "Intermediates.h"

#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

#include "llvm/ADT/APFloat.h"

namespace kiln {
namespace {

/// A name from the model, as report lines quote it.
std::string safe(const std::string &name) { return displaySafe(name, 200); }

double elementAt(const kiln_tensor *t, int64_t i) {
  const void *p = kiln_tensor_data(const_cast<kiln_tensor *>(t));
  switch (kiln_tensor_dtype(t)) {
  case KILN_FLOAT32: return static_cast<const float *>(p)[i];
  case KILN_FLOAT64: return static_cast<const double *>(p)[i];
  case KILN_FLOAT16:
  case KILN_BFLOAT16: {
    const auto &sem = kiln_tensor_dtype(t) == KILN_FLOAT16 ? llvm::APFloat::IEEEhalf()
                                                           : llvm::APFloat::BFloat();
    return llvm::APFloat(sem, llvm::APInt(16, static_cast<const uint16_t *>(p)[i])).convertToDouble();
  }
  case KILN_BOOL: case KILN_UINT8: return static_cast<const uint8_t *>(p)[i];
  case KILN_INT8: return static_cast<const int8_t *>(p)[i];
  case KILN_UINT16: return static_cast<const uint16_t *>(p)[i];
  case KILN_INT16: return static_cast<const int16_t *>(p)[i];
  case KILN_UINT32: return static_cast<const uint32_t *>(p)[i];
  case KILN_INT32: return static_cast<const int32_t *>(p)[i];
  case KILN_UINT64: return (double)static_cast<const uint64_t *>(p)[i];
  case KILN_INT64: return (double)static_cast<const int64_t *>(p)[i];
  default: return NAN;
  }
}

std::string dimsOf(const kiln_tensor *t) {
  std::string s = std::string(kiln_dtype_name(kiln_tensor_dtype(t))) + "[";
  for (int32_t d = 0; d < kiln_tensor_rank(t); ++d)
    s += (d ? "x" : "") + std::to_string(kiln_tensor_dims(t)[d]);
  return s + "]";
}

std::string coordsOf(const kiln_tensor *t, int64_t flat) {
  int32_t rank = kiln_tensor_rank(t);
  std::vector<int64_t> c(rank);
  for (int32_t d = rank; d-- > 0;) {
    int64_t n = kiln_tensor_dims(t)[d];
    c[d] = n ? flat % n : 0;
    flat = n ? flat / n : 0;
  }
  std::string s = "[";
  for (int32_t d = 0; d < rank; ++d)
    s += (d ? ", " : "") + std::to_string(c[d]);
  return s + "]";
}

/// How a compiled tensor differs from the interpreter's; empty when within
/// |a - b| <= atol + rtol * |b| everywhere (NaN matches NaN).
std::string difference(const kiln_tensor *a, const kiln_tensor *b, double atol, double rtol) {
  if (kiln_tensor_dtype(a) != kiln_tensor_dtype(b))
    return "element types differ";
  if (dimsOf(a) != dimsOf(b))
    return "shapes differ: compiled " + dimsOf(a) + ", interpreter " + dimsOf(b);
  int64_t n = kiln_tensor_num_elements(a), bad = 0, worst = -1;
  double worstExcess = 0;
  for (int64_t i = 0; i < n; ++i) {
    double x = elementAt(a, i), y = elementAt(b, i);
    if ((std::isnan(x) && std::isnan(y)) || x == y)
      continue;
    double tol = atol + rtol * std::fabs(y), diff = std::fabs(x - y);
    if (diff <= tol)
      continue;
    ++bad;
    double excess = std::isnan(diff) ? INFINITY : diff - tol;
    if (worst < 0 || excess > worstExcess) {
      worst = i;
      worstExcess = excess;
    }
  }
  if (!bad)
    return "";
  std::ostringstream os;
  os.precision(9);
  double x = elementAt(a, worst), y = elementAt(b, worst);
  os << bad << " of " << n << " elements differ; worst at " << coordsOf(a, worst) << ": compiled "
     << x << ", interpreter " << y << " (|difference| " << std::fabs(x - y) << ")";
  return os.str();
}

/// The runs' tensors by ONNX value name.
using Named = std::map<std::string, std::pair<const kiln_tensor *, const kiln_tensor *>>;

} // namespace

Status verify(const std::string &path, const CompileOptions &options,
              const std::vector<ValueView> &inputs, double atol, double rtol,
              VerifyReport &report) {
  report = VerifyReport();
  CompileOptions compiledOptions = options, interpOptions = options;
  interpOptions.interpret = true;
  interpOptions.cache = false;

  // 1. The model's own outputs.
  std::string error;
  auto compiled = Model::load(path, compiledOptions, &error);
  if (!compiled)
    return Status::error(KILN_COMPILE_ERROR, error);
  auto reference = Model::load(path, interpOptions, &error);
  if (!reference)
    return Status::error(KILN_COMPILE_ERROR, error);
  std::vector<Value> got, want;
  if (Status s = compiled->run(inputs, got); !s.ok())
    return s;
  if (Status s = reference->run(inputs, want); !s.ok())
    return s;
  for (size_t k = 0; k < got.size() && k < want.size(); ++k) {
    const std::string &name = compiled->outputs()[k].name;
    if (got[k].tensors.size() != want[k].tensors.size()) {
      report.outputsMatch = false;
      report.lines.push_back("output '" + safe(name) + "': the runs give different numbers of tensors");
      continue;
    }
    for (size_t e = 0; e < got[k].tensors.size(); ++e) {
      std::string d = difference(got[k].tensors[e].get(), want[k].tensors[e].get(), atol, rtol);
      ++report.valuesCompared;
      if (d.empty())
        continue;
      report.outputsMatch = false;
      report.lines.push_back("output '" + safe(name) + "' " + dimsOf(got[k].tensors[e].get()) + ": " + d);
    }
  }
  if (report.outputsMatch)
    return {};

  // 2. Every node output, to find where the difference starts.
  ExposedModel exposed;
  if (Status s = exposeNodeOutputs(path, exposed); !s.ok())
    return s;
  std::vector<Value> gotAll, wantAll;
  std::vector<TensorInfo> inputInfo;
  if (Status s = runExposed(exposed, compiledOptions, inputs, gotAll, inputInfo); !s.ok())
    return s;
  if (Status s = runExposed(exposed, interpOptions, inputs, wantAll, inputInfo); !s.ok())
    return s;
  const onnx::GraphProto &graph = exposed.proto.graph();
  Named values;
  for (size_t k = 0; k < gotAll.size() && k < wantAll.size() && k < (size_t)graph.output_size(); ++k)
    if (gotAll[k].kind == ValueKind::Tensor && wantAll[k].kind == ValueKind::Tensor &&
        gotAll[k].tensors.size() == 1 && wantAll[k].tensors.size() == 1)
      values[graph.output((int)k).name()] = {gotAll[k].tensors[0].get(), wantAll[k].tensors[0].get()};
  report.valuesCompared = values.size();
  std::set<std::string> differing;
  FirstFault first = findFirstFault(
      graph,
      [&](const std::string &name) {
        auto it = values.find(name);
        return it == values.end() ? std::string()
                                  : difference(it->second.first, it->second.second, atol, rtol);
      },
      differing);
  if (first.node >= 0) {
    const onnx::NodeProto &node = graph.node(first.node);
    report.found = true;
    report.node = node.name();
    report.opType = node.op_type();
    report.nodeIndex = first.node;
    std::string line = "first differing node: '" + safe(node.name()) + "' (" +
                       safe(node.op_type()) + "), node " + std::to_string(first.node) +
                       " of the graph: output '" + safe(first.output) + "' " +
                       dimsOf(values[first.output].first) + ": " + first.why +
                       "; its inputs agree:";
    for (const std::string &in : node.input()) {
      if (in.empty())
        continue;
      auto v = values.find(in);
      line += " '" + safe(in) + "'" + (v != values.end() ? " " + dimsOf(v->second.first) : "");
    }
    report.lines.push_back(line);
  }
  if (!report.found)
    report.lines.push_back(
        "no node differs when every node output is exposed: the difference comes from code "
        "that fuses several nodes (exposing their values stops that fusion)");
  return {};
}

} // namespace kiln
