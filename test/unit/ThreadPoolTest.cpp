// The runtime's thread pool and kiln_parallel_for, without the compiler:
// every index is covered exactly once whatever the pool, chunking and
// nesting; work really spreads over threads; and concurrent model runs that
// share one pool stay correct.
#include "kiln/runtime.h"
#include "kiln/profile.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace {

struct PoolDeleter {
  void operator()(kiln_thread_pool *p) const { kiln_thread_pool_free(p); }
};
using PoolPtr = std::unique_ptr<kiln_thread_pool, PoolDeleter>;

/// Attaches a pool to the calling thread for one scope.
struct Attach {
  kiln_thread_pool *previous;
  explicit Attach(kiln_thread_pool *pool) : previous(kiln_thread_pool_attach(pool)) {}
  ~Attach() { kiln_thread_pool_attach(previous); }
};

struct Coverage {
  std::vector<std::atomic<int>> hits;
  explicit Coverage(int64_t n) : hits(n) {}
  static void task(void *ctx, int64_t begin, int64_t end) {
    auto *c = static_cast<Coverage *>(ctx);
    for (int64_t i = begin; i < end; ++i)
      c->hits[i].fetch_add(1);
  }
  void expectEachOnce() {
    for (size_t i = 0; i < hits.size(); ++i)
      ASSERT_EQ(hits[i].load(), 1) << "index " << i;
  }
};

/// Records which threads ran a task, and its ranges; each item busy-waits
/// `perItem` (long enough, in WorkSpreadsOverThreads, that a sleeping
/// worker wakes while the caller still has work).
struct ThreadLog {
  std::chrono::microseconds perItem{0};
  std::mutex m;
  std::set<std::thread::id> threads;
  std::vector<std::pair<int64_t, int64_t>> ranges;
  static void task(void *ctx, int64_t begin, int64_t end) {
    auto *log = static_cast<ThreadLog *>(ctx);
    {
      std::lock_guard<std::mutex> lock(log->m);
      log->threads.insert(std::this_thread::get_id());
      log->ranges.emplace_back(begin, end);
    }
    auto until = std::chrono::steady_clock::now() + log->perItem * (end - begin);
    while (std::chrono::steady_clock::now() < until) {
    }
  }
};

TEST(ThreadPool, DefaultThreadCountIsPositive) {
  EXPECT_GE(kiln_default_num_threads(), 1);
  EXPECT_EQ(kiln_thread_pool_size(kiln_default_thread_pool()), kiln_default_num_threads());
}

TEST(ThreadPool, EveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 4}) {
    PoolPtr pool(kiln_thread_pool_create(threads));
    ASSERT_TRUE(pool);
    EXPECT_EQ(kiln_thread_pool_size(pool.get()), threads);
    Attach attach(pool.get());
    for (int64_t n : {1, 2, 7, 64, 1000, 4099})
      for (int64_t grain : {0, 1, 3, 100, 5000}) {
        Coverage c(n);
        kiln_parallel_for(n, grain, Coverage::task, &c);
        c.expectEachOnce();
      }
  }
}

TEST(ThreadPool, WithoutAPoolRunsSerially) {
  Attach attach(nullptr);
  ThreadLog log;
  kiln_parallel_for(100, 1, ThreadLog::task, &log);
  EXPECT_EQ(log.threads.size(), 1u);
  EXPECT_TRUE(log.threads.count(std::this_thread::get_id()));
  ASSERT_EQ(log.ranges.size(), 1u);
  EXPECT_EQ(log.ranges[0].first, 0);
  EXPECT_EQ(log.ranges[0].second, 100);
}

TEST(ThreadPool, WorkSpreadsOverThreads) {
  PoolPtr pool(kiln_thread_pool_create(2));
  Attach attach(pool.get());
  // Let the worker fall asleep first: waking it must work too.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ThreadLog log;
  log.perItem = std::chrono::microseconds(200);
  kiln_parallel_for(64, 1, ThreadLog::task, &log);
  EXPECT_EQ(log.threads.size(), 2u);
}

