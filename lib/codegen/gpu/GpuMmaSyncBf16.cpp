// kiln-gpu-mma-contractions' bf16 kernel: bf16 products on tensor cores
// with mma.sync.m16n8k16 and f32 accumulators.
//
// Why not WMMA, as for f16: upstream's gpu.mma_matrix has no bf16 element
// type and NVVM's wmma ops no bf16 combination, while nvvm.mma.sync has
// m16n8k16 .bf16 with .f32 accumulators (sm_80 and later; the pass's
// `bf16` option is off for older chips). Its fragments live in registers
// in a fixed per-lane layout (below), which this kernel loads and stores
// itself.
//
// Why f32 accumulators: tensor cores accumulate bf16 products only in f32.
// Kiln's CPU path accumulates a bf16 MatMul in bf16, so the GPU's result is
// the more accurate one (each output rounded once); both are checked
// against the reference interpreter (exact sums, rounded to bf16) with a
// tolerance.
//
// The grid is the f16 kernel's: blocks of four warps, each warp one 16x16
// tile of C, as two 16x8 halves. Per step of 16 along k, a lane loads its
// four A registers (pairs of consecutive elements of a row: one 4-byte
// load each) and, per half, its two B registers (pairs down a column: two
// 2-byte loads each) straight from global memory, and issues one mma.sync
// per half. The eight f32 accumulators start as C (or the value of a fill
// right before, which is taken over) and are rounded to bf16 and stored
// once, as pairs. (ONNX products always start from a fill, but when the
// memory plan leaves a buffer holding a fill from before, as in encoder4's
// last layer, the product starts from C.)
//
// emulate=true runs the same per-lane loads and stores for the CPU, with
// each mma.sync computed from all 32 lanes' registers through the inverse
// of the layout, written separately: a load or store that puts an element
// in the wrong lane, register or half gives a wrong result. What it cannot
// check is that the layout itself is the hardware's (PTX ISA 9.7.14.5.8,
// "Matrix Fragments for mma.m16n8k16 with floating point type").
#include "GpuMmaContractions.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;

namespace kiln::mma {
namespace {

constexpr int64_t kHalves = 2;   // 16x8 halves of a warp's 16x16 tile
constexpr int64_t kHalfWidth = 8;
constexpr int64_t kARegisters = 4;
constexpr int64_t kBRegisters = 2;
constexpr int64_t kAccumulators = 4; // per half

/// A lane's coordinates in mma.m16n8k16's fragment layout: g = lane / 4
/// ("groupID") and t = lane % 4 ("threadID_in_group").
struct Lane {
  Value g, t;
};

Value cst(OpBuilder &b, Location loc, int64_t v) { return codegen::indexConstant(b, loc, v); }

Value plus(OpBuilder &b, Location loc, Value x, int64_t c) {
  return c ? arith::AddIOp::create(b, loc, x, cst(b, loc, c)).getResult() : x;
}

Value add(OpBuilder &b, Location loc, Value x, Value y) {
  return arith::AddIOp::create(b, loc, x, y);
}

/// Index arithmetic by constants, for the layout formulas below.
struct IndexMath {
  OpBuilder &b;
  Location loc;
  Value div(Value x, int64_t d) { return arith::DivUIOp::create(b, loc, x, cst(b, loc, d)); }
  Value rem(Value x, int64_t d) { return arith::RemUIOp::create(b, loc, x, cst(b, loc, d)); }
  Value mul(Value x, int64_t d) { return arith::MulIOp::create(b, loc, x, cst(b, loc, d)); }
  Value add(Value x, Value y) { return kiln::mma::add(b, loc, x, y); }
  Value plus(Value x, int64_t d) { return kiln::mma::plus(b, loc, x, d); }
};

Lane laneOf(OpBuilder &b, Location loc, Value lane) {
  return {arith::DivUIOp::create(b, loc, lane, cst(b, loc, 4)),
          arith::RemUIOp::create(b, loc, lane, cst(b, loc, 4))};
}

/// Where a lane's registers sit in their fragments (PTX ISA, "Matrix
/// Fragments for mma.m16n8k16 with floating point type"). Each 32-bit A or
/// B register holds two bf16, the lower-indexed one in its low half:
/// - A (16x16, row-major): register r, row g + 8 (r % 2), columns
///   2t + 8 (r / 2) and the next one;
/// - B (16x8, column-major): register r, rows 2t + 8r and the next one,
///   column g;
/// - C and D (16x8, f32): element r, row g + 8 (r / 2), column 2t + r % 2.
/// Each returns (row, column) of the first element, in the fragment.
std::pair<Value, Value> aRegister(OpBuilder &b, Location loc, Lane l, int64_t r) {
  IndexMath m{b, loc};
  return {m.plus(l.g, 8 * (r % 2)), m.plus(m.mul(l.t, 2), 8 * (r / 2))};
}
std::pair<Value, Value> bRegister(OpBuilder &b, Location loc, Lane l, int64_t r) {
  IndexMath m{b, loc};
  return {m.plus(m.mul(l.t, 2), 8 * r), l.g};
}
std::pair<Value, Value> cElement(OpBuilder &b, Location loc, Lane l, int64_t r) {
  IndexMath m{b, loc};
  return {m.plus(l.g, 8 * (r / 2)), m.plus(m.mul(l.t, 2), r % 2)};
}

VectorType pairType(MmaContraction &c) { return VectorType::get({2}, c.element()); }

/// Two bf16 as one 32-bit register, the first in the low half (NVPTX and
/// x86 are both little-endian, so the bitcast means the same on both).
Value packPair(OpBuilder &b, Location loc, Value pair) {
  Value word = vector::BitCastOp::create(b, loc, VectorType::get({1}, b.getI32Type()), pair);
  return vector::ExtractOp::create(b, loc, word, ArrayRef<int64_t>{0});
}

/// The per-lane program both the kernel and its emulation run.
struct LaneProgram {
  MmaContraction &c;
  Location loc;
  TileOrigin origin;
  Lane lane;
  /// What A's and C's pair accesses are aligned to: 4 bytes on the GPU
  /// (matchMma); the emulation's CPU buffers promise only their element
  /// size (CPU globals carry no alignment), and unaligned pairs are fine
  /// there.
  llvm::MaybeAlign pairAlign;

