// Links the embedded microkernel bitcode (lib/kernels) into a generated
// LLVM module. See lib/kernels/CMakeLists.txt for the variants.
#include "KernelCalls.h"

#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/IR/Module.h"
#include "llvm/Linker/Linker.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Transforms/IPO/Internalize.h"

#define KILN_DECLARE_BITCODE(name)                                                         \
  extern "C" const char kiln_kernels_##name##_begin[];                                     \
  extern "C" const char kiln_kernels_##name##_end[];
KILN_DECLARE_BITCODE(x86_64_avx512)
KILN_DECLARE_BITCODE(x86_64_avx2)
KILN_DECLARE_BITCODE(aarch64_neon)

namespace kiln {

static bool callsKernels(const llvm::Module &module) {
  for (const llvm::Function &f : module)
    if (f.isDeclaration() && f.getName().starts_with("kiln_") &&
        (f.getName().ends_with("_f32") || f.getName().ends_with("_u8")))
      return true;
  return false;
}

bool linkKernelLibrary(llvm::Module &module, const llvm::TargetMachine &tm, std::string &error) {
  if (!callsKernels(module))
    return true;
  const llvm::Triple &triple = tm.getTargetTriple();
  llvm::StringRef bitcode;
  if (triple.isX86() && triple.isArch64Bit()) {
    if (tm.getMCSubtargetInfo()->checkFeatures("+avx512f"))
      bitcode = llvm::StringRef(kiln_kernels_x86_64_avx512_begin,
                                kiln_kernels_x86_64_avx512_end - kiln_kernels_x86_64_avx512_begin);
    else
      bitcode = llvm::StringRef(kiln_kernels_x86_64_avx2_begin,
                                kiln_kernels_x86_64_avx2_end - kiln_kernels_x86_64_avx2_begin);
  } else if (triple.isAArch64()) {
    bitcode = llvm::StringRef(kiln_kernels_aarch64_neon_begin,
                              kiln_kernels_aarch64_neon_end - kiln_kernels_aarch64_neon_begin);
  } else {
    error = "no convolution/matrix kernels for target '" + triple.str() + "'";
    return false;
  }
  auto buffer = llvm::MemoryBuffer::getMemBuffer(bitcode, "kiln-kernels", false);
  auto library = llvm::parseBitcodeFile(buffer->getMemBufferRef(), module.getContext());
  if (!library) {
    error = "cannot read the embedded kernel bitcode: " + llvm::toString(library.takeError());
    return false;
  }
  (*library)->setDataLayout(module.getDataLayout());
  (*library)->setTargetTriple(module.getTargetTriple());
  // The bitcode was compiled for a generic CPU of the architecture; without
  // these attributes the functions take the module's CPU and features, and
  // the inliner treats them like the generated code.
  for (llvm::Function &f : **library) {
    f.removeFnAttr("target-cpu");
    f.removeFnAttr("target-features");
    f.removeFnAttr("tune-cpu");
  }
  bool failed = llvm::Linker::linkModules(
      module, std::move(*library), llvm::Linker::LinkOnlyNeeded,
      [](llvm::Module &m, const llvm::StringSet<> &linked) {
        llvm::internalizeModule(m, [&](const llvm::GlobalValue &gv) {
          return !gv.hasName() || !linked.contains(gv.getName());
        });
      });
  if (failed) {
    error = "linking the kernel bitcode failed";
    return false;
  }
  return true;
}

} // namespace kiln
