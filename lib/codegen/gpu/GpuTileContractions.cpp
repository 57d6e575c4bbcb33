// kiln-gpu-tile-contractions: matrix products and convolutions as
// shared-memory tiled GPU kernels (the classic SGEMM structure: block tile,
// K-slices staged in shared memory, a register tile per thread).
//
// Why our own rather than upstream's transform-dialect GPU recipes: Kiln's
// contractions are linalg.generic ops in the importer's own dim order
// (a convolution is (n, g, f, c, kh, kw, oh, ow) with strided input maps),
// and one rule has to cover all of them without a per-model script. So a
// contraction is read as C[batch][M][N] += A[batch][M][K] * B[batch][K][N]
// over groups of its own loops, each group flattened:
// - N: the parallel dims that only the input using the output's innermost
//   dim reads (a matrix product's columns; a convolution's n, oh, ow), in
//   output order, so consecutive threads store consecutive elements;
// - M: the parallel dims that only the other input reads (rows; output
//   channels);
// - batch: parallel dims both (or neither) read (a batched product's batch,
//   a convolution's group);
// - K: every reduction dim.
// The operands are read through the op's own indexing maps at the
// delinearized indices, which is an implicit GEMM for convolutions.
//
// A block of 256 threads (16 x 16) computes a BM x BN tile of C; each
// thread BM/16 x BN/16 outputs, strided by 16 so that a warp's shared
// loads are conflict-free and its global stores contiguous. Per K-slice
// of BK, the block stages A^T and B in shared memory (consecutive threads
// along each operand's contiguous dim; rows padded against bank conflicts;
// each thread's share of the next slice is loaded into registers before
// the current slice's multiply, so the global loads overlap it), one barrier, BK rank-1 updates from shared memory into
// registers, another barrier. Out-of-range rows, columns and K are loaded
// as zeros and not stored. A linalg.fill of C right before the op, or a
// copy into C from a buffer only a fill wrote, is taken over (C = fill
// value + sums), so no fill or copy kernel runs.
//
// Only where there is work for the whole GPU (min-blocks): a small
// product keeps kiln-gpu-loops' one-thread-per-register-tile kernels,
// which occupy more SMs there.
//
// emulate=true builds the same kernel for the CPU, blocks and threads as
// sequential loops with each phase between barriers run for all threads
// before the next (the accumulators in memory, one row per thread): the
// same index arithmetic, loads and stores (emitted by the same functions),
// so kiln-run --gpu-tensor-passes checks it on any machine.
#include "kiln/Codegen/GpuPasses.h"

#include "GpuKernelBuilder.h"
#include "GpuTileEmitter.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Utils/Utils.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace kiln {
#define GEN_PASS_DEF_KILNGPUTILECONTRACTIONS
#include "kiln/Codegen/GpuPasses.h.inc"
} // namespace kiln

using namespace mlir;

