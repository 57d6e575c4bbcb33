// ONNX graph -> kiln dialect. MLIR-heavy; compiler-internal.
#ifndef KILN_FRONTEND_IMPORTER_H
#define KILN_FRONTEND_IMPORTER_H

#include "kiln/Frontend/ModelLoader.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <map>
#include <optional>
#include <vector>

namespace kiln {

/// How a graph input arrives, or a graph output leaves, as function
/// arguments or results: one tensor, a sequence of `n >= 0` tensors (each
/// its own argument), or an empty optional (no argument).
enum : int64_t { kLayoutTensor = -1, kLayoutNone = -2 };

struct ImportOptions {
  /// Per graph input: kLayoutTensor, kLayoutNone or a sequence length.
  /// Empty: every input is one tensor (sequence or optional inputs are then
  /// an error). A present optional is laid out as what it holds.
  std::vector<int64_t> inputLayout;
  /// Concrete shapes for the function arguments (the graph inputs with
  /// sequences flattened, see inputLayout). An empty vector keeps the
  /// declared shapes, with unknown dims as `?`. When given, each must agree
  /// with the declared static dims.
  std::vector<std::vector<int64_t>> inputShapes;
  /// Inputs whose values the executable is specialised on, as raw
  /// little-endian bytes: the importer uses them as constants (the argument
  /// stays in the signature). For small inputs that determine shapes or
  /// other compile-time facts (reshape targets, axes, resize scales).
  std::map<size_t, std::string> inputValues;
  /// Name of the generated function.
  std::string functionName = "main";
  /// RNN, GRU and LSTM of two steps or more as a loop over time (scf.for);
  /// false unrolls them. The GPU path unrolls: its kernels cannot yet take
  /// a view at an offset known only at run time (the step's row).
  bool loopRecurrences = true;
};

/// Imports the model's main graph as a `func.func` of kiln ops in a new
/// module. Each op's location names its ONNX node. When a graph output is
/// not one tensor, the module has a `kiln.output_layout` i64 array attribute
/// (entries as in ImportOptions::inputLayout) and the function's results
/// are the flattened tensors. When an output's number of rows is known only
/// at run time (RowCounts.h), the module has a `kiln.output_row_counts` i64
/// array: per flattened output, the index of the hidden result (after the
/// visible ones) holding that number as a scalar i64, or -1. On failure, diagnostics
/// have been emitted through the context and an empty ref is returned.
mlir::OwningOpRef<mlir::ModuleOp> importModel(mlir::MLIRContext &context,
                                              const LoadedModel &model,
                                              const ImportOptions &options);

/// The ONNX opset the model imports for the default domain.
int64_t defaultDomainOpset(const onnx::ModelProto &model);

/// The (op type, opset range) pairs the importer has rules for, for
/// documentation and `kilnc --list-ops`.
struct ImportRuleInfo {
  std::string opType;
  int64_t minOpset, maxOpset;
};
std::vector<ImportRuleInfo> listImportRules();

} // namespace kiln

#endif
