// What an import rule sees of one ONNX node, and how rules are registered.
// The importer is mechanical; ONNX semantics live in rules keyed by op type
// and opset range, so supporting a new opset is adding a rule.
#ifndef KILN_FRONTEND_NODEIMPORTER_H
#define KILN_FRONTEND_NODEIMPORTER_H

#include "kiln/IR/KilnDialect.h"

#include "mlir/IR/Builders.h"
#include "onnx/onnx_pb.h"

#include "llvm/ADT/StringMap.h"

namespace kiln {

/// A tensor's number of valid entries along `axis`, known only at run time:
/// `count` is a scalar i64 tensor, and the entries past it are padding (see
/// RowCounts.h). Null `count`: the tensor has no such axis.
struct CountedAxis {
  mlir::Value count;
  int64_t axis = 0;
  explicit operator bool() const { return (bool)count; }
};

class NodeImporter {
public:
  NodeImporter(mlir::OpBuilder &b, mlir::Location loc, const onnx::NodeProto &node,
               int64_t opset, llvm::ArrayRef<mlir::Value> inputs)
      : b(b), loc(loc), node(node), opset(opset), inputs(inputs) {}

  mlir::OpBuilder &b;
  mlir::Location loc;
  const onnx::NodeProto &node;
  const int64_t opset;
  /// ImportOptions::loopRecurrences.
  bool loopRecurrences = true;
  /// A Loop's trip count M, when it is computed at run time from a number
  /// of rows known only then (a detector's detections, RowCounts.h): the
  /// most it can be.
  std::optional<int64_t> tripCountBound;

  /// Set by a rule whose output i has a number of valid entries along one
  /// axis known only at run time (RowCounts.h).
  llvm::SmallVector<CountedAxis> rowCounts;
  void setRowCount(size_t output, mlir::Value count, int64_t axis = 0) {
    if (rowCounts.size() <= output)
      rowCounts.resize(output + 1);
    rowCounts[output] = {count, axis};
  }

  // ---- inputs (a missing optional input is a null Value) ----
  size_t numInputs() const { return inputs.size(); }
  mlir::Value input(size_t i) const { return i < inputs.size() ? inputs[i] : mlir::Value(); }
  bool hasInput(size_t i) const { return (bool)input(i); }
  /// Input i as a constant integer list, if it is constant.
  std::optional<llvm::SmallVector<int64_t>> constInts(size_t i) const {
    return hasInput(i) ? getConstantInts(input(i)) : std::nullopt;
  }
  /// Input i as constant floating-point values, if it is a float constant.
  std::optional<llvm::SmallVector<double>> constFloats(size_t i) const;
  /// Input i, which must be present.
  mlir::Value required(size_t i);

  // ---- attributes ----
  const onnx::AttributeProto *attr(llvm::StringRef name) const;
  int64_t getInt(llvm::StringRef name, int64_t dflt) const;
  float getFloat(llvm::StringRef name, float dflt) const;
  std::string getString(llvm::StringRef name, const std::string &dflt) const;
  std::optional<llvm::SmallVector<int64_t>> getInts(llvm::StringRef name) const;
  std::optional<llvm::SmallVector<float>> getFloats(llvm::StringRef name) const;

  // ---- type helpers ----
  /// The ranked type of v; null for a missing value (after a failure) or an
  /// unranked one.
  static mlir::RankedTensorType rankedType(mlir::Value v) {
    return v ? mlir::dyn_cast<mlir::RankedTensorType>(v.getType()) : mlir::RankedTensorType();
  }
  static mlir::Type elementType(mlir::Value v) {
    return mlir::cast<mlir::ShapedType>(v.getType()).getElementType();
  }
  /// `v` as an int64, saturating: a model's float (an attribute, a
  /// constant) can be anything, and converting a double outside int64's
  /// range is undefined behaviour. NaN becomes 0.
  static int64_t saturatingInt64(double v) {
    return v != v ? 0 : v <= -0x1p63 ? INT64_MIN : v >= 0x1p63 ? INT64_MAX : (int64_t)v;
  }
  /// Rank of v, emitting an error when it is unknown.
  std::optional<int64_t> rankOf(mlir::Value v);
  /// `axis` (negative counts from the end) as a position in [0, rank),
  /// emitting an error naming `what` when it is out of range.
  std::optional<int64_t> normalizeAxis(int64_t axis, int64_t rank, llvm::StringRef what = "axis");

