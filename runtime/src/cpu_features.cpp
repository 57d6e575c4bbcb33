// CPU features the microkernels cannot find out themselves: they are
// freestanding (no libc), and on AArch64 the kernel, not an instruction,
// says what the CPU has (the ID registers are privileged; Linux emulates
// reading them only since 4.11). See kiln/kernels.h.
#include "kiln/kernels.h"

#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif

extern "C" int kiln_cpu_has_dotprod(void) {
#if defined(__aarch64__) && defined(__linux__)
  constexpr unsigned long kHwcapAsimdDp = 1ul << 20; // HWCAP_ASIMDDP
  return (getauxval(AT_HWCAP) & kHwcapAsimdDp) != 0;
#else
  return 0;
#endif
}
