// kiln-run: runs a model on inputs from files or made up from its signature,
// checks and benchmarks it.
#include "kiln/InvocationLog.h"
#include "kiln/Kiln.h"
#include "kiln/TensorIO.h"
#include "kiln/profile.h"

#include "ProfileReport.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

static const char *kUsage =
    "usage: kiln-run MODEL.onnx [--inputs DIR] [--input NAME=FILE]... [--shape NAME=DIMS]...\n"
    "                [--fill random|zeros] [--seed N] [--outputs DIR] [--npy] [--check DIR]\n"
    "                [--atol X] [--rtol Y] [--threads N] [--bench N] [--mcpu CPU] [-O0..-O3]\n"
    "                [--debug-memory] [--check-finite] [--profile FILE.json] [--no-cache]\n"
    "                [--verify] [--interpret] [--max-loop-iterations N] [--device cpu|cuda]\n"
    "\n"
    "Compiles MODEL.onnx for the shapes of its inputs, runs it and prints a summary.\n"
    "Each graph input comes from, in this order: --input NAME=FILE; DIR/input_J.pb\n"
    "(J: its position among the graph inputs) when --inputs DIR is given; else it is\n"
    "made from the model's signature and filled as --fill says.\n"
    "\n"
    "  --inputs DIR      folder with input_J.pb: ONNX TensorProto files, or SequenceProto /\n"
    "                    OptionalProto for sequence and optional inputs (the ONNX test layout)\n"
    "  --input NAME=FILE one input from a .pb (TensorProto) or .npy (NumPy) file\n"
    "  --shape NAME=DIMS dims of a made-up input whose declared shape has dynamic dims,\n"
    "                    e.g. --shape x=1x3x224x224\n"
    "  --fill random|zeros  made-up inputs: uniform in [-1, 1] for floats, in [0, 3] for\n"
    "                    integers, 0 or 1 for booleans (default); or all zeros\n"
    "  --seed N          seed of the random fill (default 0)\n"
    "  --outputs DIR     write output_J.pb (graph-output order) into DIR (created if missing)\n"
    "  --npy             with --outputs: write tensors as output_J.npy (NumPy) instead\n"
    "  --check DIR    compare with DIR/output_J.pb: |out - ref| <= atol + rtol*|ref|\n"
    "  --atol X       absolute tolerance for --check (default 1e-4)\n"
    "  --rtol Y       relative tolerance for --check (default 1e-3)\n"
    "  --bench N      time N runs after warm-up; prints median_ms=... min_ms=...\n"
    "  --threads N    threads that run the kernels, this one included (default: the\n"
    "                 number of physical cores; 1: no thread pool)\n"
    "  --mcpu CPU     LLVM CPU to compile for (default: host)\n"
    "  -O0..-O3       optimization level (default -O3)\n"
    "  --debug-memory no static memory plan: every intermediate gets fresh memory filled\n"
    "                 with NaN, so a read of unwritten memory shows up as NaN\n"
    "  --check-finite find the first node whose output holds a NaN or an infinity\n"
    "                 although its inputs do not (every node output is compiled as a\n"
    "                 model output for this); exit status 1 when one does. With\n"
    "                 --debug-memory a read of unwritten memory shows up this way\n"
    "  --verify       also run the model through Kiln's reference interpreter (plain\n"
    "                 loops, lib/interp) and compare the outputs within --atol/--rtol;\n"
    "                 when they differ, find the first ONNX node whose output differs\n"
    "                 while its inputs agree (every node output is exposed for this)\n"
    "                 and print it, its worst element and both values; exit status 1\n"
    "  --interpret    run the model through the reference interpreter instead of\n"
    "                 compiled code (slow; for checking the compiler)\n"
    "  --test-perturb-node NAME  testing --verify: compiled code adds 1 to the output\n"
    "                 of the ONNX node NAME (a deliberate miscompile)\n"
    "  --gpu-tensor-passes  testing the GPU path: compile, for the CPU, the linalg\n"
    "                 that --device cuda makes (its fusion, no CPU kernels) and its\n"
    "                 tiled matrix-product, convolution and block-per-row reduction\n"
    "                 kernels emulated by loops, so they run on any machine\n"
    "  --gpu-split-reductions  --device cuda and --gpu-tensor-passes: also split long\n"
    "                 reductions with few outputs in two (kiln-gpu-split-reductions)\n"
    "  --profile FILE.json  compile with a timer around every kernel, run the model\n"
    "                 (--bench N times, else 10, after warm-up), write a Chrome trace\n"
    "                 (chrome://tracing, ui.perfetto.dev) with one event per kernel,\n"
    "                 named by its ONNX node(s), and one per thread's slice of it;\n"
    "                 print the top kernels: time, share, GFLOP/s, threads\n"
    "  --max-loop-iterations N  the most iterations any one ONNX Loop may run before\n"
    "                 the run stops with an error naming it (default 2147483648 = 2^31;\n"
    "                 the runtime's kiln_set_max_loop_iterations)\n"
    "  --no-cache     compile afresh: neither read nor write the compile cache\n"
    "                 (KILN_CACHE_DIR, default $XDG_CACHE_HOME/kiln or ~/.cache/kiln;\n"
    "                 size bound KILN_CACHE_MAX_MB, default 2048)\n"
    "  --device cpu|cuda  where the model runs (default cpu). cuda: the first NVIDIA\n"
    "                 GPU, through the driver (libcuda.so.1, loaded at run time); the\n"
    "                 kernels are compiled to PTX for its architecture, weights are\n"
    "                 uploaded once, inputs and outputs are copied at each run. --bench\n"
    "                 then also prints the kernels' device time (CUDA events). Not with\n"
    "                 --verify, --check-finite, --interpret or --profile (CPU only)\n"
    "  --help, --version\n"
    "\n"
    "Exit status: 0 when everything ran (and matched, with --check); 1 on a mismatch or\n"
    "a run/compile error; 2 on bad usage.\n";

