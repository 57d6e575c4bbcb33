// kiln-run's options. Numbers are read as text and checked here, so that a
// bad value gets kiln-run's own message ("--bench needs a positive
// integer") and exit status 2, as every other usage error does.
#include "RunOptions.h"

#include "kiln/runtime.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace cl = llvm::cl;

namespace {
/// kiln-run's options, made when the command line is parsed (parseRunOptions)
/// rather than when the program starts, so that names libLLVM registered
/// first for options of its own ("threads") can be taken back.
struct Flags {
  cl::OptionCategory runCat{"kiln-run options"};
  cl::opt<std::string> modelArg{cl::Positional, cl::desc("<MODEL.onnx>"), cl::cat(runCat)};
  cl::opt<std::string> inputsArg{
    "inputs",
    cl::desc("Folder with input_J.pb: ONNX TensorProto files, or SequenceProto / OptionalProto "
             "for sequence and optional inputs (the ONNX test layout)"),
    cl::value_desc("DIR"), cl::cat(runCat)};
  cl::list<std::string> inputArgs{
    "input", cl::desc("One input from a .pb (TensorProto) or .npy (NumPy) file"),
    cl::value_desc("NAME=FILE"), cl::cat(runCat)};
  cl::list<std::string> shapeArgs{
    "shape",
    cl::desc("Dims of a made-up input whose declared shape has dynamic dims, e.g. "
             "--shape x=1x3x224x224"),
    cl::value_desc("NAME=DIMS"), cl::cat(runCat)};
  cl::list<std::string> dimArgs{
    "dim",
    cl::desc("Bounds of a dim the model names (ONNX dim_param), e.g. --dim seq=1..512: inputs "
             "outside them are refused before anything compiles"),
    cl::value_desc("NAME=LO..HI"), cl::cat(runCat)};
  cl::opt<bool> specializeArg{
    "specialize",
    cl::desc("Compile code specialised to the inputs' shapes (as a bundle is), also where the "
             "model's unknown dims could be taken at run time (by default one compile serves "
             "every shape there; --shape implies this)"),
    cl::cat(runCat)};
  cl::opt<std::string> fillArg{
    "fill",
    cl::desc("Made-up inputs: 'random' (default): uniform in [-1, 1] for floats, in [0, 3] for "
             "integers, 0 or 1 for booleans; or 'zeros'"),
    cl::value_desc("random|zeros"), cl::init("random"), cl::cat(runCat)};
  cl::opt<std::string> seedArg{"seed", cl::desc("Seed of the random fill (default 0)"),
                                    cl::value_desc("N"), cl::cat(runCat)};
  cl::opt<std::string> outputsArg{
    "outputs", cl::desc("Write output_J.pb (graph-output order) into DIR (created if missing)"),
    cl::value_desc("DIR"), cl::cat(runCat)};
  cl::opt<bool> npyArg{"npy",
                            cl::desc("With --outputs: write tensors as output_J.npy (NumPy)"),
                            cl::cat(runCat)};
  cl::opt<std::string> checkArg{
    "check", cl::desc("Compare with DIR/output_J.pb: |out - ref| <= atol + rtol*|ref|"),
    cl::value_desc("DIR"), cl::cat(runCat)};
  cl::opt<std::string> atolArg{"atol",
                                    cl::desc("Absolute tolerance of --check (default 1e-4)"),
                                    cl::value_desc("X"), cl::cat(runCat)};
  cl::opt<std::string> rtolArg{"rtol",
                                    cl::desc("Relative tolerance of --check (default 1e-3)"),
                                    cl::value_desc("Y"), cl::cat(runCat)};
  cl::opt<std::string> benchArg{
    "bench", cl::desc("Time N runs after warm-up; prints median_ms=... min_ms=..."),
    cl::value_desc("N"), cl::cat(runCat)};
  cl::opt<std::string> threadsArg{
    "threads",
    cl::desc("Threads that run the kernels, this one included (default: the number of physical "
             "cores; 1: no thread pool)"),
    cl::value_desc("N"), cl::cat(runCat)};
  cl::opt<std::string> mcpuArg{"mcpu",
                                    cl::desc("LLVM CPU to compile for (default: host)"),
                                    cl::value_desc("CPU"), cl::cat(runCat)};
  cl::opt<unsigned> optLevelArg{"O", cl::desc("Optimization level 0-3 (default 3)"),
                                     cl::Prefix, cl::init(3), cl::cat(runCat)};
  cl::opt<bool> debugMemoryArg{
    "debug-memory",
    cl::desc("No static memory plan: every intermediate gets fresh memory filled with NaN, so a "
             "read of unwritten memory shows up as NaN"),
    cl::cat(runCat)};
  cl::opt<bool> checkFiniteArg{
    "check-finite",
    cl::desc("Find the first node whose output holds a NaN or an infinity although its inputs do "
             "not (every node output is compiled as a model output for this); exit status 1 "
             "when one does. With --debug-memory a read of unwritten memory shows up this way"),
    cl::cat(runCat)};
  cl::opt<bool> verifyArg{
    "verify",
    cl::desc("Also run the model through Kiln's reference interpreter (plain loops, lib/interp) "
             "and compare the outputs within --atol/--rtol; when they differ, find the first "
             "ONNX node whose output differs while its inputs agree and print it, its worst "
             "element and both values; exit status 1"),
    cl::cat(runCat)};
  cl::opt<bool> interpretArg{
    "interpret",
    cl::desc("Run the model through the reference interpreter instead of compiled code (slow; "
             "for checking the compiler)"),
    cl::cat(runCat)};
  cl::opt<std::string> perturbArg{
    "test-perturb-node",
    cl::desc("Testing --verify: compiled code adds 1 to the output of the ONNX node NAME (a "
             "deliberate miscompile)"),
    cl::value_desc("NAME"), cl::cat(runCat)};
  cl::opt<bool> gpuTensorPassesArg{
    "gpu-tensor-passes",
    cl::desc("Testing the GPU path: compile, for the CPU, the linalg that --device cuda makes "
             "(its fusion, no CPU kernels) and its tiled matrix-product, convolution and "
             "block-per-row reduction kernels emulated by loops, so they run on any machine"),
    cl::cat(runCat)};
  cl::opt<bool> gpuSplitReductionsArg{
    "gpu-split-reductions",
    cl::desc("--device cuda and --gpu-tensor-passes: also split long reductions with few outputs "
             "in two (kiln-gpu-split-reductions)"),
    cl::cat(runCat)};
  cl::opt<std::string> gpuPrecisionArg{
    "gpu-precision",
    cl::desc("--device cuda and --gpu-tensor-passes: float32 products and convolutions on TF32 "
             "tensor cores (tf32, the default on sm_80 and later: inputs rounded to 10 mantissa "
             "bits, f32 sums) or with exact FP32 FMAs (fp32)"),
    cl::value_desc("tf32|fp32"), cl::init("tf32"), cl::cat(runCat)};
  cl::opt<std::string> profileArg{
    "profile",
    cl::desc("Compile with a timer around every kernel, run the model (--bench N times, else 10, "
             "after warm-up), write a Chrome trace (chrome://tracing, ui.perfetto.dev) with one "
             "event per kernel, named by its ONNX node(s), and one per thread's slice of it; "
             "print the top kernels: time, share, GFLOP/s, threads"),
    cl::value_desc("FILE.json"), cl::cat(runCat)};
  cl::opt<std::string> maxLoopArg{
    "max-loop-iterations",
    cl::desc("The most iterations any one ONNX Loop may run before the run stops with an error "
             "naming it (default 2147483648 = 2^31; the runtime's "
             "kiln_set_max_loop_iterations)"),
    cl::value_desc("N"), cl::cat(runCat)};
  cl::opt<bool> noCacheArg{
    "no-cache",
    cl::desc("Compile afresh: neither read nor write the compile cache (KILN_CACHE_DIR, default "
             "$XDG_CACHE_HOME/kiln or ~/.cache/kiln; size bound KILN_CACHE_MAX_MB, default "
             "2048)"),
    cl::cat(runCat)};
  cl::opt<bool> tuneArg{
    "tune",
    cl::desc("Tune kernel choices on this machine: time each convolution layer's candidate "
             "schedules at its real shape on --threads threads until a confidence bound "
             "(empirical Bernstein, 95 %) separates them, and compile with the winners. "
             "Choices are kept in the compile cache (keyed by CPU and layer), so a machine "
             "tunes a layer once; prints what tuning did"),
    cl::cat(runCat)};
  cl::opt<std::string> deviceArg{
    "device",
    cl::desc("Where the model runs (default cpu). cuda: the first NVIDIA GPU, through the driver "
             "(libcuda.so.1, loaded at run time); the kernels are compiled to PTX for its "
             "architecture, weights are uploaded once, inputs and outputs are copied at each "
             "run. --bench then also prints the kernels' device time (CUDA events). Not with "
             "--verify, --check-finite, --interpret or --profile (CPU only). The CUDA path "
             "compiles once per input shape"),
    cl::value_desc("cpu|cuda"), cl::init("cpu"), cl::cat(runCat)};
};
} // namespace

