// ONNX Loop, imported as scf.while around the kiln ops of its body (a
// run-time trip count and early exit both work). A Loop that appends to
// sequences becomes one with scan outputs; Loops the run-time form cannot
// express (over sequences, or short ones whose carried values change shape)
// are unrolled while compiling (unrollLoop).
#include "ControlFlowSupport.h"
#include "kiln/IR/ShapeErrors.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Matchers.h"

#include <set>

using namespace mlir;

namespace kiln {
using namespace controlflow;
namespace {

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
  // number must be known now, or at least its bound: then the scan outputs
  // have that many rows, of which the iterations run are valid (a count of
  // rows, RowCounts.h).
  int64_t iterations = 0;
  bool countedScans = false;
  if (numScan > 0 && !trip && n.tripCountBound && condInit) {
    trip = *n.tripCountBound;
    countedScans = true;
  }
  if (numScan > 0) {
    if (!trip)
      return n.error("a Loop with scan outputs needs its trip count M; it must be a constant "
                     "or a number of rows (detections) whose bound is known");
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
  if (countedScans) {
    // The scan outputs' valid rows: the iterations that ran.
    Value ran = toTensor(n, whileOp.getResult(0));
    for (int64_t j = 0; j < numScan; ++j)
      n.setRowCount(numCarried + j, ran);
  }
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
  inner.loopRecurrences = n.loopRecurrences;
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

/// The tensor the body appends to its carried value i, in the form
/// exporters write for `t = torch.cat([t, row])`: the body's output is a
/// Concat along axis 0 of its input (through Identity or Cast nodes that
/// nothing else reads) and one more tensor, and the body reads that input
/// nowhere else. The appender and the nodes between are added to `nodes`;
/// empty when the body does something else.
std::string tensorAppended(const onnx::GraphProto &body, size_t i,
                           SmallVectorImpl<const onnx::NodeProto *> &nodes) {
  if ((size_t)body.input_size() <= 2 + i || (size_t)body.output_size() <= 1 + i)
    return {};
  auto readers = [&](const std::string &name) {
    SmallVector<const onnx::NodeProto *> r;
    for (const onnx::NodeProto &node : body.node())
      if (llvm::is_contained(node.input(), name))
        r.push_back(&node);
    for (const auto &out : body.output())
      if (out.name() == name)
        r.push_back(nullptr);
    return r;
  };
  std::string at = body.input(2 + i).name();
  for (;;) {
    auto r = readers(at);
    if (r.size() != 1 || !r[0])
      return {};
    const onnx::NodeProto &node = *r[0];
    if (node.op_type() == "Identity" || node.op_type() == "Cast") {
      nodes.push_back(&node);
      at = node.output(0);
      continue;
    }
    int64_t axis = -1;
    for (const onnx::AttributeProto &a : node.attribute())
      if (a.name() == "axis")
        axis = a.i();
    if (node.op_type() != "Concat" || axis != 0 || node.input_size() != 2 ||
        node.input(0) != at || node.output(0) != body.output(1 + i).name() ||
        readers(node.output(0)).size() != 1)
      return {};
    nodes.push_back(&node);
    return node.input(1);
  }
}

/// A Loop whose carried tensors that change shape only grow by one part per
/// iteration along axis 0, from empty (torchvision's keypoint decoding:
/// `xy_preds = torch.cat([xy_preds, row])` over the detections): each such
/// value becomes a scan output (the appended parts stacked), reshaped after
/// the loop so that the parts follow one another along axis 0. With a trip
/// count computed from a number of rows, the result is counted too.
LogicalResult importLoopAppendingTensors(NodeImporter &n, SubgraphImporter sub,
                                         ArrayRef<size_t> slots, ArrayRef<std::string> appended,
                                         ArrayRef<SmallVector<const onnx::NodeProto *>> nodes,
                                         SmallVectorImpl<Value> &outputs) {
  size_t numCarried;
  const onnx::GraphProto *body = checkedLoopBody(n, numCarried);
  if (!body)
    return failure();
  onnx::GraphProto rewritten = *body;
  SmallVector<Value> inputs{n.input(0), n.input(1)};
  for (size_t i = 0, k = 0; i < numCarried; ++i)
    if (k < slots.size() && slots[k] == i)
      ++k;
    else
      inputs.push_back(n.input(2 + i));
  // Drop the appended values' body inputs and outputs and the nodes that
  // appended (from the back, so indices stay valid); the parts become scans.
  std::set<const onnx::NodeProto *> dropped;
  for (const auto &list : nodes)
    dropped.insert(list.begin(), list.end());
  for (size_t k = slots.size(); k-- > 0;) {
    rewritten.mutable_input()->DeleteSubrange(2 + slots[k], 1);
    rewritten.mutable_output()->DeleteSubrange(1 + slots[k], 1);
  }
  for (int j = body->node_size(); j-- > 0;)
    if (dropped.count(&body->node(j)))
      rewritten.mutable_node()->DeleteSubrange(j, 1);
  for (const std::string &name : appended)
    rewritten.add_output()->set_name(name);

  NodeImporter inner(n.b, n.loc, n.node, n.opset, inputs);
  inner.loopRecurrences = n.loopRecurrences;
  inner.tripCountBound = n.tripCountBound;
  SmallVector<Value> results;
  if (failed(importLoop(inner, sub, &rewritten, results)) || inner.failed())
    return failure();
  size_t plainCarried = numCarried - slots.size();
  size_t numScan = body->output_size() - 1 - numCarried;
  auto countOf = [&](size_t result) {
    return result < inner.rowCounts.size() ? inner.rowCounts[result] : CountedAxis();
  };
  for (size_t i = 0, plain = 0, k = 0; i < numCarried; ++i) {
    if (!(k < slots.size() && slots[k] == i)) {
      outputs.push_back(results[plain++]);
      continue;
    }
    size_t result = plainCarried + numScan + k++;
    Value stacked = results[result];
    auto st = NodeImporter::rankedType(stacked);
    auto init = NodeImporter::rankedType(n.input(2 + i));
    if (!st || st.getRank() < 2 || !st.hasStaticShape())
      return n.error("loop-carried value '" + body->input(2 + i).name() +
                     "' grows by parts of unknown shape");
    if (init && init.getRank() != st.getRank() - 1)
      return n.error("loop-carried value '" + body->input(2 + i).name() + "' of rank " +
                     Twine(init.getRank()) + " grows by parts of rank " +
                     Twine(st.getRank() - 1));
    // [iterations, part, ...] -> [iterations * part, ...]
    int64_t part = st.getDimSize(1);
    SmallVector<int64_t> shape{st.getDimSize(0) * part};
    llvm::append_range(shape, st.getShape().drop_front(2));
    outputs.push_back(n.make<ReshapeOp>(stacked, n.i64Tensor(shape), n.b.getBoolAttr(false)));
    if (CountedAxis c = countOf(result))
      n.setRowCount(i, part == 1 ? c.count : n.make<MulOp>(c.count, n.i64Scalar(part)));
  }
  for (size_t j = 0; j < numScan; ++j) {
    outputs.push_back(results[plainCarried + j]);
    if (CountedAxis c = countOf(plainCarried + j))
      n.setRowCount(numCarried + j, c.count);
  }
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

} // namespace

namespace controlflow {
LogicalResult importLoopNode(NodeImporter &n, SubgraphImporter importSubgraph,
                             function_ref<bool(StringRef)> isOuterSequence,
                             ArrayRef<const SmallVector<Value> *> seqInputs,
                             SmallVectorImpl<Value> &outputs, SequenceSlots &seqOutputs) {
  bool readsSequences = llvm::any_of(seqInputs, [](const auto *s) { return s != nullptr; });
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
  // Carried tensors that grow by a part per iteration from empty become
  // scan outputs (short loops of known count are unrolled instead, below).
  if (!shortKnownLoop(n) && body->input_size() >= 2) {
    SmallVector<size_t> slots;
    SmallVector<std::string> appended;
    SmallVector<SmallVector<const onnx::NodeProto *>> nodes;
    for (size_t i = 0; i + 2 < n.numInputs() && i + 2 < (size_t)body->input_size(); ++i) {
      auto init = NodeImporter::rankedType(n.input(2 + i));
      if (!init || init.getRank() == 0 || !init.hasStaticShape() || init.getDimSize(0) != 0)
        continue;
      SmallVector<const onnx::NodeProto *> chain;
      std::string part = tensorAppended(*body, i, chain);
      if (part.empty())
        continue;
      slots.push_back(i);
      appended.push_back(part);
      nodes.push_back(std::move(chain));
    }
    if (!slots.empty())
      return importLoopAppendingTensors(n, importSubgraph, slots, appended, nodes, outputs);
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
    attempt.loopRecurrences = n.loopRecurrences;
    SmallVector<Value> results;
    bool ran;
    SmallVector<std::string> attemptErrors;
    uint64_t refusals = shapeInferenceRefusals();
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
    forgetShapeInferenceRefusals(refusals); // the attempt's, held back above
    if (succeeded(unrollLoop(n, importSubgraph, seqInputs, outputs, seqOutputs)))
      return success();
    for (const std::string &e : attemptErrors)
      emitError(n.loc) << e;
    return failure();
  }
  return importLoop(n, importSubgraph, body, outputs);
}
} // namespace controlflow
} // namespace kiln