// A thread slowed down (here the caller, whose items are slow) does not
// hold up the loop: the others take the rest of its part once theirs is
// done. Part 0 is [0, 16) of 64 items over four threads.
struct SlowCaller {
  std::thread::id caller = std::this_thread::get_id();
  std::vector<std::atomic<int>> otherThread = std::vector<std::atomic<int>>(64);
  static void task(void *ctx, int64_t begin, int64_t end) {
    auto *s = static_cast<SlowCaller *>(ctx);
    bool isCaller = std::this_thread::get_id() == s->caller;
    for (int64_t i = begin; i < end; ++i) {
      s->otherThread[i].store(isCaller ? 0 : 1);
      if (isCaller)
        std::this_thread::sleep_for(std::chrono::milliseconds(3));
    }
  }
};

TEST(ThreadPool, IdleThreadsTakeOverASlowThreadsPart) {
  PoolPtr pool(kiln_thread_pool_create(4));
  Attach attach(pool.get());
  SlowCaller s;
  kiln_parallel_for(64, 1, SlowCaller::task, &s);
  int taken = 0;
  for (int64_t i = 0; i < 16; ++i)
    taken += s.otherThread[i].load();
  EXPECT_GT(taken, 0) << "no item of the caller's part ran on another thread";
}

TEST(ThreadPool, NestedLoopsRunInline) {
  PoolPtr pool(kiln_thread_pool_create(3));
  Attach attach(pool.get());
  constexpr int64_t kOuter = 17, kInner = 50;
  Coverage c(kOuter * kInner);
  struct Ctx {
    Coverage *c;
  } ctx{&c};
  kiln_parallel_for(
      kOuter, 1,
      [](void *p, int64_t begin, int64_t end) {
        auto *cx = static_cast<Ctx *>(p);
        for (int64_t o = begin; o < end; ++o) {
          struct Inner {
            Coverage *c;
            int64_t o;
          } inner{cx->c, o};
          kiln_parallel_for(
              kInner, 1,
              [](void *q, int64_t b, int64_t e) {
                auto *in = static_cast<Inner *>(q);
                for (int64_t i = b; i < e; ++i)
                  in->c->hits[in->o * kInner + i].fetch_add(1);
              },
              &inner);
        }
      },
      &ctx);
  c.expectEachOnce();
}

// A "compiled model" whose entry point splits its loop with
// kiln_parallel_for, as generated kernels do: y[i] = a[i] * 2 + 1.
constexpr int64_t kLen = 100000;
const int64_t kDims[] = {kLen};
struct EntryCtx {
  const float *a;
  float *y;
};
void parallelEntry(void **buffers) {
  EntryCtx ctx{static_cast<const float *>(buffers[0]), static_cast<float *>(buffers[1])};
  kiln_parallel_for(
      kLen, 1000,
      [](void *p, int64_t begin, int64_t end) {
        auto *c = static_cast<EntryCtx *>(p);
        for (int64_t i = begin; i < end; ++i)
          c->y[i] = c->a[i] * 2.0f + 1.0f;
      },
      &ctx);
}
const kiln_tensor_desc kIn[] = {{"a", KILN_FLOAT32, 1, kDims}};
const kiln_tensor_desc kOut[] = {{"y", KILN_FLOAT32, 1, kDims}};
const kiln_model_desc kModel = {KILN_ABI_VERSION, "scale", 1, 1, kIn, kOut, 0, parallelEntry};

