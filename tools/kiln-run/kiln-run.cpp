// kiln-run: runs a model on inputs from files or made up from its signature,
// checks and benchmarks it.
#include "kiln/InvocationLog.h"
#include "kiln/Kiln.h"
#include "kiln/TensorIO.h"
#include "kiln/profile.h"

#include "ProfileReport.h"
#include "RunOptions.h"

#include <algorithm>
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

static double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

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

/// Shows the compile's stages as they finish once it has taken more than a
/// second (the ones before that all at once), on a terminal only.
static void showProgressOnTerminal(kiln::CompileOptions &copts) {
  if (!isatty(2))
    return;
  copts.progress = [pending = std::vector<std::string>(), compiled = 0.0](
                       const std::string &stage, double seconds) mutable {
    compiled += seconds;
    char line[256];
    std::snprintf(line, sizeof line, "kiln-run: compiling: %s (%.2f s)\n", stage.c_str(),
                  seconds);
    pending.push_back(line);
    if (compiled < 1.0)
      return;
    for (const std::string &l : pending)
      std::fputs(l.c_str(), stderr);
    pending.clear();
  };
}

/// The graph inputs as values (a tensor, or for a sequence or optional input
/// what the SequenceProto / OptionalProto the ONNX test layout stores
/// holds), from files or made up from the signature; `views` point into
/// `inputs`. Returns -1 on success, else the exit status (the error printed).
static int gatherInputs(const RunOptions &o, const kiln::Model &model,
                        std::vector<kiln::Value> &inputs, std::vector<kiln::ValueView> &views) {
  for (const auto &named : o.inputFiles)
    if (std::none_of(model.inputs().begin(), model.inputs().end(),
                     [&](const kiln::TensorInfo &i) { return i.name == named.first; }))
      return usageError("--input " + named.first + "=...: the model has no input '" +
                        named.first + "'");
  for (const auto &named : o.shapes)
    if (std::none_of(model.inputs().begin(), model.inputs().end(),
                     [&](const kiln::TensorInfo &i) { return i.name == named.first; }))
      return usageError("--shape " + named.first + "=...: the model has no input '" +
                        named.first + "'");
  std::mt19937_64 gen(o.seed);
  for (size_t j = 0; j < model.inputs().size(); ++j) {
    const kiln::TensorInfo &info = model.inputs()[j];
    auto fail = [&](const std::string &why) {
      std::fprintf(stderr, "kiln-run: error: input %zu ('%s'): %s\n", j,
                   kiln::displaySafe(info.name, 200).c_str(), why.c_str());
      return 1;
    };
    kiln::Value v;
    auto file = o.inputFiles.find(info.name);
    std::string path =
        file != o.inputFiles.end() ? file->second
        : o.inputsDir.empty()
            ? std::string()
            : (fs::path(o.inputsDir) / ("input_" + std::to_string(j) + ".pb")).string();
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
      if (auto given = o.shapes.find(info.name); given != o.shapes.end()) {
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
      v.tensors.push_back(madeUpInput(info, dims, o.randomFill, gen));
      if (!v.tensors.back().valid())
        return fail("cannot make a tensor of this shape and type");
      std::printf("input %zu '%s': %s %s[%s]\n", j, kiln::displaySafe(info.name, 200).c_str(),
                  o.randomFill ? "random" : "zeros", kiln_dtype_name(info.dtype),
                  dimsString(dims).c_str());
    }
    inputs.push_back(std::move(v));
  }
  for (const kiln::Value &v : inputs) {
    kiln::ValueView view{v.kind, {}};
    for (const kiln::Tensor &t : v.tensors)
      view.tensors.push_back(t.get());
    views.push_back(std::move(view));
  }
  std::string extra =
      (fs::path(o.inputsDir) / ("input_" + std::to_string(inputs.size()) + ".pb")).string();
  if (!o.inputsDir.empty() && fs::exists(extra))
    std::fprintf(stderr, "kiln-run: warning: %s is ignored: the model has %zu inputs\n",
                 extra.c_str(), inputs.size());
  return -1;
}

/// A tensor as the summary shows it: dtype, dims and its first floats.
static std::string describe(const kiln::Tensor &t) {
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
}