namespace kiln::gputiles {

/// The body is out + x * y (either order of either).
bool isMulAdd(linalg::GenericOp op) {
  Block &body = op.getRegion().front();
  if (body.getOperations().size() != 3)
    return false;
  auto add = body.getTerminator()->getOperand(0).getDefiningOp<arith::AddFOp>();
  if (!add)
    return false;
  Value out = body.getArgument(2);
  Value prod = add.getLhs() == out ? add.getRhs() : add.getRhs() == out ? add.getLhs() : Value();
  auto mul = prod ? prod.getDefiningOp<arith::MulFOp>() : nullptr;
  if (!mul)
    return false;
  Value x = body.getArgument(0), y = body.getArgument(1);
  return (mul.getLhs() == x && mul.getRhs() == y) || (mul.getLhs() == y && mul.getRhs() == x);
}

std::optional<Contraction> matchContraction(linalg::GenericOp op) {
  if (op.getNumDpsInputs() != 2)
    return std::nullopt;
  std::optional<SmallVector<int64_t>> ranges =
      codegen::kernelLoopRanges(op, [](Type t) { return t.isF32(); });
  if (!ranges || !isMulAdd(op))
    return std::nullopt;
  Contraction c;
  c.op = op;
  c.ranges = *ranges;
  AffineMap out = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
  if (out.getNumResults() == 0)
    return std::nullopt;
  auto iterators = op.getIteratorTypesArray();
  unsigned inner = cast<AffineDimExpr>(out.getResults().back()).getPosition();
  OpOperand *x = op.getDpsInputOperand(0), *y = op.getDpsInputOperand(1);
  AffineMap xMap = op.getMatchingIndexingMap(x), yMap = op.getMatchingIndexingMap(y);
  if (xMap.isFunctionOfDim(inner) == yMap.isFunctionOfDim(inner))
    return std::nullopt;
  std::tie(c.a, c.b) = xMap.isFunctionOfDim(inner) ? std::pair(y, x) : std::pair(x, y);
  AffineMap aMap = op.getMatchingIndexingMap(c.a), bMap = op.getMatchingIndexingMap(c.b);
  for (AffineExpr e : out.getResults()) {
    unsigned d = cast<AffineDimExpr>(e).getPosition();
    bool inA = aMap.isFunctionOfDim(d), inB = bMap.isFunctionOfDim(d);
    (inA && !inB ? c.m : !inA && inB ? c.n : c.batch).push_back(d);
  }
  for (unsigned d = 0; d < c.ranges.size(); ++d)
    if (!linalg::isParallelIterator(iterators[d]))
      c.k.push_back(d);
  if (c.m.empty() || c.n.empty() || c.k.empty())
    return std::nullopt;
  if (llvm::any_of(c.ranges, [](int64_t r) { return r == 0; }))
    return std::nullopt; // nothing to tile (and slice 0 would read outside K)
  for (unsigned d : c.batch)
    c.batchSize *= c.ranges[d];
  for (unsigned d : c.m)
    c.M *= c.ranges[d];
  for (unsigned d : c.n)
    c.N *= c.ranges[d];
  for (unsigned d : c.k)
    c.K *= c.ranges[d];
  c.fill = codegen::initFill(op);
  return c;
}

/// A (batched) matrix product rather than a convolution: one reduction dim
/// and operands read by projected permutations of the loops (no im2col
/// addresses: its staging is plain loads).
bool isMatrixProduct(const Contraction &c) {
  return c.k.size() == 1 &&
         c.op.getMatchingIndexingMap(c.a).isProjectedPermutation() &&
         c.op.getMatchingIndexingMap(c.b).isProjectedPermutation();
}

/// The largest block tile that fills at least `minBlocks` blocks and wastes
/// at most a fifth of its outputs on the edges; else, among those with
/// enough blocks, the least wasteful if it wastes at most half (a thin
/// product, such as a depthwise convolution's M = 1, is no tile's work).
std::optional<BlockTile> chooseTile(const Contraction &c, int64_t minBlocks, bool tf32) {
  static const BlockTile fmaTiles[] = {{128, 128, 8}, {64, 64, 16}};
  // Deeper slices for tensor cores: a slice of 8 would be one mma.sync step
  // per barrier. Two stages of 128 x 128 x 16 (18.5 KiB each) or 64 x 64
  // x 32 (18 KiB) stay under the 48 KiB of static shared memory.
  static const BlockTile tf32Tiles[] = {{128, 128, 16}, {64, 64, 32}};
  std::optional<BlockTile> best;
  double bestUse = 0;
  for (const BlockTile &t : tf32 ? ArrayRef(tf32Tiles) : ArrayRef(fmaTiles)) {
    int64_t rows = llvm::divideCeil(c.M, t.bm), cols = llvm::divideCeil(c.N, t.bn);
    if (rows > kMaxGridYZ || c.batchSize > kMaxGridYZ || rows * cols * c.batchSize < minBlocks)
      continue;
    double use = double(c.M) * double(c.N) / (double(rows * t.bm) * double(cols * t.bn));
    if (use >= 0.8)
      return t;
    if (!best || use > bestUse)
      best = t, bestUse = use;
  }
  if (bestUse < 0.5)
    return std::nullopt;
  return best;
}

/// TF32: how a thread copies its share of a K-slice of one operand. Its
/// slot runs along `along` (K, or its own group of M or N), flattened; 4
/// consecutive flat indices from a multiple of 4 are consecutive in memory
/// when the innermost dims of `along` are the operand's innermost dims, in
/// order, contiguous, spanning a multiple of 4 elements, and read by no
/// other index of the operand. When the addresses are also 16-byte aligned
/// (every other stride and the offset multiples of 4 elements, the
/// buffer's start aligned to 16: BufferAlignment; model inputs are not, as
/// their callers may pass any pointer), each thread copies runs of 4 with
/// one 16-byte cp.async. Otherwise one element per copy, consecutive
/// threads on consecutive elements: runs of 4 as four 4-byte copies were
/// tried and cost a 4096^3 MatMul 37 % on an H100 (each copy a 16-byte
/// stride across the warp: 4 wavefronts, and 4-way bank conflicts in the
/// shared tile).
CopyPlan copyPlan(const Contraction &c, OpOperand *operand, ArrayRef<unsigned> along,
                  const codegen::BufferAlignment &buffers) {
  constexpr int64_t kWidth = 4;
  CopyPlan synchronous;
  synchronous.async = false;
  auto type = dyn_cast<MemRefType>(operand->get().getType());
  if (!type || !type.getElementType().isF32() || !type.hasStaticShape())
    return synchronous;
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(type.getStridesAndOffset(strides, offset)) || ShapedType::isDynamic(offset) ||
      llvm::any_of(strides, ShapedType::isDynamic))
    return synchronous;
  if (!strides.empty() && strides.back() != 1)
    return synchronous;
  AffineMap map = c.op.getMatchingIndexingMap(operand);
  unsigned rank = map.getNumResults();
  // The run: trailing results that are `along`'s trailing dims.
  int64_t run = 1, stride = 1;
  unsigned r = rank;
  SmallVector<unsigned> runDims;
  for (unsigned gi = along.size(); r > 0 && gi > 0; --r, --gi) {
    auto d = dyn_cast<AffineDimExpr>(map.getResult(r - 1));
    if (!d || d.getPosition() != along[gi - 1] || strides[r - 1] != stride)
      break;
    runDims.push_back(d.getPosition());
    run *= c.ranges[d.getPosition()];
    if (type.getDimSize(r - 1) != c.ranges[d.getPosition()]) {
      --r; // a part of this dim: the run stops here
      break;
    }
    stride *= type.getDimSize(r - 1);
  }
  if (runDims.empty() || run % kWidth != 0 || offset % kWidth != 0 ||
      buffers.of(operand->get(), 4) % (kWidth * 4) != 0)
    return {};
  for (unsigned i = 0; i < rank; ++i) {
    bool inRun = i >= rank - runDims.size();
    if (!inRun && llvm::any_of(runDims, [&](unsigned d) { return map.getResult(i).isFunctionOfDim(d); }))
      return {};
    if (!inRun && strides[i] % kWidth != 0)
      return {};
  }
  return {kWidth, true};
}


