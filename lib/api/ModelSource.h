// A model's bytes, their digest and its declared signature, with the
// protobuf parsed only when a compile needs it.
//
// Why: a warm start (every executable in the compile cache) needs only the
// digest, to find the entries, and the declared inputs and outputs. Parsing
// and checking ResNet-50's 100 MB protobuf costs more than the whole warm
// start is allowed, so the signature and the list of external data files
// are cached too, under the digest of the model file's bytes.
#ifndef KILN_API_MODELSOURCE_H
#define KILN_API_MODELSOURCE_H

#include "kiln/Frontend/ModelLoader.h"
#include "kiln/Kiln.h"

#include <memory>
#include <string>
#include <vector>

namespace llvm {
class MemoryBuffer;
}

namespace kiln {

class CompileCache;

class ModelSource {
public:
  ModelSource();
  ~ModelSource();
  ModelSource(ModelSource &&);
  ModelSource &operator=(ModelSource &&);

  /// Hashes the model file. With a cache that knows its bytes, the protobuf is
  /// not parsed (a cached signature stands for it, and its external data is
  /// hashed, not read); else it is parsed and checked now, and the cache
  /// learns its signature.
  static Status openFile(const std::string &path, CompileCache *cache, ModelSource &out);
  /// A model in memory is parsed at once: the caller's buffer need not
  /// outlive the call.
  static Status openBuffer(const void *data, size_t size, const std::string &baseDir,
                           ModelSource &out);

  /// xxh3-128 (hex) of the model's bytes and its external data files: what
  /// the compile cache keys compiled code on.
  const std::string &digest() const { return sourceDigest; }
  const std::vector<TensorInfo> &inputs() const { return declaredInputs; }
  const std::vector<TensorInfo> &outputs() const { return declaredOutputs; }

  /// The parsed model, parsed now if it was not yet. Not thread-safe.
  Status parsed(const LoadedModel *&model);

private:
  Status parseNow(const llvm::MemoryBuffer &bytes);
  Status finishParsed();

  std::string path, baseDir, fileDigest, sourceDigest;
  std::vector<TensorInfo> declaredInputs, declaredOutputs;
  std::vector<std::string> externalFileDigests; ///< as loaded.externalFiles
  LoadedModel loaded; ///< proto null until parsed
};

/// An ONNX graph input or output as the API describes it (dims -1 where
/// unknown, dim_params as dimNames).
TensorInfo declaredTensorInfo(const onnx::ValueInfoProto &v);

/// Bounds declared on the dims a model names (CompileOptions and
/// EmitOptions::dimBounds): each name must be an ONNX dim_param of one of
/// `inputs`, and 0 <= least <= greatest.
Status checkDimBounds(const std::vector<TensorInfo> &inputs, const DimBounds &bounds);

} // namespace kiln

#endif
