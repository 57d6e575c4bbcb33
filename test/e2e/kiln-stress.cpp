// Concurrency stress: many threads running one model, several models at
// once, and JIT compiles of new shapes while others run, all with the thread
// pool on. Every result must be bit-identical to the model's first run on
// one thread (the kernels' split across threads never changes a sum's
// order), and under ASan/TSan the run must be clean.
//
//   kiln-stress [--threads T] [--runs R] [--pool N] MODEL_DIR...
//
// MODEL_DIR holds model.onnx and test_data_set_0/input_J.pb.
#include "kiln/Kiln.h"
#include "kiln/TensorIO.h"

#include "llvm/Support/InitLLVM.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

namespace fs = std::filesystem;

namespace {

struct Loaded {
  std::string name;
  std::unique_ptr<kiln::Model> model;
  std::vector<kiln::Value> inputs;
  std::vector<kiln::ValueView> views;
  std::vector<kiln::Value> expected; // single-threaded
};

bool sameBits(const std::vector<kiln::Value> &a, const std::vector<kiln::Value> &b) {
  if (a.size() != b.size())
    return false;
  for (size_t k = 0; k < a.size(); ++k) {
    if (a[k].tensors.size() != b[k].tensors.size())
      return false;
    for (size_t e = 0; e < a[k].tensors.size(); ++e) {
      const kiln::Tensor &x = a[k].tensors[e], &y = b[k].tensors[e];
      if (x.dtype() != y.dtype() || x.dims() != y.dims() ||
          std::memcmp(x.data(), y.data(), kiln_tensor_num_bytes(x.get())) != 0)
        return false;
    }
  }
  return true;
}

bool load(const fs::path &dir, int poolThreads, Loaded &out) {
  out.name = dir.filename().string();
  std::string err;
  kiln::CompileOptions serial;
  serial.numThreads = 1;
  auto reference = kiln::Model::load((dir / "model.onnx").string(), serial, &err);
  kiln::CompileOptions pooled;
  pooled.numThreads = poolThreads;
  out.model = kiln::Model::load((dir / "model.onnx").string(), pooled, &err);
  if (!reference || !out.model) {
    std::fprintf(stderr, "kiln-stress: %s: %s\n", dir.c_str(), err.c_str());
    return false;
  }
  for (size_t j = 0; j < out.model->inputs().size(); ++j) {
    kiln::Value v;
    fs::path p = dir / "test_data_set_0" / ("input_" + std::to_string(j) + ".pb");
    if (kiln::Status s = kiln::readValueFile(p.string(), out.model->inputs()[j], v); !s.ok()) {
      std::fprintf(stderr, "kiln-stress: %s: %s\n", p.c_str(), s.message.c_str());
      return false;
    }
    out.inputs.push_back(std::move(v));
  }
  for (kiln::Value &v : out.inputs) {
    kiln::ValueView view{v.kind, {}};
    for (kiln::Tensor &t : v.tensors)
      view.tensors.push_back(t.get());
    out.views.push_back(std::move(view));
  }
  if (kiln::Status s = reference->run(out.views, out.expected); !s.ok()) {
    std::fprintf(stderr, "kiln-stress: %s: %s\n", out.name.c_str(), s.message.c_str());
    return false;
  }
  return true;
}

} // namespace

int main(int argc, char **argv) {
  // A crash prints its stack (LLVM's signal handler), and each phase's line
  // is out before the next phase starts: a rare failure in CI is then
  // diagnosable from the log alone.
  llvm::InitLLVM init(argc, argv);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  // A compile cache of its own, empty: a model whose shapes are only known
  // at its first run (encoder4's sequence axis) then compiles during phase
  // 2, on the workers, concurrently with the fresh compiles, every time
  // (with a warm cache those were cache hits, which hid a use-after-free of
  // a JIT compile's invocation log taken by another thread's compile).
  char cacheDir[] = "/tmp/kiln-stress-cache-XXXXXX";
  if (!mkdtemp(cacheDir)) {
    std::perror("kiln-stress: mkdtemp");
    return 1;
  }
  setenv("KILN_CACHE_DIR", cacheDir, 1);
  struct RemoveCache {
    const char *dir;
    ~RemoveCache() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } removeCache{cacheDir};
  int threads = 8, runs = 1000, pool = 2;
  std::vector<fs::path> dirs;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if ((a == "--threads" || a == "--runs" || a == "--pool") && i + 1 < argc) {
      int v = std::atoi(argv[++i]);
      if (v < 1) {
        std::fprintf(stderr, "kiln-stress: %s needs a positive number\n", a.c_str());
        return 2;
      }
      (a == "--threads" ? threads : a == "--runs" ? runs : pool) = v;
    } else if (!a.empty() && a[0] != '-') {
      dirs.push_back(a);
    } else {
      std::fprintf(stderr, "usage: kiln-stress [--threads T] [--runs R] [--pool N] MODEL_DIR...\n");
      return 2;
    }
  }
  if (dirs.empty()) {
    std::fprintf(stderr, "kiln-stress: no model folders\n");
    return 2;
  }
  std::vector<Loaded> models(dirs.size());
  for (size_t m = 0; m < dirs.size(); ++m)
    if (!load(dirs[m], pool, models[m]))
      return 1;

  // Phase 1: `threads` threads on the first model, `runs` runs each.
  // Phase 2: the same threads spread over all models, while one more thread
  // compiles each model afresh (a new Model, so a new JIT compile) and runs it.
  std::atomic<long> mismatches{0}, errors{0}, done{0};
  auto worker = [&](size_t first, bool spread, int t) {
    std::vector<kiln::Value> got;
    for (int r = 0; r < runs; ++r) {
      Loaded &m = models[spread ? (first + t + r) % models.size() : first];
      if (kiln::Status s = m.model->run(m.views, got); !s.ok()) {
        if (errors++ < 5)
          std::fprintf(stderr, "kiln-stress: %s: %s\n", m.name.c_str(), s.message.c_str());
        continue;
      }
      if (!sameBits(got, m.expected))
        ++mismatches;
      ++done;
    }
  };
  for (int phase = 0; phase < 2; ++phase) {
    auto start = std::chrono::steady_clock::now();
    long before = done;
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t)
      ts.emplace_back(worker, 0, phase == 1, t);
    std::atomic<int> compiled{0};
    if (phase == 1)
      ts.emplace_back([&] {
        for (const fs::path &dir : dirs) {
          Loaded fresh;
          kiln::CompileOptions opts;
          opts.cache = false;
          std::string err;
          auto model = kiln::Model::load((dir / "model.onnx").string(), opts, &err);
          Loaded &ref = models[&dir - &dirs[0]];
          std::vector<kiln::Value> got;
          if (!model || !model->run(ref.views, got).ok()) {
            ++errors;
            continue;
          }
          if (!sameBits(got, ref.expected))
            ++mismatches;
          ++compiled;
        }
      });
    for (std::thread &t : ts)
      t.join();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("phase %d: %d threads x %d runs (%s), pool of %d per model: %ld runs in %.1f s, "
                "%ld mismatches, %ld errors%s\n",
                phase + 1, threads, runs,
                phase == 0 ? models[0].name.c_str() : "all models, plus a JIT compile of each",
                pool, done - before, s, mismatches.load(), errors.load(),
                phase == 1 ? (", " + std::to_string(compiled.load()) + " fresh compiles").c_str()
                           : "");
  }
  bool ok = mismatches == 0 && errors == 0;
  std::printf("%s\n", ok ? "stress: all results bit-identical to single-threaded runs"
                         : "stress: FAILED");
  return ok ? 0 : 1;
}
