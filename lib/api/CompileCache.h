// The on-disk cache of JIT-compiled executables (kiln::Model, the C API,
// kiln-run): one file per key, written atomically, checked on every read.
#ifndef KILN_API_COMPILECACHE_H
#define KILN_API_COMPILECACHE_H

#include "kiln/Kiln.h"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace llvm {
class MemoryBuffer;
}
namespace onnx {
class ModelProto;
}

namespace kiln {

/// modelDigest (Kiln.h) of a loaded model, external data included, without
/// copying its weights. Swaps large initializers' bytes out and back: no
/// other thread may read `proto` meanwhile.
std::string modelProtoDigest(onnx::ModelProto &proto);

/// Builds a cache key from everything that decides the compiled code.
class CacheKey {
public:
  CacheKey &add(const std::string &field);
  CacheKey &add(int64_t v) { return add(std::to_string(v)); }
  CacheKey &add(const std::vector<int64_t> &v);
  /// Every code generation choice but the target's triple and CPU, which
  /// the caller adds as the target machine resolved them ("host" is this
  /// machine's CPU and features).
  CacheKey &add(const CodegenOptions &options);
  /// 32 hex digits.
  std::string digest() const;

private:
  std::string text;
};

/// A content digest of the Kiln library this code lives in, so that a
/// rebuilt compiler never reuses code an older build cached ("" when the
/// library cannot be read).
const std::string &compilerIdentity();

/// KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else ~/.cache/kiln ("" when
/// none is known): the compile cache's folder, and the invocation logs'.
std::string defaultCacheDirectory();

class CompileCache {
public:
  /// Compiled code (.kjit), a model's declared signature (.ksig, see
  /// ModelSource), or a layer's tuned kernel choice (.ktune, see
  /// KernelTuning.h); all count against the size bound.
  enum class Kind { Code, Signature, Tuning };

  /// `dir` empty: KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else
  /// ~/.cache/kiln. maxBytes 0: KILN_CACHE_MAX_MB (default 2048) MiB.
  explicit CompileCache(std::string dir = "", uint64_t maxBytes = 0);
  const std::string &directory() const { return dir; }

  /// The payload stored under `key` (a view into `entry`, the file mapped
  /// into memory, not copied), when an intact entry exists. A truncated or
  /// corrupt entry is deleted and reported as a miss.
  bool load(const std::string &key, std::shared_ptr<llvm::MemoryBuffer> &entry,
            std::string_view &payload, Kind kind = Kind::Code) const;
  /// Stores `payload` under `key`: written to a temporary file and renamed,
  /// so that readers and concurrent writers only ever see whole entries;
  /// then evicts the least recently used entries beyond the size bound.
  /// Failures (read-only directory, full disk) are silent: the cache is an
  /// optimisation.
  void store(const std::string &key, const std::string &payload, Kind kind = Kind::Code) const;

private:
  std::string dir;
  uint64_t maxBytes;
};

/// The file at `path` mapped into memory (read in, when small), or null.
/// `mayChange`: always read in, for a file that may be rewritten meanwhile
/// (a mapping would fault on a truncation).
std::unique_ptr<llvm::MemoryBuffer> mapFile(const std::string &path, bool mayChange = false);

/// Where a payload starts in its entry's file (after magic and size).
constexpr size_t kPayloadOffset = 16;

/// Little-endian serialisation for cache payloads.
struct PayloadWriter {
  std::string out;
  void u64(uint64_t v);
  void bytes(std::string_view s);
  /// Bytes that start 64-byte aligned in the entry's file, so that a reader
  /// can use them where the file is mapped (constant pools).
  void alignedBytes(std::string_view s);
  void i64s(const std::vector<int64_t> &v);
  void tensorInfos(const std::vector<TensorInfo> &list);
};
struct PayloadReader {
  std::string_view in;
  size_t pos = 0;
  bool ok = true;
  explicit PayloadReader(std::string_view in) : in(in) {}
  uint64_t u64();
  std::string_view bytes();
  std::string_view alignedBytes();
  std::vector<int64_t> i64s();
  std::vector<TensorInfo> tensorInfos();
};

} // namespace kiln

#endif
