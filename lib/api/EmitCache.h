// kilnc's outputs in the on-disk compile cache (EmitOptions::cache).
#ifndef KILN_API_EMITCACHE_H
#define KILN_API_EMITCACHE_H

#include "kiln/Kiln.h"

#include <memory>
#include <string>
#include <vector>

namespace kiln {

class CompileCache;

/// The cache entry for compiling `path` with `options`. Inert when the
/// options turn the cache off, for text forms of MLIR (cheap, and what IR
/// printing flags inspect), and when the model cannot be read (the compile
/// then says why).
class EmitCache {
public:
  EmitCache(const std::string &path, const EmitOptions &options);
  ~EmitCache();
  /// Fills `outputs` (in the order they were stored) from an intact entry.
  bool load(const std::vector<std::string *> &outputs) const;
  void store(const std::vector<const std::string *> &outputs) const;

private:
  std::unique_ptr<CompileCache> cache;
  std::string key;
};

} // namespace kiln

#endif
