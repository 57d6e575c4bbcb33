// The code generator's choices (kiln/Support/CodegenOptions.h) reach the
// code through every driver: kilnc's emit() honours the ones the JIT does,
// keys its cache on them, and refuses where a target cannot honour them,
// as the JIT refuses what it cannot do.
#include "kiln/Kiln.h"

#include <gtest/gtest.h>

#include <filesystem>

#ifndef KILN_EXAMPLES_DIR
#error "KILN_EXAMPLES_DIR must be defined"
#endif

namespace {

const std::string kTinyMlp = std::string(KILN_EXAMPLES_DIR) + "/tiny_mlp/model.onnx";

/// LLVM IR of the tiny MLP with `options`, at -O0 so that nothing the
/// choices add is optimised away.
std::string llvmIr(kiln::EmitOptions options) {
  options.kind = kiln::EmitKind::LLVMIR;
  options.optLevel = 0;
  std::string out;
  kiln::Status s = kiln::emit(kTinyMlp, options, out);
  EXPECT_TRUE(s.ok()) << s.message;
  return out;
}

bool has(const std::string &text, const std::string &what) {
  return text.find(what) != std::string::npos;
}

TEST(EmitOptions, ProfilingBracketsKernelsWithTheRuntimeHooks) {
  kiln::EmitOptions options;
  EXPECT_FALSE(has(llvmIr(options), "kiln_profile_begin"));
  options.profile = true;
  std::string profiled = llvmIr(options);
  EXPECT_TRUE(has(profiled, "call i64 @kiln_profile_begin"));
  EXPECT_TRUE(has(profiled, "call void @kiln_profile_end"));
  EXPECT_TRUE(has(profiled, "c\"fc2 (MatMul)\\00\"")); // named by its ONNX node
}

// With debug memory, intermediates are allocated one by one and filled with
// a quiet NaN (LLVM prints float constants as doubles: 0x7FF8000000000000);
// without, they live in the planned workspace and nothing is NaN.
TEST(EmitOptions, DebugMemoryFillsIntermediatesWithNaN) {
  kiln::EmitOptions options;
  EXPECT_FALSE(has(llvmIr(options), "0x7FF8000000000000"));
  options.debugMemory = true;
  EXPECT_TRUE(has(llvmIr(options), "0x7FF8000000000000"));
}

// A cache keyed without a choice would give the first output for both.
TEST(EmitOptions, TheCacheKeysOnEveryChoice) {
  auto dir = std::filesystem::temp_directory_path() /
             ("kiln-emit-options-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  std::filesystem::remove_all(dir);
  kiln::EmitOptions options;
  options.cache = true;
  options.cacheDir = dir.string();
  std::string plain = llvmIr(options);
  options.debugMemory = true;
  std::string debug = llvmIr(options);
  EXPECT_NE(plain, debug);
  EXPECT_TRUE(has(debug, "0x7FF8000000000000"));
  std::filesystem::remove_all(dir);
}

TEST(EmitOptions, CpuOnlyChoicesAreRefusedForNvidiaTargets) {
  for (int which = 0; which < 3; ++which) {
    kiln::EmitOptions options;
    options.kind = kiln::EmitKind::PTX;
    options.profile = which == 0;
    options.debugMemory = which == 1;
    options.gpuTensorPassesOnCpu = which == 2;
    std::string out;
    kiln::Status s = kiln::emit(kTinyMlp, options, out);
    EXPECT_EQ(s.code, KILN_INVALID_ARGUMENT) << which;
    EXPECT_EQ(s.message, "NVIDIA GPU targets: profiling (--profile), debug memory and the GPU "
                         "tensor passes on the CPU are CPU-only");
  }
}

TEST(EmitOptions, TheJitTakesNoTargetTriple) {
  kiln::CompileOptions options;
  options.triple = "aarch64-linux-gnu";
  std::string err;
  EXPECT_FALSE(kiln::Model::load(kTinyMlp, options, &err));
  EXPECT_EQ(err, "the JIT generates code for this machine and takes no target triple "
                 "('aarch64-linux-gnu'): compile for other targets with kiln::emit or kilnc");
}

} // namespace