// --- TileEmitter: what both kernels share, and the FMA kernel -------------

Value TileEmitter::guardedLoad(OpBuilder &b, OpOperand *operand, Value inside,
                  function_ref<void(OpBuilder &, SmallVectorImpl<Value> &)> setDims) const {
  auto load = [&](OpBuilder &nb) -> Value {
    SmallVector<Value> iv = blockIndices(nb);
    setDims(nb, iv);
    return memref::LoadOp::create(nb, loc, operand->get(), operandIndices(nb, operand, iv));
  };
  if (!inside)
    return load(b);
  auto cond = scf::IfOp::create(
      b, loc, inside,
      [&](OpBuilder &nb, Location) { scf::YieldOp::create(nb, loc, load(nb)); },
      [&](OpBuilder &nb, Location) {
        scf::YieldOp::create(
            nb, loc, ValueRange{arith::ConstantOp::create(nb, loc, nb.getF32FloatAttr(0))});
      });
  return cond.getResult(0);
}

bool TileEmitter::kInner(OpOperand *operand, ArrayRef<unsigned> group) const {
  AffineExpr last = c.op.getMatchingIndexingMap(operand).getResults().back();
  return last.isFunctionOfDim(c.k.back()) && !last.isFunctionOfDim(group.back());
}

Staging TileEmitter::staging(OpOperand *operand, ArrayRef<unsigned> group, int64_t span) const {
  if (!tf32)
    return {false, tile.bk, span + tile.pad()};
  if (kInner(operand, group))
    return {true, span, laneRuns && tile.bk == 16 ? 16 : tile.bk + 4};
  return {false, tile.bk, span + 8, laneRuns ? tile.bk / 4 : 0};
}

