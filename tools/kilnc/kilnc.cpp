// kilnc: the command-line compiler. Parses flags and calls kiln::emit.
#include "kiln/InvocationLog.h"
#include "kiln/Kiln.h"
#include "kiln/TensorIO.h"
#include "kiln/Pipelines/Pipelines.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <climits>
#include <filesystem>
#include <fstream>
#include <unistd.h>
#ifdef __GLIBC__
#include <cstdlib>
#include <malloc.h>
#include <sys/mman.h>
#endif

namespace cl = llvm::cl;

static cl::OptionCategory kilncCat("kilnc options");
static cl::opt<std::string> inputPath(cl::Positional, cl::desc("MODEL.onnx"), cl::Required,
                                      cl::cat(kilncCat));
static cl::opt<std::string> outputPath("o", cl::desc("Output file ('-' for stdout; default: "
                                                     "stdout for text, MODEL.o for objects)"),
                                       cl::value_desc("FILE"), cl::cat(kilncCat));
static cl::opt<kiln::EmitKind> emitKind(
    "emit", cl::desc("What to produce"), cl::init(kiln::EmitKind::Object),
    cl::values(clEnumValN(kiln::EmitKind::Kiln, "kiln", "kiln dialect after shape inference"),
               clEnumValN(kiln::EmitKind::Linalg, "linalg", "linalg/tensor IR"),
               clEnumValN(kiln::EmitKind::LLVMIR, "llvm", "optimized LLVM IR"),
               clEnumValN(kiln::EmitKind::Assembly, "asm", "target assembly"),
               clEnumValN(kiln::EmitKind::Object, "obj", "ELF relocatable object (default)"),
               clEnumValN(kiln::EmitKind::PTX, "ptx",
                          "PTX of the model's GPU kernels (--target=nvptx64-nvidia-cuda, "
                          "--mcpu=sm_80 by default)"),
               clEnumValN(kiln::EmitKind::Bundle, "bundle",
                          "deployable bundle: NAME.o + NAME.h (+ NAME.weights); -o DIR/NAME")),
    cl::cat(kilncCat));
static cl::opt<std::string> targetTriple("target", cl::desc("Target triple (default: host), e.g. "
                                                            "aarch64-linux-gnu"),
                                         cl::value_desc("TRIPLE"), cl::cat(kilncCat));
static cl::opt<std::string> cpu("mcpu", cl::desc("Target CPU (default: host, or generic for "
                                                 "other targets)"),
                                cl::value_desc("CPU"), cl::init("host"), cl::cat(kilncCat));
static cl::opt<unsigned> optLevel("O", cl::desc("Optimization level 0-3 (default 3)"),
                                  cl::Prefix, cl::init(3), cl::cat(kilncCat));
static cl::list<std::string> shapes(
    "shape",
    cl::desc("Concrete shape of an input, NAME=DxDx... (e.g. --shape input=1x128x256): code "
             "specialised to it. Without it, llvm/asm/obj take the dims the model leaves "
             "unknown at run time where its ops allow (else they need --shape), through "
             "kiln_entry_dims (runtime ABI 9), and bundles through NAME_entry_dims; NVIDIA GPU "
             "code needs concrete shapes"),
    cl::value_desc("NAME=DIMS"), cl::cat(kilncCat));
static cl::opt<std::string> shapesFrom(
    "shapes-from",
    cl::desc("Take the input shapes from DIR/input_J.pb (ONNX test-data layout), for models "
             "with dynamic dims; --shape overrides single inputs"),
    cl::value_desc("DIR"), cl::cat(kilncCat));
static cl::list<std::string> dims(
    "dim",
    cl::desc("Bundles: compile one specialisation per value of the model's named dynamic dim "
             "(ONNX dim_param), e.g. --dim seq=16,32,64; several --dim: every combination. The "
             "runtime runs the one whose input dims match. --dim seq=1..512 declares bounds "
             "instead: kiln_model_execute refuses other values (NAME_DIM_BOUNDS in the header)"),
    cl::value_desc("NAME=V,V,..."), cl::cat(kilncCat));
