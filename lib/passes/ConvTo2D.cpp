// kiln-conv-to-2d: 1-D and 3-D convolutions as 2-D ones, so that they reach
// kiln-convert-layout and the CPU's 2-D convolution microkernels instead of
// a generic loop nest (a video ResNet's Conv3d ran 27x slower than ONNX
// Runtime that way; issue 41).
//
// 1-D: [N, C, L] is [N, C, 1, L]; the kernel [F, C/g, K] is [F, C/g, 1, K].
//
// 3-D: the kernel's depth is folded into the input channels, its output
// depth into the batch. With the input's depth padded (the H and W pads
// stay the 2-D convolution's),
//   X'[n * OD + od][c * KD + kd][h][w] = Xpad[n][c][od * sd + kd * dd][h][w]
// (one kiln.gather along depth with constant indices [OD][KD], a transpose
// and a reshape), the kernel [F, C/g, KD, KH, KW] read as [F, C/g * KD, KH,
// KW] (the same bytes: c major, kd minor, as in X'), and
//   Y[n][f][od] = Y'[n * OD + od][f]
// after one 2-D convolution with the H and W strides, pads and dilations and
// the same groups (channel c * KD + kd of group g is still in group g). X'
// holds KD / sd copies of the input; the products are the convolution's own.
// Why not the 2-D kernel once per (od, kd) pair summed into Y: OD x KD
// small calls, each re-reading its weights, and an accumulate the kernels
// do not have.
#include "kiln/IR/KilnDialect.h"
#include "kiln/Passes/Passes.h"

#include "mlir/IR/Matchers.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace kiln {
#define GEN_PASS_DEF_KILNCONVTO2D
#include "kiln/Passes/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace kiln {
namespace {

RankedTensorType staticType(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && t.hasStaticShape() ? t : RankedTensorType();
}

Value i64Constant(PatternRewriter &rw, Location loc, ArrayRef<int64_t> values,
                  ArrayRef<int64_t> shape) {
  auto type = RankedTensorType::get(shape, rw.getI64Type());
  return ConstantOp::create(rw, loc, type, DenseIntElementsAttr::get(type, values));
}

/// `v` reshaped to `shape`: a new constant when `v` is one (the kernels
/// pack constant weights at compile time), else a kiln.reshape.
Value reshape(PatternRewriter &rw, Location loc, Value v, ArrayRef<int64_t> shape) {
  auto t = cast<RankedTensorType>(v.getType());
  auto type = t.clone(shape);
  DenseElementsAttr attr;
  if (matchPattern(v, m_Constant(&attr)))
    return ConstantOp::create(rw, loc, type, attr.reshape(type));
  Value s = i64Constant(rw, loc, shape, {(int64_t)shape.size()});
  return ReshapeOp::create(rw, loc, type, v, s, rw.getBoolAttr(false));
}

Value transpose(PatternRewriter &rw, Location loc, Value v, ArrayRef<int64_t> perm) {
  auto t = cast<RankedTensorType>(v.getType());
  SmallVector<int64_t> shape;
  for (int64_t p : perm)
    shape.push_back(t.getDimSize(p));
  return TransposeOp::create(rw, loc, t.clone(shape), v, rw.getDenseI64ArrayAttr(perm));
}

struct Conv1DTo2D : OpRewritePattern<ConvOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ConvOp op, PatternRewriter &rw) const override {
    RankedTensorType x = staticType(op.getInput()), w = staticType(op.getWeight()),
                     y = staticType(op.getResult());
    if (!x || !w || !y || x.getRank() != 3)
      return rw.notifyMatchFailure(op, "not a static 1-D convolution");
    Location loc = op.getLoc();
    Value x2 = reshape(rw, loc, op.getInput(), {x.getDimSize(0), x.getDimSize(1), 1, x.getDimSize(2)});
    Value w2 = reshape(rw, loc, op.getWeight(), {w.getDimSize(0), w.getDimSize(1), 1, w.getDimSize(2)});
    ArrayRef<int64_t> pads = op.getPads();
    auto y2Type = y.clone({y.getDimSize(0), y.getDimSize(1), 1, y.getDimSize(2)});
    Value y2 = ConvOp::create(rw, loc, y2Type, x2, w2, op.getBias(),
                              rw.getDenseI64ArrayAttr({1, op.getStrides()[0]}),
                              rw.getDenseI64ArrayAttr({0, pads[0], 0, pads[1]}),
                              rw.getDenseI64ArrayAttr({1, op.getDilations()[0]}),
                              op.getGroupAttr(), op.getInputZeroPointAttr());
    rw.replaceOp(op, reshape(rw, loc, y2, y.getShape()));
    return success();
  }
};