/// Prints each output, writes it (--outputs) and checks it (--check).
/// Returns 0, 1 on a mismatch, or -2 after an error (printed).
static int reportOutputs(const RunOptions &o, const kiln::Model &model,
                         const std::vector<kiln::Value> &outputs) {
  int status = 0;
  for (size_t k = 0; k < outputs.size(); ++k) {
    const auto &info = model.outputs()[k];
    const kiln::Value &out = outputs[k];
    std::string name = kiln::displaySafe(info.name, 200);
    if (out.kind == kiln::ValueKind::Tensor) {
      std::printf("output %zu '%s': %s\n", k, name.c_str(), describe(out.tensors[0]).c_str());
    } else if (out.kind == kiln::ValueKind::None) {
      std::printf("output %zu '%s': empty optional\n", k, name.c_str());
    } else {
      std::printf("output %zu '%s': sequence of %zu\n", k, name.c_str(), out.tensors.size());
      for (size_t e = 0; e < out.tensors.size(); ++e)
        std::printf("  [%zu] %s\n", e, describe(out.tensors[e]).c_str());
    }
    if (!o.outputsDir.empty()) {
      std::error_code ec;
      fs::create_directories(o.outputsDir, ec);
      std::string path = (fs::path(o.outputsDir) /
                          ("output_" + std::to_string(k) + (o.npy ? ".npy" : ".pb")))
                             .string();
      kiln::Status s;
      if (o.npy && out.kind != kiln::ValueKind::Tensor)
        s = kiln::Status::error(KILN_INVALID_ARGUMENT,
                                "output " + std::to_string(k) +
                                    " is a sequence or an empty optional; .npy holds tensors only");
      else
        s = o.npy ? kiln::writeNpyFile(path, out.tensors[0])
                  : kiln::writeValueFile(path, out, info);
      if (!s.ok()) {
        std::fprintf(stderr, "kiln-run: error: %s\n", s.message.c_str());
        return -2;
      }
    }
    if (!o.checkDir.empty()) {
      std::string path = (fs::path(o.checkDir) / ("output_" + std::to_string(k) + ".pb")).string();
      kiln::Value ref;
      if (kiln::Status s = kiln::readValueFile(path, info, ref); !s.ok()) {
        std::fprintf(stderr, "kiln-run: error: reference for output %zu: %s\n", k,
                     s.message.c_str());
        return -2;
      }
      std::string report;
      bool ok = kiln::valuesClose(out, ref, o.atol, o.rtol, report);
      std::printf("check output %zu: %s (%s)\n", k, ok ? "match" : "MISMATCH", report.c_str());
      if (!ok)
        status = 1;
    }
  }
  return status;
}

static double median(std::vector<double> times) {
  std::sort(times.begin(), times.end());
  size_t n = times.size();
  return n % 2 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
}

/// --bench: two warm-up runs, then o.bench timed ones (and on CUDA the
/// kernels' device time of as many more). False after an error (printed).
static bool benchmark(const RunOptions &o, kiln::Model &model,
                      const std::vector<kiln::ValueView> &views, double compileMs) {
  std::vector<kiln::Value> scratch;
  for (int w = 0; w < 2; ++w)
    (void)model.run(views, scratch);
  std::vector<double> times;
  for (long r = 0; r < o.bench; ++r) {
    auto s = Clock::now();
    if (kiln::Status st = model.run(views, scratch); !st.ok()) {
      std::fprintf(stderr, "kiln-run: error: %s\n", st.message.c_str());
      return false;
    }
    times.push_back(ms(Clock::now() - s));
  }
  std::printf("bench: runs=%ld median_ms=%.4f min_ms=%.4f compile_ms=%.1f\n", o.bench,
              median(times), *std::min_element(times.begin(), times.end()), compileMs);
  if (o.device == "cuda") {
    // The same runs' kernels alone, timed on the device with CUDA events
    // (the wall times above include the copies to and from the GPU).
    std::vector<double> deviceTimes;
    for (long r = 0; r < o.bench; ++r) {
      (void)model.run(views, scratch);
      deviceTimes.push_back(model.stats().deviceMilliseconds);
    }
    std::printf("bench: device=cuda kernels_median_ms=%.4f kernels_min_ms=%.4f\n",
                median(deviceTimes), *std::min_element(deviceTimes.begin(), deviceTimes.end()));
  }
  return true;
}

