// What kiln-gpu-mma-contractions' two kernels share: the matched product
// and the grid (blocks of four warps, each warp one 16x16 tile of C).
// GpuMmaContractions.cpp matches and builds f16 products with WMMA;
// GpuMmaSyncBf16.cpp builds bf16 products with mma.sync.
#ifndef KILN_CODEGEN_GPUMMACONTRACTIONS_H
#define KILN_CODEGEN_GPUMMACONTRACTIONS_H

#include "GpuKernelBuilder.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

namespace kiln::mma {

constexpr int64_t kFragment = 16;
constexpr int64_t kWarpsPerBlock = 4;
constexpr int64_t kWarpSize = 32;

/// C[batch][m][n] += A[batch][m][k] * B[batch][k][n], each of A and B with
/// the batch dims or none; m, n, k, batch are the op's loop dims.
struct MmaContraction {
  mlir::linalg::GenericOp op;
  llvm::SmallVector<int64_t> ranges;
  llvm::SmallVector<unsigned> batch; // loop dims, outermost first
  unsigned m, n, k;
  bool aBatched, bBatched;
  int64_t batchSize = 1;
  codegen::InitFill fill;

  int64_t M() const { return ranges[m]; }
  int64_t N() const { return ranges[n]; }
  int64_t K() const { return ranges[k]; }
  int64_t tilesN() const { return N() / kFragment; }
  int64_t gridX() const { return llvm::divideCeil(tilesN(), kWarpsPerBlock); }
  mlir::Value a() { return op.getDpsInputOperand(0)->get(); }
  mlir::Value b() { return op.getDpsInputOperand(1)->get(); }
  mlir::Value c() { return op.getDpsInitOperand(0)->get(); }
  mlir::Type element() { return mlir::getElementTypeOrSelf(c().getType()); }
};

/// Indices of the element at (row, col) of a batched or unbatched operand.
llvm::SmallVector<mlir::Value> fragmentAt(llvm::ArrayRef<mlir::Value> batchIv, bool batched,
                                          mlir::Value row, mlir::Value col);

/// The tile of C that warp `warp` of block `bx` computes (along n), and
/// whether it is inside C (a whole warp is in or out: the tensor cores need
/// all 32 threads).
std::pair<mlir::Value, mlir::Value> warpTile(mlir::OpBuilder &b, mlir::Location loc,
                                             const MmaContraction &c, mlir::Value bx,
                                             mlir::Value warp);

/// Where a tile starts: its first row (from the block's y), its first
/// column, and the batch indices (from the block's z).
struct TileOrigin {
  mlir::Value m0, n0;
  llvm::SmallVector<mlir::Value> batchIv;
};
TileOrigin tileOrigin(mlir::OpBuilder &b, mlir::Location loc, const MmaContraction &c,
                      mlir::Value tile, mlir::Value by, mlir::Value bz);

/// The launch of both kernels' grid: (ceil(N / 64), M / 16, batch)
/// blocks of four warps.
mlir::gpu::LaunchOp launchGrid(mlir::OpBuilder &b, const MmaContraction &c);

/// The bf16 kernel (mma.sync m16n8k16, f32 accumulators) and its CPU
/// emulation.
void buildBf16Launch(mlir::OpBuilder &b, MmaContraction &c);
void buildBf16Emulation(mlir::OpBuilder &b, MmaContraction &c);

} // namespace kiln::mma

#endif
