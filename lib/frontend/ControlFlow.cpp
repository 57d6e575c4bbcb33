// ONNX If, Loop and Scan, imported as upstream structured control flow
// around kiln ops: If -> scf.if, Loop -> scf.while (a run-time trip count
// and early exit both work), Scan -> scf.for over the scanned axis. The
// kiln passes and one-shot bufferization see through these ops, so the
// subgraphs compile to native code like the rest of the model.
//
// A subgraph is imported into a detached block first, because the types of
// its results (and so of the enclosing op) are known only afterwards; the
// block is then moved into the op. Subgraphs read values of the enclosing
// graphs directly (scf regions are not isolated from above).
//
// Limits, each reported as an error at the node: an If result takes the
// more general type of its two branches (dims that differ become dynamic,
// each branch's value cast to it), and branches of different rank need a
// condition known while compiling; loop-carried values keep their
// type from one iteration to the next; a Loop with scan outputs needs its
// number of iterations when compiling (a constant trip count and initial
// condition, and a body that cannot end early), since its outputs have
// static shapes. Loops the run-time form cannot express (over sequences,
// or short ones whose carried values change shape) are unrolled while
// compiling (unrollLoop).
//
// This file has the If importer and the helpers all three share; the Loop
// and Scan importers are in ControlFlowLoop.cpp and ControlFlowScan.cpp.
#include "ControlFlowSupport.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;

