#include "KernelTuning.h"
#include "CompileCache.h"
#include "Driver.h"

#include "kiln/Conversion/KernelCalls.h"
#include "kiln/Pipelines/Pipelines.h"
#include "kiln/Target/KernelLibrary.h"
#include "kiln/kernels.h"
#include "kiln/runtime.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/Triple.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>

namespace kiln {

namespace {

using ConvKernel = void (*)(kiln_kernel_addr params, kiln_kernel_addr in, kiln_kernel_addr w,
                            kiln_kernel_addr bias, kiln_kernel_addr residual,
                            kiln_kernel_addr out, float lo, float hi, kiln_kernel_i64 inStride,
                            kiln_kernel_i64 outStride);

constexpr int64_t kBaselineSamples = 100;
/// Timing one layer stops sampling after about this long (a layer of a
/// large batch takes tens of milliseconds a call): its budget in samples
/// shrinks to fit, never below the race's minimum.
constexpr double kLayerSeconds = 2.0;
/// A sample is the median of this many calls: one preempted call then
/// moves no sample.
constexpr int kCallsPerSample = 3;

kiln_conv2d_params paramsOf(const int64_t (&fields)[17]) {
  static_assert(sizeof(kiln_conv2d_params) == 17 * sizeof(int64_t), "the kernel's block");
  kiln_conv2d_params p;
  std::memcpy(&p, fields, sizeof p);
  return p;
}

/// What decides the items a schedule gives and their order: schedules
/// with the same key run the same code.
struct ScheduleKey {
  int64_t blockRows;
  int order; // 1 pixel-major, 0 panel-major, -1 either (the same items)
  bool operator==(const ScheduleKey &o) const {
    return blockRows == o.blockRows && order == o.order;
  }
};

ScheduleKey scheduleKey(kiln_conv2d_params p, int64_t schedule) {
  p.flags |= schedule;
  kiln_conv2d_schedule s = kiln_conv2d_schedule_of(&p);
  // One block: both orders give (image, group, panel) items alike. One
  // panel of one group: both give (image, block).
  int64_t panels = (p.oc / p.groups + KILN_KERNEL_PANEL - 1) / KILN_KERNEL_PANEL;
  if (s.blocks == 1)
    return {0, -1};
  return {s.block_rows, panels * p.groups > 1 ? s.pixel_major : -1};
}

/// 64-byte aligned floats, as the workspace gives the kernels.
struct Buffer {
  float *data = nullptr;
  explicit Buffer(int64_t count, uint32_t seed) {
    size_t bytes = ((size_t)std::max<int64_t>(count, 1) * 4 + 63) / 64 * 64;
    data = static_cast<float *>(std::aligned_alloc(64, bytes));
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (int64_t i = 0; i < count; ++i)
      data[i] = u(rng);
  }
  ~Buffer() { std::free(data); }
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;
  kiln_kernel_addr addr() const { return (kiln_kernel_addr)data; }
};

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// Races a convolution layer's candidates on this machine.
TunedLayer tuneConvLayer(const std::string &name, const int64_t (&fields)[17], ConvKernel kernel,
                         const RaceOptions &options) {
  TunedLayer result;
  result.layer = name;
  kiln_conv2d_params p = paramsOf(fields);
  p.flags &= ~(int64_t)KILN_CONV_SCHEDULE_BITS;
  std::vector<int64_t> candidates = convScheduleCandidates(fields);
  result.candidates = (int)candidates.size();
  if (candidates.size() < 2)
    return result;
  int64_t cg = p.c / p.groups, panels = (p.oc / p.groups + KILN_KERNEL_PANEL - 1) / KILN_KERNEL_PANEL;
  Buffer in(p.n * p.h * p.w * p.c, 1);
  Buffer weights(p.groups * panels * KILN_KERNEL_PANEL * p.kh * p.kw * cg, 2);
  Buffer bias(p.groups * panels * KILN_KERNEL_PANEL, 3);
  Buffer out(p.n * p.oh * p.ow * p.oc, 4);
  Buffer residual(p.flags & KILN_CONV_HAS_RESIDUAL ? p.n * p.oh * p.ow * p.oc : 0, 5);
  std::vector<kiln_conv2d_params> blocks(candidates.size(), p);
  for (size_t i = 0; i < candidates.size(); ++i)
    blocks[i].flags |= candidates[i];
  auto call = [&](size_t i) {
    kernel((kiln_kernel_addr)&blocks[i], in.addr(), weights.addr(), bias.addr(),
           residual.addr(), out.addr(), -INFINITY, INFINITY, p.c, p.oc);
  };
  // Warm up (pages touched, weights in cache as a run's would be) and size
  // the budget.
  auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < candidates.size(); ++i)
    call(i);
  double perCall = std::max(secondsSince(start) / candidates.size(), 1e-7);
  RaceOptions race = options;
  int fits = (int)std::min(1e6, kLayerSeconds / (perCall * kCallsPerSample * candidates.size()));
  race.maxSamples = std::clamp(fits, options.minSamples, options.maxSamples);
  RaceResult r = raceCandidates(
      (int)candidates.size(), 0,
      [&](int i) {
        double t[kCallsPerSample];
        for (double &each : t) {
          auto s = std::chrono::steady_clock::now();
          call(i);
          each = secondsSince(s);
        }
        std::sort(t, t + kCallsPerSample);
        return t[kCallsPerSample / 2];
      },
      race);
  for (size_t i = 0; i < candidates.size(); ++i)
    result.raced.push_back({candidates[i], r.means[i], r.samples[i]});
  result.schedule = candidates[r.winner];
  result.separated = r.separated;
  result.samples = r.totalSamples;
  result.calls = (int64_t)r.totalSamples * kCallsPerSample + (int64_t)candidates.size();
  result.defaultSeconds = r.means[0];
  result.chosenSeconds = r.means[r.winner];
  return result;
}

std::string layerCacheKey(const std::string &layer, const llvm::TargetMachine &tm,
                          const std::string &kernelName, int threads, const RaceOptions &o) {
  CacheKey key;
  key.add("kiln-tune-1").add(compilerIdentity()).add(version());
  key.add(tm.getTargetCPU().str()).add(tm.getTargetFeatureString().str()).add(kernelName);
  key.add(threads).add(layer);
  key.add(std::to_string(o.delta)).add(std::to_string(o.epsilon)).add(o.maxSamples);
  return key.digest();
}

std::string serialize(const TunedLayer &t) {
  PayloadWriter w;
  w.bytes(t.layer);
  w.u64((uint64_t)t.schedule);
  w.u64(t.separated ? 1 : 0);
  w.u64((uint64_t)t.candidates);
  uint64_t bits;
  std::memcpy(&bits, &t.defaultSeconds, 8);
  w.u64(bits);
  std::memcpy(&bits, &t.chosenSeconds, 8);
  w.u64(bits);
  return w.out;
}

bool deserialize(std::string_view payload, TunedLayer &t) {
  PayloadReader r(payload);
  std::string layer(r.bytes());
  t.schedule = (int64_t)r.u64();
  t.separated = r.u64() != 0;
  t.candidates = (int)r.u64();
  uint64_t bits = r.u64();
  std::memcpy(&t.defaultSeconds, &bits, 8);
  bits = r.u64();
  std::memcpy(&t.chosenSeconds, &bits, 8);
  return r.ok && r.pos == payload.size() && layer == t.layer &&
         (t.schedule & ~(int64_t)KILN_CONV_SCHEDULE_BITS) == 0;
}

} // namespace

