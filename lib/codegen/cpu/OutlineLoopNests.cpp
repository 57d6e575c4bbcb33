// kiln-outline-loop-nests: each top-level linalg op of the model function
// (on memrefs) moves into a private function whose buffer arguments are
// `noalias` where they are distinct buffers.
//
// Why: the static memory plan makes every intermediate a view into one
// workspace, so LLVM sees one underlying object and its loop vectorizer can
// no longer tell a loop's input from its output (it stopped vectorizing
// every generated loop in encoder4). Within one op the operands that come
// from different buffers are live together, so they never overlap, which is
// exactly what `noalias` on a function argument states; LLVM's inliner then
// turns the arguments into scoped alias metadata, valid inside that op only,
// so buffers that share bytes at different times stay correctly ordered.
//
// The outlined functions are also what the thread pool runs: when an op's
// outermost non-unit loop is parallel, indexes its operands directly and is
// worth splitting, the function takes a [begin, end) range of that loop as
// two more i64 arguments and slices its operands to it, and the call is
// marked `kiln.parallel = [trip count, grain]`; kiln-parallelize-calls turns
// it into a kiln_parallel_for over that range.
//
// Inside the function, short innermost loops are folded or kept as loops
// (collapseInnerLoops, lowerNarrowInnerLoop) so that LLVM vectorises along
// contiguous memory.
#include "kiln/Codegen/CpuPasses.h"

#include "kiln/Conversion/BufferRoots.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "kiln/Conversion/DenseBuffers.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/RegionUtils.h"

namespace kiln {
#define GEN_PASS_DEF_KILNOUTLINELOOPNESTS
#include "kiln/Codegen/CpuPasses.h.inc"
} // namespace kiln

using namespace mlir;

