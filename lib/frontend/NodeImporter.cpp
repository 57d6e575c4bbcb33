// NodeImporter's helpers shared by every import rule: inputs and
// attributes, constants read back, folding ops whose operands are all
// constant, diagnostics that name the node.
#include "NodeImporter.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Matchers.h"

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
  if (op->getNumResults() != 1 || op->getNumOperands() == 0)
    return result;
  // Fold with whatever operands are constant: some folders need none (Shape
  // of a tensor of static shape, a Select whose condition is a splat), and
  // Resize sizes or a Loop's trip count computed from shapes must be
  // constants while the rule that reads them runs, not only after
  // kiln-infer-shapes.
  SmallVector<Attribute> operands;
  for (Value v : op->getOperands()) {
    Attribute a;
    operands.push_back(matchPattern(v, m_Constant(&a)) ? a : Attribute());
  }
  SmallVector<OpFoldResult> folded;
  if (mlir::failed(op->fold(operands, folded)) || folded.size() != 1)
    return result;
  if (auto same = dyn_cast_if_present<Value>(folded[0])) {
    // An in-place fold (the op updated itself) keeps the op.
    if (same == result || same.getType() != result.getType())
      return result;
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

Value NodeImporter::i64Scalar(int64_t value) {
  return constant(DenseIntElementsAttr::get(RankedTensorType::get({}, b.getI64Type()), value));
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
  if (auto it = dyn_cast<IntegerType>(elt)) {
    int64_t i = saturatingInt64(value);
    return constant(DenseElementsAttr::get(type, APInt(it.getWidth(), i, /*isSigned=*/true)));
  }
  (void)error("unsupported element type for a scalar constant");
  return {};
}

LogicalResult NodeImporter::error(const Twine &message) {
  if (!failed_)
    emitError(loc) << message;
  failed_ = true;
  return failure();
}

/// Axes from an attribute (older opsets) or a constant input (newer ones).
std::optional<SmallVector<int64_t>> axesFrom(NodeImporter &n, int64_t inputSince,
                                             size_t inputIndex) {
  if (n.opset >= inputSince) {
    if (!n.hasInput(inputIndex))
      return SmallVector<int64_t>();
    auto v = n.constInts(inputIndex);
    if (!v)
      (void)n.error("axes must be a constant");
    return v;
  }
  auto a = n.getInts("axes");
  return a ? a : SmallVector<int64_t>();
}

} // namespace kiln
