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

#include "llvm/AsmParser/Parser.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/SourceMgr.h"
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

// A squeeze-excitation scale over a 14 x 960 map: out = s[c] * x[i][c].
constexpr const char *kScaleLoops = R"(
define void @scale(ptr noalias %s, ptr noalias %x, ptr noalias %out) {
entry:
  br label %rows
rows:
  %i = phi i64 [ 0, %entry ], [ %i.next, %rows.end ]
  br label %cols
cols:
  %c = phi i64 [ 0, %rows ], [ %c.next, %cols ]
  %row = mul i64 %i, 960
  %at = add i64 %row, %c
  %sp = getelementptr float, ptr %s, i64 %c
  %xp = getelementptr float, ptr %x, i64 %at
  %op = getelementptr float, ptr %out, i64 %at
  %sv = load float, ptr %sp
  %xv = load float, ptr %xp
  %r = fmul float %sv, %xv
  store float %r, ptr %op
  %c.next = add i64 %c, 1
  %c.done = icmp eq i64 %c.next, 960
  br i1 %c.done, label %rows.end, label %cols
rows.end:
  %i.next = add i64 %i, 1
  %i.done = icmp eq i64 %i.next, 14
  br i1 %i.done, label %exit, label %rows
exit:
  ret void
}
)";

size_t countMultiplies(const llvm::Function &fn) {
  size_t n = 0;
  for (const llvm::BasicBlock &bb : fn)
    for (const llvm::Instruction &inst : bb)
      n += inst.getOpcode() == llvm::Instruction::FMul;
  return n;
}

TEST(Translation, CpuPipelineDoesNotFullyUnrollLongVectorLoops) {
  std::string error;
  std::unique_ptr<llvm::TargetMachine> tm = kiln::createTargetMachine({}, error);
  ASSERT_TRUE(tm) << error;
  llvm::LLVMContext llvmContext;
  llvm::SMDiagnostic diag;
  std::unique_ptr<llvm::Module> ir = llvm::parseAssemblyString(kScaleLoops, diag, llvmContext);
  ASSERT_TRUE(ir) << diag.getMessage().str();
  ir->setDataLayout(tm->createDataLayout());
  ir->setTargetTriple(tm->getTargetTriple());
  kiln::optimizeModule(*ir, *tm, 3);
  // LLVM's default unrolled both loops after vectorising them: 14 x 960 / 16
  // = 840 vector multiplies in one block (on AVX-512), which the machine
  // schedulers take seconds over. Kiln's limit keeps the loops: a few dozen.
  llvm::Function *fn = ir->getFunction("scale");
  ASSERT_TRUE(fn);
  size_t multiplies = countMultiplies(*fn);
  EXPECT_GT(multiplies, 0u);
  EXPECT_LT(multiplies, 100u);
  // The limit is LLVM's command-line option, given only for the pipeline.
  auto &options = llvm::cl::getRegisteredOptions();
  auto it = options.find("unroll-full-max-count");
  ASSERT_NE(it, options.end());
  EXPECT_EQ(it->second->getNumOccurrences(), 0);
}

} // namespace
