// Convolutions, matrix products and NHWC pooling -> calls to Kiln's
// microkernels (runtime/kernels, ABI in kiln/kernels.h).
//
// Each call is a kiln.call_kernel on tensors, in destination-passing style,
// so one-shot bufferization decides buffers and in-place writes as for any
// other op; its bufferization model takes the addresses (as i64: one
// declaration serves every shape) right at the call. Weights
// are packed here, at compile time, into the kernels' panel layout, and
// each call's shape parameters live in a small constant i64 block that LLVM
// can propagate into the kernel.
#include "kiln/Conversion/KernelCalls.h"
#include "KernelCallSupport.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/IndexingUtils.h"
#include "mlir/IR/Matchers.h"

#include <cstddef>
#include <cstdint>
#include <limits>

using namespace mlir;

namespace kiln::codegen {

constexpr int64_t kPanel = KILN_KERNEL_PANEL;

Value i64Block(OpBuilder &b, Location loc, ArrayRef<int64_t> values) {
  auto t = RankedTensorType::get({(int64_t)values.size()}, b.getI64Type());
  return arith::ConstantOp::create(b, loc, DenseElementsAttr::get(t, values));
}

/// A parameter block some of whose fields are known only at run time:
/// `runtime` maps field positions to index values. Built with
/// tensor.from_elements, so bufferization gives it a buffer of its own.
Value i64Block(OpBuilder &b, Location loc, ArrayRef<int64_t> values,
               ArrayRef<std::pair<unsigned, Value>> runtime) {
  if (runtime.empty())
    return i64Block(b, loc, values);
  SmallVector<Value> elements;
  for (int64_t v : values)
    elements.push_back(arith::ConstantIntOp::create(b, loc, v, 64));
  for (auto [field, v] : runtime)
    elements[field] = arith::IndexCastOp::create(b, loc, b.getI64Type(), v);
  return tensor::FromElementsOp::create(b, loc, elements);
}

Value f32Block(OpBuilder &b, Location loc, ArrayRef<float> values) {
  auto t = RankedTensorType::get({(int64_t)values.size()}, b.getF32Type());
  return arith::ConstantOp::create(b, loc, DenseElementsAttr::get(t, values));
}

Value f32(OpBuilder &b, Location loc, float v) {
  return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
}

/// kiln.call_kernel of `kernel` with `args`; the result's address goes at
/// `outIndex` once bufferized. `rowStrides`: see the op's `row_strides`.
/// `flops` (when known) goes into profiles as `kiln.flops`.
Value callWithResult(OpBuilder &b, Location loc, StringRef kernel, RankedTensorType resultType,
                     ValueRange args, unsigned outIndex, ArrayRef<int64_t> rowStrides,
                     int64_t flops, ValueRange dynamicSizes) {
  Value init = tensor::EmptyOp::create(b, loc, resultType.getShape(), resultType.getElementType(),
                                       dynamicSizes);
  auto call = CallKernelOp::create(
      b, loc, resultType, FlatSymbolRefAttr::get(b.getContext(), kernel), args, init,
      b.getI64IntegerAttr(outIndex),
      rowStrides.empty() ? DenseI64ArrayAttr() : b.getDenseI64ArrayAttr(rowStrides));
  if (flops > 0)
    call->setAttr("kiln.flops", b.getI64IntegerAttr(flops));
  return call;
}

/// A placeholder for a row stride that bufferization fills in.
Value strideSlot(OpBuilder &b, Location loc) {
  return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(0));
}

std::optional<SmallVector<float>> constantFloats(Value v) {
  DenseElementsAttr attr;
  if (!v || !matchPattern(v, m_Constant(&attr)) || !attr.getElementType().isF32())
    return std::nullopt;
  return SmallVector<float>(attr.getValues<float>());
}


/// Strides of `to`, a reshape of a tensor of shape `from` with strides
/// `strides`, when it only splits or merges dimensions that are laid out
/// contiguously with respect to each other (unit dimensions are free).
static std::optional<SmallVector<int64_t>> reshapeStrides(ArrayRef<int64_t> from,
                                                   ArrayRef<int64_t> strides,
                                                   ArrayRef<int64_t> to) {
  SmallVector<int64_t> size, stride;
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i] != 1) {
      size.push_back(from[i]);
      stride.push_back(strides[i]);
    }
  SmallVector<int64_t> out(to.size(), 0);
  size_t src = 0;
  for (size_t d = 0; d < to.size(); ++d) {
    if (to[d] == 1)
      continue;
    if (src == size.size())
      return std::nullopt;
    int64_t want = to[d];
    // Merge source dims until `want` divides what is gathered.
    int64_t have = size[src], innerStride = stride[src];
    while (have % want != 0 && want % have == 0 && src + 1 < size.size() &&
           innerStride == stride[src + 1] * size[src + 1]) {
      ++src;
      have *= size[src];
      innerStride = stride[src];
    }
    if (have % want != 0)
      return std::nullopt;
    out[d] = innerStride * (have / want);
    size[src] = have / want;
    stride[src] = innerStride;
    if (size[src] == 1)
      ++src;
  }
  return out;
}

/// The strides of `to`, a reshape of `from` (whose view has `strides`),
/// where some dims are known only at run time: each such dim must be one
/// of `from`'s, the same at run time (an expression of the same symbols),
/// with a static stride; the static dims between them reshape as in
/// reshapeStrides.
static std::optional<SmallVector<int64_t>>
dynamicReshapeStrides(Value from, ArrayRef<int64_t> strides, Value to) {
  auto ft = cast<RankedTensorType>(from.getType()), tt = cast<RankedTensorType>(to.getType());
  SmallVector<int64_t> out(tt.getRank(), 0);
  int64_t i = 0, j = 0;
  while (true) {
    // The static runs up to the next dynamic dim on each side.
    SmallVector<int64_t> fShape, fStrides, tShape, tIndex;
    for (; i < ft.getRank() && !ft.isDynamicDim(i); ++i) {
      fShape.push_back(ft.getDimSize(i));
      fStrides.push_back(strides[i]);
    }
    for (; j < tt.getRank() && !tt.isDynamicDim(j); ++j) {
      tShape.push_back(tt.getDimSize(j));
      tIndex.push_back(j);
    }
    // The runs must hold the same elements (reshapeStrides assumes it of
    // whole shapes).
    auto product = [](ArrayRef<int64_t> v) {
      int64_t p = 1;
      for (int64_t d : v)
        p *= d;
      return p;
    };
    if (product(fShape) != product(tShape))
      return std::nullopt;
    auto run = reshapeStrides(fShape, fStrides, tShape);
    if (!run)
      return std::nullopt;
    for (size_t k = 0; k < tIndex.size(); ++k)
      out[tIndex[k]] = (*run)[k];
    if (i == ft.getRank() || j == tt.getRank())
      return i == ft.getRank() && j == tt.getRank() ? std::optional(out) : std::nullopt;
    if (!sameDim(from, i, to, j) || ShapedType::isDynamic(strides[i]))
      return std::nullopt;
    out[j++] = strides[i++];
  }
}

