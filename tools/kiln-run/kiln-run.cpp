// kiln-run: runs a model on inputs from a folder, checks and benchmarks it.
#include "kiln/Kiln.h"
#include "kiln/TensorIO.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

static const char *kUsage =
    "usage: kiln-run MODEL.onnx --inputs DIR [--outputs DIR] [--check DIR]\n"
    "                [--atol X] [--rtol Y] [--threads N] [--bench N] [--mcpu CPU] [-O0..-O3]\n"
    "                [--debug-memory]\n"
    "\n"
    "Compiles MODEL.onnx for the shapes of the inputs in DIR (input_0.pb, input_1.pb, ...:\n"
    "ONNX TensorProto files in graph-input order), runs it and prints a summary.\n"
    "\n"
    "  --inputs DIR   folder with input_J.pb (required)\n"
    "  --outputs DIR  write output_J.pb (graph-output order) into DIR (created if missing)\n"
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

int main(int argc, char **argv) {
  std::string modelPath, inputsDir, outputsDir, checkDir;
  double atol = 1e-4, rtol = 1e-3;
  long bench = 0;
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
    } else if (a == "--debug-memory") {
      copts.debugMemory = true;
    } else if (a == "--mcpu") {
      copts.cpu = value("--mcpu");
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
  if (inputsDir.empty())
    return usageError("--inputs DIR is required");

  auto t0 = Clock::now();
  std::string err;
  auto model = kiln::Model::load(modelPath, copts, &err);
  if (!model) {
    std::fprintf(stderr, "kiln-run: error: %s\n", err.c_str());
    return 1;
  }
  auto tLoaded = Clock::now();

  // Inputs as values: a tensor, or for a sequence or optional input the
  // SequenceProto / OptionalProto the ONNX test layout stores.
  std::vector<kiln::Value> inputs;
  std::vector<kiln::ValueView> views;
  for (size_t j = 0; j < model->inputs().size(); ++j) {
    std::string path = (fs::path(inputsDir) / ("input_" + std::to_string(j) + ".pb")).string();
    kiln::Value v;
    if (kiln::Status s = kiln::readValueFile(path, model->inputs()[j], v); !s.ok()) {
      std::fprintf(stderr, "kiln-run: error: input %zu ('%s'): %s\n", j,
                   model->inputs()[j].name.c_str(), s.message.c_str());
      return 1;
    }
    kiln::ValueView view{v.kind, {}};
    for (const kiln::Tensor &t : v.tensors)
      view.tensors.push_back(t.get());
    views.push_back(std::move(view));
    inputs.push_back(std::move(v));
  }
  std::string extra = (fs::path(inputsDir) / ("input_" + std::to_string(inputs.size()) + ".pb")).string();
  if (fs::exists(extra))
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
  std::printf("model: %s\nload_ms=%.1f compile_ms=%.1f first_run_ms=%.2f\n", modelPath.c_str(),
              ms(tLoaded - t0), ms(tCompiled - tLoaded), ms(tRan - tCompiled));

  auto describe = [](const kiln::Tensor &t) {
    std::vector<int64_t> dims = t.dims();
    std::string shape;
    for (size_t d = 0; d < dims.size(); ++d)
      shape += (d ? "x" : "") + std::to_string(dims[d]);
    std::string text = std::string(kiln_dtype_name(t.dtype())) + "[" + shape + "]";
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
      std::printf("output %zu '%s': %s\n", k, info.name.c_str(), describe(out.tensors[0]).c_str());
    } else if (out.kind == kiln::ValueKind::None) {
      std::printf("output %zu '%s': empty optional\n", k, info.name.c_str());
    } else {
      std::printf("output %zu '%s': sequence of %zu\n", k, info.name.c_str(), out.tensors.size());
      for (size_t e = 0; e < out.tensors.size(); ++e)
        std::printf("  [%zu] %s\n", e, describe(out.tensors[e]).c_str());
    }
    if (!outputsDir.empty()) {
      std::error_code ec;
      fs::create_directories(outputsDir, ec);
      std::string path = (fs::path(outputsDir) / ("output_" + std::to_string(k) + ".pb")).string();
      if (kiln::Status s = kiln::writeValueFile(path, out, info); !s.ok()) {
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
  }
  if (!checkDir.empty())
    std::printf("%s\n", status == 0 ? "all outputs match" : "some outputs do not match");
  return status;
}
