// kiln-gpu-tile-contractions' TF32 kernel (GpuTileEmitter.h): K-slices
// staged with cp.async in two stages, fragments rounded to TF32 as they
// load, mma.sync m16n8k8 with .tf32 operands, and its CPU emulation's
// mma.sync.
#include "GpuTileEmitter.h"

#include "kiln/Codegen/GpuPasses.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace kiln::gputiles {

template <typename SetDims>
void TileEmitter::copyElements(OpBuilder &b, OpOperand *operand, Value inside, Value x, Value k,
                  SetDims &setDims, Value dst, ArrayRef<Value> dstIndices, int64_t count) const {
  Value srcElements, xs = x, ks = k;
  if (inside) {
    Value zero = cst(b, 0);
    xs = arith::SelectOp::create(b, loc, inside, x, zero);
    ks = arith::SelectOp::create(b, loc, inside, k, zero);
    srcElements = arith::SelectOp::create(b, loc, inside, cst(b, count), zero);
  }
  SmallVector<Value> iv = blockIndices(b);
  setDims(xs, ks)(b, iv);
  nvgpu::DeviceAsyncCopyOp::create(b, loc, dst, dstIndices, operand->get(),
                                   operandIndices(b, operand, iv), b.getIndexAttr(count),
                                   srcElements,
                                   /*bypassL1=*/count == 4 ? b.getUnitAttr() : UnitAttr());
}

void TileEmitter::copySlice(OpBuilder &b, Value t, Value k0, Value stage) const {
  Value m0 = arith::MulIOp::create(b, loc, blockM, cst(b, tile.bm));
  Value n0 = arith::MulIOp::create(b, loc, blockN, cst(b, tile.bn));
  for (auto [operand, group, extent, x0, span, dst, st, plan] :
       {std::tuple(c.a, ArrayRef<unsigned>(c.m), c.M, m0, tile.bm, aTile, aStage, aCopy),
        std::tuple(c.b, ArrayRef<unsigned>(c.n), c.N, n0, tile.bn, bTile, bStage, bCopy)}) {
    bool alongK = kInner(operand, group);
    int64_t width = plan.run;
    for (int64_t e = 0; e < span * tile.bk / width; e += kThreads) {
      auto [ki, xi] = slot(b, t, e, operand, group, span, width);
      Value x = arith::AddIOp::create(b, loc, x0, xi), k = arith::AddIOp::create(b, loc, k0, ki);
      // All `width` elements are inside or none: copyWidth asks the
      // extents along the copy to be multiples of it.
      Value inside = both(b, below(b, x, extent, span), below(b, k, c.K, tile.bk));
      auto setDims = [&, group = group](Value xv, Value kv) {
        return [&, xv, kv, group](OpBuilder &nb, SmallVectorImpl<Value> &iv) {
          delinearize(nb, xv, group, iv);
          delinearize(nb, kv, c.k, iv);
        };
      };
      if (emulate || !plan.wide) {
        for (int64_t l = 0; l < width; ++l) {
          Value kl = alongK ? add(b, k, l) : k, xl = alongK ? x : add(b, x, l);
          Value kil = alongK ? add(b, ki, l) : ki, xil = alongK ? xi : add(b, xi, l);
          Value inl = both(b, below(b, xl, extent, span), below(b, kl, c.K, tile.bk));
          auto [row, col] = st.at(b, loc, kil, xil);
          if (emulate || !plan.async) {
            memref::StoreOp::create(b, loc, guardedLoad(b, operand, inl, setDims(xl, kl)), dst,
                                    tileIndices(stage, row, col));
            continue;
          }
          copyElements(b, operand, inl, xl, kl, setDims, dst, tileIndices(stage, row, col), 1);
        }
        continue;
      }
      auto [row, col] = st.at(b, loc, ki, xi);
      copyElements(b, operand, inside, x, k, setDims, dst, tileIndices(stage, row, col), width);
    }
  }
}

void TileEmitter::commitCopies(OpBuilder &b) const {
  if (!emulate)
    NVVM::CpAsyncCommitGroupOp::create(b, loc);
}

void TileEmitter::waitCopies(OpBuilder &b) const {
  if (!emulate)
    NVVM::CpAsyncWaitGroupOp::create(b, loc, 0);
}

Value TileEmitter::stageOf(OpBuilder &b, Value k0) const {
  Value slice = arith::DivUIOp::create(b, loc, k0, cst(b, tile.bk));
  return arith::RemUIOp::create(b, loc, slice, cst(b, kStages));
}

Value TileEmitter::otherStage(OpBuilder &b, Value stage) const {
  return arith::SubIOp::create(b, loc, cst(b, kStages - 1), stage);
}

