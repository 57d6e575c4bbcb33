// Calls from generated code into Kiln's microkernels (lib/kernels), and the
// linking of their bitcode into the generated LLVM module.
#ifndef KILN_CODEGEN_KERNELCALLS_H
#define KILN_CODEGEN_KERNELCALLS_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/PatternMatch.h"

#include <string>

namespace llvm {
class Module;
class TargetMachine;
} // namespace llvm

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

/// Attaches kiln.call_kernel's BufferizableOpInterface model.
void registerKernelCallBufferization(mlir::DialectRegistry &registry);

} // namespace kiln::codegen

namespace kiln {
/// Links the kernel bitcode variant that suits `tm` into `module` when the
/// module calls a kernel, internalised so that LLVM optimises it for the
/// module's CPU. Fails (with `error`) for a target without kernels.
bool linkKernelLibrary(llvm::Module &module, const llvm::TargetMachine &tm, std::string &error);
} // namespace kiln

#endif
