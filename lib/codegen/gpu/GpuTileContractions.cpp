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
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
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

// TF32 (tf32=true): the block's 8 warps as 2 x 4, each warp a (bm / 2) x
// (bn / 4) tile of C as mTiles x nTiles mma.sync m16n8k8 tiles; each
// thread holds 4 accumulators per mma tile, as many as the FMA kernel's
// tm x tn (64 for 128 x 128, 16 for 64 x 64).
constexpr int64_t kWarpSize = 32;
constexpr int64_t kWarpsM = 2, kWarpsN = 4; // kWarpsM * kWarpsN * 32 == kThreads
constexpr int64_t kMmaM = 16, kMmaN = 8, kMmaK = 8;
constexpr int64_t kARegs = 4, kBRegs = 2, kCRegs = 4;

/// Where an operand's K-slice lives in shared memory. The FMA kernel keeps
/// [k][x] (x: M for A, N for B). The TF32 kernel picks per operand so that
/// both the staging stores and the fragment loads are free of bank
/// conflicts: an operand fetched with consecutive threads along K (a
/// row-major A, a convolution's weights) is kept [x][bk + 4] (a fragment's
/// 8 x 4 lanes read x = g, k = t: bank 4g + t); one fetched along x is kept
/// [k][span + 8] (bank 8t + g).
struct Staging {
  bool xMajor = false;
  int64_t rows = 0, cols = 0;
  std::pair<Value, Value> at(Value k, Value x) const {
    return xMajor ? std::pair(x, k) : std::pair(k, x);
  }
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
  // Deeper slices for tensor cores: a slice of 8 would be two mma.sync per
  // fragment load and one barrier pair per 16 of them per warp.
  static const BlockTile tf32Tiles[] = {{128, 128, 32}, {64, 64, 32}};
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

/// Emits one block's phases for a thread `t` (file comment). Block ids and
/// the shared tiles are set by the caller, per mode.
struct TileEmitter {
  const Contraction &c;
  BlockTile tile;
  Location loc;
  bool tf32;
  Value aTile, bTile; // shared K-slices of A and B, laid out as aStage, bStage
  Value blockN, blockM, blockBatch;
  Staging aStage, bStage;

  TileEmitter(const Contraction &c, BlockTile tile, bool tf32)
      : c(c), tile(tile), loc(c.op.getLoc()), tf32(tf32),
        aStage(staging(c.a, c.m, tile.bm)), bStage(staging(c.b, c.n, tile.bn)) {}

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

  /// Whether consecutive threads fetch one operand along K: its innermost
  /// dim follows K's innermost and not its own group's (a row-major A, a
  /// transposed B).
  bool kInner(OpOperand *operand, ArrayRef<unsigned> group) const {
    AffineExpr last = c.op.getMatchingIndexingMap(operand).getResults().back();
    return last.isFunctionOfDim(c.k.back()) && !last.isFunctionOfDim(group.back());
  }

  /// The shared layout of one operand's K-slice (Staging).
  Staging staging(OpOperand *operand, ArrayRef<unsigned> group, int64_t span) const {
    if (!tf32)
      return {false, tile.bk, span + tile.pad()};
    if (kInner(operand, group))
      return {true, span, tile.bk + 4};
    return {false, tile.bk, span + 8};
  }

  /// Where thread `t`'s e-th element of a K-slice of one operand goes in
  /// its shared tile, as (k, x), x in the operand's own group (`span` of
  /// it). Consecutive threads go along the group the operand's innermost
  /// dim follows (coalesced): K for a row-major A or a transposed B, else x.
  std::pair<Value, Value> slot(OpBuilder &b, Value t, int64_t e, OpOperand *operand,
                               ArrayRef<unsigned> group, int64_t span) const {
    bool kInner = this->kInner(operand, group);
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

  /// Stores thread `t`'s fetched elements into the shared tiles (rounded
  /// to TF32 for the tensor cores: once per element, here).
  void put(OpBuilder &b, Value t, ValueRange values) const {
    int64_t i = 0;
    for (auto [operand, group, span, dst, stage] :
         {std::tuple(c.a, ArrayRef<unsigned>(c.m), tile.bm, aTile, aStage),
          std::tuple(c.b, ArrayRef<unsigned>(c.n), tile.bn, bTile, bStage)})
      for (int64_t e = 0; e < span * tile.bk; e += kThreads) {
        auto [ki, xi] = slot(b, t, e, operand, group, span);
        auto [row, col] = stage.at(ki, xi);
        Value v = values[i++];
        memref::StoreOp::create(b, loc, tf32 ? roundToTf32(b, v) : v, dst, ValueRange{row, col});
      }
  }

  /// x rounded to TF32 (10 explicit mantissa bits), to nearest with ties
  /// away from zero as cvt.rna.tf32.f32 does, in integer arithmetic so that
  /// the emulation rounds alike: add half of TF32's last place, clear the
  /// 13 bits below it. Infinities and NaNs keep their class (their
  /// mantissa bits below TF32's are clear or do not matter); the largest
  /// finite floats round to infinity, as they must.
  Value roundToTf32(OpBuilder &b, Value x) const {
    Type i32 = b.getI32Type();
    Value bits = arith::BitcastOp::create(b, loc, i32, x);
    Value half = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(0x1000));
    Value mask = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(int32_t(0xFFFFE000u)));
    Value rounded = arith::AndIOp::create(b, loc, arith::AddIOp::create(b, loc, bits, half), mask);
    return arith::BitcastOp::create(b, loc, b.getF32Type(), rounded);
  }

