// The reference interpreter of the kiln dialect: evaluates an imported
// module (kiln ops, plus the scf/tensor/arith ops the importer writes for
// ONNX control flow) by plain loops on host tensors.
//
// It exists to check the compiler: `CompileOptions::interpret` runs a model
// through it instead of generated code (kiln-conformance --interpret), and
// kiln-run --verify compares the two node by node. It shares nothing with
// the code generator but the op definitions and shape inference that run
// before it.
#ifndef KILN_INTERP_INTERPRETER_H
#define KILN_INTERP_INTERPRETER_H

#include "kiln/Support/Status.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include <functional>
#include <memory>

namespace kiln::interp {

struct HostTensor;

class Program {
public:
  /// `describe` formats an op's location for error messages.
  Program(std::unique_ptr<mlir::MLIRContext> ctx, mlir::OwningOpRef<mlir::ModuleOp> module,
          std::function<std::string(mlir::Location)> describe);
  ~Program();

  /// Runs the module's function on `inputs` (one per argument, of its
  /// element type); `outputs` get one new tensor per result. Safe to call
  /// from several threads at once.
  Status run(const std::vector<const kiln_tensor *> &inputs,
             std::vector<kiln_tensor *> &outputs) const;

private:
  std::unique_ptr<mlir::MLIRContext> ctx;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::function<std::string(mlir::Location)> describe;
  struct Constants;
  std::unique_ptr<Constants> constants; ///< every constant op's value, decoded once
};

} // namespace kiln::interp

#endif
