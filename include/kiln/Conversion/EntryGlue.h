// The attribute that marks a compiled model's entry glue, shared by the pass
// that sets it and the LLVM pipeline that reads it.
#ifndef KILN_CONVERSION_ENTRYGLUE_H
#define KILN_CONVERSION_ENTRYGLUE_H

namespace kiln {

/// An LLVM function attribute (an llvm.func passthrough string) on the
/// model function, the entry point and the dims functions
/// (kiln-emit-entry-point): calls, memref descriptors and shape arithmetic.
/// optimizeModule (TargetEmitter.cpp) runs LLVM's SLP vectorizer on every
/// function but these.
inline constexpr const char *kEntryGlueAttr = "kiln-entry-glue";

} // namespace kiln

#endif