std::pair<Value, Value> TileEmitter::slot(OpBuilder &b, Value t, int64_t e, OpOperand *operand,
                             ArrayRef<unsigned> group, int64_t span, int64_t width) const {
  bool kInner = this->kInner(operand, group);
  int64_t inner = kInner ? tile.bk : span;
  Value flat = add(b, t, e);
  if (width > 1)
    flat = arith::MulIOp::create(b, loc, flat, cst(b, width));
  Value lo = arith::RemUIOp::create(b, loc, flat, cst(b, inner));
  Value hi = arith::DivUIOp::create(b, loc, flat, cst(b, inner));
  return kInner ? std::pair(lo, hi) : std::pair(hi, lo); // (ki, xi)
}

void TileEmitter::fetchOperand(OpBuilder &b, Value t, Value k0, OpOperand *operand,
                  ArrayRef<unsigned> group, int64_t extent, Value x0, int64_t span,
                  SmallVectorImpl<Value> &out) const {
  for (int64_t e = 0; e < span * tile.bk; e += kThreads) {
    auto [ki, xi] = slot(b, t, e, operand, group, span);
    Value x = arith::AddIOp::create(b, loc, x0, xi), k = arith::AddIOp::create(b, loc, k0, ki);
    Value inside = both(b, below(b, x, extent, span), below(b, k, c.K, tile.bk));
    out.push_back(guardedLoad(b, operand, inside, [&](OpBuilder &nb, SmallVectorImpl<Value> &iv) {
      delinearize(nb, x, group, iv);
      delinearize(nb, k, c.k, iv);
    }));
  }
}

SmallVector<Value> TileEmitter::fetch(OpBuilder &b, Value t, Value k0) const {
  Value m0 = arith::MulIOp::create(b, loc, blockM, cst(b, tile.bm));
  Value n0 = arith::MulIOp::create(b, loc, blockN, cst(b, tile.bn));
  SmallVector<Value> values;
  fetchOperand(b, t, k0, c.a, c.m, c.M, m0, tile.bm, values);
  fetchOperand(b, t, k0, c.b, c.n, c.N, n0, tile.bn, values);
  return values;
}

SmallVector<Value> TileEmitter::fetchNext(OpBuilder &b, Value t, Value k0) const {
  Value next = add(b, k0, tile.bk);
  Value more = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, next, cst(b, c.K));
  auto cond = scf::IfOp::create(
      b, loc, more,
      [&](OpBuilder &nb, Location) { scf::YieldOp::create(nb, loc, fetch(nb, t, next)); },
      [&](OpBuilder &nb, Location) { scf::YieldOp::create(nb, loc, zeros(nb, fetchedPerThread())); });
  return SmallVector<Value>(cond.getResults());
}

