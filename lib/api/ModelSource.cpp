#include "ModelSource.h"

#include "CompileCache.h"

#include "onnx/onnx_pb.h"

#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

namespace fs = std::filesystem;

namespace kiln {

ModelSource::ModelSource() = default;
ModelSource::~ModelSource() = default;
ModelSource::ModelSource(ModelSource &&) = default;
ModelSource &ModelSource::operator=(ModelSource &&) = default;

TensorInfo declaredTensorInfo(const onnx::ValueInfoProto &v) {
  TensorInfo info{v.name(), (kiln_dtype)0, {}};
  const onnx::TypeProto *type = &v.type();
  if (type->has_optional_type()) {
    info.optional = true;
    type = &type->optional_type().elem_type();
  }
  if (type->has_sequence_type()) {
    info.kind = ValueKind::Sequence;
    type = &type->sequence_type().elem_type();
  }
  // A model may name any number; a kiln_dtype may only hold values that fit
  // its enumerators' bits (others are undefined behaviour): those become 0,
  // "undefined", which the importer then refuses with the node's name.
  int32_t elem = type->tensor_type().elem_type();
  info.dtype = elem >= 0 && elem < 32 ? (kiln_dtype)elem : (kiln_dtype)0;
  for (const auto &d : type->tensor_type().shape().dim()) {
    info.dims.push_back(d.has_dim_value() ? d.dim_value() : -1);
    info.dimNames.push_back(d.has_dim_param() ? d.dim_param() : std::string());
  }
  return info;
}

/// Digests of the external data files, in the order the model lists them;
/// false when one cannot be read.
static bool externalDigests(const std::string &baseDir, const std::vector<std::string> &files,
                            std::vector<std::string> &digests) {
  digests.clear();
  for (const std::string &f : files) {
    auto bytes = mapFile((fs::path(baseDir) / f).string());
    if (!bytes)
      return false;
    digests.push_back(modelDigest(bytes->getBufferStart(), bytes->getBufferSize()));
  }
  return true;
}

static std::string combinedDigest(const std::string &fileDigest,
                                  const std::vector<std::string> &files,
                                  const std::vector<std::string> &digests) {
  CacheKey key;
  key.add(fileDigest);
  for (size_t i = 0; i < files.size(); ++i)
    key.add(files[i]).add(digests[i]);
  return key.digest();
}

static std::string manifestKey(const std::string &fileDigest) {
  return CacheKey().add("model signature").add(compilerIdentity()).add(fileDigest).digest();
}

Status ModelSource::finishParsed() {
  for (const onnx::ValueInfoProto *in : modelInputs(*loaded.proto))
    declaredInputs.push_back(declaredTensorInfo(*in));
  for (const auto &out : loaded.proto->graph().output())
    declaredOutputs.push_back(declaredTensorInfo(out));
  if (!externalDigests(baseDir, loaded.externalFiles, externalFileDigests))
    return Status::error(KILN_COMPILE_ERROR, "'" + path + "': its external data cannot be read");
  sourceDigest = combinedDigest(fileDigest, loaded.externalFiles, externalFileDigests);
  return {};
}

Status ModelSource::parseNow(const llvm::MemoryBuffer &bytes) {
  std::string error;
  LoadedModel model;
  if (!loadModelFromBuffer(bytes.getBufferStart(), bytes.getBufferSize(), baseDir, model, error))
    return Status::error(KILN_COMPILE_ERROR, "'" + path + "': " + error);
  model.sourceName = path;
  loaded = std::move(model);
  return {};
}

Status ModelSource::openFile(const std::string &path, CompileCache *cache, ModelSource &out) {
  out = ModelSource();
  out.path = path;
  // Mapped only while it is hashed (and parsed on a miss): a Model keeps no
  // mapping of a file that may be rewritten under it.
  std::unique_ptr<llvm::MemoryBuffer> bytes = mapFile(path);
  if (!bytes) {
    // loadModelFromFile names what is wrong (no such file, a folder, ...).
    std::string error;
    LoadedModel unused;
    if (!loadModelFromFile(path, unused, error))
      return Status::error(KILN_COMPILE_ERROR, error);
    return Status::error(KILN_COMPILE_ERROR, "'" + path + "' cannot be read");
  }
  out.baseDir = fs::path(path).parent_path().string();
  if (out.baseDir.empty())
    out.baseDir = ".";
  out.fileDigest = modelDigest(bytes->getBufferStart(), bytes->getBufferSize());

  std::string key = cache ? manifestKey(out.fileDigest) : "";
  std::shared_ptr<llvm::MemoryBuffer> entry;
  std::string_view payload;
  if (cache && cache->load(key, entry, payload, CompileCache::Kind::Signature)) {
    PayloadReader r(payload);
    out.declaredInputs = r.tensorInfos();
    out.declaredOutputs = r.tensorInfos();
    std::vector<std::string> files, digests, now;
    for (uint64_t i = 0, n = r.u64(); r.ok && i < n; ++i) {
      files.emplace_back(r.bytes());
      digests.emplace_back(r.bytes());
    }
    // Same model bytes, same external data: the cached signature holds.
    if (r.ok && r.pos == payload.size() && externalDigests(out.baseDir, files, now) &&
        now == digests) {
      out.sourceDigest = combinedDigest(out.fileDigest, files, digests);
      out.loaded.externalFiles = std::move(files);
      out.externalFileDigests = std::move(digests);
      return {};
    }
    out.declaredInputs.clear();
    out.declaredOutputs.clear();
  }
  if (Status s = out.parseNow(*bytes); !s.ok())
    return s;
  if (Status s = out.finishParsed(); !s.ok())
    return s;
  if (cache) {
    PayloadWriter w;
    w.tensorInfos(out.declaredInputs);
    w.tensorInfos(out.declaredOutputs);
    w.u64(out.externalFileDigests.size());
    for (size_t i = 0; i < out.externalFileDigests.size(); ++i) {
      w.bytes(out.loaded.externalFiles[i]);
      w.bytes(out.externalFileDigests[i]);
    }
    cache->store(key, w.out, CompileCache::Kind::Signature);
  }
  return {};
}

Status ModelSource::openBuffer(const void *data, size_t size, const std::string &baseDir,
                               ModelSource &out) {
  out = ModelSource();
  out.path = "<memory>";
  out.baseDir = baseDir;
  std::string error;
  if (!loadModelFromBuffer(data, size, baseDir, out.loaded, error))
    return Status::error(KILN_COMPILE_ERROR, error);
  out.fileDigest = modelDigest(data, size);
  return out.finishParsed();
}

Status ModelSource::parsed(const LoadedModel *&model) {
  if (!loaded.proto) {
    // Compile only the bytes the digest (and so the cache key) speaks for:
    // the model file and its external data as they were when loaded.
    auto changed = [&] {
      return Status::error(KILN_COMPILE_ERROR, "'" + path +
                                                   "' or its external data changed on disk "
                                                   "after it was loaded; load it again");
    };
    auto bytes = mapFile(path, /*mayChange=*/true);
    if (!bytes || modelDigest(bytes->getBufferStart(), bytes->getBufferSize()) != fileDigest)
      return changed();
    std::vector<std::string> expected = externalFileDigests, now;
    if (Status s = parseNow(*bytes); !s.ok())
      return s;
    if (!externalDigests(baseDir, loaded.externalFiles, now) || now != expected) {
      loaded = LoadedModel();
      return changed();
    }
  }
  model = &loaded;
  return {};
}

Status checkDimBounds(const std::vector<TensorInfo> &inputs, const DimBounds &bounds) {
  for (const auto &[name, range] : bounds) {
    bool named = false;
    for (const TensorInfo &t : inputs)
      named |= std::find(t.dimNames.begin(), t.dimNames.end(), name) != t.dimNames.end();
    if (!named || name.empty())
      return Status::error(KILN_INVALID_ARGUMENT,
                           "bounds are given for the dim '" + displaySafe(name, 200) +
                               "', which no input of the model names (its dim_params)");
    if (range.first < 0 || range.first > range.second)
      return Status::error(KILN_INVALID_ARGUMENT,
                           "the bounds of the dim '" + displaySafe(name, 200) + "' are " +
                               std::to_string(range.first) + ".." +
                               std::to_string(range.second) +
                               ": the least must be 0 or more and at most the greatest");
  }
  return {};
}

bool parseDimBound(const std::string &text, std::string &name,
                   std::pair<int64_t, int64_t> &range) {
  size_t eq = text.find('='), dots = text.find("..");
  if (eq == std::string::npos || eq == 0 || dots == std::string::npos || dots < eq)
    return false;
  std::string lo = text.substr(eq + 1, dots - eq - 1), hi = text.substr(dots + 2);
  char *endLo = nullptr, *endHi = nullptr;
  long long least = std::strtoll(lo.c_str(), &endLo, 10);
  long long greatest = std::strtoll(hi.c_str(), &endHi, 10);
  if (lo.empty() || hi.empty() || *endLo || *endHi || least < 0 || least > greatest)
    return false;
  name = text.substr(0, eq);
  range = {least, greatest};
  return true;
}

} // namespace kiln
