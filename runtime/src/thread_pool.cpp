// The runtime's thread pool: compiled code hands the outer parallel tiles of
// its kernels to kiln_parallel_for, which splits them across the pool of
// the thread that runs the model.
//
// Design: one job at a time per pool. The caller publishes the job (fields,
// then a generation bump with release order), works on it itself, then
// waits until every worker has left it. Each thread owns one part of the
// range (a static split, for cache locality across layers) and claims it
// in steps from its own cursor; a thread done with its part takes the
// remaining steps of the others' (work stealing, for a core that another
// process slows down). No locks, no allocation per call. Workers
// spin on the generation for a while after each job (a model runs its
// kernels back to back, microseconds apart) and then sleep on a condition
// variable, so an idle pool costs no CPU. A kiln_parallel_for inside a task,
// or on a pool another thread is using, runs serially instead of waiting.
#include "kiln/runtime.h"

#include "profile_internal.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <new>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#ifdef __linux__
#include <sched.h>
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
static inline void cpuRelax() { _mm_pause(); }
#elif defined(__aarch64__)
static inline void cpuRelax() { asm volatile("yield"); }
#else
static inline void cpuRelax() {}
#endif

namespace {
// About a millisecond of polling before a worker sleeps.
constexpr int kSpinIterations = 1 << 14;

thread_local kiln_thread_pool *attachedPool = nullptr;
// Set while this thread runs tasks of a job: nested loops run serially.
thread_local bool inTask = false;
} // namespace

struct kiln_thread_pool {
  int32_t size = 1; // threads, the caller included
  std::vector<std::thread> workers;

  std::atomic<uint64_t> generation{0};
  std::atomic<bool> stopping{false};
  std::atomic_flag busy = ATOMIC_FLAG_INIT;

  // The current job; written before `generation` is bumped.
  kiln_task_fn fn = nullptr;
  void *ctx = nullptr;
  int64_t count = 0, chunk = 1;
  std::atomic<int32_t> working{0}; // workers not yet done with the job
  // The caller's profiler: each thread records the slice it ran.
  kiln_rt::ProfileContext profile;

  std::mutex mutex;
  std::condition_variable wake;
  std::atomic<int32_t> sleepers{0};

  // One claim cursor per thread, each on its own cache line.
  struct alignas(64) Cursor {
    std::atomic<int64_t> next{0};
  };
  Cursor *cursors = nullptr;
  int64_t step = 1;

  /// Thread `self` (0: the caller) runs its own part of the range, then
  /// whatever is left of the others'. The split is static: consecutive
  /// kernels give each thread the same part of the tensors (the same
  /// pixels, the same rows), which stay in that core's cache from one layer
  /// to the next. Purely dynamic claiming took 20-60 % longer on
  /// MobileNet-v2, whose layers are small enough to live in cache; a purely
  /// static split waits for the slowest core, and on a shared machine one
  /// core is often slowed by another tenant (MobileNet-v2 at two threads
  /// was then no faster than at one).
  void drain(int32_t owner) {
    int64_t end = std::min(count, (owner + 1) * chunk);
    for (;;) {
      int64_t begin = cursors[owner].next.fetch_add(step, std::memory_order_relaxed);
      if (begin >= end)
        return;
      fn(ctx, begin, std::min(end, begin + step));
    }
  }
  void runChunk(int32_t self) {
    inTask = true;
    int64_t begin = profile.profiler ? kiln_rt::profileClockNs() : 0;
    for (int32_t i = 0; i < size; ++i)
      drain((self + i) % size);
    if (profile.profiler)
      kiln_rt::recordProfileSlice(profile, begin, kiln_rt::profileClockNs(), self);
    inTask = false;
  }
  void workerLoop(int32_t self) {
    uint64_t seen = 0;
    for (;;) {
      uint64_t g = generation.load(std::memory_order_acquire);
      for (int i = 0; g == seen && i < kSpinIterations; ++i) {
        cpuRelax();
        g = generation.load(std::memory_order_acquire);
      }
      if (g == seen) {
        std::unique_lock<std::mutex> lock(mutex);
        sleepers.fetch_add(1, std::memory_order_seq_cst);
        // seq_cst, paired with run()'s bump and sleepers read: a weaker
        // load could miss the job while run() misses this sleeper.
        wake.wait(lock, [&] {
          return generation.load(std::memory_order_seq_cst) != seen ||
                 stopping.load(std::memory_order_acquire);
        });
        sleepers.fetch_sub(1, std::memory_order_relaxed);
        g = generation.load(std::memory_order_acquire);
      }
      if (stopping.load(std::memory_order_acquire))
        return;
      seen = g;
      runChunk(self);
      working.fetch_sub(1, std::memory_order_release);
    }
  }