/// The names Flags registers.
static const char *const kFlagNames[] = {"inputs", "input", "shape", "dim", "specialize", "fill", "seed", "outputs", "npy", "check", "atol", "rtol", "bench", "threads", "mcpu", "O", "debug-memory", "check-finite", "verify", "interpret", "test-perturb-node", "gpu-tensor-passes", "gpu-split-reductions", "gpu-precision", "profile", "max-loop-iterations", "no-cache", "tune", "device"};

static const char *kOverview =
    "kiln-run: compiles an ONNX model, runs it and prints a summary. Dims the model leaves\n"
    "unknown are taken at run time where its ops allow (one compile for every shape);\n"
    "elsewhere, with --shape or --specialize, and on --device cuda, the code is compiled\n"
    "for the shapes of the inputs.\n\n"
    "  kiln-run MODEL.onnx [--inputs DIR] [--input NAME=FILE]... [--shape NAME=DIMS]...\n"
    "           [--dim NAME=LO..HI]... [--specialize]\n"
    "           [--fill random|zeros] [--seed N] [--outputs DIR] [--npy] [--check DIR]\n"
    "           [--atol X] [--rtol Y] [--threads N] [--bench N] [--mcpu CPU] [-O0..-O3]\n"
    "           [--debug-memory] [--check-finite] [--profile FILE.json] [--no-cache] [--tune]\n"
    "           [--verify] [--interpret] [--max-loop-iterations N] [--device cpu|cuda]\n\n"
    "Each graph input comes from, in this order: --input NAME=FILE; DIR/input_J.pb\n"
    "(J: its position among the graph inputs) when --inputs DIR is given; else it is\n"
    "made from the model's signature and filled as --fill says.\n\n"
    "Exit status: 0 when everything ran (and matched, with --check); 1 on a mismatch or\n"
    "a run/compile error; 2 on bad usage.\n";