void TileEmitter::put(OpBuilder &b, Value t, ValueRange values) const {
  int64_t i = 0;
  for (auto [operand, group, span, dst, stage] :
       {std::tuple(c.a, ArrayRef<unsigned>(c.m), tile.bm, aTile, aStage),
        std::tuple(c.b, ArrayRef<unsigned>(c.n), tile.bn, bTile, bStage)})
    for (int64_t e = 0; e < span * tile.bk; e += kThreads) {
      auto [ki, xi] = slot(b, t, e, operand, group, span);
      auto [row, col] = stage.at(b, loc, ki, xi);
      Value v = values[i++];
      memref::StoreOp::create(b, loc, v, dst, ValueRange{row, col});
    }
}

SmallVector<Value> TileEmitter::multiply(OpBuilder &b, Value t, ValueRange acc) const {
  Value tx = arith::RemUIOp::create(b, loc, t, cst(b, kSide));
  Value ty = arith::DivUIOp::create(b, loc, t, cst(b, kSide));
  SmallVector<Value> sums(acc.begin(), acc.end());
  for (int64_t kk = 0; kk < tile.bk; ++kk) {
    Value kIdx = cst(b, kk);
    SmallVector<Value> as, bs;
    for (int64_t i = 0; i < tile.tm(); ++i)
      as.push_back(memref::LoadOp::create(b, loc, aTile, ValueRange{kIdx, add(b, ty, kSide * i)}));
    for (int64_t j = 0; j < tile.tn(); ++j)
      bs.push_back(memref::LoadOp::create(b, loc, bTile, ValueRange{kIdx, add(b, tx, kSide * j)}));
    for (int64_t i = 0; i < tile.tm(); ++i)
      for (int64_t j = 0; j < tile.tn(); ++j) {
        Value &s = sums[i * tile.tn() + j];
        s = math::FmaOp::create(b, loc, as[i], bs[j], s);
      }
  }
  return sums;
}

void TileEmitter::store(OpBuilder &b, Value t, ValueRange acc) const {
  Value bm0 = arith::MulIOp::create(b, loc, blockM, cst(b, tile.bm));
  Value bn0 = arith::MulIOp::create(b, loc, blockN, cst(b, tile.bn));
  // Where accumulator idx goes in the block's tile: the FMA kernel's
  // (ty + 16 i, tx + 16 j) for idx = i * tn + j, or the mma layout's.
  std::function<std::pair<Value, Value>(int64_t)> position;
  if (tf32) {
    WarpLane w = warpLane(b, t);
    position = [&, w](int64_t idx) { return accumulatorAt(b, w, idx); };
  } else {
    Value tx = arith::RemUIOp::create(b, loc, t, cst(b, kSide));
    Value ty = arith::DivUIOp::create(b, loc, t, cst(b, kSide));
    position = [&, tx, ty](int64_t idx) {
      return std::pair(add(b, ty, kSide * (idx / tile.tn())), add(b, tx, kSide * (idx % tile.tn())));
    };
  }
  OpOperand *out = c.op.getDpsInitOperand(0);
  for (int64_t idx = 0; idx < (int64_t)acc.size(); ++idx) {
      auto [mi, ni] = position(idx);
      Value m = arith::AddIOp::create(b, loc, bm0, mi), n = arith::AddIOp::create(b, loc, bn0, ni);
      Value sum = acc[idx];
      auto update = [&](OpBuilder &nb) {
        SmallVector<Value> iv = blockIndices(nb);
        delinearize(nb, m, c.m, iv);
        delinearize(nb, n, c.n, iv);
        SmallVector<Value> idx = operandIndices(nb, out, iv);
        Value old = c.fill ? c.fill.value
                           : memref::LoadOp::create(nb, loc, out->get(), idx).getResult();
        Value updated = arith::AddFOp::create(nb, loc, old, sum);
        memref::StoreOp::create(nb, loc, updated, out->get(), idx);
      };
      if (Value inside = both(b, below(b, m, c.M, tile.bm), below(b, n, c.N, tile.bn))) {
        auto cond = scf::IfOp::create(b, loc, inside, /*withElseRegion=*/false);
        OpBuilder nb = cond.getThenBodyBuilder();
        update(nb);
      } else {
        update(b);
      }
    }
}

} // namespace kiln::gputiles

