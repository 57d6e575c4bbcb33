// Import rules for the recurrent operators RNN, GRU and LSTM. With the
// sequence length static (shapes are specialised), each is a loop over time
// (scf.for; one step unrolled when the sequence has one) of matmuls, gate
// slices and activations, which the code generator handles like any other
// graph. Equations follow the ONNX operator spec.
// Per-entry sequence_lens (run-time values too) mask each step: an entry
// past its length keeps its state and outputs zeros, as in ONNX Runtime.
#include "NodeImporter.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;

namespace kiln {
namespace {

using Outs = SmallVectorImpl<Value>;

enum class Cell { RNN, GRU, LSTM };

/// Sequences of this many steps or more, or of none, run as a loop over
/// time (Recurrence::loopOverSteps); a single step is unrolled.
constexpr int64_t kLoopFromSteps = 2;

struct Recurrence {
  NodeImporter &n;
  Cell cell;
  int64_t seq = 0, batch = 0, hidden = 0, gates = 0, dirs = 1;
  std::vector<std::string> activations;
  std::optional<double> clip;
  /// sequence_lens as [batch, 1] i64, when not all full.
  Value lengths;
  /// layout = 1: X, the initial states and the outputs are batch-major.
  bool batchFirst = false;

  /// The initial state of input `i` (5: h, 6: c) for direction d, as
  /// [batch, H]. With layout = 1 the input is [batch, dirs, H].
  Value initialState(unsigned i, int64_t d) {
    Value v = n.input(i);
    if (batchFirst)
      v = n.make<TransposeOp>(v, n.b.getDenseI64ArrayAttr({1, 0, 2}));
    return take(v, d);
  }

  Value slice(Value v, int64_t axis, int64_t start, int64_t end) {
    return n.make<SliceOp>(v, n.i64Tensor({start}), n.i64Tensor({end}), n.i64Tensor({axis}),
                           n.i64Tensor({1}));
  }
  /// v[index] along axis 0, with that axis removed.
  Value take(Value v, int64_t index) {
    return n.make<SqueezeOp>(slice(v, 0, index, index + 1), n.b.getDenseI64ArrayAttr({0}));
  }
  Value activate(const std::string &name, Value x) {
    if (name == "Sigmoid")
      return n.make<SigmoidOp>(x);
    if (name == "Tanh")
      return n.make<TanhOp>(x);
    if (name == "Relu")
      return n.make<ReluOp>(x);
    (void)n.error("unsupported recurrent activation '" + name + "'");
    return {};
  }
  Value clipped(Value x) {
    if (!clip)
      return x;
    x = n.make<MinOp>(x, n.scalarLike(x, *clip));
    return n.make<MaxOp>(x, n.scalarLike(x, -*clip));
  }
  Value gate(Value packed, int64_t g) { return slice(packed, 1, g * hidden, (g + 1) * hidden); }