/// Follows transposes, reshapes and unit-step slices back to the tensor
/// they read, so that a kernel can read that tensor in place instead of a
/// copy (attention's Q, K and V are slices of one projection, reshaped to
/// heads and transposed). With dims known only at run time, as long as
/// every stride it needs stays static (a dim left of a dynamic one has a
/// dynamic stride, which only a dim of size 1 may have).
StridedView stridedViewOf(Value v) {
  auto t = cast<RankedTensorType>(v.getType());
  SmallVector<int64_t> strides(t.getRank());
  int64_t stride = 1;
  for (int64_t d = t.getRank() - 1; d >= 0; --d) {
    strides[d] = stride;
    if (!ShapedType::isDynamic(stride))
      stride = t.isDynamicDim(d) ? ShapedType::kDynamic : stride * t.getDimSize(d);
  }
  StridedView self{v, 0, strides};
  if (auto tr = v.getDefiningOp<TransposeOp>()) {
    StridedView in = stridedViewOf(tr.getInput());
    StridedView out{in.base, in.offset, {}};
    for (int64_t p : tr.getPerm())
      out.strides.push_back(in.strides[p]);
    return out;
  }
  if (auto r = v.getDefiningOp<ReshapeOp>()) {
    StridedView in = stridedViewOf(r.getInput());
    if (auto s = dynamicReshapeStrides(r.getInput(), in.strides, r.getResult()))
      return {in.base, in.offset, *s};
    return self;
  }
  if (auto sl = v.getDefiningOp<SliceOp>()) {
    auto inT = cast<RankedTensorType>(sl.getInput().getType());
    auto starts = getConstantInts(sl.getStarts()), ends = getConstantInts(sl.getEnds()),
         axes = getConstantInts(sl.getAxes()), steps = getConstantInts(sl.getSteps());
    if (!starts || !ends || !axes || !steps)
      return self;
    StridedView in = stridedViewOf(sl.getInput());
    StridedView out = in;
    for (size_t i = 0; i < axes->size(); ++i) {
      int64_t a = (*axes)[i] < 0 ? (*axes)[i] + inT.getRank() : (*axes)[i];
      if (inT.isDynamicDim(a) || ShapedType::isDynamic(in.strides[a]))
        return self;
      auto bounds = computeSliceBounds(inT.getDimSize(a), (*starts)[i], (*ends)[i], (*steps)[i]);
      if (!bounds || bounds->step != 1)
        return self;
      out.offset += bounds->start * in.strides[a];
    }
    return out;
  }
  return self;
}

/// The batched-matrix view [batch, rows, cols] of `v` as (base, offset,
/// batch stride, row stride, column stride): all batch dims must fold into
/// one stride (or be a single batch).
std::optional<MatrixView> matrixViewOf(Value v) {
  auto t = cast<RankedTensorType>(v.getType());
  StridedView sv = stridedViewOf(v);
  int64_t rank = t.getRank();
  if (sv.base == v || rank < 2)
    return std::nullopt;
  int64_t batchStride = 0;
  // Batch dims [0, rank - 2): one stride that walks them in order.
  int64_t expected = -1;
  for (int64_t d = rank - 3; d >= 0; --d) {
    if (t.getDimSize(d) == 1)
      continue;
    if (expected >= 0 && sv.strides[d] != expected)
      return std::nullopt;
    if (expected < 0)
      batchStride = sv.strides[d];
    expected = sv.strides[d] * t.getDimSize(d);
  }
  return MatrixView{sv.base, sv.offset, batchStride, sv.strides[rank - 2], sv.strides[rank - 1]};
}

/// `v` as `batch` matrices: a strided view of another tensor (see
/// stridedViewOf) or itself, row-major. Every batch must be distinct (no
/// broadcast).
std::optional<MatrixView> batchedMatrix(Value v, int64_t batch) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  if (!t || !t.hasStaticShape() || !t.getElementType().isF32() || t.getRank() < 2)
    return std::nullopt;
  int64_t rows = t.getDimSize(t.getRank() - 2), cols = t.getDimSize(t.getRank() - 1);
  if (rows * cols == 0 || t.getNumElements() / (rows * cols) != batch)
    return std::nullopt;
  if (auto view = matrixViewOf(v))
    return view;
  return MatrixView{v, 0, rows * cols, cols, 1};
}
/// matrixViewOf for dims known only at run time: the batch dims static,
/// every stride used static.
std::optional<MatrixView> dynamicMatrixView(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  if (!t || t.getRank() < 2 || !t.getElementType().isF32())
    return std::nullopt;
  StridedView sv = stridedViewOf(v);
  int64_t rank = t.getRank(), batchStride = 0, expected = -1;
  for (int64_t d = rank - 3; d >= 0; --d) {
    if (t.isDynamicDim(d))
      return std::nullopt;
    if (t.getDimSize(d) == 1)
      continue;
    if (ShapedType::isDynamic(sv.strides[d]) || (expected >= 0 && sv.strides[d] != expected))
      return std::nullopt;
    if (expected < 0)
      batchStride = sv.strides[d];
    expected = sv.strides[d] * t.getDimSize(d);
  }
  if (ShapedType::isDynamic(sv.strides[rank - 2]) || ShapedType::isDynamic(sv.strides[rank - 1]))
    return std::nullopt;
  return MatrixView{sv.base, sv.offset, batchStride, sv.strides[rank - 2], sv.strides[rank - 1]};
}

namespace {


struct ConvShape {
  int64_t n, h, w, c, oh, ow, oc, kh, kw, groups;
};

/// Weights [O][I/g][KH][KW] -> [g][panel][KH][KW][I/g][kPanel] and bias ->
/// [g][panel][kPanel], zero padded: the layout of kiln_conv2d_nhwc_f32.
void packConv(const ConvShape &s, ArrayRef<float> w, ArrayRef<float> bias,
              std::vector<float> &packedW, std::vector<float> &packedB) {
  int64_t cg = s.c / s.groups, fg = s.oc / s.groups, panels = (fg + kPanel - 1) / kPanel;
  packedW.assign(s.groups * panels * s.kh * s.kw * cg * kPanel, 0.0f);
  packedB.assign(s.groups * panels * kPanel, 0.0f);
  for (int64_t g = 0; g < s.groups; ++g)
    for (int64_t f = 0; f < fg; ++f) {
      int64_t o = g * fg + f, p = f / kPanel, lane = f % kPanel;
      if (!bias.empty())
        packedB[(g * panels + p) * kPanel + lane] = bias[o];
      for (int64_t y = 0; y < s.kh; ++y)
        for (int64_t x = 0; x < s.kw; ++x)
          for (int64_t i = 0; i < cg; ++i)
            packedW[((((g * panels + p) * s.kh + y) * s.kw + x) * cg + i) * kPanel + lane] =
                w[((o * cg + i) * s.kh + y) * s.kw + x];
    }
}

/// Depthwise weights [C][1][KH][KW] -> [KH][KW][C rounded up to kPanel].
void packDepthwise(const ConvShape &s, ArrayRef<float> w, ArrayRef<float> bias,
                   std::vector<float> &packedW, std::vector<float> &packedB) {
  int64_t cpad = (s.c + kPanel - 1) / kPanel * kPanel;
  packedW.assign(s.kh * s.kw * cpad, 0.0f);
  packedB.assign(cpad, 0.0f);
  for (int64_t c = 0; c < s.c; ++c) {
    if (!bias.empty())
      packedB[c] = bias[c];
    for (int64_t y = 0; y < s.kh; ++y)
      for (int64_t x = 0; x < s.kw; ++x)
        packedW[(y * s.kw + x) * cpad + c] = w[(c * s.kh + y) * s.kw + x];
  }
}

/// Sizes of a convolution known only at run time, each replacing its field
/// of the static ConvShape (null: the static one holds).
struct ConvRuntimeDims {
  Value n, h, w, oh, ow;
  explicit operator bool() const { return n || h || w || oh || ow; }
};

/// A convolution layer's name (kKernelLayerAttr) and its tuned schedule
/// (kKernelChoicesAttr; 0: the kernel's heuristic).
std::pair<StringAttr, int64_t> tunedConvSchedule(OpBuilder &b,
                                                 const kiln_conv2d_params &params) {
  std::string name = kConvLayerPrefix;
  llvm::raw_string_ostream os(name);
  llvm::interleave(fields(params), os, ",");
  StringAttr key = b.getStringAttr(name);
  auto module = b.getInsertionBlock()->getParentOp()->getParentOfType<ModuleOp>();
  auto choices = module ? module->getAttrOfType<DictionaryAttr>(kKernelChoicesAttr)
                        : DictionaryAttr();
  auto choice = choices ? choices.getAs<IntegerAttr>(key) : IntegerAttr();
  return {key, choice ? choice.getInt() & KILN_CONV_SCHEDULE_BITS : 0};
}

/// Emits a convolution kernel call; shared by conv2d_nhwc and by matrix
/// products with a constant right operand (1x1 convolutions over rows).
/// `runtime` (with `dynamicSizes`, the result's): dims known only at run
/// time, such as the rows of a product (w and ow) or a batch and image size.
Value emitConv(OpBuilder &b, Location loc, const ConvShape &s, ArrayRef<int64_t> strides,
               ArrayRef<int64_t> pads, ArrayRef<int64_t> dilations, ArrayRef<float> weight,
               ArrayRef<float> bias, Value input, Value residual, float lo, float hi,
               RankedTensorType resultType, bool gelu = false, ConvRuntimeDims runtimeDims = {},
               ValueRange dynamicSizes = {}) {
  bool depthwise = s.groups == s.c && s.groups == s.oc && s.groups > 1;
  std::vector<float> packedW, packedB;
  if (depthwise)
    packDepthwise(s, weight, bias, packedW, packedB);
  else
    packConv(s, weight, bias, packedW, packedB);
  kiln_conv2d_params params{s.n,          s.h,          s.w,         s.c,
                            s.oh,         s.ow,         s.oc,        s.kh,
                            s.kw,         strides[0],   strides[1],  pads[0],
                            pads[1],      dilations[0], dilations[1], s.groups,
                            (residual ? KILN_CONV_HAS_RESIDUAL : 0) | (gelu ? KILN_CONV_GELU : 0)};
  // Layers compiled once for every shape keep the heuristic: a schedule
  // tuned at one shape says little about the others.
  StringAttr layer;
  if (!depthwise && !runtimeDims) {
    auto [name, schedule] = tunedConvSchedule(b, params);
    layer = name;
    params.flags |= schedule;
  }
  Value zero = arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(0));
  SmallVector<std::pair<unsigned, Value>> runtime;
  for (auto [field, v] : {std::pair{offsetof(kiln_conv2d_params, n), runtimeDims.n},
                          {offsetof(kiln_conv2d_params, h), runtimeDims.h},
                          {offsetof(kiln_conv2d_params, w), runtimeDims.w},
                          {offsetof(kiln_conv2d_params, oh), runtimeDims.oh},
                          {offsetof(kiln_conv2d_params, ow), runtimeDims.ow}})
    if (v)
      runtime.push_back({(unsigned)(field / 8), v});
  SmallVector<Value> args{i64Block(b, loc, fields(params), runtime), input,
                          f32Block(b, loc, packedW),  f32Block(b, loc, packedB),
                          residual ? residual : zero, f32(b, loc, lo),
                          f32(b, loc, hi),            strideSlot(b, loc),
                          strideSlot(b, loc)};
  // Input and output may be channel slices of concatenations (args 7, 8).
  int64_t flops = 2 * s.n * s.oh * s.ow * s.oc * s.kh * s.kw * (s.c / s.groups);
  Value result = callWithResult(b, loc, depthwise ? kDwConv : kConv, resultType, args, 5,
                                {1, 7, -1, 8}, runtimeDims ? 0 : flops, dynamicSizes);
  if (layer)
    result.getDefiningOp()->setAttr(kKernelLayerAttr, layer);
  return result;
}

