// kiln-gpu-loops: bufferized linalg -> loop nests that upstream's
// parallel-loops-to-gpu turns into kernels, none left on the host.
//
// Upstream's convert-linalg-to-parallel-loops makes an scf.parallel of the
// outermost run of parallel loops only; a linalg.generic whose reduction loop
// sits between parallel ones (Kiln's matrix product is (m, k, n)) would be
// parallel over m alone. And a loop nest with no parallel loop stays a host
// loop, which would read device memory. Both are fixed here rather than in
// the lowering to linalg, which the CPU path shares.
//
// Each loop nest is then shaped for one thread per output element:
// - its parallel loops are collapsed into one, so that the tiling by 256 that
//   follows puts consecutive elements of the row-major output in consecutive
//   threads (coalesced accesses; mapping the outermost of several loops to
//   threadIdx.x made neighbouring threads 4 KB apart, and a 1024^3 matrix
//   product ran at 86 GFLOP/s on an H100);
// - an output element that a reduction loop reads and writes in every
//   iteration is loaded once, carried in a register and stored once, when
//   no other buffer of the loop may be the same memory;
// - float arithmetic may contract into FMA (fastmath<contract>), as the CPU
//   path's microkernels do.
#include "kiln/Codegen/GpuPasses.h"

#include "kiln/Conversion/BufferRoots.h"

#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Transforms/CSE.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Transforms/LoopInvariantCodeMotionUtils.h"

#include <numeric>

namespace kiln {
#define GEN_PASS_DEF_KILNGPULOOPS
#include "kiln/Codegen/GpuPasses.h.inc"
} // namespace kiln

using namespace mlir;