  /// Element (row, col) of the tile's 16x16 window of C at column half h.
  SmallVector<Value> cAt(OpBuilder &b, Value row, Value col, int64_t h) {
    return fragmentAt(origin.batchIv, true, add(b, loc, origin.m0, row),
                      plus(b, loc, add(b, loc, origin.n0, col), kHalfWidth * h));
  }

  /// The eight accumulators (half h's element r at 4h + r), as f32: the
  /// fill's value, or C's elements (pairs along a row).
  SmallVector<Value> initialAccumulators(OpBuilder &b) {
    Type f32 = b.getF32Type();
    SmallVector<Value> acc;
    for (int64_t h = 0; h < kHalves; ++h)
      for (int64_t r = 0; r < kAccumulators; r += 2) {
        if (c.fill) {
          Value v = c.fill.value;
          if (v.getType() != f32)
            v = arith::ExtFOp::create(b, loc, f32, v);
          acc.append({v, v});
          continue;
        }
        auto [row, col] = cElement(b, loc, lane, r);
        Value pair = vector::LoadOp::create(b, loc, pairType(c), c.c(), cAt(b, row, col, h),
                                            /*nontemporal=*/false, pairAlign);
        for (int64_t e = 0; e < 2; ++e)
          acc.push_back(arith::ExtFOp::create(
              b, loc, f32, Value(vector::ExtractOp::create(b, loc, pair, ArrayRef<int64_t>{e}))));
      }
    return acc;
  }

  /// Rounds the accumulators to bf16 and stores them (pairs along a row).
  void storeAccumulators(OpBuilder &b, ArrayRef<Value> acc) {
    for (int64_t h = 0; h < kHalves; ++h)
      for (int64_t r = 0; r < kAccumulators; r += 2) {
        auto [row, col] = cElement(b, loc, lane, r);
        SmallVector<Value> pair;
        for (int64_t e = 0; e < 2; ++e)
          pair.push_back(arith::TruncFOp::create(b, loc, c.element(), acc[kAccumulators * h + r + e]));
        Value v = vector::FromElementsOp::create(b, loc, pairType(c), pair);
        vector::StoreOp::create(b, loc, v, c.c(), cAt(b, row, col, h), /*nontemporal=*/false,
                                pairAlign);
      }
  }

