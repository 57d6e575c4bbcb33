// The data an ahead-of-time bundle carries besides its code: the runtime
// descriptor (kiln/runtime.h's kiln_model_desc) and the weights, either in
// the object or in storage that kiln_model_load_weights fills.
// Compiler-internal.
#ifndef KILN_TARGET_BUNDLE_H
#define KILN_TARGET_BUNDLE_H

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace llvm {
class Module;
}

namespace kiln {

struct ConstantPool;

struct BundleTensor {
  std::string name;
  int32_t dtype;
  std::vector<int64_t> dims; ///< -1: known only at run time
  /// For a bundle compiled once for every shape: each dim as the model
  /// names it ("batch", "seq + past", "256"); empty otherwise.
  std::vector<std::string> dimNames;
};

/// An output's run-time row count (kiln_output_rows).
struct BundleOutputRows {
  int32_t count = -1; ///< row-count buffer, -1 for fixed dims
  int32_t axis = 0;
};

/// The model compiled for one set of input shapes.
struct BundleVariant {
  std::vector<BundleTensor> inputs, outputs;
  /// Empty when every output has fixed dims, else one per output; outputs
  /// with a count have their largest dims in `outputs`.
  std::vector<BundleOutputRows> outputRows;
  int32_t numRowCounts = 0;
  uint64_t workspaceSize = 0;
  std::string entry; ///< its entry point's symbol
  /// Compiled once for every shape: how many dims are known only at run
  /// time (the -1s of inputs and outputs) and the function that checks the
  /// inputs' and computes the outputs' (ENTRY_dims); 0 and empty otherwise.
  int32_t numRuntimeDims = 0;
  std::string dimsFunction;
  /// Bounds declared on those dims (kilnc --dim NAME=LO..HI): one per
  /// input entry of the runtime dims array, with its name; empty where
  /// none were declared (kiln_model_desc.runtime_dim_bounds).
  std::vector<std::pair<int64_t, int64_t>> runtimeDimBounds;
  std::vector<std::string> runtimeDimNames;
};

/// A kernel of a CUDA bundle, as kiln_cuda_kernel_desc lists it.
struct BundleCudaKernel {
  std::string name;
  uint32_t grid[3] = {0, 0, 0}, block[3] = {0, 0, 0};
  uint32_t sharedBytes = 0, numParams = 0;
};

/// What a bundle for an NVIDIA GPU carries besides its host code
/// (kiln_cuda_code). Its weights are the bundle's weights.
struct BundleCuda {
  int32_t computeCapability = 0;
  bool archSpecific = false; ///< sm_NNa: that architecture only
  std::string ptx;
  std::vector<BundleCudaKernel> kernels;
};

struct BundleLayout {
  std::string name; ///< prefix of every exported symbol (a C identifier)
  std::string modelHash;
  /// One: a model of static shapes, whose descriptor is that variant's. More
  /// (kilnc --dim): the descriptor lists them and the runtime runs the one
  /// whose input dims match.
  std::vector<BundleVariant> variants;
  /// With several specialisations: the variant compiled once for every
  /// shape, which runs the shapes none of them fits (the descriptor's own
  /// entry); absent where the model's ops need static shapes.
  std::optional<BundleVariant> anyShape;
  bool externalWeights = false;
  uint64_t weightsSize = 0; ///< bytes, after identical constants are merged
  /// Set for a CUDA bundle: the descriptor's `cuda`.
  std::optional<BundleCuda> cuda;

  /// Per input (output): the dims the variants share, -1 where they differ.
  std::vector<BundleTensor> commonInputs() const;
  std::vector<BundleTensor> commonOutputs() const;
  uint64_t maxWorkspaceSize() const;
};

/// Before optimisation: makes every pool constant (extractConstants) an
/// offset into one array, NAME_weights, declared but not yet defined so the
/// optimiser never looks into the weights; gives every symbol but the
/// entry points internal linkage, so that two bundles (and the variants of
/// one) link into one program.
void bindBundleWeights(llvm::Module &module, const ConstantPool &pool, const std::string &name,
                       const std::vector<std::string> &entries);

/// After optimisation: defines NAME_weights (the pool's bytes, read-only, or
/// zeroed storage for an external weights file) and the descriptor
/// NAME_model. Large weights go to the large-data sections on x86-64, so a
/// model over 2 GB links.
void defineBundleData(llvm::Module &module, const ConstantPool &pool, const BundleLayout &layout);

} // namespace kiln

#endif
