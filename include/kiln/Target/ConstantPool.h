// Large constants of a JIT-compiled module, kept in one host buffer instead
// of the generated code. Compiler-internal.
#ifndef KILN_TARGET_CONSTANTPOOL_H
#define KILN_TARGET_CONSTANTPOOL_H

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace mlir {
class ModuleOp;
}

namespace kiln {

/// Holds the bytes of the constants moved out of a module and the symbol
/// each one is reached by. Shared, not owned: a pool read back from the
/// compile cache points into the mapped cache entry, which it keeps alive.
struct ConstantPool {
  struct FreeDeleter {
    void operator()(void *p) const { std::free(p); }
  };
  std::shared_ptr<const char> data; ///< 64-byte aligned
  size_t size = 0;
  std::vector<std::pair<std::string, size_t>> symbols; ///< name, byte offset
};

/// Moves the initializer of every constant LLVM-dialect global of at least
/// `minBytes` into `pool` and turns the global into an external declaration
/// of the same name, to be defined at the pool's address when the code is
/// linked (JitCode::create).
///
/// Why: a weight embedded in the LLVM module exists up to four times during
/// a JIT compile (LLVM constant, MC fragment, object buffer, linked memory);
/// ResNet-18's 45 MB of weights made code generation the compile's peak
/// memory. Out of the module, it exists once.
void extractConstants(mlir::ModuleOp module, size_t minBytes, ConstantPool &pool);

} // namespace kiln

#endif