  /// A's four registers for the step at k0: consecutive elements of a row
  /// (an even column of a row of K, a multiple of 16: 4-byte aligned).
  SmallVector<Value> aRegisters(OpBuilder &b, Value k0) {
    SmallVector<Value> regs;
    for (int64_t r = 0; r < kARegisters; ++r) {
      auto [row, col] = aRegister(b, loc, lane, r);
      SmallVector<Value> idx =
          fragmentAt(origin.batchIv, c.aBatched, add(b, loc, origin.m0, row), add(b, loc, k0, col));
      Value pair = vector::LoadOp::create(b, loc, pairType(c), c.a(), idx, /*nontemporal=*/false,
                                          pairAlign);
      regs.push_back(packPair(b, loc, pair));
    }
    return regs;
  }

  /// B's two registers of half h for the step at k0: two elements down a
  /// column, N apart.
  SmallVector<Value> bRegisters(OpBuilder &b, Value k0, int64_t h) {
    SmallVector<Value> regs;
    for (int64_t r = 0; r < kBRegisters; ++r) {
      auto [krow, col] = bRegister(b, loc, lane, r);
      Value n = plus(b, loc, add(b, loc, origin.n0, col), kHalfWidth * h);
      SmallVector<Value> elements;
      for (int64_t e = 0; e < 2; ++e) {
        Value k = plus(b, loc, add(b, loc, k0, krow), e);
        elements.push_back(
            memref::LoadOp::create(b, loc, c.b(), fragmentAt(origin.batchIv, c.bBatched, k, n)));
      }
      regs.push_back(packPair(b, loc, vector::FromElementsOp::create(b, loc, pairType(c), elements)));
    }
    return regs;
  }
};

/// The warp's tile and lane program, inside `if (the warp's tile is in C)`.
template <typename Fn>
void forWarpTile(OpBuilder &b, MmaContraction &c, bool emulate, Value bx, Value by, Value bz,
                 Value warp, Fn body) {
  Location loc = c.op.getLoc();
  auto [tile, inside] = warpTile(b, loc, c, bx, warp);
  auto ifOp = scf::IfOp::create(b, loc, inside, /*withElseRegion=*/false);
  OpBuilder ib = ifOp.getThenBodyBuilder();
  TileOrigin origin = tileOrigin(ib, loc, c, tile, by, bz);
  body(ib, [&](OpBuilder &lb, Value l) {
    return LaneProgram{c, loc, origin, laneOf(lb, loc, l), llvm::MaybeAlign(emulate ? 2 : 4)};
  });
}

} // namespace

void buildBf16Launch(OpBuilder &b, MmaContraction &c) {
  Location loc = c.op.getLoc();
  gpu::LaunchOp launch = launchGrid(b, c);
  OpBuilder kb = OpBuilder::atBlockBegin(&launch.getBody().front());
  Value tid = launch.getThreadIds().x;
  Value warp = arith::DivUIOp::create(kb, loc, tid, cst(kb, loc, kWarpSize));
  Value lane = arith::RemUIOp::create(kb, loc, tid, cst(kb, loc, kWarpSize));
  Type f32 = kb.getF32Type();
  auto dType = LLVM::LLVMStructType::getLiteral(kb.getContext(), SmallVector<Type>(4, f32));
  forWarpTile(kb, c, /*emulate=*/false, launch.getBlockIds().x, launch.getBlockIds().y, launch.getBlockIds().z, warp,
              [&](OpBuilder &ib, auto programOf) {
                LaneProgram p = programOf(ib, lane);
                SmallVector<Value> init = p.initialAccumulators(ib);
                auto steps = scf::ForOp::create(
                    ib, loc, cst(ib, loc, 0), cst(ib, loc, c.K()), cst(ib, loc, kFragment), init,
                    [&](OpBuilder &sb, Location, Value k0, ValueRange acc) {
                      SmallVector<Value> a = p.aRegisters(sb, k0);
                      SmallVector<Value> next;
                      for (int64_t h = 0; h < kHalves; ++h) {
                        Value d = NVVM::MmaOp::create(
                            sb, loc, dType, a, p.bRegisters(sb, k0, h),
                            acc.slice(kAccumulators * h, kAccumulators), {16, 8, 16},
                            std::nullopt, std::nullopt,
                            std::array<NVVM::MMATypes, 2>{NVVM::MMATypes::bf16,
                                                          NVVM::MMATypes::bf16},
                            std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row,
                                                           NVVM::MMALayout::col});
                        for (int64_t e = 0; e < kAccumulators; ++e)
                          next.push_back(LLVM::ExtractValueOp::create(sb, loc, d, e));
                      }
                      scf::YieldOp::create(sb, loc, next);
                    });
                p.storeAccumulators(ib, SmallVector<Value>(steps.getResults()));
              });
  kb.setInsertionPointToEnd(&launch.getBody().front());
  gpu::TerminatorOp::create(kb, loc);
}

