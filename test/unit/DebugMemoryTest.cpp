// --debug-memory: a read of memory that no op wrote must show up as NaN in
// the outputs. The function below reads a tensor.empty (an allocation
// nothing initialises) and adds it to its input; compiled in debug mode,
// every output element must be NaN, and the same input through an honest
// function stays finite.
#include "JitTestSupport.h"

#include <cmath>

namespace {

// (The uninitialised tensor has its own shape, so that it is not the same
// value as the output's tensor.empty.)
const char *kReadsUninitialised = R"mlir(
#map = affine_map<(d0) -> (d0)>
#first = affine_map<(d0) -> (0)>
func.func @main(%x: tensor<16xf32>) -> tensor<16xf32> {
  %garbage = tensor.empty() : tensor<1xf32>
  %init = tensor.empty() : tensor<16xf32>
  %r = linalg.generic {indexing_maps = [#map, #first, #map], iterator_types = ["parallel"]}
      ins(%x, %garbage : tensor<16xf32>, tensor<1xf32>) outs(%init : tensor<16xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<16xf32>
  return %r : tensor<16xf32>
}
)mlir";

const char *kHonest = R"mlir(
#map = affine_map<(d0) -> (d0)>
func.func @main(%x: tensor<16xf32>) -> tensor<16xf32> {
  %init = tensor.empty() : tensor<16xf32>
  %r = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
      ins(%x : tensor<16xf32>) outs(%init : tensor<16xf32>) {
  ^bb0(%a: f32, %c: f32):
    %s = arith.addf %a, %a : f32
    linalg.yield %s : f32
  } -> tensor<16xf32>
  return %r : tensor<16xf32>
}
)mlir";

/// Compiles `source` with the real lowering pipeline and runs it on 0..15.
std::vector<float> run(const char *source, bool debugMemory) {
  kiln::LoweringOptions opts;
  opts.codegen.debugMemory = debugMemory;
  kiln::testing::Lowered lowered = kiln::testing::lower(source, opts);
  int64_t workspace = lowered.workspaceSize();
  kiln::testing::Jitted code = kiln::testing::jit(std::move(lowered), 2);
  std::vector<float> x(16), y(16, 0.0f);
  if (!code.entry)
    return y;
  for (int i = 0; i < 16; ++i)
    x[i] = (float)i;
  alignas(64) static char scratch[1 << 16];
  EXPECT_LE(workspace, (int64_t)sizeof(scratch));
  void *buffers[] = {x.data(), y.data(), scratch};
  code.entry(buffers);
  return y;
}

TEST(DebugMemory, UninitialisedReadsBecomeNaN) {
  for (float v : run(kReadsUninitialised, /*debugMemory=*/true))
    EXPECT_TRUE(std::isnan(v));
}

TEST(DebugMemory, InitialisedDataIsUnaffected) {
  std::vector<float> y = run(kHonest, /*debugMemory=*/true);
  for (int i = 0; i < 16; ++i)
    EXPECT_EQ(y[i], 2.0f * i);
}

} // namespace