/// An integer convolution's i32 bias per output channel (zeros without one).
SmallVector<int64_t> integerBias(DenseElementsAttr bAttr, int64_t oc) {
  SmallVector<int64_t> bias(oc, 0);
  if (!bAttr)
    return bias;
  if (bAttr.isSplat())
    return SmallVector<int64_t>(oc, bAttr.getSplatValue<APInt>().getSExtValue());
  int64_t i = 0;
  for (const APInt &v : bAttr.getValues<APInt>())
    bias[i++] = v.getSExtValue();
  return bias;
}

/// The requantization of an integer convolution with requant_type, as the
/// kernels read it (kiln_requant_params, then the scales padded to `cpad`),
/// and KILN_QCONV_REQUANT; an unused address and 0 without one.
std::pair<Value, int64_t> requantBlock(Conv2DNhwcOp op, int64_t oc, int64_t cpad, OpBuilder &b) {
  Location loc = op.getLoc();
  if (!op.getRequantType())
    return {arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(0)), 0};
  ArrayRef<float> scale = *op.getRequantScale();
  std::vector<float> block(4 + cpad, 0.0f);
  block[0] = op.getRequantZeroPoint()->convertToFloat();
  block[1] = op.getClampMin().convertToFloat();
  block[2] = op.getClampMax().convertToFloat();
  static_assert(sizeof(kiln_requant_params) == 4 * sizeof(float), "the header's size");
  for (int64_t o = 0; o < oc; ++o)
    block[4 + o] = scale.size() == 1 ? scale[0] : scale[o];
  return {f32Block(b, loc, block), KILN_QCONV_REQUANT};
}

/// The depthwise integer convolution (groups == channels == outputs) ->
/// kiln_qdwconv2d_nhwc_u8s8: weights as floats [KH][KW][C rounded up], the
/// bias less the zero point times each channel's weight sum (padding reads
/// the zero point). The kernel sums in f32, exact while every sum stays
/// below 2^24: at most 512 taps (the importer keeps larger windows off
/// this form).
LogicalResult lowerIntegerDepthwise(Conv2DNhwcOp op, ArrayRef<int64_t> sizes, Value batch,
                                    DenseElementsAttr wAttr, DenseElementsAttr bAttr,
                                    PatternRewriter &rw) {
  Location loc = op.getLoc();
  auto inT = tensorType(op.getInput());
  auto outT = cast<RankedTensorType>(op.getType());
  const int64_t n = sizes[0], h = sizes[1], w = sizes[2], c = sizes[3], oh = sizes[4],
                ow = sizes[5], kh = sizes[7], kw = sizes[8];
  if (kh * kw > 512)
    return op.emitOpError("an integer depthwise window of ")
           << kh * kw << " taps could leave f32's exact integers (at most 512)";
  bool signedInput = !inT.getElementType().isUnsignedInteger();
  int64_t zeroPoint = op.getInputZeroPoint().value_or(0);
  int64_t cpad = (c + kPanel - 1) / kPanel * kPanel;
  SmallVector<int64_t> weights;
  for (const APInt &v : wAttr.getValues<APInt>())
    weights.push_back(v.getSExtValue());
  SmallVector<int64_t> bias = integerBias(bAttr, c);
  std::vector<float> packedW(kh * kw * cpad, 0.0f);
  std::vector<int32_t> packedB(cpad, 0);
  for (int64_t ch = 0; ch < c; ++ch) {
    int64_t sum = 0;
    for (int64_t y = 0; y < kh; ++y)
      for (int64_t x = 0; x < kw; ++x) {
        int64_t v = weights[(ch * kh + y) * kw + x];
        sum += v;
        packedW[(y * kw + x) * cpad + ch] = (float)v;
      }
    int64_t b = bias[ch] - zeroPoint * sum;
    if (b < INT32_MIN || b > INT32_MAX)
      return op.emitOpError("the bias less the zero point's share does not fit in i32");
    packedB[ch] = (int32_t)b;
  }
  auto [requant, requantFlag] = requantBlock(op, c, cpad, rw);
  kiln_conv2d_params params{n,  h,  w,  c,  oh, ow, c, kh, kw, op.getStrides()[0], op.getStrides()[1],
                            op.getPads()[0], op.getPads()[1], op.getDilations()[0],
                            op.getDilations()[1], c,
                            requantFlag | (signedInput ? KILN_QCONV_SIGNED_INPUT : 0)};
  SmallVector<std::pair<unsigned, Value>> runtime;
  if (batch)
    runtime.push_back({offsetof(kiln_conv2d_params, n) / 8, batch});
  auto i32t = RankedTensorType::get({cpad}, rw.getI32Type());
  SmallVector<Value> args{i64Block(rw, loc, fields(params), runtime),
                          asSignless(rw, loc, op.getInput()),
                          f32Block(rw, loc, packedW),
                          arith::ConstantOp::create(rw, loc,
                                                    DenseElementsAttr::get(i32t, ArrayRef(packedB))),
                          requant,
                          arith::ConstantOp::create(rw, loc, rw.getI64IntegerAttr(zeroPoint)),
                          strideSlot(rw, loc),
                          strideSlot(rw, loc)};
  // The out address goes in at 5 (between requant and the zero point).
  int64_t ops = 2 * n * oh * ow * c * kh * kw;
  Value call = callWithResult(rw, loc, kQDwConv, signlessType(outT), args, 5, {1, 6, -1, 7},
                              batch ? 0 : ops, dynamicSizes(rw, loc, op.getResult()));
  rw.replaceOp(op, restoreType(rw, loc, call, outT));
  return success();
}

