// Points a generated LLVM module's kernel calls at the runtime's compiled
// variant for its target, or, for x86-64 targets older than x86-64-v3, links
// the embedded AVX2 kernel bitcode into it. See runtime/kernels/CMakeLists.txt.
#include "kiln/Target/KernelLibrary.h"
#include "kiln/kernels.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/IR/Module.h"
#include "llvm/Linker/Linker.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Transforms/IPO/Internalize.h"

extern "C" const char kiln_kernels_x86_64_avx2_begin[];
extern "C" const char kiln_kernels_x86_64_avx2_end[];

namespace kiln {

static const char *const kKernelEntries[] = {
#define KILN_KERNEL_NAME(name) #name,
    KILN_KERNEL_ENTRIES(KILN_KERNEL_NAME)
#undef KILN_KERNEL_NAME
};

static bool isKernelEntry(llvm::StringRef name) {
  for (const char *entry : kKernelEntries)
    if (name == entry)
      return true;
  return false;
}

/// The runtime variant whose instructions `tm`'s CPU has, or "" when none:
/// each object was compiled for the whole of an x86-64 level (or AArch64
/// v8-a), so every feature of that level must be there.
static llvm::StringRef runtimeVariant(const llvm::TargetMachine &tm) {
  const llvm::Triple &triple = tm.getTargetTriple();
  const llvm::MCSubtargetInfo &sti = *tm.getMCSubtargetInfo();
  if (triple.isAArch64())
    return sti.checkFeatures("+neon") ? "neon" : "";
  if (!triple.isX86() || !triple.isArch64Bit())
    return "";
  if (!sti.checkFeatures("+avx,+avx2,+bmi,+bmi2,+f16c,+fma,+lzcnt,+movbe,+xsave"))
    return "";
  if (sti.checkFeatures("+avx512f,+avx512bw,+avx512cd,+avx512dq,+avx512vl"))
    return "avx512";
  return "avx2";
}

static bool linkAvx2Bitcode(llvm::Module &module, std::string &error) {
  llvm::StringRef bitcode(kiln_kernels_x86_64_avx2_begin,
                          kiln_kernels_x86_64_avx2_end - kiln_kernels_x86_64_avx2_begin);
  auto buffer = llvm::MemoryBuffer::getMemBuffer(bitcode, "kiln-kernels", false);
  auto library = llvm::parseBitcodeFile(buffer->getMemBufferRef(), module.getContext());
  if (!library) {
    error = "cannot read the embedded kernel bitcode: " + llvm::toString(library.takeError());
    return false;
  }
  (*library)->setDataLayout(module.getDataLayout());
  (*library)->setTargetTriple(module.getTargetTriple());
  // Compiled for x86-64-v3; without these attributes the functions take the
  // module's CPU and features, which this target needs.
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

// The runtime's compiled kernels for the host (runtime/kernels/CMakeLists.txt).
// Only their addresses are taken here, so one prototype serves them all.
#if defined(__x86_64__)
#define KILN_KERNEL_DECLARE(name)                                                          \
  extern "C" void name##__avx512();                                                        \
  extern "C" void name##__avx2();
#define KILN_KERNEL_ENTRY(name)                                                            \
  {#name "__avx512", (void *)&name##__avx512}, {#name "__avx2", (void *)&name##__avx2},
#elif defined(__aarch64__)
#define KILN_KERNEL_DECLARE(name) extern "C" void name##__neon();
#define KILN_KERNEL_ENTRY(name) {#name "__neon", (void *)&name##__neon},
#else
#error "no microkernels for this host"
#endif
KILN_KERNEL_ENTRIES(KILN_KERNEL_DECLARE)
static const HostKernel kHostKernels[] = {KILN_KERNEL_ENTRIES(KILN_KERNEL_ENTRY)};
#undef KILN_KERNEL_DECLARE
#undef KILN_KERNEL_ENTRY

llvm::ArrayRef<HostKernel> hostKernels() { return kHostKernels; }

void *hostKernelAddress(llvm::StringRef entry, const llvm::TargetMachine &tm) {
  llvm::StringRef variant = runtimeVariant(tm);
  if (variant.empty())
    return nullptr;
  std::string name = (entry + "__" + variant).str();
  for (const HostKernel &kernel : kHostKernels)
    if (name == kernel.name)
      return kernel.address;
  return nullptr;
}

bool linkKernelLibrary(llvm::Module &module, const llvm::TargetMachine &tm, std::string &error) {
  llvm::SmallVector<llvm::Function *> calls;
  for (llvm::Function &f : module)
    if (f.isDeclaration() && isKernelEntry(f.getName()))
      calls.push_back(&f);
  if (calls.empty())
    return true;
  llvm::StringRef variant = runtimeVariant(tm);
  if (!variant.empty()) {
    for (llvm::Function *f : calls)
      f->setName(f->getName() + "__" + variant);
    return true;
  }
  const llvm::Triple &triple = tm.getTargetTriple();
  if (triple.isX86() && triple.isArch64Bit())
    return linkAvx2Bitcode(module, error);
  error = "no convolution/matrix kernels for target '" + triple.str() + "'";
  return false;
}

} // namespace kiln