  /// The steps as scf.for over time, for sequences of kLoopFromSteps steps
  /// or more: the body is one step, compiled once, where the unrolled form
  /// copied it per step (a bidirectional LSTM over 40 tokens compiled in
  /// 3.2 s). The input projection of every step is one matrix product
  /// before the loop, [seq, batch, in] x [in, G*H], as ONNX Runtime does;
  /// inside, each step reads its row. Carries h (and c); the outputs go to
  /// rows of a [seq, batch, H] buffer. Returns y as [seq, 1, batch, H] and
  /// leaves the final states in h and c.
  Value loopOverSteps(Value x, Value w, Value wb, bool reverse, Value &h, Value &c,
                      llvm::function_ref<Value(Value, Value)> step) {
    OpBuilder &b = n.b;
    Location loc = n.loc;
    Value xw = n.make<MatMulOp>(x, w); // [seq, batch, G*H]
    if (wb)
      xw = n.make<AddOp>(xw, wb);
    if (n.failed()) // a weight or state of the wrong shape, reported
      return {};
    auto xwT = NodeImporter::rankedType(xw);
    auto hT = NodeImporter::rankedType(h);
    auto cT = c ? NodeImporter::rankedType(c) : hT;
    SmallVector<int64_t> stateShape{batch, hidden};
    if (!xwT || !hT || !cT || hT.getShape() != ArrayRef<int64_t>(stateShape) ||
        cT.getShape() != ArrayRef<int64_t>(stateShape)) {
      (void)n.error("the initial states must be [num_directions, batch, hidden_size] ([batch, "
                    "num_directions, hidden_size] with layout 1)");
      return {};
    }
    auto stepT = RankedTensorType::get({batch, gates * hidden}, xwT.getElementType());
    auto ysT = RankedTensorType::get({seq, batch, hidden}, hT.getElementType());

    SmallVector<Value> inits{h};
    if (c)
      inits.push_back(c);
    inits.push_back(tensor::EmptyOp::create(b, loc, ysT.getShape(), ysT.getElementType()));
    Value zero = arith::ConstantIndexOp::create(b, loc, 0);
    Value ub = arith::ConstantIndexOp::create(b, loc, seq);
    Value one = arith::ConstantIndexOp::create(b, loc, 1);
    auto forOp = scf::ForOp::create(b, loc, zero, ub, one, inits);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(forOp.getBody());
      Value t = forOp.getInductionVar();
      if (reverse)
        t = arith::SubIOp::create(b, loc, arith::ConstantIndexOp::create(b, loc, seq - 1), t);
      SmallVector<OpFoldResult> offsets{t, b.getIndexAttr(0), b.getIndexAttr(0)};
      SmallVector<OpFoldResult> sizes{b.getIndexAttr(1), b.getIndexAttr(batch),
                                      b.getIndexAttr(gates * hidden)};
      SmallVector<OpFoldResult> strides(3, b.getIndexAttr(1));
      Value xwt = tensor::ExtractSliceOp::create(b, loc, stepT, xw, offsets, sizes, strides);
      Value tI64 = arith::IndexCastOp::create(b, loc, b.getI64Type(), t);
      Value tIndex = tensor::FromElementsOp::create(
          b, loc, RankedTensorType::get({1}, b.getI64Type()), ValueRange{tI64});
      auto args = forOp.getRegionIterArgs();
      h = args[0];
      if (c)
        c = args[1];
      Value out = step(xwt, tIndex);
      Value ys = args.back();
      SmallVector<OpFoldResult> rowOffsets{t, b.getIndexAttr(0), b.getIndexAttr(0)};
      SmallVector<OpFoldResult> rowSizes{b.getIndexAttr(1), b.getIndexAttr(batch),
                                         b.getIndexAttr(hidden)};
      Value written =
          tensor::InsertSliceOp::create(b, loc, out, ys, rowOffsets, rowSizes, strides);
      SmallVector<Value> yields{h};
      if (c)
        yields.push_back(c);
      yields.push_back(written);
      scf::YieldOp::create(b, loc, yields);
    }
    h = forOp.getResult(0);
    if (c)
      c = forOp.getResult(1);
    return n.make<UnsqueezeOp>(forOp.getResults().back(), n.b.getDenseI64ArrayAttr({1}));
  }