  // --- TF32: warp tiles of mma.sync m16n8k8 ---------------------------------

  int64_t mTiles() const { return tile.bm / kWarpsM / kMmaM; }
  int64_t nTiles() const { return tile.bn / kWarpsN / kMmaN; }
  /// Fragment registers per thread per step of 8 along K: A's, then B's.
  int64_t fragmentsPerStep() const { return mTiles() * kARegs + nTiles() * kBRegs; }
  int64_t fragmentsPerThread() const { return tile.bk / kMmaK * fragmentsPerStep(); }

  /// Thread `t`'s lane coordinates in the fragment layouts (PTX ISA,
  /// "Matrix Fragments for mma.m16n8k8" with .tf32): g = lane / 4, q =
  /// lane % 4, and its warp's first row and column in the block's tile.
  struct WarpLane {
    Value lane, g, q, m0, n0;
  };
  WarpLane warpLane(OpBuilder &b, Value t) const {
    Value warp = arith::DivUIOp::create(b, loc, t, cst(b, kWarpSize));
    Value lane = arith::RemUIOp::create(b, loc, t, cst(b, kWarpSize));
    Value wm = arith::DivUIOp::create(b, loc, warp, cst(b, kWarpsN));
    Value wn = arith::RemUIOp::create(b, loc, warp, cst(b, kWarpsN));
    return {lane, arith::DivUIOp::create(b, loc, lane, cst(b, 4)),
            arith::RemUIOp::create(b, loc, lane, cst(b, 4)),
            arith::MulIOp::create(b, loc, wm, cst(b, tile.bm / kWarpsM)),
            arith::MulIOp::create(b, loc, wn, cst(b, tile.bn / kWarpsN))};
  }

  /// Thread `t`'s fragments of step s (of 8 along K) of the staged slice:
  /// for each mma row tile i, a0..a3 = A(g, q), A(g + 8, q), A(g, q + 4),
  /// A(g + 8, q + 4); then for each column tile j, b0, b1 = B(q, g),
  /// B(q + 4, g) (rows and columns within the tile, k within the step).
  /// Every step's, in order, when `step` is none (the emulation's).
  SmallVector<Value> fragments(OpBuilder &b, Value t, std::optional<int64_t> step = {}) const {
    WarpLane w = warpLane(b, t);
    SmallVector<Value> regs;
    auto load = [&](Value tileMem, const Staging &stage, Value k, Value x) {
      auto [row, col] = stage.at(k, x);
      regs.push_back(memref::LoadOp::create(b, loc, tileMem, ValueRange{row, col}));
    };
    for (int64_t s = step.value_or(0); s < (step ? *step + 1 : tile.bk / kMmaK); ++s) {
      Value k = add(b, w.q, s * kMmaK), k4 = add(b, w.q, s * kMmaK + 4);
      Value gm = arith::AddIOp::create(b, loc, w.m0, w.g);
      for (int64_t i = 0; i < mTiles(); ++i) {
        Value m = add(b, gm, i * kMmaM), m8 = add(b, gm, i * kMmaM + 8);
        load(aTile, aStage, k, m);
        load(aTile, aStage, k, m8);
        load(aTile, aStage, k4, m);
        load(aTile, aStage, k4, m8);
      }
      Value gn = arith::AddIOp::create(b, loc, w.n0, w.g);
      for (int64_t j = 0; j < nTiles(); ++j) {
        Value n = add(b, gn, j * kMmaN);
        load(bTile, bStage, k, n);
        load(bTile, bStage, k4, n);
      }
    }
    return regs;
  }

