// kiln-opt: mlir-opt with the kiln dialect and passes, for lit tests.
#include "kiln/Pipelines/Pipelines.h"

#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  kiln::registerKilnDialects(registry);
  kiln::registerKilnPassesAndPipelines();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Kiln optimizer driver\n", registry));
}
