// kiln-rage: the recent invocations of kilnc, kiln-run and JIT compiles
// (their always-on logs, kiln/InvocationLog.h), and one of them packed into
// a single archive to attach to a bug report.
#include "kiln/InvocationLog.h"
#include "kiln/Kiln.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

static const char *kUsage =
    "usage: kiln-rage [--list] | --show K | --write K [-o FILE.tar]\n"
    "\n"
    "Every kilnc and kiln-run invocation and every JIT compile leaves a log: the\n"
    "command line or options, Kiln and LLVM versions, the CPU and its features,\n"
    "each model's path, size and digest, stage timings, warnings, errors and the\n"
    "exit status (never tensor data or file contents), plus the MLIR reproducer of\n"
    "a pass that failed. The newest KILN_LOG_MAX (default 50) are kept in\n"
    "$KILN_LOG_DIR, else the cache folder's logs/ ($KILN_CACHE_DIR, $XDG_CACHE_HOME/kiln\n"
    "or ~/.cache/kiln). KILN_LOG=0 turns logging off.\n"
    "\n"
    "  --list          the invocations, newest first, numbered from 1 (default)\n"
    "  --show K        print invocation K's log\n"
    "  --write K       write invocation K's folder (log and reproducers) as one tar\n"
    "                  archive: -o FILE.tar, default kiln-rage-<invocation>.tar here\n"
    "  --help, --version\n";

static int usageError(const std::string &message) {
  std::fprintf(stderr, "kiln-rage: error: %s\n(kiln-rage --help for usage)\n", message.c_str());
  return 2;
}

/// The invocation folders, newest first.
static std::vector<fs::path> invocations(const fs::path &root) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto &e : fs::directory_iterator(root, ec))
    if (e.is_directory(ec) && fs::exists(e.path() / "log.txt", ec))
      out.push_back(e.path());
  std::sort(out.begin(), out.end(), std::greater<>());
  return out;
}

static std::map<std::string, std::string> readLog(const fs::path &folder,
                                                  std::vector<std::string> *errors = nullptr) {
  std::map<std::string, std::string> fields;
  std::ifstream f(folder / "log.txt");
  std::string line;
  while (std::getline(f, line)) {
    size_t colon = line.find(": ");
    if (colon == std::string::npos)
      continue;
    std::string key = line.substr(0, colon), value = line.substr(colon + 2);
    if (key == "error" && errors)
      errors->push_back(value);
    if (!fields.count(key))
      fields[key] = value;
  }
  return fields;
}

/// A ustar header block for a regular file.
static void tarHeader(std::string &out, const std::string &name, size_t size) {
  char h[512] = {};
  std::snprintf(h, 100, "%s", name.c_str());
  std::snprintf(h + 100, 8, "%07o", 0644);
  std::snprintf(h + 108, 8, "%07o", 0);
  std::snprintf(h + 116, 8, "%07o", 0);
  std::snprintf(h + 124, 12, "%011llo", (unsigned long long)size);
  std::snprintf(h + 136, 12, "%011llo", 0ull);
  h[156] = '0';
  std::memcpy(h + 257, "ustar", 6);
  std::memcpy(h + 263, "00", 2);
  std::memset(h + 148, ' ', 8);
  unsigned sum = 0;
  for (unsigned char c : h)
    sum += c;
  std::snprintf(h + 148, 8, "%06o", sum);
  h[155] = ' ';
  out.append(h, 512);
}

static bool writeTar(const fs::path &folder, const std::string &path, std::string &error) {
  std::string tar;
  std::error_code ec;
  std::vector<fs::path> files;
  for (const auto &e : fs::recursive_directory_iterator(folder, ec))
    if (e.is_regular_file(ec))
      files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const fs::path &file : files) {
    std::ifstream in(file, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::string name = (folder.filename() / fs::relative(file, folder, ec)).string();
    if (name.size() >= 100)
      name = name.substr(name.size() - 99);
    tarHeader(tar, name, bytes.size());
    tar += bytes;
    tar.append((512 - bytes.size() % 512) % 512, '\0');
  }
  tar.append(1024, '\0');
  std::ofstream out(path, std::ios::binary);
  out.write(tar.data(), (std::streamsize)tar.size());
  if (!out) {
    error = "cannot write '" + path + "'";
    return false;
  }
  return true;
}

int main(int argc, char **argv) {
  std::string mode = "list", outPath;
  long pick = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "--version") {
      std::printf("kiln-rage (Kiln) %s\n", kiln::version().c_str());
      return 0;
    } else if (a == "--list") {
      mode = "list";
    } else if (a == "--show" || a == "--write") {
      if (i + 1 >= argc)
        return usageError(a + " needs K, an invocation's number in --list");
      char *end = nullptr;
      pick = std::strtol(argv[++i], &end, 10);
      if (*end || pick < 1)
        return usageError(a + " needs K, a positive number from --list");
      mode = a.substr(2);
    } else if (a == "-o") {
      if (i + 1 >= argc)
        return usageError("-o needs a file name");
      outPath = argv[++i];
    } else {
      return usageError("unknown argument '" + a + "'");
    }
  }
  std::string root = kiln::invocationLogDir();
  if (root.empty())
    return usageError("no log folder: set KILN_LOG_DIR or HOME");
  std::vector<fs::path> all = invocations(root);
  if (mode == "list") {
    std::printf("invocation logs in %s (newest first)\n", root.c_str());
    if (all.empty())
      std::printf("  none\n");
    for (size_t k = 0; k < all.size(); ++k) {
      std::vector<std::string> errors;
      auto f = readLog(all[k], &errors);
      // The model's path (its size and digest are in the log), else the command.
      std::string what = f.count("model") ? f["model"].substr(0, f["model"].rfind(" (")) : f["command"];
      if (what.size() > 100)
        what = "..." + what.substr(what.size() - 97);
      std::printf("%3zu  %s  %-8s  %-12s  %8s s  %s\n", k + 1, f["started"].c_str(),
                  f["tool"].c_str(), f["status"].c_str(), f["duration_s"].c_str(), what.c_str());
      if (!errors.empty())
        std::printf("       error: %s\n",
                    errors[0].size() > 300 ? (errors[0].substr(0, 297) + "...").c_str()
                                           : errors[0].c_str());
    }
    return 0;
  }
  if ((size_t)pick > all.size())
    return usageError("there is no invocation " + std::to_string(pick) + " (" +
                      std::to_string(all.size()) + " logged)");
  const fs::path &folder = all[pick - 1];
  if (mode == "show") {
    std::ifstream f(folder / "log.txt");
    std::cout << f.rdbuf();
    return 0;
  }
  if (outPath.empty())
    outPath = "kiln-rage-" + folder.filename().string() + ".tar";
  std::string error;
  if (!writeTar(folder, outPath, error)) {
    std::fprintf(stderr, "kiln-rage: error: %s\n", error.c_str());
    return 1;
  }
  std::printf("kiln-rage: wrote %s (invocation %ld: %s)\n", outPath.c_str(), pick,
              folder.filename().string().c_str());
  return 0;
}
