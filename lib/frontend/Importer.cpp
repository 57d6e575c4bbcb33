// The mechanical part of the importer: graph inputs, initializers, node
// order, value names, locations. Per-op semantics are in Rules*.cpp.
#include "kiln/Frontend/Importer.h"
#include "NodeImporter.h"
#include "ControlFlow.h"
#include "Gradient.h"
#include "Sequences.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Matchers.h"

#include "llvm/ADT/StringMap.h"

using namespace mlir;

namespace kiln {

//===----------------------------------------------------------------------===//
// NodeImporter
//===----------------------------------------------------------------------===//

Value NodeImporter::required(size_t i) {
  Value v = input(i);
  if (!v && !failed_)
    (void)error("input " + Twine(i) + " is required but missing");
  return v;
}

std::optional<SmallVector<double>> NodeImporter::constFloats(size_t i) const {
  DenseFPElementsAttr attr;
  if (!hasInput(i) || !matchPattern(input(i), m_Constant(&attr)))
    return std::nullopt;
  SmallVector<double> out;
  for (const APFloat &f : attr.getValues<APFloat>())
    out.push_back(f.convertToDouble());
  return out;
}

const onnx::AttributeProto *NodeImporter::attr(llvm::StringRef name) const {
  for (const auto &a : node.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

int64_t NodeImporter::getInt(llvm::StringRef name, int64_t dflt) const {
  const auto *a = attr(name);
  return a ? a->i() : dflt;
}

float NodeImporter::getFloat(llvm::StringRef name, float dflt) const {
  const auto *a = attr(name);
  return a ? a->f() : dflt;
}

std::string NodeImporter::getString(llvm::StringRef name, const std::string &dflt) const {
  const auto *a = attr(name);
  return a ? a->s() : dflt;
}

std::optional<SmallVector<int64_t>> NodeImporter::getInts(llvm::StringRef name) const {
  const auto *a = attr(name);
  if (!a)
    return std::nullopt;
  return SmallVector<int64_t>(a->ints().begin(), a->ints().end());
}

std::optional<SmallVector<float>> NodeImporter::getFloats(llvm::StringRef name) const {
  const auto *a = attr(name);
  if (!a)
    return std::nullopt;
  return SmallVector<float>(a->floats().begin(), a->floats().end());
}

std::optional<int64_t> NodeImporter::rankOf(Value v) {
  if (!v)
    return std::nullopt;
  if (auto t = rankedType(v))
    return t.getRank();
  (void)error("needs an input of known rank");
  return std::nullopt;
}

std::optional<bool> getConstantBool(Value v) {
  DenseElementsAttr attr;
  if (!v || !matchPattern(v, m_Constant(&attr)) || attr.getNumElements() != 1 ||
      !attr.getElementType().isInteger(1))
    return std::nullopt;
  return *attr.getValues<bool>().begin();
}

Value NodeImporter::foldConstantOperands(Operation *op) {
  Value result = op->getResult(0);
  if (op->getNumResults() != 1 || op->getNumOperands() == 0 ||
      !llvm::all_of(op->getOperands(), [](Value v) {
        return matchPattern(v, m_Constant());
      }))
    return result;
  SmallVector<OpFoldResult> folded;
  if (mlir::failed(op->fold(folded)) || folded.size() != 1)
    return result;
  if (auto same = dyn_cast_if_present<Value>(folded[0]); same && same.getType() == result.getType()) {
    op->erase();
    return same;
  }
  auto attr = dyn_cast_if_present<ElementsAttr>(dyn_cast_if_present<Attribute>(folded[0]));
  if (!attr || attr.getType() != result.getType())
    return result;
  op->erase();
  return constant(attr);
}

std::optional<int64_t> NodeImporter::normalizeAxis(int64_t axis, int64_t rank,
                                                   llvm::StringRef what) {
  if (axis < -rank || axis >= rank) {
    (void)error(what + " " + Twine(axis) + " is out of range for rank " + Twine(rank));
    return std::nullopt;
  }
  return axis < 0 ? axis + rank : axis;
}

Value NodeImporter::constant(ElementsAttr value) {
  return make<ConstantOp>(value);
}

Value NodeImporter::i64Tensor(ArrayRef<int64_t> values) {
  auto type = RankedTensorType::get({(int64_t)values.size()}, b.getI64Type());
  return constant(DenseIntElementsAttr::get(type, values));
}

Value NodeImporter::alongAxis(Value v, int64_t rank, int64_t axis) {
  auto vRank = rankOf(v);
  if (!vRank)
    return {};
  if (axis + *vRank >= rank)
    return v;
  return make<UnsqueezeOp>(
      v, b.getDenseI64ArrayAttr(llvm::to_vector(llvm::seq<int64_t>(*vRank, rank - axis))));
}

Value NodeImporter::positionsAlong(int64_t rank, int64_t axis, int64_t size) {
  SmallVector<int64_t> shape(rank, 1);
  shape[axis] = size;
  auto iota = llvm::to_vector(llvm::seq<int64_t>(0, size));
  return constant(DenseIntElementsAttr::get(RankedTensorType::get(shape, b.getI64Type()),
                                            ArrayRef<int64_t>(iota)));
}

Value NodeImporter::floatTable(ArrayRef<int64_t> shape, FloatType type,
                               ArrayRef<double> values) {
  SmallVector<APFloat> vals;
  for (double v : values) {
    APFloat f(v);
    bool lost;
    f.convert(type.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
    vals.push_back(f);
  }
  return constant(DenseElementsAttr::get(RankedTensorType::get(shape, type), vals));
}

Value NodeImporter::moveAxis(Value x, int64_t rank, int64_t from, int64_t to) {
  if (from == to)
    return x;
  SmallVector<int64_t> perm;
  for (int64_t d = 0; d < rank; ++d)
    if (d != from)
      perm.push_back(d);
  perm.insert(perm.begin() + to, from);
  return make<TransposeOp>(x, b.getDenseI64ArrayAttr(perm));
}

Value NodeImporter::scalarLike(Value like, double value) {
  if (!like)
    return {};
  Type elt = elementType(like);
  auto type = RankedTensorType::get({}, elt);
  if (auto ft = dyn_cast<FloatType>(elt))
    return constant(DenseElementsAttr::get(type, FloatAttr::get(ft, value).getValue()));
  if (auto it = dyn_cast<IntegerType>(elt))
    return constant(DenseElementsAttr::get(
        type, APInt(it.getWidth(), (int64_t)value, /*isSigned=*/true)));
  (void)error("unsupported element type for a scalar constant");
  return {};
}

LogicalResult NodeImporter::error(const Twine &message) {
  if (!failed_)
    emitError(loc) << message;
  failed_ = true;
  return failure();
}

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
  bool isSequence(llvm::StringRef name) const;
  LogicalResult importSubgraph(OpBuilder &at, const onnx::GraphProto &graph,
                               ArrayRef<Value> args, SmallVectorImpl<Value> &outputs);
  FailureOr<Type> inputType(const onnx::ValueInfoProto &info, size_t index);
  Location nodeLoc(const onnx::NodeProto &node, size_t index);
  LogicalResult importNode(const onnx::NodeProto &node, size_t index);

  MLIRContext &ctx;
  const LoadedModel &model;
  const ImportOptions &opts;
  OpBuilder b;
  llvm::StringMap<Value> values;
  /// Sequence values by name: lists of tensors (Sequences.cpp).
  llvm::StringMap<SmallVector<Value>> sequences;
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

bool GraphImporter::isSequence(llvm::StringRef name) const {
  for (const GraphImporter *g = this; g; g = g->parent) {
    if (g->values.count(name))
      return false;
    if (g->sequences.count(name))
      return true;
  }
  return false;
}

LogicalResult GraphImporter::importSubgraph(OpBuilder &at, const onnx::GraphProto &graph,
                                            ArrayRef<Value> args,
                                            SmallVectorImpl<Value> &outputs) {
  GraphImporter sub(*this);
  sub.graphProto = &graph;
  sub.b.setInsertionPoint(at.getInsertionBlock(), at.getInsertionPoint());
  Location loc = NameLoc::get(StringAttr::get(&ctx, "subgraph '" + graph.name() + "'"));
  if ((size_t)graph.input_size() != args.size())
    return emitError(loc) << "the subgraph has " << graph.input_size() << " inputs; "
                          << args.size() << " are passed to it";
  for (auto [in, arg] : llvm::zip(graph.input(), args))
    sub.values[in.name()] = arg;
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
  for (const auto &out : graph.output()) {
    Value v = sub.lookup(out.name());
    if (!v)
      return emitError(loc) << "subgraph output '" << out.name() << "' is "
                            << (sub.isSequence(out.name()) ? "a sequence; sequences do not "
                                                             "leave a subgraph"
                                                           : "never produced");
    outputs.push_back(v);
  }
  // The caller's builder continues after what the subgraph built.
  at.setInsertionPoint(sub.b.getInsertionBlock(), sub.b.getInsertionPoint());
  return success();
}

FailureOr<Type> GraphImporter::inputType(const onnx::ValueInfoProto &info, size_t index) {
  Location loc = NameLoc::get(StringAttr::get(&ctx, "graph input '" + info.name() + "'"));
  if (!info.type().has_tensor_type())
    return emitError(loc) << "only tensor inputs are supported", failure();
  const auto &tt = info.type().tensor_type();
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
  } else if (!node.domain().empty() && node.domain() != "ai.onnx") {
    return emitError(loc) << "operator '" << node.op_type() << "' of domain '"
                          << node.domain() << "' is not supported";
  } else if (isTrainingDomainOperator(node.op_type())) {
    return emitError(loc) << "operator '" << node.op_type()
                          << "' belongs to the domain 'ai.onnx.preview.training'";
  }
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
    if (auto seq = sequences.find(name); seq != sequences.end() && !values.count(name)) {
      if (!sequenceOp && !controlFlowOp)
        return emitError(loc) << "input '" << name
                              << "' is a sequence; only sequence operators read sequences";
      seqInputs.back() = &seq->second;
      inputs.push_back({});
      continue;
    }
    Value v = lookup(name);
    if (!v)
      return emitError(loc) << "input '" << name
                            << (isSequence(name)
                                    ? "' is a sequence of an enclosing graph; sequences do "
                                      "not cross into subgraphs"
                                    : "' is not produced by any earlier node, initializer or "
                                      "graph input");
    inputs.push_back(v);
  }
  if (controlFlowOp) {
    NodeImporter ni(b, loc, node, nodeOpset, inputs);
    SmallVector<Value> outputs;
    std::map<size_t, SmallVector<Value>> seqOutputs;
    auto sub = [&](const onnx::GraphProto &g, ArrayRef<Value> args,
                   SmallVectorImpl<Value> &outs) { return importSubgraph(b, g, args, outs); };
    if (failed(importControlFlowNode(ni, sub, seqInputs, outputs, seqOutputs)) || ni.failed()) {
      (void)ni.error("cannot import this " + node.op_type() + " node");
      return failure();
    }
    if (outputs.size() < (size_t)node.output_size())
      return emitError(loc) << node.op_type() << " gives " << outputs.size()
                            << " results but the node names " << node.output_size();
    for (auto [i, name] : llvm::enumerate(node.output())) {
      if (name.empty())
        continue;
      if (auto seq = seqOutputs.find(i); seq != seqOutputs.end())
        sequences[name] = std::move(seq->second);
      else
        values[name] = outputs[i];
    }
    return success();
  }
  if (sequenceOp) {
    NodeImporter ni(b, loc, node, nodeOpset, inputs);
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
  if (rules == table.end())
    return emitError(loc) << "unsupported operator '" << node.op_type() << "' (opset "
                          << nodeOpset << ")";
  const ImportRule *rule = nullptr;
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
  SmallVector<Value> outputs;
  if (failed(rule->fn(ni, outputs)) || ni.failed()) {
    (void)ni.error("cannot import this " + node.op_type() + " node");
    return failure();
  }
  for (size_t i = 0; i < (size_t)node.output_size(); ++i) {
    const std::string &name = node.output(i);
    if (name.empty())
      continue;
    // Outputs a rule does not produce (e.g. Dropout's mask) stay undefined;
    // a later use reports them.
    values[name] = i < outputs.size() ? outputs[i] : Value();
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

  SmallVector<Type> argTypes;
  std::vector<const onnx::ValueInfoProto *> realInputs = modelInputs(*model.proto);
  for (auto [i, in] : llvm::enumerate(realInputs)) {
    auto t = inputType(*in, i);
    if (failed(t))
      return {};
    argTypes.push_back(*t);
  }
  if (!opts.inputShapes.empty() && opts.inputShapes.size() != realInputs.size()) {
    emitError(moduleLoc) << "the model has " << realInputs.size() << " inputs, but "
                         << opts.inputShapes.size() << " shapes were given";
    return {};
  }

  auto func = func::FuncOp::create(b, moduleLoc, opts.functionName,
                                   b.getFunctionType(argTypes, {}));
  Block *entry = func.addEntryBlock();
  b.setInsertionPointToStart(entry);
  for (auto [i, in] : llvm::enumerate(realInputs)) {
    values[in->name()] = entry->getArgument(i);
    func.setArgAttr(i, "kiln.name", b.getStringAttr(in->name()));
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
      emitError(moduleLoc) << "cannot specialise on the value of input '" << in->name() << "'";
      return {};
    }
    Location loc = NameLoc::get(StringAttr::get(&ctx, "graph input '" + in->name() + "'"));
    DenseElementsAttr value;
    if (isBool) // i1 attributes are bit-packed; the input has a byte each
      value = DenseElementsAttr::get(
          type, llvm::map_to_vector(bytes, [](char c) { return c != 0; }));
    else
      value = DenseElementsAttr::getFromRawBuffer(type, ArrayRef<char>(bytes.data(), bytes.size()));
    values[in->name()] = ConstantOp::create(b, loc, type, value);
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

  for (auto [i, node] : llvm::enumerate(graph.node()))
    if (failed(importNode(node, i)))
      return {};

  SmallVector<Value> results;
  SmallVector<Type> resultTypes;
  for (const auto &out : graph.output()) {
    if (sequences.count(out.name())) {
      emitError(moduleLoc) << "graph output '" << out.name()
                           << "' is a sequence; Kiln's executables return tensors only";
      return {};
    }
    auto it = values.find(out.name());
    if (it == values.end() || !it->second) {
      emitError(moduleLoc) << "graph output '" << out.name() << "' is never produced";
      return {};
    }
    results.push_back(it->second);
    resultTypes.push_back(it->second.getType());
  }
  func::ReturnOp::create(b, moduleLoc, results);
  func.setType(b.getFunctionType(argTypes, resultTypes));
  for (auto [i, out] : llvm::enumerate(graph.output()))
    func.setResultAttr(i, "kiln.name", b.getStringAttr(out.name()));
  return module;
}

OwningOpRef<ModuleOp> importModel(MLIRContext &context, const LoadedModel &model,
                                  const ImportOptions &options) {
  return GraphImporter(context, model, options).run();
}

} // namespace kiln