static int usageError(const std::string &msg) {
  std::fprintf(stderr, "kiln-run: error: %s\n%s", msg.c_str(), "run 'kiln-run --help' for usage\n");
  return 2;
}

static bool parseNumber(const char *s, double &out) {
  char *end = nullptr;
  out = std::strtod(s, &end);
  return end && *end == 0 && end != s;
}

static double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

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

/// {1, 3, 224} -> "1x3x224", as --shape takes it.
static std::string dimsString(const std::vector<int64_t> &dims) {
  std::string s;
  for (size_t d = 0; d < dims.size(); ++d)
    s += (d ? "x" : "") + std::to_string(dims[d]);
  return s;
}

static bool endsWith(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// The IEEE half nearest `x` (ties to even), for finite |x| < 65520.
static uint16_t halfBits(double x) {
  uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  double a = std::fabs(x);
  if (a < std::ldexp(1.0, -14)) // subnormal: units of 2^-24 (1024 of them is the least normal)
    return sign | (uint16_t)std::nearbyint(std::ldexp(a, 24));
  int e = std::ilogb(a);
  double q = std::nearbyint(std::ldexp(a, 10 - e)); // in [1024, 2048]
  if (q == 2048.0) {
    q = 1024.0;
    ++e;
  }
  return sign | (uint16_t)((e + 15) << 10) | (uint16_t)(q - 1024.0);
}

/// The bfloat16 nearest `x` (ties to even): float's upper half, rounded.
static uint16_t bfloatBits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  u += 0x7FFF + ((u >> 16) & 1);
  return (uint16_t)(u >> 16);
}

