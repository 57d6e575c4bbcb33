// Internal to kiln-gpu-tile-contractions (GpuTileContractions.cpp: the
// pass, the FMA kernel and what both kernels share; GpuTileTf32.cpp: the
// TF32 tensor-core kernel): the contraction as the pass reads it, the block
// tile, the shared-memory layouts and the emitter of one block's phases.
#ifndef KILN_CODEGEN_GPUTILEEMITTER_H
#define KILN_CODEGEN_GPUTILEEMITTER_H

#include "GpuKernelBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"

#include <optional>

namespace kiln::gputiles {

using namespace mlir;

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
// The TF32 kernel stages K-slices through a ring of two shared buffers with
// cp.async: slice i + 1 is copied into one while the warps multiply slice i
// from the other, one barrier per slice, and no thread holds the next
// slice in registers (the FMA kernel's 32 per thread at 128 x 128, which
// with the 64 accumulators left room for one block per SM).
constexpr int64_t kStages = 2;

/// Where an operand's K-slice lives in shared memory. The FMA kernel keeps
/// [k][x] (x: M for A, N for B). The TF32 kernel keeps an operand fetched
/// with consecutive threads along K (a row-major A, a convolution's
/// weights) as [x][k], one fetched along x as [r(k)][x + 8], K in its own
/// order in the first (so 16-byte copies stay contiguous), rows permuted in
/// the second (fragment loads below).
///
/// Which k each mma.sync step takes: any order of the slice's k serves,
/// as long as A's and B's fragments agree. Step s (of bk / 8), half h of a
/// lane with q = lane % 4 takes k = G q + 2s + h, G = bk / 4, so a lane's
/// values of one row of an [x][k] tile over the whole slice are G
/// consecutive floats: 128-bit loads (a quarter of the scalar ones). Rows
/// of 16 floats (bk = 16, no padding) or bk + 4 = 36: the 8 lanes of a
/// 128-bit phase (g in {0, 1}, q in 0..3) read 16-byte units 4g + q, or
/// 9g + 2q (+ 1) mod 8: all distinct. In a [r(k)][x] tile, k = G q + c
/// sits in row r(k) = 4c + q (r: a bijection of 0..bk-1), so a warp's
/// scalar loads of (k, x = g + const) hit bank (8 (4c + q) + g) mod 32 =
/// 8q + g (rows of x + 8, x a multiple of 32): all distinct. Staging
/// stores fill whole rows (consecutive threads along the row): distinct
/// banks, but for 4-byte copies into [x][16 + 4] rows (PTX order, bk 16),
/// where a warp's two rows share 4 banks (2-way).
struct Staging {
  bool xMajor = false;
  int64_t rows = 0, cols = 0;
  int64_t group = 0; // G (TF32's [r(k)][x] row permutation), else 0
  /// (row, col) of element (k, x) of the slice.
  std::pair<Value, Value> at(OpBuilder &b, Location loc, Value k, Value x) const {
    if (xMajor)
      return {x, k};
    if (!group)
      return {k, x};
    auto c = [&](int64_t v) { return codegen::indexConstant(b, loc, v); };
    Value within = arith::RemUIOp::create(b, loc, k, c(group));
    Value q = arith::DivUIOp::create(b, loc, k, c(group));
    return {arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, within, c(4)), q), x};
  }
};

/// TF32: a thread's copies of one operand (copyPlan): runs of `run`
/// consecutive elements, as one 16-byte cp.async each when `wide`.
struct CopyPlan {
  int64_t run = 1;
  bool wide = false;
  // cp.async needs a unit innermost stride (nvgpu.device_async_copy's
  // verifier); an operand without one (a strided Slice's view) is staged
  // with plain loads and stores, which the next barrier publishes alike.
  bool async = true;
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

/// Emits one block's phases for a thread `t` (GpuTileContractions.cpp's
/// file comment). Block ids and the shared tiles are set by the caller, per
/// mode.
struct TileEmitter {
  const Contraction &c;
  BlockTile tile;
  Location loc;
  bool tf32, emulate;
  // Shared K-slices of A and B, laid out as aStage, bStage; TF32's with the
  // ring's stage as their first dim (kStages).
  Value aTile, bTile;
  Value blockN, blockM, blockBatch;
  CopyPlan aCopy, bCopy; // TF32 (copyPlan)
  // TF32: which k each mma.sync step takes (Staging): runs of G per lane
  // when an operand is copied 16 bytes at a time, else the PTX order.
  bool laneRuns;
  Staging aStage, bStage;

  TileEmitter(const Contraction &c, BlockTile tile, bool tf32, bool emulate,
              std::pair<CopyPlan, CopyPlan> copies = {})
      : c(c), tile(tile), loc(c.op.getLoc()), tf32(tf32), emulate(emulate),
        aCopy(copies.first), bCopy(copies.second),
        laneRuns(tf32 && (aCopy.wide || bCopy.wide)), aStage(staging(c.a, c.m, tile.bm)),
        bStage(staging(c.b, c.n, tile.bn)) {}

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
                    function_ref<void(OpBuilder &, SmallVectorImpl<Value> &)> setDims) const;