  /// One direction over the whole sequence: y, the hidden state of every
  /// step in time order as [seq, 1, batch, H], and the final states.
  void runDirection(Value x, int64_t d, bool reverse, Value &y, Value &hFinal, Value &cFinal) {
    auto swap = n.b.getDenseI64ArrayAttr({1, 0});
    Value w = n.make<TransposeOp>(take(n.input(1), d), swap); // [in, G*H]
    Value r = n.make<TransposeOp>(take(n.input(2), d), swap); // [H, G*H]
    Value wb, rb;
    bool rbInProjection = false;
    if (n.hasInput(3)) {
      Value b = take(n.input(3), d); // [2*G*H]
      wb = slice(b, 0, 0, gates * hidden);
      rb = slice(b, 0, gates * hidden, 2 * gates * hidden);
    }
    Type elt = NodeImporter::elementType(x);
    auto zeros = [&]() {
      return n.constant(DenseElementsAttr::get(RankedTensorType::get({batch, hidden}, elt),
                                               FloatAttr::get(elt, 0.0).getValue()));
    };
    Value h = n.hasInput(5) ? initialState(5, d) : zeros();
    Value c = cell == Cell::LSTM ? (n.hasInput(6) ? initialState(6, d) : zeros()) : Value();
    Value p = cell == Cell::LSTM && n.hasInput(7) ? take(n.input(7), d) : Value(); // [3*H]
    size_t a0 = d * (cell == Cell::LSTM ? 3 : cell == Cell::GRU ? 2 : 1);
    auto act = [&](size_t i) { return activations[a0 + i]; };
    bool linearBeforeReset = n.getInt("linear_before_reset", 0) != 0;

    // One step from the input projection `xw` of step `t` ([batch, G*H],
    // the input bias in it) and `tIndex`, t as a [1] i64 tensor (for the
    // length mask): updates h and c, returns the step's output.
    auto step = [&](Value xw, Value tIndex) -> Value {
      Value hPrev = h, cPrev = c;
      if (cell == Cell::GRU) {
        // Gates z, r, h; the recurrent part of h depends on the reset gate.
        Value hr = n.make<MatMulOp>(h, r);
        if (rb)
          hr = n.make<AddOp>(hr, rb);
        Value z = activate(act(0), clipped(n.make<AddOp>(gate(xw, 0), gate(hr, 0))));
        Value rg = activate(act(0), clipped(n.make<AddOp>(gate(xw, 1), gate(hr, 1))));
        Value recurrent;
        if (linearBeforeReset) {
          recurrent = n.make<MulOp>(rg, gate(hr, 2));
        } else {
          Value rh = slice(r, 1, 2 * hidden, 3 * hidden);
          recurrent = n.make<MatMulOp>(n.make<MulOp>(rg, h), rh);
          if (rb)
            recurrent = n.make<AddOp>(recurrent, slice(rb, 0, 2 * hidden, 3 * hidden));
        }
        Value cand = activate(act(1), clipped(n.make<AddOp>(gate(xw, 2), recurrent)));
        Value keep = n.make<MulOp>(z, h);
        Value fresh = n.make<MulOp>(n.make<SubOp>(n.scalarLike(z, 1.0), z), cand);
        h = n.make<AddOp>(fresh, keep);
      } else {
        Value pre = n.make<AddOp>(xw, n.make<MatMulOp>(h, r));
        if (rb && !rbInProjection)
          pre = n.make<AddOp>(pre, rb);
        if (cell == Cell::RNN) {
          h = activate(act(0), clipped(pre));
        } else {
          // Gates i, o, f, c with optional peepholes P = [Pi, Po, Pf].
          Value gi = gate(pre, 0), go = gate(pre, 1), gf = gate(pre, 2), gc = gate(pre, 3);
          if (p) {
            gi = n.make<AddOp>(gi, n.make<MulOp>(slice(p, 0, 0, hidden), c));
            gf = n.make<AddOp>(gf, n.make<MulOp>(slice(p, 0, 2 * hidden, 3 * hidden), c));
          }
          Value i = activate(act(0), clipped(gi));
          Value f = activate(act(0), clipped(gf));
          Value cand = activate(act(1), clipped(gc));
          c = n.make<AddOp>(n.make<MulOp>(f, c), n.make<MulOp>(i, cand));
          if (p)
            go = n.make<AddOp>(go, n.make<MulOp>(slice(p, 0, hidden, 2 * hidden), c));
          Value o = activate(act(0), clipped(go));
          h = n.make<MulOp>(o, activate(act(2), c));
        }
      }
      if (!lengths)
        return h;
      // Past its length a batch entry keeps its state and outputs zeros;
      // a reversed pass therefore starts at the entry's own last step.
      Value live = n.make<LessOp>(tIndex, lengths); // [batch, 1]
      Value fresh = h;
      h = n.make<SelectOp>(live, fresh, hPrev);
      if (c)
        c = n.make<SelectOp>(live, c, cPrev);
      return n.make<SelectOp>(live, fresh, n.scalarLike(fresh, 0));
    };

    SmallVector<Value> outs;
    if (seq == 0 && !n.loopRecurrences) {
      (void)n.error("a sequence of no steps needs the loop form, which the GPU path does not "
                    "take yet");
      return;
    }
    if ((seq > 0 && seq < kLoopFromSteps) || !n.loopRecurrences) {
      outs.resize(seq);
      for (int64_t s = 0; s < seq; ++s) {
        int64_t t = reverse ? seq - 1 - s : s;
        Value xw = n.make<MatMulOp>(take(x, t), w); // [batch, G*H]
        if (wb)
          xw = n.make<AddOp>(xw, wb);
        outs[t] = step(xw, n.i64Tensor({t}));
      }
    } else {
      // LSTM and RNN add both biases to the same sum: the recurrent one
      // joins the input projection's, before the loop, not once per step.
      if (cell != Cell::GRU && rb) {
        wb = wb ? n.make<AddOp>(wb, rb) : rb;
        rbInProjection = true;
      }
      y = loopOverSteps(x, w, wb, reverse, h, c, step);
      if (!y)
        return;
    }
    if (lengths) { // an empty entry's final states are zeros, not the initial ones
      Value started = n.make<GreaterOp>(lengths, n.i64Tensor({0}));
      h = n.make<SelectOp>(started, h, n.scalarLike(h, 0));
      if (c)
        c = n.make<SelectOp>(started, c, n.scalarLike(c, 0));
    }
    if (!outs.empty()) {
      SmallVector<Value> expanded;
      for (Value o : outs) // [batch, H] -> [1, 1, batch, H]
        expanded.push_back(n.make<UnsqueezeOp>(o, n.b.getDenseI64ArrayAttr({0, 1})));
      y = n.make<ConcatOp>(expanded, n.b.getI64IntegerAttr(0));
    }
    hFinal = h;
    cFinal = c;
  }

