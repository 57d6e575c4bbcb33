// Integer 2-D convolution (u8 or s8 activations x s8 weights -> i32), NHWC:
// the quantized convolutions of ONNX Runtime's quantize_static models
// (kiln.conv's integer form). Why hand-written: see KernelSupport.h; and
// MLIR's vector dialect has no portable 8-bit dot product with i32
// accumulation, which is the whole gain: AVX512-VNNI's vpdpbusd does 64
// multiply-adds per instruction, four times the f32 FMA's 16, on a quarter
// of the bytes. The same tile runs with three dot products: vpdpbusd on
// zmm (AVX512-VNNI) or ymm (AVX-VNNI), chosen at run time from CPUID (the
// x86-64-v4 and -v3 levels the variants are built for do not include
// VNNI), and a portable one (widening multiplies) everywhere else.
//
// s8 activations are read as u8 (x ^ 0x80 = x + 128) with the zero point
// moved by 128, which the compiler's bias correction already holds.

#include "KernelSupport.h"

namespace {

typedef int vi __attribute__((ext_vector_type(KILN_VEC)));

// Pixels per register tile: QMR x NV accumulators, plus QMR broadcasts
// that LLVM's scheduler hoists ahead of the dot products, within the
// register file (12 rows spilled on AVX-512: 24 + 12 + 2 > 32 zmm).
#ifndef KILN_QMR
#if KILN_VEC == 16
#define KILN_QMR 8
#elif KILN_VEC == 8
#define KILN_QMR 3 // 3 x 32 (12 ymm): the f32 kernels' 6 rows are for 16-column tiles
#else
#define KILN_QMR KILN_MR
#endif
#endif
#define QMR KILN_QMR
constexpr kiln_i64 kQPixelBlock = 96; // output pixels per work item (a multiple of QMR)
// Tiles of 7 rows (in blocks of 98) where the output's pixel count is a
// multiple of 7 but not of 8 (7x7 and 14x14 maps: ResNet's and MobileNet's
// last stages): 8-row tiles computed 56 rows for 49 pixels, an eighth of a
// 7x7 layer's work thrown away.
constexpr int kQAltMR = QMR == 8 ? 7 : QMR;
constexpr kiln_i64 kQAltBlock = QMR == 8 ? 98 : kQPixelBlock;
// The flat form's gathered window per pixel, at most (kiln/kernels.h).
constexpr kiln_i64 kQFlatMaxRow = KILN_QCONV_FLAT_K_MAX_BYTES;

struct QConvJob {
  const kiln_conv2d_params *q;
  const unsigned char *in;
  const signed char *w;
  const int *bias;
  const unsigned char *pad; // the input zero point, one pixel's worth
  int *out;
  unsigned flip;            // 0x80808080 for s8 activations, else 0
  kiln_i64 ldi, ldo;
  // KILN_QCONV_REQUANT: 8-bit results (out then holds bytes) and how.
  const kiln_requant_params *requant;
  const float *scale;       // per output channel, [panels][KILN_PANEL]
  bool altRows;             // 7-row tiles in blocks of kQAltBlock (direct form)
  const unsigned char *inEnd; // one past the input's last byte
};

namespace portable {
/// acc += sum over the four bytes of each 32-bit lane of a (u8, the same
/// four in every lane) times w (s8).
INLINE vi dot(vi acc, unsigned a, vi w) {
  for (int b = 0; b < 4; ++b) {
    int ab = (int)((a >> (8 * b)) & 0xff);
    vi wb = (w << (24 - 8 * b)) >> 24;
    acc += wb * ab;
  }
  return acc;
}
#include "QConvTile.inc"
} // namespace portable

#if defined(__x86_64__) && (KILN_VEC == 16 || KILN_VEC == 8)
INLINE void cpuid(unsigned leaf, unsigned sub, unsigned r[4]) {
  __asm__ volatile("cpuid" : "=a"(r[0]), "=b"(r[1]), "=c"(r[2]), "=d"(r[3]) : "a"(leaf), "c"(sub));
}
/// Bit `bit` of register `reg` (0 EAX, 1 EBX, 2 ECX) of CPUID leaf 7,
/// subleaf `sub`: the extended feature flags.
bool leaf7Bit(unsigned sub, int reg, int bit) {
  unsigned r[4];
  cpuid(0, 0, r);
  if (r[0] < 7)
    return false;
  cpuid(7, sub, r);
  return (r[reg] >> bit) & 1;
}

#if KILN_VEC == 16
#define KILN_QCONV_VNNI 1
/// AVX512-VNNI: CPUID.(EAX=7, ECX=0):ECX bit 11.
bool hasVnni() { return leaf7Bit(0, 2, 11); }
namespace vnni {
#pragma clang attribute push(__attribute__((target("avx512vnni"))), apply_to = function)
typedef int v16si __attribute__((vector_size(64)));
typedef unsigned char v64qu __attribute__((vector_size(64)));
typedef char v64qi __attribute__((vector_size(64)));
INLINE vi dot(vi acc, unsigned a, vi w) {
  return (vi)__builtin_ia32_vpdpbusd512((v16si)acc, (v64qu)(vi)(int)a, (v64qi)w);
}
#include "QConvTile.inc"
#pragma clang attribute pop
} // namespace vnni
#else
#define KILN_QCONV_VNNI 1
/// AVX-VNNI: CPUID.(EAX=7, ECX=1):EAX bit 4.
bool hasVnni() { return leaf7Bit(1, 0, 4); }
namespace vnni {
#pragma clang attribute push(__attribute__((target("avxvnni"))), apply_to = function)
typedef int v8si __attribute__((vector_size(32)));
typedef unsigned char v32qu __attribute__((vector_size(32)));
typedef char v32qi __attribute__((vector_size(32)));
INLINE vi dot(vi acc, unsigned a, vi w) {
  return (vi)__builtin_ia32_vpdpbusd256((v8si)acc, (v32qu)(vi)(int)a, (v32qi)w);
}
#include "QConvTile.inc"
#pragma clang attribute pop
} // namespace vnni
#endif

// Without VNNI (AVX2 machines before Alder Lake and Zen 4; AVX-512 ones
// before Cascade Lake): vpmaddwd, 16-bit pairs summed into 32 bits, exact
// (255 x 128 x 2 fits). vpmaddubsw would take the bytes directly, but its
// 16-bit sums saturate (255 x 127 x 2 does not fit): ONNX Runtime's
// u8s8 AVX2 path restricts weights to 7 bits for that; Kiln keeps them.
// Each 32-bit lane's four weight bytes are split, as 16-bit halves, into
// (w0, w2) and (w1, w3), the activations likewise into (a0, a2) and
// (a1, a3): two vpmaddwd give the lane's four products summed.
#if KILN_VEC == 16
#define KILN_QCONV_MADD_TARGET "avx512bw"
/// AVX512BW: CPUID.(EAX=7, ECX=0):EBX bit 30.
bool hasMadd() { return leaf7Bit(0, 1, 30); }
#else
#define KILN_QCONV_MADD_TARGET "avx2"
/// AVX2: CPUID.(EAX=7, ECX=0):EBX bit 5.
bool hasMadd() { return leaf7Bit(0, 1, 5); }
#endif
namespace madd {
#pragma clang attribute push(__attribute__((target(KILN_QCONV_MADD_TARGET))), apply_to = function)
typedef short vh __attribute__((ext_vector_type(2 * KILN_VEC)));
INLINE vi madd16(vh a, vh b) {
#if KILN_VEC == 16
  typedef short v32hi __attribute__((vector_size(64)));
  return (vi)__builtin_ia32_pmaddwd512((v32hi)a, (v32hi)b);
#else
  typedef short v16hi __attribute__((vector_size(32)));
  return (vi)__builtin_ia32_pmaddwd256((v16hi)a, (v16hi)b);
#endif
}
INLINE vi dot(vi acc, unsigned a, vi w) {
  vh wh = (vh)w;
  vh w02 = (vh)((wh << 8) >> 8), w13 = wh >> 8; // each 16-bit half's byte, sign-extended
  vh a02 = (vh)(vi)(int)(a & 0x00ff00ffu), a13 = (vh)(vi)(int)((a >> 8) & 0x00ff00ffu);
  return acc + madd16(w02, a02) + madd16(w13, a13);
}
#include "QConvTile.inc"
#pragma clang attribute pop
} // namespace madd
#define KILN_QCONV_MADD 1
#endif

#if defined(__aarch64__)
// AArch64 with DotProd (ARMv8.2: Cortex-A55/A75 and later, Neoverse,
// Apple M): sdot, four s8 products summed into each 32-bit lane. It has no
// u8 x s8 form before ARMv8.6's usdot, so u8 activations go in as s8, a -
// 128 (xor 0x80), and each lane gets back 128 x its weights' sum, as twice
// sdot(64, w) (128 is not an s8): the same for every row of a tile, so
// computed once per weight vector. The builtin is arm_neon.h's vdotq_s32,
// which the freestanding build cannot include.
#define KILN_QCONV_SDOT 1
namespace sdot {
#pragma clang attribute push(__attribute__((target("dotprod"))), apply_to = function)
typedef __attribute__((neon_vector_type(16))) signed char s8x16;
INLINE vi sdot4(vi acc, vi a, vi w) {
  return (vi)__builtin_neon_vdotq_s32((s8x16)acc, (s8x16)a, (s8x16)w, 34);
}
INLINE vi dot(vi acc, unsigned a, vi w) {
  vi share = sdot4((vi)0, (vi)0x40404040, w);
  return sdot4(acc, (vi)(int)(a ^ 0x80808080u), w) + share + share;
}
#include "QConvTile.inc"
#pragma clang attribute pop
} // namespace sdot
#endif

} // namespace

