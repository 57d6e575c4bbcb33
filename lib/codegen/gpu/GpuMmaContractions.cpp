// kiln-gpu-mma-contractions: f16 and bf16 matrix products on tensor cores.
//
// Why: an f16 product on CUDA cores runs one FMA per thread per step; an
// H100's tensor cores do a 16x16x16 product per warp instruction group,
// several times the FP32 rate. This is the issue's "tensor cores for
// f16/bf16 where the type allows".
//
// What qualifies: a linalg.generic C[batch][m][n] += A[batch][m][k] *
// B[batch][k][n] in f16 or bf16, one reduction dim, A and B with the batch dims
// or none (a weight shared across the batch), on static row-major
// (identity-layout) memrefs, with M, N and K multiples of 16 and no input
// in the output's memory. bf16 products are built by GpuMmaSyncBf16.cpp
// (mma.sync, f32 accumulators: WMMA and upstream's gpu.mma_matrix have no
// bf16); what follows is the f16 kernel (f16 accumulation, Kiln's
// semantics for an f16 MatMul on every path).
//
// The f16 kernel (upstream's gpu.subgroup_mma_* ops, which convert-gpu-to-nvvm
// lowers to wmma.load / wmma.mma / wmma.store, m16n16k16): blocks of four
// warps, each warp one 16x16 tile of C along n; per step of 16 along k, a
// warp loads its A and B fragments straight from global memory (leading
// dims K and N) and multiply-adds them into its accumulator fragment,
// which starts as C (or as the value of a fill of C right before the op,
// which is taken over: no fill kernel) and is stored once. Fragment
// addresses are multiples of 32 bytes from the buffers' starts (16-element
// steps of f16 along rows whose lengths are multiples of 16); A's and B's
// buffers must start at multiples of 32 bytes too (planned buffers, weights,
// outputs: codegen::BufferAlignment), so a product that reads a model
// input, which may be at any address, keeps the CUDA-core kernels.
// No shared-memory staging yet: each fragment is read from global memory
// (L2) by the warp that needs it.
//
// emulate=true builds the same grid, warps and k steps for the CPU with the
// fragment operations as scalar loops that address each element as WMMA
// does (fragment origin, leading dimension), checked by kiln-run
// --gpu-tensor-passes; the tensor cores' own rounding is not.
#include "kiln/Codegen/GpuPasses.h"

#include "GpuMmaContractions.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace kiln {
#define GEN_PASS_DEF_KILNGPUMMACONTRACTIONS
#include "kiln/Codegen/GpuPasses.h.inc"
} // namespace kiln

using namespace mlir;

