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
/// Renames `module`'s kernel calls to the runtime's variant for `tm`
/// (kiln_matmul_f32 -> kiln_matmul_f32__avx512), or, for an x86-64 older
/// than x86-64-v3, links the AVX2 kernel bitcode in, internalised so that
/// LLVM compiles it for the module's CPU. Fails (with `error`) for a target
/// without kernels.
bool linkKernelLibrary(llvm::Module &module, const llvm::TargetMachine &tm, std::string &error);
} // namespace kiln

#endif