namespace kiln {
namespace {

using codegen::isKnownRoot;
using codegen::rootBuffer;

bool passable(MemRefType type) {
  // What the bare-pointer calling convention can pass.
  return type.hasStaticShape() && type.getLayout().isIdentity() && type.getNumElements() != 0;
}

/// Whether `op` is a plain copy (one input, yielded unchanged; a transpose,
/// say) whose innermost loop runs along the last dim of both operands,
/// contiguous in each, over at least kRowCopyBytes: LLVM turns that loop
/// into one memcpy a row. In code for run-time shapes such copies are
/// optsize too, although their innermost trip count is static: without
/// it LLVM unrolled the row loop by 8 and the heads' loop fully, and
/// expanded every 256-byte memcpy inline (the head split and merge of a
/// GPT-2-style decoder, d = 256: 9 KB of code that took 0.10 of its 0.2 s
/// of machine code generation, `llc -time-passes` on those two functions);
/// optsize keeps one memcpy call a row. Short rows are left alone: there
/// LLVM vectorises along the next loop instead (ShuffleNet-V2's transpose
/// of 3 channels, below).
constexpr int64_t kRowCopyBytes = 64;
bool copiesWholeRows(linalg::LinalgOp op) {
  if (op.getNumDpsInputs() != 1 || op.getNumDpsInits() != 1 || op.getNumLoops() == 0)
    return false;
  Block *body = op.getBlock();
  auto yield = dyn_cast<linalg::YieldOp>(body->getTerminator());
  if (!yield || body->getOperations().size() != 1 || yield.getNumOperands() != 1 ||
      yield.getOperand(0) != body->getArgument(0))
    return false;
  unsigned innermost = op.getNumLoops() - 1;
  for (OpOperand &operand : op->getOpOperands()) {
    auto type = dyn_cast<MemRefType>(operand.get().getType());
    AffineMap map = op.getMatchingIndexingMap(&operand);
    if (!type || type.getRank() == 0 || !type.getElementType().isIntOrFloat() ||
        !type.isLastDimUnitStride() ||
        map.getNumResults() != (unsigned)type.getRank() ||
        map.getResults().back() != getAffineDimExpr(innermost, op.getContext()))
      return false;
    int64_t row = type.getShape().back();
    unsigned bits = type.getElementType().getIntOrFloatBitWidth();
    if (ShapedType::isDynamic(row) || row * bits < kRowCopyBytes * 8)
      return false;
  }
  return true;
}

/// For a strided view (a slice of a concatenation, say): the static
/// memref.subview ops that make it from a buffer the calling convention can
/// pass, outermost first; the function gets that buffer and remakes the
/// view. Empty when `v` is not such a view.
SmallVector<memref::SubViewOp> viewChain(Value v) {
  SmallVector<memref::SubViewOp> chain;
  while (!passable(cast<MemRefType>(v.getType()))) {
    auto sub = v.getDefiningOp<memref::SubViewOp>();
    if (!sub || !sub.getOffsets().empty() || !sub.getSizes().empty() || !sub.getStrides().empty())
      return {};
    chain.insert(chain.begin(), sub);
    v = sub.getSource();
  }
  return chain;
}

/// A buffer whose dims are known only at run time, dense row-major: it is
/// passed as one pointer (memref<0xT>) and its dynamic sizes, and remade
/// inside (the bare-pointer calling convention takes static shapes only).
bool passableWithSizes(MemRefType type) {
  return !type.hasStaticShape() && type.getRank() > 0 && type.getLayout().isIdentity() &&
         !type.getMemorySpace();
}

/// viewChain for views whose offsets or sizes are known only at run time
/// (a part of a KV cache's concatenation): the memref.subview ops back to
/// a buffer passable as it is or with its sizes; the function gets that
/// buffer and the views' run-time operands and remakes the views. Empty
/// when `v` is not such a view.
SmallVector<memref::SubViewOp> dynamicViewChain(Value v) {
  SmallVector<memref::SubViewOp> chain;
  while (true) {
    auto mt = cast<MemRefType>(v.getType());
    if (passable(mt) || passableWithSizes(mt))
      return chain;
    auto sub = v.getDefiningOp<memref::SubViewOp>();
    if (!sub)
      return {};
    chain.insert(chain.begin(), sub);
    v = sub.getSource();
  }
}

bool outlinable(Operation *op) {
  if (!isa<linalg::LinalgOp>(op) || op->getNumResults())
    return false;
  for (Value v : op->getOperands())
    if (auto mt = dyn_cast<MemRefType>(v.getType());
        mt && !passable(mt) && !passableWithSizes(mt) &&
        (!mt.hasStaticShape() || mt.getNumElements() == 0 || viewChain(v).empty()) &&
        dynamicViewChain(v).empty())
      return false;
  return true;
}

/// `flat`, a memref<0xT> standing for a dense row-major buffer of `type`,
/// as that buffer, its dynamic sizes `sizes` in order.
Value remakeBuffer(OpBuilder &b, Location loc, Value flat, MemRefType type, ValueRange sizes) {
  SmallVector<OpFoldResult> all(type.getRank());
  for (int64_t i = 0, k = 0; i < type.getRank(); ++i)
    all[i] = type.isDynamicDim(i) ? OpFoldResult(sizes[k++])
                                  : OpFoldResult(b.getIndexAttr(type.getDimSize(i)));
  return codegen::remakeDenseBuffer(b, loc, flat, type, all);
}

// Work below which an op stays on one thread, and a chunk's least work, in
// loop iterations (vectorised elementwise work runs a few per nanosecond;
// handing out a job costs microseconds).
constexpr int64_t kMinParallelIterations = 1 << 16;
constexpr int64_t kMinChunkIterations = 1 << 14;

/// How `op` splits across threads: the loop, its trip count and the
/// least number of its iterations per chunk; nullopt when it does not.
/// For profiles: 2 * (iteration space) for an op that reduces (a
/// contraction, a convolution: a multiply and an add per point); 0 for the
/// rest, whose cost is memory traffic rather than arithmetic.
int64_t contractionFlops(linalg::LinalgOp op) {
  if (op.getNumReductionLoops() == 0 ||
      !llvm::any_of(op.getBlock()->getOperations(),
                    [](Operation &o) { return isa<arith::MulFOp>(o); }))
    return 0;
  int64_t points = 1;
  for (int64_t range : op.getStaticLoopRanges()) {
    if (ShapedType::isDynamic(range))
      return 0;
    points *= range;
  }
  return 2 * points;
}

struct Split {
  unsigned loop;
  int64_t trips, grain;
  /// Per operand: the dimension indexed by the loop, or -1 (not sliced).
  SmallVector<int64_t> operandDim;
};

std::optional<Split> splitOf(linalg::LinalgOp op) {
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  // Leading loops of run-time trip count (a CNN's batch compiled for every
  // batch) stay whole in every thread's chunk, and the next loop is split,
  // where it is not the innermost: without this, every loop nest of such a
  // CNN outside the kernels ran on one thread. The work is counted at one
  // trip of those loops. A run-time trip count further in is not split.
  unsigned loop = 0;
  while (loop < ranges.size() && (ranges[loop] == 1 || ShapedType::isDynamic(ranges[loop])))
    ++loop;
  bool runTimeOuter = llvm::any_of(ArrayRef(ranges).take_front(loop), ShapedType::isDynamic);
  int64_t total = 1;
  for (auto [i, r] : llvm::enumerate(ranges)) {
    if (ShapedType::isDynamic(r)) {
      if (i >= loop)
        return std::nullopt;
      continue;
    }
    total *= r;
  }
  if (total < kMinParallelIterations)
    return std::nullopt;
  if (loop == ranges.size() || ranges[loop] < 2 ||
      (runTimeOuter && loop + 1 == ranges.size()) ||
      op.getIteratorTypesArray()[loop] != utils::IteratorType::parallel)
    return std::nullopt;
  // linalg.index of the loop would see chunk-relative values.
  bool indexed = false;
  op->walk([&](linalg::IndexOp index) { indexed |= index.getDim() == loop; });
  if (indexed)
    return std::nullopt;
  Split split{loop, ranges[loop], 1, {}};
  split.grain = std::max<int64_t>(1, kMinChunkIterations / (total / ranges[loop]));
  for (OpOperand &operand : op->getOpOperands()) {
    int64_t dim = -1;
    if (isa<MemRefType>(operand.get().getType())) {
      AffineMap map = op.getMatchingIndexingMap(&operand);
      for (auto [r, expr] : llvm::enumerate(map.getResults())) {
        if (auto d = dyn_cast<AffineDimExpr>(expr); d && d.getPosition() == loop) {
          if (dim >= 0)
            return std::nullopt; // indexed twice (a diagonal)
          dim = r;
        } else if (expr.isFunctionOfDim(loop)) {
          return std::nullopt; // a window (d0 + d3): chunks would overlap
        }
      }
      // Every thread would write all of an output the loop does not index.
      if (dim < 0 && op.isDpsInit(&operand))
        return std::nullopt;
    }
    split.operandDim.push_back(dim);
  }
  return split;
}

/// The reassociation that folds the loops of `group` (ascending, each
/// appearing in `map` as a plain dimension or not at all) in an operand
/// indexed by `map`; nullopt when they are not adjacent and in order there.
std::optional<SmallVector<ReassociationIndices>>
operandReassociation(AffineMap map, const ReassociationIndices &group) {
  SmallVector<ReassociationIndices> reassociation;
  std::optional<size_t> groupAt;
  int64_t next = group.front();
  for (auto [r, expr] : llvm::enumerate(map.getResults())) {
    auto dim = dyn_cast<AffineDimExpr>(expr);
    if (!dim)
      return std::nullopt;
    if (!llvm::is_contained(group, (int64_t)dim.getPosition())) {
      reassociation.push_back({(int64_t)r});
      continue;
    }
    if ((int64_t)dim.getPosition() != next)
      return std::nullopt;
    if (!groupAt) {
      groupAt = reassociation.size();
      reassociation.push_back({});
    } else if (*groupAt + 1 != reassociation.size()) {
      return std::nullopt;
    }
    reassociation[*groupAt].push_back(r);
    ++next;
  }
  if (groupAt && next != group.back() + 1)
    return std::nullopt;
  return reassociation;
}

/// An all-parallel generic on buffers whose body does not read its loop
/// indices, or null.
linalg::GenericOp plainParallelGeneric(Operation *op) {
  auto generic = dyn_cast<linalg::GenericOp>(op);
  if (!generic || !generic.hasPureBufferSemantics() ||
      generic.getNumParallelLoops() != generic.getNumLoops())
    return nullptr;
  bool indexed = false;
  generic->walk([&](linalg::IndexOp) { indexed = true; });
  return indexed ? nullptr : generic;
}

/// Folds the loops of an all-parallel generic from `first` on into one
/// loop, starting as far out as every operand allows (its memref keeps
/// those dimensions adjacent and contiguous). Why: a 1x112x112x16
/// elementwise nest kept its innermost loop of 16, which LLVM unrolled
/// completely and then vectorised the loop around it with gathers and
/// scatters of stride 16 (MobileNet-V3's hardswish after the stem ran at
/// 1 ns per element); one loop of 1792 contiguous floats vectorises plainly.
/// Returns the op that replaces `op`, or `op`.
Operation *collapseInnerLoops(Operation *op, unsigned first) {
  linalg::GenericOp generic = plainParallelGeneric(op);
  if (!generic)
    return op;
  unsigned loops = generic.getNumLoops();
  for (unsigned start = first; start + 1 < loops; ++start) {
    ReassociationIndices group;
    for (unsigned d = start; d < loops; ++d)
      group.push_back(d);
    bool foldable = true;
    for (OpOperand &operand : generic->getOpOperands()) {
      auto type = dyn_cast<MemRefType>(operand.get().getType());
      auto reassociation =
          operandReassociation(generic.getMatchingIndexingMap(&operand), group);
      if (!type || !reassociation ||
          !memref::CollapseShapeOp::isGuaranteedCollapsible(type, *reassociation)) {
        foldable = false;
        break;
      }
    }
    if (!foldable)
      continue;
    IRRewriter rewriter(op->getContext());
    rewriter.setInsertionPoint(op);
    FailureOr<linalg::CollapseResult> collapsed =
        linalg::collapseOpIterationDims(generic, {group}, rewriter);
    if (failed(collapsed))
      return op;
    rewriter.replaceOp(op, collapsed->results);
    return collapsed->collapsedOp;
  }
  return op;
}

/// Lowers an all-parallel generic whose innermost loop stays narrow after
/// collapseInnerLoops (8-256 iterations, unit stride in every operand that
/// it indexes: the channels of an NHWC tensor times a per-channel operand)
/// to loops here, the innermost marked not to unroll. Why: LLVM unrolled
/// such a loop completely before its vectoriser ran and then vectorised the
/// loop around it with gathers and scatters (a squeeze-excitation scale,
/// 56x56x16 times 16, ran at a third of the speed of a plain copy); kept as
/// a loop, it vectorises along the channels.
void lowerNarrowInnerLoop(Operation *op) {
  linalg::GenericOp generic = plainParallelGeneric(op);
  if (!generic || generic.getNumLoops() == 0)
    return;
  unsigned inner = generic.getNumLoops() - 1;
  SmallVector<int64_t> ranges = generic.getStaticLoopRanges();
  int64_t trips = ranges[inner];
  // A single loop has no loop around it to vectorise wrongly.
  bool outer = llvm::any_of(ArrayRef(ranges).drop_back(), [](int64_t r) { return r != 1; });
  if (!outer || ShapedType::isDynamic(trips) || trips < 8 || trips > 256)
    return;
  for (OpOperand &operand : generic->getOpOperands()) {
    AffineMap map = generic.getMatchingIndexingMap(&operand);
    if (!map.isFunctionOfDim(inner))
      continue;
    auto type = dyn_cast<MemRefType>(operand.get().getType());
    SmallVector<int64_t> strides;
    int64_t offset;
    if (!type || map.getResults().back() != getAffineDimExpr(inner, op->getContext()) ||
        failed(type.getStridesAndOffset(strides, offset)) || strides.back() != 1)
      return;
  }
  IRRewriter rewriter(op->getContext());
  rewriter.setInsertionPoint(op);
  FailureOr<linalg::LinalgLoops> loops = linalg::linalgOpToLoops(rewriter, generic);
  if (failed(loops) || loops->empty())
    return;
  MLIRContext *ctx = op->getContext();
  auto unroll = LLVM::LoopUnrollAttr::get(ctx, /*disable=*/BoolAttr::get(ctx, true), {}, {}, {},
                                          {}, {}, {});
  auto noUnroll = LLVM::LoopAnnotationAttr::get(ctx, {}, {}, {}, unroll, {}, {}, {}, {}, {}, {},
                                                {}, {}, {}, {}, {});
  loops->back()->setAttr("loop_annotation", noUnroll);
  rewriter.eraseOp(op);
}

struct OutlineLoopNestsPass : impl::KilnOutlineLoopNestsBase<OutlineLoopNestsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    for (auto func : llvm::to_vector(module.getOps<func::FuncOp>())) {
      if (func.isDeclaration() || !func.isPublic())
        continue;
      int counter = 0;
      for (Operation &op : llvm::make_early_inc_range(func.getBody().front()))
        if (outlinable(&op))
          outline(module, func, &op, counter++);
    }
  }