/// --check-finite and --verify: 0, 1 when they found something, -2 after
/// an error (printed).
static int diagnose(const RunOptions &o, const std::vector<kiln::ValueView> &views) {
  int status = 0;
  if (o.checkFinite) {
    kiln::NonFiniteReport report;
    kiln::CompileOptions traceOptions = o.compile;
    traceOptions.progress = nullptr;
    if (kiln::Status s = kiln::traceNonFinite(o.modelPath, traceOptions, views, report);
        !s.ok()) {
      std::fprintf(stderr, "kiln-run: error: --check-finite: %s\n", s.message.c_str());
      return -2;
    }
    for (const std::string &line : report.lines)
      std::printf("check-finite: %s\n", line.c_str());
    if (report.found)
      status = 1;
    else if (report.lines.empty())
      std::printf("check-finite: all %zu node and graph outputs are finite\n",
                  report.valuesChecked);
  }
  if (o.verify) {
    kiln::VerifyReport report;
    kiln::CompileOptions verifyOptions = o.compile;
    verifyOptions.progress = nullptr;
    verifyOptions.interpret = false;
    if (kiln::Status s = kiln::verify(o.modelPath, verifyOptions, views, o.atol, o.rtol, report);
        !s.ok()) {
      std::fprintf(stderr, "kiln-run: error: --verify: %s\n", s.message.c_str());
      return -2;
    }
    for (const std::string &line : report.lines)
      std::printf("verify: %s\n", line.c_str());
    if (report.outputsMatch)
      std::printf("verify: all %zu outputs match the reference interpreter\n",
                  report.valuesCompared);
    else
      status = 1;
  }
  return status;
}

/// --profile: times every kernel over the runs, prints the top ones and
/// writes the Chrome trace. False after an error (printed).
static bool profile(const RunOptions &o, kiln::Model &model,
                    const std::vector<kiln::ValueView> &views) {
  long runs = o.bench > 0 ? o.bench : 10;
  std::vector<kiln::Value> scratch;
  (void)model.run(views, scratch); // warm: caches, pool threads awake
  kiln_profiler *profiler = kiln_profiler_create();
  if (!profiler) {
    std::fprintf(stderr, "kiln-run: error: out of memory\n");
    return false;
  }
  kiln_profiler *previous = kiln_profiler_attach(profiler);
  for (long r = 0; r < runs; ++r)
    if (kiln::Status st = model.run(views, scratch); !st.ok()) {
      kiln_profiler_attach(previous);
      kiln_profiler_free(profiler);
      std::fprintf(stderr, "kiln-run: error: %s\n", st.message.c_str());
      return false;
    }
  kiln_profiler_attach(previous);
  printProfileReport(profiler, runs, 20, stdout);
  kiln_status *ws = kiln_profiler_write_chrome_trace(profiler, o.profilePath.c_str());
  kiln_profiler_free(profiler);
  if (ws) {
    std::fprintf(stderr, "kiln-run: error: %s\n", kiln_status_message(ws));
    kiln_status_free(ws);
    return false;
  }
  std::printf("profile: wrote %s\n", o.profilePath.c_str());
  return true;
}

static int kilnRunMain(int argc, char **argv) {
  RunOptions o;
  if (int status = parseRunOptions(argc, argv, o); status >= 0)
    return status;
  if (kiln::InvocationLog *log = kiln::InvocationLog::current())
    log->model(o.modelPath);
  showProgressOnTerminal(o.compile);

  auto t0 = Clock::now();
  std::string err;
  auto model = kiln::Model::load(o.modelPath, o.compile, &err);
  if (!model) {
    std::fprintf(stderr, "kiln-run: error: %s\n", err.c_str());
    return 1;
  }
  auto tLoaded = Clock::now();
  std::vector<kiln::Value> inputs;
  std::vector<kiln::ValueView> views;
  if (int status = gatherInputs(o, *model, inputs, views); status >= 0)
    return status;

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
              o.modelPath.c_str(), ms(tLoaded - t0), ms(tCompiled - tLoaded),
              ms(tRan - tCompiled),
              !o.compile.cache ? "off" : model->stats().cacheHits ? "hit" : "miss");
  if (o.compile.tune)
    std::printf("tuning: %s\n", model->stats().tuning.empty()
                                     ? "none this time (the compiled code came from the cache)"
                                     : model->stats().tuning.c_str());

  int status = reportOutputs(o, *model, outputs);
  if (status < 0)
    return 1;
  if (o.bench > 0 && !benchmark(o, *model, views, ms(tCompiled - tLoaded)))
    return 1;
  int found = diagnose(o, views);
  if (found < 0)
    return 1;
  status = std::max(status, found);
  if (!o.profilePath.empty() && !profile(o, *model, views))
    return 1;
  if (!o.checkDir.empty())
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
