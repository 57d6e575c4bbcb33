// The microkernels (runtime/kernels) in a generated LLVM module: calls
// renamed to the runtime's variant for the target, or bitcode linked in.
#ifndef KILN_TARGET_KERNELLIBRARY_H
#define KILN_TARGET_KERNELLIBRARY_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace llvm {
class Module;
class TargetMachine;
} // namespace llvm

namespace kiln {
/// Renames `module`'s kernel calls to the runtime's variant for `tm`
/// (kiln_matmul_f32 -> kiln_matmul_f32__avx512), or, for an x86-64 older
/// than x86-64-v3, links the AVX2 kernel bitcode in, internalised so that
/// LLVM compiles it for the module's CPU. Fails (with `error`) for a target
/// without kernels.
bool linkKernelLibrary(llvm::Module &module, const llvm::TargetMachine &tm, std::string &error);

/// The runtime's compiled kernels for this host, every variant
/// ("kiln_matmul_f32__avx512", "kiln_matmul_f32__avx2", ...): what the JIT
/// resolves generated code's calls to.
struct HostKernel {
  const char *name;
  void *address;
};
llvm::ArrayRef<HostKernel> hostKernels();
/// The variant of kernel `entry` (kiln_conv2d_nhwc_f32) that code for `tm`
/// calls, when `tm` is this host and the runtime has one; else null. The
/// kernel tuner times layers through it.
void *hostKernelAddress(llvm::StringRef entry, const llvm::TargetMachine &tm);
} // namespace kiln

#endif
