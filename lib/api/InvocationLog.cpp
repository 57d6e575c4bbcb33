// Always-on invocation logs (see kiln/InvocationLog.h). Every failure here
// is swallowed: a log that cannot be written is no log, never an error.
#include "CompileCache.h"

#include "kiln/InvocationLog.h"
#include "kiln/Kiln.h"

#include "llvm/Config/llvm-config.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/TargetParser/Host.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include <unistd.h>

namespace fs = std::filesystem;

namespace kiln {

struct InvocationLog::Impl {
  std::mutex mutex;
  std::ostringstream body;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  std::string status = "unknown (the process ended without saying)";
};

namespace {
std::atomic<InvocationLog *> currentLog{nullptr};
thread_local InvocationLog *threadLog = nullptr;

/// One line, printable: model-supplied names and messages may hold
/// newlines or control bytes, which would forge log lines.
std::string oneLine(const std::string &s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '\n')
      out += "\\n";
    else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += (char)c;
    }
  }
  return out.size() > 4000 ? out.substr(0, 4000) + "...(cut)" : out;
}

bool loggingOff() {
  const char *v = std::getenv("KILN_LOG");
  return v && (std::string(v) == "0" || std::string(v) == "off");
}

size_t maxLogs() {
  const char *v = std::getenv("KILN_LOG_MAX");
  long n = v ? std::atol(v) : 50;
  return n > 0 ? (size_t)n : 50;
}

/// Keeps the newest `keep` invocation folders (names start with a UTC
/// timestamp, so name order is age order).
void trim(const fs::path &dir, size_t keep) {
  std::error_code ec;
  std::vector<fs::path> folders;
  for (const auto &e : fs::directory_iterator(dir, ec))
    if (e.is_directory(ec))
      folders.push_back(e.path());
  if (folders.size() <= keep)
    return;
  std::sort(folders.begin(), folders.end());
  for (size_t i = 0; i + keep < folders.size(); ++i)
    fs::remove_all(folders[i], ec);
}

std::string cpuDescription() {
  std::string cpu = llvm::sys::getHostCPUName().str(), features;
  for (const auto &f : llvm::sys::getHostCPUFeatures())
    if (f.second)
      features += (features.empty() ? "" : ",") + f.first().str();
  return cpu + " [" + features + "]";
}
} // namespace

std::string invocationLogDir() {
  if (const char *d = std::getenv("KILN_LOG_DIR"); d && *d)
    return d;
  std::string cache = defaultCacheDirectory();
  return cache.empty() ? "" : cache + "/logs";
}

std::unique_ptr<InvocationLog> InvocationLog::begin(const std::string &tool,
                                                    const std::vector<std::string> &args,
                                                    Scope scope) {
  if (loggingOff())
    return nullptr;
  std::string root = invocationLogDir();
  if (root.empty())
    return nullptr;
  try {
    std::error_code ec;
    fs::create_directories(root, ec);
    // A UTC timestamp with microseconds, the pid and the tool: unique, and
    // sorted by age.
    auto now = std::chrono::system_clock::now();
    std::time_t secs = std::chrono::system_clock::to_time_t(now);
    long micros = (long)(std::chrono::duration_cast<std::chrono::microseconds>(
                             now.time_since_epoch())
                             .count() %
                         1000000);
    std::tm utc{};
    gmtime_r(&secs, &utc);
    char stamp[64];
    std::snprintf(stamp, sizeof stamp, "%04d%02d%02dT%02d%02d%02d.%06ldZ", utc.tm_year + 1900,
                  utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, micros);
    fs::path dir = fs::path(root) / (std::string(stamp) + "-" + std::to_string(getpid()) + "-" +
                                     tool);
    if (!fs::create_directory(dir, ec) || ec)
      return nullptr;
    trim(root, maxLogs());
    std::unique_ptr<InvocationLog> log(new InvocationLog());
    log->dir = dir.string();
    log->impl = std::make_unique<Impl>();
    std::ostringstream &b = log->impl->body;
    b << "tool: " << tool << "\n";
    std::string command;
    for (const std::string &a : args)
      command += (command.empty() ? "" : " ") + oneLine(a);
    b << "command: " << command << "\n";
    char cwd[4096];
    b << "cwd: " << (getcwd(cwd, sizeof cwd) ? oneLine(cwd) : std::string("?")) << "\n";
    b << "started: " << stamp << "\n";
    b << "kiln: " << version() << "\n";
    b << "llvm: " << LLVM_VERSION_STRING << "\n";
    b << "host: " << llvm::sys::getProcessTriple() << "\n";
    b << "cpu: " << cpuDescription() << "\n";
    if (scope == Scope::Thread) {
      if (!threadLog)
        threadLog = log.get();
    } else {
      InvocationLog *expected = nullptr;
      currentLog.compare_exchange_strong(expected, log.get());
    }
    return log;
  } catch (...) {
    return nullptr;
  }
}

InvocationLog::~InvocationLog() {
  InvocationLog *self = this;
  currentLog.compare_exchange_strong(self, nullptr);
  if (threadLog == this)
    threadLog = nullptr;
  if (!impl)
    return;
  try {
    std::lock_guard<std::mutex> lock(impl->mutex);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                                   impl->start)
                         .count();
    std::ofstream f(fs::path(dir) / "log.txt");
    f << impl->body.str();
    char line[64];
    std::snprintf(line, sizeof line, "%.3f", seconds);
    f << "duration_s: " << line << "\n";
    f << "status: " << impl->status << "\n";
  } catch (...) {
  }
}

void InvocationLog::note(const std::string &key, const std::string &value) {
  if (!impl)
    return;
  std::lock_guard<std::mutex> lock(impl->mutex);
  impl->body << key << ": " << oneLine(value) << "\n";
}

void InvocationLog::model(const std::string &path) {
  if (!impl)
    return;
  std::string text = path;
  try {
    std::error_code ec;
    uintmax_t size = fs::file_size(path, ec);
    if (!ec) {
      text += " (" + std::to_string(size) + " bytes";
      // The digest Kiln knows the model by; the bytes themselves are not
      // kept. Mapped, not copied into a string grown byte by byte (for
      // ViT-B, 346 MB of copying and page faults before every compile).
      auto bytes = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                               /*RequiresNullTerminator=*/false);
      if (bytes)
        text += ", digest " + modelDigest((*bytes)->getBufferStart(), (*bytes)->getBufferSize());
      text += ")";
    }
  } catch (...) {
  }
  note("model", text);
}

void InvocationLog::stage(const std::string &name, double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f s ", seconds);
  note("stage", buf + name);
}

void InvocationLog::warning(const std::string &message) { note("warning", message); }
void InvocationLog::error(const std::string &message) { note("error", message); }

void InvocationLog::finish(int exitStatus) {
  if (!impl)
    return;
  std::lock_guard<std::mutex> lock(impl->mutex);
  impl->status = std::to_string(exitStatus) + (exitStatus == 0 ? " (ok)" : " (failed)");
}

InvocationLog *InvocationLog::current() { return threadLog ? threadLog : currentLog.load(); }

} // namespace kiln
