// LLVM-dialect module -> LLVM IR -> optimized native code (object, assembly
// or in-process JIT). Compiler-internal.
#ifndef KILN_TARGET_TARGETEMITTER_H
#define KILN_TARGET_TARGETEMITTER_H

#include "kiln/Support/CodegenOptions.h"
#include "mlir/IR/BuiltinOps.h"

#include <memory>
#include <mutex>
#include <string>
#include <string_view>

namespace llvm {
class LLVMContext;
class Module;
class TargetMachine;
namespace orc {
class LLJIT;
}
} // namespace llvm

namespace kiln {

struct ConstantPool;

std::unique_ptr<llvm::TargetMachine> createTargetMachine(const TargetOptions &options,
                                                         std::string &error);

/// Translates `module` (LLVM dialect) to LLVM IR for `tm`, with the kernel
/// library linked in. The MLIR context may be destroyed afterwards (its
/// constants are the compile's largest allocation).
std::unique_ptr<llvm::Module> translateToLLVMIR(mlir::ModuleOp module, llvm::LLVMContext &context,
                                                llvm::TargetMachine &tm, std::string &error);

/// LLVM's optimization pipeline for `tm` at `optLevel` (nothing at 0).
/// Held while an LLVM optimisation pipeline runs: optimizeModule sets one of
/// LLVM's process-wide options for the CPU pipeline alone (the full-unroll
/// limit) and takes it back after, and the GPU path's gpu-module-to-binary
/// runs LLVM's pipeline too, so it holds this around it.
std::unique_lock<std::mutex> lockLlvmPipelineOptions();

void optimizeModule(llvm::Module &module, llvm::TargetMachine &tm, int optLevel);

/// translateToLLVMIR, then optimizeModule.
std::unique_ptr<llvm::Module> translateAndOptimize(mlir::ModuleOp module,
                                                   llvm::LLVMContext &context,
                                                   llvm::TargetMachine &tm, int optLevel,
                                                   std::string &error);

/// Emits an object file (or assembly) for `module` into `out`.
bool emitMachineCode(llvm::Module &module, llvm::TargetMachine &tm, bool assembly,
                     std::string &out, std::string &error);

/// Compiled code living in this process. Symbols of the process (libm)
/// resolve, and so do those of `pool` (extractConstants), which must outlive
/// the code; the code stays valid as long as the object lives.
class JitCode {
public:
  static std::unique_ptr<JitCode> create(std::unique_ptr<llvm::Module> module,
                                         std::unique_ptr<llvm::LLVMContext> context,
                                         const TargetOptions &options, const ConstantPool *pool,
                                         std::string &error);
  /// The same from an object file emitMachineCode wrote for the host
  /// (a compile-cache entry): no code generation.
  static std::unique_ptr<JitCode> createFromObject(std::string_view object,
                                                   const TargetOptions &options,
                                                   const ConstantPool *pool, std::string &error);
  ~JitCode();
  void *lookup(const std::string &symbol, std::string &error);

private:
  JitCode() = default;
  std::unique_ptr<llvm::orc::LLJIT> jit;
};

} // namespace kiln

#endif
