// extractConstants: large constants leave the generated code for a host
// buffer, the code reaches them by symbol, and the compiled function still
// computes with their values; small constants stay in the code.
#include "kiln/Target/ConstantPool.h"
#include "JitTestSupport.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

#include <cstdint>
#include <cstring>

namespace {

constexpr int kLarge = 2048; // 8 KiB of f32: pooled
constexpr int kSmall = 16;   // 64 bytes: stays in the code

float largeValue(int i) { return 0.25f * (float)i - 3.0f; }
float smallValue(int i) { return 1000.0f + (float)i; }

/// y = x + large, z = x[:16] + small, with both constants written out as
/// non-splat literals.
std::string source() {
  auto literal = [](int n, float (*value)(int)) {
    std::string s = "dense<[";
    for (int i = 0; i < n; ++i)
      s += (i ? ", " : "") + std::to_string(value(i));
    return s + "]>";
  };
  std::string large = std::to_string(kLarge), small = std::to_string(kSmall);
  return R"(
#map = affine_map<(d0) -> (d0)>
func.func @main(%x: tensor<)" + large + R"(xf32>) -> (tensor<)" + large + R"(xf32>, tensor<)" +
         small + R"(xf32>) {
  %c = arith.constant )" + literal(kLarge, largeValue) + " : tensor<" + large + R"(xf32>
  %s = arith.constant )" + literal(kSmall, smallValue) + " : tensor<" + small + R"(xf32>
  %init = tensor.empty() : tensor<)" + large + R"(xf32>
  %y = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel"]}
      ins(%x, %c : tensor<)" + large + "xf32>, tensor<" + large + R"(xf32>)
      outs(%init : tensor<)" + large + R"(xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.addf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<)" + large + R"(xf32>
  %xs = tensor.extract_slice %x[0] [)" + small + R"(] [1] : tensor<)" + large +
         "xf32> to tensor<" + small + R"(xf32>
  %init2 = tensor.empty() : tensor<)" + small + R"(xf32>
  %z = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel"]}
      ins(%xs, %s : tensor<)" + small + "xf32>, tensor<" + small + R"(xf32>)
      outs(%init2 : tensor<)" + small + R"(xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.addf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<)" + small + R"(xf32>
  return %y, %z : tensor<)" + large + "xf32>, tensor<" + small + R"(xf32>
}
)";
}

kiln::testing::Lowered lower() { return kiln::testing::lower(source()); }

TEST(ConstantPool, MovesLargeConstantsOutOfTheModule) {
  kiln::testing::Lowered l = lower();
  kiln::ConstantPool pool;
  kiln::extractConstants(*l.module, 4096, pool);

  ASSERT_EQ(pool.symbols.size(), 1u);
  EXPECT_EQ(pool.symbols[0].first, "__kiln_pool_0");
  EXPECT_EQ(reinterpret_cast<uintptr_t>(pool.data.get() + pool.symbols[0].second) % 64, 0u);
  const float *values = reinterpret_cast<const float *>(pool.data.get() + pool.symbols[0].second);
  for (int i = 0; i < kLarge; ++i)
    ASSERT_EQ(values[i], largeValue(i)) << "element " << i;

  int external = 0, embedded = 0;
  for (auto global : l.module->getOps<mlir::LLVM::GlobalOp>()) {
    if (global.getSymName() == "__kiln_pool_0") {
      EXPECT_FALSE(global.getValueAttr());
      EXPECT_EQ(global.getLinkage(), mlir::LLVM::Linkage::External);
      ++external;
    } else if (auto dense = llvm::dyn_cast_or_null<mlir::DenseElementsAttr>(
                   global.getValueAttr())) {
      if (dense.getNumElements() == kSmall && dense.getElementType().isF32())
        ++embedded;
    }
  }
  EXPECT_EQ(external, 1);
  EXPECT_EQ(embedded, 1) << "the 64-byte constant must stay in the code";
}

TEST(ConstantPool, CompiledCodeReadsThePool) {
  kiln::testing::Lowered l = lower();
  kiln::ConstantPool pool;
  kiln::extractConstants(*l.module, 4096, pool);
  int64_t workspace = l.workspaceSize();
  // (jit() releases the MLIR context first: the code must not depend on it.)
  kiln::testing::Jitted code = kiln::testing::jit(std::move(l), 2, &pool);
  ASSERT_TRUE(code.entry);

  std::vector<float> x(kLarge), y(kLarge), z(kSmall);
  for (int i = 0; i < kLarge; ++i)
    x[i] = (float)(i % 7);
  alignas(64) static char scratch[1 << 16];
  ASSERT_LE(workspace, (int64_t)sizeof(scratch));
  void *buffers[] = {x.data(), y.data(), z.data(), scratch};
  code.entry(buffers);
  for (int i = 0; i < kLarge; ++i)
    ASSERT_EQ(y[i], x[i] + largeValue(i)) << "element " << i;
  for (int i = 0; i < kSmall; ++i)
    ASSERT_EQ(z[i], x[i] + smallValue(i)) << "element " << i;
}

} // namespace
