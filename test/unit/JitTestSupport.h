// Test support: MLIR source through Kiln's real lowering pipeline and into
// the JIT, in two steps so that a test can look at (or change) the lowered
// module in between.
#ifndef KILN_TEST_JITTESTSUPPORT_H
#define KILN_TEST_JITTESTSUPPORT_H

#include "kiln/Target/TargetEmitter.h"
#include "kiln/Pipelines/Pipelines.h"
#include "mlir/Pass/PassManager.h"

#include "Driver.h"

#include "mlir/Parser/Parser.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Target/TargetMachine.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace kiln::testing {

/// A module lowered to the LLVM dialect, with the context that owns it.
struct Lowered {
  std::unique_ptr<mlir::MLIRContext> ctx;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  int64_t workspaceSize() const {
    auto ws = (*module)->getAttrOfType<mlir::IntegerAttr>("kiln.workspace_size");
    return ws ? ws.getInt() : 0;
  }
};

inline Lowered lower(const std::string &source, const LoweringOptions &options = {}) {
  Lowered l;
  l.ctx = createCompilerContext();
  l.module = mlir::parseSourceString<mlir::ModuleOp>(source, l.ctx.get());
  EXPECT_TRUE(l.module);
  mlir::PassManager pm(l.ctx.get());
  buildLowerToLLVMPipeline(pm, options);
  EXPECT_TRUE(mlir::succeeded(pm.run(*l.module)));
  return l;
}

/// JIT code for the host and its kiln_entry (null, with a test failure, on
/// an error). The MLIR context is released before code generation, as in
/// Model::compile: the code must not depend on it.
struct Jitted {
  std::unique_ptr<JitCode> code;
  void (*entry)(void **) = nullptr;
};

inline Jitted jit(Lowered lowered, int optLevel, const ConstantPool *pool = nullptr) {
  Jitted j;
  std::string error;
  TargetOptions target;
  auto tm = createTargetMachine(target, error);
  EXPECT_TRUE(tm) << error;
  if (!tm)
    return j;
  auto llvmCtx = std::make_unique<llvm::LLVMContext>();
  auto llvmModule = translateAndOptimize(*lowered.module, *llvmCtx, *tm, optLevel, error);
  EXPECT_TRUE(llvmModule) << error;
  if (!llvmModule)
    return j;
  lowered.module = nullptr;
  lowered.ctx.reset();
  j.code = JitCode::create(std::move(llvmModule), std::move(llvmCtx), target, pool, error);
  EXPECT_TRUE(j.code) << error;
  if (!j.code)
    return j;
  j.entry = reinterpret_cast<void (*)(void **)>(j.code->lookup("kiln_entry", error));
  EXPECT_TRUE(j.entry) << error;
  return j;
}

} // namespace kiln::testing

#endif
