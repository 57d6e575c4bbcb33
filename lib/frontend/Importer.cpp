// The mechanical part of the importer: graph inputs, initializers, node
// order, value names, locations. Per-op semantics are in Rules*.cpp.
#include "kiln/Frontend/Importer.h"
#include "NodeImporter.h"
#include "QdqFusion.h"
#include "ControlFlow.h"
#include "Gradient.h"
#include "RowCounts.h"
#include "Sequences.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Matchers.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;

namespace kiln {

//===----------------------------------------------------------------------===//
// Tensors
//===----------------------------------------------------------------------===//

Type onnxElementType(MLIRContext *ctx, int32_t dataType) {
  Builder b(ctx);
  switch (dataType) {
  case onnx::TensorProto::FLOAT: return b.getF32Type();
  case onnx::TensorProto::DOUBLE: return b.getF64Type();
  case onnx::TensorProto::FLOAT16: return b.getF16Type();
  case onnx::TensorProto::BFLOAT16: return b.getBF16Type();
  case onnx::TensorProto::INT8: return b.getI8Type();
  case onnx::TensorProto::INT16: return b.getI16Type();
  case onnx::TensorProto::INT32: return b.getI32Type();
  case onnx::TensorProto::INT64: return b.getI64Type();
  case onnx::TensorProto::BOOL: return b.getI1Type();
  case onnx::TensorProto::UINT8: return IntegerType::get(ctx, 8, IntegerType::Unsigned);
  case onnx::TensorProto::UINT16: return IntegerType::get(ctx, 16, IntegerType::Unsigned);
  case onnx::TensorProto::UINT32: return IntegerType::get(ctx, 32, IntegerType::Unsigned);
  case onnx::TensorProto::UINT64: return IntegerType::get(ctx, 64, IntegerType::Unsigned);
  default: return {};
  }
}

static std::string dataTypeName(int32_t dt) {
  if (onnx::TensorProto::DataType_IsValid(dt))
    return onnx::TensorProto::DataType_Name((onnx::TensorProto::DataType)dt);
  return "data type " + std::to_string(dt);
}

FailureOr<ElementsAttr> tensorToAttr(MLIRContext *ctx, const onnx::TensorProto &t,
                                     std::string &error) {
  Type elt = onnxElementType(ctx, t.data_type());
  if (!elt) {
    error = "tensor '" + t.name() + "' has unsupported element type " +
            dataTypeName(t.data_type());
    return failure();
  }
  SmallVector<int64_t> dims(t.dims().begin(), t.dims().end());
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) {
      error = "tensor '" + t.name() + "' has a negative dimension";
      return failure();
    }
    n *= d;
  }
  auto type = RankedTensorType::get(dims, elt);
  bool isBool = elt.isInteger(1);
  // Raw payloads go straight into the attribute: a decoded copy of every
  // weight would double the import's peak memory.
  if (!isBool && t.has_raw_data() &&
      t.raw_data().size() == (size_t)n * elt.getIntOrFloatBitWidth() / 8)
    return cast<ElementsAttr>(DenseElementsAttr::getFromRawBuffer(
        type, ArrayRef<char>(t.raw_data().data(), t.raw_data().size())));
  std::string bytes;
  if (!decodeTensorPayload(t, isBool ? 1 : elt.getIntOrFloatBitWidth() / 8, n, bytes, error)) {
    error = "tensor '" + t.name() + "' " + error;
    return failure();
  }
  if (isBool) {
    // i1 attributes are bit-packed; ONNX booleans are one byte each.
    SmallVector<bool> v;
    for (char c : bytes)
      v.push_back(c != 0);
    return cast<ElementsAttr>(DenseElementsAttr::get(type, v));
  }
  return cast<ElementsAttr>(
      DenseElementsAttr::getFromRawBuffer(type, ArrayRef<char>(bytes.data(), bytes.size())));
}

//===----------------------------------------------------------------------===//
// Rule registry
//===----------------------------------------------------------------------===//

static const llvm::StringMap<std::vector<ImportRule>> &ruleTable() {
  static const llvm::StringMap<std::vector<ImportRule>> table = [] {
    std::vector<ImportRule> all;
    addElementwiseRules(all);
    addTensorRules(all);
    addNNRules(all);
    addReductionRules(all);
    addLossRules(all);
    addResizeRules(all);
    addRecurrentRules(all);
    addEinsumRules(all);
    addLegacyRules(all);
    addQuantizationRules(all);
    addTrainingRules(all);
    addSignalRules(all);
    addSelectionRules(all);
    addSamplingRules(all);
    addTfIdfRules(all);
    llvm::StringMap<std::vector<ImportRule>> t;
    for (const ImportRule &r : all)
      t[r.opType].push_back(r);
    return t;
  }();
  return table;
}

ImportFn lookupImportRule(llvm::StringRef opType, int64_t opset) {
  const auto &table = ruleTable();
  auto rules = table.find(opType);
  if (rules == table.end())
    return nullptr;
  for (const ImportRule &r : rules->second)
    if (opset >= r.minOpset && opset <= r.maxOpset)
      return r.fn;
  return nullptr;
}