  /// Whether consecutive threads fetch one operand along K: its innermost
  /// dim follows K's innermost and not its own group's (a row-major A, a
  /// transposed B).
  bool kInner(OpOperand *operand, ArrayRef<unsigned> group) const;

  /// The shared layout of one operand's K-slice (Staging).
  Staging staging(OpOperand *operand, ArrayRef<unsigned> group, int64_t span) const;

  /// Where thread `t`'s e-th element of a K-slice of one operand goes in
  /// its shared tile, as (k, x), x in the operand's own group (`span` of
  /// it). Consecutive threads go along the group the operand's innermost
  /// dim follows (coalesced): K for a row-major A or a transposed B, else x.
  /// With `width` > 1, the first of `width` consecutive elements along
  /// that group (thread t + e takes elements (t + e) width ...).
  std::pair<Value, Value> slot(OpBuilder &b, Value t, int64_t e, OpOperand *operand,
                               ArrayRef<unsigned> group, int64_t span, int64_t width = 1) const;

  /// Thread `t`'s elements of K-slice `k0` of one operand (x from `x0`),
  /// read from global memory, 0 outside the operand.
  void fetchOperand(OpBuilder &b, Value t, Value k0, OpOperand *operand,
                    ArrayRef<unsigned> group, int64_t extent, Value x0, int64_t span,
                    SmallVectorImpl<Value> &out) const;

  /// Thread `t`'s elements of K-slice `k0` of A and B (fetchOperand).
  SmallVector<Value> fetch(OpBuilder &b, Value t, Value k0) const;
  int64_t fetchedPerThread() const { return (tile.bm + tile.bn) * tile.bk / kThreads; }

  /// fetch(k0 + bk) while there is such a slice, else zeros: issued before
  /// the multiply of slice k0, so that its global loads are in flight
  /// while the block computes.
  SmallVector<Value> fetchNext(OpBuilder &b, Value t, Value k0) const;

  /// Stores thread `t`'s fetched elements into the shared tiles (the FMA
  /// kernel's; TF32's copy with copySlice).
  void put(OpBuilder &b, Value t, ValueRange values) const;

  /// Indices of (row, col) in a shared tile: TF32's have the stage first.
  SmallVector<Value> tileIndices(Value stage, Value row, Value col) const {
    if (!stage)
      return {row, col};
    return {stage, row, col};
  }

  /// TF32: thread `t`'s elements of K-slice `k0` of A and B, copied into
  /// stage `stage` of the shared tiles. On the GPU with cp.async, in flight
  /// until the next cp.async.wait_group: 16 bytes (4 consecutive elements
  /// along the operand's innermost dim, copyWidth) where the operand's
  /// layout and alignment allow, else 4; an element outside its operand
  /// reads no byte (src-size 0, zero-filled), from a clamped address. In
  /// the emulation, the same slots as plain loads and stores. Consecutive
  /// threads copy consecutive elements (slot). Unrounded: fragments round
  /// to TF32 as they load.
  void copySlice(OpBuilder &b, Value t, Value k0, Value stage) const;

  /// One cp.async of `count` elements (4 or 16 bytes) of `operand` at
  /// (x, k) into dst[dstIndices]: none read but zeros written when
  /// `inside` is false, from a clamped address.
  template <typename SetDims>
  void copyElements(OpBuilder &b, OpOperand *operand, Value inside, Value x, Value k,
                    SetDims &setDims, Value dst, ArrayRef<Value> dstIndices, int64_t count) const;

  /// Ends this thread's group of cp.async copies (the emulation's are done).
  void commitCopies(OpBuilder &b) const;
  /// Waits for all of this thread's cp.async copies (before a barrier).
  void waitCopies(OpBuilder &b) const;
  /// The stage of K-slice k0: (k0 / bk) % kStages.
  Value stageOf(OpBuilder &b, Value k0) const;
  Value otherStage(OpBuilder &b, Value stage) const;

  /// x rounded to TF32 (10 explicit mantissa bits), to nearest with ties
  /// away from zero as cvt.rna.tf32.f32 does, in integer arithmetic so that
  /// the emulation rounds alike: add half of TF32's last place, clear the
  /// 13 bits below it. Infinities and NaNs pass unchanged (the addition
  /// could carry a NaN's mantissa into its exponent or sign, where cvt.rna
  /// keeps a NaN); the largest finite floats round to infinity, as they
  /// must.
  /// On the GPU, one cvt.rna.tf32.f32, which rounds alike (the integer
  /// form costs two instructions per fragment register).
  Value roundToTf32(OpBuilder &b, Value x) const;

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
  WarpLane warpLane(OpBuilder &b, Value t) const;

