// Measures one core's FP32 fused-multiply-add peak, for scripts/bench/bench.py.
//
//   fma_peak [ITERATIONS]     (default 200000000)
//
// Prints "fma_peak: isa=... gflops=X" with the best of 5 trials. Each loop
// iteration does one FMA on each of NACC independent accumulators, so the loop
// is limited by FMA throughput rather than by FMA latency (a chain of
// dependent FMAs would measure latency: 4 cycles each on current x86 cores).
// Build with -O2 -march=native so the widest vector ISA of the host is used.
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif

// acc = acc * A + B converges to B / (1 - A) = 1: the values stay normal
// (denormals or infinities could take a slow path) and the compiler cannot
// fold the loop away, because A and B are only known at run time.
static volatile float kA = 0.9999999f, kB = 1e-7f;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

#if defined(__AVX512F__)
// 32 zmm registers: 16 accumulators + 2 constants fit without spills, and 16
// covers latency (4) x FMA pipes (2) with room to spare.
#define ISA "avx512"
#define NACC 16
#define LANES 16
typedef __m512 vec;
#define SET1(x) _mm512_set1_ps(x)
#define FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
static float hsum(vec v) { return _mm512_reduce_add_ps(v); }
#elif defined(__AVX2__) && defined(__FMA__)
// Only 16 ymm registers: 12 accumulators + 2 constants avoid spills (which
// would add loads/stores to the loop) while still covering latency x pipes (8).
#define ISA "avx2-fma"
#define NACC 12
#define LANES 8
typedef __m256 vec;
#define SET1(x) _mm256_set1_ps(x)
#define FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
static float hsum(vec v) {
  float f[8];
  _mm256_storeu_ps(f, v);
  return f[0] + f[1] + f[2] + f[3] + f[4] + f[5] + f[6] + f[7];
}
#else
// No vector FMA: scalar fmaf, which the compiler may or may not turn into one
// instruction; the number is then only a rough scalar peak.
#include <math.h>
#define ISA "scalar"
#define NACC 16
#define LANES 1
typedef float vec;
#define SET1(x) (x)
#define FMA(a, b, c) fmaf(a, b, c)
static float hsum(vec v) { return v; }
#endif

// One trial; returns the seconds taken and adds the result to *sink so that
// nothing is dead code.
static double trial(long iters, float *sink) {
  vec a = SET1(kA), b = SET1(kB);
  vec acc[NACC];
  for (int k = 0; k < NACC; ++k)
    acc[k] = SET1((float)k);
  double t0 = now_s();
  for (long i = 0; i < iters; ++i) {
    // A constant trip count: the compiler unrolls this fully and keeps every
    // accumulator in a register.
    for (int k = 0; k < NACC; ++k)
      acc[k] = FMA(acc[k], a, b);
  }
  double t = now_s() - t0;
  for (int k = 0; k < NACC; ++k)
    *sink += hsum(acc[k]);
  return t;
}

int main(int argc, char **argv) {
  long iters = argc > 1 ? atol(argv[1]) : 200000000L;
  if (iters <= 0) {
    fprintf(stderr, "usage: fma_peak [ITERATIONS > 0]\n");
    return 2;
  }
  float sink = 0;
  double best = 1e30;
  for (int t = 0; t < 5; ++t) {
    double s = trial(iters, &sink);
    if (s < best)
      best = s;
  }
  double flops = 2.0 * LANES * NACC * (double)iters; // an FMA is 2 flops per lane
  printf("fma_peak: isa=%s accumulators=%d iterations=%ld best_s=%.4f gflops=%.2f (sink %g)\n",
         ISA, NACC, iters, best, flops / best * 1e-9, sink);
  return 0;
}