struct Conv3DTo2D : OpRewritePattern<ConvOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ConvOp op, PatternRewriter &rw) const override {
    RankedTensorType x = staticType(op.getInput()), w = staticType(op.getWeight()),
                     y = staticType(op.getResult());
    if (!x || !w || !y || x.getRank() != 5)
      return rw.notifyMatchFailure(op, "not a static 3-D convolution");
    Location loc = op.getLoc();
    int64_t n = x.getDimSize(0), c = x.getDimSize(1), d = x.getDimSize(2), h = x.getDimSize(3),
            wd = x.getDimSize(4);
    int64_t f = w.getDimSize(0), cg = w.getDimSize(1), kd = w.getDimSize(2);
    int64_t od = y.getDimSize(2), oh = y.getDimSize(3), ow = y.getDimSize(4);
    ArrayRef<int64_t> strides = op.getStrides(), pads = op.getPads(), dil = op.getDilations();
    int64_t sd = strides[0], dd = dil[0], padBegin = pads[0], padEnd = pads[3];
    if (n * od == 0 || f == 0 || c == 0)
      return rw.notifyMatchFailure(op, "empty");

    // The input's depth padded with zeros (only depth: H and W stay the
    // 2-D convolution's pads).
    Value input = op.getInput();
    if (padBegin || padEnd) {
      SmallVector<int64_t> p(10, 0);
      p[2] = padBegin;
      p[7] = padEnd;
      auto padded = x.clone({n, c, d + padBegin + padEnd, h, wd});
      // An integer convolution's padding reads its input zero point.
      Type elt = x.getElementType();
      Attribute fill = rw.getZeroAttr(elt);
      if (std::optional<int64_t> zp = op.getInputZeroPoint())
        fill = rw.getIntegerAttr(elt, *zp);
      Value zero = ConstantOp::create(rw, loc, RankedTensorType::get({}, elt),
                                      DenseElementsAttr::get(RankedTensorType::get({}, elt), fill));
      input = PadOp::create(rw, loc, padded, input, i64Constant(rw, loc, p, {10}), zero,
                            rw.getStringAttr("constant"));
    }
    // [N, C, OD, KD, H, W]: depth od * sd + kd * dd of the padded input.
    SmallVector<int64_t> depths;
    for (int64_t o = 0; o < od; ++o)
      for (int64_t k = 0; k < kd; ++k)
        depths.push_back(o * sd + k * dd);
    Value gathered = GatherOp::create(rw, loc, x.clone({n, c, od, kd, h, wd}), input,
                                      i64Constant(rw, loc, depths, {od, kd}),
                                      rw.getI64IntegerAttr(2));
    // [N, OD, C, KD, H, W] -> [N * OD, C * KD, H, W].
    Value x2 = reshape(rw, loc, transpose(rw, loc, gathered, {0, 2, 1, 3, 4, 5}),
                       {n * od, c * kd, h, wd});
    Value w2 = reshape(rw, loc, op.getWeight(),
                       {f, cg * kd, w.getDimSize(3), w.getDimSize(4)});
    Value y2 = ConvOp::create(rw, loc, y.clone({n * od, f, oh, ow}), x2, w2, op.getBias(),
                              rw.getDenseI64ArrayAttr({strides[1], strides[2]}),
                              rw.getDenseI64ArrayAttr({pads[1], pads[2], pads[4], pads[5]}),
                              rw.getDenseI64ArrayAttr({dil[1], dil[2]}), op.getGroupAttr(),
                              op.getInputZeroPointAttr());
    // [N * OD, F, OH, OW] -> [N, OD, F, OH, OW] -> [N, F, OD, OH, OW].
    Value y5 = reshape(rw, loc, y2, {n, od, f, oh, ow});
    rw.replaceOp(op, transpose(rw, loc, y5, {0, 2, 1, 3, 4}));
    return success();
  }
};

struct ConvTo2DPass : impl::KilnConvTo2DBase<ConvTo2DPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<Conv1DTo2D, Conv3DTo2D>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
} // namespace kiln