/// A tensor of `info`'s dtype and `dims`, zeros or uniform random values.
static kiln::Tensor madeUpInput(const kiln::TensorInfo &info, const std::vector<int64_t> &dims,
                                bool random, std::mt19937_64 &gen) {
  kiln::Tensor t(info.dtype, dims);
  if (!t.valid())
    return t;
  std::memset(t.data(), 0, t.numBytes());
  if (!random)
    return t;
  std::uniform_real_distribution<double> real(-1.0, 1.0);
  std::uniform_int_distribution<int> small(0, 3), bit(0, 1);
  for (int64_t i = 0; i < t.numElements(); ++i) {
    switch (info.dtype) {
    case KILN_FLOAT32: t.data<float>()[i] = (float)real(gen); break;
    case KILN_FLOAT64: t.data<double>()[i] = real(gen); break;
    case KILN_FLOAT16: t.data<uint16_t>()[i] = halfBits(real(gen)); break;
    case KILN_BFLOAT16: t.data<uint16_t>()[i] = bfloatBits((float)real(gen)); break;
    case KILN_UINT64: t.data<uint64_t>()[i] = (uint64_t)small(gen); break;
    case KILN_UINT32: t.data<uint32_t>()[i] = (uint32_t)small(gen); break;
    case KILN_UINT16: t.data<uint16_t>()[i] = (uint16_t)small(gen); break;
    case KILN_INT64: t.data<int64_t>()[i] = small(gen); break;
    case KILN_INT32: t.data<int32_t>()[i] = small(gen); break;
    case KILN_INT16: t.data<int16_t>()[i] = (int16_t)small(gen); break;
    case KILN_INT8: t.data<int8_t>()[i] = (int8_t)small(gen); break;
    case KILN_UINT8: t.data<uint8_t>()[i] = (uint8_t)small(gen); break;
    case KILN_BOOL: t.data<uint8_t>()[i] = (uint8_t)bit(gen); break;
    default: break; // other types stay zero
    }
  }
  return t;
}