TEST(ThreadPool, ConcurrentRunsShareAPool) {
  PoolPtr pool(kiln_thread_pool_create(2));
  std::atomic<int> failures{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t)
    callers.emplace_back([&, t] {
      kiln_tensor *a = kiln_tensor_create(KILN_FLOAT32, 1, kDims);
      auto *ad = static_cast<float *>(kiln_tensor_data(a));
      for (int run = 0; run < 40; ++run) {
        for (int64_t i = 0; i < kLen; ++i)
          ad[i] = (float)(i % 1000) + (float)t * 1000.0f + (float)run;
        kiln_tensor *y = nullptr;
        kiln_status *s = kiln_model_execute_with_pool(&kModel, &a, 1, &y, 1, nullptr, pool.get());
        if (s) {
          failures++;
          kiln_status_free(s);
          continue;
        }
        const auto *yd = static_cast<const float *>(kiln_tensor_data(y));
        for (int64_t i = 0; i < kLen; ++i)
          if (yd[i] != ad[i] * 2.0f + 1.0f) {
            failures++;
            break;
          }
        kiln_tensor_free(y);
      }
      kiln_tensor_free(a);
    });
  for (auto &c : callers)
    c.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(ThreadPool, ExecuteDetachesThePoolAfterTheRun) {
  PoolPtr pool(kiln_thread_pool_create(2));
  kiln_tensor *a = kiln_tensor_create(KILN_FLOAT32, 1, kDims);
  kiln_tensor *y = nullptr;
  ASSERT_EQ(kiln_model_execute_with_pool(&kModel, &a, 1, &y, 1, nullptr, pool.get()), nullptr);
  EXPECT_EQ(kiln_thread_pool_attach(nullptr), nullptr);
  kiln_tensor_free(y);
  kiln_tensor_free(a);
}


// Profiling: a kernel bracketed by kiln_profile_begin/end (as profiled
// compiled code does) gives one kernel event with its name, kernel and
// FLOPs on thread 0, and one slice per pool thread that worked on its
// kiln_parallel_for, under the same name; nothing is recorded without an
// attached profiler.
TEST(ThreadPool, ProfilerRecordsKernelsAndEachThreadsSlice) {
  PoolPtr pool(kiln_thread_pool_create(2));
  Attach attach(pool.get());
  kiln_profiler *profiler = kiln_profiler_create();
  ASSERT_TRUE(profiler);
  ThreadLog log;
  log.perItem = std::chrono::microseconds(200);

  int64_t t = kiln_profile_begin("not recorded");
  kiln_parallel_for(64, 1, ThreadLog::task, &log);
  kiln_profile_end("not recorded", "task", 1, t);
  EXPECT_EQ(t, 0);
  EXPECT_EQ(kiln_profiler_num_events(profiler), 0u);

  kiln_profiler *previous = kiln_profiler_attach(profiler);
  t = kiln_profile_begin("conv1 (Conv)");
  kiln_parallel_for(64, 1, ThreadLog::task, &log);
  kiln_profile_end("conv1 (Conv)", "main_op0_task", 4096, t);
  kiln_profiler_attach(previous);

  size_t n = kiln_profiler_num_events(profiler);
  const kiln_profile_event *events = kiln_profiler_events(profiler);
  std::set<int> sliceThreads;
  int kernels = 0;
  for (size_t i = 0; i < n; ++i) {
    EXPECT_STREQ(events[i].name, "conv1 (Conv)");
    EXPECT_LE(events[i].begin_ns, events[i].end_ns);
    if (events[i].kind == KILN_PROFILE_SLICE) {
      sliceThreads.insert(events[i].thread);
    } else {
      ++kernels;
      EXPECT_STREQ(events[i].kernel, "main_op0_task");
      EXPECT_EQ(events[i].flops, 4096);
      EXPECT_EQ(events[i].thread, 0);
      // 64 items of 200 us over two threads: at least 32 x 200 us.
      EXPECT_GE(events[i].end_ns - events[i].begin_ns, 6'000'000);
    }
  }
  EXPECT_EQ(kernels, 1);
  EXPECT_EQ(sliceThreads, (std::set<int>{0, 1}));

  std::string path = ::testing::TempDir() + "kiln_profile_test.json";
  ASSERT_EQ(kiln_profiler_write_chrome_trace(profiler, path.c_str()), nullptr);
  FILE *f = std::fopen(path.c_str(), "r");
  ASSERT_TRUE(f);
  std::string text;
  char buf[4096];
  for (size_t got; (got = std::fread(buf, 1, sizeof buf, f)) > 0;)
    text.append(buf, got);
  std::fclose(f);
  EXPECT_NE(text.find("\"traceEvents\""), std::string::npos);
  EXPECT_NE(text.find("\"name\": \"conv1 (Conv)\", \"cat\": \"kernel\""), std::string::npos);
  EXPECT_NE(text.find("\"flops\": 4096"), std::string::npos);
  kiln_status *bad = kiln_profiler_write_chrome_trace(profiler, "/nonexistent-dir/x.json");
  ASSERT_NE(bad, nullptr);
  EXPECT_EQ(kiln_status_get_code(bad), KILN_IO_ERROR);
  kiln_status_free(bad);
  kiln_profiler_free(profiler);
}

} // namespace