std::vector<int64_t> convScheduleCandidates(const int64_t (&fields)[17]) {
  kiln_conv2d_params p = paramsOf(fields);
  p.flags &= ~(int64_t)KILN_CONV_SCHEDULE_BITS;
  std::vector<int64_t> candidates{0};
  std::vector<ScheduleKey> seen{scheduleKey(p, 0)};
  for (int64_t blocks : {0, KILN_CONV_HALF_BLOCKS, KILN_CONV_DOUBLE_BLOCKS})
    for (int64_t order : {KILN_CONV_PIXEL_MAJOR, KILN_CONV_PANEL_MAJOR}) {
      ScheduleKey key = scheduleKey(p, blocks | order);
      if (std::find(seen.begin(), seen.end(), key) != seen.end())
        continue;
      seen.push_back(key);
      candidates.push_back(blocks | order);
    }
  return candidates;
}

std::string TuningReport::summary() const {
  int cached = 0, changed = 0;
  double before = 0, after = 0;
  for (const TunedLayer &t : layers) {
    cached += t.cached;
    changed += t.schedule != 0;
    before += t.defaultSeconds;
    after += t.chosenSeconds;
  }
  char text[400];
  std::snprintf(text, sizeof text,
                "tuned %zu layers (%d from the cache) in %.1f s: %d changed, est. %.2f ms "
                "(%.0f %%) less per run of them; %lld samples (%lld kernel calls), %.0f %% "
                "of the %lld of %lld samples per candidate",
                layers.size(), cached, seconds, changed, (before - after) * 1e3,
                before > 0 ? 100 * (before - after) / before : 0.0, (long long)samples,
                (long long)calls, baselineSamples ? 100.0 * samples / baselineSamples : 0.0,
                (long long)baselineSamples, (long long)kBaselineSamples);
  std::string out = text;
  for (const TunedLayer &t : layers) {
    char line[400];
    std::snprintf(line, sizeof line,
                  "\n  %s: %d candidates, %s, schedule %lld (%s), %.3f -> %.3f ms",
                  t.layer.c_str(), t.candidates,
                  t.cached ? "cached" : (std::to_string(t.samples) + " samples").c_str(),
                  (long long)t.schedule, t.separated ? "separated" : "equivalent",
                  t.defaultSeconds * 1e3, t.chosenSeconds * 1e3);
    out += line;
    for (size_t i = 0; i < t.raced.size(); ++i) {
      std::snprintf(line, sizeof line, "%s%lld: %.4f ms x %d", i ? ", " : "; raced ",
                    (long long)t.raced[i].schedule, t.raced[i].seconds * 1e3, t.raced[i].samples);
      out += line;
    }
  }
  return out;
}

