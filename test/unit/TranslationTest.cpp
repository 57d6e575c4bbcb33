// translateToLLVMIR and Kiln's own argument attributes (kiln.name,
// kiln.dims, ... on the entry function's buffers, which the descriptor and
// bundle emitters read): MLIR's translation warns about every attribute it
// does not know, printing the whole function into each warning (0.7 s of a
// decoder's compile), so translateToLLVMIR sets them aside while it
// translates and puts them back afterwards.
#include "kiln/IR/KilnDialect.h"
#include "kiln/Target/TargetEmitter.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include "llvm/IR/Function.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Target/TargetMachine.h"

#include <gtest/gtest.h>

namespace {

constexpr const char *kModule = R"(
llvm.func @main(%arg0: !llvm.ptr {kiln.name = "x", kiln.dim_names = ["batch", ""], llvm.noalias},
                %arg1: !llvm.ptr {llvm.noalias}, %arg2: i64) {
  llvm.return
}
)";

TEST(Translation, KilnArgumentAttributesRaiseNoWarningAndStayOnTheModule) {
  mlir::MLIRContext ctx;
  // (With the kiln dialect loaded, as in every compile, the translation
  // looks for a translation interface of it for the kiln.* attributes.)
  ctx.loadDialect<mlir::LLVM::LLVMDialect, kiln::KilnDialect>();
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::parseSourceString<mlir::ModuleOp>(kModule, &ctx);
  ASSERT_TRUE(module);

  int warnings = 0;
  mlir::ScopedDiagnosticHandler handler(&ctx, [&](mlir::Diagnostic &d) {
    warnings += d.getSeverity() == mlir::DiagnosticSeverity::Warning;
    return mlir::success();
  });
  std::string error;
  std::unique_ptr<llvm::TargetMachine> tm = kiln::createTargetMachine({}, error);
  ASSERT_TRUE(tm) << error;
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> ir = kiln::translateToLLVMIR(*module, llvmContext, *tm, error);
  ASSERT_TRUE(ir) << error;
  EXPECT_EQ(warnings, 0);

  // LLVM's own attributes reach the IR ...
  llvm::Function *fn = ir->getFunction("main");
  ASSERT_TRUE(fn);
  EXPECT_TRUE(fn->hasParamAttribute(0, llvm::Attribute::NoAlias));
  EXPECT_TRUE(fn->hasParamAttribute(1, llvm::Attribute::NoAlias));
  // ... and Kiln's are still on the module for whoever reads them next.
  auto main = module->lookupSymbol<mlir::LLVM::LLVMFuncOp>("main");
  ASSERT_TRUE(main);
  auto name = main.getArgAttrOfType<mlir::StringAttr>(0, "kiln.name");
  ASSERT_TRUE(name);
  EXPECT_EQ(name.getValue(), "x");
  EXPECT_TRUE(main.getArgAttr(0, "kiln.dim_names"));
  EXPECT_TRUE(main.getArgAttr(0, mlir::LLVM::LLVMDialect::getNoAliasAttrName()));
}

} // namespace
