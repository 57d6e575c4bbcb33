// The compile driver shared by the JIT (Model) and kilnc (emit): context
// set-up, diagnostics that name ONNX nodes, and the pass pipelines in order.
#ifndef KILN_API_DRIVER_H
#define KILN_API_DRIVER_H

#include "kiln/Frontend/Importer.h"
#include "kiln/Kiln.h"

#include "mlir/IR/MLIRContext.h"

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

/// Import with the given input shapes, then shape inference and folding.
Status importAndOptimize(mlir::MLIRContext &ctx, const LoadedModel &model,
                         const std::vector<std::vector<int64_t>> &inputShapes,
                         const std::map<size_t, std::string> &inputValues,
                         mlir::OwningOpRef<mlir::ModuleOp> &module,
                         const std::vector<int64_t> &inputLayout = {});

enum class LowerTo { Linalg, LLVMDialect };
Status lower(mlir::ModuleOp module, LowerTo stage, const std::string &entryName,
             bool debugMemory = false);

/// Signature types of a func's arguments and results.
kiln_dtype dtypeOf(mlir::Type elementType);

} // namespace kiln

#endif