std::vector<ImportRuleInfo> listImportRules() {
  std::vector<ImportRuleInfo> out;
  for (const auto &entry : ruleTable())
    for (const ImportRule &r : entry.second)
      out.push_back({r.opType, r.minOpset, r.maxOpset});
  std::sort(out.begin(), out.end(), [](const ImportRuleInfo &a, const ImportRuleInfo &b) {
    return std::tie(a.opType, a.minOpset) < std::tie(b.opType, b.minOpset);
  });
  return out;
}

int64_t defaultDomainOpset(const onnx::ModelProto &model) {
  for (const auto &o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx")
      return o.version();
  return 1;
}

//===----------------------------------------------------------------------===//
// Graph import
//===----------------------------------------------------------------------===//

namespace {
class GraphImporter {
public:
  GraphImporter(MLIRContext &ctx, const LoadedModel &model, const ImportOptions &opts)
      : ctx(ctx), model(model), opts(opts), b(&ctx) {}

  OwningOpRef<ModuleOp> run();

private:
  /// An importer for a subgraph of `parent`'s graph, building at `parent`'s
  /// builder's insertion point.
  GraphImporter(GraphImporter &parent)
      : ctx(parent.ctx), model(parent.model), opts(parent.opts), b(&parent.ctx),
        parent(&parent), opset(parent.opset) {}

  /// The value a name refers to here or in an enclosing graph (null if none).
  Value lookup(llvm::StringRef name) const;
  bool isSequence(llvm::StringRef name) const { return findSequence(name) != nullptr; }
  /// The sequence a name refers to here or in an enclosing graph: sequences
  /// are lists of values known while compiling, so a subgraph reads its
  /// parents' freely (scf regions see values defined above them).
  const SmallVector<Value> *findSequence(llvm::StringRef name) const;
  /// Whether the name is an empty optional here or in an enclosing graph.
  bool isNone(llvm::StringRef name) const;
  LogicalResult importSubgraph(OpBuilder &at, const onnx::GraphProto &graph,
                               ArrayRef<Value> args, SmallVectorImpl<Value> &outputs,
                               const SequenceSlots *seqArgs, SequenceSlots *seqOutputs,
                               SmallVectorImpl<CountedAxis> *outputCounts = nullptr);
  /// Optional, OptionalHasElement, OptionalGetElement, SequenceMap and an
  /// Identity of a sequence or an optional: ops on what names stand for
  /// rather than on tensors. False when `node` is none of them.
  FailureOr<bool> importStructuralNode(const onnx::NodeProto &node, Location loc,
                                       int64_t nodeOpset);
  void importSequenceMap(const onnx::NodeProto &node, Location loc);
  /// Set by importSequenceMap on failure (it has emitted the error).
  bool failed_ = false;
  /// Binds a node output to a tensor, a sequence or nothing (an empty optional).
  void bind(const std::string &name, Value tensor, const SmallVector<Value> *seq, bool none);
  FailureOr<Type> inputType(const onnx::ValueInfoProto &info, const onnx::TypeProto &type,
                            size_t argIndex);
  Location nodeLoc(const onnx::NodeProto &node, size_t index);
  LogicalResult importNode(const onnx::NodeProto &node, size_t index);

  MLIRContext &ctx;
  const LoadedModel &model;
  const ImportOptions &opts;
  OpBuilder b;
  llvm::StringMap<Value> values;
  /// Sequence values by name: lists of tensors (Sequences.cpp).
  llvm::StringMap<SmallVector<Value>> sequences;
  /// Names bound to an empty optional.
  llvm::StringSet<> nones;
  /// Run-time row counts of tensors by name (RowCounts.h).
  llvm::StringMap<CountedAxis> rowCounts;
  /// Bounds of small integer tensors computed from row counts (RowCounts.h).
  llvm::StringMap<BoundedInts> intBounds;
  /// What `table` of the innermost graph binding `name` holds for it:
  /// a name bound again in a subgraph hides the outer entry.
  template <typename T>
  T scopedEntry(llvm::StringMap<T> GraphImporter::*table, llvm::StringRef name) const {
    for (const GraphImporter *g = this; g; g = g->parent) {
      if (auto it = (g->*table).find(name); it != (g->*table).end())
        return it->second;
      if (g->values.count(name))
        return {};
    }
    return {};
  }
  CountedAxis rowCountOf(llvm::StringRef name) const {
    return scopedEntry(&GraphImporter::rowCounts, name);
  }
  BoundedInts boundsOf(llvm::StringRef name) const {
    return scopedEntry(&GraphImporter::intBounds, name);
  }
  CountedState countedState;
  GraphImporter *parent = nullptr;
  /// The graph whose nodes are being imported (Gradient reads earlier ones).
  const onnx::GraphProto *graphProto = nullptr;
  int64_t opset = 1;
};
} // namespace

Value GraphImporter::lookup(llvm::StringRef name) const {
  for (const GraphImporter *g = this; g; g = g->parent)
    if (auto it = g->values.find(name); it != g->values.end())
      return it->second;
  return {};
}

const SmallVector<Value> *GraphImporter::findSequence(llvm::StringRef name) const {
  for (const GraphImporter *g = this; g; g = g->parent) {
    if (g->values.count(name) || g->nones.count(name))
      return nullptr;
    if (auto it = g->sequences.find(name); it != g->sequences.end())
      return &it->second;
  }
  return nullptr;
}

bool GraphImporter::isNone(llvm::StringRef name) const {
  for (const GraphImporter *g = this; g; g = g->parent) {
    if (g->values.count(name) || g->sequences.count(name))
      return false;
    if (g->nones.count(name))
      return true;
  }
  return false;
}

void GraphImporter::bind(const std::string &name, Value tensor, const SmallVector<Value> *seq,
                         bool none) {
  if (name.empty())
    return;
  // A copy first: `seq` may be this very name's entry (a node whose output
  // reuses its input's name).
  std::optional<SmallVector<Value>> elements;
  if (seq)
    elements = *seq;
  values.erase(name);
  sequences.erase(name);
  nones.erase(name);
  rowCounts.erase(name);
  intBounds.erase(name);
  if (none)
    nones.insert(name);
  else if (elements)
    sequences[name] = std::move(*elements);
  else
    values[name] = tensor;
}

LogicalResult GraphImporter::importSubgraph(OpBuilder &at, const onnx::GraphProto &graph,
                                            ArrayRef<Value> args,
                                            SmallVectorImpl<Value> &outputs,
                                            const SequenceSlots *seqArgs,
                                            SequenceSlots *seqOutputs,
                                            SmallVectorImpl<CountedAxis> *outputCounts) {
  GraphImporter sub(*this);
  sub.graphProto = &graph;
  sub.b.setInsertionPoint(at.getInsertionBlock(), at.getInsertionPoint());
  Location loc = NameLoc::get(StringAttr::get(&ctx, "subgraph '" + graph.name() + "'"));
  if ((size_t)graph.input_size() != args.size())
    return emitError(loc) << "the subgraph has " << graph.input_size() << " inputs; "
                          << args.size() << " are passed to it";
  for (auto [i, in, arg] : llvm::enumerate(graph.input(), args)) {
    auto seq = seqArgs ? seqArgs->find(i) : SequenceSlots::const_iterator();
    if (seqArgs && seq != seqArgs->end())
      sub.bind(in.name(), {}, &seq->second, isEmptyOptionalSlot(seq->second));
    else
      sub.values[in.name()] = arg;
  }
  for (const auto &init : graph.initializer()) {
    std::string err;
    auto attr = tensorToAttr(&ctx, init, err);
    if (failed(attr))
      return emitError(loc) << err;
    sub.values[init.name()] = ConstantOp::create(sub.b, loc, attr->getType(), *attr);
  }
  for (auto [i, node] : llvm::enumerate(graph.node()))
    if (failed(sub.importNode(node, i)))
      return failure();
  for (auto [i, out] : llvm::enumerate(graph.output())) {
    Value v = sub.lookup(out.name());
    const SmallVector<Value> *seq = v ? nullptr : sub.findSequence(out.name());
    bool none = !v && !seq && sub.isNone(out.name());
    if ((seq || none) && seqOutputs) {
      (*seqOutputs)[i] = none ? emptyOptionalSlot() : *seq;
      outputs.push_back(Value());
      continue;
    }
    if (v && outputCounts) {
      outputCounts->resize(i);
      outputCounts->push_back(sub.rowCountOf(out.name()));
    } else if (v && sub.rowCountOf(out.name()))
      return emitError(loc) << "subgraph output '" << out.name()
                            << "' has a number of valid rows known only at run time (from a "
                               "NonMaxSuppression); such values cannot leave a subgraph";
    if (!v)
      return emitError(loc) << "subgraph output '" << out.name() << "' is "
                            << (seq || none ? "a sequence or an optional; those leave only a "
                                              "Loop unrolled while compiling or an If whose "
                                              "condition is known then (it must be a constant)"
                                            : "never produced");
    outputs.push_back(v);
  }
  // The caller's builder continues after what the subgraph built.
  at.setInsertionPoint(sub.b.getInsertionBlock(), sub.b.getInsertionPoint());
  return success();
}

FailureOr<Type> GraphImporter::inputType(const onnx::ValueInfoProto &info,
                                         const onnx::TypeProto &type, size_t index) {
  Location loc = NameLoc::get(StringAttr::get(&ctx, "graph input '" + info.name() + "'"));
  if (!type.has_tensor_type())
    return emitError(loc) << "only tensors, sequences of tensors and optionals of those are "
                             "supported as graph inputs",
           failure();
  const auto &tt = type.tensor_type();
  Type elt = onnxElementType(&ctx, tt.elem_type());
  if (!elt)
    return emitError(loc) << "unsupported element type " << dataTypeName(tt.elem_type()),
           failure();
  SmallVector<int64_t> dims;
  bool hasShape = tt.has_shape();
  // Declared dims whose product (of the non-zero ones: a zero-size tensor
  // with huge other dims still drives loops and masks) is beyond any
  // real tensor are a corrupt model.
  constexpr int64_t kMaxElements = int64_t(1) << 48;
  int64_t product = 1;
  for (const auto &d : tt.shape().dim()) {
    dims.push_back(d.has_dim_value() ? d.dim_value() : ShapedType::kDynamic);
    if (d.has_dim_value() && d.dim_value() < 0)
      return emitError(loc) << "has the negative dimension " << d.dim_value(), failure();
    if (d.has_dim_value() && d.dim_value() > 0) {
      if (d.dim_value() > kMaxElements / product)
        return emitError(loc) << "has dimensions whose product exceeds 2^48 elements",
               failure();
      product *= d.dim_value();
    }
  }
  if (index < opts.inputShapes.size() && !opts.inputShapes[index].empty()) {
    const auto &given = opts.inputShapes[index];
    if (hasShape && given.size() != dims.size())
      return emitError(loc) << "expects rank " << dims.size() << ", got a tensor of rank "
                            << given.size(),
             failure();
    for (size_t i = 0; hasShape && i < dims.size(); ++i)
      if (!ShapedType::isDynamic(dims[i]) && dims[i] != given[i])
        return emitError(loc) << "expects dimension " << i << " to be " << dims[i]
                              << ", got " << given[i],
               failure();
    return Type(RankedTensorType::get(given, elt));
  }
  if (!hasShape)
    return Type(UnrankedTensorType::get(elt));
  return Type(RankedTensorType::get(dims, elt));
}

Location GraphImporter::nodeLoc(const onnx::NodeProto &node, size_t index) {
  std::string name = node.name().empty()
                         ? node.op_type() + "#" + std::to_string(index)
                         : node.name();
  auto file = FileLineColLoc::get(&ctx, model.sourceName, 0, 0);
  return NameLoc::get(StringAttr::get(&ctx, name),
                      NameLoc::get(StringAttr::get(&ctx, node.op_type()), file));
}

FailureOr<bool> GraphImporter::importStructuralNode(const onnx::NodeProto &node, Location loc,
                                                    int64_t nodeOpset) {
  StringRef op = node.op_type();
  bool optionalOp = op == "Optional" || op == "OptionalHasElement" || op == "OptionalGetElement";
  if (!optionalOp && op != "Identity" && op != "SequenceMap")
    return false;
  std::string inName = node.input_size() > 0 ? node.input(0) : std::string();
  std::string outName = node.output_size() > 0 ? node.output(0) : std::string();
  bool empty = inName.empty() || isNone(inName);
  const SmallVector<Value> *seq = empty ? nullptr : findSequence(inName);
  if (op == "Identity") {
    if (!seq && !(empty && !inName.empty()))
      return false; // a tensor: the Identity rule
    bind(outName, {}, seq, !seq);
    return true;
  }
  if (op == "SequenceMap") {
    importSequenceMap(node, loc);
    if (failed_)
      return failure();
    return true;
  }
  if (nodeOpset < 15)
    return emitError(loc) << op << " needs opset 15 or later", failure();
  Value tensor = empty || seq ? Value() : lookup(inName);
  if (!empty && !seq && !tensor)
    return emitError(loc) << "input '" << inName
                          << "' is not produced by any earlier node, initializer or graph input",
           failure();
  if (op == "Optional") {
    bind(outName, tensor, seq, empty);
  } else if (op == "OptionalGetElement") {
    if (empty)
      return emitError(loc) << "OptionalGetElement of an empty optional", failure();
    bind(outName, tensor, seq, false);
  } else {
    auto type = RankedTensorType::get({}, b.getI1Type());
    bind(outName, ConstantOp::create(b, loc, type, DenseElementsAttr::get(type, !empty)), nullptr,
         false);
  }
  return true;
}

/// SequenceMap, unrolled while compiling (every sequence's length is known
/// then): the body is imported once per position, on the elements at that
/// position and the tensor inputs, and its outputs at each position make the
/// output sequences. Elements may differ in shape, as each copy of the body
/// sees its own.
void GraphImporter::importSequenceMap(const onnx::NodeProto &node, Location loc) {
  const onnx::GraphProto *body = nullptr;
  for (const auto &a : node.attribute())
    if (a.name() == "body" && a.type() == onnx::AttributeProto::GRAPH)
      body = &a.g();
  auto fail = [&](const Twine &message) {
    emitError(loc) << message;
    failed_ = true;
  };
  if (!body)
    return fail("SequenceMap needs a graph attribute 'body'");
  if (body->input_size() != node.input_size() || body->output_size() != node.output_size())
    return fail("SequenceMap's body must have as many inputs and outputs as the node");
  SmallVector<const SmallVector<Value> *> seqs;
  SmallVector<Value> tensors;
  int64_t length = -1;
  for (const std::string &name : node.input()) {
    const SmallVector<Value> *seq = findSequence(name);
    Value tensor = seq ? Value() : lookup(name);
    if (!seq && !tensor)
      return fail("input '" + name + "' is not a sequence or a tensor produced before");
    if (seq && length >= 0 && (int64_t)seq->size() != length)
      return fail("SequenceMap's input sequences differ in length");
    if (seq)
      length = seq->size();
    seqs.push_back(seq);
    tensors.push_back(tensor);
  }
  if (node.input_size() == 0 || !seqs[0])
    return fail("SequenceMap's first input must be a sequence");
  std::vector<SmallVector<Value>> results(node.output_size());
  for (int64_t i = 0; i < length; ++i) {
    SmallVector<Value> args, outs;
    for (auto [seq, tensor] : llvm::zip(seqs, tensors))
      args.push_back(seq ? (*seq)[i] : tensor);
    if (failed(importSubgraph(b, *body, args, outs, nullptr, nullptr)))
      return fail("cannot import SequenceMap's body at position " + Twine(i));
    for (auto [k, v] : llvm::enumerate(outs))
      results[k].push_back(v);
  }
  for (auto [k, name] : llvm::enumerate(node.output()))
    bind(name, {}, &results[k], false);
}

LogicalResult GraphImporter::importNode(const onnx::NodeProto &node, size_t index) {
  Location loc = nodeLoc(node, index);
  int64_t nodeOpset = opset;
  bool trainingDomain = node.domain() == "ai.onnx.preview.training";
  if (trainingDomain && node.op_type() == "Gradient") {
    SmallVector<Value> inputs;
    NodeImporter ni(b, loc, node, 1, inputs);
    SmallVector<const onnx::NodeProto *> before;
    for (size_t i = 0; i < index && graphProto && i < (size_t)graphProto->node_size(); ++i)
      before.push_back(&graphProto->node(i));
    SmallVector<Value> outputs;
    if (failed(importGradient(ni, before, [&](StringRef name) { return lookup(name); },
                              outputs)) ||
        ni.failed()) {
      (void)ni.error("cannot import this Gradient node");
      return failure();
    }
    for (auto [i, name] : llvm::enumerate(node.output()))
      if (!name.empty() && i < outputs.size())
        values[name] = outputs[i];
    return success();
  }
  if (trainingDomain && isTrainingDomainOperator(node.op_type())) {
    nodeOpset = 1;
    for (const auto &o : model.proto->opset_import())
      if (o.domain() == node.domain())
        nodeOpset = o.version();
  } else if (node.domain() == "com.microsoft" && microsoftRule(node.op_type())) {
    nodeOpset = 1; // the rules follow ONNX Runtime's contrib schemas, version 1
  } else if (!node.domain().empty() && node.domain() != "ai.onnx") {
    return emitError(loc) << "operator '" << node.op_type() << "' of domain '"
                          << node.domain() << "' is not supported";
  } else if (isTrainingDomainOperator(node.op_type())) {
    return emitError(loc) << "operator '" << node.op_type()
                          << "' belongs to the domain 'ai.onnx.preview.training'";
  }
  SmallVector<CountedAxis> inputCounts;
  for (const std::string &name : node.input())
    inputCounts.push_back(name.empty() ? CountedAxis() : rowCountOf(name));
  bool readsCounted = llvm::any_of(inputCounts, [](CountedAxis c) { return (bool)c; });
  bool ruleOp = !isControlFlowOperator(node.op_type()) && !isSequenceOperator(node.op_type()) &&
                !llvm::is_contained({"Optional", "OptionalHasElement", "OptionalGetElement",
                                     "SequenceMap"},
                                    node.op_type());
  if (readsCounted && !ruleOp)
    return emitError(loc) << node.op_type()
                          << " reads a value whose number of valid rows is known only at run "
                             "time (from a NonMaxSuppression on run-time boxes); that is not "
                             "supported";
  if (auto structural = importStructuralNode(node, loc, nodeOpset); failed(structural))
    return failure();
  else if (*structural)
    return success();
  bool sequenceOp = isSequenceOperator(node.op_type());
  bool controlFlowOp = isControlFlowOperator(node.op_type());
  SmallVector<Value> inputs;
  SmallVector<const SmallVector<Value> *> seqInputs;
  for (const std::string &name : node.input()) {
    seqInputs.push_back(nullptr);
    if (name.empty()) {
      inputs.push_back({});
      continue;
    }
    if (const SmallVector<Value> *seq = findSequence(name)) {
      if (!sequenceOp && !controlFlowOp)
        return emitError(loc) << "input '" << name
                              << "' is a sequence; only sequence operators read sequences";
      seqInputs.back() = seq;
      inputs.push_back({});
      continue;
    }
    if (isNone(name)) {
      // An empty optional is a missing input to every operator but the
      // Optional* ones (handled above).
      inputs.push_back({});
      continue;
    }
    Value v = lookup(name);
    if (!v)
      return emitError(loc) << "input '" << name
                            << "' is not produced by any earlier node, initializer or graph "
                               "input";
    inputs.push_back(v);
  }
  if (controlFlowOp) {
    NodeImporter ni(b, loc, node, nodeOpset, inputs);
    ni.loopRecurrences = opts.loopRecurrences;
    if (node.op_type() == "Loop" && node.input_size() > 0 && !node.input(0).empty())
      if (BoundedInts trip = boundsOf(node.input(0)); trip.entries.size() == 1)
        ni.tripCountBound = trip.entries[0].max;
    SmallVector<Value> outputs;
    std::map<size_t, SmallVector<Value>> seqOutputs;
    auto sub = [&](const onnx::GraphProto &g, ArrayRef<Value> args, SmallVectorImpl<Value> &outs,
                   const SequenceSlots *seqArgs, SequenceSlots *seqOuts,
                   SmallVectorImpl<CountedAxis> *counts) {
      return importSubgraph(b, g, args, outs, seqArgs, seqOuts, counts);
    };
    auto outerSequence = [&](StringRef name) { return isSequence(name); };
    if (failed(importControlFlowNode(ni, sub, outerSequence, seqInputs, outputs, seqOutputs)) ||
        ni.failed()) {
      (void)ni.error("cannot import this " + node.op_type() + " node");
      return failure();
    }
    if (outputs.size() < (size_t)node.output_size())
      return emitError(loc) << node.op_type() << " gives " << outputs.size()
                            << " results but the node names " << node.output_size();
    for (auto [i, name] : llvm::enumerate(node.output())) {
      if (name.empty())
        continue;
      if (auto seq = seqOutputs.find(i); seq != seqOutputs.end()) {
        bind(name, {}, &seq->second, isEmptyOptionalSlot(seq->second));
      } else {
        bind(name, outputs[i], nullptr, false);
        if (i < ni.rowCounts.size() && ni.rowCounts[i])
          rowCounts[name] = ni.rowCounts[i];
      }
    }
    return success();
  }
  if (sequenceOp) {
    NodeImporter ni(b, loc, node, nodeOpset, inputs);
    ni.loopRecurrences = opts.loopRecurrences;
    SmallVector<Value> seqOut;
    Value tensorOut;
    if (failed(importSequenceNode(ni, seqInputs, seqOut, tensorOut)) || ni.failed()) {
      (void)ni.error("cannot import this " + node.op_type() + " node");
      return failure();
    }
    if (node.output_size() > 0 && !node.output(0).empty()) {
      if (tensorOut)
        values[node.output(0)] = tensorOut;
      else
        sequences[node.output(0)] = std::move(seqOut);
    }
    return success();
  }
  const auto &table = ruleTable();
  auto rules = table.find(node.op_type());
  ImportRule contribRule{nullptr, 1, 1, nullptr};
  if (node.domain() == "com.microsoft")
    contribRule = {node.op_type().c_str(), 1, 1, microsoftRule(node.op_type())};
  if (rules == table.end() && !contribRule.fn)
    return emitError(loc) << "unsupported operator '" << node.op_type() << "' (opset "
                          << nodeOpset << ")";
  const ImportRule *rule = contribRule.fn ? &contribRule : nullptr;
  if (!rule)
    for (const ImportRule &r : rules->second)
      if (nodeOpset >= r.minOpset && nodeOpset <= r.maxOpset)
        rule = &r;
  if (!rule) {
    auto diag = emitError(loc) << "operator '" << node.op_type() << "' at opset "
                               << nodeOpset << " is not supported; rules exist for opsets";
    for (const ImportRule &r : rules->second)
      diag << " " << r.minOpset << "-" << r.maxOpset;
    return failure();
  }
  NodeImporter ni(b, loc, node, nodeOpset, inputs);
  // The rule, on the node's inputs or on replaced ones (CountedOps.cpp
  // masks padding out); the row counts it sets are the node's.
  bool ruleReported = false;
  auto runRule = [&](ArrayRef<Value> ruleInputs, SmallVectorImpl<Value> &ruleOutputs) {
    NodeImporter r(b, loc, node, nodeOpset, ruleInputs);
    r.loopRecurrences = opts.loopRecurrences;
    if (failed(rule->fn(r, ruleOutputs)) || r.failed()) {
      ruleReported = true;
      return (void)r.error("cannot import this " + node.op_type() + " node"), failure();
    }
    ni.rowCounts = r.rowCounts;
    return success();
  };
  SmallVector<BoundedInts> inputBounds;
  bool readsBounded = false;
  for (const std::string &name : node.input()) {
    inputBounds.push_back(name.empty() ? BoundedInts() : boundsOf(name));
    readsBounded |= (bool)inputBounds.back();
  }
  if (readsBounded) // constant inputs take part in shape arithmetic too
    for (auto [i, bounds] : llvm::enumerate(inputBounds))
      if (!bounds && i < inputs.size())
        if (auto known = getConstantInts(inputs[i]))
          for (int64_t v : *known)
            bounds.entries.push_back(BoundedInts::Entry{v, true, Value()});
  SmallVector<Value> outputs;
  SmallVector<CountedAxis> outputCounts;
  SmallVector<BoundedInts> outputBounds;
  FailureOr<bool> special = false;
  if (readsCounted || readsBounded)
    special = importCountedNode(ni, inputCounts, inputBounds, runRule, countedState, outputs,
                                outputCounts, outputBounds);
  if (failed(special) || ni.failed()) {
    if (!ruleReported)
      (void)ni.error("cannot import this " + node.op_type() + " node");
    return failure();
  }
  if (*special) {
    if (outputCounts.empty())
      outputCounts.assign(ni.rowCounts.begin(), ni.rowCounts.end());
  } else {
    if (failed(runRule(inputs, outputs)))
      return failure();
    outputCounts.assign(ni.rowCounts.begin(), ni.rowCounts.end());
    if (readsCounted && failed(propagateRowCounts(ni, inputCounts, outputs, outputCounts)))
      return failure();
    if (readsBounded)
      propagateBounds(ni, inputBounds, outputs, outputBounds);
  }
  // Shape arithmetic that picks only static dims of a counted value (the
  // second dim of a [count, 1] tensor) is a constant: later rules that need
  // one (an If's condition, a Reshape's shape) see it.
  for (auto [i, bounds] : llvm::enumerate(outputBounds)) {
    auto t = i < outputs.size() && outputs[i] ? NodeImporter::rankedType(outputs[i])
                                              : RankedTensorType();
    if (!bounds || !t || !llvm::all_of(bounds.entries, [](auto &e) { return e.known; }))
      continue;
    unsigned width = t.getElementType().getIntOrFloatBitWidth();
    SmallVector<APInt> known;
    for (const BoundedInts::Entry &e : bounds.entries)
      known.push_back(APInt(width, e.max, /*isSigned=*/true));
    outputs[i] = ni.constant(DenseIntElementsAttr::get(t, known));
    bounds = BoundedInts();
  }
  for (size_t i = 0; i < (size_t)node.output_size(); ++i) {
    const std::string &name = node.output(i);
    if (name.empty())
      continue;
    // Outputs a rule does not produce (e.g. Dropout's mask) stay undefined;
    // a later use reports them.
    values[name] = i < outputs.size() ? outputs[i] : Value();
    if (i < outputCounts.size() && outputCounts[i])
      rowCounts[name] = outputCounts[i];
    else
      rowCounts.erase(name);
    if (i < outputBounds.size() && outputBounds[i])
      intBounds[name] = outputBounds[i];
    else
      intBounds.erase(name);
  }
  return success();
}

OwningOpRef<ModuleOp> GraphImporter::run() {
  ctx.loadDialect<KilnDialect, func::FuncDialect, scf::SCFDialect, tensor::TensorDialect,
                  arith::ArithDialect>();
  const onnx::GraphProto &graph = model.proto->graph();
  graphProto = &graph;
  opset = defaultDomainOpset(*model.proto);
  Location moduleLoc = FileLineColLoc::get(&ctx, model.sourceName, 0, 0);
  if (opset > kMaxSupportedOpset) {
    emitError(moduleLoc) << "the model uses ONNX opset " << opset
                         << "; Kiln supports opsets up to " << kMaxSupportedOpset;
    return {};
  }
  OwningOpRef<ModuleOp> module = ModuleOp::create(moduleLoc);
  b.setInsertionPointToEnd(module->getBody());

  // Graph inputs as function arguments: a tensor is one, a sequence of n
  // tensors n (their element type from the declared sequence type), an
  // empty optional none.
  SmallVector<Type> argTypes;
  SmallVector<std::string> argNames;
  SmallVector<SmallVector<std::string>> argDimNames;
  std::vector<const onnx::ValueInfoProto *> realInputs = modelInputs(*model.proto);
  if (!opts.inputLayout.empty() && opts.inputLayout.size() != realInputs.size()) {
    emitError(moduleLoc) << "the model has " << realInputs.size() << " inputs, but a layout for "
                         << opts.inputLayout.size() << " was given";
    return {};
  }
  SmallVector<std::pair<size_t, size_t>> argRanges; // per graph input: first arg, count
  for (auto [i, in] : llvm::enumerate(realInputs)) {
    int64_t layout = opts.inputLayout.empty() ? kLayoutTensor : opts.inputLayout[i];
    const onnx::TypeProto *type = &in->type();
    Location loc = NameLoc::get(StringAttr::get(&ctx, "graph input '" + in->name() + "'"));
    if (type->has_optional_type()) {
      if (layout == kLayoutNone) {
        argRanges.push_back({argTypes.size(), 0});
        continue;
      }
      type = &type->optional_type().elem_type();
    } else if (layout == kLayoutNone) {
      emitError(loc) << "is not optional, but no value was given";
      return {};
    }
    if (type->has_sequence_type() != (layout >= 0)) {
      emitError(loc) << (layout >= 0 ? "is not a sequence, but a sequence was given"
                                     : "is a sequence, but a tensor was given");
      return {};
    }
    size_t count = layout >= 0 ? layout : 1;
    const onnx::TypeProto &element =
        layout >= 0 ? type->sequence_type().elem_type() : *type;
    argRanges.push_back({argTypes.size(), count});
    for (size_t k = 0; k < count; ++k) {
      auto t = inputType(*in, element, argTypes.size());
      if (failed(t))
        return {};
      argTypes.push_back(*t);
      argNames.push_back(layout >= 0 ? in->name() + "[" + std::to_string(k) + "]" : in->name());
      // The names of unknown dims (ONNX dim_param), for kiln-symbolic-dims:
      // two inputs that share "batch" share the symbol.
      SmallVector<std::string> dimNames;
      auto rt = dyn_cast<RankedTensorType>(*t);
      if (rt && !rt.hasStaticShape() && element.has_tensor_type() &&
          element.tensor_type().has_shape() &&
          element.tensor_type().shape().dim_size() == rt.getRank())
        for (const auto &dim : element.tensor_type().shape().dim())
          dimNames.push_back(dim.has_dim_param() ? dim.dim_param() : "");
      argDimNames.push_back(std::move(dimNames));
    }
  }
  if (!opts.inputShapes.empty() && opts.inputShapes.size() != argTypes.size()) {
    emitError(moduleLoc) << "the model has " << argTypes.size() << " input tensors, but "
                         << opts.inputShapes.size() << " shapes were given";
    return {};
  }

  auto func = func::FuncOp::create(b, moduleLoc, opts.functionName,
                                   b.getFunctionType(argTypes, {}));
  Block *entry = func.addEntryBlock();
  b.setInsertionPointToStart(entry);
  SmallVector<Value> args;
  for (auto [i, name] : llvm::enumerate(argNames)) {
    func.setArgAttr(i, "kiln.name", b.getStringAttr(name));
    if (auto type = dyn_cast<RankedTensorType>(argTypes[i]);
        type && !type.hasStaticShape() && llvm::any_of(argDimNames[i], [](const std::string &n) {
          return !n.empty();
        }))
      func.setArgAttr(i, "kiln.dim_names",
                      b.getStrArrayAttr(llvm::to_vector_of<StringRef>(argDimNames[i])));
    args.push_back(entry->getArgument(i));
    auto fixed = opts.inputValues.find(i);
    if (fixed == opts.inputValues.end())
      continue;
    auto type = dyn_cast<RankedTensorType>(argTypes[i]);
    Type elt = type ? type.getElementType() : Type();
    const std::string &bytes = fixed->second;
    bool isBool = elt && elt.isInteger(1);
    if (!type || !type.hasStaticShape() || !elt.isIntOrFloat() ||
        (int64_t)bytes.size() !=
            type.getNumElements() * (isBool ? 1 : elt.getIntOrFloatBitWidth() / 8)) {
      emitError(moduleLoc) << "cannot specialise on the value of input '" << name << "'";
      return {};
    }
    Location loc = NameLoc::get(StringAttr::get(&ctx, "graph input '" + name + "'"));
    DenseElementsAttr value;
    if (isBool) // i1 attributes are bit-packed; the input has a byte each
      value = DenseElementsAttr::get(
          type, llvm::map_to_vector(bytes, [](char c) { return c != 0; }));
    else
      value = DenseElementsAttr::getFromRawBuffer(type, ArrayRef<char>(bytes.data(), bytes.size()));
    args[i] = ConstantOp::create(b, loc, type, value);
  }
  for (auto [i, in] : llvm::enumerate(realInputs)) {
    int64_t layout = opts.inputLayout.empty() ? kLayoutTensor : opts.inputLayout[i];
    auto [first, count] = argRanges[i];
    SmallVector<Value> elements(args.begin() + first, args.begin() + first + count);
    if (layout == kLayoutTensor)
      bind(in->name(), elements[0], nullptr, false);
    else
      bind(in->name(), {}, &elements, layout == kLayoutNone);
  }

  for (const auto &init : graph.initializer()) {
    std::string err;
    auto attr = tensorToAttr(&ctx, init, err);
    Location loc = NameLoc::get(StringAttr::get(&ctx, "initializer '" + init.name() + "'"));
    if (failed(attr)) {
      emitError(loc) << err;
      return {};
    }
    values[init.name()] = ConstantOp::create(b, loc, attr->getType(), *attr);
  }

  QdqFusionPlan qdq = planQdqFusion(graph);
  for (auto [i, node] : llvm::enumerate(graph.node())) {
    auto replaced = qdq.replaced.find(i);
    if (replaced == qdq.replaced.end()) {
      if (failed(importNode(node, i)))
        return {};
      continue;
    }
    for (const onnx::NodeProto &fused : replaced->second)
      if (failed(importNode(fused, i)))
        return {};
  }

  SmallVector<Value> results;
  SmallVector<std::string> resultNames;
  SmallVector<int64_t> outputLayout;
  SmallVector<CountedAxis> countOf; // per visible result: its run-time count, if any
  for (const auto &out : graph.output()) {
    if (const SmallVector<Value> *seq = findSequence(out.name())) {
      outputLayout.push_back(seq->size());
      for (auto [k, v] : llvm::enumerate(*seq)) {
        results.push_back(v);
        resultNames.push_back(out.name() + "[" + std::to_string(k) + "]");
        countOf.push_back(CountedAxis());
      }
      continue;
    }
    if (isNone(out.name())) {
      outputLayout.push_back(kLayoutNone);
      continue;
    }
    auto it = values.find(out.name());
    if (it == values.end() || !it->second) {
      emitError(moduleLoc) << "graph output '" << out.name() << "' is never produced";
      return {};
    }
    outputLayout.push_back(kLayoutTensor);
    results.push_back(it->second);
    resultNames.push_back(out.name());
    countOf.push_back(rowCountOf(out.name()));
  }
  // Run-time row counts become hidden results after the visible ones.
  SmallVector<int64_t> countResults(results.size(), -1), countAxes(results.size(), 0);
  for (auto [i, counted] : llvm::enumerate(countOf)) {
    if (!counted)
      continue;
    Value count = counted.count;
    countAxes[i] = counted.axis;
    auto *at = llvm::find(results, count);
    if (at == results.end() || at - results.begin() < (ptrdiff_t)countResults.size()) {
      countResults[i] = results.size();
      results.push_back(count);
      resultNames.push_back(resultNames[i] + ".rows");
    } else {
      countResults[i] = at - results.begin();
    }
  }
  func::ReturnOp::create(b, moduleLoc, results);
  func.setType(b.getFunctionType(argTypes, ValueRange(results).getTypes()));
  for (auto [i, name] : llvm::enumerate(resultNames))
    func.setResultAttr(i, "kiln.name", b.getStringAttr(name));
  if (llvm::any_of(outputLayout, [](int64_t l) { return l != kLayoutTensor; }))
    (*module)->setAttr("kiln.output_layout", b.getDenseI64ArrayAttr(outputLayout));
  if (llvm::any_of(countResults, [](int64_t c) { return c >= 0; }))
  {
    (*module)->setAttr("kiln.output_row_counts", b.getDenseI64ArrayAttr(countResults));
    (*module)->setAttr("kiln.output_count_axes", b.getDenseI64ArrayAttr(countAxes));
  }
  return module;
}

OwningOpRef<ModuleOp> importModel(MLIRContext &context, const LoadedModel &model,
                                  const ImportOptions &options) {
  return GraphImporter(context, model, options).run();
}

} // namespace kiln
