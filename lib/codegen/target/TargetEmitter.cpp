#include "kiln/Target/TargetEmitter.h"
#include "kiln/Target/ConstantPool.h"
#include "kiln/Conversion/EntryGlue.h"
#include "kiln/runtime.h"
#include "kiln/profile.h"
#include "kiln/cuda.h"
#include "kiln/Target/KernelLibrary.h"
#include "kiln/kernels.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/ExecutionEngine/Orc/ThreadSafeModule.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Transforms/InstCombine/InstCombine.h"
#include "llvm/Transforms/Vectorize/SLPVectorizer.h"
#include "llvm/Transforms/Vectorize/VectorCombine.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/SwapByteOrder.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"

#include <mutex>

namespace kiln {

static void initializeTargets() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeAllTargetInfos();
    llvm::InitializeAllTargets();
    llvm::InitializeAllTargetMCs();
    llvm::InitializeAllAsmPrinters();
    llvm::InitializeAllAsmParsers();
  });
}

static llvm::CodeGenOptLevel codegenLevel(int optLevel) {
  switch (optLevel) {
  case 0: return llvm::CodeGenOptLevel::None;
  case 1: return llvm::CodeGenOptLevel::Less;
  case 2: return llvm::CodeGenOptLevel::Default;
  default: return llvm::CodeGenOptLevel::Aggressive;
  }
}

std::unique_ptr<llvm::TargetMachine> createTargetMachine(const TargetOptions &options,
                                                         std::string &error) {
  initializeTargets();
  llvm::Triple triple(options.triple.empty() ? llvm::sys::getProcessTriple() : options.triple);
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target) {
    error = "unknown target '" + triple.str() + "': " + error;
    return nullptr;
  }
  std::string cpu = options.cpu, features;
  if (cpu.empty() || cpu == "host") {
    if (options.triple.empty() || triple == llvm::Triple(llvm::sys::getProcessTriple())) {
      cpu = llvm::sys::getHostCPUName().str();
      llvm::SubtargetFeatures f;
      for (auto &feature : llvm::sys::getHostCPUFeatures())
        f.AddFeature(feature.first(), feature.second);
      features = f.getString();
    } else {
      cpu = "generic";
    }
  }
  llvm::MCSubtargetInfo *probe = target->createMCSubtargetInfo(triple, cpu, "");
  bool knownCpu = probe && probe->isCPUStringValid(cpu);
  delete probe;
  if (!knownCpu) {
    error = "unknown CPU '" + cpu + "' for target '" + triple.str() + "'";
    return nullptr;
  }
  llvm::TargetOptions to;
  auto *tm = target->createTargetMachine(triple, cpu, features, to, llvm::Reloc::PIC_,
                                         std::nullopt, codegenLevel(options.optLevel));
  if (!tm)
    error = "cannot create a target machine for '" + triple.str() + "'";
  return std::unique_ptr<llvm::TargetMachine>(tm);
}

/// Large constant arrays of numbers become arrays of bytes with the same
/// contents. Why: the asm printer writes a float or integer array one
/// element at a time (ResNet-18's 12 M weights: a second of code
/// generation), but an i8 array in one piece; and the optimizer has nothing
/// to gain from looking into weights. Uses see only the address (opaque
/// pointers), so nothing else changes.
static void constantsAsBytes(llvm::Module &module, size_t minBytes) {
  if (!module.getDataLayout().isLittleEndian() || !llvm::sys::IsLittleEndianHost)
    return; // the raw data is in host order
  llvm::Type *i8 = llvm::Type::getInt8Ty(module.getContext());
  for (llvm::GlobalVariable &gv : llvm::make_early_inc_range(module.globals())) {
    if (!gv.isConstant() || !gv.hasInitializer())
      continue;
    auto *data = llvm::dyn_cast<llvm::ConstantDataSequential>(gv.getInitializer());
    if (!data || data->getElementType() == i8 || data->getRawDataValues().size() < minBytes)
      continue;
    llvm::StringRef raw = data->getRawDataValues();
    llvm::Constant *bytes = llvm::ConstantDataArray::getRaw(raw, raw.size(), i8);
    auto *replacement = new llvm::GlobalVariable(
        module, bytes->getType(), /*isConstant=*/true, gv.getLinkage(), bytes, "", &gv,
        gv.getThreadLocalMode(), gv.getAddressSpace());
    replacement->copyAttributesFrom(&gv);
    if (!gv.getAlign())
      replacement->setAlignment(module.getDataLayout().getPreferredAlign(&gv));
    replacement->takeName(&gv);
    gv.replaceAllUsesWith(replacement);
    gv.eraseFromParent();
  }
}