Value TileEmitter::roundToTf32(OpBuilder &b, Value x) const {
  Type i32 = b.getI32Type();
  if (!emulate) {
    Value word = NVVM::ConvertFloatToTF32Op::create(
        b, loc, i32, x, NVVM::FPRoundingModeAttr::get(b.getContext(), NVVM::FPRoundingMode::RNA));
    return arith::BitcastOp::create(b, loc, b.getF32Type(), word);
  }
  Value bits = arith::BitcastOp::create(b, loc, i32, x);
  Value half = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(0x1000));
  Value mask = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(int32_t(0xFFFFE000u)));
  Value rounded = arith::AndIOp::create(b, loc, arith::AddIOp::create(b, loc, bits, half), mask);
  // NaNs (and infinities) as they are: the addition could carry a NaN's
  // mantissa into its exponent or sign (0x7FFFFFFF would become -0.0),
  // where cvt.rna keeps a NaN.
  Value expMask = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(0x7F800000));
  Value special = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                        arith::AndIOp::create(b, loc, bits, expMask), expMask);
  rounded = arith::SelectOp::create(b, loc, special, bits, rounded);
  return arith::BitcastOp::create(b, loc, b.getF32Type(), rounded);
}

TileEmitter::WarpLane TileEmitter::warpLane(OpBuilder &b, Value t) const {
  Value warp = arith::DivUIOp::create(b, loc, t, cst(b, kWarpSize));
  Value lane = arith::RemUIOp::create(b, loc, t, cst(b, kWarpSize));
  Value wm = arith::DivUIOp::create(b, loc, warp, cst(b, kWarpsN));
  Value wn = arith::RemUIOp::create(b, loc, warp, cst(b, kWarpsN));
  return {lane, arith::DivUIOp::create(b, loc, lane, cst(b, 4)),
          arith::RemUIOp::create(b, loc, lane, cst(b, 4)),
          arith::MulIOp::create(b, loc, wm, cst(b, tile.bm / kWarpsM)),
          arith::MulIOp::create(b, loc, wn, cst(b, tile.bn / kWarpsN))};
}

SmallVector<Value> TileEmitter::fragments(OpBuilder &b, Value t, Value stageIdx) const {
  WarpLane w = warpLane(b, t);
  int64_t steps = tile.bk / kMmaK;
  SmallVector<Value> regs(steps * fragmentsPerStep());
  for (int64_t i = 0; i < mTiles(); ++i) {
    SmallVector<Value> a = aFragments(b, w, stageIdx, i);
    for (int64_t st = 0; st < steps; ++st)
      for (int64_t r = 0; r < kARegs; ++r)
        regs[st * fragmentsPerStep() + i * kARegs + r] = a[st * kARegs + r];
  }
  SmallVector<Value> bRegs = bFragments(b, w, stageIdx);
  for (int64_t st = 0; st < steps; ++st)
    for (int64_t r = 0; r < nTiles() * kBRegs; ++r)
      regs[st * fragmentsPerStep() + mTiles() * kARegs + r] = bRegs[st * nTiles() * kBRegs + r];
  return regs;
}

SmallVector<Value> TileEmitter::laneValues(OpBuilder &b, const WarpLane &w, Value tileMem,
                              const Staging &stage, Value stageIdx, Value x,
                              std::optional<int64_t> step) const {
  int64_t group = tile.bk / 4;
  SmallVector<Value> values;
  auto scalar = [&](Value k) {
    auto [row, col] = stage.at(b, loc, k, x);
    values.push_back(roundToTf32(
        b, memref::LoadOp::create(b, loc, tileMem, tileIndices(stageIdx, row, col))));
  };
  if (!laneRuns) {
    for (int64_t st = step.value_or(0); st < (step ? *step + 1 : tile.bk / kMmaK); ++st)
      for (int64_t h = 0; h < 2; ++h)
        scalar(add(b, w.q, st * kMmaK + 4 * h));
    return values;
  }
  assert(!step && "lane runs are loaded for the whole slice");
  Value kq = arith::MulIOp::create(b, loc, w.q, cst(b, group));
  if (stage.xMajor) {
    auto vecType = VectorType::get({group}, b.getF32Type());
    Value vec = vector::LoadOp::create(
        b, loc, vecType, tileMem, tileIndices(stageIdx, x, kq), /*nontemporal=*/false,
        emulate ? llvm::MaybeAlign() : llvm::MaybeAlign(kTf32TileAlignment));
    for (int64_t cIdx = 0; cIdx < group; ++cIdx)
      values.push_back(
          roundToTf32(b, vector::ExtractOp::create(b, loc, vec, ArrayRef<int64_t>{cIdx})));
    return values;
  }
  for (int64_t cIdx = 0; cIdx < group; ++cIdx)
    scalar(add(b, kq, cIdx));
  return values;
}