namespace kiln {
namespace {

/// Loop order with every parallel loop before every reduction loop, keeping
/// the relative order within each kind; empty if it already is.
SmallVector<unsigned> parallelFirst(linalg::GenericOp op) {
  SmallVector<unsigned> parallel, reduction;
  for (auto [i, kind] : llvm::enumerate(op.getIteratorTypesArray()))
    (linalg::isParallelIterator(kind) ? parallel : reduction).push_back(i);
  SmallVector<unsigned> order(parallel);
  llvm::append_range(order, reduction);
  for (unsigned i = 0; i < order.size(); ++i)
    if (order[i] != i)
      return order;
  return {};
}

/// Whether every memref that `loop` uses other than `mem` is known to be
/// other memory than `mem`.
bool aliasesNothingElse(scf::ForOp loop, Value mem) {
  Value root = codegen::rootBuffer(mem);
  if (!codegen::isKnownRoot(root))
    return false;
  WalkResult r = loop.walk([&](Operation *op) {
    for (Value v : op->getOperands()) {
      if (v == mem || !isa<MemRefType>(v.getType()))
        continue;
      Value other = codegen::rootBuffer(v);
      if (other == root || !codegen::isKnownRoot(other))
        return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return !r.wasInterrupted();
}

/// Whether `op` is a load or store of `mem` at an element that differs from
/// `idx` in a constant index (a register tile's other outputs).
bool disjointAccess(Operation *op, Value mem, ValueRange idx) {
  ValueRange other;
  if (auto l = dyn_cast<memref::LoadOp>(op); l && l.getMemRef() == mem)
    other = l.getIndices();
  else if (auto st = dyn_cast<memref::StoreOp>(op); st && st.getMemRef() == mem)
    other = st.getIndices();
  else
    return false;
  for (auto [a, b] : llvm::zip(idx, other)) {
    APInt x, y;
    if (matchPattern(a, m_ConstantInt(&x)) && matchPattern(b, m_ConstantInt(&y)) && x != y)
      return true;
  }
  return false;
}

/// The load that `store` (in `loop`'s body, at indices defined outside the
/// loop) can be paired with: `x = load mem[idx] ... store y, mem[idx]` in
/// the body, no other use of `mem` in the loop but accesses to other
/// constant elements, and no other buffer of the loop that may be `mem`.
memref::LoadOp registerPair(scf::ForOp loop, memref::StoreOp store,
                            DenseMap<Value, bool> &aliasFree) {
  Value mem = store.getMemRef();
  ValueRange idx = store.getIndices();
  if (!llvm::all_of(idx, [&](Value v) { return loop.isDefinedOutsideOfLoop(v); }))
    return {};
  memref::LoadOp load;
  bool otherUse = false;
  loop.walk([&](Operation *op) {
    if (op == store.getOperation() || !llvm::is_contained(op->getOperands(), mem))
      return;
    auto l = dyn_cast<memref::LoadOp>(op);
    if (l && !load && l->getBlock() == store->getBlock() && l.getMemRef() == mem &&
        llvm::equal(l.getIndices(), idx) && l->isBeforeInBlock(store))
      load = l;
    else if (!disjointAccess(op, mem, idx))
      otherUse = true;
  });
  if (otherUse || !load)
    return {};
  auto [it, inserted] = aliasFree.try_emplace(mem, false);
  if (inserted)
    it->second = aliasesNothingElse(loop, mem);
  return it->second ? load : memref::LoadOp();
}

/// Every output element that `loop` reads and writes in each iteration
/// (registerPair) is loaded once before the loop, carried as an iter_arg
/// and stored once after it: all of them in one new loop, which leaves the
/// loads and stores in the parent's body for the parent to promote in turn.
void accumulateInRegisters(RewriterBase &rw, scf::ForOp loop) {
  moveLoopInvariantCode(cast<LoopLikeOpInterface>(loop.getOperation()));
  SmallVector<std::pair<memref::LoadOp, memref::StoreOp>> pairs;
  DenseMap<Value, bool> aliasFree;
  for (auto store : loop.getBody()->getOps<memref::StoreOp>())
    if (memref::LoadOp load = registerPair(loop, store, aliasFree))
      pairs.push_back({load, store});
  if (pairs.empty())
    return;
  rw.setInsertionPoint(loop);
  SmallVector<Value> inits, stored;
  for (auto [load, store] : pairs) {
    inits.push_back(memref::LoadOp::create(rw, load.getLoc(), store.getMemRef(),
                                           store.getIndices()));
    stored.push_back(store.getValueToStore());
  }
  auto replaced = loop.replaceWithAdditionalYields(
      rw, inits, /*replaceInitOperandUsesInLoop=*/false,
      [&](OpBuilder &, Location, ArrayRef<BlockArgument>) { return stored; });
  if (failed(replaced))
    return;
  auto newLoop = cast<scf::ForOp>(replaced->getOperation());
  auto sums = newLoop.getRegionIterArgs().take_back(pairs.size());
  auto results = newLoop.getResults().take_back(pairs.size());
  rw.setInsertionPointAfter(newLoop);
  for (auto [i, pair] : llvm::enumerate(pairs)) {
    auto [load, store] = pair;
    rw.replaceAllUsesWith(load.getResult(), sums[i]);
    rw.eraseOp(load);
    memref::StoreOp::create(rw, store.getLoc(), results[i], store.getMemRef(),
                            store.getIndices());
    rw.eraseOp(store);
  }
}

/// A register tile for a contraction: each thread computes tm x tn outputs,
/// tm along `m` and tn along `n`, so that per step of the reduction it
/// loads tn values of the operand that varies with n and tm of one that
/// varies with m, for tm * tn multiply-adds (one thread per output loads
/// two values per multiply-add).
struct RegisterTile {
  unsigned m, n;
  int64_t tm, tn;
};

/// `n` is the output's innermost dim (contiguous in memory: neighbouring
/// threads stay close), `m` a parallel dim that the operand varying with n
/// does not use but another input does (a matrix product's rows; a
/// convolution's output channels, which share each input pixel). No tile
/// where the op is not such a contraction, where no power of two up to 8
/// divides both extents (no partial tiles), or where the tiles would leave
/// fewer than 2^16 threads (a batch-1 network's small layers need every
/// thread they have; below that the tile shrinks).
std::optional<RegisterTile> chooseRegisterTile(linalg::GenericOp op) {
  if (op.getNumDpsInputs() < 2 || op.getNumDpsInits() != 1 || op.getNumReductionLoops() == 0 ||
      op.getNumParallelLoops() < 2)
    return std::nullopt;
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  if (llvm::any_of(ranges, ShapedType::isDynamic))
    return std::nullopt;
  AffineMap out = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
  auto last = out.getNumResults() ? dyn_cast<AffineDimExpr>(out.getResults().back()) : nullptr;
  if (!last || ranges[last.getPosition()] < 2)
    return std::nullopt;
  unsigned n = last.getPosition();
  auto iterators = op.getIteratorTypesArray();
  std::optional<unsigned> m;
  for (OpOperand *x : op.getDpsInputOperands()) {
    AffineMap xMap = op.getMatchingIndexingMap(x);
    if (!xMap.isFunctionOfDim(n))
      continue;
    for (unsigned d = 0; d < ranges.size(); ++d) {
      if (d == n || !linalg::isParallelIterator(iterators[d]) || ranges[d] < 2 ||
          !out.isFunctionOfDim(d) || xMap.isFunctionOfDim(d))
        continue;
      bool usedByOther = llvm::any_of(op.getDpsInputOperands(), [&](OpOperand *y) {
        return y != x && op.getMatchingIndexingMap(y).isFunctionOfDim(d);
      });
      if (usedByOther && (!m || ranges[d] > ranges[*m]))
        m = d;
    }
    if (m)
      break;
  }
  if (!m)
    return std::nullopt;
  auto largestDivisor = [](int64_t extent) {
    for (int64_t t : {8, 4, 2})
      if (extent % t == 0)
        return t;
    return int64_t(1);
  };
  RegisterTile tile{*m, n, largestDivisor(ranges[*m]), largestDivisor(ranges[n])};
  int64_t outputs = 1;
  for (unsigned d = 0; d < ranges.size(); ++d)
    if (linalg::isParallelIterator(iterators[d]))
      outputs *= ranges[d];
  while (outputs / (tile.tm * tile.tn) < (int64_t(1) << 16) && tile.tm * tile.tn > 1)
    (tile.tm >= tile.tn ? tile.tm : tile.tn) /= 2;
  if (tile.tm * tile.tn < 4)
    return std::nullopt;
  return tile;
}

/// Tiles `op` by `tile` (1 along the other parallel dims): an scf.parallel
/// over tiles whose body runs the reduction loops outermost and the tile's
/// tm x tn outputs fully unrolled inside; accumulateInRegisters then keeps
/// the tm * tn sums in registers.
LogicalResult registerTile(RewriterBase &rw, linalg::GenericOp op, const RegisterTile &tile) {
  SmallVector<int64_t> sizes(op.getNumLoops(), 0);
  for (auto [d, kind] : llvm::enumerate(op.getIteratorTypesArray()))
    if (linalg::isParallelIterator(kind))
      sizes[d] = 1;
  sizes[tile.m] = tile.tm;
  sizes[tile.n] = tile.tn;
  linalg::LinalgTilingOptions options;
  options.setTileSizes(sizes).setLoopType(linalg::LinalgTilingLoopType::ParallelLoops);
  rw.setInsertionPoint(op);
  FailureOr<linalg::TiledLinalgOp> tiled = linalg::tileLinalgOp(rw, op, options);
  if (failed(tiled))
    return failure();
  rw.eraseOp(op);
  auto inner = cast<linalg::GenericOp>(tiled->op.getOperation());
  SmallVector<unsigned> reductionsFirst, parallel;
  for (auto [d, kind] : llvm::enumerate(inner.getIteratorTypesArray()))
    (linalg::isParallelIterator(kind) ? parallel : reductionsFirst).push_back(d);
  size_t numParallel = parallel.size();
  llvm::append_range(reductionsFirst, parallel);
  rw.setInsertionPoint(inner);
  FailureOr<linalg::GenericOp> swapped = linalg::interchangeGenericOp(rw, inner, reductionsFirst);
  if (failed(swapped))
    return failure();
  rw.setInsertionPoint(*swapped);
  FailureOr<linalg::LinalgLoops> loops = linalg::linalgOpToLoops(rw, *swapped);
  if (failed(loops))
    return failure();
  rw.eraseOp(*swapped);
  // Innermost first: unrolling a loop copies its (unrolled) body.
  for (Operation *loop : llvm::reverse(llvm::ArrayRef(*loops).take_back(numParallel)))
    if (failed(loopUnrollFull(cast<scf::ForOp>(loop))))
      return failure();
  return success();
}

struct GpuLoopsPass : impl::KilnGpuLoopsBase<GpuLoopsPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    IRRewriter rw(&getContext());

    for (auto copy : llvm::to_vector(func.getOps<memref::CopyOp>())) {
      rw.setInsertionPoint(copy);
      rw.replaceOpWithNewOp<linalg::CopyOp>(copy, copy.getSource(), copy.getTarget());
    }
    SmallVector<linalg::LinalgOp> ops;
    func.walk([&](linalg::LinalgOp op) { ops.push_back(op); });
    for (linalg::LinalgOp op : ops) {
      if (auto generic = dyn_cast<linalg::GenericOp>(op.getOperation())) {
        if (SmallVector<unsigned> order = parallelFirst(generic); !order.empty()) {
          rw.setInsertionPoint(generic);
          auto swapped = linalg::interchangeGenericOp(rw, generic, order);
          if (failed(swapped)) {
            generic.emitOpError("cannot reorder its loops for the GPU");
            return signalPassFailure();
          }
          op = *swapped;
        }
        if (std::optional<RegisterTile> tile = chooseRegisterTile(cast<linalg::GenericOp>(op))) {
          if (failed(registerTile(rw, cast<linalg::GenericOp>(op), *tile))) {
            op.emitOpError("cannot be tiled for the GPU");
            return signalPassFailure();
          }
          continue;
        }
      }
      rw.setInsertionPoint(op);
      auto loops = linalg::linalgOpToParallelLoops(rw, op);
      if (failed(loops)) {
        op.emitOpError("cannot be lowered to loops for the GPU");
        return signalPassFailure();
      }
      rw.eraseOp(op);
    }

    // A top-level loop nest without a parallel loop: one GPU thread runs it.
    for (Block &block : func.getBody())
      for (auto loop : llvm::to_vector(block.getOps<scf::ForOp>())) {
        Location loc = loop.getLoc();
        rw.setInsertionPoint(loop);
        Value zero = arith::ConstantIndexOp::create(rw, loc, 0);
        Value one = arith::ConstantIndexOp::create(rw, loc, 1);
        auto wrapper = scf::ParallelOp::create(rw, loc, ValueRange{zero}, ValueRange{one},
                                               ValueRange{one});
        rw.moveOpBefore(loop, wrapper.getBody()->getTerminator());
      }

    // Unrolled tiles index their outputs with affine.apply of constants:
    // folded, and equal indices made one value (the lowering computes a
    // load's and a store's separately), accesses can be told apart.
    if (failed(applyPatternsGreedily(func, RewritePatternSet(&getContext()))))
      return signalPassFailure();
    DominanceInfo dominance;
    eliminateCommonSubExpressions(rw, dominance, func);
    // Innermost loops first: each promotion leaves a load and a store around
    // the loop, in its parent's body, for the parent to promote in turn.
    SmallVector<scf::ForOp> fors;
    // (Not inside a kernel built before this pass, whose sums are in
    // registers already.)
    func.walk([&](scf::ForOp loop) {
      if (!loop->getParentOfType<gpu::LaunchOp>())
        fors.push_back(loop);
    });
    for (scf::ForOp loop : fors)
      accumulateInRegisters(rw, loop);

    for (Block &block : func.getBody())
      for (auto par : llvm::to_vector(block.getOps<scf::ParallelOp>()))
        if (par.getNumLoops() > 1) {
          std::vector<unsigned> all(par.getNumLoops());
          std::iota(all.begin(), all.end(), 0u);
          collapseParallelLoops(rw, par, {all});
        }

    func.walk([&](arith::ArithFastMathInterface op) {
      auto flags = op.getFastMathFlagsAttr();
      auto value = (flags ? flags.getValue() : arith::FastMathFlags::none) |
                   arith::FastMathFlags::contract;
      op->setAttr(op.getFastMathAttrName(), arith::FastMathFlagsAttr::get(&getContext(), value));
    });
  }
};

} // namespace
} // namespace kiln
