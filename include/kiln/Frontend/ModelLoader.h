// Reading ONNX models: protobuf parsing, ONNX's own checker, and external
// data resolved with containment checks. No MLIR here.
#ifndef KILN_FRONTEND_MODELLOADER_H
#define KILN_FRONTEND_MODELLOADER_H

#include <memory>
#include <map>
#include <string>

#include <vector>

namespace onnx {
class ModelProto;
class TensorProto;
class ValueInfoProto;
} // namespace onnx

namespace kiln {

/// A parsed and checked model whose external tensors have been read in.
struct LoadedModel {
  std::shared_ptr<onnx::ModelProto> proto;
  /// Folder that external data paths are relative to ("" for none).
  std::string baseDir;
  /// Where the model came from, for diagnostics ("<memory>" for buffers).
  std::string sourceName;
  /// The external data files its tensors were read from, as the model names
  /// them (relative to baseDir), each once, sorted: what besides the model's
  /// own bytes decides its contents (the compile cache hashes them).
  std::vector<std::string> externalFiles;
};

/// Loads `path`. On failure returns false and sets `error` to one line that
/// names the problem (missing file, not an ONNX model, failed check, bad
/// external data...).
bool loadModelFromFile(const std::string &path, LoadedModel &out, std::string &error);

/// Loads a serialized model from memory. External data, if any, is looked
/// up under `baseDir`; with an empty `baseDir` external data is an error.
bool loadModelFromBuffer(const void *data, size_t size, const std::string &baseDir,
                         LoadedModel &out, std::string &error);

/// Byte ranges of external files already read, by (device, inode): two
/// tensors over the same bytes are refused.
struct ExternalRange {
  int64_t begin, end;
  std::string tensor;
};
using ExternalRanges = std::map<std::pair<uint64_t, uint64_t>, std::vector<ExternalRange>>;

/// Reads one tensor's external data into its raw_data, enforcing that the
/// file lies inside `baseDir` (no absolute path, no `..` escape, no symlink
/// leading out, no NUL byte; "%2e" is taken literally), that it is opened
/// once, beneath the folder (openat2 RESOLVE_BENEATH where the kernel has
/// it) and checked and read through that descriptor, that it has no other
/// hard link (unless KILN_ALLOW_HARD_LINKS is set), that offset and length
/// are numbers in [0, 2^63) lying within the file, and, with `ranges`, that
/// no other tensor read the same bytes.
bool resolveExternalData(onnx::TensorProto &tensor, const std::string &baseDir,
                         std::string &error, ExternalRanges *ranges = nullptr);

/// The model's real inputs, in order: graph inputs that are not also
/// initializers (older models list their weights as inputs too).
std::vector<const onnx::ValueInfoProto *> modelInputs(const onnx::ModelProto &model);

/// The data of `tensor` as dense little-endian bytes: `count` elements of
/// `elementBytes` each (booleans as one byte). Reads raw_data or the typed
/// field the data type uses (float_data, int64_data, int32_data holding
/// narrow integers and 16-bit float bit patterns, ...). On a size mismatch
/// returns false with `error` saying so.
bool decodeTensorPayload(const onnx::TensorProto &tensor, size_t elementBytes, int64_t count,
                         std::string &bytes, std::string &error);

} // namespace kiln

#endif
