// ONNX Scan, imported as scf.for over the scanned axis around the kiln ops
// of its body, with the scan inputs and outputs moved to axis 0 and back.
#include "ControlFlowSupport.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;

namespace kiln {
using namespace controlflow;
namespace {

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

} // namespace

namespace controlflow {

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

} // namespace controlflow
} // namespace kiln
