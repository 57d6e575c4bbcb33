// Fuzz target: model bytes -> protobuf parse, ONNX checker, import into the
// kiln dialect, verification, shape inference and folding, the tensor size
// bound. Each input must end in verified IR or an error with a message;
// libFuzzer (with ASan and UBSan) catches the crashes, hangs and memory
// errors on the way.
#include "FuzzSupport.h"

#include "Driver.h"
#include "kiln/Frontend/Importer.h"
#include "kiln/Frontend/ModelLoader.h"
#include "kiln/Pipelines/Pipelines.h"
#include "mlir/Pass/PassManager.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  kiln::LoadedModel model;
  std::string error;
  if (!kiln::loadModelFromBuffer(data, size, "", model, error)) {
    kiln::fuzz::requireMessage(error, "loadModelFromBuffer");
    return 0;
  }
  auto ctx = kiln::createCompilerContext();
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler handler(ctx.get(), [&](mlir::Diagnostic &d) {
    diagnostics += d.str() + "\n";
    return mlir::success();
  });
  mlir::OwningOpRef<mlir::ModuleOp> module = kiln::importModel(*ctx, model, {});
  if (!module) {
    kiln::fuzz::requireMessage(diagnostics, "importModel");
    return 0;
  }
  // The importer promises verified IR: invalid IR here is an importer bug,
  // even though the pass manager below would turn it into an error.
  if (mlir::failed(mlir::verify(*module)))
    kiln::fuzz::broken("importModel returned IR that does not verify", diagnostics);
  mlir::PassManager pm(ctx.get());
  kiln::buildKilnOptimizationPipeline(pm);
  if (mlir::failed(pm.run(*module))) {
    kiln::fuzz::requireMessage(diagnostics, "shape inference and folding");
    return 0;
  }
  kiln::Status s = kiln::checkTensorSizes(*module, 64 << 20);
  if (!s.ok())
    kiln::fuzz::requireMessage(s.message, "checkTensorSizes");
  return 0;
}