static cl::opt<std::string> entryName("entry", cl::desc("Name of the generated entry point"),
                                      cl::init("kiln_entry"), cl::cat(kilncCat));
enum class WeightsPlace { Embedded, External };
static cl::opt<WeightsPlace> weightsPlace(
    "weights", cl::desc("Where a bundle keeps its weights"), cl::init(WeightsPlace::Embedded),
    cl::values(clEnumValN(WeightsPlace::Embedded, "embedded", "in the object (default)"),
               clEnumValN(WeightsPlace::External, "external",
                          "in NAME.weights, loaded with kiln_model_load_weights")),
    cl::cat(kilncCat));
static cl::opt<bool> verbose("v", cl::desc("Report progress and timing on stderr"),
                             cl::cat(kilncCat));
static cl::opt<bool> profileKernels(
    "profile",
    cl::desc("Bracket every kernel with the runtime's profiling hooks: a kiln_profiler attached "
             "to the running thread (kiln/profile.h) then records one event per kernel"),
    cl::cat(kilncCat));
static cl::opt<bool> gpuSplitReductions(
    "gpu-split-reductions",
    cl::desc("GPU targets: split long reductions with few outputs in two kernels "
             "(kiln-gpu-split-reductions; default off: kiln-gpu-block-reductions takes "
             "them in one). With --gpu-block-reductions=false, to compare the two"),
    cl::init(false), cl::cat(kilncCat));
static cl::opt<bool> gpuBlockReductions(
    "gpu-block-reductions",
    cl::desc("GPU targets: reductions with few outputs and long rows as one block of threads "
             "per output, combined in shared memory (kiln-gpu-block-reductions; default on). "
             "=false measures the GPU code without"),
    cl::init(true), cl::cat(kilncCat));
static cl::opt<bool> gpuVectorizeElementwise(
    "gpu-vectorize-elementwise",
    cl::desc("GPU targets: elementwise ops and copies with 128-bit vector loads and stores, "
             "several elements per thread, where the buffers are aligned for them "
             "(kiln-gpu-vectorize-elementwise; default on). =false measures the GPU code "
             "without"),
    cl::init(true), cl::cat(kilncCat));
static cl::opt<bool> gpuMmaContractions(
    "gpu-mma-contractions",
    cl::desc("GPU targets: f16 and bf16 matrix products (M, N, K multiples of 16, aligned "
             "buffers) on tensor cores, f16 with WMMA, bf16 with mma.sync on sm_80 and later "
             "(kiln-gpu-mma-contractions; default on). =false keeps them on CUDA cores"),
    cl::init(true), cl::cat(kilncCat));
static cl::opt<bool> gpuTileContractions(
    "gpu-tile-contractions",
    cl::desc("GPU targets: large matrix products and convolutions as shared-memory tiled "
             "kernels (kiln-gpu-tile-contractions; default on). =false measures the GPU code "
             "without"),
    cl::init(true), cl::cat(kilncCat));
static cl::opt<std::string> gpuPrecision(
    "gpu-precision",
    cl::desc("GPU targets: float32 matrix products and convolutions on TF32 tensor cores (tf32, "
             "the default on sm_80 and later, as PyTorch's convolutions: inputs rounded to 10 "
             "mantissa bits, f32 sums) or with exact FP32 FMAs (fp32)"),
    cl::value_desc("tf32|fp32"), cl::init("tf32"), cl::cat(kilncCat));
static cl::opt<bool> tune(
    "tune",
    cl::desc("Tune kernel choices on this machine (the host target only): time each "
             "convolution layer's candidate schedules at its real shape on --tune-threads "
             "threads until a confidence bound (empirical Bernstein, 95 %) separates them, and "
             "compile with the winners. Choices are kept in the compile cache, keyed by CPU "
             "and layer (with --no-cache, tuned afresh); -v prints what tuning did"),
    cl::cat(kilncCat));
static cl::opt<unsigned> tuneThreads(
    "tune-threads",
    cl::desc("--tune: the threads the layers are timed on, as the compiled code will run "
             "(default 0: the number of physical cores)"),
    cl::init(0), cl::cat(kilncCat));