namespace kiln {
namespace {
using namespace gputiles;


/// The kernel as one gpu.launch: the phases separated by barriers, the
/// accumulators carried in registers across K-slices.
void buildLaunch(OpBuilder &b, const Contraction &c, BlockTile tile, bool tf32,
                 std::pair<CopyPlan, CopyPlan> copies) {
  Location loc = c.op.getLoc();
  TileEmitter em(c, tile, tf32, /*emulate=*/false, copies);
  auto workgroup = gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Workgroup);
  Type aType = em.tileType(em.aStage, workgroup);
  Type bType = em.tileType(em.bStage, workgroup);
  Value one = em.cst(b, 1);
  auto launch = gpu::LaunchOp::create(b, loc, em.cst(b, em.gridN()), em.cst(b, em.gridM()),
                                      em.cst(b, c.batchSize), em.cst(b, kThreads), one, one,
                                      /*dynamicSharedMemorySize=*/nullptr, /*asyncTokenType=*/nullptr,
                                      /*asyncDependencies=*/{}, TypeRange{aType, bType});
  if (tf32)
    launch.setFunctionAttr(FlatSymbolRefAttr::get(b.getContext(), kTf32TileKernelName));
  Block &body = launch.getBody().front();
  OpBuilder kb = OpBuilder::atBlockBegin(&body);
  em.aTile = launch.getWorkgroupAttributions()[0];
  em.bTile = launch.getWorkgroupAttributions()[1];
  em.blockN = launch.getBlockIds().x;
  em.blockM = launch.getBlockIds().y;
  em.blockBatch = launch.getBlockIds().z;
  Value t = launch.getThreadIds().x;
  if (tf32) {
    // Slice 0 into stage 0; then per slice: wait for this thread's copies,
    // a barrier (every thread's copies of slice i have landed, and every
    // warp is done with slice i - 1, whose stage is refilled next), the
    // copies of slice i + 1 into the other stage, the mma.sync of slice i.
    em.copySlice(kb, t, em.cst(kb, 0), em.cst(kb, 0));
    em.commitCopies(kb);
    auto slices = scf::ForOp::create(
        kb, loc, em.cst(kb, 0), em.cst(kb, c.K), em.cst(kb, tile.bk), em.zeroSums(kb),
        [&](OpBuilder &lb, Location, Value k0, ValueRange acc) {
          Value stage = em.stageOf(lb, k0);
          em.waitCopies(lb);
          gpu::BarrierOp::create(lb, loc);
          Value next = em.add(lb, k0, tile.bk);
          Value more = arith::CmpIOp::create(lb, loc, arith::CmpIPredicate::ult, next, em.cst(lb, c.K));
          auto ifMore = scf::IfOp::create(lb, loc, more, /*withElseRegion=*/false);
          OpBuilder nb = ifMore.getThenBodyBuilder();
          em.copySlice(nb, t, next, em.otherStage(nb, stage));
          em.commitCopies(lb);
          scf::YieldOp::create(lb, loc, em.mmaMultiply(lb, t, stage, acc));
        });
    em.store(kb, t, slices.getResults());
    gpu::TerminatorOp::create(kb, loc);
    return;
  }
  em.put(kb, t, em.fetch(kb, t, em.cst(kb, 0)));
  gpu::BarrierOp::create(kb, loc);
  auto slices = scf::ForOp::create(
      kb, loc, em.cst(kb, 0), em.cst(kb, c.K), em.cst(kb, tile.bk), em.zeroSums(kb),
      [&](OpBuilder &lb, Location, Value k0, ValueRange acc) {
        SmallVector<Value> next = em.fetchNext(lb, t, k0);
        SmallVector<Value> sums = em.multiply(lb, t, acc);
        gpu::BarrierOp::create(lb, loc);
        em.put(lb, t, next);
        gpu::BarrierOp::create(lb, loc);
        scf::YieldOp::create(lb, loc, sums);
      });
  em.store(kb, t, slices.getResults());
  gpu::TerminatorOp::create(kb, loc);
}

/// The same kernel for the CPU (emulate=true): blocks and threads as
/// loops, each phase run for every thread before the next one starts.
void buildEmulation(OpBuilder &b, const Contraction &c, BlockTile tile, bool tf32,
                    std::pair<CopyPlan, CopyPlan> copies) {
  Location loc = c.op.getLoc();
  TileEmitter em(c, tile, tf32, /*emulate=*/true, copies);
  int64_t accs = tile.tm() * tile.tn();
  em.aTile = memref::AllocOp::create(b, loc, em.tileType(em.aStage, {}));
  em.bTile = memref::AllocOp::create(b, loc, em.tileType(em.bStage, {}));
  Value accMem = memref::AllocOp::create(b, loc, em.rowsType(kThreads, accs));
  // TF32: every thread's fragment registers, loaded before any mma.sync
  // of the warp reads them (mma.sync is a warp's collective). FMA: each
  // thread's share of the next slice, from its fetch to its put.
  Value fragMem, fetchedMem;
  if (tf32)
    fragMem = memref::AllocOp::create(b, loc, em.rowsType(kThreads, em.fragmentsPerThread()));
  else
    fetchedMem = memref::AllocOp::create(b, loc, em.rowsType(kThreads, em.fetchedPerThread()));
  auto forEach = [&](OpBuilder &ob, int64_t n, function_ref<void(OpBuilder &, Value)> fn) {
    codegen::emulationLoop(ob, loc, n, fn);
  };
  // Each thread's values that live across phases: one row per thread.
  auto loadRow = [&](OpBuilder &ob, Value mem, Value t) {
    SmallVector<Value> row;
    for (int64_t i = 0, n = cast<MemRefType>(mem.getType()).getDimSize(1); i < n; ++i)
      row.push_back(memref::LoadOp::create(ob, loc, mem, ValueRange{t, em.cst(ob, i)}));
    return row;
  };
  auto storeRow = [&](OpBuilder &ob, Value mem, Value t, ValueRange row) {
    for (auto [i, v] : llvm::enumerate(row))
      memref::StoreOp::create(ob, loc, v, mem, ValueRange{t, em.cst(ob, i)});
  };
  forEach(b, c.batchSize, [&](OpBuilder &b1, Value bz) {
    forEach(b1, em.gridM(), [&](OpBuilder &b2, Value by) {
      forEach(b2, em.gridN(), [&](OpBuilder &b3, Value bx) {
        em.blockBatch = bz, em.blockM = by, em.blockN = bx;
        forEach(b3, kThreads, [&](OpBuilder &tb, Value t) {
          storeRow(tb, accMem, t, em.zeroSums(tb));
          if (tf32)
            em.copySlice(tb, t, em.cst(tb, 0), em.cst(tb, 0));
          else
            em.put(tb, t, em.fetch(tb, t, em.cst(tb, 0)));
        });
        scf::ForOp::create(
            b3, loc, em.cst(b3, 0), em.cst(b3, c.K), em.cst(b3, tile.bk), ValueRange{},
            [&](OpBuilder &lb, Location, Value k0, ValueRange) {
              if (tf32) {
                // The GPU's order: slice i + 1 into the other stage, then
                // the fragments and mma.sync of slice i from its stage.
                Value stage = em.stageOf(lb, k0);
                Value next = em.add(lb, k0, tile.bk);
                Value more =
                    arith::CmpIOp::create(lb, loc, arith::CmpIPredicate::ult, next, em.cst(lb, c.K));
                auto ifMore = scf::IfOp::create(lb, loc, more, /*withElseRegion=*/false);
                OpBuilder nb = ifMore.getThenBodyBuilder();
                Value other = em.otherStage(nb, stage);
                forEach(nb, kThreads, [&](OpBuilder &tb, Value t) { em.copySlice(tb, t, next, other); });
                forEach(lb, kThreads, [&](OpBuilder &tb, Value t) {
                  storeRow(tb, fragMem, t, em.fragments(tb, t, stage));
                });
                forEach(lb, kThreads, [&](OpBuilder &tb, Value t) { em.emulatedMma(tb, t, fragMem, accMem); });
              } else {
                forEach(lb, kThreads, [&](OpBuilder &tb, Value t) {
                  storeRow(tb, fetchedMem, t, em.fetchNext(tb, t, k0));
                });
                forEach(lb, kThreads, [&](OpBuilder &tb, Value t) {
                  storeRow(tb, accMem, t, em.multiply(tb, t, loadRow(tb, accMem, t)));
                });
                forEach(lb, kThreads, [&](OpBuilder &tb, Value t) {
                  em.put(tb, t, loadRow(tb, fetchedMem, t));
                });
              }
              scf::YieldOp::create(lb, loc);
            });
        forEach(b3, kThreads, [&](OpBuilder &tb, Value t) { em.store(tb, t, loadRow(tb, accMem, t)); });
      });
    });
  });
  for (Value mem : {em.aTile, em.bTile, accMem, fetchedMem, fragMem})
    if (mem)
      memref::DeallocOp::create(b, loc, mem);
}

struct GpuTileContractionsPass : impl::KilnGpuTileContractionsBase<GpuTileContractionsPass> {
  using KilnGpuTileContractionsBase::KilnGpuTileContractionsBase;
  void runOnOperation() override {
    SmallVector<linalg::GenericOp> ops;
    getOperation().walk([&](linalg::GenericOp op) { ops.push_back(op); });
    codegen::BufferAlignment buffers(getOperation(), globalAlignment);
    for (linalg::GenericOp op : ops) {
      std::optional<Contraction> c = matchContraction(op);
      if (!c)
        continue;
      // A product too small for min-blocks may still take a tile at
      // product-min-blocks (the tile the first choice would have been
      // is kept: 64x64 with 256 blocks rather than 128x128 with 64).
      std::optional<BlockTile> tile = chooseTile(*c, minBlocks, tf32);
      if (!tile && productMinBlocks && isMatrixProduct(*c))
        tile = chooseTile(*c, productMinBlocks, tf32);
      if (!tile)
        continue;
      // TF32 copies along K for an operand its threads fetch along K, else
      // along its own group (slot).
      std::pair<CopyPlan, CopyPlan> copies;
      if (tf32) {
        auto along = [&](OpOperand *operand, ArrayRef<unsigned> own) {
          AffineExpr last = c->op.getMatchingIndexingMap(operand).getResults().back();
          bool alongK = last.isFunctionOfDim(c->k.back()) && !last.isFunctionOfDim(own.back());
          return alongK ? ArrayRef<unsigned>(c->k) : own;
        };
        copies = {copyPlan(*c, c->a, along(c->a, c->m), buffers),
                  copyPlan(*c, c->b, along(c->b, c->n), buffers)};
      }
      codegen::replaceWithKernel(op, c->fill, [&](OpBuilder &b) {
        emulate ? buildEmulation(b, *c, *tile, tf32, copies)
                : buildLaunch(b, *c, *tile, tf32, copies);
      });
    }
  }
};

} // namespace
} // namespace kiln