  /// Thread `t`'s fragments of the staged slice, step by step (of 8 along
  /// K), for the emulation: for each mma row tile i, a0..a3 = A(g, k0),
  /// A(g + 8, k0), A(g, k1), A(g + 8, k1); then for each column tile j,
  /// b0, b1 = B(k0, g), B(k1, g) (rows and columns within the tile), where
  /// k_h = G q + 2s + h is the slice's k that step s takes (Staging). Each
  /// value is rounded to TF32 as it is loaded (the shared tiles hold what
  /// cp.async copied).
  SmallVector<Value> fragments(OpBuilder &b, Value t, Value stageIdx) const;

  /// Row or column `x` of one staged operand at the k this lane takes in
  /// step `step` (h = 0, 1), or in every step (c = 2s + h), rounded to
  /// TF32. With laneRuns, k = G q + c: one vector load from an [x][k]
  /// tile, scalar ones from an [r(k)][x] tile; else PTX's k = 8s + 4h + q,
  /// scalar loads.
  SmallVector<Value> laneValues(OpBuilder &b, const WarpLane &w, Value tileMem,
                                const Staging &stage, Value stageIdx, Value x,
                                std::optional<int64_t> step = {}) const;

  /// A's a0..a3 of row tile i, step after step (4 per step), or of one step.
  SmallVector<Value> aFragments(OpBuilder &b, const WarpLane &w, Value stageIdx, int64_t i,
                                std::optional<int64_t> step = {}) const;

  /// B's b0, b1 of every column tile, step after step (2 nTiles per
  /// step), or of one step.
  SmallVector<Value> bFragments(OpBuilder &b, const WarpLane &w, Value stageIdx,
                                std::optional<int64_t> step = {}) const;

  /// Thread `t`'s accumulators after the staged slice, on the tensor cores:
  /// accumulator (i * nTiles + j) * 4 + e is element e of mma tile (i, j).
  /// With laneRuns, B's fragments of the slice first, then A's row tile
  /// by row tile (each A vector spans every step); else each step's
  /// fragments right before its mma.sync. Either way a 128 x 128 tile's 64
  /// accumulators and the live fragments fit 128 registers; the PTX order
  /// with every fragment of the slice live did not (ptxas spilled).
  SmallVector<Value> mmaMultiply(OpBuilder &b, Value t, Value stage, ValueRange acc) const;

  /// The block-tile row and column of thread `t`'s accumulator `idx`
  /// (element e of mma tile (i, j): row g + 8 (e / 2), column 2q + e % 2).
  std::pair<Value, Value> accumulatorAt(OpBuilder &b, const WarpLane &w, int64_t idx) const;

  /// The emulation's mma.sync for thread `t`: each of its accumulators
  /// (row r, column n of an mma tile) += sum over k of A(r, k) B(k, n),
  /// every operand element read from the registers (`fragMem`, one row per
  /// thread, as `fragments` loaded them) of the lane and register that the
  /// layout puts it in, written as the inverse of `fragments`' formulas:
  /// A(r, k) in lane 4 (r % 8) + k % 4, register r / 8 + 2 (k / 4); B(k, n)
  /// in lane 4 n + k % 4, register k / 4. A load that puts an element in
  /// the wrong lane or register, or a store of an accumulator to the wrong
  /// place, gives a wrong result.
  void emulatedMma(OpBuilder &b, Value t, Value fragMem, Value accMem) const;

  /// Thread `t`'s tm x tn accumulators (row-major) after the staged slice.
  SmallVector<Value> multiply(OpBuilder &b, Value t, ValueRange acc) const;

  /// C += thread `t`'s accumulators, within C's bounds (C = the fill's
  /// value + the accumulators, when the kernel takes the fill over).
  void store(OpBuilder &b, Value t, ValueRange acc) const;

  SmallVector<Value> zeros(OpBuilder &b, int64_t n) const {
    Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0));
    return SmallVector<Value>(n, zero);
  }
  SmallVector<Value> zeroSums(OpBuilder &b) const { return zeros(b, tile.tm() * tile.tn()); }
  /// A shared tile's type (TF32's: kStages of them).
  MemRefType tileType(const Staging &stage, Attribute memorySpace) const {
    SmallVector<int64_t> shape = {stage.rows, stage.cols};
    if (tf32)
      shape.insert(shape.begin(), kStages);
    return MemRefType::get(shape, Float32Type::get(c.op.getContext()), AffineMap(), memorySpace);
  }
  MemRefType rowsType(int64_t rows, int64_t cols) const {
    return MemRefType::get({rows, cols}, Float32Type::get(c.op.getContext()));
  }
  int64_t gridN() const { return llvm::divideCeil(c.N, tile.bn); }
  int64_t gridM() const { return llvm::divideCeil(c.M, tile.bm); }
};

} // namespace kiln::gputiles

#endif // KILN_CODEGEN_GPUTILEEMITTER_H
