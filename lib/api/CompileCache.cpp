#include "CompileCache.h"

#include "kiln/Kiln.h"
#include "onnx/onnx_pb.h"

#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/xxhash.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <filesystem>
#include <fstream>
#include <random>
#include <unistd.h>

namespace fs = std::filesystem;

namespace kiln {

std::string modelDigest(const void *data, size_t size) {
  llvm::XXH128_hash_t h =
      llvm::xxh3_128bits(llvm::ArrayRef<uint8_t>(static_cast<const uint8_t *>(data), size));
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", (unsigned long long)h.high64,
                (unsigned long long)h.low64);
  return buf;
}

std::string modelProtoDigest(onnx::ModelProto &proto) {
  // External data is in the proto once loaded, so the proto is what to
  // hash; but serialising it would copy every weight. Large raw_data blocks
  // are hashed where they lie and swapped out (O(1)) while the rest is
  // serialised, then swapped back.
  CacheKey key;
  auto *initializers = proto.mutable_graph()->mutable_initializer();
  std::vector<std::string> held(initializers->size());
  for (int i = 0; i < initializers->size(); ++i) {
    // Read through the const accessor: mutable_raw_data() would mark the
    // field present on a tensor that keeps its values in float_data.
    const std::string &raw = (*initializers)[i].raw_data();
    if (raw.size() < 4096)
      continue; // serialised with the rest
    key.add((*initializers)[i].name()).add(modelDigest(raw.data(), raw.size()));
    (*initializers)[i].mutable_raw_data()->swap(held[i]);
  }
  std::string rest = proto.SerializeAsString();
  for (int i = 0; i < initializers->size(); ++i)
    if (!held[i].empty())
      (*initializers)[i].mutable_raw_data()->swap(held[i]);
  return key.add(modelDigest(rest.data(), rest.size())).digest();
}

CacheKey &CacheKey::add(const std::string &field) {
  // Length-prefixed: no two field lists give the same text.
  text += std::to_string(field.size()) + ":" + field + ";";
  return *this;
}

CacheKey &CacheKey::add(const std::vector<int64_t> &v) {
  std::string s;
  for (int64_t x : v)
    s += std::to_string(x) + ",";
  return add(s);
}

CacheKey &CacheKey::add(const CodegenOptions &o) {
  add(o.optLevel).add(o.debugMemory ? 1 : 0).add(o.profile ? 1 : 0);
  add(o.gpuTensorPassesOnCpu ? 1 : 0).add(o.tune ? 1 : 0);
  const GpuPassOptions &g = o.gpu;
  for (bool choice : {g.splitReductions, g.tileContractions, g.blockReductions,
                      g.vectorizeElementwise, g.mmaContractions, g.tf32})
    add(choice ? 1 : 0);
  return *this;
}

std::string CacheKey::digest() const { return modelDigest(text.data(), text.size()); }

std::unique_ptr<llvm::MemoryBuffer> mapFile(const std::string &path, bool mayChange) {
  auto file = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                          /*RequiresNullTerminator=*/false,
                                          /*IsVolatile=*/mayChange);
  return file ? std::move(*file) : nullptr;
}

const std::string &compilerIdentity() {
  static const std::string identity = [] {
    Dl_info info;
    if (!dladdr(reinterpret_cast<void *>(&compilerIdentity), &info) || !info.dli_fname)
      return std::string();
    auto bytes = mapFile(info.dli_fname);
    if (!bytes || bytes->getBufferSize() == 0)
      return std::string();
    return modelDigest(bytes->getBufferStart(), bytes->getBufferSize());
  }();
  return identity;
}

std::string defaultCacheDirectory() {
  if (const char *d = std::getenv("KILN_CACHE_DIR"))
    return d;
  if (const char *x = std::getenv("XDG_CACHE_HOME"); x && *x)
    return std::string(x) + "/kiln";
  if (const char *home = std::getenv("HOME"); home && *home)
    return std::string(home) + "/.cache/kiln";
  return "";
}

CompileCache::CompileCache(std::string d, uint64_t max)
    : dir(d.empty() ? defaultCacheDirectory() : std::move(d)), maxBytes(max) {
  if (!maxBytes) {
    const char *mb = std::getenv("KILN_CACHE_MAX_MB");
    maxBytes = (mb && std::atoll(mb) > 0 ? std::atoll(mb) : 2048) * (uint64_t(1) << 20);
  }
  if (!dir.empty())
    dir += "/jit";
}

// An entry: magic, payload size, payload, xxh3-128 of the payload.
static const char kMagic[8] = {'K', 'I', 'L', 'N', 'J', 'I', 'T', '1'};

static const char *extension(CompileCache::Kind kind) {
  switch (kind) {
  case CompileCache::Kind::Code:
    return ".kjit";
  case CompileCache::Kind::Signature:
    return ".ksig";
  case CompileCache::Kind::Tuning:
    return ".ktune";
  }
  return ".kjit";
}