/// The integer convolution (8-bit input, s8 weights; groups 1, or
/// depthwise: lowerIntegerDepthwise) -> kiln_qconv2d_nhwc_u8s8, its i32
/// sums stored or requantized to 8 bits by the kernel (requant_type).
/// Weights [O][C][KH][KW] packed as [panels][KH][KW][ceil(C/4)][kPanel][4]
/// (four input channels per 32-bit lane of the dot product), zero padded;
/// the bias less the zero point as the kernel reads it (an s8 input is read
/// as u8, 128 more) times each output's weight sum, since padding reads the
/// zero point.
LogicalResult lowerIntegerConv2DNhwc(Conv2DNhwcOp op, ArrayRef<int64_t> sizes, Value rows,
                                     Value batch, PatternRewriter &rw) {
  Location loc = op.getLoc();
  auto inT = tensorType(op.getInput());
  auto outT = cast<RankedTensorType>(op.getType());
  DenseElementsAttr wAttr, bAttr;
  if (!matchPattern(op.getWeight(), m_Constant(&wAttr)))
    return op.emitOpError("needs constant weights");
  if (op.getBias() && !matchPattern(op.getBias(), m_Constant(&bAttr)))
    return op.emitOpError("needs a constant bias");
  const int64_t n = sizes[0], h = sizes[1], w = sizes[2], c = sizes[3], oh = sizes[4],
                ow = sizes[5], oc = sizes[6], kh = sizes[7], kw = sizes[8];
  if (op.getGroup() != 1) {
    if (op.getGroup() == c && c == oc && !rows)
      return lowerIntegerDepthwise(op, sizes, batch, wAttr, bAttr, rw);
    return op.emitOpError("integer convolutions run ungrouped or depthwise only");
  }
  bool signedInput = !inT.getElementType().isUnsignedInteger();
  int64_t zeroPoint = op.getInputZeroPoint().value_or(0);
  int64_t zeroRead = signedInput ? zeroPoint + 128 : zeroPoint;
  int64_t panels = (oc + kPanel - 1) / kPanel, groups4 = (c + 3) / 4;
  // Few input channels (a stem's 3): the kernel gathers each pixel's whole
  // window and the weights are packed with it flattened, [panels]
  // [ceil(kh*kw*c/4)][kPanel][4]: the direct form would spend a whole tap's
  // address arithmetic on one dot product (ResNet-18's 7x7 stem: 3.5 ms,
  // a third of the model).
  int64_t flatGroups = (kh * kw * c + 3) / 4;
  bool flat = (c % 4 != 0 || c < 16) && flatGroups * 4 <= KILN_QCONV_FLAT_K_MAX_BYTES;
  std::vector<int8_t> packedW(panels * (flat ? flatGroups : kh * kw * groups4) * kPanel * 4, 0);
  std::vector<int32_t> packedB(panels * kPanel, 0);
  SmallVector<int64_t> weights;
  for (const APInt &v : wAttr.getValues<APInt>())
    weights.push_back(v.getSExtValue());
  SmallVector<int64_t> bias = integerBias(bAttr, oc);
  for (int64_t o = 0; o < oc; ++o) {
    int64_t p = o / kPanel, lane = o % kPanel, sum = 0;
    for (int64_t y = 0; y < kh; ++y)
      for (int64_t x = 0; x < kw; ++x)
        for (int64_t i = 0; i < c; ++i) {
          int64_t v = weights[((o * c + i) * kh + y) * kw + x];
          sum += v;
          int64_t k = (y * kw + x) * c + i;
          int64_t at = flat ? ((p * flatGroups + k / 4) * kPanel + lane) * 4 + k % 4
                            : ((((p * kh + y) * kw + x) * groups4 + i / 4) * kPanel + lane) * 4 +
                                  i % 4;
          packedW[at] = (int8_t)v;
        }
    int64_t b = bias[o] - zeroRead * sum;
    if (b < INT32_MIN || b > INT32_MAX)
      return op.emitOpError("the bias less the zero point's share does not fit in i32");
    packedB[p * kPanel + lane] = (int32_t)b;
  }
  std::vector<int8_t> pad(groups4 * 4, (int8_t)(zeroPoint & 0xff));
  auto i8Block = [&](ArrayRef<int8_t> v) {
    auto t = RankedTensorType::get({(int64_t)v.size()}, rw.getI8Type());
    return arith::ConstantOp::create(rw, loc, DenseElementsAttr::get(t, v));
  };
  auto i32t = RankedTensorType::get({(int64_t)packedB.size()}, rw.getI32Type());
  Value biasBlock =
      arith::ConstantOp::create(rw, loc, DenseElementsAttr::get(i32t, ArrayRef(packedB)));
  auto [requant, requantFlag] = requantBlock(op, oc, panels * kPanel, rw);
  kiln_conv2d_params params{n,  h,  w,  c,  oh, ow, oc, kh, kw, op.getStrides()[0], op.getStrides()[1],
                            op.getPads()[0], op.getPads()[1], op.getDilations()[0],
                            op.getDilations()[1], 1, (flat ? KILN_QCONV_FLAT_K : 0) | requantFlag};
  SmallVector<std::pair<unsigned, Value>> runtime;
  if (rows)
    runtime = {{offsetof(kiln_conv2d_params, w) / 8, rows},
               {offsetof(kiln_conv2d_params, ow) / 8, rows}};
  if (batch)
    runtime.push_back({offsetof(kiln_conv2d_params, n) / 8, batch});
  Value flip = arith::ConstantOp::create(rw, loc, rw.getI64IntegerAttr(signedInput ? 0x80808080 : 0));
  SmallVector<Value> args{i64Block(rw, loc, fields(params), runtime),
                          asSignless(rw, loc, op.getInput()),
                          i8Block(packedW),
                          biasBlock,
                          i8Block(pad),
                          flip,
                          strideSlot(rw, loc),
                          strideSlot(rw, loc),
                          requant};
  int64_t ops = 2 * n * oh * ow * oc * kh * kw * c;
  Value call = callWithResult(rw, loc, kQConv, signlessType(outT), args, 5, {1, 6, -1, 7},
                              rows || batch ? 0 : ops, dynamicSizes(rw, loc, op.getResult()));
  rw.replaceOp(op, restoreType(rw, loc, call, outT));
  return success();
}

LogicalResult lowerConv2DNhwc(Conv2DNhwcOp op, PatternRewriter &rw) {
  auto inT = tensorType(op.getInput()), wT = tensorType(op.getWeight());
  auto outT = cast<RankedTensorType>(op.getType());
  if (inT.getElementType().isInteger(8)) {
    Value rows, batch;
    SmallVector<int64_t> sizes{inT.getDimSize(0),  inT.getDimSize(1),  inT.getDimSize(2),
                               inT.getDimSize(3),  outT.getDimSize(1), outT.getDimSize(2),
                               outT.getDimSize(3), wT.getDimSize(2),   wT.getDimSize(3)};
    if (inT.isDynamicDim(0)) {
      batch = dimSize(rw, op.getLoc(), op.getInput(), 0);
      sizes[0] = 1;
    } else if (!inT.hasStaticShape() || !outT.hasStaticShape()) {
      rows = dimSize(rw, op.getLoc(), op.getInput(), 2);
      sizes[2] = sizes[5] = 1;
    }
    return lowerIntegerConv2DNhwc(op, sizes, rows, batch, rw);
  }
  auto weight = constantFloats(op.getWeight());
  std::optional<SmallVector<float>> bias;
  if (op.getBias() && !(bias = constantFloats(op.getBias())))
    return op.emitOpError("needs a constant bias");
  if (!weight)
    return op.emitOpError("needs constant weights");
  // kiln-fuse-epilogues fuses GELU only where the conv kernel applies it.
  constexpr float inf = std::numeric_limits<float>::infinity();
  if (op.getGelu() && (op.getGroup() != 1 || op.getClampMin().convertToFloat() != -inf ||
                       op.getClampMax().convertToFloat() != inf))
    return op.emitOpError("has GELU, which the kernel applies only to an ungrouped "
                          "convolution without a clamp");
  ConvShape s{inT.getDimSize(0),  inT.getDimSize(1), inT.getDimSize(2), inT.getDimSize(3),
              outT.getDimSize(1), outT.getDimSize(2), outT.getDimSize(3), wT.getDimSize(2),
              wT.getDimSize(3),  op.getGroup()};
  // Dims known only at run time (dynamicConvSupported says which): the
  // batch and image size of a CNN compiled once for every shape, or the
  // pixels of a 1x1 convolution over one row of run-time width (a matrix
  // product with constant weights, kiln-fuse-epilogues' MatMulToConv). The
  // static fields they replace hold 1.
  ConvRuntimeDims runtime;
  auto take = [&](Value &field, int64_t &size, Value v, int64_t i) {
    if (!cast<RankedTensorType>(v.getType()).isDynamicDim(i))
      return;
    field = runtimeDim(rw, op.getLoc(), v, i);
    size = 1;
  };
  take(runtime.n, s.n, op.getInput(), 0);
  take(runtime.h, s.h, op.getInput(), 1);
  take(runtime.w, s.w, op.getInput(), 2);
  take(runtime.oh, s.oh, op.getResult(), 1);
  take(runtime.ow, s.ow, op.getResult(), 2);
  rw.replaceOp(op, emitConv(rw, op.getLoc(), s, op.getStrides(), op.getPads(),
                            op.getDilations(), *weight, bias ? ArrayRef<float>(*bias)
                                                             : ArrayRef<float>(),
                            op.getInput(), op.getResidual(), op.getClampMin().convertToFloat(),
                            op.getClampMax().convertToFloat(), outT, op.getGelu(), runtime,
                            dynamicSizes(rw, op.getLoc(), op.getResult())));
  return success();
}

