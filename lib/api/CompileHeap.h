// The C library's allocator while a compile runs.
#pragma once

namespace kiln {

/// Held for the length of a compile (JIT, object, bundle). A compile copies
/// every weight several times over (decoded from the protobuf, into MLIR
/// attributes, transposed or packed for the microkernels, into the
/// constant pool) through blocks of up to a tensor each. With glibc's
/// defaults, blocks above its mmap threshold are mapped and unmapped one by
/// one and the heap is trimmed as it shrinks, so every copy lands on pages
/// the kernel must fault in afresh, 4 KiB at a time: 33k page faults to
/// compile the 13 MB encoder4. On the virtual machines Kiln is measured on
/// a fault costs ~6 us, and faults were a third of a first compile
/// (encoder4 480 -> 330 ms; docs/benchmarks.md, "Page faults").
///
/// While any scope is alive:
/// - freed blocks stay in the heap for the next stage to reuse (no mmap for
///   blocks up to 32 MB, no trimming, the heap grown 64 MB of address space
///   at a time);
/// - the heap asks the kernel for transparent huge pages (madvise; in THP's
///   default "madvise" mode nothing else does), so that a first touch
///   faults 2 MiB instead of 4 KiB. grown() extends that to the heap grown
///   since, at each stage.
/// When the last one ends, the thresholds become those glibc's adaptive ones
/// reach in a process that frees large blocks (mmap above 32 MB, trim above
/// 64 MB free at the top), and when more than 256 MB of the heap is free it
/// is given back to the system at once (malloc_trim), so that a serving
/// process does not keep a large compile's peak. Scopes nest and may be
/// held from several threads. Elsewhere than glibc this does nothing.
class CompileHeapScope {
public:
  CompileHeapScope();
  ~CompileHeapScope();
  /// Extends the huge-page advice to the heap grown since the last call
  /// (nothing when no scope is alive).
  static void grown();
  CompileHeapScope(const CompileHeapScope &) = delete;
  CompileHeapScope &operator=(const CompileHeapScope &) = delete;
};

} // namespace kiln
