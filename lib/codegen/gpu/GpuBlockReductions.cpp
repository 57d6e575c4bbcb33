// kiln-gpu-block-reductions: a reduction with few outputs and long rows
// (layer norm, softmax, ReduceMean, a classifier's pooling) as one GPU
// block per output, the row spread over the block's threads and combined
// in shared memory.
//
// Why: one thread per output leaves such a reduction nearly idle (a layer
// norm over 128 rows of 256 is 128 threads each reading 256 values in
// series, and 1 KB apart from their neighbours: 68 % of encoder4's time on
// an H100). kiln-gpu-split-reductions spreads a row over 16 threads in two
// launches; a block covers it with up to 256 threads in one launch, with
// consecutive threads reading consecutive elements.
//
// The op's body must be `yield combine(out, g(inputs))`, with `combine`
// one op that has a neutral element (arith::getNeutralElement: add, mul,
// max, min, and, or, xor) and `out` used nowhere else; g is any
// computation of the inputs (a fused x - mean, exp, ...). Per output, thread
// t folds g over the row's elements t, t + T, ... from the neutral element
// (the reduction dims flattened, read through the op's own indexing maps),
// stores its partial in shared memory, and a tree of log2(T) halving steps
// (a barrier after each) combines the T partials; thread 0 combines the
// total into the output (into the fill's value when a fill of the output,
// or a copy into it from a buffer only a fill wrote, comes right before
// the op: that kernel is then not launched). A reduction to one value is
// one block. T is the least
// power of two >= K, from 32 to 256.
// Only where each input that runs along the row does so in its innermost
// dim, so that the block's loads are coalesced.
// Float sums are reassociated, as in any parallel reduction.
//
// emulate=true builds the same phases for the CPU (blocks and threads as
// loops, each phase for all threads before the next), which kiln-run
// --gpu-tensor-passes runs.
#include "kiln/Codegen/GpuPasses.h"

#include "GpuKernelBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Utils/Utils.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace kiln {
#define GEN_PASS_DEF_KILNGPUBLOCKREDUCTIONS
#include "kiln/Codegen/GpuPasses.h.inc"
} // namespace kiln

using namespace mlir;

namespace kiln {
namespace {

struct RowReduction {
  mutable linalg::GenericOp op; // (its accessors are not const)
  Operation *combine = nullptr;
  Value contribution; // g(inputs), the combine's other operand
  TypedAttr neutral;
  SmallVector<unsigned> parallel, reduction; // output order; loop order
  SmallVector<int64_t> ranges;
  int64_t outputs = 1, rowLength = 1;
  int64_t threads = 0;
  codegen::InitFill fill; // the output's fill, taken over
};

std::optional<RowReduction> matchRowReduction(linalg::GenericOp op, int64_t maxOutputs,
                                              int64_t minRow) {
  if (op.hasIndexSemantics() || op.getNumReductionLoops() == 0)
    return std::nullopt;
  std::optional<SmallVector<int64_t>> ranges =
      codegen::kernelLoopRanges(op, [](Type t) { return t.isIntOrFloat(); });
  if (!ranges)
    return std::nullopt;
  RowReduction r;
  r.op = op;
  r.ranges = *ranges;
  AffineMap out = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
  auto iterators = op.getIteratorTypesArray();
  for (AffineExpr e : out.getResults())
    r.parallel.push_back(cast<AffineDimExpr>(e).getPosition());
  for (unsigned d = 0; d < r.ranges.size(); ++d)
    if (!linalg::isParallelIterator(iterators[d]))
      r.reduction.push_back(d);
  for (unsigned d : r.parallel)
    r.outputs *= r.ranges[d];
  for (unsigned d : r.reduction)
    r.rowLength *= r.ranges[d];
  if (r.outputs == 0 || r.outputs > maxOutputs || r.rowLength < std::max<int64_t>(minRow, 2))
    return std::nullopt;
  // Consecutive threads take consecutive elements of the innermost
  // reduction dim (of more than one element): each input that runs along
  // the row must run along it in its innermost dim of more than one
  // element, or the block's loads would be strided (a classifier's weights
  // W[k][n], and a 1x1 convolution's input along its channels, whose
  // one-thread-per-output kernels read them coalesced along n or ow, stay
  // there).
  SmallVector<unsigned> longReductions;
  for (unsigned d : r.reduction)
    if (r.ranges[d] > 1)
      longReductions.push_back(d);
  unsigned innermost = longReductions.back(); // a row of >= minRow has one
  for (OpOperand *in : op.getDpsInputOperands()) {
    AffineMap map = op.getMatchingIndexingMap(in);
    if (llvm::none_of(longReductions, [&](unsigned d) { return map.isFunctionOfDim(d); }))
      continue;
    ArrayRef<int64_t> shape = cast<MemRefType>(in->get().getType()).getShape();
    std::optional<unsigned> last;
    for (unsigned i = 0; i < shape.size(); ++i)
      if (shape[i] > 1)
        last = i;
    if (!last || !map.getResult(*last).isFunctionOfDim(innermost))
      return std::nullopt;
  }
  // The body is cloned into the kernel: it may compute, not touch memory
  // or hold regions.
  for (Operation &bodyOp : op.getRegion().front().without_terminator())
    if (bodyOp.getNumRegions() != 0 || !isMemoryEffectFree(&bodyOp))
      return std::nullopt;

  Block &body = op.getRegion().front();
  BlockArgument acc = body.getArguments().back();
  if (!acc.hasOneUse())
    return std::nullopt;
  Operation *combine = *acc.user_begin();
  if (combine->getNumOperands() != 2 || combine->getNumResults() != 1 ||
      body.getTerminator()->getOperand(0) != combine->getResult(0) ||
      !combine->getResult(0).hasOneUse())
    return std::nullopt;
  std::optional<TypedAttr> neutral = arith::getNeutralElement(combine);
  if (!neutral)
    return std::nullopt;
  r.combine = combine;
  r.neutral = *neutral;
  r.contribution = combine->getOperand(0) == acc ? combine->getOperand(1) : combine->getOperand(0);
  if (r.contribution == acc)
    return std::nullopt;
  r.fill = codegen::initFill(op);
  r.threads = 32;
  while (r.threads < 256 && r.threads < r.rowLength)
    r.threads *= 2;
  return r;
}

/// Emits one block's phases for a thread `t` of output `p`.
struct RowEmitter {
  const RowReduction &r;
  Location loc;
  Value partials; // [threads] of the element type