/// f32 matrix products. A constant right operand [K, N] is a 1x1
/// convolution over the rows of the left operand (weights packed now); a
/// run-time one goes to kiln_matmul_f32, which packs it on the fly. Batch
/// dims must match or be absent on one side; other broadcasts, vectors and
/// other element types keep the generic lowering.
struct LowerMatMul : OpRewritePattern<MatMulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MatMulOp op, PatternRewriter &rw) const override {
    auto lt = tensorType(op.getLhs()), rt = tensorType(op.getRhs());
    auto outT = cast<RankedTensorType>(op.getType());
    if (!outT.getElementType().isF32() || lt.getRank() < 2 || rt.getRank() < 2 ||
        !outT.hasStaticShape() || !lt.hasStaticShape() || !rt.hasStaticShape() ||
        outT.getNumElements() == 0)
      return failure();
    int64_t M = lt.getDimSize(lt.getRank() - 2), K = lt.getDimSize(lt.getRank() - 1),
            N = rt.getDimSize(rt.getRank() - 1);
    if (K == 0)
      return failure();
    Location loc = op.getLoc();
    int64_t lhsBatch = lt.getNumElements() / (M * K), rhsBatch = rt.getNumElements() / (K * N);
    if (rt.getRank() == 2) {
      if (auto w = constantFloats(op.getRhs())) {
        // W[o][i] = B[i][o]: the conv weight layout.
        SmallVector<float> wt(N * K);
        for (int64_t k = 0; k < K; ++k)
          for (int64_t n = 0; n < N; ++n)
            wt[n * K + k] = (*w)[k * N + n];
        int64_t rows = lhsBatch * M;
        ConvShape s{1, 1, rows, K, 1, rows, N, 1, 1, 1};
        float inf = std::numeric_limits<float>::infinity();
        rw.replaceOp(op, emitConv(rw, loc, s, {1, 1}, {0, 0}, {1, 1}, wt, {}, op.getLhs(),
                                  Value(), -inf, inf, outT));
        return success();
      }
    }
    ArrayRef<int64_t> lb = lt.getShape().drop_back(2), rb = rt.getShape().drop_back(2),
                      ob = outT.getShape().drop_back(2);
    int64_t batch = outT.getNumElements() / (M * N);
    bool lhsFull = lhsBatch == batch && lb == ob.take_back(lb.size());
    bool rhsFull = rhsBatch == batch && rb == ob.take_back(rb.size());
    if (!(lhsFull || lhsBatch == 1) || !(rhsFull || rhsBatch == 1))
      return failure();
    kiln_matmul_params params{batch, M, N, K, lhsBatch == 1 ? 0 : M * K,
                              rhsBatch == 1 ? 0 : K * N, M * N, K, N, N, 0, 0, 0};
    Value lhs = op.getLhs(), rhs = op.getRhs();
    // Operands that are transposed, reshaped or sliced views of another
    // tensor are read in place: the kernel takes strides and offsets.
    // A batch of one or a full batch only (the batch strides come from the
    // view; a broadcast batch keeps stride 0).
    if (auto a = matrixViewOf(lhs); a && a->colStride == 1 && (lhsFull || lhsBatch == 1)) {
      lhs = a->base;
      params.stride_a = lhsBatch == 1 ? 0 : a->batchStride;
      params.lda = a->rowStride;
      params.offset_a = a->offset;
    }
    if (auto b = matrixViewOf(rhs); b && (b->colStride == 1 || b->rowStride == 1) &&
                                     (rhsFull || rhsBatch == 1)) {
      rhs = b->base;
      params.stride_b = rhsBatch == 1 ? 0 : b->batchStride;
      bool trans = b->colStride != 1;
      params.ldb = trans ? b->colStride : b->rowStride;
      params.trans_b = trans ? 1 : 0;
      params.offset_b = b->offset;
    }
    SmallVector<Value> args{i64Block(rw, loc, fields(params)), lhs, rhs};
    rw.replaceOp(op, callWithResult(rw, loc, kMatMul, outT, args, 3, {}, 2 * batch * M * N * K));
    return success();
  }
};

/// A matrix operand [batch..., rows, cols] read in place from the dense
/// tensor a transpose reads, with strides computed at run time from that
/// tensor's dims: the batch stride (0 for a single batch), and the stride
/// of rows (`transposed` false: columns are contiguous) or of columns
/// (`transposed`: rows are contiguous; only the right operand may be).
struct TransposedView {
  Value base, batchStride, leading;
  bool transposed;
};
std::optional<TransposedView> transposedView(OpBuilder &b, Location loc, Value side) {
  auto tr = side.getDefiningOp<TransposeOp>();
  if (!tr)
    return std::nullopt;
  Value x = tr.getInput();
  auto xt = dyn_cast<RankedTensorType>(x.getType());
  auto st = cast<RankedTensorType>(side.getType());
  ArrayRef<int64_t> perm = tr.getPerm();
  int64_t n = st.getRank();
  if (!xt || xt.getRank() != n || n < 2 || (int64_t)perm.size() != n)
    return std::nullopt;
  // At most one batch dim that is not a static 1: several would need
  // their strides to nest, which is known only at run time.
  int64_t batchDim = -1;
  for (int64_t d = 0; d + 2 < n; ++d) {
    if (!st.isDynamicDim(d) && st.getDimSize(d) == 1)
      continue;
    if (batchDim >= 0)
      return std::nullopt;
    batchDim = d;
  }
  bool colsContiguous = perm[n - 1] == n - 1, rowsContiguous = perm[n - 2] == n - 1;
  if (!colsContiguous && !rowsContiguous)
    return std::nullopt;
  // x's row-major strides.
  SmallVector<Value> strides(n);
  strides[n - 1] = arith::ConstantIndexOp::create(b, loc, 1);
  for (int64_t d = n - 2; d >= 0; --d)
    strides[d] = arith::MulIOp::create(b, loc, strides[d + 1], dimSize(b, loc, x, d + 1));
  Value batchStride = batchDim < 0 ? (Value)arith::ConstantIndexOp::create(b, loc, 0)
                                   : strides[perm[batchDim]];
  if (colsContiguous)
    return TransposedView{x, batchStride, strides[perm[n - 2]], false};
  return TransposedView{x, batchStride, strides[perm[n - 1]], true};
}