int usageError(const std::string &msg) {
  std::fprintf(stderr, "kiln-run: error: %s\n%s", msg.c_str(), "run 'kiln-run --help' for usage\n");
  return 2;
}

/// A finite number, all of `s`.
static bool parseNumber(const std::string &s, double &out) {
  char *end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return end && *end == 0 && end != s.c_str() && std::isfinite(out);
}

/// "1x3x224x224" -> {1, 3, 224, 224}; false on anything else.
static bool parseDims(const std::string &text, std::vector<int64_t> &dims) {
  dims.clear();
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t x = text.find('x', pos);
    std::string part = text.substr(pos, x == std::string::npos ? std::string::npos : x - pos);
    char *end = nullptr;
    long long d = std::strtoll(part.c_str(), &end, 10);
    if (part.empty() || !end || *end || d < 0)
      return false;
    dims.push_back(d);
    if (x == std::string::npos)
      return true;
    pos = x + 1;
  }
  return false;
}

/// NAME=REST of --input or --shape; false when either side is empty.
static bool splitNamed(const std::string &v, std::string &name, std::string &rest) {
  size_t eq = v.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == v.size())
    return false;
  name = v.substr(0, eq);
  rest = v.substr(eq + 1);
  return true;
}

/// A positive integer of at most 4096 (--bench, --threads).
static bool positiveCount(const std::string &text, long &out) {
  double num;
  if (!parseNumber(text, num) || num < 1 || num > 4096 || num != std::floor(num))
    return false;
  out = (long)num;
  return true;
}