  /// Makes `op` (just cloned into its function) work on iterations
  /// [begin, end) of the split loop: each operand the loop indexes becomes
  /// a subview of that range.
  static void sliceToRange(OpBuilder &b, Operation *op, const Split &split, Value begin,
                           Value end) {
    b.setInsertionPoint(op);
    Location loc = op->getLoc();
    Value lo = arith::IndexCastOp::create(b, loc, b.getIndexType(), begin);
    Value hi = arith::IndexCastOp::create(b, loc, b.getIndexType(), end);
    Value size = arith::SubIOp::create(b, loc, hi, lo);
    for (auto [i, dim] : llvm::enumerate(split.operandDim)) {
      if (dim < 0)
        continue;
      Value v = op->getOperand(i);
      auto type = cast<MemRefType>(v.getType());
      SmallVector<OpFoldResult> offsets(type.getRank(), b.getIndexAttr(0)), sizes,
          strides(type.getRank(), b.getIndexAttr(1));
      for (int64_t d = 0; d < type.getRank(); ++d)
        sizes.push_back(type.isDynamicDim(d) ? OpFoldResult(memref::DimOp::create(b, loc, v, d))
                                             : OpFoldResult(b.getIndexAttr(type.getDimSize(d))));
      offsets[dim] = lo;
      sizes[dim] = size;
      op->setOperand(i, memref::SubViewOp::create(b, loc, v, offsets, sizes, strides));
    }
    b.setInsertionPointAfter(op);
  }