  Value cst(OpBuilder &b, int64_t v) const { return codegen::indexConstant(b, loc, v); }
  Type elementType() const { return r.combine->getResult(0).getType(); }

  SmallVector<Value> outputIndices(OpBuilder &b, Value p) const {
    SmallVector<Value> iv(r.ranges.size(), cst(b, 0));
    codegen::delinearizeLoops(b, loc, p, r.parallel, r.ranges, iv);
    return iv;
  }

  Value combine(OpBuilder &b, Value x, Value y) const {
    IRMapping map;
    map.map(r.combine->getOperand(0), x);
    map.map(r.combine->getOperand(1), y);
    return b.clone(*r.combine, map)->getResult(0);
  }

  /// Thread t's fold of g over elements t, t + threads, ... of row p,
  /// stored in partials[t].
  void fold(OpBuilder &b, Value p, Value t) const {
    SmallVector<Value> rowIv = outputIndices(b, p);
    Value start = arith::ConstantOp::create(b, loc, r.neutral);
    auto loop = scf::ForOp::create(
        b, loc, t, cst(b, r.rowLength), cst(b, r.threads), ValueRange{start},
        [&](OpBuilder &lb, Location, Value k, ValueRange acc) {
          SmallVector<Value> iv(rowIv);
          codegen::delinearizeLoops(lb, loc, k, r.reduction, r.ranges, iv);
          Block &body = r.op.getRegion().front();
          IRMapping map;
          for (OpOperand *in : r.op.getDpsInputOperands()) {
            SmallVector<Value> idx = codegen::operandIndices(lb, loc, r.op, in, iv);
            map.map(body.getArgument(in->getOperandNumber()),
                    memref::LoadOp::create(lb, loc, in->get(), idx));
          }
          for (Operation &op : body.without_terminator())
            if (&op != r.combine)
              lb.clone(op, map);
          Value g = map.lookupOrDefault(r.contribution);
          scf::YieldOp::create(lb, loc, combine(lb, acc[0], g));
        });
    memref::StoreOp::create(b, loc, loop.getResult(0), partials, ValueRange{t});
  }

  /// partials[t] = combine(partials[t], partials[t + half]), for t < half.
  void halve(OpBuilder &b, Value t, int64_t half) const {
    Value x = memref::LoadOp::create(b, loc, partials, ValueRange{t});
    Value other = arith::AddIOp::create(b, loc, t, cst(b, half));
    Value y = memref::LoadOp::create(b, loc, partials, ValueRange{other});
    memref::StoreOp::create(b, loc, combine(b, x, y), partials, ValueRange{t});
  }

