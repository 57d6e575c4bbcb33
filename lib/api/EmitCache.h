// kilnc's outputs in the on-disk compile cache (EmitOptions::cache).
#ifndef KILN_API_EMITCACHE_H
#define KILN_API_EMITCACHE_H

#include "ModelSource.h"

#include "kiln/Kiln.h"

#include <memory>
#include <string>
#include <vector>

namespace kiln {

class CompileCache;

/// The model at `path` and the cache entry for compiling it with
/// `options`. The entry is inert when the options turn the cache off, for
/// text forms of MLIR (cheap, and what IR printing flags inspect), and when
/// the model cannot be read. The key and the compile read the model once:
/// the digest the key holds is the digest of what is compiled.
class EmitCache {
public:
  EmitCache(const std::string &path, const EmitOptions &options);
  ~EmitCache();
  /// The parsed model (parsed now on a warm signature), or why it cannot be
  /// loaded.
  Status model(const LoadedModel *&model);
  /// Fills `outputs` (in the order they were stored) from an intact entry.
  bool load(const std::vector<std::string *> &outputs) const;
  void store(const std::vector<const std::string *> &outputs) const;

private:
  ModelSource source;
  Status opened;
  std::unique_ptr<CompileCache> cache;
  std::string key;
};

} // namespace kiln

#endif