  void outline(ModuleOp module, func::FuncOp parent, Operation *op, int n) {
    // Arguments: operands and values used inside the op's regions, except
    // constants (cloned in), each once.
    llvm::SetVector<Value> captured;
    for (Value v : op->getOperands())
      captured.insert(v);
    getUsedValuesDefinedAbove(op->getRegions(), captured);
    llvm::SetVector<Value> passed;
    SmallVector<Value> constants;
    SmallVector<memref::SubViewOp> views; // remade inside, in order
    for (Value v : captured) {
      if (matchPattern(v, m_Constant())) {
        constants.push_back(v);
      } else if (auto mt = dyn_cast<MemRefType>(v.getType()); mt && passableWithSizes(mt)) {
        passed.insert(v);
      } else if (mt && !passable(mt)) {
        SmallVector<memref::SubViewOp> chain =
            mt.hasStaticShape() && mt.getNumElements() ? viewChain(v) : SmallVector<memref::SubViewOp>();
        if (chain.empty()) {
          chain = dynamicViewChain(v);
          // The views' run-time offsets, sizes and strides come along.
          for (memref::SubViewOp view : chain)
            for (Value operand : view->getOperands().drop_front()) {
              if (matchPattern(operand, m_Constant()))
                constants.push_back(operand);
              else
                passed.insert(operand);
            }
        }
        passed.insert(chain.front().getSource());
        views.append(chain.begin(), chain.end());
      } else {
        passed.insert(v);
      }
    }
    SmallVector<Value> args = passed.takeVector();
    std::optional<Split> split = splitOf(cast<linalg::LinalgOp>(op));

    OpBuilder b(module.getContext());
    b.setInsertionPoint(parent);
    std::string name = (parent.getName() + "_op" + Twine(n)).str();
    // Buffers of run-time size: a pointer here, their sizes after the
    // other arguments, and then begin, end (kiln-parallelize-calls takes the
    // last two as the range).
    SmallVector<Type> argTypes;
    unsigned numSizes = 0;
    for (Value v : args) {
      auto mt = dyn_cast<MemRefType>(v.getType());
      if (mt && passableWithSizes(mt)) {
        argTypes.push_back(MemRefType::get({0}, mt.getElementType()));
        numSizes += mt.getNumDynamicDims();
      } else {
        argTypes.push_back(v.getType());
      }
    }
    argTypes.append(numSizes, b.getIndexType());
    if (split)
      argTypes.append(2, b.getI64Type()); // begin, end
    auto fn = func::FuncOp::create(b, op->getLoc(), name, b.getFunctionType(argTypes, {}));
    fn.setPrivate();
    // Internal (two models linked together must not clash) and kept out of
    // line: inlining them all back into the model function made DenseNet-121
    // compile in 46-50 s instead of 36 s, and noalias holds out of line too.
    fn->setAttr("llvm.no_inline", b.getUnitAttr());
    // Loops of run-time trip counts that only move data (copies, masks,
    // gathers around the kernels): LLVM's unrolling and epilogue
    // vectorisation multiply them into large code for little gain, and
    // their compile time is what one compile for every shape pays, so they
    // are optsize. Those that compute (a padding mask added to every
    // attention score, biases, activations between kernels) are not:
    // optsize kept LLVM from vectorising them at all (a run-time trip count
    // needs a scalar tail, which optsize refuses), and the BERT-style
    // encoder's mask add ran at 2.5x its static code. Measured: that
    // encoder at 4x384 and 1x384 3-4 % faster, compiles 0-13 % longer
    // (CPU time of kilnc, five runs each: GPT-2 decoder d=256, encoder4,
    // the BERT-style encoder).
    // Computing: floating-point arithmetic (index arithmetic is
    // addressing, which gathers do too).
    bool computes = false;
    op->walk([&](Operation *inner) {
      if (inner != op && isa<arith::ArithDialect, math::MathDialect>(inner->getDialect()) &&
          !isa<arith::ConstantOp>(inner) &&
          llvm::any_of(inner->getResultTypes(),
                       [](Type t) { return isa<FloatType>(getElementTypeOrSelf(t)); }))
        computes = true;
    });
    // Only where the innermost loop's trip count is a run-time value: with
    // a static innermost loop (a run-time batch around the static layers of
    // a CNN) LLVM vectorises it as in static code, without a scalar tail,
    // and optsize made the NCHW -> NHWC transpose of ShuffleNet-V2's input
    // 8x slower than its static code (303 against 37 us at batch 3: SLP
    // over the 3 channels instead of 16-wide vectors along the width).
    SmallVector<int64_t> loopRanges = cast<linalg::LinalgOp>(op).getStaticLoopRanges();
    bool innermostDynamic = !loopRanges.empty() && ShapedType::isDynamic(loopRanges.back());
    if (numSizes && !computes && (innermostDynamic || copiesWholeRows(cast<linalg::LinalgOp>(op))))
      fn->setAttr("llvm.optsize", b.getUnitAttr());
    fn->setAttr("llvm.linkage",
                LLVM::LinkageAttr::get(b.getContext(), LLVM::Linkage::Internal));
    // noalias only where each buffer appears once among the memref args,
    // and only when every buffer's origin is known.
    DenseMap<Value, int> uses;
    bool known = true;
    for (Value v : args)
      if (isa<MemRefType>(v.getType())) {
        ++uses[rootBuffer(v)];
        known &= isKnownRoot(rootBuffer(v));
      }
    for (auto [i, v] : llvm::enumerate(args))
      if (known && isa<MemRefType>(v.getType()) && uses[rootBuffer(v)] == 1)
        fn.setArgAttr(i, LLVM::LLVMDialect::getNoAliasAttrName(), b.getUnitAttr());

    Block *body = fn.addEntryBlock();
    b.setInsertionPointToStart(body);
    IRMapping map;
    unsigned nextSize = args.size();
    for (auto [v, arg] : llvm::zip(args, body->getArguments())) {
      auto mt = dyn_cast<MemRefType>(v.getType());
      if (mt && passableWithSizes(mt)) {
        ValueRange sizes = body->getArguments().slice(nextSize, mt.getNumDynamicDims());
        nextSize += mt.getNumDynamicDims();
        map.map(v, remakeBuffer(b, op->getLoc(), arg, mt, sizes));
      } else {
        map.map(v, arg);
      }
    }
    for (Value c : constants)
      map.map(c, b.clone(*c.getDefiningOp())->getResult(0));
    for (memref::SubViewOp view : views)
      if (!map.contains(view.getResult()))
        b.clone(*view, map);
    Operation *inner = b.clone(*op, map);
    if (split)
      sliceToRange(b, inner, *split, body->getArgument(args.size() + numSizes),
                   body->getArgument(args.size() + numSizes + 1));
    func::ReturnOp::create(b, op->getLoc());
    lowerNarrowInnerLoop(collapseInnerLoops(inner, split ? split->loop + 1 : 0));

    OpBuilder call(op);
    SmallVector<Value> callArgs, sizes;
    for (Value v : args) {
      auto mt = dyn_cast<MemRefType>(v.getType());
      if (!mt || !passableWithSizes(mt)) {
        callArgs.push_back(v);
        continue;
      }
      auto flat = MemRefType::get({0}, mt.getElementType());
      callArgs.push_back(memref::ReinterpretCastOp::create(
          call, op->getLoc(), flat, v, call.getIndexAttr(0), {call.getIndexAttr(0)},
          {call.getIndexAttr(1)}));
      for (int64_t i = 0; i < mt.getRank(); ++i)
        if (mt.isDynamicDim(i))
          sizes.push_back(memref::DimOp::create(call, op->getLoc(), v, i));
    }
    llvm::append_range(callArgs, sizes);
    if (split) {
      callArgs.push_back(arith::ConstantOp::create(call, op->getLoc(), call.getI64IntegerAttr(0)));
      callArgs.push_back(
          arith::ConstantOp::create(call, op->getLoc(), call.getI64IntegerAttr(split->trips)));
    }
    auto c = func::CallOp::create(call, op->getLoc(), fn, callArgs);
    if (split)
      c->setAttr("kiln.parallel", call.getDenseI64ArrayAttr({split->trips, split->grain}));
    if (int64_t flops = contractionFlops(cast<linalg::LinalgOp>(op)))
      c->setAttr("kiln.flops", call.getI64IntegerAttr(flops));
    op->erase();
  }
};

} // namespace
} // namespace kiln
