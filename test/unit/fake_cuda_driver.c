/* A stand-in for libcuda.so.1 with every entry point Kiln resolves, whose
 * cuInit fails as a driver on a machine without a GPU does
 * (CUDA_ERROR_NO_DEVICE): the CUDA tests load it through KILN_CUDA_DRIVER
 * to check that the error names the call and carries the driver's message. */
#include <stddef.h>

#define NO_DEVICE 100

int cuInit(unsigned flags) { (void)flags; return NO_DEVICE; }
int cuGetErrorName(int r, const char **s) {
  *s = r == NO_DEVICE ? "CUDA_ERROR_NO_DEVICE" : "CUDA_ERROR_UNKNOWN";
  return 0;
}
int cuGetErrorString(int r, const char **s) {
  *s = r == NO_DEVICE ? "no CUDA-capable device is detected" : "unknown error";
  return 0;
}

#define UNREACHED(name) int name(void) { return 999; }
UNREACHED(cuDriverGetVersion)
UNREACHED(cuDeviceGetCount)
UNREACHED(cuDeviceGet)
UNREACHED(cuDeviceGetName)
UNREACHED(cuDeviceGetAttribute)
UNREACHED(cuDevicePrimaryCtxRetain)
UNREACHED(cuDevicePrimaryCtxRelease_v2)
UNREACHED(cuCtxPushCurrent_v2)
UNREACHED(cuCtxPopCurrent_v2)
UNREACHED(cuModuleLoadDataEx)
UNREACHED(cuModuleGetFunction)
UNREACHED(cuModuleUnload)
UNREACHED(cuLaunchKernel)
UNREACHED(cuMemAlloc_v2)
UNREACHED(cuMemFree_v2)
UNREACHED(cuMemcpyHtoD_v2)
UNREACHED(cuMemcpyDtoH_v2)
UNREACHED(cuStreamCreate)
UNREACHED(cuStreamSynchronize)
UNREACHED(cuStreamDestroy_v2)
UNREACHED(cuEventCreate)
UNREACHED(cuEventRecord)
UNREACHED(cuEventSynchronize)
UNREACHED(cuEventElapsedTime_v2)
UNREACHED(cuEventDestroy_v2)
