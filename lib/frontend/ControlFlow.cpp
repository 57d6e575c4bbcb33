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
#include "ControlFlow.h"

#include "mlir/IR/Diagnostics.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"

#include <map>

using namespace mlir;

namespace kiln {
namespace {

/// No Loop runs more iterations than this when the count is known while
/// compiling; a larger count is almost surely a corrupt model.
constexpr int64_t kMaxStaticTripCount = int64_t(1) << 31;
/// Scan outputs of a Loop are preallocated; this bounds their size.
constexpr int64_t kMaxScanOutputBytes = int64_t(1) << 34;

const onnx::GraphProto *graphAttr(NodeImporter &n, StringRef name) {
  const onnx::AttributeProto *a = n.attr(name);
  if (!a || !a->has_g()) {
    (void)n.error("the subgraph attribute '" + name + "' is missing");
    return nullptr;
  }
  return &a->g();
}

/// A type as MLIR prints it (i16, f32, ...), for diagnostics.
std::string typeName(Type t) {
  std::string s;
  llvm::raw_string_ostream(s) << t;
  return s;
}

/// The one element of a one-element tensor, as a scalar.
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

/// Moves the ops of `from` to the end of `to`, whose leading arguments take
/// the place of `from`'s.
void moveBody(Block *from, Block *to) {
  for (auto [a, b] : llvm::zip(from->getArguments(), to->getArguments()))
    a.replaceAllUsesWith(b);
  if (!to->empty() && to->back().hasTrait<OpTrait::IsTerminator>())
    to->back().erase();
  to->getOperations().splice(to->end(), from->getOperations());
}

/// Initial values of scan-output buffers (the null entries of `inits`):
/// empty tensors of the type of the matching body argument.
void fillEmptyBuffers(OpBuilder &b, Location loc, SmallVectorImpl<Value> &inits,
                      ValueRange bodyArgs) {
  for (auto [init, arg] : llvm::zip(inits, bodyArgs))
    if (!init) {
      auto t = cast<RankedTensorType>(arg.getType());
      init = tensor::EmptyOp::create(b, loc, t.getShape(), t.getElementType());
    }
}

/// A scan output: adds to `body` an argument for a buffer of `rows` rows
/// shaped like `slice` and returns the buffer with `slice` written at `row`.
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

std::string typeString(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << t;
  return s;
}

/// Checks that a loop-carried value keeps its type.
LogicalResult checkCarried(NodeImporter &n, const onnx::GraphProto &body, size_t outIndex,
                           Value out, Type expected) {
  if (out && out.getType() == expected)
    return success();
  std::string name = outIndex < (size_t)body.output_size() ? body.output(outIndex).name() : "";
  return n.error("loop-carried value '" + name + "' enters the body as " +
                 typeString(expected) + " but leaves it as " +
                 (out ? typeString(out.getType()) : std::string("nothing")) +
                 "; Kiln needs it to keep its type (no dynamic shape), or a trip count "
                 "known while compiling");
}

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
                       typeString(t.getType()) + ", " + typeString(e.getType()) +
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
      return n.error("output " + Twine(i) + " is " + typeString(t.getType()) +
                     " in then_branch but " + typeString(e.getType()) +
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

//===----------------------------------------------------------------------===//
// Loop
//===----------------------------------------------------------------------===//

/// How the iteration-limit error names the Loop: its node name, or for an
/// unnamed node its first output (ONNX node names are optional).
std::string loopLabel(const onnx::NodeProto &node) {
  if (!node.name().empty() || node.output_size() == 0)
    return node.name();
  return "(unnamed, output " + node.output(0) + ")";
}

LogicalResult importLoop(NodeImporter &n, SubgraphImporter sub, const onnx::GraphProto *body,
                         SmallVectorImpl<Value> &outputs) {
  OpBuilder &b = n.b;
  Location loc = n.loc;
  size_t numCarried = n.numInputs() > 2 ? n.numInputs() - 2 : 0;
  if ((size_t)body->input_size() != numCarried + 2)
    return n.error("the body has " + Twine(body->input_size()) + " inputs; with " +
                   Twine(numCarried) + " loop-carried values it needs " +
                   Twine(numCarried + 2));
  int64_t numScan = body->output_size() - 1 - (int64_t)numCarried;
  if (numScan < 0)
    return n.error("the body has " + Twine(body->output_size()) + " outputs; with " +
                   Twine(numCarried) + " loop-carried values it needs at least " +
                   Twine(numCarried + 1));
  if (!n.hasInput(0) && !n.hasInput(1))
    return n.error("a Loop with neither a trip count nor a condition never ends");

  SmallVector<Value> carried;
  for (size_t i = 0; i < numCarried; ++i) {
    Value v = n.required(2 + i);
    if (!v)
      return failure();
    if (!NodeImporter::rankedType(v))
      return n.error("loop-carried value " + Twine(i) + " has no known shape");
    carried.push_back(v);
  }

  std::optional<int64_t> trip;
  Value tripScalar;
  if (n.hasInput(0)) {
    if (auto c = n.constInts(0); c && c->size() == 1) {
      trip = (*c)[0];
      if (*trip < 0)
        return n.error("the trip count " + Twine(*trip) + " is negative");
      if (*trip > kMaxStaticTripCount)
        return n.error("the trip count " + Twine(*trip) + " is over Kiln's limit of " +
                       Twine(kMaxStaticTripCount) + " iterations");
      tripScalar = arith::ConstantIntOp::create(b, loc, *trip, 64);
    } else if (!(tripScalar = toScalar(n, n.input(0), "the trip count M"))) {
      return failure();
    } else if (!tripScalar.getType().isInteger(64)) {
      // The loop compares it with its int64 iteration number.
      return n.error("the trip count M must be an int64 tensor, not of " +
                     typeName(tripScalar.getType()));
    }
  }
  std::optional<bool> condInit = n.hasInput(1) ? getConstantBool(n.input(1)) : true;
  Value condScalar = condInit ? arith::ConstantIntOp::create(b, loc, *condInit, 1)
                              : toScalar(n, n.input(1), "the condition");
  if (!condScalar)
    return failure();
  if (!condScalar.getType().isInteger(1))
    return n.error("the condition must be a bool tensor, not of " +
                   typeName(condScalar.getType()));

  // Scan outputs are preallocated with one row per iteration, so their
  // number must be known now.
  int64_t iterations = 0;
  if (numScan > 0) {
    if (!trip)
      return n.error("a Loop with scan outputs needs its trip count M; it must be a constant");
    if (!condInit)
      return n.error("a Loop with scan outputs needs its initial condition; it must be a "
                     "constant");
    iterations = *condInit ? *trip : 0;
  }

  // The body: (iteration, condition, carried..., scan buffers...).
  auto bodyBlock = std::make_unique<Block>();
  Value iterArg = bodyBlock->addArgument(b.getI64Type(), loc);
  Value condArg = bodyBlock->addArgument(b.getI1Type(), loc);
  SmallVector<Value> bodyArgs;
  SmallVector<Value> inits{arith::ConstantIntOp::create(b, loc, 0, 64), condScalar};
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToEnd(bodyBlock.get());
    Value condTensor = toTensor(n, condArg);
    bodyArgs = {toTensor(n, iterArg), condTensor};
    for (Value v : carried) {
      bodyArgs.push_back(bodyBlock->addArgument(v.getType(), loc));
      inits.push_back(v);
    }
    SmallVector<Value> results;
    if (failed(sub(*body, bodyArgs, results, nullptr, nullptr, nullptr)))
      return failure();
    Value condOut = results[0];
    if (numScan > 0 && condOut != condTensor && getConstantBool(condOut) != true)
      return n.error("a Loop with scan outputs must run all its iterations: its body's "
                     "condition output must be its condition input or true");
    for (size_t i = 0; i < numCarried; ++i)
      if (failed(checkCarried(n, *body, 1 + i, results[1 + i], carried[i].getType())))
        return failure();
    Value nextCond = toScalar(n, condOut, "the body's condition output");
    if (!nextCond)
      return failure();
    SmallVector<Value> yields{
        arith::AddIOp::create(b, loc, iterArg, arith::ConstantIntOp::create(b, loc, 1, 64)),
        nextCond};
    llvm::append_range(yields, ArrayRef<Value>(results).slice(1, numCarried));
    Value row = arith::IndexCastOp::create(b, loc, b.getIndexType(), iterArg);
    for (int64_t j = 0; j < numScan; ++j) {
      Value slice = results[1 + numCarried + j];
      auto st = NodeImporter::rankedType(slice);
      if (!st || !st.hasStaticShape())
        return n.error("scan output '" + body->output(1 + numCarried + j).name() +
                       "' has a dynamic shape; Loop's scan outputs need static ones");
      int64_t rowBytes = st.getNumElements() * std::max<int64_t>(1, st.getElementTypeBitWidth() / 8);
      if (rowBytes > 0 && iterations > kMaxScanOutputBytes / rowBytes)
        return n.error("scan output '" + body->output(1 + numCarried + j).name() + "' of " +
                       Twine(iterations) + " rows of " + Twine(rowBytes) +
                       " bytes is over Kiln's limit of 2^34 bytes");
      inits.push_back(Value()); // an empty buffer, made outside the body below
      yields.push_back(insertRow(b, loc, bodyBlock.get(), slice, iterations, row));
    }
    scf::YieldOp::create(b, loc, yields);
  }

  fillEmptyBuffers(b, loc, inits, bodyBlock->getArguments());
  SmallVector<Type> types(bodyBlock->getArgumentTypes());
  SmallVector<Location> locs(types.size(), loc);
  auto whileOp = scf::WhileOp::create(b, loc, types, inits);
  {
    OpBuilder::InsertionGuard guard(b);
    Block *before = b.createBlock(&whileOp.getBefore(), {}, types, locs);
    Value go = before->getArgument(1);
    if (tripScalar)
      go = arith::AndIOp::create(b, loc, go,
                                 arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt,
                                                       before->getArgument(0), tripScalar));
    // The iteration limit is asked only about iterations that would run, so
    // that a Loop of exactly `limit` iterations does not count as one too
    // many.
    auto ask = scf::IfOp::create(b, loc, TypeRange{b.getI1Type()}, go, /*withElse=*/true);
    {
      OpBuilder::InsertionGuard inner(b);
      b.setInsertionPointToStart(ask.thenBlock());
      Value allowed = LoopGuardOp::create(b, loc, b.getI1Type(), before->getArgument(0),
                                          b.getStringAttr(loopLabel(n.node)));
      scf::YieldOp::create(b, loc, allowed);
      b.setInsertionPointToStart(ask.elseBlock());
      scf::YieldOp::create(b, loc, go);
    }
    scf::ConditionOp::create(b, loc, ask.getResult(0), before->getArguments());
    Block *after = b.createBlock(&whileOp.getAfter(), {}, types, locs);
    moveBody(bodyBlock.get(), after);
  }
  llvm::append_range(outputs, whileOp.getResults().drop_front(2));
  return success();
}

/// The Loop's body when its inputs are (iteration, condition, the
/// `numCarried` carried values) and its outputs (condition, carried values,
/// scan outputs); null after an error otherwise.
const onnx::GraphProto *checkedLoopBody(NodeImporter &n, size_t &numCarried) {
  const onnx::GraphProto *body = graphAttr(n, "body");
  numCarried = n.numInputs() > 2 ? n.numInputs() - 2 : 0;
  if (body && ((size_t)body->input_size() != numCarried + 2 ||
               (size_t)body->output_size() < numCarried + 1)) {
    (void)n.error("the body's inputs and outputs do not match the Loop's");
    return nullptr;
  }
  return body;
}

/// The appender of the loop-carried sequence at carried position i: the
/// SequenceInsert without a position that makes the body's output from its
/// input, when the body reads that input nowhere else; null otherwise.
const onnx::NodeProto *sequenceAppender(const onnx::GraphProto &body, size_t i) {
  if ((size_t)body.input_size() <= 2 + i || (size_t)body.output_size() <= 1 + i)
    return nullptr;
  const std::string &in = body.input(2 + i).name(), &out = body.output(1 + i).name();
  const onnx::NodeProto *appender = nullptr;
  int readers = 0;
  for (const onnx::NodeProto &node : body.node()) {
    readers += llvm::count(node.input(), in);
    if (llvm::is_contained(node.output(), out))
      appender = &node;
  }
  bool ok = appender && appender->op_type() == "SequenceInsert" &&
            appender->input_size() == 2 && appender->input(0) == in && readers == 1;
  return ok ? appender : nullptr;
}

/// Whether every carried sequence of the Loop is only appended to.
bool appendsOnly(const onnx::GraphProto &body, ArrayRef<const SmallVector<Value> *> seqInputs) {
  for (size_t i = 2; i < seqInputs.size(); ++i)
    if (seqInputs[i] && !sequenceAppender(body, i - 2))
      return false;
  return true;
}

/// A Loop that carries sequences, in the form exporters write for
/// `ys.append(y)` in a loop: the sequence starts empty and the body appends
/// one tensor to it per iteration (SequenceInsert without a position) and
/// reads it nowhere else. The body is rewritten so that the appended tensor
/// is a scan output; after the loop, the sequence is the list of the scan
/// buffer's rows.
LogicalResult importLoopCarryingSequences(NodeImporter &n, SubgraphImporter sub,
                                          ArrayRef<const SmallVector<Value> *> seqInputs,
                                          SmallVectorImpl<Value> &outputs,
                                          std::map<size_t, SmallVector<Value>> &seqOutputs) {
  size_t numCarried;
  const onnx::GraphProto *body = checkedLoopBody(n, numCarried);
  if (!body)
    return failure();
  onnx::GraphProto rewritten = *body;
  SmallVector<Value> inputs{n.input(0), n.input(1)};
  SmallVector<size_t> sequenceSlots; // original carried positions
  SmallVector<std::string> appended;
  for (size_t i = 0; i < numCarried; ++i) {
    const SmallVector<Value> *seq = 2 + i < seqInputs.size() ? seqInputs[2 + i] : nullptr;
    if (!seq) {
      inputs.push_back(n.input(2 + i));
      continue;
    }
    if (!seq->empty())
      return n.error("loop-carried sequence " + Twine(i) + " must start empty");
    const onnx::NodeProto *appender = sequenceAppender(*body, i);
    if (!appender)
      return n.error("loop-carried sequence '" + body->input(2 + i).name() +
                     "' is supported when the body appends one tensor to it per iteration and "
                     "reads it nowhere else");
    sequenceSlots.push_back(i);
    appended.push_back(appender->input(1));
  }
  // Drop the sequences' body inputs, their appenders and outputs (from the
  // back, so indices stay valid), and add the appended tensors as scans.
  for (size_t k = sequenceSlots.size(); k-- > 0;) {
    size_t i = sequenceSlots[k];
    const std::string out = rewritten.output(1 + i).name();
    rewritten.mutable_input()->DeleteSubrange(2 + i, 1);
    rewritten.mutable_output()->DeleteSubrange(1 + i, 1);
    for (int j = 0; j < rewritten.node_size(); ++j)
      if (llvm::is_contained(rewritten.node(j).output(), out)) {
        rewritten.mutable_node()->DeleteSubrange(j, 1);
        break;
      }
  }
  for (const std::string &name : appended)
    rewritten.add_output()->set_name(name);

  NodeImporter inner(n.b, n.loc, n.node, n.opset, inputs);
  SmallVector<Value> results;
  if (failed(importLoop(inner, sub, &rewritten, results)) || inner.failed())
    return failure();
  size_t plainCarried = numCarried - sequenceSlots.size();
  size_t numScan = body->output_size() - 1 - numCarried;
  auto zero = n.b.getDenseI64ArrayAttr({0});
  for (size_t i = 0, plain = 0, k = 0; i < numCarried; ++i) {
    if (k < sequenceSlots.size() && sequenceSlots[k] == i) {
      Value buffer = results[plainCarried + numScan + k++];
      auto t = NodeImporter::rankedType(buffer);
      SmallVector<Value> rows;
      for (int64_t r = 0; t && r < t.getDimSize(0); ++r)
        rows.push_back(n.make<SqueezeOp>(
            n.make<SliceOp>(buffer, n.i64Tensor({r}), n.i64Tensor({r + 1}), n.i64Tensor({0}),
                            n.i64Tensor({1})),
            zero));
      seqOutputs[i] = std::move(rows);
      outputs.push_back(Value());
    } else {
      outputs.push_back(results[plain++]);
    }
  }
  for (size_t j = 0; j < numScan; ++j)
    outputs.push_back(results[plainCarried + j]);
  return failure(n.failed());
}

/// No Loop is unrolled over more iterations than this (each imports its
/// body once more).
constexpr int64_t kMaxUnrolledIterations = 1024;
/// Loops of up to this many iterations whose run-time form would not do
/// (sequences that grow, values that change shape) are unrolled.
constexpr int64_t kMaxUnrolledShortLoop = 16;

/// Whether the Loop's trip count and initial condition are known while
/// compiling and the count is small enough to unroll rather than loop.
bool shortKnownLoop(NodeImporter &n) {
  auto trip = n.hasInput(0) ? n.constInts(0) : std::nullopt;
  return trip && trip->size() == 1 && (*trip)[0] <= kMaxUnrolledShortLoop &&
         (!n.hasInput(1) || getConstantBool(n.input(1)));
}

/// Whether `graph` or a graph nested in it reads one of the names `outer`
/// says are sequences (and that the graph does not define itself: a name
/// bound in the body shadows the enclosing one, which this ignores, erring
/// on the side of unrolling).
bool readsOuterSequence(const onnx::GraphProto &graph,
                        function_ref<bool(StringRef)> isOuterSequence) {
  for (const onnx::NodeProto &node : graph.node()) {
    for (const std::string &in : node.input())
      if (!in.empty() && isOuterSequence(in))
        return true;
    for (const onnx::AttributeProto &a : node.attribute()) {
      if (a.has_g() && readsOuterSequence(a.g(), isOuterSequence))
        return true;
      for (const onnx::GraphProto &g : a.graphs())
        if (readsOuterSequence(g, isOuterSequence))
          return true;
    }
  }
  return false;
}

/// A Loop whose body works on sequences in ways no run-time loop can (reads
/// an element at the iteration number, carries a sequence that does not
/// start empty), unrolled while compiling: the body is imported once per
/// iteration with the iteration number and the carried values, sequences
/// included, of the one before. This needs the trip count and every
/// iteration's condition as constants.
LogicalResult unrollLoop(NodeImporter &n, SubgraphImporter sub,
                         ArrayRef<const SmallVector<Value> *> seqInputs,
                         SmallVectorImpl<Value> &outputs, SequenceSlots &seqOutputs) {
  size_t numCarried;
  const onnx::GraphProto *body = checkedLoopBody(n, numCarried);
  if (!body)
    return failure();
  size_t numScan = body->output_size() - 1 - numCarried;
  std::vector<SmallVector<Value>> scans(numScan);
  std::optional<int64_t> trip;
  if (n.hasInput(0)) {
    auto c = n.constInts(0);
    if (!c || c->size() != 1)
      return n.error("Kiln unrolls this Loop while compiling: its trip count M must "
                     "be a constant");
    trip = (*c)[0];
    if (*trip < 0)
      return n.error("the trip count " + Twine(*trip) + " is negative");
  }
  std::optional<bool> cond = n.hasInput(1) ? getConstantBool(n.input(1)) : true;
  if (!cond)
    return n.error("Kiln unrolls this Loop while compiling: its condition must be a "
                   "constant");
  SmallVector<Value> carried;
  SequenceSlots carriedSeqs;
  for (size_t i = 0; i < numCarried; ++i) {
    const SmallVector<Value> *seq = 2 + i < seqInputs.size() ? seqInputs[2 + i] : nullptr;
    if (seq)
      carriedSeqs[i] = *seq;
    carried.push_back(seq ? Value() : n.required(2 + i));
  }
  if (n.failed())
    return failure();
  auto boolType = RankedTensorType::get({}, n.b.getI1Type());
  for (int64_t it = 0; *cond && (!trip || it < *trip); ++it) {
    if (it >= kMaxUnrolledIterations)
      return n.error("Kiln unrolls this Loop while compiling, and it runs "
                     "over " + Twine(kMaxUnrolledIterations) + " iterations");
    SmallVector<Value> args{n.i64Scalar(it),
                            n.constant(DenseElementsAttr::get(boolType, true))};
    SequenceSlots seqArgs;
    for (size_t i = 0; i < numCarried; ++i) {
      args.push_back(carried[i]);
      if (auto s = carriedSeqs.find(i); s != carriedSeqs.end())
        seqArgs[2 + i] = s->second;
    }
    SmallVector<Value> results;
    SequenceSlots seqResults;
    if (failed(sub(*body, args, results, &seqArgs, &seqResults, nullptr)))
      return failure();
    std::optional<bool> next = getConstantBool(results[0]);
    if (!next)
      return n.error("Kiln unrolls this Loop while compiling: the condition its body "
                     "computes must be known then");
    cond = *next;
    for (size_t j = 0; j < numScan; ++j) {
      if (!results[1 + numCarried + j])
        return n.error("scan output " + Twine(j) + " is not a tensor");
      scans[j].push_back(
          n.make<UnsqueezeOp>(results[1 + numCarried + j], n.b.getDenseI64ArrayAttr({0})));
    }
    carriedSeqs.clear();
    for (size_t i = 0; i < numCarried; ++i) {
      carried[i] = results[1 + i];
      if (auto s = seqResults.find(1 + i); s != seqResults.end())
        carriedSeqs[i] = s->second;
    }
  }
  for (size_t i = 0; i < numCarried; ++i) {
    outputs.push_back(carried[i]);
    if (auto s = carriedSeqs.find(i); s != carriedSeqs.end())
      seqOutputs[i] = s->second;
  }
  for (SmallVector<Value> &rows : scans) {
    if (rows.empty())
      return n.error("an unrolled Loop that runs no iterations cannot give scan outputs (their "
                     "shape is unknown)");
    outputs.push_back(rows.size() == 1 ? rows[0]
                                       : n.make<ConcatOp>(rows, n.b.getI64IntegerAttr(0)));
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Scan
//===----------------------------------------------------------------------===//

/// The scan proper, over axis 0 of each of `scanned`: final states and the
/// scan outputs stacked along a new axis 0.
LogicalResult scanAlongFirstAxis(NodeImporter &n, SubgraphImporter sub,
                                 const onnx::GraphProto &body, ArrayRef<Value> states,
                                 ArrayRef<Value> scanned, ArrayRef<int64_t> inReverse,
                                 ArrayRef<int64_t> outReverse, SmallVectorImpl<Value> &outputs) {
  OpBuilder &b = n.b;
  Location loc = n.loc;
  int64_t steps = -1;
  for (Value x : scanned) {
    auto t = NodeImporter::rankedType(x);
    if (!t || t.getRank() == 0 || !t.hasStaticShape())
      return n.error("a scanned input needs a static shape");
    if (steps >= 0 && t.getDimSize(0) != steps)
      return n.error("the scanned inputs have different lengths (" + Twine(steps) + " and " +
                     Twine(t.getDimSize(0)) + ")");
    steps = t.getDimSize(0);
  }
  if (steps < 0)
    return n.error("Scan has no scanned input");
  for (Value s : states)
    if (!NodeImporter::rankedType(s))
      return n.error("a Scan state has no known shape");
  size_t numOut = body.output_size() - states.size();

  auto bodyBlock = std::make_unique<Block>();
  Value iv = bodyBlock->addArgument(b.getIndexType(), loc);
  SmallVector<Value> inits(states);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToEnd(bodyBlock.get());
    SmallVector<Value> args;
    for (Value s : states)
      args.push_back(bodyBlock->addArgument(s.getType(), loc));
    Value last = arith::ConstantIndexOp::create(b, loc, steps - 1);
    Value backwards = arith::SubIOp::create(b, loc, last, iv);
    auto stepOf = [&](bool reverse) -> OpFoldResult { return reverse ? backwards : iv; };
    for (auto [k, x] : llvm::enumerate(scanned)) {
      auto t = cast<RankedTensorType>(x.getType());
      SmallVector<OpFoldResult> offsets(t.getRank(), b.getIndexAttr(0));
      offsets[0] = stepOf(k < inReverse.size() && inReverse[k]);
      SmallVector<OpFoldResult> sizes{b.getIndexAttr(1)};
      for (int64_t d : t.getShape().drop_front())
        sizes.push_back(b.getIndexAttr(d));
      SmallVector<OpFoldResult> strides(t.getRank(), b.getIndexAttr(1));
      auto sliceType = RankedTensorType::get(t.getShape().drop_front(), t.getElementType());
      args.push_back(tensor::ExtractSliceOp::create(b, loc, sliceType, x, offsets, sizes, strides));
    }
    SmallVector<Value> results;
    if (failed(sub(body, args, results, nullptr, nullptr, nullptr)))
      return failure();
    SmallVector<Value> yields;
    for (size_t i = 0; i < states.size(); ++i) {
      if (failed(checkCarried(n, body, i, results[i], states[i].getType())))
        return failure();
      yields.push_back(results[i]);
    }
    for (size_t j = 0; j < numOut; ++j) {
      Value slice = results[states.size() + j];
      auto st = NodeImporter::rankedType(slice);
      if (!st || !st.hasStaticShape())
        return n.error("scan output '" + body.output(states.size() + j).name() +
                       "' has no static shape");
      inits.push_back(Value()); // an empty buffer, made outside the body below
      yields.push_back(insertRow(b, loc, bodyBlock.get(), slice, steps,
                                 stepOf(j < outReverse.size() && outReverse[j])));
    }
    scf::YieldOp::create(b, loc, yields);
  }
  fillEmptyBuffers(b, loc, inits, bodyBlock->getArguments().drop_front());
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value ub = arith::ConstantIndexOp::create(b, loc, steps);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  auto forOp = scf::ForOp::create(b, loc, zero, ub, one, inits);
  moveBody(bodyBlock.get(), forOp.getBody());
  llvm::append_range(outputs, forOp.getResults());
  return success();
}

/// A list attribute of `count` entries (default all 0), axes normalised by
/// `rankOf(i)`.
FailureOr<SmallVector<int64_t>> listAttr(NodeImporter &n, StringRef name, size_t count,
                                         function_ref<int64_t(size_t)> rankOf) {
  SmallVector<int64_t> v(count, 0);
  if (auto given = n.getInts(name)) {
    if (given->size() != count)
      return n.error("'" + name + "' has " + Twine(given->size()) + " entries; expected " +
                     Twine(count));
    v = *given;
  }
  if (rankOf)
    for (size_t i = 0; i < count; ++i) {
      auto a = n.normalizeAxis(v[i], rankOf(i), "'" + name.str() + "' entry");
      if (!a)
        return failure();
      v[i] = *a;
    }
  return v;
}

LogicalResult importScan(NodeImporter &n, SubgraphImporter sub, SmallVectorImpl<Value> &outputs) {
  const onnx::GraphProto *body = graphAttr(n, "body");
  if (!body)
    return failure();
  int64_t numScanIn = n.getInt("num_scan_inputs", -1);
  bool batched = n.opset < 9; // Scan-8: a batch axis 0 and sequence_lens first
  size_t first = batched ? 1 : 0;
  if (numScanIn < 1 || (size_t)numScanIn + first > n.numInputs())
    return n.error("num_scan_inputs " + Twine(numScanIn) + " does not fit the " +
                   Twine(n.numInputs()) + " inputs");
  size_t numStates = n.numInputs() - first - numScanIn;
  if ((size_t)body->input_size() != numStates + numScanIn ||
      (size_t)body->output_size() < numStates)
    return n.error("the body's inputs and outputs do not match " + Twine(numStates) +
                   " states and " + Twine(numScanIn) + " scanned inputs");
  size_t numOut = body->output_size() - numStates;
  SmallVector<Value> states, scanned;
  for (size_t i = 0; i < numStates; ++i)
    states.push_back(n.required(first + i));
  for (int64_t i = 0; i < numScanIn; ++i)
    scanned.push_back(n.required(first + numStates + i));
  for (Value v : llvm::concat<Value>(states, scanned))
    if (!v || !n.rankOf(v))
      return failure();

  if (batched) {
    if (n.hasInput(0))
      return n.error("Scan-8 with sequence_lens is not supported");
    auto inReverse = listAttr(n, "directions", numScanIn, nullptr);
    if (failed(inReverse))
      return failure();
    // Each batch entry is its own scan (over axis 1 of the batched inputs).
    int64_t batch = -1;
    for (Value v : llvm::concat<Value>(states, scanned)) {
      auto t = NodeImporter::rankedType(v);
      if (t.getRank() == 0 || t.isDynamicDim(0) || (batch >= 0 && t.getDimSize(0) != batch))
        return n.error("Scan-8 needs a static batch axis 0 shared by all inputs");
      batch = t.getDimSize(0);
    }
    SmallVector<SmallVector<Value>> perBatch(numStates + numOut);
    auto zeroAxis = n.b.getDenseI64ArrayAttr({0});
    for (int64_t bIdx = 0; bIdx < batch; ++bIdx) {
      auto pick = [&](Value v) {
        auto t = NodeImporter::rankedType(v);
        SmallVector<int64_t> starts(1, bIdx), ends(1, bIdx + 1), axes(1, 0), steps(1, 1);
        Value s = n.make<SliceOp>(v, n.i64Tensor(starts), n.i64Tensor(ends), n.i64Tensor(axes),
                                  n.i64Tensor(steps));
        (void)t;
        return n.make<SqueezeOp>(s, zeroAxis);
      };
      SmallVector<Value> bStates, bScanned, results;
      for (Value s : states)
        bStates.push_back(pick(s));
      for (Value x : scanned)
        bScanned.push_back(pick(x));
      if (n.failed() || failed(scanAlongFirstAxis(n, sub, *body, bStates, bScanned,
                                                  *inReverse, {}, results)))
        return failure();
      for (auto [i, r] : llvm::enumerate(results))
        perBatch[i].push_back(n.make<UnsqueezeOp>(r, zeroAxis));
    }
    for (auto &parts : perBatch)
      outputs.push_back(n.make<ConcatOp>(parts, n.b.getI64IntegerAttr(0)));
    return failure(n.failed());
  }

  auto inAxes = listAttr(n, "scan_input_axes", numScanIn, [&](size_t i) {
    return NodeImporter::rankedType(scanned[i]).getRank();
  });
  if (failed(inAxes))
    return failure();
  auto inReverse = listAttr(n, "scan_input_directions", numScanIn, nullptr);
  auto outReverse = listAttr(n, "scan_output_directions", numOut, nullptr);
  if (failed(inReverse) || failed(outReverse))
    return failure();
  for (auto [i, x] : llvm::enumerate(scanned))
    x = n.moveAxis(x, NodeImporter::rankedType(x).getRank(), (*inAxes)[i], 0);
  if (n.failed())
    return failure();
  SmallVector<Value> results;
  if (failed(scanAlongFirstAxis(n, sub, *body, states, scanned, *inReverse, *outReverse,
                                results)))
    return failure();
  auto outAxes = listAttr(n, "scan_output_axes", numOut, [&](size_t j) {
    return NodeImporter::rankedType(results[numStates + j]).getRank();
  });
  if (failed(outAxes))
    return failure();
  for (size_t i = 0; i < results.size(); ++i) {
    Value r = results[i];
    if (i >= numStates)
      r = n.moveAxis(r, NodeImporter::rankedType(r).getRank(), 0, (*outAxes)[i - numStates]);
    outputs.push_back(r);
  }
  return failure(n.failed());
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
  if (op == "Loop") {
    const onnx::GraphProto *body = graphAttr(n, "body");
    if (!body)
      return failure();
    if (readsOuterSequence(*body, isOuterSequence))
      return unrollLoop(n, importSubgraph, seqInputs, outputs, seqOutputs);
    if (readsSequences) {
      // The run-time form when the body only appends, unless the loop is
      // short and its count known: unrolled, appended tensors may differ in
      // shape from one iteration to the next (the run-time form needs one
      // static shape), which is what a first attempt with a run-time count
      // reports, so that the model is specialised on the count.
      bool allStartEmpty = llvm::all_of(
          seqInputs.drop_front(std::min<size_t>(2, seqInputs.size())),
          [](const auto *s) { return !s || s->empty(); });
      if (allStartEmpty && appendsOnly(*body, seqInputs) && !shortKnownLoop(n))
        return importLoopCarryingSequences(n, importSubgraph, seqInputs, outputs, seqOutputs);
      return unrollLoop(n, importSubgraph, seqInputs, outputs, seqOutputs);
    }
    // A short Loop with a known count whose carried values change shape
    // from one iteration to the next (a Slice at the iteration number) has
    // no run-time form with static types; unrolled, each iteration has its
    // own. The run-time form is tried first, on its own NodeImporter so that
    // its failure does not stick; its ops are dead code then.
    if (shortKnownLoop(n)) {
      SmallVector<Value> inputs;
      for (size_t i = 0; i < n.numInputs(); ++i)
        inputs.push_back(n.input(i));
      NodeImporter attempt(n.b, n.loc, n.node, n.opset, inputs);
      SmallVector<Value> results;
      bool ran;
      SmallVector<std::string> attemptErrors;
      {
        // The attempt's errors are held back: reported only if unrolling
        // fails too, so that a model that compiles shows none of them.
        ScopedDiagnosticHandler quiet(n.b.getContext(), [&](Diagnostic &d) {
          if (d.getSeverity() == DiagnosticSeverity::Error)
            attemptErrors.push_back(d.str());
          return success();
        });
        ran = succeeded(importLoop(attempt, importSubgraph, body, results)) && !attempt.failed();
      }
      if (ran) {
        llvm::append_range(outputs, results);
        return success();
      }
      if (succeeded(unrollLoop(n, importSubgraph, seqInputs, outputs, seqOutputs)))
        return success();
      for (const std::string &e : attemptErrors)
        emitError(n.loc) << e;
      return failure();
    }
    return importLoop(n, importSubgraph, body, outputs);
  }
  if (readsSequences)
    return n.error(op + " cannot read a sequence");
  if (op == "If")
    return importIf(n, importSubgraph, outputs, &seqOutputs);
  return importScan(n, importSubgraph, outputs);
}

} // namespace kiln