Status tuneModuleKernels(mlir::ModuleOp module, const LoweringOptions &options,
                         const llvm::TargetMachine &tm, int threads, const CompileCache *cache,
                         const RaceOptions &race, TuningReport &report) {
  auto start = std::chrono::steady_clock::now();
  if (threads < 1)
    threads = kiln_default_num_threads();
  mlir::OwningOpRef<mlir::ModuleOp> probe(module.clone());
  if (Status s = lower(*probe, LowerTo::Linalg, options); !s.ok())
    return s;
  // The tunable layers, each once, in the order the model calls them.
  std::vector<std::string> listed;
  (*probe)->walk([&](mlir::Operation *op) {
    if (auto name = op->getAttrOfType<mlir::StringAttr>(codegen::kKernelLayerAttr))
      if (std::find(listed.begin(), listed.end(), name.str()) == listed.end())
        listed.push_back(name.str());
  });
  probe = nullptr;
  if (listed.empty())
    return {};
  const char *kernelName = "kiln_conv2d_nhwc_f32";
  auto kernel = reinterpret_cast<ConvKernel>(hostKernelAddress(kernelName, tm));
  if (!kernel)
    return Status::error(KILN_COMPILE_ERROR,
                         "--tune: the runtime has no " + std::string(kernelName) +
                             " this machine can run for the target CPU '" +
                             tm.getTargetCPU().str() + "'; tuning needs the host as the target");
  // Timed as a run would call them, on `threads` threads, of a pool of
  // the tuner's own: the runtime's shared one may be busy with another
  // thread's runs, and kiln_parallel_for would then run the layer serially.
  std::unique_ptr<kiln_thread_pool, void (*)(kiln_thread_pool *)> pool(
      threads > 1 ? kiln_thread_pool_create(threads) : nullptr, kiln_thread_pool_free);
  kiln_thread_pool *previous = kiln_thread_pool_attach(pool.get());
  mlir::Builder b(module.getContext());
  llvm::SmallVector<mlir::NamedAttribute> choices;
  for (const std::string &name : listed) {
    int64_t fields[17];
    if (!codegen::parseConvLayerName(name, fields))
      continue;
    std::string key = layerCacheKey(name, tm, kernelName, threads, race);
    TunedLayer t;
    t.layer = name;
    std::shared_ptr<llvm::MemoryBuffer> entry;
    std::string_view payload;
    if (cache && cache->load(key, entry, payload, CompileCache::Kind::Tuning) &&
        deserialize(payload, t)) {
      t.cached = true;
    } else {
      t = tuneConvLayer(name, fields, kernel, race);
      report.samples += t.samples;
      report.calls += t.calls;
      if (t.candidates > 1) // a layer with one candidate is not raced
        report.baselineSamples += kBaselineSamples * t.candidates;
      if (cache)
        cache->store(key, serialize(t), CompileCache::Kind::Tuning);
    }
    if (t.schedule != 0)
      choices.push_back(b.getNamedAttr(name, b.getI64IntegerAttr(t.schedule)));
    report.layers.push_back(std::move(t));
  }
  kiln_thread_pool_attach(previous);
  if (!choices.empty())
    module->setAttr(codegen::kKernelChoicesAttr, b.getDictionaryAttr(choices));
  report.seconds = secondsSince(start);
  return {};
}

