// A main for the fuzz targets when they are built without libFuzzer (every
// ordinary build): runs LLVMFuzzerTestOneInput on each file given, or on
// every file under each folder given, so that the regression inputs in
// test/fuzz/regressions replay in every test run, not only in fuzz builds.
//
// With --mutate SECONDS it then keeps mutating those inputs (bit flips,
// random and interesting bytes, inserted, erased and repeated ranges,
// splices of two inputs, dictionary tokens) and running the results until
// the time is up: a short fuzzing run that fits CI, where no libFuzzer
// build is made. It is blind (no coverage feedback) and finds only what
// crashes or hangs an ordinary build; the guided, sanitized fuzzing is
// scripts/sanitize.sh fuzz. Before each run the input is written to the
// --crash-file, so that a crash leaves it behind; --seed reproduces a run.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
extern "C" int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

namespace {

using Bytes = std::vector<uint8_t>;

bool readFile(const std::string &path, Bytes &out) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return false;
  out.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return true;
}

/// The values of a libFuzzer dictionary: name="..." lines, with \xNN,
/// \\ and \" escapes.
std::vector<Bytes> readDictionary(const std::string &path) {
  std::vector<Bytes> tokens;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    size_t open = line.find('"'), close = line.rfind('"');
    if (line.empty() || line[0] == '#' || open == std::string::npos || close <= open)
      continue;
    Bytes token;
    for (size_t i = open + 1; i < close; ++i) {
      if (line[i] == '\\' && i + 1 < close && line[i + 1] == 'x' && i + 3 < close) {
        token.push_back((uint8_t)std::strtol(line.substr(i + 2, 2).c_str(), nullptr, 16));
        i += 3;
      } else if (line[i] == '\\' && i + 1 < close) {
        token.push_back((uint8_t)line[++i]);
      } else {
        token.push_back((uint8_t)line[i]);
      }
    }
    if (!token.empty())
      tokens.push_back(token);
  }
  return tokens;
}

struct Mutator {
  std::mt19937_64 rng;
  const std::vector<Bytes> &corpus;
  const std::vector<Bytes> &dictionary;
  size_t maxLen;

  size_t below(size_t n) { return n ? rng() % n : 0; }

  /// Values that tend to sit on boundaries: 0, -1, 2^k and their neighbours.
  uint8_t interestingByte() {
    static const uint8_t values[] = {0, 1, 0x7f, 0x80, 0xff, 0xfe, 0x10, 0x40, 0x20, 0x08};
    return values[below(sizeof values)];
  }

  void mutateOnce(Bytes &b) {
    switch (below(b.empty() ? 3 : 9)) {
    case 0: // insert random bytes
    case 1: {
      size_t at = below(b.size() + 1), n = 1 + below(8);
      Bytes add(n);
      for (uint8_t &x : add)
        x = (uint8_t)rng();
      b.insert(b.begin() + at, add.begin(), add.end());
      break;
    }
    case 2: // a dictionary token (or a splice when there is no dictionary)
      if (!dictionary.empty()) {
        const Bytes &t = dictionary[below(dictionary.size())];
        b.insert(b.begin() + below(b.size() + 1), t.begin(), t.end());
      } else if (!corpus.empty()) {
        const Bytes &o = corpus[below(corpus.size())];
        size_t from = below(o.size()), n = below(o.size() - from + 1);
        b.insert(b.begin() + below(b.size() + 1), o.begin() + from, o.begin() + from + n);
      }
      break;
    case 3: // flip a bit
      b[below(b.size())] ^= (uint8_t)(1u << below(8));
      break;
    case 4: // a random byte
      b[below(b.size())] = (uint8_t)rng();
      break;
    case 5: // an interesting byte (varint lengths and tags live here)
      b[below(b.size())] = interestingByte();
      break;
    case 6: { // erase a range
      size_t at = below(b.size()), n = 1 + below(std::min<size_t>(b.size() - at, 64));
      b.erase(b.begin() + at, b.begin() + at + n);
      break;
    }
    case 7: { // repeat a range
      size_t at = below(b.size()), n = 1 + below(std::min<size_t>(b.size() - at, 64));
      Bytes range(b.begin() + at, b.begin() + at + n);
      b.insert(b.begin() + below(b.size() + 1), range.begin(), range.end());
      break;
    }
    default: { // splice: this input's head, another's tail
      if (corpus.empty())
        break;
      const Bytes &o = corpus[below(corpus.size())];
      size_t keep = below(b.size() + 1), from = below(o.size() + 1);
      b.resize(keep);
      b.insert(b.end(), o.begin() + from, o.end());
      break;
    }
    }
    if (b.size() > maxLen)
      b.resize(maxLen);
  }