bool CompileCache::load(const std::string &key, std::shared_ptr<llvm::MemoryBuffer> &entry,
                        std::string_view &payload, Kind kind) const {
  if (dir.empty())
    return false;
  std::string path = dir + "/" + key + extension(kind);
  // Mapped, not read: a hit's constant pool is used where it lies.
  entry = mapFile(path);
  if (!entry)
    return false;
  std::string_view data(entry->getBufferStart(), entry->getBufferSize());
  uint64_t size = 0;
  bool intact = data.size() >= kPayloadOffset + 32 && std::memcmp(data.data(), kMagic, 8) == 0;
  if (intact) {
    std::memcpy(&size, data.data() + 8, 8);
    intact = size == data.size() - kPayloadOffset - 32 &&
             modelDigest(data.data() + kPayloadOffset, size) ==
                 data.substr(kPayloadOffset + size, 32);
  }
  if (!intact) {
    entry.reset();
    std::error_code ec;
    fs::remove(path, ec);
    return false;
  }
  payload = data.substr(kPayloadOffset, size);
  std::error_code ec; // least recently used: a hit counts as a use
  fs::last_write_time(path, fs::file_time_type::clock::now(), ec);
  return true;
}

void CompileCache::store(const std::string &key, const std::string &payload, Kind kind) const {
  if (dir.empty())
    return;
  std::error_code ec;
  fs::create_directories(dir, ec);
  std::random_device random;
  std::string tmp = dir + "/." + key + "." + std::to_string(getpid()) + "." +
                    std::to_string(random()) + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary);
    uint64_t size = payload.size();
    f.write(kMagic, 8);
    f.write(reinterpret_cast<const char *>(&size), 8);
    f.write(payload.data(), payload.size());
    f << modelDigest(payload.data(), payload.size());
    if (!f.flush()) {
      f.close();
      fs::remove(tmp, ec);
      return;
    }
  }
  fs::rename(tmp, dir + "/" + key + extension(kind), ec);
  if (ec) {
    fs::remove(tmp, ec);
    return;
  }
  // Evict the least recently used entries beyond the bound.
  struct Entry {
    fs::path path;
    fs::file_time_type time;
    uint64_t size;
  };
  std::vector<Entry> entries;
  uint64_t total = 0;
  for (const auto &e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() != ".kjit" && e.path().extension() != ".ksig" &&
        e.path().extension() != ".ktune")
      continue;
    std::error_code err;
    uint64_t size = e.file_size(err);
    auto time = e.last_write_time(err);
    if (err)
      continue;
    entries.push_back({e.path(), time, size});
    total += size;
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry &a, const Entry &b) { return a.time < b.time; });
  for (const Entry &e : entries) {
    if (total <= maxBytes)
      break;
    fs::remove(e.path, ec);
    total -= e.size;
  }
}

void PayloadWriter::u64(uint64_t v) { out.append(reinterpret_cast<const char *>(&v), 8); }
void PayloadWriter::bytes(std::string_view s) {
  u64(s.size());
  out += s;
}
static size_t alignmentPadding(size_t payloadPos) {
  return (64 - (kPayloadOffset + payloadPos) % 64) % 64;
}
void PayloadWriter::alignedBytes(std::string_view s) {
  u64(s.size());
  out.append(alignmentPadding(out.size()), '\0');
  out += s;
}
void PayloadWriter::i64s(const std::vector<int64_t> &v) {
  u64(v.size());
  for (int64_t x : v)
    u64((uint64_t)x);
}

uint64_t PayloadReader::u64() {
  uint64_t v = 0;
  if (!ok || pos + 8 > in.size()) {
    ok = false;
    return 0;
  }
  std::memcpy(&v, in.data() + pos, 8);
  pos += 8;
  return v;
}
std::string_view PayloadReader::bytes() {
  uint64_t n = u64();
  if (!ok || n > in.size() - pos) {
    ok = false;
    return {};
  }
  std::string_view s = in.substr(pos, n);
  pos += n;
  return s;
}
void PayloadWriter::tensorInfos(const std::vector<TensorInfo> &list) {
  u64(list.size());
  for (const TensorInfo &t : list) {
    bytes(t.name);
    u64((uint64_t)t.dtype);
    i64s(t.dims);
    u64((uint64_t)t.kind);
    u64(t.optional ? 1 : 0);
    u64(t.dimNames.size());
    for (const std::string &name : t.dimNames)
      bytes(name);
  }
}

std::vector<TensorInfo> PayloadReader::tensorInfos() {
  std::vector<TensorInfo> list;
  uint64_t n = u64();
  for (uint64_t i = 0; ok && i < n; ++i) {
    TensorInfo t;
    t.name = std::string(bytes());
    t.dtype = (kiln_dtype)u64();
    t.dims = i64s();
    t.kind = (ValueKind)u64();
    t.optional = u64() != 0;
    for (uint64_t k = 0, names = u64(); ok && k < names; ++k)
      t.dimNames.emplace_back(bytes());
    list.push_back(std::move(t));
  }
  return list;
}

std::string_view PayloadReader::alignedBytes() {
  uint64_t n = u64();
  size_t pad = alignmentPadding(pos);
  if (!ok || pad > in.size() - pos || n > in.size() - pos - pad) {
    ok = false;
    return {};
  }
  pos += pad;
  std::string_view s = in.substr(pos, n);
  pos += n;
  return s;
}
std::vector<int64_t> PayloadReader::i64s() {
  uint64_t n = u64();
  std::vector<int64_t> v;
  if (!ok || n > (in.size() - pos) / 8) {
    ok = false;
    return v;
  }
  for (uint64_t i = 0; i < n; ++i)
    v.push_back((int64_t)u64());
  return v;
}

} // namespace kiln