namespace kiln::mma {
namespace {

/// Whether the body is `yield out + x * y` (either order of each).
bool isMultiplyAdd(linalg::GenericOp op) {
  Block *body = op.getBody();
  auto yield = cast<linalg::YieldOp>(body->getTerminator());
  auto add = yield.getOperand(0).getDefiningOp<arith::AddFOp>();
  if (!add)
    return false;
  Value out = body->getArgument(2);
  Value product = add.getLhs() == out ? add.getRhs() : add.getRhs() == out ? add.getLhs() : Value();
  auto mul = product ? product.getDefiningOp<arith::MulFOp>() : nullptr;
  if (!mul)
    return false;
  Value x = body->getArgument(0), y = body->getArgument(1);
  return ((mul.getLhs() == x && mul.getRhs() == y) || (mul.getLhs() == y && mul.getRhs() == x)) &&
         body->getOperations().size() == 3;
}

/// The dims of `map`'s results, if they are all plain dims.
std::optional<SmallVector<unsigned>> dimsOf(AffineMap map) {
  SmallVector<unsigned> dims;
  for (AffineExpr e : map.getResults()) {
    auto d = dyn_cast<AffineDimExpr>(e);
    if (!d)
      return std::nullopt;
    dims.push_back(d.getPosition());
  }
  return dims;
}

std::optional<MmaContraction> matchMma(linalg::GenericOp op, const codegen::BufferAlignment &buffers,
                                      bool bf16) {
  if (op.getNumDpsInputs() != 2 || op.getNumDpsInits() != 1 || op.getNumReductionLoops() != 1 ||
      !isMultiplyAdd(op))
    return std::nullopt;
  Type element = getElementTypeOrSelf(op.getDpsInitOperand(0)->get().getType());
  if (!element.isF16() && !(bf16 && element.isBF16()))
    return std::nullopt;
  auto same = [&](Type t) { return t == element; };
  std::optional<SmallVector<int64_t>> ranges = codegen::kernelLoopRanges(op, same);
  if (!ranges)
    return std::nullopt;
  for (OpOperand &x : op->getOpOperands())
    if (!cast<MemRefType>(x.get().getType()).getLayout().isIdentity())
      return std::nullopt;
  auto out = dimsOf(op.getMatchingIndexingMap(op.getDpsInitOperand(0)));
  auto a = dimsOf(op.getMatchingIndexingMap(op.getDpsInputOperand(0)));
  auto b = dimsOf(op.getMatchingIndexingMap(op.getDpsInputOperand(1)));
  if (!out || !a || !b || out->size() < 2 || a->size() < 2 || b->size() < 2)
    return std::nullopt;
  MmaContraction c{op, *ranges, {}, 0, 0, 0, false, false, 1, {}};
  c.batch.assign(out->begin(), out->end() - 2);
  c.m = (*out)[out->size() - 2];
  c.n = out->back();
  c.k = (*a).back();
  if (linalg::isParallelIterator(op.getIteratorTypesArray()[c.k]))
    return std::nullopt;
  // A: [batch or none] m k; B: [batch or none] k n.
  auto batchOk = [&](ArrayRef<unsigned> dims, bool &batched) {
    batched = !dims.empty();
    return dims.empty() || llvm::equal(dims, c.batch);
  };
  ArrayRef<unsigned> aDims = *a, bDims = *b;
  if (aDims[aDims.size() - 2] != c.m || bDims[bDims.size() - 2] != c.k || bDims.back() != c.n ||
      !batchOk(aDims.drop_back(2), c.aBatched) || !batchOk(bDims.drop_back(2), c.bBatched))
    return std::nullopt;
  if (c.M() % kFragment || c.N() % kFragment || c.K() % kFragment || !c.M() || !c.N() || !c.K())
    return std::nullopt;
  // WMMA's A and B fragments must start at multiples of 32 bytes, C's of
  // 16 (PTX ISA, "Matrix Storage for WMMA"). Inside a buffer they do (16-
  // element steps along rows of multiples of 16 f16); the buffers' starts
  // must too, which a model input's need not. The bf16 kernel reads A and
  // writes C as pairs of elements (even columns): 4 bytes.
  bool ok = element.isF16() ? buffers.of(c.a(), 2) >= 32 && buffers.of(c.b(), 2) >= 32 &&
                                  buffers.of(c.c(), 2) >= 16
                            : buffers.of(c.a(), 2) >= 4 && buffers.of(c.c(), 2) >= 4;
  if (!ok)
    return std::nullopt;
  for (unsigned d : c.batch)
    c.batchSize *= c.ranges[d];
  if (c.batchSize > 65535 || c.M() / kFragment > 65535)
    return std::nullopt;
  c.fill = codegen::initFill(op);
  return c;
}

} // namespace

/// The row stride of a row-major operand, which WMMA takes as the leading
/// dimension: its innermost extent.
static int64_t leadDimension(Value mem) { return cast<MemRefType>(mem.getType()).getShape().back(); }

SmallVector<Value> fragmentAt(ArrayRef<Value> batchIv, bool batched, Value row, Value col) {
  SmallVector<Value> idx;
  if (batched)
    llvm::append_range(idx, batchIv);
  idx.push_back(row);
  idx.push_back(col);
  return idx;
}

/// The loop indices of the batch dims from the flattened block index.
static SmallVector<Value> batchIndices(OpBuilder &b, Location loc, const MmaContraction &c, Value z) {
  SmallVector<Value> iv(c.ranges.size());
  codegen::delinearizeLoops(b, loc, z, c.batch, c.ranges, iv);
  SmallVector<Value> out;
  for (unsigned d : c.batch)
    out.push_back(iv[d]);
  return out;
}

std::pair<Value, Value> warpTile(OpBuilder &b, Location loc, const MmaContraction &c, Value bx,
                                 Value warp) {
  Value tile = arith::AddIOp::create(
      b, loc, arith::MulIOp::create(b, loc, bx, codegen::indexConstant(b, loc, kWarpsPerBlock)),
      warp);
  Value inside = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, tile,
                                       codegen::indexConstant(b, loc, c.tilesN()));
  return {tile, inside};
}

TileOrigin tileOrigin(OpBuilder &b, Location loc, const MmaContraction &c, Value tile, Value by,
                      Value bz) {
  Value sixteen = codegen::indexConstant(b, loc, kFragment);
  return {arith::MulIOp::create(b, loc, by, sixteen), arith::MulIOp::create(b, loc, tile, sixteen),
          batchIndices(b, loc, c, bz)};
}

gpu::LaunchOp launchGrid(OpBuilder &b, const MmaContraction &c) {
  Location loc = c.op->getLoc();
  auto cst = [&](int64_t v) { return codegen::indexConstant(b, loc, v); };
  Value one = cst(1);
  return gpu::LaunchOp::create(b, loc, cst(c.gridX()), cst(c.M() / kFragment), cst(c.batchSize),
                               cst(kWarpsPerBlock * kWarpSize), one, one);
}