/// Matrix products with dims known only at run time (see "Dims known only
/// at run time" in LoweringUtils.h): the same kernels, with the sizes that
/// vary computed into the parameter block at the call. A constant [K, N]
/// right operand is the 1x1 convolution over the left operand's rows
/// (weights packed now, the number of rows at run time); anything else goes
/// to kiln_matmul_f32 on row-major operands, or on the tensor a transpose
/// reads (transposedView; other in-place views are static-only: their
/// strides would vary too). dynamicMatMulSupported says which.
struct LowerDynamicMatMul : OpRewritePattern<MatMulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MatMulOp op, PatternRewriter &rw) const override {
    auto lt = tensorType(op.getLhs()), rt = tensorType(op.getRhs());
    auto outT = cast<RankedTensorType>(op.getType());
    // kiln-lower-to-linalg checked dynamicMatMulSupported before lowering
    // (the operands may be lowered values by now, which it cannot judge).
    if ((outT.hasStaticShape() && lt.hasStaticShape() && rt.hasStaticShape()) ||
        !outT.getElementType().isF32() || lt.getRank() < 2 || rt.getRank() < 2)
      return failure();
    Location loc = op.getLoc();
    int64_t r = outT.getRank();
    SmallVector<Value> outDyn = dynamicSizes(rw, loc, op.getResult());
    if (rt.getRank() == 2 && rt.hasStaticShape())
      if (auto w = constantFloats(op.getRhs())) {
        int64_t K = rt.getDimSize(0), N = rt.getDimSize(1);
        SmallVector<float> wt(N * K);
        for (int64_t k = 0; k < K; ++k)
          for (int64_t n = 0; n < N; ++n)
            wt[n * K + k] = (*w)[k * N + n];
        // Rows: every dim of the left operand but the last.
        Value rows = arith::ConstantIndexOp::create(rw, loc, 1);
        for (int64_t i = 0; i + 1 < lt.getRank(); ++i)
          rows = arith::MulIOp::create(rw, loc, rows, dimSize(rw, loc, op.getLhs(), i));
        ConvShape s{1, 1, 1, K, 1, 1, N, 1, 1, 1};
        float inf = std::numeric_limits<float>::infinity();
        rw.replaceOp(op, emitConv(rw, loc, s, {1, 1}, {0, 0}, {1, 1}, wt, {}, op.getLhs(),
                                  Value(), -inf, inf, outT, false,
                                  ConvRuntimeDims{{}, {}, rows, {}, rows}, outDyn));
        return success();
      }
    Value M = dimSize(rw, loc, op.getLhs(), lt.getRank() - 2);
    Value K = dimSize(rw, loc, op.getLhs(), lt.getRank() - 1);
    Value N = dimSize(rw, loc, op.getRhs(), rt.getRank() - 1);
    SmallVector<Value> outSizes;
    for (int64_t i = 0, k = 0; i < r; ++i)
      outSizes.push_back(outT.isDynamicDim(i) ? outDyn[k++]
                                              : (Value)arith::ConstantIndexOp::create(
                                                    rw, loc, outT.getDimSize(i)));
    Value batch = arith::ConstantIndexOp::create(rw, loc, 1);
    for (int64_t i = 0; i + 2 < r; ++i)
      batch = arith::MulIOp::create(rw, loc, batch, outSizes[i]);
    auto single = [](RankedTensorType t) {
      return llvm::all_of(t.getShape().drop_back(2), [](int64_t d) { return d == 1; });
    };
    Value zero = arith::ConstantIndexOp::create(rw, loc, 0);
    auto mul = [&](Value a, Value b) { return arith::MulIOp::create(rw, loc, a, b).getResult(); };
    kiln_matmul_params params{};
    using P = kiln_matmul_params;
    auto field = [](size_t offset) { return (unsigned)(offset / sizeof(int64_t)); };
    Value lhs = op.getLhs(), rhs = op.getRhs();
    Value strideA = single(lt) ? zero : mul(M, K), strideB = single(rt) ? zero : mul(K, N);
    Value lda = K, ldb = N;
    // An operand that is a transpose of a dense tensor is read in place
    // (the kernel takes strides; the keys of attention, [heads, d, seq],
    // are a transpose of [seq, heads, d]): a copy less, and the copy of a
    // transpose whose last dim moves is slow.
    if (auto a = transposedView(rw, loc, lhs); a && !a->transposed) {
      lhs = a->base;
      strideA = a->batchStride;
      lda = a->leading;
    }
    if (auto b = transposedView(rw, loc, rhs)) {
      rhs = b->base;
      strideB = b->batchStride;
      ldb = b->leading;
      params.trans_b = b->transposed ? 1 : 0;
    }
    SmallVector<std::pair<unsigned, Value>> runtime{
        {field(offsetof(P, batch)), batch},
        {field(offsetof(P, m)), M},
        {field(offsetof(P, n)), N},
        {field(offsetof(P, k)), K},
        {field(offsetof(P, stride_a)), strideA},
        {field(offsetof(P, stride_b)), strideB},
        {field(offsetof(P, stride_c)), mul(M, N)},
        {field(offsetof(P, lda)), lda},
        {field(offsetof(P, ldb)), ldb},
        {field(offsetof(P, ldc)), N}};
    SmallVector<Value> args{i64Block(rw, loc, fields(params), runtime), lhs, rhs};
    rw.replaceOp(op, callWithResult(rw, loc, kMatMul, outT, args, 3, {}, 0, outDyn));
    return success();
  }
};

/// Max/average pooling with channels_last (2-D, f32; max pooling also on
/// 8-bit integers).
template <typename PoolOp, bool isAvg>
struct LowerPoolNhwc : OpRewritePattern<PoolOp> {
  using OpRewritePattern<PoolOp>::OpRewritePattern;
  LogicalResult matchAndRewrite(PoolOp op, PatternRewriter &rw) const override {
    if (!op.getChannelsLast())
      return failure();
    auto inT = tensorType(op.getInput());
    auto outT = cast<RankedTensorType>(op.getType());
    Type elem = inT.getElementType();
    bool bytes = !isAvg && elem.isInteger(8);
    if (inT.getRank() != 4 || !(elem.isF32() || bytes))
      return op.emitOpError("channels_last pooling needs a 2-D f32 input (or 8-bit integers "
                            "for max pooling)");
    ArrayRef<int64_t> k = op.getKernelShape(), s = op.getStrides(), p = op.getPads();
    int64_t dh = 1, dw = 1, flags = 0;
    if constexpr (isAvg) {
      flags = KILN_POOL_AVERAGE | (op.getCountIncludePad() ? KILN_POOL_COUNT_PAD : 0);
    } else {
      dh = op.getDilations()[0];
      dw = op.getDilations()[1];
      if (bytes && !elem.isUnsignedInteger())
        flags = KILN_POOL_SIGNED;
    }
    kiln_pool2d_params params{inT.getDimSize(0), inT.getDimSize(1),  inT.getDimSize(2),
                              inT.getDimSize(3), outT.getDimSize(1), outT.getDimSize(2),
                              k[0],              k[1],               s[0],
                              s[1],              p[0],               p[1],
                              dh,                dw,                 p[2],
                              p[3],              flags};
    Location loc = op.getLoc();
    // The batch and image size known only at run time (one compile for
    // every shape; dynamicPoolSupported says which may be).
    SmallVector<std::pair<unsigned, Value>> runtime;
    for (auto [field, v, i] : {std::tuple{offsetof(kiln_pool2d_params, n), op.getInput(), 0},
                               {offsetof(kiln_pool2d_params, h), op.getInput(), 1},
                               {offsetof(kiln_pool2d_params, w), op.getInput(), 2},
                               {offsetof(kiln_pool2d_params, oh), op.getResult(), 1},
                               {offsetof(kiln_pool2d_params, ow), op.getResult(), 2}})
      if (cast<RankedTensorType>(v.getType()).isDynamicDim(i))
        runtime.push_back({(unsigned)(field / 8), runtimeDim(rw, loc, v, i)});
    SmallVector<Value> args{i64Block(rw, loc, fields(params), runtime),
                            bytes ? asSignless(rw, loc, op.getInput()) : op.getInput(),
                            strideSlot(rw, loc), strideSlot(rw, loc)};
    Value call = callWithResult(rw, loc, bytes ? kBytePool : kPool,
                                bytes ? signlessType(outT) : outT, args, 2, {1, 2, -1, 3}, 0,
                                dynamicSizes(rw, loc, op.getResult()));
    rw.replaceOp(op, bytes ? restoreType(rw, loc, call, outT) : call);
    return success();
  }
};

/// [rows, n] of a row op over the trailing axes [axis, rank) of `t`.
std::pair<int64_t, int64_t> rowsAndLength(RankedTensorType t, int64_t axis) {
  int64_t n = 1;
  for (int64_t d : t.getShape().drop_front(axis))
    n *= d;
  return {n ? t.getNumElements() / n : 0, n};
}