int parseRunOptions(int argc, char **argv, RunOptions &o) {
  // libLLVM registers options of its own when it loads; a name kiln-run
  // uses for something else is unregistered first (it would abort the
  // program as registered twice).
  for (const char *name : kFlagNames)
    if (cl::Option *taken = cl::getRegisteredOptions().lookup(name))
      taken->removeArgument();
  static Flags f; // parseRunOptions runs once per process
  auto &runCat = f.runCat;
  cl::SetVersionPrinter(
      [](llvm::raw_ostream &os) { os << "kiln-run (Kiln) " << kiln::version() << "\n"; });
  // LLVM's own options stay usable but out of --help, as in kilnc.
  cl::HideUnrelatedOptions(runCat);
  std::vector<const char *> args(argv, argv + argc);
  for (const char *&a : args) // -h as well as --help
    if (std::string(a) == "-h")
      a = "--help";
  std::string errors;
  llvm::raw_string_ostream errs(errors);
  if (!cl::ParseCommandLineOptions((int)args.size(), args.data(), kOverview, &errs)) {
    // LLVM's message starts with the program name and ends by pointing at
    // --help; some (a missing value) it writes to stderr itself.
    std::string first = errors.substr(0, errors.find('\n'));
    std::string prefix = llvm::sys::path::filename(args[0]).str() + ": ";
    if (first.compare(0, prefix.size(), prefix) == 0)
      first = first.substr(prefix.size());
    first = first.substr(0, first.find("  Try:"));
    size_t end = first.find_last_not_of(" .!");
    first = first.substr(0, end == std::string::npos ? 0 : end + 1);
    if (first.empty()) {
      std::fputs("run 'kiln-run --help' for usage\n", stderr);
      return 2;
    }
    return usageError(first);
  }

  o.modelPath = f.modelArg;
  o.inputsDir = f.inputsArg;
  o.outputsDir = f.outputsArg;
  o.checkDir = f.checkArg;
  o.npy = f.npyArg;
  for (const std::string &v : f.inputArgs) {
    std::string name, file;
    if (!splitNamed(v, name, file))
      return usageError("--input needs NAME=FILE");
    o.inputFiles[name] = file;
  }
  for (const std::string &v : f.shapeArgs) {
    std::string name, dims;
    if (!splitNamed(v, name, dims))
      return usageError("--shape needs NAME=DIMS");
    if (!parseDims(dims, o.shapes[name]))
      return usageError("--shape " + v + ": DIMS must look like 1x3x224x224");
  }
  for (const std::string &v : f.dimArgs) {
    std::string name;
    std::pair<int64_t, int64_t> range;
    if (!kiln::parseDimBound(v, name, range))
      return usageError("--dim " + v + ": give NAME=LO..HI with 0 <= LO <= HI, e.g. seq=1..512");
    o.compile.dimBounds[name] = range;
  }
  if (f.fillArg != "random" && f.fillArg != "zeros")
    return usageError("--fill needs 'random' or 'zeros'");
  o.randomFill = f.fillArg == "random";
  double num;
  if (f.seedArg.getNumOccurrences()) {
    if (!parseNumber(f.seedArg, num) || num < 0 || num >= 18446744073709551616.0 ||
        num != std::floor(num))
      return usageError("--seed needs a non-negative integer");
    o.seed = (unsigned long long)num;
  }
  for (auto [arg, flag, value] : {std::make_tuple(&f.atolArg, "--atol", &o.atol),
                                  std::make_tuple(&f.rtolArg, "--rtol", &o.rtol)})
    if (arg->getNumOccurrences()) {
      if (!parseNumber(*arg, num) || num < 0)
        return usageError(std::string(flag) + " needs a non-negative number");
      *value = num;
    }
  if (f.benchArg.getNumOccurrences() && !positiveCount(f.benchArg, o.bench))
    return usageError("--bench needs a positive integer");
  long threads;
  if (f.threadsArg.getNumOccurrences()) {
    if (!positiveCount(f.threadsArg, threads))
      return usageError("--threads needs a positive integer");
    o.compile.numThreads = (int)threads;
  }
  if (f.maxLoopArg.getNumOccurrences()) {
    const std::string &text = f.maxLoopArg;
    char *end = nullptr;
    errno = 0;
    long long limit = std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || *end || errno || limit < 1)
      return usageError("--max-loop-iterations needs a positive integer");
    kiln_set_max_loop_iterations(limit);
  }
  if (f.optLevelArg > 3)
    return usageError("-O" + std::to_string(f.optLevelArg) + " is not a level; use -O0..-O3");
  o.compile.optLevel = (int)f.optLevelArg;
  o.compile.debugMemory = f.debugMemoryArg;
  o.compile.interpret = f.interpretArg;
  o.compile.dynamicShapes = !f.specializeArg && f.shapeArgs.empty();
  o.compile.testPerturbNode = f.perturbArg;
  o.compile.gpuTensorPassesOnCpu = f.gpuTensorPassesArg;
  o.compile.gpu.splitReductions = f.gpuSplitReductionsArg;
  if (f.gpuPrecisionArg != "tf32" && f.gpuPrecisionArg != "fp32")
    return usageError("--gpu-precision needs 'tf32' or 'fp32'");
  o.compile.gpu.tf32 = f.gpuPrecisionArg == "tf32";
  o.compile.cache = !f.noCacheArg;
  o.compile.tune = f.tuneArg;
  if (f.mcpuArg.getNumOccurrences())
    o.compile.cpu = f.mcpuArg;
  o.checkFinite = f.checkFiniteArg;
  o.verify = f.verifyArg;
  o.profilePath = f.profileArg;
  o.compile.profile = !o.profilePath.empty();
  o.device = f.deviceArg;
  if (o.device != "cpu" && o.device != "cuda")
    return usageError("--device needs 'cpu' or 'cuda'");

  if (o.modelPath.empty())
    return usageError("no model given");
  if (o.device == "cuda") {
    if (o.checkFinite || o.verify || !o.profilePath.empty() || o.compile.interpret)
      return usageError("--device cuda: --check-finite, --verify, --interpret and --profile "
                        "run on the CPU only");
    o.compile.device = "cuda";
  }
  if (o.npy && o.outputsDir.empty())
    return usageError("--npy needs --outputs DIR");
  return -1;
}