  /// Thread `t`'s accumulators after the staged slice, on the tensor cores:
  /// accumulator (i * nTiles + j) * 4 + e is element e of mma tile (i, j).
  /// Each step's fragments are loaded right before its mma.sync (not all
  /// up front), so that only one step's are live: 128 x 128 tiles need
  /// 64 accumulators and 32 values of the next slice per thread already.
  SmallVector<Value> mmaMultiply(OpBuilder &b, Value t, ValueRange acc) const {
    Type i32 = b.getI32Type(), f32 = b.getF32Type();
    auto dType = LLVM::LLVMStructType::getLiteral(b.getContext(), SmallVector<Type>(kCRegs, f32));
    auto word = [&](Value v) -> Value { return arith::BitcastOp::create(b, loc, i32, v); };
    SmallVector<Value> sums(acc.begin(), acc.end());
    for (int64_t s = 0; s < tile.bk / kMmaK; ++s) {
      SmallVector<Value> regs = fragments(b, t, s);
      for (int64_t i = 0; i < mTiles(); ++i)
        for (int64_t j = 0; j < nTiles(); ++j) {
          SmallVector<Value> a, bv;
          for (int64_t r = 0; r < kARegs; ++r)
            a.push_back(word(regs[i * kARegs + r]));
          for (int64_t r = 0; r < kBRegs; ++r)
            bv.push_back(word(regs[mTiles() * kARegs + j * kBRegs + r]));
          int64_t first = (i * nTiles() + j) * kCRegs;
          Value d = NVVM::MmaOp::create(
              b, loc, dType, a, bv, ArrayRef<Value>(sums).slice(first, kCRegs),
              {kMmaM, kMmaN, kMmaK}, std::nullopt, std::nullopt,
              std::array<NVVM::MMATypes, 2>{NVVM::MMATypes::tf32, NVVM::MMATypes::tf32},
              std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row, NVVM::MMALayout::col});
          for (int64_t e = 0; e < kCRegs; ++e)
            sums[first + e] = LLVM::ExtractValueOp::create(b, loc, d, e);
        }
    }
    return sums;
  }

  /// The block-tile row and column of thread `t`'s accumulator `idx`
  /// (element e of mma tile (i, j): row g + 8 (e / 2), column 2q + e % 2).
  std::pair<Value, Value> accumulatorAt(OpBuilder &b, const WarpLane &w, int64_t idx) const {
    int64_t e = idx % kCRegs, j = idx / kCRegs % nTiles(), i = idx / kCRegs / nTiles();
    Value row = add(b, arith::AddIOp::create(b, loc, w.m0, w.g), i * kMmaM + 8 * (e / 2));
    Value col = add(b, arith::AddIOp::create(b, loc, w.n0, arith::MulIOp::create(b, loc, w.q, cst(b, 2))),
                    j * kMmaN + e % 2);
    return {row, col};
  }

  /// The emulation's mma.sync for thread `t`: each of its accumulators
  /// (row r, column n of an mma tile) += sum over k of A(r, k) B(k, n),
  /// every operand element read from the registers (`fragMem`, one row per
  /// thread, as `fragments` loaded them) of the lane and register that the
  /// layout puts it in, written as the inverse of `fragments`' formulas:
  /// A(r, k) in lane 4 (r % 8) + k % 4, register r / 8 + 2 (k / 4); B(k, n)
  /// in lane 4 n + k % 4, register k / 4. A load that puts an element in
  /// the wrong lane or register, or a store of an accumulator to the wrong
  /// place, gives a wrong result.
  void emulatedMma(OpBuilder &b, Value t, Value fragMem, Value accMem) const {
    WarpLane w = warpLane(b, t);
    Value warpBase = arith::SubIOp::create(b, loc, t, w.lane);
    for (int64_t s = 0; s < tile.bk / kMmaK; ++s)
      codegen::emulationLoop(b, loc, mTiles() * nTiles() * kCRegs, [&](OpBuilder &ib, Value idx) {
        Value e = arith::RemUIOp::create(ib, loc, idx, cst(ib, kCRegs));
        Value tileIdx = arith::DivUIOp::create(ib, loc, idx, cst(ib, kCRegs));
        Value j = arith::RemUIOp::create(ib, loc, tileIdx, cst(ib, nTiles()));
        Value i = arith::DivUIOp::create(ib, loc, tileIdx, cst(ib, nTiles()));
        Value upper = arith::DivUIOp::create(ib, loc, e, cst(ib, 2));   // row g + 8
        Value odd = arith::RemUIOp::create(ib, loc, e, cst(ib, 2));     // column 2q + 1
        Value n = arith::AddIOp::create(ib, loc, arith::MulIOp::create(ib, loc, w.q, cst(ib, 2)), odd);
        Value aRegBase = arith::AddIOp::create(
            ib, loc, cst(ib, s * fragmentsPerStep()),
            arith::AddIOp::create(ib, loc, arith::MulIOp::create(ib, loc, i, cst(ib, kARegs)), upper));
        Value bRegBase = arith::AddIOp::create(
            ib, loc, cst(ib, s * fragmentsPerStep() + mTiles() * kARegs),
            arith::MulIOp::create(ib, loc, j, cst(ib, kBRegs)));
        Value aLaneBase = arith::AddIOp::create(ib, loc, warpBase,
                                                arith::MulIOp::create(ib, loc, w.g, cst(ib, 4)));
        Value bLaneBase = arith::AddIOp::create(ib, loc, warpBase,
                                                arith::MulIOp::create(ib, loc, n, cst(ib, 4)));
        Value init = memref::LoadOp::create(ib, loc, accMem, ValueRange{t, idx});
        auto sum = scf::ForOp::create(
            ib, loc, cst(ib, 0), cst(ib, kMmaK), cst(ib, 1), ValueRange{init},
            [&](OpBuilder &kb, Location, Value k, ValueRange acc) {
              Value kq = arith::RemUIOp::create(kb, loc, k, cst(kb, 4));
              Value kh = arith::DivUIOp::create(kb, loc, k, cst(kb, 4));
              Value aLane = arith::AddIOp::create(kb, loc, aLaneBase, kq);
              Value aReg = arith::AddIOp::create(kb, loc, aRegBase,
                                                 arith::MulIOp::create(kb, loc, kh, cst(kb, 2)));
              Value bLane = arith::AddIOp::create(kb, loc, bLaneBase, kq);
              Value bReg = arith::AddIOp::create(kb, loc, bRegBase, kh);
              Value x = memref::LoadOp::create(kb, loc, fragMem, ValueRange{aLane, aReg});
              Value y = memref::LoadOp::create(kb, loc, fragMem, ValueRange{bLane, bReg});
              scf::YieldOp::create(kb, loc, ValueRange{math::FmaOp::create(kb, loc, x, y, acc[0])});
            });
        memref::StoreOp::create(ib, loc, sum.getResult(0), accMem, ValueRange{t, idx});
      });
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
void buildLaunch(OpBuilder &b, const Contraction &c, BlockTile tile, bool tf32) {
  Location loc = c.op.getLoc();
  TileEmitter em(c, tile, tf32);
  auto workgroup = gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Workgroup);
  Type aType = em.tileType(em.aStage.rows, em.aStage.cols, workgroup);
  Type bType = em.tileType(em.bStage.rows, em.bStage.cols, workgroup);
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
        SmallVector<Value> sums = tf32 ? em.mmaMultiply(lb, t, acc) : em.multiply(lb, t, acc);
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
void buildEmulation(OpBuilder &b, const Contraction &c, BlockTile tile, bool tf32) {
  Location loc = c.op.getLoc();
  TileEmitter em(c, tile, tf32);
  int64_t accs = tile.tm() * tile.tn();
  em.aTile = memref::AllocOp::create(b, loc, em.tileType(em.aStage.rows, em.aStage.cols, {}));
  em.bTile = memref::AllocOp::create(b, loc, em.tileType(em.bStage.rows, em.bStage.cols, {}));
  Value accMem = memref::AllocOp::create(b, loc, em.tileType(kThreads, accs, {}));
  // TF32: every thread's fragment registers, loaded before any mma.sync
  // of the warp reads them (mma.sync is a warp's collective).
  Value fragMem;
  if (tf32)
    fragMem = memref::AllocOp::create(b, loc, em.tileType(kThreads, em.fragmentsPerThread(), {}));
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
                             if (tf32) {
                               forEach(lb, kThreads, [&](OpBuilder &tb, Value t) {
                                 storeRow(tb, fragMem, t, em.fragments(tb, t));
                               });
                               forEach(lb, kThreads, [&](OpBuilder &tb, Value t) {
                                 em.emulatedMma(tb, t, fragMem, accMem);
                               });
                             } else {
                               forEach(lb, kThreads, [&](OpBuilder &tb, Value t) {
                                 storeRow(tb, accMem, t, em.multiply(tb, t, loadRow(tb, accMem, t)));
                               });
                             }
                             forEach(lb, kThreads, [&](OpBuilder &tb, Value t) {
                               em.put(tb, t, loadRow(tb, fetchedMem, t));
                             });
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
      codegen::replaceWithKernel(op, c->fill, [&](OpBuilder &b) {
        emulate ? buildEmulation(b, *c, *tile, tf32) : buildLaunch(b, *c, *tile, tf32);
      });
    }
  }
};

} // namespace
} // namespace kiln