  /// out[p] = combine(out[p], partials[0]), out[p] being the fill's value
  /// when the kernel takes the fill over.
  void finish(OpBuilder &b, Value p) const {
    OpOperand *out = r.op.getDpsInitOperand(0);
    SmallVector<Value> idx = codegen::operandIndices(b, loc, r.op, out, outputIndices(b, p));
    Value old = r.fill ? r.fill.value
                       : memref::LoadOp::create(b, loc, out->get(), idx).getResult();
    Value total = memref::LoadOp::create(b, loc, partials, ValueRange{cst(b, 0)});
    memref::StoreOp::create(b, loc, combine(b, old, total), out->get(), idx);
  }
};

void ifThen(OpBuilder &b, Location loc, Value cond, function_ref<void(OpBuilder &)> fn) {
  auto op = scf::IfOp::create(b, loc, cond, /*withElseRegion=*/false);
  OpBuilder tb = op.getThenBodyBuilder();
  fn(tb);
}

void buildLaunch(OpBuilder &b, const RowReduction &r) {
  Location loc = r.op.getLoc();
  RowEmitter em{r, loc, {}};
  auto workgroup = gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Workgroup);
  Type partialsType = MemRefType::get({r.threads}, em.elementType(), AffineMap(), workgroup);
  Value one = em.cst(b, 1);
  auto launch = gpu::LaunchOp::create(b, loc, em.cst(b, r.outputs), one, one,
                                      em.cst(b, r.threads), one, one,
                                      /*dynamicSharedMemorySize=*/nullptr,
                                      /*asyncTokenType=*/nullptr, /*asyncDependencies=*/{},
                                      TypeRange{partialsType});
  OpBuilder kb = OpBuilder::atBlockBegin(&launch.getBody().front());
  em.partials = launch.getWorkgroupAttributions()[0];
  Value p = launch.getBlockIds().x, t = launch.getThreadIds().x;
  em.fold(kb, p, t);
  gpu::BarrierOp::create(kb, loc);
  for (int64_t half = r.threads / 2; half >= 1; half /= 2) {
    Value active = arith::CmpIOp::create(kb, loc, arith::CmpIPredicate::ult, t, em.cst(kb, half));
    ifThen(kb, loc, active, [&](OpBuilder &tb) { em.halve(tb, t, half); });
    gpu::BarrierOp::create(kb, loc);
  }
  Value first = arith::CmpIOp::create(kb, loc, arith::CmpIPredicate::eq, t, em.cst(kb, 0));
  ifThen(kb, loc, first, [&](OpBuilder &tb) { em.finish(tb, p); });
  gpu::TerminatorOp::create(kb, loc);
}

void buildEmulation(OpBuilder &b, const RowReduction &r) {
  Location loc = r.op.getLoc();
  RowEmitter em{r, loc, {}};
  em.partials = memref::AllocOp::create(b, loc, MemRefType::get({r.threads}, em.elementType()));
  codegen::emulationLoop(b, loc, r.outputs, [&](OpBuilder &pb, Value p) {
    codegen::emulationLoop(pb, loc, r.threads, [&](OpBuilder &tb, Value t) { em.fold(tb, p, t); });
    for (int64_t half = r.threads / 2; half >= 1; half /= 2)
      codegen::emulationLoop(pb, loc, half, [&](OpBuilder &tb, Value t) { em.halve(tb, t, half); });
    em.finish(pb, p);
  });
  memref::DeallocOp::create(b, loc, em.partials);
}

struct GpuBlockReductionsPass : impl::KilnGpuBlockReductionsBase<GpuBlockReductionsPass> {
  using KilnGpuBlockReductionsBase::KilnGpuBlockReductionsBase;
  void runOnOperation() override {
    SmallVector<linalg::GenericOp> ops;
    getOperation().walk([&](linalg::GenericOp op) { ops.push_back(op); });
    for (linalg::GenericOp op : ops) {
      std::optional<RowReduction> r = matchRowReduction(op, maxOutputs, minRow);
      if (!r)
        continue;
      codegen::replaceWithKernel(op, r->fill, [&](OpBuilder &b) {
        emulate ? buildEmulation(b, *r) : buildLaunch(b, *r);
      });
    }
  }
};

} // namespace
} // namespace kiln