std::unique_ptr<llvm::Module> translateToLLVMIR(mlir::ModuleOp module, llvm::LLVMContext &context,
                                                llvm::TargetMachine &tm, std::string &error) {
  mlir::DialectRegistry registry;
  mlir::registerBuiltinDialectTranslation(registry);
  mlir::registerLLVMDialectTranslation(registry);
  module->getContext()->appendDialectRegistry(registry);
  // Kiln's own argument attributes (kiln.name, kiln.dims, ... on the
  // entry's buffers, read by the descriptor and bundle emitters) mean
  // nothing to LLVM, and the translation warns about each one with the
  // whole function printed into the diagnostic: 0.7 s of a GPT-2 decoder's
  // compile of run-time shapes (18 such arguments on a 6000-op function).
  // They are set aside for the translation and put back after it.
  llvm::SmallVector<std::pair<mlir::LLVM::LLVMFuncOp, mlir::ArrayAttr>> argAttrs;
  module.walk([&](mlir::LLVM::LLVMFuncOp fn) {
    mlir::ArrayAttr all = fn.getArgAttrsAttr();
    if (!all)
      return;
    bool foreign = false;
    llvm::SmallVector<mlir::Attribute> kept;
    for (mlir::Attribute a : all) {
      llvm::SmallVector<mlir::NamedAttribute> llvmOnly;
      for (mlir::NamedAttribute n : llvm::cast<mlir::DictionaryAttr>(a)) {
        if (n.getName().getValue().starts_with("llvm."))
          llvmOnly.push_back(n);
        else
          foreign = true;
      }
      kept.push_back(mlir::DictionaryAttr::get(module.getContext(), llvmOnly));
    }
    if (!foreign)
      return;
    argAttrs.push_back({fn, all});
    fn.setArgAttrsAttr(mlir::ArrayAttr::get(module.getContext(), kept));
  });
  std::unique_ptr<llvm::Module> llvmModule = mlir::translateModuleToLLVMIR(module, context);
  for (auto &[fn, all] : argAttrs)
    fn.setArgAttrsAttr(all);
  if (!llvmModule) {
    error = "translation to LLVM IR failed";
    return nullptr;
  }
  llvmModule->setDataLayout(tm.createDataLayout());
  llvmModule->setTargetTriple(tm.getTargetTriple());
  if (!linkKernelLibrary(*llvmModule, tm, error))
    return nullptr;
  constantsAsBytes(*llvmModule, 4096);
  return llvmModule;
}

namespace {
// LLVM's unroller fully unrolls every loop whose unrolled body stays under
// its size threshold, also after vectorisation: the loop nests of small
// static maps (a squeeze-excitation scale over 14 x 14 x 960, a global
// pool) became straight-line blocks of 840 vector instructions, and the
// machine schedulers took 3.5 s of LRASPP's 4.5 s compile (EfficientNet-B0
// 3.2 s) for no measurable speed: with at most 8 iterations fully unrolled,
// 0.76 s and 1.8 s, run times unchanged (MobileNet-V2, encoder4, mlp_gelu,
// LRASPP, EfficientNet-B0, alternating runs). The limit is LLVM's
// -unroll-full-max-count, which only a command-line occurrence switches on:
// it is given for the CPU pipeline and taken back after it (NVPTX code is
// unrolled in MLIR where it matters, and keeps LLVM's default), unless the
// user set it. lockLlvmPipelineOptions keeps the other compiles in the
// process (CPU, and GPU's gpu-module-to-binary) from running LLVM meanwhile.
constexpr const char *kFullUnrollOption = "unroll-full-max-count";
constexpr const char *kFullUnrollMaxCount = "8";
std::mutex fullUnrollOptionMutex;

class FullUnrollLimit {
public:
  FullUnrollLimit() : lock(lockLlvmPipelineOptions()) {
    auto &options = llvm::cl::getRegisteredOptions();
    auto it = options.find(kFullUnrollOption);
    if (it == options.end() || it->second->getNumOccurrences() > 0)
      return; // an older LLVM without it, or the user's own value
    option = it->second;
    if (option->addOccurrence(0, kFullUnrollOption, kFullUnrollMaxCount))
      option = nullptr;
  }
  ~FullUnrollLimit() {
    if (option)
      option->reset();
  }

private:
  std::unique_lock<std::mutex> lock;
  llvm::cl::Option *option = nullptr;
};
} // namespace