namespace kiln {
namespace controlflow {

const onnx::GraphProto *graphAttr(NodeImporter &n, StringRef name) {
  const onnx::AttributeProto *a = n.attr(name);
  if (!a || !a->has_g()) {
    (void)n.error("the subgraph attribute '" + name + "' is missing");
    return nullptr;
  }
  return &a->g();
}

std::string typeName(Type t) {
  std::string s;
  llvm::raw_string_ostream(s) << t;
  return s;
}

Value toScalar(NodeImporter &n, Value t, StringRef what) {
  auto type = NodeImporter::rankedType(t);
  if (!type || !type.hasStaticShape() || type.getNumElements() != 1) {
    (void)n.error(what + " must be a tensor of one element");
    return {};
  }
  SmallVector<Value> zeros(type.getRank(), arith::ConstantIndexOp::create(n.b, n.loc, 0));
  return tensor::ExtractOp::create(n.b, n.loc, t, zeros);
}

Value toTensor(NodeImporter &n, Value scalar) {
  return tensor::FromElementsOp::create(
      n.b, n.loc, RankedTensorType::get({}, scalar.getType()), ValueRange{scalar});
}

void moveBody(Block *from, Block *to) {
  for (auto [a, b] : llvm::zip(from->getArguments(), to->getArguments()))
    a.replaceAllUsesWith(b);
  if (!to->empty() && to->back().hasTrait<OpTrait::IsTerminator>())
    to->back().erase();
  to->getOperations().splice(to->end(), from->getOperations());
}

void fillEmptyBuffers(OpBuilder &b, Location loc, SmallVectorImpl<Value> &inits,
                      ValueRange bodyArgs) {
  for (auto [init, arg] : llvm::zip(inits, bodyArgs))
    if (!init) {
      auto t = cast<RankedTensorType>(arg.getType());
      init = tensor::EmptyOp::create(b, loc, t.getShape(), t.getElementType());
    }
}

Value insertRow(OpBuilder &b, Location loc, Block *body, Value slice, int64_t rows,
                OpFoldResult row) {
  auto st = cast<RankedTensorType>(slice.getType());
  SmallVector<int64_t> shape{rows};
  llvm::append_range(shape, st.getShape());
  Value buf = body->addArgument(RankedTensorType::get(shape, st.getElementType()), loc);
  SmallVector<OpFoldResult> offsets(shape.size(), b.getIndexAttr(0));
  offsets[0] = row;
  SmallVector<OpFoldResult> sizes{b.getIndexAttr(1)};
  for (int64_t d : st.getShape())
    sizes.push_back(b.getIndexAttr(d));
  SmallVector<OpFoldResult> strides(shape.size(), b.getIndexAttr(1));
  return tensor::InsertSliceOp::create(b, loc, slice, buf, offsets, sizes, strides);
}

LogicalResult checkCarried(NodeImporter &n, const onnx::GraphProto &body, size_t outIndex,
                           Value out, Type expected) {
  if (out && out.getType() == expected)
    return success();
  std::string name = outIndex < (size_t)body.output_size() ? body.output(outIndex).name() : "";
  return n.error("loop-carried value '" + name + "' enters the body as " +
                 typeName(expected) + " but leaves it as " +
                 (out ? typeName(out.getType()) : std::string("nothing")) +
                 "; Kiln needs it to keep its type (no dynamic shape), or a trip count "
                 "known while compiling");
}

} // namespace controlflow

using namespace controlflow;

namespace {

//===----------------------------------------------------------------------===//
// If
//===----------------------------------------------------------------------===//

/// The type of an If result whose branches give `a` and `b`: the same rank
/// and element type, with the dims that differ unknown. Null when the ranks
/// or element types differ (or either is not a ranked tensor).
Type joinBranchTypes(Type a, Type b) {
  if (a == b)
    return a;
  auto ta = dyn_cast<RankedTensorType>(a), tb = dyn_cast<RankedTensorType>(b);
  if (!ta || !tb || ta.getRank() != tb.getRank() ||
      ta.getElementType() != tb.getElementType())
    return {};
  SmallVector<int64_t> shape;
  for (auto [da, db] : llvm::zip(ta.getShape(), tb.getShape()))
    shape.push_back(da == db ? da : ShapedType::kDynamic);
  return RankedTensorType::get(shape, ta.getElementType());
}

LogicalResult importIf(NodeImporter &n, SubgraphImporter sub, SmallVectorImpl<Value> &outputs,
                       SequenceSlots *seqOutputs) {
  const onnx::GraphProto *thenGraph = graphAttr(n, "then_branch");
  const onnx::GraphProto *elseGraph = thenGraph ? graphAttr(n, "else_branch") : nullptr;
  Value cond = n.required(0);
  if (!thenGraph || !elseGraph || !cond)
    return failure();
  // A condition known while compiling (a constant, or a graph input the
  // executable is specialised on) imports only the branch it takes.
  if (auto known = getConstantBool(cond)) {
    SmallVector<CountedAxis> counts;
    if (failed(sub(*known ? *thenGraph : *elseGraph, {}, outputs, nullptr, seqOutputs, &counts)))
      return failure();
    for (auto [i, c] : llvm::enumerate(counts))
      if (c)
        n.setRowCount(i, c.count, c.axis);
    return success();
  }

  Value c = toScalar(n, cond, "If's condition");
  if (!c)
    return failure();
  if (!c.getType().isInteger(1))
    return n.error("If's condition must be a bool tensor, not of " + typeName(c.getType()));
  auto thenBlock = std::make_unique<Block>(), elseBlock = std::make_unique<Block>();
  SmallVector<Value> thenValues, elseValues;
  SmallVector<CountedAxis> thenCounts, elseCounts;
  {
    OpBuilder::InsertionGuard guard(n.b);
    n.b.setInsertionPointToEnd(thenBlock.get());
    if (failed(sub(*thenGraph, {}, thenValues, nullptr, nullptr, &thenCounts)))
      return failure();
    n.b.setInsertionPointToEnd(elseBlock.get());
    if (failed(sub(*elseGraph, {}, elseValues, nullptr, nullptr, &elseCounts)))
      return failure();
  }
  if (thenValues.size() != elseValues.size())
    return n.error("then_branch has " + Twine(thenValues.size()) + " outputs and else_branch " +
                   Twine(elseValues.size()));
  auto countOf = [](ArrayRef<CountedAxis> counts, size_t i) {
    return i < counts.size() ? counts[i] : CountedAxis();
  };
  // Outputs that a branch counts along an axis (RowCounts.h) leave the If
  // counted: each branch's value padded to the larger size along that axis,
  // its count (or static size) a further result.
  SmallVector<std::optional<int64_t>> countedAxis(thenValues.size());
  SmallVector<Type> types;
  for (auto [i, t, e] : llvm::enumerate(thenValues, elseValues)) {
    CountedAxis tc = countOf(thenCounts, i), ec = countOf(elseCounts, i);
    if (tc || ec) {
      int64_t axis = tc ? tc.axis : ec.axis;
      auto tt = NodeImporter::rankedType(t), et = NodeImporter::rankedType(e);
      bool fits = tt && et && tt.hasStaticShape() && et.hasStaticShape() &&
                  tt.getRank() == et.getRank() && tt.getElementType() == et.getElementType() &&
                  (!tc || !ec || tc.axis == ec.axis);
      for (int64_t d = 0; fits && d < tt.getRank(); ++d)
        fits = d == axis || tt.getDimSize(d) == et.getDimSize(d);
      if (!fits)
        return n.error("output " + Twine(i) + " has a number of valid entries known only at "
                       "run time in one branch, and the branches' types (" +
                       typeName(t.getType()) + ", " + typeName(e.getType()) +
                       ") differ in more than that axis");
      SmallVector<int64_t> shape(tt.getShape());
      shape[axis] = std::max(tt.getDimSize(axis), et.getDimSize(axis));
      types.push_back(RankedTensorType::get(shape, tt.getElementType()));
      countedAxis[i] = axis;
      continue;
    }
    Type joined = joinBranchTypes(t.getType(), e.getType());
    if (!joined)
      // Different ranks or element types: no one tensor type holds both.
      // The condition must then be known while compiling; kiln::Model
      // retries with small inputs' values (a sample rate, a mode flag), so
      // that only the branch taken is imported.
      return n.error("output " + Twine(i) + " is " + typeName(t.getType()) +
                     " in then_branch but " + typeName(e.getType()) +
                     " in else_branch; branches of different rank need a condition that "
                     "must be a constant while compiling (it depends on graph inputs "
                     "other than small scalars, or on computed values)");
    types.push_back(joined);
  }
  size_t numValues = types.size();
  Type scalarI64 = RankedTensorType::get({}, n.b.getI64Type());
  for (auto &axis : countedAxis)
    if (axis)
      types.push_back(scalarI64);
  for (auto [block, values, counts] :
       {std::tuple{thenBlock.get(), &thenValues, &thenCounts},
        std::tuple{elseBlock.get(), &elseValues, &elseCounts}}) {
    OpBuilder::InsertionGuard guard(n.b);
    n.b.setInsertionPointToEnd(block);
    SmallVector<Value> yielded;
    for (size_t i = 0; i < numValues; ++i) {
      Value v = (*values)[i];
      if (countedAxis[i]) {
        // Padded with zeros to the If's size along the counted axis.
        int64_t axis = *countedAxis[i];
        auto vt = cast<RankedTensorType>(v.getType());
        auto rt = cast<RankedTensorType>(types[i]);
        if (vt != rt) {
          SmallVector<int64_t> padShape(vt.getShape());
          padShape[axis] = rt.getDimSize(axis) - vt.getDimSize(axis);
          auto padType = RankedTensorType::get(padShape, vt.getElementType());
          Value zeros = n.constant(
              DenseElementsAttr::get(padType, n.b.getZeroAttr(vt.getElementType())));
          v = n.make<ConcatOp>(ValueRange{v, zeros}, n.b.getI64IntegerAttr(axis));
        }
      } else if (v.getType() != types[i]) {
        // Each branch's value takes the If's more general type.
        v = tensor::CastOp::create(n.b, n.loc, types[i], v);
      }
      yielded.push_back(v);
    }
    for (size_t i = 0; i < numValues; ++i) {
      if (!countedAxis[i])
        continue;
      CountedAxis own = countOf(*counts, i);
      int64_t size = cast<RankedTensorType>((*values)[i].getType()).getDimSize(*countedAxis[i]);
      yielded.push_back(own ? own.count : n.i64Scalar(size));
    }
    if (n.failed())
      return failure();
    scf::YieldOp::create(n.b, n.loc, yielded);
  }
  auto ifOp = scf::IfOp::create(n.b, n.loc, types, c, /*addThenBlock=*/true,
                                /*addElseBlock=*/true);
  moveBody(thenBlock.get(), &ifOp.getThenRegion().front());
  moveBody(elseBlock.get(), &ifOp.getElseRegion().front());
  llvm::append_range(outputs, ifOp.getResults().take_front(numValues));
  size_t next = numValues;
  for (size_t i = 0; i < numValues; ++i)
    if (countedAxis[i])
      n.setRowCount(i, ifOp.getResult(next++), *countedAxis[i]);
  return success();
}

} // namespace

bool isControlFlowOperator(StringRef opType) {
  return opType == "If" || opType == "Loop" || opType == "Scan";
}

LogicalResult importControlFlowNode(NodeImporter &n, SubgraphImporter importSubgraph,
                                    function_ref<bool(StringRef)> isOuterSequence,
                                    ArrayRef<const SmallVector<Value> *> seqInputs,
                                    SmallVectorImpl<Value> &outputs, SequenceSlots &seqOutputs) {
  StringRef op = n.node.op_type();
  bool readsSequences = llvm::any_of(seqInputs, [](const auto *s) { return s != nullptr; });
  if (op == "Loop")
    return importLoopNode(n, importSubgraph, isOuterSequence, seqInputs, outputs, seqOutputs);
  if (readsSequences)
    return n.error(op + " cannot read a sequence");
  if (op == "If")
    return importIf(n, importSubgraph, outputs, &seqOutputs);
  return importScan(n, importSubgraph, outputs);
}

} // namespace kiln
