// kiln-expand-bf16: bfloat16 without libcalls. LLVM lowers an f32 -> bf16
// fptrunc on an x86-64 without AVX512-BF16 (AVX2 machines, Zen 3) or an
// AArch64 without BF16 to a call to compiler-rt's __truncsfbf2, and bf16
// arithmetic to calls around f32 ops. Kiln's JIT has no compiler-rt and
// Debian's libgcc 12 has no __truncsfbf2: every model that casts to bf16
// stopped with "Symbols not found: [ __truncsfbf2 ]" there (ONNX's
// test_cast_FLOAT_to_BFLOAT16), and bundles and objects would need the
// symbol at link time. Upstream's patterns do it in the IR instead, on
// every target alike: bf16 arithmetic is computed in f32 between an extf
// and a truncf (populateEmulateUnsupportedFloatsPatterns), and those become
// integer shifts with round-to-nearest-even (populateExpandBFloat16Patterns),
// the same rounding as the hardware conversion.
#include "kiln/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Transforms/DialectConversion.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace kiln {
#define GEN_PASS_DEF_KILNEXPANDBF16
#include "kiln/Conversion/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace kiln {
namespace {

struct ExpandBf16Pass : impl::KilnExpandBf16Base<ExpandBf16Pass> {
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    TypeConverter converter;
    arith::populateEmulateUnsupportedFloatsConversions(converter, {BFloat16Type::get(ctx)},
                                                       Float32Type::get(ctx));
    RewritePatternSet emulate(ctx);
    arith::populateEmulateUnsupportedFloatsPatterns(emulate, converter);
    ConversionTarget target(*ctx);
    arith::populateEmulateUnsupportedFloatsLegality(target, converter);
    if (failed(applyPartialConversion(getOperation(), target, std::move(emulate))))
      return signalPassFailure();
    RewritePatternSet expand(ctx);
    arith::populateExpandBFloat16Patterns(expand);
    if (failed(applyPatternsGreedily(getOperation(), std::move(expand))))
      signalPassFailure();
  }
};

} // namespace
} // namespace kiln