namespace {
/// LLVM's SLP vectorizer on every function but the entry glue (functions
/// with kEntryGlueAttr, kiln-emit-entry-point): the model
/// function with its memref descriptors and kernel calls, inlined into the
/// entry point. There SLP took 0.10 s of the 0.6-0.7 s compile of a 4-layer
/// GPT-2-style decoder (`opt -passes=slp-vectorizer -time-passes` on its
/// entry: 0.100 s; on all its loop nests together: 0.013 s) and vectorised
/// only descriptor stores; without it, the shared models ran at the same
/// speed (kiln-run --bench, min of 3). The compute is in the outlined loop
/// nests, which keep it. It runs at the end of the vectorizer passes, after
/// their late loop unrolling and clean-ups (the default pipeline runs it
/// before those), and where it changed something, VectorCombine and
/// InstCombine follow, as they follow it there.
struct SlpOutsideEntryGlue : llvm::PassInfoMixin<SlpOutsideEntryGlue> {
  llvm::PreservedAnalyses run(llvm::Function &f, llvm::FunctionAnalysisManager &fam) {
    if (f.hasFnAttribute(kEntryGlueAttr))
      return llvm::PreservedAnalyses::all();
    llvm::PreservedAnalyses pa = slp.run(f, fam);
    if (pa.areAllPreserved())
      return pa;
    fam.invalidate(f, pa);
    llvm::PreservedAnalyses vc = vectorCombine.run(f, fam);
    fam.invalidate(f, vc);
    pa.intersect(std::move(vc));
    pa.intersect(combine.run(f, fam));
    return pa;
  }
  llvm::SLPVectorizerPass slp;
  llvm::VectorCombinePass vectorCombine;
  llvm::InstCombinePass combine;
};
} // namespace

std::unique_lock<std::mutex> lockLlvmPipelineOptions() {
  return std::unique_lock<std::mutex>(fullUnrollOptionMutex);
}

void optimizeModule(llvm::Module &module, llvm::TargetMachine &tm, int optLevel) {
  if (optLevel <= 0)
    return;
  FullUnrollLimit fullUnrollLimit;

  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions pto;
  pto.LoopVectorization = optLevel >= 2;
  // SLP runs at the end of the vectorizer passes instead, and skips the
  // entry glue (SlpOutsideEntryGlue).
  pto.SLPVectorization = false;
  llvm::PassBuilder pb(&tm, pto);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  if (optLevel >= 2)
    pb.registerVectorizerEndEPCallback(
        [](llvm::FunctionPassManager &fpm, llvm::OptimizationLevel) {
          fpm.addPass(SlpOutsideEntryGlue());
        });
  llvm::OptimizationLevel level = optLevel == 1   ? llvm::OptimizationLevel::O1
                                  : optLevel == 2 ? llvm::OptimizationLevel::O2
                                                  : llvm::OptimizationLevel::O3;
  pb.buildPerModuleDefaultPipeline(level).run(module, mam);
}

std::unique_ptr<llvm::Module> translateAndOptimize(mlir::ModuleOp module,
                                                   llvm::LLVMContext &context,
                                                   llvm::TargetMachine &tm, int optLevel,
                                                   std::string &error) {
  auto llvmModule = translateToLLVMIR(module, context, tm, error);
  if (llvmModule)
    optimizeModule(*llvmModule, tm, optLevel);
  return llvmModule;
}

bool emitMachineCode(llvm::Module &module, llvm::TargetMachine &tm, bool assembly,
                     std::string &out, std::string &error) {
  // The object is mostly weights: room for them up front spares the buffer
  // its doubling copies of tens of megabytes.
  llvm::SmallVector<char, 0> buffer;
  if (!assembly) {
    uint64_t data = 0;
    for (const llvm::GlobalVariable &gv : module.globals())
      if (gv.hasInitializer())
        data += module.getDataLayout().getTypeAllocSize(gv.getValueType());
    buffer.reserve(data + (4 << 20));
  }
  llvm::raw_svector_ostream os(buffer);
  llvm::legacy::PassManager pm;
  if (tm.addPassesToEmitFile(pm, os, nullptr,
                             assembly ? llvm::CodeGenFileType::AssemblyFile
                                      : llvm::CodeGenFileType::ObjectFile)) {
    error = "the target cannot emit this file type";
    return false;
  }
  pm.run(module);
  out.append(buffer.data(), buffer.size());
  return true;
}


