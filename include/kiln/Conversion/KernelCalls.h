// Calls from generated code into Kiln's microkernels (runtime/kernels): the
// kiln -> kernel-call lowering and the calls' bufferization. The linking of
// the kernels into the generated LLVM module is the target's
// (kiln/Target/KernelLibrary.h).
#ifndef KILN_CONVERSION_KERNELCALLS_H
#define KILN_CONVERSION_KERNELCALLS_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/PatternMatch.h"

namespace kiln::codegen {

/// Declares the kernel entry points (private funcs) in `module`, so that
/// function-level lowering patterns can call them.
void declareKernelFunctions(mlir::ModuleOp module);

/// Conv2DNhwc, f32 MatMul, channels_last pooling, Softmax and LayerNorm ->
/// kernel calls.
void populateKernelLoweringPatterns(mlir::RewritePatternSet &patterns);

/// Patterns that replace several kiln ops by one kernel call (attention:
/// matmul, softmax, matmul). Run greedily before the op-by-op lowering,
/// which would otherwise lower the inner ops first.
void populateFusedKernelPatterns(mlir::RewritePatternSet &patterns);

/// Whether a matrix product with dims known only at run time lowers to the
/// kernels (while kiln-lower-to-linalg runs on a function with such dims).
bool dynamicMatMulSupported(mlir::Operation *matmul);
/// The same for a kiln.conv2d_nhwc (a 1x1 convolution over a run-time
/// number of pixels in one row: a matrix product with constant weights).
bool dynamicConvSupported(mlir::Operation *conv);
/// The same for a channels_last kiln.max_pool / kiln.avg_pool (a batch
/// known only at run time).
bool dynamicPoolSupported(mlir::Operation *pool);

/// Kernel choices tuned per layer (lib/api/KernelTuning.cpp). A layer is
/// named by its kernel and parameter block ("conv2d_nhwc_f32:n,h,w,c,oh,ow,
/// oc,kh,kw,sh,sw,ph,pw,dh,dw,groups,flags", the flags without schedule
/// bits). The lowering marks every tunable layer's kiln.call_kernel with
/// its name (`kiln.kernel_layer`), and ORs the schedule the module's
/// `kiln.kernel_choices` dictionary gives that name (an i64 of
/// KILN_CONV_SCHEDULE_BITS) into the layer's flags. Layers whose shapes
/// are known only at run time are not tunable.
inline constexpr const char *kKernelLayerAttr = "kiln.kernel_layer";
inline constexpr const char *kKernelChoicesAttr = "kiln.kernel_choices";
inline constexpr const char *kConvLayerPrefix = "conv2d_nhwc_f32:";
/// The 17 fields of a kiln_conv2d_params from a layer's name, or false.
bool parseConvLayerName(llvm::StringRef name, int64_t (&fields)[17]);

/// Attaches kiln.call_kernel's BufferizableOpInterface model.
void registerKernelCallBufferization(mlir::DialectRegistry &registry);

} // namespace kiln::codegen


#endif