  // ---- building ----
  /// Creates a kiln op and infers its result type. After the first failure
  /// every later call returns a null Value, so a rule can build a chain and
  /// check `failed()` once at the end.
  template <typename OpTy, typename... Args>
  mlir::Value make(Args &&...args) {
    if (failed_)
      return {};
    mlir::Type placeholder = mlir::UnrankedTensorType::get(b.getF32Type());
    auto op = OpTy::create(b, loc, mlir::TypeRange{placeholder}, std::forward<Args>(args)...);
    if (mlir::failed(refineResultTypes(op))) {
      op->erase();
      failed_ = true;
      return {};
    }
    return foldConstantOperands(op);
  }
  mlir::Value constant(mlir::ElementsAttr value);
  mlir::Value i64Tensor(llvm::ArrayRef<int64_t> values);
  /// A rank-0 i64 constant (a count, an index, an iteration number).
  mlir::Value i64Scalar(int64_t value);
  /// i64 constant 0, 1, ..., size-1 laid along `axis` of a rank-`rank`
  /// shape that is 1 elsewhere: compared with an index tensor it selects
  /// the position the index names (one-hot, arg-max masks).
  mlir::Value positionsAlong(int64_t rank, int64_t axis, int64_t size);
  /// `v` laid along a rank-`rank` tensor from `axis` on: unit dims appended
  /// after it, so that it broadcasts (per-channel parameters: a vector at
  /// axis 1).
  mlir::Value alongAxis(mlir::Value v, int64_t rank, int64_t axis);
  /// A rank-0 constant of the element type of `like`.
  mlir::Value scalarLike(mlir::Value like, double value);
  /// A constant of `shape` and float type `type` holding `values` (rounded
  /// to nearest), for tables computed while importing.
  mlir::Value floatTable(llvm::ArrayRef<int64_t> shape, mlir::FloatType type,
                         llvm::ArrayRef<double> values);
  /// `x` (of rank `rank`) with axis `from` moved to position `to`.
  mlir::Value moveAxis(mlir::Value x, int64_t rank, int64_t from, int64_t to);

  /// Emits an error at the node and marks the import as failed.
  mlir::LogicalResult error(const llvm::Twine &message);
  bool failed() const { return failed_; }

private:
  /// `op`'s result, or what it folds to given the operands that are
  /// constants (a constant, or one of its operands): shape arithmetic on
  /// static shapes and constants (and on inputs the executable is
  /// specialised on) stays visible to later rules that need a constant, such
  /// as a Loop's trip count or Resize's sizes.
  mlir::Value foldConstantOperands(mlir::Operation *op);

  llvm::ArrayRef<mlir::Value> inputs;
  bool failed_ = false;
};

using ImportFn = mlir::LogicalResult (*)(NodeImporter &, llvm::SmallVectorImpl<mlir::Value> &);

struct ImportRule {
  const char *opType;
  int64_t minOpset, maxOpset; // model opset range the rule is valid for
  ImportFn fn;
};

/// Newest default-domain opset any rule is written for.
constexpr int64_t kMaxSupportedOpset = 17;

// Each rules file contributes its table.
void addElementwiseRules(std::vector<ImportRule> &rules);
void addTensorRules(std::vector<ImportRule> &rules);
void addNNRules(std::vector<ImportRule> &rules);
void addReductionRules(std::vector<ImportRule> &rules);
void addLossRules(std::vector<ImportRule> &rules);
void addResizeRules(std::vector<ImportRule> &rules);
void addRecurrentRules(std::vector<ImportRule> &rules);
void addEinsumRules(std::vector<ImportRule> &rules);
void addLegacyRules(std::vector<ImportRule> &rules);
void addQuantizationRules(std::vector<ImportRule> &rules);
void addSignalRules(std::vector<ImportRule> &rules);
void addSelectionRules(std::vector<ImportRule> &rules);
void addSamplingRules(std::vector<ImportRule> &rules);
void addTfIdfRules(std::vector<ImportRule> &rules);
/// The rule of a com.microsoft quantized operator (QLinearAdd, ...: ONNX
/// Runtime's QOperator format), null for any other.
ImportFn microsoftRule(llvm::StringRef opType);
/// The default domain's rule for `opType` at `opset`, null if none: rules
/// that run another op's rule on converted inputs.
ImportFn lookupImportRule(llvm::StringRef opType, int64_t opset);
/// Rules of the ai.onnx.preview.training domain, by that domain's opset.
void addTrainingRules(std::vector<ImportRule> &rules);
bool isTrainingDomainOperator(llvm::StringRef opType);

/// softmax(x) or, with `log`, log_softmax(x) over `axes`, shifted by the
/// maximum for stability (lib/frontend/RulesNN.cpp).
mlir::Value buildSoftmax(NodeImporter &n, mlir::Value x, llvm::ArrayRef<int64_t> axes, bool log);

/// A Conv of x and w (plus bias, if given) with the node's Conv attributes
/// (kernel_shape, strides, dilations, pads/auto_pad, group); null after an
/// error (lib/frontend/RulesNN.cpp).
mlir::Value buildConv(NodeImporter &n, mlir::Value x, mlir::Value w, mlir::Value bias);

/// Axes from an attribute (opsets before `inputSince`) or a constant input
/// `inputIndex` (from it on); empty when not given. Reports a non-constant
/// input as an error at the node.
std::optional<llvm::SmallVector<int64_t>> axesFrom(NodeImporter &n, int64_t inputSince,
                                                   size_t inputIndex);

/// The value of a one-element boolean constant.
std::optional<bool> getConstantBool(mlir::Value v);

/// Converts an ONNX TensorProto into an attribute, or fails with a message.
mlir::FailureOr<mlir::ElementsAttr> tensorToAttr(mlir::MLIRContext *ctx,
                                                 const onnx::TensorProto &tensor,
                                                 std::string &error);
/// MLIR element type for an ONNX data type, or null if unsupported.
mlir::Type onnxElementType(mlir::MLIRContext *ctx, int32_t dataType);

} // namespace kiln

#endif