/// An LLJIT for the host with libm/libc, kiln_parallel_for and `pool`'s
/// constants defined.
static std::unique_ptr<llvm::orc::LLJIT> createJit(const TargetOptions &options,
                                                   const ConstantPool *pool, std::string &error) {
  initializeTargets();
  auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!jtmb) {
    error = llvm::toString(jtmb.takeError());
    return nullptr;
  }
  if (!options.cpu.empty() && options.cpu != "host")
    jtmb->setCPU(options.cpu);
  jtmb->setCodeGenOptLevel(codegenLevel(options.optLevel));
  auto jit = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(std::move(*jtmb)).create();
  if (!jit) {
    error = llvm::toString(jit.takeError());
    return nullptr;
  }
  // libm (erff, tanhf, ...) and libc come from this process.
  auto gen = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
      (*jit)->getDataLayout().getGlobalPrefix());
  if (!gen) {
    error = llvm::toString(gen.takeError());
    return nullptr;
  }
  (*jit)->getMainJITDylib().addGenerator(std::move(*gen));
  // The pool's constants, and the runtime entry points the kernels call:
  // this library's own runtime, not whatever the process's global symbol
  // table offers (libkiln may be loaded with RTLD_LOCAL).
  llvm::orc::SymbolMap symbols;
  symbols[(*jit)->mangleAndIntern("kiln_parallel_for")] = {
      llvm::orc::ExecutorAddr::fromPtr(&kiln_parallel_for), llvm::JITSymbolFlags::Exported};
  symbols[(*jit)->mangleAndIntern("kiln_profile_begin")] = {
      llvm::orc::ExecutorAddr::fromPtr(&kiln_profile_begin), llvm::JITSymbolFlags::Exported};
  symbols[(*jit)->mangleAndIntern("kiln_profile_end")] = {
      llvm::orc::ExecutorAddr::fromPtr(&kiln_profile_end), llvm::JITSymbolFlags::Exported};
  symbols[(*jit)->mangleAndIntern("kiln_cuda_launch_kernel")] = {
      llvm::orc::ExecutorAddr::fromPtr(&kiln_cuda_launch_kernel), llvm::JITSymbolFlags::Exported};
  symbols[(*jit)->mangleAndIntern("kiln_loop_guard")] = {
      llvm::orc::ExecutorAddr::fromPtr(&kiln_loop_guard), llvm::JITSymbolFlags::Exported};
  // Intermediates of run-time size (finalize-memref-to-llvm's generic
  // allocation functions), recycled by the runtime.
  symbols[(*jit)->mangleAndIntern("_mlir_memref_to_llvm_alloc")] = {
      llvm::orc::ExecutorAddr::fromPtr(&_mlir_memref_to_llvm_alloc),
      llvm::JITSymbolFlags::Exported};
  symbols[(*jit)->mangleAndIntern("_mlir_memref_to_llvm_aligned_alloc")] = {
      llvm::orc::ExecutorAddr::fromPtr(&_mlir_memref_to_llvm_aligned_alloc),
      llvm::JITSymbolFlags::Exported};
  symbols[(*jit)->mangleAndIntern("_mlir_memref_to_llvm_free")] = {
      llvm::orc::ExecutorAddr::fromPtr(&_mlir_memref_to_llvm_free),
      llvm::JITSymbolFlags::Exported};
  for (const HostKernel &kernel : hostKernels())
    symbols[(*jit)->mangleAndIntern(kernel.name)] = {
        llvm::orc::ExecutorAddr::fromPtr(kernel.address), llvm::JITSymbolFlags::Exported};
  if (pool)
    for (const auto &[name, offset] : pool->symbols)
      symbols[(*jit)->mangleAndIntern(name)] = {
          llvm::orc::ExecutorAddr::fromPtr(pool->data.get() + offset),
          llvm::JITSymbolFlags::Exported};
  if (auto err = (*jit)->getMainJITDylib().define(llvm::orc::absoluteSymbols(symbols))) {
    error = llvm::toString(std::move(err));
    return nullptr;
  }
  return std::move(*jit);
}

std::unique_ptr<JitCode> JitCode::create(std::unique_ptr<llvm::Module> module,
                                         std::unique_ptr<llvm::LLVMContext> context,
                                         const TargetOptions &options, const ConstantPool *pool,
                                         std::string &error) {
  auto jit = createJit(options, pool, error);
  if (!jit)
    return nullptr;
  module->setDataLayout(jit->getDataLayout());
  if (auto err =
          jit->addIRModule(llvm::orc::ThreadSafeModule(std::move(module), std::move(context)))) {
    error = llvm::toString(std::move(err));
    return nullptr;
  }
  std::unique_ptr<JitCode> code(new JitCode);
  code->jit = std::move(jit);
  return code;
}

std::unique_ptr<JitCode> JitCode::createFromObject(std::string_view object,
                                                   const TargetOptions &options,
                                                   const ConstantPool *pool, std::string &error) {
  auto jit = createJit(options, pool, error);
  if (!jit)
    return nullptr;
  if (auto err = jit->addObjectFile(llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(object.data(), object.size()), "kiln-jit"))) {
    error = llvm::toString(std::move(err));
    return nullptr;
  }
  std::unique_ptr<JitCode> code(new JitCode);
  code->jit = std::move(jit);
  return code;
}

JitCode::~JitCode() = default;

void *JitCode::lookup(const std::string &symbol, std::string &error) {
  auto addr = jit->lookup(symbol);
  if (!addr) {
    error = llvm::toString(addr.takeError());
    return nullptr;
  }
  return addr->toPtr<void *>();
}

} // namespace kiln