namespace {

/// Which lane, register and half hold A's element (i, kk) of a 16x16
/// fragment, and B's (kk, j) of a 16x8 one: the layout of aRegister and
/// bRegister read backwards, written out separately so that the emulation
/// checks the loads (and, with cSlot, the stores) against it.
struct Slot {
  Value lane, reg, half;
};
Slot aSlot(OpBuilder &b, Location loc, Value i, Value kk) {
  IndexMath m{b, loc};
  return {m.add(m.mul(m.rem(i, 8), 4), m.div(m.rem(kk, 8), 2)),
          m.add(m.div(i, 8), m.mul(m.div(kk, 8), 2)), m.rem(kk, 2)};
}
Slot bSlot(OpBuilder &b, Location loc, Value kk, Value j) {
  IndexMath m{b, loc};
  return {m.add(m.mul(j, 4), m.div(m.rem(kk, 8), 2)), m.div(kk, 8), m.rem(kk, 2)};
}
/// And which lane and accumulator hold D's element (i, j) of a 16x8 half
/// (`half` unused: accumulators are whole f32).
Slot cSlot(OpBuilder &b, Location loc, Value i, Value j) {
  IndexMath m{b, loc};
  return {m.add(m.mul(m.rem(i, 8), 4), m.div(j, 2)), m.add(m.mul(m.div(i, 8), 2), m.rem(j, 2)),
          Value()};
}

/// The bf16 in half `half` of a 32-bit register, as f32.
Value unpack(OpBuilder &b, Location loc, Type bf16, Value word, Value half) {
  Value vec = vector::BroadcastOp::create(b, loc, VectorType::get({1}, b.getI32Type()), word);
  Value pair = vector::BitCastOp::create(b, loc, VectorType::get({2}, bf16), vec);
  Value lo = vector::ExtractOp::create(b, loc, pair, ArrayRef<int64_t>{0});
  Value hi = vector::ExtractOp::create(b, loc, pair, ArrayRef<int64_t>{1});
  Value isLo = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, half, cst(b, loc, 0));
  Value element = arith::SelectOp::create(b, loc, isLo, lo, hi);
  return arith::ExtFOp::create(b, loc, b.getF32Type(), element);
}

} // namespace

