#include "ProfileReport.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace {
struct Row {
  std::string name, kernel;
  double ns = 0;
  long calls = 0;
  double flops = 0;
  std::set<int> threads;
};

std::string threadList(const std::set<int> &threads) {
  if (threads.empty())
    return "0";
  std::string s;
  for (int t : threads)
    s += (s.empty() ? "" : ",") + std::to_string(t);
  return s;
}

std::string clip(const std::string &s, size_t width) {
  return s.size() <= width ? s : s.substr(0, width - 3) + "...";
}
} // namespace

void printProfileReport(const kiln_profiler *profiler, long runs, size_t top, FILE *out) {
  size_t n = kiln_profiler_num_events(profiler);
  const kiln_profile_event *events = kiln_profiler_events(profiler);
  std::map<std::string, Row> rows;
  std::map<std::string, std::set<int>> sliceThreads;
  double total = 0;
  for (size_t i = 0; i < n; ++i) {
    const kiln_profile_event &e = events[i];
    if (e.kind == KILN_PROFILE_SLICE) {
      sliceThreads[e.name].insert(e.thread);
      continue;
    }
    Row &r = rows[e.name];
    r.name = e.name;
    r.kernel = e.kernel;
    r.ns += (double)(e.end_ns - e.begin_ns);
    r.calls += 1;
    r.flops += (double)e.flops;
    total += (double)(e.end_ns - e.begin_ns);
  }
  std::vector<Row> sorted;
  for (auto &[name, row] : rows) {
    auto it = sliceThreads.find(name);
    row.threads = it == sliceThreads.end() ? std::set<int>{0} : it->second;
    sorted.push_back(row);
  }
  std::sort(sorted.begin(), sorted.end(), [](const Row &a, const Row &b) { return a.ns > b.ns; });
  runs = std::max(1L, runs);
  std::fprintf(out,
               "profile: %ld runs, %zu kernels, kernel time %.3f ms per run\n"
               "  %9s %6s %6s %8s %-7s %-28s %s\n",
               runs, sorted.size(), total / 1e6 / runs, "us/run", "share", "calls", "GFLOP/s",
               "threads", "kernel", "ONNX node(s)");
  double rest = 0, restCalls = 0;
  for (size_t i = 0; i < sorted.size(); ++i) {
    const Row &r = sorted[i];
    if (i >= top) {
      rest += r.ns;
      restCalls += r.calls;
      continue;
    }
    char gflops[32] = "-";
    if (r.flops > 0 && r.ns > 0)
      std::snprintf(gflops, sizeof gflops, "%.1f", r.flops / r.ns);
    std::fprintf(out, "  %9.1f %5.1f%% %6.1f %8s %-7s %-28s %s\n", r.ns / 1e3 / runs,
                 total > 0 ? 100.0 * r.ns / total : 0.0, (double)r.calls / runs, gflops,
                 threadList(r.threads).c_str(), clip(r.kernel, 28).c_str(),
                 clip(r.name, 100).c_str());
  }
  if (sorted.size() > top)
    std::fprintf(out, "  %9.1f %5.1f%% %6.1f %8s %-7s %-28s (%zu more kernels)\n",
                 rest / 1e3 / runs, total > 0 ? 100.0 * rest / total : 0.0, restCalls / runs,
                 "-", "", "", sorted.size() - top);
}
