// The compile driver shared by the JIT (Model) and kilnc (emit): context
// set-up, diagnostics that name ONNX nodes, and the pass pipelines in order.
#ifndef KILN_API_DRIVER_H
#define KILN_API_DRIVER_H

#include "kiln/Frontend/Importer.h"
#include "kiln/IR/Dtypes.h"
#include "kiln/Kiln.h"
#include "kiln/Pipelines/Pipelines.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"

#include <array>
#include <chrono>
#include <functional>

namespace kiln {

/// A context with every dialect kiln's pipelines need, single-threaded
/// (compiles are small; callers parallelise across models instead).
std::unique_ptr<mlir::MLIRContext> createCompilerContext();

/// Collects diagnostics as lines "SOURCE: node 'NAME' (OPTYPE): message".
class DiagnosticCollector {
public:
  explicit DiagnosticCollector(mlir::MLIRContext &ctx);
  ~DiagnosticCollector();
  std::string take();

private:
  mlir::MLIRContext &ctx;
  uint64_t handlerId;
  std::string text;
};

/// Formats a location the way kiln's diagnostics print it.
std::string describeLocation(mlir::Location loc);

/// Import with the given input shapes, then shape inference and folding,
/// then the tensor size bound (checkTensorSizes).
/// For the GPU path (and its tensor passes on the CPU), which generates
/// code for static shapes only: an error naming the first node whose result
/// has dims computed from data (a value-defined dim), when every input is
/// static.
Status checkGpuShapes(mlir::ModuleOp module);

Status importAndOptimize(mlir::MLIRContext &ctx, const LoadedModel &model,
                         const std::vector<std::vector<int64_t>> &inputShapes,
                         const std::map<size_t, std::string> &inputValues,
                         mlir::OwningOpRef<mlir::ModuleOp> &module,
                         const std::vector<int64_t> &inputLayout = {},
                         uint64_t maxTensorBytes = 0, bool forGpu = false);

/// The per-tensor size bound: `requested` when non-zero, else
/// KILN_MAX_TENSOR_BYTES, else kDefaultMaxTensorBytes.
constexpr uint64_t kDefaultMaxTensorBytes = uint64_t(16) << 30;
uint64_t tensorByteLimit(uint64_t requested);

/// Refuses, naming the ONNX node, a module with a static tensor over the
/// bound (or whose size overflows 64 bits): a model asking for absurd
/// memory (ConstantOfShape of 2^40, a Resize to 10^6 x 10^6) gets this error
/// before anything is allocated. Run by importAndOptimize.
Status checkTensorSizes(mlir::ModuleOp module, uint64_t maxTensorBytes);

/// Test-only miscompile (CompileOptions::testPerturbNode): 1 is added to
/// the first float value that leaves the ONNX node named `node`.
Status perturbNode(mlir::ModuleOp module, const std::string &node);

enum class LowerTo { Linalg, LLVMDialect };
/// Runs buildLowerToLinalgPipeline or buildLowerToLLVMPipeline with
/// `options`, passed along unchanged.
Status lower(mlir::ModuleOp module, LowerTo stage, const LoweringOptions &options);


/// The compiled signature of an imported module's function: names, dtypes
/// and static dims. An error names a value whose shape is still unknown.
Status describeSignature(mlir::ModuleOp module, std::vector<TensorInfo> &inputs,
                         std::vector<TensorInfo> &outputs,
                         bool runtimeDims = false);

/// Reports each stage's duration to a progress callback.
class StageClock {
public:
  using Callback = std::function<void(const std::string &stage, double seconds)>;
  explicit StageClock(Callback progress) : progress(std::move(progress)) {}
  void done(const std::string &stage);

private:
  Callback progress;
  std::chrono::steady_clock::time_point last = std::chrono::steady_clock::now();
};

/// The input shapes `options` give (by position, then by name; an empty
/// entry keeps the declared shape). A name that is no model input is an
/// error.
Status resolveInputShapes(const LoadedModel &model, const EmitOptions &options,
                          std::vector<std::vector<int64_t>> &shapes);

/// The front half of kilnc: applies `options`' shapes (by position and by
/// name) to `model` and imports and optimises it.
Status importForEmit(const LoadedModel &model, const EmitOptions &options, StageClock &clock,
                     std::unique_ptr<mlir::MLIRContext> &ctx,
                     mlir::OwningOpRef<mlir::ModuleOp> &module);

/// A model lowered for CUDA: the kernels' PTX, their names in the order the
/// host code indexes them, the weights' bytes for the device, and the
/// workspace size; the module is left as the host code in the LLVM
/// dialect, with `void entryName(void **buffers)` over device addresses
/// (kiln/cuda.h, kiln_cuda_program_run).
struct CudaHostCode {
  std::string ptx;
  std::vector<std::string> kernels;
  /// Per kernel: its parameter count, and grid x, y, z, block x, y, z and
  /// dynamic shared bytes (0 where the host code computes one per run).
  std::vector<int64_t> arities;
  std::vector<std::array<int64_t, 7>> launches;
  std::string constants;
  int64_t workspaceBytes = 0;
};

Status lowerForCuda(mlir::ModuleOp module, const std::string &chip, const std::string &entryName,
                    CudaHostCode &out, const GpuPassOptions &gpu = {});

/// Refuses modules whose outputs an ahead-of-time entry point cannot return:
/// sequences, optionals, and run-time row counts unless `rowCounts` (a CPU
/// bundle, whose descriptor carries them: kiln_output_rows).
Status checkFixedOutputs(mlir::ModuleOp module, bool rowCounts = false);

/// For --emit=ptx, and for the host code (obj, asm, llvm, bundle) of a GPU
/// triple: the default triple (nvptx64-nvidia-cuda) and GPU (sm_80), and a
/// check of both.
Status resolveGpuTarget(EmitOptions &options);

} // namespace kiln

#endif