extern "C" {

#ifdef KILN_QCONV_TEST_HOOKS
/// Unit tests only (never in the runtime): the dot product to use, as
/// numbered in kiln_qconv2d_nhwc_u8s8; 0 picks by CPUID.
int kiln_qconv_test_path = 0;
#endif

/// Ungrouped 2-D convolution of u8 (or, with `flip` 0x80808080, s8)
/// activations [n][h][w][c] (pixels `inStride` bytes apart) with s8 weights
/// packed by the compiler as [panels][kh][kw][ceil(c/4)][KILN_PANEL][4]
/// (zero padded), or with KILN_QCONV_FLAT_K as [panels][ceil(kh*kw*c/4)]
/// [KILN_PANEL][4] (the window flattened), out[n][oh][ow][oc] (i32, pixels `outStride` apart) = the
/// exact sum + bias[oc] (i32, [panels][KILN_PANEL]). Padding reads `pad`
/// (ceil(c/4)*4 bytes of the input's zero point), so the compiler's bias
/// holds bias - zero point (as u8) x the sum of each output's weights.
/// With KILN_QCONV_REQUANT the sums are requantized to 8 bits (`requant`,
/// kiln_requant_params) and out holds bytes, `outStride` apart.
void kiln_qconv2d_nhwc_u8s8(kiln_addr params, kiln_addr in, kiln_addr w, kiln_addr bias,
                            kiln_addr pad, kiln_addr out, kiln_i64 flip, kiln_i64 inStride,
                            kiln_i64 outStride, kiln_addr requant) {
  const kiln_conv2d_params &q = *(const kiln_conv2d_params *)params;
  const kiln_requant_params *rq =
      q.flags & KILN_QCONV_REQUANT ? (const kiln_requant_params *)requant : nullptr;
  QConvJob job{&q,
               (const unsigned char *)in,
               (const signed char *)w,
               (const int *)bias,
               (const unsigned char *)pad,
               (int *)out,
               (unsigned)flip,
               inStride,
               outStride,
               rq,
               rq ? (const float *)(rq + 1) : nullptr,
               false,
               (const unsigned char *)in + ((q.n * q.h * q.w - 1) * inStride + q.c)};
  kiln_i64 pixels = q.oh * q.ow;
  job.altRows = kQAltMR != QMR && !(q.flags & KILN_QCONV_FLAT_K) && pixels % QMR != 0 &&
                pixels % kQAltMR == 0;
  kiln_i64 block = job.altRows ? kQAltBlock : kQPixelBlock;
  kiln_i64 panels = (q.oc + KILN_PANEL - 1) / KILN_PANEL;
  kiln_i64 blocks = (pixels + block - 1) / block;
  // The flat form's items are (image, block); the direct form's also panels.
  kiln_i64 items = q.n * blocks * (q.flags & KILN_QCONV_FLAT_K ? 1 : panels);
  // Work per item in multiply-adds; a VNNI one is a quarter of an FMA's cost.
  kiln_i64 work = block * KILN_PANEL * q.kh * q.kw * q.c / 4 *
                  (q.flags & KILN_QCONV_FLAT_K ? panels : 1);
#ifdef KILN_QCONV_VNNI
  // The dot product this CPU has: 1 VNNI, 2 vpmaddwd, 3 the portable one.
  static int path = 0; // CPUID once; a race writes the same value
  int known = __atomic_load_n(&path, __ATOMIC_RELAXED);
  if (!known) {
    known = hasVnni() ? 1 : hasMadd() ? 2 : 3;
    __atomic_store_n(&path, known, __ATOMIC_RELAXED);
  }
#ifdef KILN_QCONV_TEST_HOOKS
  if (kiln_qconv_test_path)
    known = kiln_qconv_test_path;
#endif
  if (known == 1) {
    parallelFor<vnni::qconvTask>(items, work, &job);
    return;
  }
  if (known == 2) {
    parallelFor<madd::qconvTask>(items, work * 2, &job);
    return;
  }
#endif
#ifdef KILN_QCONV_SDOT
  static int dotprod = -1; // HWCAP once; a race writes the same value
  int has = __atomic_load_n(&dotprod, __ATOMIC_RELAXED);
  if (has < 0) {
    has = kiln_cpu_has_dotprod() ? 1 : 0;
    __atomic_store_n(&dotprod, has, __ATOMIC_RELAXED);
  }
  if (has) {
    parallelFor<sdot::qconvTask>(items, work * 2, &job);
    return;
  }
#endif
  parallelFor<portable::qconvTask>(items, work * 4, &job);
}

} // extern "C"
