// What the kiln -> kernel-call lowerings share (LowerKernels.cpp, and the
// fused attention of LowerAttention.cpp): the kernels' names, their
// parameter blocks, and views of tensors that a kernel reads in place.
// Private to lib/codegen/conversion.
#ifndef KILN_CODEGEN_KERNELCALLSUPPORT_H
#define KILN_CODEGEN_KERNELCALLSUPPORT_H

#include "LoweringUtils.h"
#include "kiln/kernels.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

#include <cstdint>
#include <optional>

namespace kiln::codegen {

// The kernels' names, each checked against its prototype in kiln/kernels.h
// (sizeof: unevaluated, so nothing here links to the kernels).
#define KILN_KERNEL_SYMBOL(fn) (sizeof(&fn) ? #fn : #fn)
inline constexpr const char *kConv = KILN_KERNEL_SYMBOL(kiln_conv2d_nhwc_f32);
inline constexpr const char *kDwConv = KILN_KERNEL_SYMBOL(kiln_dwconv2d_nhwc_f32);
inline constexpr const char *kMatMul = KILN_KERNEL_SYMBOL(kiln_matmul_f32);
inline constexpr const char *kPool = KILN_KERNEL_SYMBOL(kiln_pool2d_nhwc_f32);
inline constexpr const char *kBytePool = KILN_KERNEL_SYMBOL(kiln_maxpool2d_nhwc_i8);
inline constexpr const char *kQConv = KILN_KERNEL_SYMBOL(kiln_qconv2d_nhwc_u8s8);
inline constexpr const char *kQDwConv = KILN_KERNEL_SYMBOL(kiln_qdwconv2d_nhwc_u8s8);
inline constexpr const char *kSoftmax = KILN_KERNEL_SYMBOL(kiln_softmax_f32);
inline constexpr const char *kLayerNorm = KILN_KERNEL_SYMBOL(kiln_layer_norm_f32);
inline constexpr const char *kAttention = KILN_KERNEL_SYMBOL(kiln_attention_f32);
inline constexpr const char *kAttentionMask = KILN_KERNEL_SYMBOL(kiln_attention_mask_f32);
inline constexpr const char *kNms = KILN_KERNEL_SYMBOL(kiln_nms_f32);
inline constexpr const char *kNonZero = KILN_KERNEL_SYMBOL(kiln_nonzero_u8);
inline constexpr const char *kTopK = KILN_KERNEL_SYMBOL(kiln_topk_f32);
inline constexpr const char *kDet = KILN_KERNEL_SYMBOL(kiln_det_f32);

/// A constant parameter block of i64s.
mlir::Value i64Block(mlir::OpBuilder &b, mlir::Location loc, llvm::ArrayRef<int64_t> values);
/// A parameter block some of whose fields are known only at run time:
/// `runtime` maps field positions to index values. Built with
/// tensor.from_elements, so bufferization gives it a buffer of its own.
mlir::Value i64Block(mlir::OpBuilder &b, mlir::Location loc, llvm::ArrayRef<int64_t> values,
                     llvm::ArrayRef<std::pair<unsigned, mlir::Value>> runtime);

/// A kernel's parameter struct (kiln/kernels.h) as its block of i64s.
template <typename Params> llvm::SmallVector<int64_t> fields(const Params &p) {
  static_assert(sizeof(Params) % sizeof(int64_t) == 0 &&
                    alignof(Params) == alignof(kiln_kernel_i64),
                "kernel parameter structs hold 64-bit integers only");
  const auto *begin = reinterpret_cast<const kiln_kernel_i64 *>(&p);
  return llvm::SmallVector<int64_t>(begin, begin + sizeof(Params) / sizeof(int64_t));
}

mlir::Value f32Block(mlir::OpBuilder &b, mlir::Location loc, llvm::ArrayRef<float> values);
mlir::Value f32(mlir::OpBuilder &b, mlir::Location loc, float v);

/// kiln.call_kernel of `kernel` with `args`; the result's address goes at
/// `outIndex` once bufferized. `rowStrides`: see the op's `row_strides`.
/// `flops` (when known) goes into profiles as `kiln.flops`.
mlir::Value callWithResult(mlir::OpBuilder &b, mlir::Location loc, llvm::StringRef kernel,
                           mlir::RankedTensorType resultType, mlir::ValueRange args,
                           unsigned outIndex, llvm::ArrayRef<int64_t> rowStrides = {},
                           int64_t flops = 0, mlir::ValueRange dynamicSizes = {});
/// A placeholder for a row stride that bufferization fills in.
mlir::Value strideSlot(mlir::OpBuilder &b, mlir::Location loc);
/// The values of an f32 constant.
std::optional<llvm::SmallVector<float>> constantFloats(mlir::Value v);

/// A tensor as a strided view of another: v[i0, ..., ik] =
/// base[offset + sum(i_d * strides[d])] in base's row-major storage.
struct StridedView {
  mlir::Value base;
  int64_t offset = 0;
  llvm::SmallVector<int64_t> strides;
};
/// Follows transposes, reshapes and unit-step slices back to the tensor
/// they read (see the definition).
StridedView stridedViewOf(mlir::Value v);

/// A batched matrix [batch, rows, cols] inside `base`.
struct MatrixView {
  mlir::Value base;
  int64_t offset, batchStride, rowStride, colStride;
};
/// `v` as a view of another tensor, when its batch dims fold into one
/// stride (or are a single batch); nullopt when it is its own base.
std::optional<MatrixView> matrixViewOf(mlir::Value v);
/// `v` as `batch` matrices: a strided view of another tensor or itself,
/// row-major. Every batch must be distinct (no broadcast).
std::optional<MatrixView> batchedMatrix(mlir::Value v, int64_t batch);
/// matrixViewOf for dims known only at run time: the batch dims static,
/// every stride used static.
std::optional<MatrixView> dynamicMatrixView(mlir::Value v);

} // namespace kiln::codegen

#endif