static int kilnRunMain(int argc, char **argv) {
  std::string modelPath, inputsDir, outputsDir, checkDir, device = "cpu";
  std::map<std::string, std::string> inputFiles;
  std::map<std::string, std::vector<int64_t>> shapes;
  bool randomFill = true, npy = false;
  unsigned long long seed = 0;
  double atol = 1e-4, rtol = 1e-3;
  long bench = 0;
  std::string profilePath;
  bool checkFinite = false, verify = false;
  kiln::CompileOptions copts;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char *flag) -> const char * {
      if (i + 1 >= argc) {
        usageError(std::string(flag) + " needs a value");
        std::exit(2);
      }
      return argv[++i];
    };
    double num;
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "--version") {
      std::printf("kiln-run (Kiln) %s\n", kiln::version().c_str());
      return 0;
    } else if (a == "--inputs") {
      inputsDir = value("--inputs");
    } else if (a == "--outputs") {
      outputsDir = value("--outputs");
    } else if (a == "--npy") {
      npy = true;
    } else if (a == "--input" || a == "--shape") {
      std::string v = value(a.c_str());
      size_t eq = v.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == v.size())
        return usageError(a + " needs NAME=" + (a == "--input" ? "FILE" : "DIMS"));
      std::string name = v.substr(0, eq), rest = v.substr(eq + 1);
      if (a == "--input") {
        inputFiles[name] = rest;
      } else if (!parseDims(rest, shapes[name])) {
        return usageError("--shape " + v + ": DIMS must look like 1x3x224x224");
      }
    } else if (a == "--fill") {
      std::string v = value("--fill");
      if (v != "random" && v != "zeros")
        return usageError("--fill needs 'random' or 'zeros'");
      randomFill = v == "random";
    } else if (a == "--seed") {
      if (!parseNumber(value("--seed"), num) || num < 0 || num != (unsigned long long)num)
        return usageError("--seed needs a non-negative integer");
      seed = (unsigned long long)num;
    } else if (a == "--check") {
      checkDir = value("--check");
    } else if (a == "--atol" || a == "--rtol") {
      if (!parseNumber(value(a.c_str()), num) || num < 0)
        return usageError(a + " needs a non-negative number");
      (a == "--atol" ? atol : rtol) = num;
    } else if (a == "--bench" || a == "--threads") {
      if (!parseNumber(value(a.c_str()), num) || num < 1 || num != (long)num || num > 4096)
        return usageError(a + " needs a positive integer");
      if (a == "--bench")
        bench = (long)num;
      else
        copts.numThreads = (int)num;
    } else if (a == "--max-loop-iterations") {
      const char *text = value("--max-loop-iterations");
      char *end = nullptr;
      errno = 0;
      long long limit = std::strtoll(text, &end, 10);
      if (!*text || *end || errno || limit < 1)
        return usageError("--max-loop-iterations needs a positive integer");
      kiln_set_max_loop_iterations(limit);
    } else if (a == "--debug-memory") {
      copts.debugMemory = true;
    } else if (a == "--check-finite") {
      checkFinite = true;
    } else if (a == "--verify") {
      verify = true;
    } else if (a == "--interpret") {
      copts.interpret = true;
    } else if (a == "--test-perturb-node") {
      copts.testPerturbNode = value("--test-perturb-node");
    } else if (a == "--profile") {
      profilePath = value("--profile");
      copts.profile = true;
    } else if (a == "--gpu-tensor-passes") {
      copts.gpuTensorPassesOnCpu = true;
    } else if (a == "--gpu-split-reductions") {
      copts.gpu.splitReductions = true;
    } else if (a == "--no-cache") {
      copts.cache = false;
    } else if (a == "--mcpu") {
      copts.cpu = value("--mcpu");
    } else if (a == "--device") {
      device = value("--device");
      if (device != "cpu" && device != "cuda")
        return usageError("--device needs 'cpu' or 'cuda'");
    } else if (a.size() == 3 && a[0] == '-' && a[1] == 'O' && a[2] >= '0' && a[2] <= '3') {
      copts.optLevel = a[2] - '0';
    } else if (!a.empty() && a[0] == '-') {
      return usageError("unknown option '" + a + "'");
    } else if (modelPath.empty()) {
      modelPath = a;
    } else {
      return usageError("more than one model given ('" + modelPath + "' and '" + a + "')");
    }
  }
  if (modelPath.empty())
    return usageError("no model given");
  if (kiln::InvocationLog *log = kiln::InvocationLog::current())
    log->model(modelPath);
  if (device == "cuda") {
    if (checkFinite || verify || !profilePath.empty() || copts.interpret)
      return usageError("--device cuda: --check-finite, --verify, --interpret and --profile "
                        "run on the CPU only");
    copts.device = "cuda";
  }
  if (npy && outputsDir.empty())
    return usageError("--npy needs --outputs DIR");

  auto t0 = Clock::now();
  // On a terminal, a compile that takes more than a second shows its stages
  // as they finish (the ones before the first second all at once).
  std::vector<std::string> pendingStages;
  double compiled = 0;
  if (isatty(2))
    copts.progress = [&](const std::string &stage, double seconds) {
      compiled += seconds;
      char line[256];
      std::snprintf(line, sizeof line, "kiln-run: compiling: %s (%.2f s)\n", stage.c_str(),
                    seconds);
      pendingStages.push_back(line);
      if (compiled < 1.0)
        return;
      for (const std::string &l : pendingStages)
        std::fputs(l.c_str(), stderr);
      pendingStages.clear();
    };
  std::string err;
  auto model = kiln::Model::load(modelPath, copts, &err);
  if (!model) {
    std::fprintf(stderr, "kiln-run: error: %s\n", err.c_str());
    return 1;
  }
  auto tLoaded = Clock::now();

  // Inputs as values: a tensor, or for a sequence or optional input the
  // SequenceProto / OptionalProto the ONNX test layout stores.
  for (const auto &named : inputFiles)
    if (std::none_of(model->inputs().begin(), model->inputs().end(),
                     [&](const kiln::TensorInfo &i) { return i.name == named.first; }))
      return usageError("--input " + named.first + "=...: the model has no input '" +
                        named.first + "'");
  for (const auto &named : shapes)
    if (std::none_of(model->inputs().begin(), model->inputs().end(),
                     [&](const kiln::TensorInfo &i) { return i.name == named.first; }))
      return usageError("--shape " + named.first + "=...: the model has no input '" +
                        named.first + "'");
  std::vector<kiln::Value> inputs;
  std::vector<kiln::ValueView> views;
  std::mt19937_64 gen(seed);
  for (size_t j = 0; j < model->inputs().size(); ++j) {
    const kiln::TensorInfo &info = model->inputs()[j];
    auto fail = [&](const std::string &why) {
      std::fprintf(stderr, "kiln-run: error: input %zu ('%s'): %s\n", j, kiln::displaySafe(info.name, 200).c_str(),
                   why.c_str());
      return 1;
    };
    kiln::Value v;
    auto file = inputFiles.find(info.name);
    std::string path = file != inputFiles.end()
                           ? file->second
                           : inputsDir.empty()
                                 ? std::string()
                                 : (fs::path(inputsDir) / ("input_" + std::to_string(j) + ".pb")).string();
    if (!path.empty() && endsWith(path, ".npy")) {
      if (info.kind != kiln::ValueKind::Tensor)
        return fail("a sequence or optional input cannot come from a .npy file");
      v.tensors.emplace_back();
      if (kiln::Status s = kiln::readNpyFile(path, v.tensors[0]); !s.ok())
        return fail(s.message);
    } else if (!path.empty()) {
      if (kiln::Status s = kiln::readValueFile(path, info, v); !s.ok())
        return fail(s.message);
    } else {
      // Made up from the signature.
      if (info.kind != kiln::ValueKind::Tensor)
        return fail("a sequence input needs a file: --input " + info.name + "=FILE.pb");
      std::vector<int64_t> dims = info.dims;
      if (auto given = shapes.find(info.name); given != shapes.end()) {
        if (given->second.size() != dims.size())
          return fail("--shape gives " + std::to_string(given->second.size()) +
                      " dims; the input has rank " + std::to_string(dims.size()));
        for (size_t d = 0; d < dims.size(); ++d)
          if (dims[d] >= 0 && dims[d] != given->second[d])
            return fail("--shape gives dim " + std::to_string(d) + " as " +
                        std::to_string(given->second[d]) + "; the model fixes it at " +
                        std::to_string(dims[d]));
        dims = given->second;
      }
      if (std::find(dims.begin(), dims.end(), -1) != dims.end())
        return fail("its shape has dynamic dims: give them with --shape " + info.name +
                    "=DIMS (e.g. 1x128)");
      v.tensors.push_back(madeUpInput(info, dims, randomFill, gen));
      if (!v.tensors.back().valid())
        return fail("cannot make a tensor of this shape and type");
      std::printf("input %zu '%s': %s %s[%s]\n", j, kiln::displaySafe(info.name, 200).c_str(),
                  randomFill ? "random" : "zeros", kiln_dtype_name(info.dtype),
                  dimsString(dims).c_str());
    }
    kiln::ValueView view{v.kind, {}};
    for (const kiln::Tensor &t : v.tensors)
      view.tensors.push_back(t.get());
    views.push_back(std::move(view));
    inputs.push_back(std::move(v));
  }
  std::string extra = (fs::path(inputsDir) / ("input_" + std::to_string(inputs.size()) + ".pb")).string();
  if (!inputsDir.empty() && fs::exists(extra))
    std::fprintf(stderr, "kiln-run: warning: %s is ignored: the model has %zu inputs\n",
                 extra.c_str(), inputs.size());

  // Compile for these inputs (checks dtypes and shapes against the model).
  if (kiln::Status s = model->prepare(views); !s.ok()) {
    std::fprintf(stderr, "kiln-run: error: %s\n", s.message.c_str());
    return 1;
  }
  auto tCompiled = Clock::now();
  std::vector<kiln::Value> outputs;
  if (kiln::Status s = model->run(views, outputs); !s.ok()) {
    std::fprintf(stderr, "kiln-run: error: %s\n", s.message.c_str());
    return 1;
  }
  auto tRan = Clock::now();
  std::printf("model: %s\nload_ms=%.1f compile_ms=%.1f first_run_ms=%.2f cache=%s\n",
              modelPath.c_str(), ms(tLoaded - t0), ms(tCompiled - tLoaded), ms(tRan - tCompiled),
              !copts.cache ? "off" : model->stats().cacheHits ? "hit" : "miss");

  auto describe = [](const kiln::Tensor &t) {
    std::string text = std::string(kiln_dtype_name(t.dtype())) + "[" + dimsString(t.dims()) + "]";
    if (t.dtype() == KILN_FLOAT32 && t.numElements() > 0) {
      const float *p = t.data<float>();
      text += " first=[";
      char buf[32];
      for (int64_t e = 0; e < std::min<int64_t>(4, t.numElements()); ++e) {
        std::snprintf(buf, sizeof buf, "%s%.6g", e ? ", " : "", p[e]);
        text += buf;
      }
      text += t.numElements() > 4 ? ", ...]" : "]";
    }
    return text;
  };
  int status = 0;
  for (size_t k = 0; k < outputs.size(); ++k) {
    const auto &info = model->outputs()[k];
    const kiln::Value &out = outputs[k];
    if (out.kind == kiln::ValueKind::Tensor) {
      std::printf("output %zu '%s': %s\n", k, kiln::displaySafe(info.name, 200).c_str(), describe(out.tensors[0]).c_str());
    } else if (out.kind == kiln::ValueKind::None) {
      std::printf("output %zu '%s': empty optional\n", k, kiln::displaySafe(info.name, 200).c_str());
    } else {
      std::printf("output %zu '%s': sequence of %zu\n", k, kiln::displaySafe(info.name, 200).c_str(), out.tensors.size());
      for (size_t e = 0; e < out.tensors.size(); ++e)
        std::printf("  [%zu] %s\n", e, describe(out.tensors[e]).c_str());
    }
    if (!outputsDir.empty()) {
      std::error_code ec;
      fs::create_directories(outputsDir, ec);
      std::string path =
          (fs::path(outputsDir) / ("output_" + std::to_string(k) + (npy ? ".npy" : ".pb"))).string();
      kiln::Status s;
      if (npy && out.kind != kiln::ValueKind::Tensor)
        s = kiln::Status::error(KILN_INVALID_ARGUMENT,
                                "output " + std::to_string(k) +
                                    " is a sequence or an empty optional; .npy holds tensors only");
      else
        s = npy ? kiln::writeNpyFile(path, out.tensors[0]) : kiln::writeValueFile(path, out, info);
      if (!s.ok()) {
        std::fprintf(stderr, "kiln-run: error: %s\n", s.message.c_str());
        return 1;
      }
    }
    if (!checkDir.empty()) {
      std::string path = (fs::path(checkDir) / ("output_" + std::to_string(k) + ".pb")).string();
      kiln::Value ref;
      if (kiln::Status s = kiln::readValueFile(path, info, ref); !s.ok()) {
        std::fprintf(stderr, "kiln-run: error: reference for output %zu: %s\n", k,
                     s.message.c_str());
        return 1;
      }
      std::string report;
      bool ok = kiln::valuesClose(out, ref, atol, rtol, report);
      std::printf("check output %zu: %s (%s)\n", k, ok ? "match" : "MISMATCH", report.c_str());
      if (!ok)
        status = 1;
    }
  }

  if (bench > 0) {
    std::vector<kiln::Value> scratch;
    for (int w = 0; w < 2; ++w)
      (void)model->run(views, scratch);
    std::vector<double> times;
    for (long r = 0; r < bench; ++r) {
      auto s = Clock::now();
      if (kiln::Status st = model->run(views, scratch); !st.ok()) {
        std::fprintf(stderr, "kiln-run: error: %s\n", st.message.c_str());
        return 1;
      }
      times.push_back(ms(Clock::now() - s));
    }
    std::sort(times.begin(), times.end());
    double median = times.size() % 2 ? times[times.size() / 2]
                                     : 0.5 * (times[times.size() / 2 - 1] + times[times.size() / 2]);
    std::printf("bench: runs=%ld median_ms=%.4f min_ms=%.4f compile_ms=%.1f\n", bench, median,
                times.front(), ms(tCompiled - tLoaded));
    if (device == "cuda") {
      // The same runs' kernels alone, timed on the device with CUDA events
      // (the wall times above include the copies to and from the GPU).
      std::vector<double> deviceTimes;
      for (long r = 0; r < bench; ++r) {
        (void)model->run(views, scratch);
        deviceTimes.push_back(model->stats().deviceMilliseconds);
      }
      std::sort(deviceTimes.begin(), deviceTimes.end());
      size_t n = deviceTimes.size();
      double dmedian = n % 2 ? deviceTimes[n / 2]
                             : 0.5 * (deviceTimes[n / 2 - 1] + deviceTimes[n / 2]);
      std::printf("bench: device=cuda kernels_median_ms=%.4f kernels_min_ms=%.4f\n", dmedian,
                  deviceTimes.front());
    }
  }
  if (checkFinite) {
    kiln::NonFiniteReport report;
    kiln::CompileOptions traceOptions = copts;
    traceOptions.progress = nullptr;
    if (kiln::Status s = kiln::traceNonFinite(modelPath, traceOptions, views, report); !s.ok()) {
      std::fprintf(stderr, "kiln-run: error: --check-finite: %s\n", s.message.c_str());
      return 1;
    }
    for (const std::string &line : report.lines)
      std::printf("check-finite: %s\n", line.c_str());
    if (report.found)
      status = 1;
    else if (report.lines.empty())
      std::printf("check-finite: all %zu node and graph outputs are finite\n",
                  report.valuesChecked);
  }
  if (verify) {
    kiln::VerifyReport report;
    kiln::CompileOptions verifyOptions = copts;
    verifyOptions.progress = nullptr;
    verifyOptions.interpret = false;
    if (kiln::Status s = kiln::verify(modelPath, verifyOptions, views, atol, rtol, report);
        !s.ok()) {
      std::fprintf(stderr, "kiln-run: error: --verify: %s\n", s.message.c_str());
      return 1;
    }
    for (const std::string &line : report.lines)
      std::printf("verify: %s\n", line.c_str());
    if (report.outputsMatch)
      std::printf("verify: all %zu outputs match the reference interpreter\n",
                  report.valuesCompared);
    else
      status = 1;
  }
  if (!profilePath.empty()) {
    long runs = bench > 0 ? bench : 10;
    std::vector<kiln::Value> scratch;
    (void)model->run(views, scratch); // warm: caches, pool threads awake
    kiln_profiler *profiler = kiln_profiler_create();
    if (!profiler) {
      std::fprintf(stderr, "kiln-run: error: out of memory\n");
      return 1;
    }
    kiln_profiler *previous = kiln_profiler_attach(profiler);
    for (long r = 0; r < runs; ++r)
      if (kiln::Status st = model->run(views, scratch); !st.ok()) {
        std::fprintf(stderr, "kiln-run: error: %s\n", st.message.c_str());
        return 1;
      }
    kiln_profiler_attach(previous);
    printProfileReport(profiler, runs, 20, stdout);
    kiln_status *ws = kiln_profiler_write_chrome_trace(profiler, profilePath.c_str());
    kiln_profiler_free(profiler);
    if (ws) {
      std::fprintf(stderr, "kiln-run: error: %s\n", kiln_status_message(ws));
      kiln_status_free(ws);
      return 1;
    }
    std::printf("profile: wrote %s\n", profilePath.c_str());
  }
  if (!checkDir.empty())
    std::printf("%s\n", status == 0 ? "all outputs match" : "some outputs do not match");
  return status;
}

// Every invocation leaves a log for kiln-rage (kiln/InvocationLog.h); the
// model's compiles record into it.
int main(int argc, char **argv) {
  auto log = kiln::InvocationLog::begin("kiln-run", std::vector<std::string>(argv, argv + argc));
  int status = kilnRunMain(argc, argv);
  if (log)
    log->finish(status);
  return status;
}