LogicalResult checkRowOp(Operation *op, RankedTensorType t) {
  if (!t.getElementType().isF32())
    return op->emitOpError("has no kernel for ") << t << " (needs f32)";
  return success();
}

/// A row op's number of rows and their length, computed at run time from
/// `input` (for dims known only then): fields 0 and 1 of kiln_row_params.
SmallVector<std::pair<unsigned, Value>> runtimeRows(OpBuilder &b, Location loc, Value input,
                                                    int64_t axis) {
  auto t = cast<RankedTensorType>(input.getType());
  if (t.hasStaticShape())
    return {};
  Value rows = arith::ConstantIndexOp::create(b, loc, 1), n = rows;
  for (int64_t i = 0; i < t.getRank(); ++i) {
    Value d = dimSize(b, loc, input, i);
    if (i < axis)
      rows = arith::MulIOp::create(b, loc, rows, d);
    else
      n = arith::MulIOp::create(b, loc, n, d);
  }
  return {{offsetof(kiln_row_params, rows) / 8, rows}, {offsetof(kiln_row_params, n) / 8, n}};
}

LogicalResult lowerSoftmax(SoftmaxOp op, PatternRewriter &rw) {
  auto t = op.getType();
  if (failed(checkRowOp(op, t)))
    return failure();
  auto [rows, n] = t.hasStaticShape() ? rowsAndLength(t, op.getAxis())
                                      : std::pair<int64_t, int64_t>{0, 0};
  Location loc = op.getLoc();
  kiln_row_params params{rows, n, op.getLog() ? KILN_ROW_LOG_SOFTMAX : 0};
  SmallVector<Value> args{
      i64Block(rw, loc, fields(params), runtimeRows(rw, loc, op.getInput(), op.getAxis())),
      op.getInput(), f32(rw, loc, op.getScale().convertToFloat())};
  rw.replaceOp(op, callWithResult(rw, loc, kSoftmax, t, args, 2, {}, 0,
                                  dynamicSizes(rw, loc, op.getResult())));
  return success();
}

LogicalResult lowerLayerNorm(LayerNormOp op, PatternRewriter &rw) {
  auto t = op.getType();
  if (failed(checkRowOp(op, t)))
    return failure();
  auto [rows, n] = t.hasStaticShape() ? rowsAndLength(t, op.getAxis())
                                      : std::pair<int64_t, int64_t>{0, 0};
  Location loc = op.getLoc();
  Value zero = arith::ConstantOp::create(rw, loc, rw.getI64IntegerAttr(0));
  kiln_row_params params{rows, n,
                         (op.getScale() ? KILN_ROW_HAS_SCALE : 0) |
                             (op.getBias() ? KILN_ROW_HAS_BIAS : 0)};
  SmallVector<Value> args{
      i64Block(rw, loc, fields(params), runtimeRows(rw, loc, op.getInput(), op.getAxis())),
      op.getInput(),
                          op.getScale() ? op.getScale() : zero,
                          op.getBias() ? op.getBias() : zero,
                          f32(rw, loc, op.getEpsilon().convertToFloat())};
  rw.replaceOp(op, callWithResult(rw, loc, kLayerNorm, t, args, 4, {}, 0,
                                  dynamicSizes(rw, loc, op.getResult())));
  return success();
}

/// kiln.non_max_suppression -> kiln_nms_f32 (runtime/kernels/SelectionKernels.cpp),
/// whose parameter block is (batches, classes, boxes, max per class,
/// center_point_box).
LogicalResult lowerNonMaxSuppression(NonMaxSuppressionOp op, PatternRewriter &rw) {
  auto bt = dyn_cast<RankedTensorType>(op.getBoxes().getType());
  auto st = dyn_cast<RankedTensorType>(op.getScores().getType());
  auto t = dyn_cast<RankedTensorType>(op.getType());
  if (!bt || !st || !t || !bt.hasStaticShape() || !st.hasStaticShape() || !t.hasStaticShape())
    return rw.notifyMatchFailure(op, "needs static shapes");
  Location loc = op.getLoc();
  kiln_nms_params params{bt.getDimSize(0), st.getDimSize(1), bt.getDimSize(1),
                         op.getMaxOutputBoxesPerClass(), op.getCenterPointBox()};
  SmallVector<Value> args{
      i64Block(rw, loc, fields(params)),
      op.getBoxes(), op.getScores(), f32(rw, loc, op.getIouThreshold().convertToFloat()),
      f32(rw, loc, op.getScoreThreshold().convertToFloat())};
  rw.replaceOp(op, callWithResult(rw, loc, kNms, t, args, 3));
  return success();
}

/// kiln.non_zero -> kiln_nonzero_u8, whose parameter block is (elements,
/// rank, dims...).
LogicalResult lowerNonZero(NonZeroOp op, PatternRewriter &rw) {
  auto mt = dyn_cast<RankedTensorType>(op.getMask().getType());
  auto t = dyn_cast<RankedTensorType>(op.getType());
  if (!mt || !t || !mt.hasStaticShape() || !t.hasStaticShape())
    return rw.notifyMatchFailure(op, "needs static shapes");
  SmallVector<int64_t> params = fields(kiln_nonzero_params{mt.getNumElements(), mt.getRank()});
  llvm::append_range(params, mt.getShape()); // the dims, after the struct
  Location loc = op.getLoc();
  rw.replaceOp(op, callWithResult(rw, loc, kNonZero, t,
                                  {i64Block(rw, loc, params), op.getMask()}, 2));
  return success();
}

/// kiln.top_k -> kiln_topk_f32, whose parameter block is (outer, dim, inner,
/// capacity, largest) of the input seen as [outer][dim][inner].
LogicalResult lowerTopK(TopKOp op, PatternRewriter &rw) {
  auto it = dyn_cast<RankedTensorType>(op.getInput().getType());
  auto t = dyn_cast<RankedTensorType>(op.getType());
  if (!it || !t || !it.hasStaticShape() || !t.hasStaticShape())
    return rw.notifyMatchFailure(op, "needs static shapes");
  int64_t axis = op.getAxis(), outer = 1, inner = 1;
  for (int64_t d = 0; d < it.getRank(); ++d)
    (d < axis ? outer : inner) *= d == axis ? 1 : it.getDimSize(d);
  Location loc = op.getLoc();
  kiln_topk_params params{outer, it.getDimSize(axis), inner, op.getCapacity(),
                          op.getLargest() ? 1 : 0};
  rw.replaceOp(op, callWithResult(rw, loc, kTopK, t,
                                  {i64Block(rw, loc, fields(params)), op.getInput(), op.getK(),
                                   op.getValid()},
                                  4));
  return success();
}

/// kiln.det -> kiln_det_f32 (runtime/kernels/LinearAlgebraKernels.cpp), whose
/// parameter block is (matrices, n).
LogicalResult lowerDet(DetOp op, PatternRewriter &rw) {
  auto it = dyn_cast<RankedTensorType>(op.getInput().getType());
  auto t = dyn_cast<RankedTensorType>(op.getType());
  if (!it || !t || !it.hasStaticShape() || !t.hasStaticShape())
    return rw.notifyMatchFailure(op, "needs static shapes");
  Location loc = op.getLoc();
  rw.replaceOp(op, callWithResult(rw, loc, kDet, t,
                                  {i64Block(rw, loc, fields(kiln_det_params{
                                                         t.getNumElements(),
                                                         it.getDimSize(it.getRank() - 1)})),
                                   op.getInput()},
                                  2));
  return success();
}

} // namespace

