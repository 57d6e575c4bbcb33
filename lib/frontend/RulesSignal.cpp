// Signal processing: DFT, STFT, the window functions and MelWeightMatrix
// (opset 17).
//
// A DFT of length N is two matrix products with constant N x K cosine and
// sine tables: for the sizes these ops see in audio front ends (N up to a
// few thousand) a dense product on the GEMM kernel beats a radix-2 FFT
// written in loops, and it handles every N, not just powers of two.
// Windows and mel filter banks depend only on scalar inputs, so they become
// constants (their sizes decide output shapes; a graph input is specialised
// on its value).
#include "NodeImporter.h"

#include <algorithm>
#include <cmath>

using namespace mlir;

namespace kiln {
namespace {

using Outs = SmallVectorImpl<Value>;

/// Longest DFT: two N x N tables of 4-byte floats take 512 MiB at 8192.
constexpr int64_t kMaxDftLength = 8192;

/// Input i as a constant integer scalar.
std::optional<int64_t> constScalarInt(NodeImporter &n, size_t i) {
  auto v = n.constInts(i);
  if (!v || v->size() != 1)
    return std::nullopt;
  return (*v)[0];
}

std::optional<double> constScalarFloat(NodeImporter &n, size_t i) {
  if (auto v = n.constFloats(i); v && v->size() == 1)
    return (*v)[0];
  if (auto v = constScalarInt(n, i))
    return (double)*v;
  return std::nullopt;
}

/// A float constant of `shape` and ONNX data type `dataType` (float types only).
Value floatConstant(NodeImporter &n, ArrayRef<int64_t> shape, ArrayRef<double> values,
                    int64_t dataType) {
  Type elt = onnxElementType(n.b.getContext(), (int32_t)dataType);
  auto ft = dyn_cast_if_present<FloatType>(elt);
  if (!ft) {
    (void)n.error("output_datatype " + Twine(dataType) + " is not a floating-point type");
    return {};
  }
  return n.floatTable(shape, ft, values);
}

Value sliceLast(NodeImporter &n, Value x, int64_t rank, int64_t begin, int64_t end) {
  return n.make<SliceOp>(x, n.i64Tensor({begin}), n.i64Tensor({end}), n.i64Tensor({rank - 1}),
                         n.i64Tensor({1}));
}

/// Real and imaginary parts (null for a real signal) of x [..., 1 | 2].
FailureOr<std::pair<Value, Value>> splitComplex(NodeImporter &n, Value x) {
  auto t = NodeImporter::rankedType(x);
  if (!t || t.getRank() < 2 || t.isDynamicDim(t.getRank() - 1) || t.getDimSize(t.getRank() - 1) > 2)
    return n.error("the signal needs a last dimension of 1 (real) or 2 (complex)");
  int64_t r = t.getRank();
  auto last = n.b.getDenseI64ArrayAttr({r - 1});
  Value re = n.make<SqueezeOp>(sliceLast(n, x, r, 0, 1), last);
  Value im = t.getDimSize(r - 1) == 2 ? n.make<SqueezeOp>(sliceLast(n, x, r, 1, 2), last) : Value();
  return std::pair{re, im};
}

/// The DFT over the last axis (length N) of re + i im, giving K bins
/// (K = N, or N/2 + 1 one-sided), stacked as [..., K, 2].
Value dftLastAxis(NodeImporter &n, Value re, Value im, int64_t N, int64_t K, bool inverse) {
  Type elt = NodeImporter::elementType(re);
  SmallVector<double> cosT(N * K), sinT(N * K);
  for (int64_t i = 0; i < N; ++i)
    for (int64_t k = 0; k < K; ++k) {
      // (i * k) mod N keeps the angle small, so large tables stay exact.
      double theta = 2.0 * M_PI * (double)((i * k) % N) / (double)N;
      double scale = inverse ? 1.0 / N : 1.0;
      cosT[i * K + k] = std::cos(theta) * scale;
      sinT[i * K + k] = std::sin(theta) * scale * (inverse ? -1.0 : 1.0);
    }
  auto ft = cast<FloatType>(elt);
  Value C = n.floatTable({N, K}, ft, cosT), S = n.floatTable({N, K}, ft, sinT);
  // Forward: e^{-i theta}; re' = re C + im S, im' = im C - re S. The inverse
  // table holds -sin/N, which gives e^{+i theta}/N with the same formula.
  Value outRe = n.make<MatMulOp>(re, C);
  Value outIm = n.make<NegOp>(n.make<MatMulOp>(re, S));
  if (im) {
    outRe = n.make<AddOp>(outRe, n.make<MatMulOp>(im, S));
    outIm = n.make<AddOp>(outIm, n.make<MatMulOp>(im, C));
  }
  auto rt = NodeImporter::rankedType(outRe);
  if (!rt)
    return {};
  auto newLast = n.b.getDenseI64ArrayAttr({rt.getRank()});
  return n.make<ConcatOp>(ValueRange{n.make<UnsqueezeOp>(outRe, newLast),
                                     n.make<UnsqueezeOp>(outIm, newLast)},
                          n.b.getI64IntegerAttr(rt.getRank()));
}

/// Zero-pads or truncates the last axis of v (rank `rank`) to `length`.
Value fitLength(NodeImporter &n, Value v, int64_t rank, int64_t have, int64_t length) {
  if (!v || have == length)
    return v;
  if (length < have)
    return sliceLast(n, v, rank, 0, length);
  SmallVector<int64_t> pads(2 * rank, 0);
  pads[2 * rank - 1] = length - have;
  return n.make<PadOp>(v, n.i64Tensor(pads), n.scalarLike(v, 0), n.b.getStringAttr("constant"));
}

LogicalResult dft(NodeImporter &n, Outs &out) {
  Value x = n.required(0);
  auto t = NodeImporter::rankedType(x);
  if (!t || !t.hasStaticShape())
    return n.error("DFT needs an input of static shape");
  int64_t rank = t.getRank();
  int64_t axis = n.getInt("axis", 1);
  if (axis < 0)
    axis += rank;
  if (axis < 0 || axis >= rank - 1)
    return n.error("DFT axis " + Twine(n.getInt("axis", 1)) + " is not a signal axis of rank " +
                   Twine(rank));
  bool inverse = n.getInt("inverse", 0), onesided = n.getInt("onesided", 0);
  auto parts = splitComplex(n, x);
  if (failed(parts))
    return failure();
  auto [re, im] = *parts;
  if (onesided && im)
    return n.error("a one-sided DFT needs a real input");
  int64_t have = t.getDimSize(axis), N = have;
  if (n.hasInput(1)) {
    auto len = constScalarInt(n, 1);
    if (!len)
      return n.error("DFT's dft_length must be a constant");
    if (*len < 1)
      return n.error("DFT's dft_length " + Twine(*len) + " is not positive");
    N = *len;
  }
  if (N > kMaxDftLength)
    return n.error("DFT length " + Twine(N) + " is over Kiln's limit of " + Twine(kMaxDftLength) +
                   " (its cosine/sine tables grow as the square of the length)");
  int64_t sigRank = rank - 1;
  re = n.moveAxis(re, sigRank, axis, sigRank - 1);
  im = im ? n.moveAxis(im, sigRank, axis, sigRank - 1) : Value();
  re = fitLength(n, re, sigRank, have, N);
  im = fitLength(n, im, sigRank, have, N);
  if (n.failed())
    return failure();
  Value y = dftLastAxis(n, re, im, N, onesided ? N / 2 + 1 : N, inverse);
  out.push_back(n.moveAxis(y, rank, sigRank - 1, axis));
  return failure(n.failed());
}

LogicalResult stft(NodeImporter &n, Outs &out) {
  Value signal = n.required(0);
  auto t = NodeImporter::rankedType(signal);
  if (!t || !t.hasStaticShape() || t.getRank() != 3)
    return n.error("STFT needs a signal [batch, length, 1 | 2] of static shape");
  auto step = constScalarInt(n, 1);
  if (!step || *step < 1)
    return n.error("STFT's frame_step must be a constant positive scalar");
  Value window = n.input(2);
  int64_t frameLength = -1;
  if (n.hasInput(3)) {
    auto len = constScalarInt(n, 3);
    if (!len || *len < 1)
      return n.error("STFT's frame_length must be a constant positive scalar");
    frameLength = *len;
  }
  if (window) {
    auto wt = NodeImporter::rankedType(window);
    if (!wt || wt.getRank() != 1 || wt.isDynamicDim(0))
      return n.error("STFT's window must be a vector of static length");
    if (frameLength >= 0 && frameLength != wt.getDimSize(0))
      return n.error("STFT's window has " + Twine(wt.getDimSize(0)) +
                     " entries but frame_length is " + Twine(frameLength));
    frameLength = wt.getDimSize(0);
  }
  if (frameLength < 0)
    return n.error("STFT needs a window or a frame_length");
  int64_t length = t.getDimSize(1);
  if (frameLength > length)
    return n.error("STFT's frame length " + Twine(frameLength) + " exceeds the signal length " +
                   Twine(length));
  if (frameLength > kMaxDftLength)
    return n.error("STFT frame length " + Twine(frameLength) + " is over Kiln's limit of " +
                   Twine(kMaxDftLength));
  int64_t frames = (length - frameLength) / *step + 1;
  if (frames * frameLength > (int64_t(1) << 26))
    return n.error("STFT with " + Twine(frames) + " frames of " + Twine(frameLength) +
                   " samples is over Kiln's limit of 2^26 framed samples");
  bool onesided = n.getInt("onesided", 1);
  auto parts = splitComplex(n, signal);
  if (failed(parts))
    return failure();
  auto [re, im] = *parts;
  if (onesided && im)
    return n.error("a one-sided STFT needs a real signal");
  // Frames gathered with one constant index table [frames, frame_length].
  SmallVector<int64_t> idx;
  for (int64_t f = 0; f < frames; ++f)
    for (int64_t i = 0; i < frameLength; ++i)
      idx.push_back(f * *step + i);
  Value indices = n.constant(DenseIntElementsAttr::get(
      RankedTensorType::get({frames, frameLength}, n.b.getI64Type()), ArrayRef<int64_t>(idx)));
  auto frame = [&](Value v) -> Value {
    if (!v)
      return v;
    Value f = n.make<GatherOp>(v, indices, n.b.getI64IntegerAttr(1));
    return window ? n.make<MulOp>(f, window) : f;
  };
  re = frame(re);
  im = frame(im);
  if (n.failed())
    return failure();
  out.push_back(dftLastAxis(n, re, im, frameLength, onesided ? frameLength / 2 + 1 : frameLength,
                            /*inverse=*/false));
  return failure(n.failed());
}

/// Generalised cosine windows: sum_j a_j cos(2 pi j k / d), d = N (periodic)
/// or N - 1 (symmetric).
LogicalResult cosineWindow(NodeImporter &n, Outs &out, ArrayRef<double> coefficients) {
  auto size = constScalarInt(n, 0);
  if (!size)
    return n.error("the window size must be a constant");
  if (*size < 0 || *size > (int64_t(1) << 24))
    return n.error("window size " + Twine(*size) + " is out of range");
  int64_t N = *size;
  double d = n.getInt("periodic", 1) ? (double)N : (double)(N - 1);
  SmallVector<double> w(N);
  for (int64_t k = 0; k < N; ++k) {
    double v = 0;
    for (size_t j = 0; j < coefficients.size(); ++j)
      v += coefficients[j] * (d > 0 ? std::cos(2.0 * M_PI * j * k / d) : 1.0);
    w[k] = v;
  }
  Value y = floatConstant(n, {N}, w, n.getInt("output_datatype", 1));
  if (!y)
    return failure();
  out.push_back(y);
  return success();
}

LogicalResult hann(NodeImporter &n, Outs &out) { return cosineWindow(n, out, {0.5, -0.5}); }
LogicalResult hamming(NodeImporter &n, Outs &out) {
  return cosineWindow(n, out, {25.0 / 46.0, -(1.0 - 25.0 / 46.0)});
}
LogicalResult blackman(NodeImporter &n, Outs &out) {
  return cosineWindow(n, out, {0.42, -0.5, 0.08});
}

/// Triangular filters evenly spaced on the mel scale, [dft_length/2 + 1,
/// num_mel_bins], as the ONNX specification computes them (bins rounded
/// down to whole spectrogram bins).
LogicalResult melWeightMatrix(NodeImporter &n, Outs &out) {
  auto bins = constScalarInt(n, 0), dftLength = constScalarInt(n, 1),
       sampleRate = constScalarInt(n, 2);
  auto lower = constScalarFloat(n, 3), upper = constScalarFloat(n, 4);
  if (!bins || !dftLength || !sampleRate || !lower || !upper)
    return n.error("MelWeightMatrix's inputs must be a constant");
  if (*bins < 1 || *dftLength < 1 || *sampleRate < 1 || *bins > 65536 || *dftLength > (1 << 24))
    return n.error("MelWeightMatrix's sizes are out of range");
  if (!std::isfinite(*lower) || !std::isfinite(*upper) || *lower < 0 || *upper < *lower)
    return n.error("MelWeightMatrix needs 0 <= lower_edge_hertz <= upper_edge_hertz, both finite");
  int64_t specBins = *dftLength / 2 + 1;
  auto toMel = [](double hz) { return 2595.0 * std::log10(1.0 + hz / 700.0); };
  double lowMel = toMel(*lower), highMel = toMel(*upper);
  double step = (highMel - lowMel) / (double)(*bins + 2);
  SmallVector<int64_t> edges;
  for (int64_t i = 0; i < *bins + 2; ++i) {
    double hz = 700.0 * (std::pow(10.0, (i * step + lowMel) / 2595.0) - 1.0);
    double edge = std::floor((double)(*dftLength + 1) * hz / (double)*sampleRate);
    // Edges past the spectrum only write nothing; clamping bounds the loops.
    edges.push_back((int64_t)std::clamp(edge, -1.0, (double)specBins + 1));
  }
  SmallVector<double> w(specBins * *bins, 0.0);
  auto at = [&](int64_t j, int64_t i) -> double * {
    return j >= 0 && j < specBins ? &w[j * *bins + i] : nullptr;
  };
  for (int64_t i = 0; i < *bins; ++i) {
    int64_t lo = edges[i], center = edges[i + 1], hi = edges[i + 2];
    if (center == lo) {
      if (double *p = at(center, i))
        *p = 1.0;
    } else {
      for (int64_t j = lo; j <= center; ++j)
        if (double *p = at(j, i))
          *p = (double)(j - lo) / (double)(center - lo);
    }
    for (int64_t j = center; hi > center && j < hi; ++j)
      if (double *p = at(j, i))
        *p = (double)(hi - j) / (double)(hi - center);
  }
  Value y = floatConstant(n, {specBins, *bins}, w, n.getInt("output_datatype", 1));
  if (!y)
    return failure();
  out.push_back(y);
  return success();
}

} // namespace

void addSignalRules(std::vector<ImportRule> &rules) {
  constexpr int64_t M = kMaxSupportedOpset;
  rules.insert(rules.end(), {
      {"DFT", 17, M, dft},
      {"STFT", 17, M, stft},
      {"HannWindow", 17, M, hann},
      {"HammingWindow", 17, M, hamming},
      {"BlackmanWindow", 17, M, blackman},
      {"MelWeightMatrix", 17, M, melWeightMatrix},
  });
}

} // namespace kiln