  void run(int64_t n, int64_t grain, kiln_task_fn f, void *c) {
    fn = f;
    ctx = c;
    count = n;
    profile = kiln_rt::currentProfileContext();
    // One chunk per thread (see runChunk), of at least `grain` items; with
    // a large grain the last threads get none.
    int64_t perThread = (n + size - 1) / size;
    chunk = std::max<int64_t>(std::max<int64_t>(grain, 1), perThread);
    // Steps of an eighth of a part: small enough to even out a slow core,
    // large enough that the owner's claims cost nothing next to the work.
    step = std::max<int64_t>(std::max<int64_t>(grain, 1), (chunk + 7) / 8);
    for (int32_t t = 0; t < size; ++t)
      cursors[t].next.store(std::min(count, t * chunk), std::memory_order_relaxed);
    working.store((int32_t)workers.size(), std::memory_order_relaxed);
    generation.fetch_add(1, std::memory_order_seq_cst);
    if (sleepers.load(std::memory_order_seq_cst) > 0) {
      std::lock_guard<std::mutex> lock(mutex);
      wake.notify_all();
    }
    runChunk(0);
    // Workers normally finish within microseconds of the caller; if one was
    // descheduled, stop burning the core it may need.
    for (int spins = 0; working.load(std::memory_order_acquire) != 0; ++spins) {
      if (spins < kSpinIterations)
        cpuRelax();
      else
        std::this_thread::yield();
    }
  }
};

extern "C" {

int32_t kiln_default_num_threads(void) {
  // Physical cores this process may run on: SMT siblings share one core's
  // FMA units, which the kernels already keep busy, and CPUs outside the
  // affinity mask (taskset, a pinned container) would only time-share.
  std::set<std::pair<int, int>> cores;
  unsigned logical = std::max(1u, std::thread::hardware_concurrency());
  std::vector<unsigned> cpus;
#ifdef __linux__
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0) {
    for (unsigned cpu = 0; cpu < CPU_SETSIZE; ++cpu)
      if (CPU_ISSET(cpu, &allowed))
        cpus.push_back(cpu);
    logical = std::max<unsigned>(1, (unsigned)cpus.size());
  }
#endif
  if (cpus.empty())
    for (unsigned cpu = 0; cpu < logical; ++cpu)
      cpus.push_back(cpu);
  for (unsigned cpu : cpus) {
    std::string base = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    int package = -1, core = -1;
    for (auto [file, value] : {std::pair<const char *, int *>{"physical_package_id", &package},
                               std::pair<const char *, int *>{"core_id", &core}}) {
      if (FILE *f = std::fopen((base + file).c_str(), "r")) {
        if (std::fscanf(f, "%d", value) != 1)
          *value = -1;
        std::fclose(f);
      }
    }
    if (package < 0 || core < 0)
      return (int32_t)logical;
    cores.insert({package, core});
  }
  return cores.empty() ? (int32_t)logical : (int32_t)cores.size();
}

kiln_thread_pool *kiln_thread_pool_create(int32_t numThreads) {
  if (numThreads <= 0)
    numThreads = kiln_default_num_threads();
  auto *pool = new (std::nothrow) kiln_thread_pool;
  if (!pool)
    return nullptr;
  pool->size = numThreads;
  pool->cursors = new (std::nothrow) kiln_thread_pool::Cursor[numThreads];
  if (!pool->cursors) {
    delete pool;
    return nullptr;
  }
  try {
    for (int32_t i = 1; i < numThreads; ++i)
      pool->workers.emplace_back([pool, i] { pool->workerLoop(i); });
  } catch (...) {
    pool->size = (int32_t)pool->workers.size() + 1;
  }
  return pool;
}

void kiln_thread_pool_free(kiln_thread_pool *pool) {
  if (!pool)
    return;
  {
    std::lock_guard<std::mutex> lock(pool->mutex);
    pool->stopping.store(true, std::memory_order_release);
    pool->generation.fetch_add(1, std::memory_order_seq_cst);
  }
  pool->wake.notify_all();
  for (std::thread &t : pool->workers)
    t.join();
  delete[] pool->cursors;
  delete pool;
}

int32_t kiln_thread_pool_size(const kiln_thread_pool *pool) { return pool ? pool->size : 1; }

kiln_thread_pool *kiln_thread_pool_attach(kiln_thread_pool *pool) {
  kiln_thread_pool *previous = attachedPool;
  attachedPool = pool;
  return previous;
}

kiln_thread_pool *kiln_default_thread_pool(void) {
  // Never freed: workers of a static pool would be joined after main
  // returns, when other static objects may be gone.
  static kiln_thread_pool *pool = kiln_thread_pool_create(0);
  return pool;
}

void kiln_parallel_for(int64_t n, int64_t grain, kiln_task_fn fn, void *ctx) {
  if (n <= 0)
    return;
  kiln_thread_pool *pool = attachedPool;
  if (!pool || pool->size <= 1 || inTask || n <= std::max<int64_t>(grain, 1) ||
      pool->busy.test_and_set(std::memory_order_acquire)) {
    fn(ctx, 0, n);
    return;
  }
  pool->run(n, grain, fn, ctx);
  pool->busy.clear(std::memory_order_release);
}

} // extern "C"
