// kilnc's outputs (objects, assembly, LLVM IR, bundles) in the compile
// cache, keyed like the JIT's executables (see Model.cpp's diskKey).
#include "EmitCache.h"

#include "CompileCache.h"
#include "ModelSource.h"

#include "kiln/Target/TargetEmitter.h"

#include "llvm/Config/llvm-config.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Target/TargetMachine.h"

namespace kiln {

EmitCache::EmitCache(const std::string &path, const EmitOptions &options) {
  bool cached =
      options.cache && options.kind != EmitKind::Kiln && options.kind != EmitKind::Linalg;
  auto cache = cached ? std::make_unique<CompileCache>(options.cacheDir) : nullptr;
  if (cache && cache->directory().empty())
    cache.reset();
  // The model's digest, from the cached signature when there is one: no
  // parse on a hit. Without a cache, the model is parsed now.
  opened = ModelSource::openFile(path, cache.get(), source);
  if (!cache || !opened.ok())
    return;
  std::string error;
  auto tm = createTargetMachine(options, error);
  if (!tm)
    return;
  CacheKey k;
  k.add("kilnc output").add(compilerIdentity()).add(version()).add(LLVM_VERSION_STRING);
  k.add(KILN_ABI_VERSION).add(source.digest()).add((int64_t)options.kind);
  // The resolved target: "host" means this machine's CPU and features.
  k.add(tm->getTargetTriple().str()).add(tm->getTargetCPU().str());
  k.add(tm->getTargetFeatureString().str()).add(static_cast<const CodegenOptions &>(options));
  k.add((int64_t)options.inputShapes.size());
  for (const auto &shape : options.inputShapes)
    k.add(shape);
  for (const auto &[name, dims] : options.inputShapesByName)
    k.add(name).add(dims);
  k.add((int64_t)options.dimValues.size());
  for (const auto &[name, values] : options.dimValues)
    k.add(name).add(values);
  k.add((int64_t)options.dimBounds.size());
  for (const auto &[name, range] : options.dimBounds)
    k.add(name).add(std::vector<int64_t>{range.first, range.second});
  k.add(options.entryName).add(options.bundleName).add(options.externalWeights ? 1 : 0);
  k.add(options.tune ? options.tuneThreads : -1);
  // A bundle's header names the model file.
  k.add(llvm::sys::path::filename(path).str());
  key = k.digest();
  this->cache = std::move(cache);
}

EmitCache::~EmitCache() = default;

Status EmitCache::model(const LoadedModel *&model) {
  if (!opened.ok())
    return opened;
  return source.parsed(model);
}

bool EmitCache::load(const std::vector<std::string *> &outputs) const {
  if (!cache)
    return false;
  std::shared_ptr<llvm::MemoryBuffer> entry;
  std::string_view payload;
  if (!cache->load(key, entry, payload))
    return false;
  PayloadReader r(payload);
  if (r.u64() != outputs.size())
    return false;
  std::vector<std::string_view> parts;
  for (size_t i = 0; r.ok && i < outputs.size(); ++i)
    parts.push_back(r.bytes());
  if (!r.ok || r.pos != payload.size())
    return false;
  for (size_t i = 0; i < outputs.size(); ++i)
    outputs[i]->assign(parts[i]);
  return true;
}

void EmitCache::store(const std::vector<const std::string *> &outputs) const {
  if (!cache)
    return;
  PayloadWriter w;
  w.u64(outputs.size());
  for (const std::string *o : outputs)
    w.bytes(*o);
  cache->store(key, w.out);
}

} // namespace kiln
