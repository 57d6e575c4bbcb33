// Measures one core's int8 dot-product peak (u8 x s8 -> i32, AVX512-VNNI
// vpdpbusd on zmm, else AVX-VNNI on ymm), for the int8 kernels' % of peak.
//
//   vnni_peak [ITERATIONS]     (default 100000000)
//
// Prints "vnni_peak: isa=... gops=X" (2 ops per multiply-add, as the
// profiles count them) with the best of 5 trials; "isa=none" where the CPU
// has no VNNI. Each iteration does one dot product on each of NACC
// independent accumulators (throughput, not latency). Build with -O2
// -march=native.
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#if defined(__AVX512VNNI__) || defined(__AVXVNNI__)
#include <immintrin.h>
#endif

static volatile int kA = 0x01020304, kB = 0x05060708;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

#if defined(__AVX512VNNI__)
#define ISA "avx512-vnni"
#define NACC 16
#define MACS 64
typedef __m512i vec;
#define SET1(x) _mm512_set1_epi32(x)
#define DOT(acc, a, b) _mm512_dpbusd_epi32(acc, a, b)
static long long hsum(vec v) { return _mm512_reduce_add_epi32(v); }
#elif defined(__AVXVNNI__)
#define ISA "avx-vnni"
#define NACC 12
#define MACS 32
typedef __m256i vec;
#define SET1(x) _mm256_set1_epi32(x)
#define DOT(acc, a, b) _mm256_dpbusd_avx_epi32(acc, a, b)
static long long hsum(vec v) {
  int f[8];
  _mm256_storeu_si256((__m256i *)f, v);
  return (long long)f[0] + f[1] + f[2] + f[3] + f[4] + f[5] + f[6] + f[7];
}
#endif

int main(int argc, char **argv) {
#ifndef DOT
  (void)argc;
  (void)argv;
  printf("vnni_peak: isa=none gops=0\n");
  return 0;
#else
  long iters = argc > 1 ? atol(argv[1]) : 100000000L;
  double best = 1e30;
  long long sink = 0;
  for (int t = 0; t < 5; ++t) {
    vec a = SET1(kA), b = SET1(kB), acc[NACC];
    for (int k = 0; k < NACC; ++k)
      acc[k] = SET1(k);
    double t0 = now_s();
    for (long i = 0; i < iters; ++i)
      for (int k = 0; k < NACC; ++k)
        acc[k] = DOT(acc[k], a, b);
    double s = now_s() - t0;
    for (int k = 0; k < NACC; ++k)
      sink += hsum(acc[k]);
    if (s < best)
      best = s;
  }
  double gops = 2.0 * MACS * NACC * (double)iters / best / 1e9;
  printf("vnni_peak: isa=%s gops=%.1f (sink %lld)\n", ISA, gops, sink & 1);
  return 0;
#endif
}