  Bytes next() {
    Bytes b = corpus.empty() ? Bytes() : corpus[below(corpus.size())];
    for (size_t n = 1 + below(8); n > 0; --n)
      mutateOnce(b);
    return b;
  }
};

void writeFile(const std::string &path, const Bytes &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char *>(bytes.data()), (std::streamsize)bytes.size());
}

int usage() {
  std::fprintf(stderr, "usage: %s [--mutate SECONDS] [--seed N] [--dict FILE] [--max-len N]\n"
                       "       [--crash-file FILE] FILE_OR_FOLDER...\n",
               "kiln-fuzz-*");
  return 2;
}

} // namespace

int main(int argc, char **argv) {
  if (LLVMFuzzerInitialize)
    LLVMFuzzerInitialize(&argc, &argv);
  double mutateSeconds = 0;
  uint64_t seed = std::random_device()();
  std::string dictPath, crashFile = "fuzz-crash-input";
  size_t maxLen = 65536;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    bool hasValue = i + 1 < argc;
    if (a == "--mutate" && hasValue)
      mutateSeconds = std::atof(argv[++i]);
    else if (a == "--seed" && hasValue)
      seed = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--dict" && hasValue)
      dictPath = argv[++i];
    else if (a == "--max-len" && hasValue)
      maxLen = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--crash-file" && hasValue)
      crashFile = argv[++i];
    else if (a.rfind("--", 0) == 0)
      return usage();
    else {
      std::error_code ec;
      if (std::filesystem::is_directory(a, ec)) {
        for (auto &e : std::filesystem::recursive_directory_iterator(a))
          if (e.is_regular_file())
            files.push_back(e.path().string());
      } else {
        files.push_back(a);
      }
    }
  }
  std::sort(files.begin(), files.end());
  std::vector<Bytes> corpus;
  for (const std::string &f : files) {
    Bytes bytes;
    if (!readFile(f, bytes)) {
      std::fprintf(stderr, "cannot read %s\n", f.c_str());
      return 2;
    }
    std::fprintf(stderr, "running %s (%zu bytes)\n", f.c_str(), bytes.size());
    LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
    if (bytes.size() <= maxLen)
      corpus.push_back(std::move(bytes));
  }
  std::fprintf(stderr, "%zu inputs ran without a crash\n", files.size());
  if (mutateSeconds <= 0)
    return 0;

  std::vector<Bytes> dictionary = dictPath.empty() ? std::vector<Bytes>() : readDictionary(dictPath);
  Mutator mutator{std::mt19937_64(seed), corpus, dictionary, maxLen};
  std::fprintf(stderr,
               "mutating %zu inputs for %g s, seed %llu (--seed reproduces), %zu dictionary "
               "tokens; a crash leaves its input in %s\n",
               corpus.size(), mutateSeconds, (unsigned long long)seed, dictionary.size(),
               crashFile.c_str());
  auto stop = std::chrono::steady_clock::now() + std::chrono::duration<double>(mutateSeconds);
  uint64_t runs = 0;
  while (std::chrono::steady_clock::now() < stop) {
    Bytes input = mutator.next();
    writeFile(crashFile, input);
    LLVMFuzzerTestOneInput(input.data(), input.size());
    ++runs;
  }
  std::remove(crashFile.c_str());
  std::fprintf(stderr, "%llu mutated inputs ran without a crash\n", (unsigned long long)runs);
  return 0;
}