SmallVector<Value> TileEmitter::aFragments(OpBuilder &b, const WarpLane &w, Value stageIdx, int64_t i,
                              std::optional<int64_t> step) const {
  int64_t steps = step ? 1 : tile.bk / kMmaK;
  SmallVector<Value> regs(steps * kARegs);
  Value gm = arith::AddIOp::create(b, loc, w.m0, w.g);
  Value m = add(b, gm, i * kMmaM), m8 = add(b, gm, i * kMmaM + 8);
  for (auto [rowIdx, row] : llvm::enumerate(SmallVector<Value>{m, m8})) {
    SmallVector<Value> v = laneValues(b, w, aTile, aStage, stageIdx, row, step);
    for (int64_t st = 0; st < steps; ++st)
      for (int64_t h = 0; h < 2; ++h)
        regs[st * kARegs + 2 * h + rowIdx] = v[2 * st + h];
  }
  return regs;
}

SmallVector<Value> TileEmitter::bFragments(OpBuilder &b, const WarpLane &w, Value stageIdx,
                              std::optional<int64_t> step) const {
  int64_t steps = step ? 1 : tile.bk / kMmaK;
  SmallVector<Value> regs(steps * nTiles() * kBRegs);
  Value gn = arith::AddIOp::create(b, loc, w.n0, w.g);
  for (int64_t j = 0; j < nTiles(); ++j) {
    SmallVector<Value> v =
        laneValues(b, w, bTile, bStage, stageIdx, add(b, gn, j * kMmaN), step);
    for (int64_t st = 0; st < steps; ++st)
      for (int64_t h = 0; h < 2; ++h)
        regs[(st * nTiles() + j) * kBRegs + h] = v[2 * st + h];
  }
  return regs;
}

SmallVector<Value> TileEmitter::mmaMultiply(OpBuilder &b, Value t, Value stage, ValueRange acc) const {
  Type i32 = b.getI32Type(), f32 = b.getF32Type();
  auto dType = LLVM::LLVMStructType::getLiteral(b.getContext(), SmallVector<Type>(kCRegs, f32));
  auto word = [&](Value v) -> Value { return arith::BitcastOp::create(b, loc, i32, v); };
  SmallVector<Value> sums(acc.begin(), acc.end());
  WarpLane w = warpLane(b, t);
  // The mma.sync of row tile i, column tile j, step s (regs of that step).
  auto mma = [&](int64_t i, int64_t j, ArrayRef<Value> aRegs, ArrayRef<Value> bRegs) {
    SmallVector<Value> a, bv;
    for (int64_t r = 0; r < kARegs; ++r)
      a.push_back(word(aRegs[r]));
    for (int64_t r = 0; r < kBRegs; ++r)
      bv.push_back(word(bRegs[r]));
    int64_t first = (i * nTiles() + j) * kCRegs;
    Value d = NVVM::MmaOp::create(
        b, loc, dType, a, bv, ArrayRef<Value>(sums).slice(first, kCRegs), {kMmaM, kMmaN, kMmaK},
        std::nullopt, std::nullopt,
        std::array<NVVM::MMATypes, 2>{NVVM::MMATypes::tf32, NVVM::MMATypes::tf32},
        std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row, NVVM::MMALayout::col});
    for (int64_t e = 0; e < kCRegs; ++e)
      sums[first + e] = LLVM::ExtractValueOp::create(b, loc, d, e);
  };
  int64_t steps = tile.bk / kMmaK;
  if (laneRuns) {
    SmallVector<Value> bRegs = bFragments(b, w, stage);
    for (int64_t i = 0; i < mTiles(); ++i) {
      SmallVector<Value> aRegs = aFragments(b, w, stage, i);
      for (int64_t s = 0; s < steps; ++s)
        for (int64_t j = 0; j < nTiles(); ++j)
          mma(i, j, ArrayRef(aRegs).slice(s * kARegs, kARegs),
              ArrayRef(bRegs).slice((s * nTiles() + j) * kBRegs, kBRegs));
    }
    return sums;
  }
  for (int64_t s = 0; s < steps; ++s) {
    SmallVector<SmallVector<Value>> aRegs;
    for (int64_t i = 0; i < mTiles(); ++i)
      aRegs.push_back(aFragments(b, w, stage, i, s));
    SmallVector<Value> bRegs = bFragments(b, w, stage, s);
    for (int64_t i = 0; i < mTiles(); ++i)
      for (int64_t j = 0; j < nTiles(); ++j)
        mma(i, j, aRegs[i], ArrayRef(bRegs).slice(j * kBRegs, kBRegs));
  }
  return sums;
}

std::pair<Value, Value> TileEmitter::accumulatorAt(OpBuilder &b, const WarpLane &w, int64_t idx) const {
  int64_t e = idx % kCRegs, j = idx / kCRegs % nTiles(), i = idx / kCRegs / nTiles();
  Value row = add(b, arith::AddIOp::create(b, loc, w.m0, w.g), i * kMmaM + 8 * (e / 2));
  Value col = add(b, arith::AddIOp::create(b, loc, w.n0, arith::MulIOp::create(b, loc, w.q, cst(b, 2))),
                  j * kMmaN + e % 2);
  return {row, col};
}

void TileEmitter::emulatedMma(OpBuilder &b, Value t, Value fragMem, Value accMem) const {
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

} // namespace kiln::gputiles