  LogicalResult run(Outs &out) {
    Value x = n.required(0);
    if (!x || !n.required(1) || !n.required(2))
      return failure();
    batchFirst = n.getInt("layout", 0) != 0;
    if (batchFirst)
      x = n.make<TransposeOp>(x, n.b.getDenseI64ArrayAttr({1, 0, 2}));
    auto xt = NodeImporter::rankedType(x);
    if (!xt || xt.getRank() != 3 || !xt.hasStaticShape())
      return n.error("the recurrent input must be 3-D with a static shape");
    seq = xt.getDimSize(0);
    batch = xt.getDimSize(1);
    hidden = n.getInt("hidden_size", 0);
    gates = cell == Cell::LSTM ? 4 : cell == Cell::GRU ? 3 : 1;
    std::string direction = n.getString("direction", "forward");
    dirs = direction == "bidirectional" ? 2 : 1;
    if (hidden <= 0)
      return n.error("hidden_size must be given and positive");
    if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
      return n.error("unknown direction '" + direction + "'");
    if (n.hasInput(4)) {
      // Lengths known to be the full sequence need no masking; others
      // (run-time ones included) mask each step.
      auto lens = n.constInts(4);
      if (lens && llvm::any_of(*lens, [&](int64_t l) { return l < 0 || l > seq; }))
        return n.error("sequence_lens must be between 0 and the sequence length " + Twine(seq));
      auto lt = NodeImporter::rankedType(n.input(4));
      if (!lt || lt.getRank() != 1 || (!lt.isDynamicDim(0) && lt.getDimSize(0) != batch))
        return n.error("sequence_lens must be a vector of the batch size " + Twine(batch));
      if (!lens || llvm::any_of(*lens, [&](int64_t l) { return l != seq; }))
        lengths = n.make<ReshapeOp>(n.make<CastOp>(n.input(4), TypeAttr::get(n.b.getI64Type())),
                                    n.i64Tensor({batch, 1}), n.b.getBoolAttr(false));
    }
    if (const auto *a = n.attr("clip"))
      clip = a->f();
    std::vector<std::string> defaults =
        cell == Cell::LSTM ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}
        : cell == Cell::GRU ? std::vector<std::string>{"Sigmoid", "Tanh"}
                            : std::vector<std::string>{"Tanh"};
    if (const auto *a = n.attr("activations")) {
      for (const auto &s : a->strings())
        activations.push_back(s);
      if (activations.size() != defaults.size() * dirs)
        return n.error("activations must name " + Twine(defaults.size() * dirs) + " functions");
    } else {
      for (int64_t d = 0; d < dirs; ++d)
        activations.insert(activations.end(), defaults.begin(), defaults.end());
    }

    SmallVector<Value> perDirY, perDirH, perDirC;
    for (int64_t d = 0; d < dirs; ++d) {
      Value y, hFinal, cFinal;
      runDirection(x, d, direction == "reverse" || d == 1, y, hFinal, cFinal);
      if (n.failed())
        return failure();
      perDirY.push_back(y);
      perDirH.push_back(n.make<UnsqueezeOp>(hFinal, n.b.getDenseI64ArrayAttr({0})));
      if (cFinal)
        perDirC.push_back(n.make<UnsqueezeOp>(cFinal, n.b.getDenseI64ArrayAttr({0})));
    }
    Value y = n.make<ConcatOp>(perDirY, n.b.getI64IntegerAttr(1)); // [seq, dirs, batch, H]
    Value yh = n.make<ConcatOp>(perDirH, n.b.getI64IntegerAttr(0)); // [dirs, batch, H]
    Value yc = perDirC.empty() ? Value() : n.make<ConcatOp>(perDirC, n.b.getI64IntegerAttr(0));
    if (batchFirst) {
      y = n.make<TransposeOp>(y, n.b.getDenseI64ArrayAttr({2, 0, 1, 3}));
      yh = n.make<TransposeOp>(yh, n.b.getDenseI64ArrayAttr({1, 0, 2}));
      if (yc)
        yc = n.make<TransposeOp>(yc, n.b.getDenseI64ArrayAttr({1, 0, 2}));
    }
    out.push_back(y);
    out.push_back(yh);
    if (yc)
      out.push_back(yc);
    return success();
  }
};

LogicalResult rnn(NodeImporter &n, Outs &out) { return Recurrence{n, Cell::RNN}.run(out); }
LogicalResult gru(NodeImporter &n, Outs &out) { return Recurrence{n, Cell::GRU}.run(out); }
LogicalResult lstm(NodeImporter &n, Outs &out) { return Recurrence{n, Cell::LSTM}.run(out); }

} // namespace

void addRecurrentRules(std::vector<ImportRule> &r) {
  constexpr int64_t M = kMaxSupportedOpset;
  r.insert(r.end(), {
      // Opsets 1-6 differ only in attributes that did not change the result
      // (output_sequence; GRU's linear_before_reset arrived at 3, default 0).
      {"RNN", 1, M, rnn},
      {"GRU", 1, M, gru},
      {"LSTM", 1, M, lstm},
  });
}

} // namespace kiln
