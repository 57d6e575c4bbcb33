// What every microkernel source shares: the vector type and its loads and
// stores, and the split of a call's work over the runtime's thread pool.
// Freestanding like the kernels: no headers, no libc.
//
// Why hand-written kernels and not MLIR vector codegen: the register tile
// must keep MR x NV vector accumulators live across the whole reduction,
// with the A operand broadcast from memory straight into the FMA. Written
// with clang's generic vector types, LLVM produces exactly that loop (16 zmm
// accumulators on AVX-512, 12 ymm on AVX2), and the same source serves
// x86-64 and AArch64. Each kernel source is compiled at build time once per
// target variant into an object of the runtime (see CMakeLists.txt); the
// ABI is kiln/kernels.h. Freestanding: no headers, no libc, no allocation:
// scratch lives on the stack. Pointers arrive as integers (kiln_addr). The
// unit tests compile the same files natively and compare every entry point
// with plain reference loops.
#ifndef KILN_KERNELS_KERNELSUPPORT_H
#define KILN_KERNELS_KERNELSUPPORT_H

#ifndef KILN_VEC
#define KILN_VEC 16 // floats per vector register
#endif
#ifndef KILN_MR
#define KILN_MR 8 // output rows (pixels) per register tile (the AVX-512 variant's)
#endif

#include "kiln/kernels.h"

typedef kiln_kernel_i64 kiln_i64;
typedef kiln_kernel_addr kiln_addr;
typedef float vf __attribute__((ext_vector_type(KILN_VEC), aligned(4)));

// Weights are packed in panels of this many output channels (kiln/kernels.h).
#define KILN_PANEL KILN_KERNEL_PANEL
#define NV (KILN_PANEL / KILN_VEC)
#define MR KILN_MR
// Vectors of a panel that one register tile covers: all NV where the
// register file holds MR x NV accumulators beside a panel row (AVX-512's 32
// zmm, NEON's 32 q), half of them on AVX2, whose 16 ymm cannot: a 3 x 32
// tile needs 12 accumulators, 4 panel vectors and a broadcast, and LLVM
// kept one accumulator on the stack, stored and reloaded at every step (a
// 1024^3 matrix product at 37 GFLOP/s on Zen 3, 40 % of its FMA peak, ONNX
// Runtime 60). Tiles of 6 x 16 over each half of the panel need 15
// registers: 80 GFLOP/s. The panel (the packed weights' layout) stays 32
// wide on every target.
#ifndef KILN_TILE_NV
#define KILN_TILE_NV (KILN_VEC == 8 ? NV / 2 : NV)
#endif
#define TNV KILN_TILE_NV

#define INLINE static inline __attribute__((always_inline))

extern "C" void kiln_parallel_for(kiln_i64 n, kiln_i64 grain,
                                  void (*fn)(void *, kiln_i64, kiln_i64), void *ctx);

namespace {

// Below this many multiply-adds a kernel call stays on one thread: handing
// out work and joining costs a few microseconds.
constexpr kiln_i64 kMinParallelWork = 1 << 19;
// Chunks of at least this much work, so that claiming one is cheap.
constexpr kiln_i64 kMinChunkWork = 1 << 16;

/// Runs Task(ctx, 0, items) here, or across the pool when the work is big
/// enough; `workPerItem` in multiply-adds (or comparable operations). The
/// serial call is direct, so that it inlines and LLVM can specialise it on
/// the call site's constant parameter block (small calls, such as the
/// per-step matrix products of an LSTM, cost 4x more through the pointer).
template <void (*Task)(void *, kiln_i64, kiln_i64)>
INLINE void parallelFor(kiln_i64 items, kiln_i64 workPerItem, void *ctx) {
  if (workPerItem < 1)
    workPerItem = 1;
  if (items * workPerItem < kMinParallelWork) {
    Task(ctx, 0, items);
    return;
  }
  kiln_i64 grain = (kMinChunkWork + workPerItem - 1) / workPerItem;
  kiln_parallel_for(items, grain, Task, ctx);
}

typedef int vi32 __attribute__((ext_vector_type(KILN_VEC), aligned(4)));
typedef unsigned char vu8 __attribute__((ext_vector_type(KILN_VEC), aligned(1)));

INLINE vf loadv(const float *p) {
  vf v;
  __builtin_memcpy(&v, p, sizeof(vf));
  return v;
}
INLINE void storev(float *p, vf v) { __builtin_memcpy(p, &v, sizeof(vf)); }
INLINE vf splat(float x) { return (vf)x; }

} // namespace

#endif