void buildBf16Emulation(OpBuilder &b, MmaContraction &c) {
  Location loc = c.op.getLoc();
  Type i32 = b.getI32Type(), f32 = b.getF32Type();
  auto forEach = [&](OpBuilder &ob, int64_t n, function_ref<void(OpBuilder &, Value)> fn) {
    codegen::emulationLoop(ob, loc, n, fn);
  };
  // The warp's registers: A's per lane, B's per half and lane, and the
  // accumulators per lane.
  Value aRegs = memref::AllocOp::create(b, loc, MemRefType::get({kWarpSize, kARegisters}, i32));
  Value bRegs =
      memref::AllocOp::create(b, loc, MemRefType::get({kHalves, kWarpSize, kBRegisters}, i32));
  Value accs = memref::AllocOp::create(
      b, loc, MemRefType::get({kWarpSize, kHalves * kAccumulators}, f32));
  auto at = [&](OpBuilder &ob, ArrayRef<int64_t> fixed, ArrayRef<Value> dynamic) {
    SmallVector<Value> idx(dynamic);
    for (int64_t v : fixed)
      idx.push_back(cst(ob, loc, v));
    return idx;
  };
  forEach(b, c.batchSize, [&](OpBuilder &b1, Value bz) {
    forEach(b1, c.M() / kFragment, [&](OpBuilder &b2, Value by) {
      forEach(b2, c.gridX(), [&](OpBuilder &b3, Value bx) {
        forEach(b3, kWarpsPerBlock, [&](OpBuilder &wb, Value warp) {
          forWarpTile(wb, c, /*emulate=*/true, bx, by, bz, warp, [&](OpBuilder &ib, auto programOf) {
            forEach(ib, kWarpSize, [&](OpBuilder &lb, Value l) {
              SmallVector<Value> init = programOf(lb, l).initialAccumulators(lb);
              for (auto [e, v] : llvm::enumerate(init))
                memref::StoreOp::create(lb, loc, v, accs, at(lb, {(int64_t)e}, {l}));
            });
            scf::ForOp::create(
                ib, loc, cst(ib, loc, 0), cst(ib, loc, c.K()), cst(ib, loc, kFragment),
                ValueRange{}, [&](OpBuilder &sb, Location, Value k0, ValueRange) {
                  // Every lane's loads, then every lane's mma.sync.
                  forEach(sb, kWarpSize, [&](OpBuilder &lb, Value l) {
                    LaneProgram p = programOf(lb, l);
                    for (auto [r, v] : llvm::enumerate(p.aRegisters(lb, k0)))
                      memref::StoreOp::create(lb, loc, v, aRegs, at(lb, {(int64_t)r}, {l}));
                    for (int64_t h = 0; h < kHalves; ++h)
                      for (auto [r, v] : llvm::enumerate(p.bRegisters(lb, k0, h)))
                        memref::StoreOp::create(lb, loc, v, bRegs,
                                                {cst(lb, loc, h), l, cst(lb, loc, (int64_t)r)});
                  });
                  // Each mma.sync: every element (i, j) of the 16x8 half
                  // from row i of A and column j of B, all found through
                  // the inverse layouts, into its accumulator's slot.
                  for (int64_t h = 0; h < kHalves; ++h)
                    forEach(sb, kFragment, [&](OpBuilder &rb, Value i) {
                      forEach(rb, kHalfWidth, [&](OpBuilder &lb, Value j) {
                        Slot cs = cSlot(lb, loc, i, j);
                        SmallVector<Value> accAt{cs.lane, plus(lb, loc, cs.reg, kAccumulators * h)};
                        Value start = memref::LoadOp::create(lb, loc, accs, accAt);
                        auto sum = scf::ForOp::create(
                            lb, loc, cst(lb, loc, 0), cst(lb, loc, kFragment),
                            cst(lb, loc, 1), ValueRange{start},
                            [&](OpBuilder &kb, Location, Value kk, ValueRange s) {
                              Slot as = aSlot(kb, loc, i, kk), bs = bSlot(kb, loc, kk, j);
                              Value x = unpack(kb, loc, c.element(),
                                               memref::LoadOp::create(kb, loc, aRegs,
                                                                      ValueRange{as.lane, as.reg}),
                                               as.half);
                              Value y = unpack(
                                  kb, loc, c.element(),
                                  memref::LoadOp::create(kb, loc, bRegs,
                                                         ValueRange{cst(kb, loc, h), bs.lane, bs.reg}),
                                  bs.half);
                              Value xy = arith::MulFOp::create(kb, loc, x, y);
                              scf::YieldOp::create(kb, loc,
                                                   ValueRange{arith::AddFOp::create(kb, loc, s[0], xy)});
                            });
                        memref::StoreOp::create(lb, loc, sum.getResult(0), accs, accAt);
                      });
                    });
                  scf::YieldOp::create(sb, loc);
                });
            forEach(ib, kWarpSize, [&](OpBuilder &lb, Value l) {
              SmallVector<Value> acc;
              for (int64_t e = 0; e < kHalves * kAccumulators; ++e)
                acc.push_back(memref::LoadOp::create(lb, loc, accs, at(lb, {e}, {l})));
              programOf(lb, l).storeAccumulators(lb, acc);
            });
          });
        });
      });
    });
  });
  for (Value scratch : {aRegs, bRegs, accs})
    memref::DeallocOp::create(b, loc, scratch);
}

} // namespace kiln::mma
