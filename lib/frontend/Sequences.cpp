// ONNX sequences at import time. A sequence in Kiln is a list of tensor
// Values that the importer tracks by name; sequence operators edit the list
// and only their tensor results (SequenceAt, ConcatFromSequence,
// SequenceLength) become IR. This is exact whenever every position is known
// when the model is compiled: a constant, or a small graph input on whose
// value the executable is specialised (kiln::Model retries with the values
// when an error says a position "must be a constant"). Elements keep their
// own shapes, so a sequence of tensors of different sizes is fine.
//
// Sequences cross control flow where positions stay known: subgraphs read
// their parents' sequences, a Loop that only appends becomes a scan output
// (ControlFlow.cpp), other Loops over sequences are unrolled, and an If with
// a known condition returns its branch's sequences. Graph inputs and
// outputs that are sequences are flattened into one argument or result per
// element (Importer.cpp, kiln::Model::run with kiln::ValueView).
#include "Sequences.h"

using namespace mlir;

namespace kiln {
namespace {

using Elements = SmallVector<Value>;

/// A constant scalar position, normalised into [0, limit].
FailureOr<int64_t> position(NodeImporter &n, size_t input, int64_t size, int64_t limit) {
  auto v = n.constInts(input);
  if (!v || v->size() != 1)
    return n.error("the position (input " + Twine(input) + ") must be a constant scalar");
  int64_t p = (*v)[0] < 0 ? (*v)[0] + size : (*v)[0];
  if (p < 0 || p > limit)
    return n.error("position " + Twine((*v)[0]) + " is out of range for a sequence of " +
                   Twine(size) + " tensors");
  return p;
}

/// SplitToSequence: slices of x along `axis`, each of the sizes in `split`
/// (input 1: a scalar chunk size or a list of sizes), or of size 1 squeezed
/// away when keepdims = 0 and there is no split input.
LogicalResult splitToSequence(NodeImporter &n, Elements &out) {
  Value x = n.required(0);
  auto t = NodeImporter::rankedType(x);
  if (!t)
    return n.error("SplitToSequence needs an input of known rank");
  auto normalized = n.normalizeAxis(n.getInt("axis", 0), t.getRank(), "SplitToSequence axis");
  if (!normalized)
    return failure();
  int64_t axis = *normalized;
  if (t.isDynamicDim(axis))
    return n.error("SplitToSequence along a dimension of dynamic shape is not supported");
  int64_t dim = t.getDimSize(axis);
  SmallVector<int64_t> sizes;
  bool squeeze = false;
  if (n.hasInput(1)) {
    auto s = n.constInts(1);
    if (!s)
      return n.error("SplitToSequence's split must be a constant");
    auto st = NodeImporter::rankedType(n.input(1));
    if (st && st.getRank() == 0) {
      int64_t chunk = (*s)[0];
      if (chunk <= 0)
        return n.error("SplitToSequence chunk size " + Twine(chunk) + " is not positive");
      for (int64_t at = 0; at < dim; at += chunk)
        sizes.push_back(std::min(chunk, dim - at));
    } else {
      sizes = *s;
      int64_t total = 0;
      for (int64_t v : sizes) {
        if (v < 0)
          return n.error("SplitToSequence has a negative split size");
        total += v;
      }
      if (total != dim)
        return n.error("SplitToSequence sizes add up to " + Twine(total) + ", not " + Twine(dim));
    }
  } else {
    sizes.assign(dim, 1);
    squeeze = n.getInt("keepdims", 1) == 0;
  }
  int64_t start = 0;
  for (int64_t s : sizes) {
    Value part = n.make<SliceOp>(x, n.i64Tensor({start}), n.i64Tensor({start + s}),
                                 n.i64Tensor({axis}), n.i64Tensor({1}));
    if (squeeze)
      part = n.make<SqueezeOp>(part, n.b.getDenseI64ArrayAttr({axis}));
    out.push_back(part);
    start += s;
  }
  return success();
}

LogicalResult concatFromSequence(NodeImporter &n, const Elements &seq, Value &out) {
  if (seq.empty())
    return n.error("ConcatFromSequence of an empty sequence");
  auto t = NodeImporter::rankedType(seq.front());
  if (!t)
    return n.error("ConcatFromSequence needs tensors of known rank");
  bool newAxis = n.getInt("new_axis", 0) != 0;
  int64_t rank = t.getRank() + (newAxis ? 1 : 0);
  auto normalized = n.normalizeAxis(n.getInt("axis", 0), rank, "ConcatFromSequence axis");
  if (!normalized)
    return failure();
  int64_t axis = *normalized;
  SmallVector<Value> parts;
  for (Value v : seq)
    parts.push_back(newAxis ? n.make<UnsqueezeOp>(v, n.b.getDenseI64ArrayAttr({axis})) : v);
  out = n.make<ConcatOp>(parts, n.b.getI64IntegerAttr(axis));
  return success();
}

} // namespace

bool isSequenceOperator(llvm::StringRef opType) {
  return llvm::is_contained({"SequenceEmpty", "SequenceConstruct", "SequenceInsert",
                             "SequenceErase", "SequenceAt", "SequenceLength",
                             "SplitToSequence", "ConcatFromSequence"},
                            opType);
}

LogicalResult importSequenceNode(NodeImporter &n, ArrayRef<const Elements *> seqInputs,
                                 Elements &seqOut, Value &tensorOut) {
  StringRef op = n.node.op_type();
  auto sequenceInput = [&](size_t i) -> const Elements * {
    const Elements *s = i < seqInputs.size() ? seqInputs[i] : nullptr;
    if (!s)
      (void)n.error("input " + Twine(i) + " must be a sequence");
    return s;
  };
  if (op == "SequenceEmpty")
    return success();
  if (op == "SequenceConstruct") {
    for (size_t i = 0; i < n.numInputs(); ++i)
      seqOut.push_back(n.required(i));
    return failure(n.failed());
  }
  if (op == "SplitToSequence")
    return splitToSequence(n, seqOut);
  const Elements *seq = sequenceInput(0);
  if (!seq)
    return failure();
  int64_t size = seq->size();
  if (op == "SequenceLength") {
    tensorOut = n.i64Scalar(size);
    return success();
  }
  if (op == "ConcatFromSequence")
    return concatFromSequence(n, *seq, tensorOut);
  if (op == "SequenceAt") {
    if (size == 0)
      return n.error("SequenceAt on an empty sequence");
    auto p = position(n, 1, size, size - 1);
    if (failed(p))
      return failure();
    tensorOut = (*seq)[*p];
    return success();
  }
  if (op == "SequenceInsert") {
    Value x = n.required(1);
    if (n.failed())
      return failure();
    int64_t at = size;
    if (n.hasInput(2)) {
      auto p = position(n, 2, size, size);
      if (failed(p))
        return failure();
      at = *p;
    }
    seqOut.assign(seq->begin(), seq->end());
    seqOut.insert(seqOut.begin() + at, x);
    return success();
  }
  if (op == "SequenceErase") {
    if (size == 0)
      return n.error("SequenceErase on an empty sequence");
    int64_t at = size - 1;
    if (n.hasInput(1)) {
      auto p = position(n, 1, size, size - 1);
      if (failed(p))
        return failure();
      at = *p;
    }
    seqOut.assign(seq->begin(), seq->end());
    seqOut.erase(seqOut.begin() + at);
    return success();
  }
  return n.error("unsupported sequence operator");
}

} // namespace kiln