void declareKernelFunctions(ModuleOp module) {
  OpBuilder b(module.getBodyRegion());
  b.setInsertionPointToStart(module.getBody());
  Type i64 = b.getI64Type(), f32t = b.getF32Type();
  auto declare = [&](StringRef name, SmallVector<Type> args) {
    if (module.lookupSymbol(name))
      return;
    auto f = func::FuncOp::create(b, module.getLoc(), name, b.getFunctionType(args, {}));
    f.setPrivate();
  };
  declare(kConv, {i64, i64, i64, i64, i64, i64, f32t, f32t, i64, i64});
  declare(kDwConv, {i64, i64, i64, i64, i64, i64, f32t, f32t, i64, i64});
  declare(kMatMul, {i64, i64, i64, i64});
  declare(kPool, {i64, i64, i64, i64, i64});
  declare(kBytePool, {i64, i64, i64, i64, i64});
  declare(kQConv, {i64, i64, i64, i64, i64, i64, i64, i64, i64, i64});
  declare(kQDwConv, {i64, i64, i64, i64, i64, i64, i64, i64, i64});
  declare(kSoftmax, {i64, i64, i64, f32t});
  declare(kLayerNorm, {i64, i64, i64, i64, i64, f32t});
  declare(kAttention, {i64, i64, i64, i64, i64, f32t});
  declare(kAttentionMask, {i64, i64, i64, i64, i64, i64, f32t, f32t});
  declare(kNms, {i64, i64, i64, i64, f32t, f32t});
  declare(kNonZero, {i64, i64, i64});
  declare(kTopK, {i64, i64, i64, i64, i64});
  declare(kDet, {i64, i64, i64});
}

bool dynamicMatMulSupported(Operation *matmul) {
  auto op = cast<MatMulOp>(matmul);
  auto lt = dyn_cast<RankedTensorType>(op.getLhs().getType());
  auto rt = dyn_cast<RankedTensorType>(op.getRhs().getType());
  auto outT = dyn_cast<RankedTensorType>(op.getType());
  if (!lt || !rt || !outT || !outT.getElementType().isF32() || lt.getRank() < 2 ||
      rt.getRank() < 2 || !hasRuntimeDims(op.getResult()) || !hasRuntimeDims(op.getLhs()) ||
      !hasRuntimeDims(op.getRhs()))
    return false;
  // The inner dims agree at run time (the same expression).
  if (!sameDim(op.getLhs(), lt.getRank() - 1, op.getRhs(), rt.getRank() - 2))
    return false;
  if (rt.getRank() == 2 && rt.hasStaticShape() && constantFloats(op.getRhs()))
    return true;
  // Batch dims: each side has the result's (the same expressions) or none.
  auto same = [&](Value side) {
    auto t = cast<RankedTensorType>(side.getType());
    ArrayRef<int64_t> b = t.getShape().drop_back(2);
    if (llvm::all_of(b, [](int64_t d) { return d == 1; }))
      return true;
    return (int64_t)b.size() == outT.getRank() - 2 && sameDims(side, op.getResult(), b.size());
  };
  return same(op.getLhs()) && same(op.getRhs());
}

bool dynamicConvSupported(Operation *conv) {
  auto op = cast<Conv2DNhwcOp>(conv);
  auto inT = dyn_cast<RankedTensorType>(op.getInput().getType());
  auto wT = dyn_cast<RankedTensorType>(op.getWeight().getType());
  auto outT = dyn_cast<RankedTensorType>(op.getType());
  if (!inT || !wT || !outT || !wT.hasStaticShape() || inT.getRank() != 4 || outT.getRank() != 4)
    return false;
  auto ones = [](ArrayRef<int64_t> v) { return llvm::all_of(v, [](int64_t x) { return x == 1; }); };
  auto zeros = [](ArrayRef<int64_t> v) { return llvm::all_of(v, [](int64_t x) { return x == 0; }); };
  bool residualOk = !op.getResidual() || sameDims(op.getResidual(), op.getResult(), 4);
  // Any convolution whose batch is the only dim known at run time.
  if (inT.isDynamicDim(0) && !inT.isDynamicDim(1) && !inT.isDynamicDim(2) &&
      !inT.isDynamicDim(3) && outT.isDynamicDim(0) && !outT.isDynamicDim(1) &&
      !outT.isDynamicDim(2) && !outT.isDynamicDim(3))
    return residualOk && sameDims(op.getInput(), op.getResult(), 1) &&
           hasRuntimeDims(op.getInput()) && hasRuntimeDims(op.getResult());
  // A float convolution over images whose size (and batch) are known only
  // at run time: the kernel takes every size from its parameter block, the
  // packed weights fix only the channels and the window. Each run-time dim
  // of the result has an expression (kiln-symbolic-dims: (in + pads -
  // dilation * (k - 1) - 1) floordiv stride + 1), the batch the input's.
  if (inT.getElementType().isF32() && !inT.isDynamicDim(3) && !outT.isDynamicDim(3) &&
      inT.isDynamicDim(0) == outT.isDynamicDim(0))
    return residualOk && (!inT.isDynamicDim(0) || sameDims(op.getInput(), op.getResult(), 1)) &&
           hasRuntimeDims(op.getInput()) && hasRuntimeDims(op.getResult());
  // [1, 1, W, C] -> [1, 1, W, O], 1x1, W the only dim known at run time;
  // ungrouped when integer (the int8 kernel takes no run-time width with
  // groups).
  if (inT.getElementType().isInteger(8) && op.getGroup() != 1)
    return false;
  return inT.getDimSize(0) == 1 && inT.getDimSize(1) == 1 && !inT.isDynamicDim(3) &&
         outT.getDimSize(0) == 1 && outT.getDimSize(1) == 1 && !outT.isDynamicDim(3) &&
         wT.getDimSize(2) == 1 && wT.getDimSize(3) == 1 && ones(op.getStrides()) &&
         ones(op.getDilations()) && zeros(op.getPads()) &&
         residualOk && hasRuntimeDims(op.getInput()) && hasRuntimeDims(op.getResult());
}

bool dynamicPoolSupported(Operation *pool) {
  auto in = dyn_cast<RankedTensorType>(pool->getOperand(0).getType());
  auto out = dyn_cast<RankedTensorType>(pool->getResult(0).getType());
  // channels_last (the kernel's), the channels known while compiling; f32,
  // or 8-bit integers for max pooling (kiln_maxpool2d_nhwc_i8), where the
  // batch is the only dim that may be known only at run time. The float
  // kernel takes the batch and image size at run time, each run-time dim of
  // the result with an expression (kiln-symbolic-dims).
  bool bytes = isa<MaxPoolOp>(pool) && in && in.getElementType().isInteger(8);
  if (!in || !out || in.getRank() != 4 || out.getRank() != 4 || !pool->hasAttr("channels_last") ||
      !(in.getElementType().isF32() || bytes) || in.isDynamicDim(3) || out.isDynamicDim(3) ||
      in.isDynamicDim(0) != out.isDynamicDim(0))
    return false;
  if (bytes && (in.isDynamicDim(1) || in.isDynamicDim(2) || out.isDynamicDim(1) ||
                out.isDynamicDim(2)))
    return false;
  return (!in.isDynamicDim(0) || sameDims(pool->getOperand(0), pool->getResult(0), 1)) &&
         hasRuntimeDims(pool->getOperand(0)) && hasRuntimeDims(pool->getResult(0));
}

bool parseConvLayerName(StringRef name, int64_t (&fields)[17]) {
  if (!name.consume_front(kConvLayerPrefix))
    return false;
  for (int i = 0; i < 17; ++i) {
    auto [field, rest] = name.split(',');
    if (field.getAsInteger(10, fields[i]) || (i < 16 && rest.empty()))
      return false;
    name = rest;
  }
  // A block the kernel can run: sizes, window and strides of at least 1,
  // channels split evenly into the groups.
  for (int i : {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 13, 14, 15})
    if (fields[i] < 1)
      return false;
  return name.empty() && fields[11] >= 0 && fields[12] >= 0 && fields[3] % fields[15] == 0 &&
         fields[6] % fields[15] == 0;
}

void populateKernelLoweringPatterns(RewritePatternSet &patterns) {
  // Above the generic matmul/pool lowerings: the kernels win where they apply.
  patterns.add(lowerConv2DNhwc);
  patterns.add(lowerSoftmax);
  patterns.add(lowerLayerNorm);
  patterns.add(lowerNonMaxSuppression);
  patterns.add(lowerNonZero);
  patterns.add(lowerTopK);
  patterns.add(lowerDet);
  patterns.add<LowerMatMul, LowerDynamicMatMul, LowerPoolNhwc<MaxPoolOp, false>,
               LowerPoolNhwc<AvgPoolOp, true>>(patterns.getContext(), /*benefit=*/2);
}

} // namespace kiln::codegen