Status checkTuneOptions(const EmitOptions &options) {
  if (!options.tune)
    return {};
  if (options.gpuTensorPassesOnCpu)
    return Status::error(KILN_INVALID_ARGUMENT,
                         "--tune tunes the CPU kernels, which the GPU tensor passes do not call");
  if (options.kind != EmitKind::LLVMIR && options.kind != EmitKind::Assembly &&
      options.kind != EmitKind::Object && options.kind != EmitKind::Bundle)
    return Status::error(KILN_INVALID_ARGUMENT,
                         "--tune applies to compiled CPU code (--emit=llvm, asm, obj or bundle)");
  bool host = (options.triple.empty() ||
               llvm::Triple(options.triple).normalize() ==
                   llvm::Triple(llvm::sys::getDefaultTargetTriple()).normalize()) &&
              (options.cpu.empty() || options.cpu == "host");
  if (!host)
    return Status::error(KILN_INVALID_ARGUMENT,
                         "--tune times the kernels on this machine: compile for it (no "
                         "--target or --mcpu other than host)");
  if (options.tuneThreads < 0)
    return Status::error(KILN_INVALID_ARGUMENT,
                         "the tuning thread count must be 0 (physical cores) or more");
  return {};
}

Status tuneForEmit(mlir::ModuleOp module, const LoweringOptions &lowering,
                   const llvm::TargetMachine &tm, const EmitOptions &options,
                   StageClock &clock) {
  if (!options.tune)
    return {};
  if (Status s = checkTuneOptions(options); !s.ok())
    return s;
  std::unique_ptr<CompileCache> cache;
  if (options.cache)
    cache = std::make_unique<CompileCache>(options.cacheDir);
  TuningReport report;
  if (Status s = tuneModuleKernels(module, lowering, tm, options.tuneThreads, cache.get(),
                                   RaceOptions(), report);
      !s.ok())
    return s;
  clock.done("tune kernels: " + report.summary());
  return {};
}

} // namespace kiln