static cl::opt<bool> noCache(
    "no-cache",
    cl::desc("Compile afresh: neither read nor write the compile cache (KILN_CACHE_DIR, default "
             "$XDG_CACHE_HOME/kiln or ~/.cache/kiln), which keeps llvm/asm/obj/bundle outputs"),
    cl::cat(kilncCat));

/// Whether an option outside kilnc's own was given (MLIR's IR printing,
/// LLVM's backend flags): the cache key does not know them, so such a
/// compile neither reads nor writes the cache.
static bool foreignOptionsGiven() {
  for (const auto &entry : cl::getRegisteredOptions()) {
    const cl::Option *o = entry.second;
    if (o->getNumOccurrences() == 0)
      continue;
    bool ours = false;
    for (const cl::OptionCategory *c : o->Categories)
      ours |= c == &kilncCat;
    if (!ours)
      return true;
  }
  return false;
}

static void printVersion(llvm::raw_ostream &os) {
  os << "kilnc (Kiln) " << kiln::version() << "\nbuilt with LLVM/MLIR " << LLVM_VERSION_STRING
     << "\n";
}

static bool writeFile(const std::string &path, const std::string &bytes) {
  std::ofstream f(path, std::ios::binary);
  if (f.write(bytes.data(), bytes.size()) && f.flush())
    return true;
  llvm::errs() << "kilnc: error: cannot write '" << path << "'\n";
  return false;
}

/// --emit=bundle: -o DIR/NAME names the files and the symbols' prefix.
static int writeBundle(kiln::EmitOptions &opts, std::chrono::steady_clock::time_point start) {
  std::filesystem::path base = outputPath.empty()
                                   ? std::filesystem::path(inputPath.getValue()).stem()
                                   : std::filesystem::path(outputPath.getValue());
  if (outputPath == "-" || base.filename().empty()) {
    llvm::errs() << "kilnc: error: a bundle is several files: give -o DIR/NAME\n";
    return 2;
  }
  opts.bundleName = base.filename().string();
  opts.externalWeights = weightsPlace == WeightsPlace::External;
  kiln::Bundle bundle;
  kiln::Status status = kiln::emitBundle(inputPath, opts, bundle);
  if (!status.ok()) {
    llvm::errs() << "kilnc: error: " << status.message << "\n";
    if (kiln::InvocationLog *log = kiln::InvocationLog::current())
      log->error(status.message);
    return 1;
  }
  std::string stem = base.string();
  if (!writeFile(stem + ".o", bundle.object) || !writeFile(stem + ".h", bundle.header))
    return 1;
  if (opts.externalWeights && !writeFile(stem + ".weights", bundle.weights))
    return 1;
  if (verbose)
    llvm::errs() << "kilnc: wrote " << stem << ".o (" << bundle.object.size() << " bytes), "
                 << stem << ".h"
                 << (opts.externalWeights
                         ? ", " + stem + ".weights (" + std::to_string(bundle.weights.size()) +
                               " bytes)"
                         : std::string())
                 << " in "
                 << std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
                        .count()
                 << " s\n";
  return 0;
}

static int kilncMain(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
#ifdef __GLIBC__
  // A compile copies the weights several times (import, packing, LLVM
  // constants, the object file), each copy a large block. glibc maps such
  // blocks fresh and unmaps them on free, so every copy page-faults its
  // way in: a quarter of a ResNet-18 compile. kilnc is short-lived: keep
  // freed memory in the heap for the next copy (2.35 -> 2.00 s, same peak).
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, INT_MAX);
  // The faults that remain are first touches of the heap, one per 4 KiB
  // page. Where the kernel gives transparent huge pages on request (the
  // "madvise" setting, Debian's default), ask for them on the heap's first
  // GiB: reserve it (address space only), mark it, and free it into the
  // heap, which keeps it (trim threshold above) for every allocation after.
  // ResNet-18: 1.9 -> 1.4 s.
  constexpr size_t kHugeHeap = size_t(1) << 30, kHugePage = size_t(2) << 20;
  if (void *block = std::malloc(kHugeHeap)) {
    uintptr_t begin = (reinterpret_cast<uintptr_t>(block) + kHugePage - 1) & ~(kHugePage - 1);
    uintptr_t end = (reinterpret_cast<uintptr_t>(block) + kHugeHeap) & ~(kHugePage - 1);
    if (end > begin)
      madvise(reinterpret_cast<void *>(begin), end - begin, MADV_HUGEPAGE);
    std::free(block);
  }