namespace {

/// The f16 kernel: WMMA fragments, f16 accumulators.
void buildLaunch(OpBuilder &b, MmaContraction &c) {
  Location loc = c.op.getLoc();
  auto cst = [&](OpBuilder &ob, int64_t v) { return codegen::indexConstant(ob, loc, v); };
  gpu::LaunchOp launch = launchGrid(b, c);
  OpBuilder kb = OpBuilder::atBlockBegin(&launch.getBody().front());
  Type f16 = kb.getF16Type();
  auto fragment = [&](StringRef kind) {
    return gpu::MMAMatrixType::get({kFragment, kFragment}, f16, kind);
  };
  Value warp = arith::DivUIOp::create(kb, loc, launch.getThreadIds().x, cst(kb, kWarpSize));
  auto [tile, inside] = warpTile(kb, loc, c, launch.getBlockIds().x, warp);
  auto ifOp = scf::IfOp::create(kb, loc, inside, /*withElseRegion=*/false);
  OpBuilder ib = ifOp.getThenBodyBuilder();
  TileOrigin origin =
      tileOrigin(ib, loc, c, tile, launch.getBlockIds().y, launch.getBlockIds().z);
  Value m0 = origin.m0, n0 = origin.n0;
  ArrayRef<Value> batchIv = origin.batchIv;
  auto ld = [&](Value mem) { return ib.getIndexAttr(leadDimension(mem)); };
  SmallVector<Value> cAt = fragmentAt(batchIv, true, m0, n0);
  Value init = c.fill ? Value(gpu::SubgroupMmaConstantMatrixOp::create(ib, loc, fragment("COp"),
                                                                       c.fill.value))
                      : Value(gpu::SubgroupMmaLoadMatrixOp::create(ib, loc, fragment("COp"), c.c(),
                                                                   cAt, ld(c.c()), UnitAttr()));
  auto steps = scf::ForOp::create(
      ib, loc, cst(ib, 0), cst(ib, c.K()), cst(ib, kFragment), ValueRange{init},
      [&](OpBuilder &lb, Location, Value k0, ValueRange acc) {
        Value a = gpu::SubgroupMmaLoadMatrixOp::create(
            lb, loc, fragment("AOp"), c.a(), fragmentAt(batchIv, c.aBatched, m0, k0),
            lb.getIndexAttr(leadDimension(c.a())), UnitAttr());
        Value bf = gpu::SubgroupMmaLoadMatrixOp::create(
            lb, loc, fragment("BOp"), c.b(), fragmentAt(batchIv, c.bBatched, k0, n0),
            lb.getIndexAttr(leadDimension(c.b())), UnitAttr());
        Value sum = gpu::SubgroupMmaComputeOp::create(lb, loc, fragment("COp"), a, bf, acc[0],
                                                      UnitAttr(), UnitAttr());
        scf::YieldOp::create(lb, loc, sum);
      });
  gpu::SubgroupMmaStoreMatrixOp::create(ib, loc, steps.getResult(0), c.c(), cAt, ld(c.c()),
                                        UnitAttr());
  kb.setInsertionPointToEnd(&launch.getBody().front());
  gpu::TerminatorOp::create(kb, loc);
}

/// Where WMMA finds element (i, j) of the fragment at `origin` of `mem`:
/// i rows of leadDimension(mem) elements and j elements past the
/// fragment's first element, in the buffer flattened to one dim.
std::pair<Value, Value> fragmentElement(OpBuilder &b, Location loc, Value mem,
                                        ArrayRef<Value> origin, Value i, Value j) {
  auto type = cast<MemRefType>(mem.getType());
  ReassociationIndices all;
  for (int64_t d = 0; d < type.getRank(); ++d)
    all.push_back(d);
  Value flat = memref::CollapseShapeOp::create(b, loc, mem, ArrayRef<ReassociationIndices>{all});
  Value at = codegen::indexConstant(b, loc, 0);
  int64_t stride = 1;
  for (int64_t d = type.getRank() - 1; d >= 0; --d) {
    at = arith::AddIOp::create(
        b, loc, at, arith::MulIOp::create(b, loc, origin[d], codegen::indexConstant(b, loc, stride)));
    stride *= type.getDimSize(d);
  }
  Value row = arith::MulIOp::create(b, loc, i, codegen::indexConstant(b, loc, leadDimension(mem)));
  at = arith::AddIOp::create(b, loc, at, arith::AddIOp::create(b, loc, row, j));
  return {flat, at};
}

/// The same grid, warps and k steps for the CPU (emulate=true), each
/// fragment operation a loop over its 16x16 elements, addressed as WMMA
/// addresses them (fragmentElement).
void buildEmulation(OpBuilder &b, MmaContraction &c) {
  Location loc = c.op.getLoc();
  auto cst = [&](OpBuilder &ob, int64_t v) { return codegen::indexConstant(ob, loc, v); };
  auto forEach = [&](OpBuilder &ob, int64_t n, function_ref<void(OpBuilder &, Value)> fn) {
    codegen::emulationLoop(ob, loc, n, fn);
  };
  Value acc = memref::AllocOp::create(
      b, loc, MemRefType::get({kFragment, kFragment}, b.getF16Type()));
  forEach(b, c.batchSize, [&](OpBuilder &b1, Value bz) {
    forEach(b1, c.M() / kFragment, [&](OpBuilder &b2, Value by) {
      forEach(b2, c.gridX(), [&](OpBuilder &b3, Value bx) {
        forEach(b3, kWarpsPerBlock, [&](OpBuilder &wb, Value warp) {
          auto [tile, inside] = warpTile(wb, loc, c, bx, warp);
          auto ifOp = scf::IfOp::create(wb, loc, inside, /*withElseRegion=*/false);
          OpBuilder ib = ifOp.getThenBodyBuilder();
          TileOrigin origin = tileOrigin(ib, loc, c, tile, by, bz);
          Value m0 = origin.m0, n0 = origin.n0;
          ArrayRef<Value> batchIv = origin.batchIv;
          auto load = [&](OpBuilder &ob, Value mem, ArrayRef<Value> origin, Value i, Value j) {
            auto [flat, at] = fragmentElement(ob, loc, mem, origin, i, j);
            return memref::LoadOp::create(ob, loc, flat, at).getResult();
          };
          SmallVector<Value> cAt = fragmentAt(batchIv, true, m0, n0);
          forEach(ib, kFragment, [&](OpBuilder &rb, Value i) {
            forEach(rb, kFragment, [&](OpBuilder &eb, Value j) {
              Value v = c.fill ? c.fill.value : load(eb, c.c(), cAt, i, j);
              memref::StoreOp::create(eb, loc, v, acc, ValueRange{i, j});
            });
          });
          scf::ForOp::create(
              ib, loc, cst(ib, 0), cst(ib, c.K()), cst(ib, kFragment), ValueRange{},
              [&](OpBuilder &lb, Location, Value k0, ValueRange) {
                forEach(lb, kFragment, [&](OpBuilder &rb, Value i) {
                  forEach(rb, kFragment, [&](OpBuilder &eb, Value j) {
                    forEach(eb, kFragment, [&](OpBuilder &kb, Value kk) {
                      Value x = load(kb, c.a(), fragmentAt(batchIv, c.aBatched, m0, k0), i, kk);
                      Value y = load(kb, c.b(), fragmentAt(batchIv, c.bBatched, k0, n0), kk, j);
                      Value s = memref::LoadOp::create(kb, loc, acc, ValueRange{i, j});
                      Value p = arith::MulFOp::create(kb, loc, x, y);
                      memref::StoreOp::create(kb, loc, arith::AddFOp::create(kb, loc, s, p), acc,
                                              ValueRange{i, j});
                    });
                  });
                });
                scf::YieldOp::create(lb, loc);
              });
          forEach(ib, kFragment, [&](OpBuilder &rb, Value i) {
            forEach(rb, kFragment, [&](OpBuilder &eb, Value j) {
              Value v = memref::LoadOp::create(eb, loc, acc, ValueRange{i, j});
              auto [flat, at] = fragmentElement(eb, loc, c.c(), cAt, i, j);
              memref::StoreOp::create(eb, loc, v, flat, at);
            });
          });
        });
      });
    });
  });
  memref::DeallocOp::create(b, loc, acc);
}

struct GpuMmaContractionsPass : impl::KilnGpuMmaContractionsBase<GpuMmaContractionsPass> {
  using KilnGpuMmaContractionsBase::KilnGpuMmaContractionsBase;
  void runOnOperation() override {
    codegen::BufferAlignment buffers(getOperation(), globalAlignment);
    SmallVector<linalg::GenericOp> ops;
    getOperation().walk([&](linalg::GenericOp op) { ops.push_back(op); });
    for (linalg::GenericOp op : ops) {
      std::optional<MmaContraction> c = matchMma(op, buffers, bf16);
      if (!c)
        continue;
      codegen::replaceWithKernel(op, c->fill, [&](OpBuilder &b) {
        if (c->element().isBF16())
          emulate ? buildBf16Emulation(b, *c) : buildBf16Launch(b, *c);
        else
          emulate ? buildEmulation(b, *c) : buildLaunch(b, *c);
      });
    }
  }
};

} // namespace
} // namespace kiln::mma
