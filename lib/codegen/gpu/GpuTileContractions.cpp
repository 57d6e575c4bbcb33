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

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Utils/Utils.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

namespace kiln {
#define GEN_PASS_DEF_KILNGPUTILECONTRACTIONS
#include "kiln/Codegen/GpuPasses.h.inc"
} // namespace kiln

using namespace mlir;

namespace kiln {
namespace {

constexpr int64_t kSide = 16;             // threads per side of a block
constexpr int64_t kThreads = kSide * kSide;
constexpr int64_t kMaxGridYZ = 65535;

struct BlockTile {
  int64_t bm, bn, bk;
  int64_t tm() const { return bm / kSide; }
  /// Shared tile rows ([bk][span + pad]) padded so that staging along K
  /// (bk consecutive threads per column) hits 32 distinct banks.
  int64_t pad() const { return 32 / bk; }
  int64_t tn() const { return bn / kSide; }
};

/// C[batch][M][N] += A[batch][M][K] * B[batch][K][N] over groups of the
/// generic's loops (file comment).
struct Contraction {
  mutable linalg::GenericOp op; // (its accessors are not const)
  OpOperand *a = nullptr, *b = nullptr;
  SmallVector<unsigned> batch, m, n, k;
  SmallVector<int64_t> ranges;
  int64_t batchSize = 1, M = 1, N = 1, K = 1;
  codegen::InitFill fill; // C's fill, taken over
};

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

/// The largest block tile that fills at least `minBlocks` blocks and wastes
/// at most a fifth of its outputs on the edges; else, among those with
/// enough blocks, the least wasteful if it wastes at most half (a thin
/// product, such as a depthwise convolution's M = 1, is no tile's work).
std::optional<BlockTile> chooseTile(const Contraction &c, int64_t minBlocks) {
  static const BlockTile tiles[] = {{128, 128, 8}, {64, 64, 16}};
  std::optional<BlockTile> best;
  double bestUse = 0;
  for (const BlockTile &t : tiles) {
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

/// Emits one block's phases for a thread `t` (file comment). Block ids and
/// the shared tiles are set by the caller, per mode.
struct TileEmitter {
  const Contraction &c;
  BlockTile tile;
  Location loc;
  Value aTile, bTile; // A^T: [bk][bm + pad], B: [bk][bn + pad]
  Value blockN, blockM, blockBatch;

  Value cst(OpBuilder &b, int64_t v) const { return codegen::indexConstant(b, loc, v); }
  Value add(OpBuilder &b, Value x, int64_t v) const {
    return v == 0 ? x : arith::AddIOp::create(b, loc, x, cst(b, v)).getResult();
  }

  void delinearize(OpBuilder &b, Value flat, ArrayRef<unsigned> group,
                   SmallVectorImpl<Value> &iv) const {
    codegen::delinearizeLoops(b, loc, flat, group, c.ranges, iv);
  }
  SmallVector<Value> operandIndices(OpBuilder &b, OpOperand *operand, ArrayRef<Value> iv) const {
    return codegen::operandIndices(b, loc, c.op, operand, iv);
  }

  /// Loop indices with the batch dims of this block and the others zero.
  SmallVector<Value> blockIndices(OpBuilder &b) const {
    SmallVector<Value> iv(c.ranges.size(), cst(b, 0));
    if (!c.batch.empty())
      delinearize(b, blockBatch, c.batch, iv);
    return iv;
  }

  /// `x < bound` as an i1, or nothing when no tile of `step` crosses it.
  Value below(OpBuilder &b, Value x, int64_t bound, int64_t step) const {
    if (bound % step == 0)
      return {};
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, x, cst(b, bound));
  }
  Value both(OpBuilder &b, Value x, Value y) const {
    if (!x || !y)
      return x ? x : y;
    return arith::AndIOp::create(b, loc, x, y);
  }

  /// operand[indices of (m or n, k)], or 0 where `inside` is false.
  Value guardedLoad(OpBuilder &b, OpOperand *operand, Value inside,
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

  /// Where thread `t`'s e-th element of a K-slice of one operand goes in
  /// its shared tile ([k][x], x: the operand's own group, `span` of it).
  /// Consecutive threads go along the group the operand's innermost dim
  /// follows (coalesced): K for a row-major A or a transposed B, else x.
  std::pair<Value, Value> slot(OpBuilder &b, Value t, int64_t e, OpOperand *operand,
                               ArrayRef<unsigned> group, int64_t span) const {
    AffineExpr last = c.op.getMatchingIndexingMap(operand).getResults().back();
    bool kInner = last.isFunctionOfDim(c.k.back()) && !last.isFunctionOfDim(group.back());
    int64_t inner = kInner ? tile.bk : span;
    Value flat = add(b, t, e);
    Value lo = arith::RemUIOp::create(b, loc, flat, cst(b, inner));
    Value hi = arith::DivUIOp::create(b, loc, flat, cst(b, inner));
    return kInner ? std::pair(lo, hi) : std::pair(hi, lo); // (ki, xi)
  }

  /// Thread `t`'s elements of K-slice `k0` of one operand (x from `x0`),
  /// read from global memory, 0 outside the operand.
  void fetchOperand(OpBuilder &b, Value t, Value k0, OpOperand *operand,
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

  /// Thread `t`'s elements of K-slice `k0` of A and B (fetchOperand).
  SmallVector<Value> fetch(OpBuilder &b, Value t, Value k0) const {
    Value m0 = arith::MulIOp::create(b, loc, blockM, cst(b, tile.bm));
    Value n0 = arith::MulIOp::create(b, loc, blockN, cst(b, tile.bn));
    SmallVector<Value> values;
    fetchOperand(b, t, k0, c.a, c.m, c.M, m0, tile.bm, values);
    fetchOperand(b, t, k0, c.b, c.n, c.N, n0, tile.bn, values);
    return values;
  }
  int64_t fetchedPerThread() const { return (tile.bm + tile.bn) * tile.bk / kThreads; }

  /// fetch(k0 + bk) while there is such a slice, else zeros: issued before
  /// the multiply of slice k0, so that its global loads are in flight
  /// while the block computes.
  SmallVector<Value> fetchNext(OpBuilder &b, Value t, Value k0) const {
    Value next = add(b, k0, tile.bk);
    Value more = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, next, cst(b, c.K));
    auto cond = scf::IfOp::create(
        b, loc, more,
        [&](OpBuilder &nb, Location) { scf::YieldOp::create(nb, loc, fetch(nb, t, next)); },
        [&](OpBuilder &nb, Location) { scf::YieldOp::create(nb, loc, zeros(nb, fetchedPerThread())); });
    return SmallVector<Value>(cond.getResults());
  }

  /// Stores thread `t`'s fetched elements into the shared tiles.
  void put(OpBuilder &b, Value t, ValueRange values) const {
    int64_t i = 0;
    for (auto [operand, group, span, dst] :
         {std::tuple(c.a, ArrayRef<unsigned>(c.m), tile.bm, aTile),
          std::tuple(c.b, ArrayRef<unsigned>(c.n), tile.bn, bTile)})
      for (int64_t e = 0; e < span * tile.bk; e += kThreads) {
        auto [ki, xi] = slot(b, t, e, operand, group, span);
        memref::StoreOp::create(b, loc, values[i++], dst, ValueRange{ki, xi});
      }
  }

  /// Thread `t`'s tm x tn accumulators (row-major) after the staged slice.
  SmallVector<Value> multiply(OpBuilder &b, Value t, ValueRange acc) const {
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

  /// C += thread `t`'s accumulators, within C's bounds (C = the fill's
  /// value + the accumulators, when the kernel takes the fill over).
  void store(OpBuilder &b, Value t, ValueRange acc) const {
    Value tx = arith::RemUIOp::create(b, loc, t, cst(b, kSide));
    Value ty = arith::DivUIOp::create(b, loc, t, cst(b, kSide));
    Value m0 = arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, blockM, cst(b, tile.bm)), ty);
    Value n0 = arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, blockN, cst(b, tile.bn)), tx);
    OpOperand *out = c.op.getDpsInitOperand(0);
    for (int64_t i = 0; i < tile.tm(); ++i)
      for (int64_t j = 0; j < tile.tn(); ++j) {
        Value m = add(b, m0, kSide * i), n = add(b, n0, kSide * j);
        Value sum = acc[i * tile.tn() + j];
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

  SmallVector<Value> zeros(OpBuilder &b, int64_t n) const {
    Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0));
    return SmallVector<Value>(n, zero);
  }
  SmallVector<Value> zeroSums(OpBuilder &b) const { return zeros(b, tile.tm() * tile.tn()); }
  MemRefType tileType(int64_t rows, int64_t cols, Attribute memorySpace) const {
    return MemRefType::get({rows, cols}, Float32Type::get(c.op.getContext()), AffineMap(),
                           memorySpace);
  }
  int64_t gridN() const { return llvm::divideCeil(c.N, tile.bn); }
  int64_t gridM() const { return llvm::divideCeil(c.M, tile.bm); }
};

/// The kernel as one gpu.launch: the phases separated by barriers, the
/// accumulators carried in registers across K-slices.
void buildLaunch(OpBuilder &b, const Contraction &c, BlockTile tile) {
  Location loc = c.op.getLoc();
  TileEmitter em{c, tile, loc, {}, {}, {}, {}, {}};
  auto workgroup = gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Workgroup);
  Type aType = em.tileType(tile.bk, tile.bm + tile.pad(), workgroup);
  Type bType = em.tileType(tile.bk, tile.bn + tile.pad(), workgroup);
  Value one = em.cst(b, 1);
  auto launch = gpu::LaunchOp::create(b, loc, em.cst(b, em.gridN()), em.cst(b, em.gridM()),
                                      em.cst(b, c.batchSize), em.cst(b, kThreads), one, one,
                                      /*dynamicSharedMemorySize=*/nullptr, /*asyncTokenType=*/nullptr,
                                      /*asyncDependencies=*/{}, TypeRange{aType, bType});
  Block &body = launch.getBody().front();
  OpBuilder kb = OpBuilder::atBlockBegin(&body);
  em.aTile = launch.getWorkgroupAttributions()[0];
  em.bTile = launch.getWorkgroupAttributions()[1];
  em.blockN = launch.getBlockIds().x;
  em.blockM = launch.getBlockIds().y;
  em.blockBatch = launch.getBlockIds().z;
  Value t = launch.getThreadIds().x;
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
void buildEmulation(OpBuilder &b, const Contraction &c, BlockTile tile) {
  Location loc = c.op.getLoc();
  TileEmitter em{c, tile, loc, {}, {}, {}, {}, {}};
  int64_t accs = tile.tm() * tile.tn();
  em.aTile = memref::AllocOp::create(b, loc, em.tileType(tile.bk, tile.bm + tile.pad(), {}));
  em.bTile = memref::AllocOp::create(b, loc, em.tileType(tile.bk, tile.bn + tile.pad(), {}));
  Value accMem = memref::AllocOp::create(b, loc, em.tileType(kThreads, accs, {}));
  auto forEach = [&](OpBuilder &ob, int64_t n, function_ref<void(OpBuilder &, Value)> fn) {
    codegen::emulationLoop(ob, loc, n, fn);
  };
  // Each thread's values that live across phases (its sums; its share of
  // the next slice, from its fetch to its put): one row per thread.
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
  Value fetchedMem =
      memref::AllocOp::create(b, loc, em.tileType(kThreads, em.fetchedPerThread(), {}));
  forEach(b, c.batchSize, [&](OpBuilder &b1, Value bz) {
    forEach(b1, em.gridM(), [&](OpBuilder &b2, Value by) {
      forEach(b2, em.gridN(), [&](OpBuilder &b3, Value bx) {
        em.blockBatch = bz, em.blockM = by, em.blockN = bx;
        forEach(b3, kThreads, [&](OpBuilder &tb, Value t) {
          storeRow(tb, accMem, t, em.zeroSums(tb));
          em.put(tb, t, em.fetch(tb, t, em.cst(tb, 0)));
        });
        scf::ForOp::create(b3, loc, em.cst(b3, 0), em.cst(b3, c.K), em.cst(b3, tile.bk),
                           ValueRange{}, [&](OpBuilder &lb, Location, Value k0, ValueRange) {
                             forEach(lb, kThreads, [&](OpBuilder &tb, Value t) {
                               storeRow(tb, fetchedMem, t, em.fetchNext(tb, t, k0));
                             });
                             forEach(lb, kThreads, [&](OpBuilder &tb, Value t) {
                               storeRow(tb, accMem, t, em.multiply(tb, t, loadRow(tb, accMem, t)));
                             });
                             forEach(lb, kThreads, [&](OpBuilder &tb, Value t) {
                               em.put(tb, t, loadRow(tb, fetchedMem, t));
                             });
                             scf::YieldOp::create(lb, loc);
                           });
        forEach(b3, kThreads, [&](OpBuilder &tb, Value t) { em.store(tb, t, loadRow(tb, accMem, t)); });
      });
    });
  });
  for (Value mem : {em.aTile, em.bTile, accMem, fetchedMem})
    memref::DeallocOp::create(b, loc, mem);
}

struct GpuTileContractionsPass : impl::KilnGpuTileContractionsBase<GpuTileContractionsPass> {
  using KilnGpuTileContractionsBase::KilnGpuTileContractionsBase;
  void runOnOperation() override {
    SmallVector<linalg::GenericOp> ops;
    getOperation().walk([&](linalg::GenericOp op) { ops.push_back(op); });
    for (linalg::GenericOp op : ops) {
      std::optional<Contraction> c = matchContraction(op);
      if (!c)
        continue;
      std::optional<BlockTile> tile = chooseTile(*c, minBlocks);
      if (!tile)
        continue;
      codegen::replaceWithKernel(op, c->fill, [&](OpBuilder &b) {
        emulate ? buildEmulation(b, *c, *tile) : buildLaunch(b, *c, *tile);
      });
    }
  }
};

} // namespace
} // namespace kiln