#endif
  // Pass names must be known before parsing: --mlir-print-ir-after=PASS.
  kiln::registerKilnPassesAndPipelines();
  mlir::registerAsmPrinterCLOptions();
  mlir::registerMLIRContextCLOptions();
  mlir::registerPassManagerCLOptions();
  mlir::registerDefaultTimingManagerCLOptions();
  cl::SetVersionPrinter(printVersion);
  // LLVM's own options (every backend's) sit in the general category: they
  // stay usable but out of --help, which would otherwise list hundreds.
  cl::HideUnrelatedOptions(kilncCat);
  cl::ParseCommandLineOptions(
      argc, argv,
      "Kiln: compiles an ONNX model to native code.\n\n"
      "  kilnc MODEL.onnx [-o FILE] --emit=kiln|linalg|llvm|asm|obj [--target=TRIPLE]\n"
      "        [--mcpu=CPU] [-O0..-O3] [--shape NAME=DIMS]...\n"
      "  kilnc MODEL.onnx --emit=bundle -o DIR/NAME [--weights=embedded|external]\n"
      "        [--dim NAME=V,V,...]... [--dim NAME=LO..HI]... ...\n"
      "  kilnc MODEL.onnx --emit=ptx [--target=nvptx64-nvidia-cuda] [--mcpu=sm_80] -o FILE\n"
      "  kilnc MODEL.onnx --target=nvptx64-nvidia-cuda [--mcpu=sm_80] [--emit=obj|bundle] -o FILE\n\n"
      "A bundle is NAME.o, exporting `const kiln_model_desc NAME_model` and\n"
      "NAME_entry (NAME_entry_K with --dim), and NAME.h, which declares them and\n"
      "gives the signature as constants; run it with kiln_model_execute(&NAME_model, ...) from\n"
      "libkiln_runtime. --weights=external writes the weights to NAME.weights, for\n"
      "kiln_model_load_weights(&NAME_model, PATH). A model with dynamic dims is\n"
      "bundled once for every shape when no --shape or --dim is given (its ops\n"
      "permitting; it also exports NAME_entry_dims), for the shapes --shape gives,\n"
      "or with --dim for several, one specialisation each, which the runtime picks\n"
      "by the inputs' dims; other shapes then run the variant for every shape, which\n"
      "the bundle holds too where the model's ops allow.\n"
      "The object file exports `void kiln_entry(void **buffers)`: input data pointers\n"
      "then output data pointers, dense row-major, in graph order, then the workspace\n"
      "(kiln_entry_workspace_size bytes); it calls kiln_parallel_for, so link it with\n"
      "libkiln_runtime (see kiln/runtime.h). Compiled without --shape for a model with\n"
      "unknown dims (where its ops allow; else --shape is needed), it also exports\n"
      "`int64_t kiln_entry_dims(int64_t *dims)` and kiln_entry_num_dims: dims holds every\n"
      "unknown input dim, then every unknown output dim; kiln_entry_dims checks the\n"
      "inputs' and writes the outputs', and the array is kiln_entry's last buffer\n"
      "(kiln_model_desc.runtime_dims, ABI 9). NVIDIA GPU code is compiled for concrete\n"
      "shapes (--shape) only.\n"
      "--emit=ptx writes one PTX module with every kernel of the model (kernels\n"
      "kiln_kernels::main_kernel* and tf32_tiles*), for ptxas or cuModuleLoadDataEx.\n"
      "--target=nvptx64-nvidia-cuda with --emit=obj|asm|llvm writes the host code for\n"
      "this machine: kiln_entry over device addresses, launching the kernels through\n"
      "libkiln_runtime, with kiln_entry_ptx, kiln_entry_kernels, kiln_entry_num_kernels,\n"
      "kiln_entry_weights(_size) and kiln_entry_workspace_size beside it for\n"
      "kiln_cuda_program_create (see kiln/cuda.h). With --emit=bundle it writes a CUDA\n"
      "bundle: NAME_model lists the kernels with their PTX and weights; run it with\n"
      "kiln_cuda_model_load and kiln_cuda_model_execute (one shape set per bundle).\n"
      "The standard MLIR IR-printing flags (--mlir-print-ir-after-all, ...), the pass\n"
      "timing report (--mlir-timing) and LLVM's options apply; --help-hidden lists them.\n");

  if (optLevel > 3) {
    llvm::errs() << "kilnc: error: -O" << optLevel << " is not a level; use -O0..-O3\n";
    return 2;
  }
  kiln::EmitOptions opts;
  opts.kind = emitKind;
  opts.triple = targetTriple;
  opts.cpu = cpu;
  opts.optLevel = optLevel;
  opts.entryName = entryName;

  if (!shapesFrom.empty()) {
    for (int j = 0;; ++j) {
      std::string file = shapesFrom + "/input_" + std::to_string(j) + ".pb";
      if (!std::filesystem::exists(file))
        break;
      kiln::Tensor t;
      if (kiln::Status s = kiln::readTensorFile(file, t); !s.ok()) {
        llvm::errs() << "kilnc: error: --shapes-from: " << s.message << "\n";
        return 1;
      }
      opts.inputShapes.push_back(t.dims());
    }
    if (opts.inputShapes.empty()) {
      llvm::errs() << "kilnc: error: --shapes-from: no " << shapesFrom << "/input_0.pb\n";
      return 1;
    }
  }
  // --shape NAME=DxDx...; kiln::emit matches the names to the model's inputs.
  for (const std::string &s : shapes) {
    size_t eq = s.rfind('=');
    if (eq == std::string::npos || eq == 0) {
      llvm::errs() << "kilnc: error: --shape '" << s << "' is not NAME=DIMS\n";
      return 2;
    }
    std::vector<int64_t> dims;
    std::string rest = s.substr(eq + 1);
    for (size_t pos = 0; !rest.empty() && pos <= rest.size();) {
      size_t x = rest.find('x', pos);
      std::string part = rest.substr(pos, x == std::string::npos ? std::string::npos : x - pos);
      char *end = nullptr;
      long long v = std::strtoll(part.c_str(), &end, 10);
      if (part.empty() || *end || v < 0) {
        llvm::errs() << "kilnc: error: bad dimension '" << part << "' in --shape '" << s << "'\n";
        return 2;
      }
      dims.push_back(v);
      if (x == std::string::npos)
        break;
      pos = x + 1;
    }
    opts.inputShapesByName[s.substr(0, eq)] = dims;
  }

  for (const std::string &d : dims) {
    size_t eq = d.find('=');
    // NAME=LO..HI: bounds for the variant compiled once for every shape.
    if (d.find("..") != std::string::npos) {
      std::string name;
      std::pair<int64_t, int64_t> range;
      if (!kiln::parseDimBound(d, name, range)) {
        llvm::errs() << "kilnc: error: --dim '" << d
                     << "' is not NAME=LO..HI with 0 <= LO <= HI\n";
        return 2;
      }
      if (!opts.dimBounds.emplace(name, range).second) {
        llvm::errs() << "kilnc: error: --dim " << name << " is given bounds twice\n";
        return 2;
      }
      continue;
    }
    std::vector<int64_t> values;
    bool ok = eq != std::string::npos && eq > 0 && eq + 1 < d.size();
    for (size_t pos = eq + 1; ok && pos <= d.size();) {
      size_t comma = d.find(',', pos);
      std::string part = d.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
      char *end = nullptr;
      long long v = std::strtoll(part.c_str(), &end, 10);
      ok = !part.empty() && !*end && v > 0;
      values.push_back(v);
      if (comma == std::string::npos)
        break;
      pos = comma + 1;
    }
    if (!ok) {
      llvm::errs() << "kilnc: error: --dim '" << d
                   << "' is not NAME=V,V,... with positive values\n";
      return 2;
    }
    opts.dimValues.emplace_back(d.substr(0, eq), values);
  }
  if (!opts.dimValues.empty() && emitKind != kiln::EmitKind::Bundle) {
    llvm::errs() << "kilnc: error: --dim makes several specialisations, which only a bundle "
                    "holds (--emit=bundle); for one object give --shape NAME=DIMS\n";
    return 2;
  }
  if (!opts.dimBounds.empty() && emitKind != kiln::EmitKind::Bundle) {
    llvm::errs() << "kilnc: error: --dim NAME=LO..HI declares bounds that a bundle's runtime "
                    "checks (--emit=bundle); a bare object has no descriptor to hold them\n";
    return 2;
  }

  opts.cache = !noCache && !foreignOptionsGiven();
  opts.tune = tune;
  opts.tuneThreads = (int)tuneThreads;
  if (tuneThreads.getNumOccurrences() && !tune) {
    llvm::errs() << "kilnc: error: --tune-threads applies with --tune\n";
    return 2;
  }
  opts.profile = profileKernels;
  opts.gpu.splitReductions = gpuSplitReductions;
  opts.gpu.tileContractions = gpuTileContractions;
  opts.gpu.blockReductions = gpuBlockReductions;
  opts.gpu.vectorizeElementwise = gpuVectorizeElementwise;
  opts.gpu.mmaContractions = gpuMmaContractions;
  if (gpuPrecision != "tf32" && gpuPrecision != "fp32") {
    llvm::errs() << "kilnc: error: --gpu-precision needs 'tf32' or 'fp32', not '" << gpuPrecision
                 << "'\n";
    return 2;
  }
  opts.gpu.tf32 = gpuPrecision == "tf32";

  auto start = std::chrono::steady_clock::now();
  if (verbose) {
    llvm::errs() << "kilnc: compiling " << inputPath << "\n";
    opts.progress = [](const std::string &stage, double seconds) {
      llvm::errs() << llvm::format("kilnc: %7.2f s  ", seconds) << stage << "\n";
    };
  } else if (isatty(2)) {
    // On a terminal, a compile that takes more than a second shows its
    // stages as they finish (the ones before the first second all at once).
    opts.progress = [pending = std::string(), total = 0.0](const std::string &stage,
                                                            double seconds) mutable {
      total += seconds;
      pending += llvm::formatv("kilnc: compiling: {0} ({1:f2} s)\n", stage, seconds).str();
      if (total < 1.0)
        return;
      llvm::errs() << pending;
      pending.clear();
    };
  }
  if (kiln::InvocationLog *log = kiln::InvocationLog::current()) {
    log->model(inputPath);
    opts.progress = [log, inner = opts.progress](const std::string &stage, double seconds) {
      log->stage(stage, seconds);
      if (inner)
        inner(stage, seconds);
    };
  }
  if (emitKind == kiln::EmitKind::Bundle)
    return writeBundle(opts, start);
  std::string out;
  kiln::Status status = kiln::emit(inputPath, opts, out);
  if (!status.ok()) {
    llvm::errs() << "kilnc: error: " << status.message << "\n";
    if (kiln::InvocationLog *log = kiln::InvocationLog::current())
      log->error(status.message);
    return 1;
  }
  std::string path = outputPath;
  if (path.empty())
    path = emitKind == kiln::EmitKind::Object
               ? std::filesystem::path(inputPath.getValue()).stem().string() + ".o"
               : "-";
  if (path == "-") {
    llvm::outs() << out;
  } else {
    std::ofstream f(path, std::ios::binary);
    if (!f.write(out.data(), out.size())) {
      llvm::errs() << "kilnc: error: cannot write '" << path << "'\n";
      return 1;
    }
  }
  if (verbose)
    llvm::errs() << "kilnc: wrote " << out.size() << " bytes to " << path << " in "
                 << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()
                 << " s\n";
  return 0;
}

// Every invocation leaves a log for kiln-rage (kiln/InvocationLog.h).
int main(int argc, char **argv) {
  auto log = kiln::InvocationLog::begin("kilnc", std::vector<std::string>(argv, argv + argc));
  int status = kilncMain(argc, argv);
  if (log)
    log->finish(status);
  return status;
}
