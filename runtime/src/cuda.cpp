// The CUDA backend (kiln/cuda.h): the driver API through dlopen, so that
// libkiln_runtime has no link-time dependency on CUDA and works unchanged on
// machines without it. The few driver types are declared here, so the
// runtime builds where no CUDA headers exist.
#include "kiln/cuda.h"

#include <dlfcn.h>

#include <cstdlib>
#include <string>

namespace {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st *;
using CUmodule = struct CUmod_st *;
using CUfunction = struct CUfunc_st *;
using CUstream = struct CUstream_st *;

constexpr int kAttrComputeMajor = 75; // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
constexpr int kAttrComputeMinor = 76;
constexpr int kJitErrorLogBuffer = 5;          // CU_JIT_ERROR_LOG_BUFFER
constexpr int kJitErrorLogBufferSizeBytes = 6; // CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES

/// The driver entry points Kiln uses, by the names cuda.h maps its calls to.
struct Driver {
  void *library = nullptr;
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDriverGetVersion)(int *);
  CUresult (*cuDeviceGetCount)(int *);
  CUresult (*cuDeviceGet)(CUdevice *, int);
  CUresult (*cuDeviceGetName)(char *, int, CUdevice);
  CUresult (*cuDeviceGetAttribute)(int *, int, CUdevice);
  CUresult (*cuGetErrorName)(CUresult, const char **);
  CUresult (*cuGetErrorString)(CUresult, const char **);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice);
  CUresult (*cuCtxPushCurrent)(CUcontext);
  CUresult (*cuCtxPopCurrent)(CUcontext *);
  CUresult (*cuModuleLoadDataEx)(CUmodule *, const void *, unsigned, int *, void **);
  CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
  CUresult (*cuModuleUnload)(CUmodule);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, unsigned, CUstream, void **, void **);
  CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void *, size_t);
  CUresult (*cuMemcpyDtoH)(void *, CUdeviceptr, size_t);
  CUresult (*cuStreamCreate)(CUstream *, unsigned);
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuStreamDestroy)(CUstream);
};

kiln_status *deviceError(const std::string &message) {
  return kiln_status_create(KILN_DEVICE_ERROR, message.c_str());
}

/// The driver, opened once per process; an error message if it cannot be.
const Driver *openDriver(std::string &error) {
  static std::string failure;
  static Driver *driver = [] () -> Driver * {
    const char *path = std::getenv("KILN_CUDA_DRIVER");
    if (!path || !*path)
      path = "libcuda.so.1";
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char *why = dlerror();
      failure = std::string("CUDA is not available: cannot load the driver ") + path + " (" +
                (why ? why : "unknown reason") + ")";
      return nullptr;
    }
    auto *d = new Driver;
    d->library = lib;
    std::string missing;
    auto bind = [&](auto &fn, const char *name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      if (!fn)
        missing += (missing.empty() ? "" : ", ") + std::string(name);
    };
    bind(d->cuInit, "cuInit");
    bind(d->cuDriverGetVersion, "cuDriverGetVersion");
    bind(d->cuDeviceGetCount, "cuDeviceGetCount");
    bind(d->cuDeviceGet, "cuDeviceGet");
    bind(d->cuDeviceGetName, "cuDeviceGetName");
    bind(d->cuDeviceGetAttribute, "cuDeviceGetAttribute");
    bind(d->cuGetErrorName, "cuGetErrorName");
    bind(d->cuGetErrorString, "cuGetErrorString");
    bind(d->cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    bind(d->cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
    bind(d->cuCtxPushCurrent, "cuCtxPushCurrent_v2");
    bind(d->cuCtxPopCurrent, "cuCtxPopCurrent_v2");
    bind(d->cuModuleLoadDataEx, "cuModuleLoadDataEx");
    bind(d->cuModuleGetFunction, "cuModuleGetFunction");
    bind(d->cuModuleUnload, "cuModuleUnload");
    bind(d->cuLaunchKernel, "cuLaunchKernel");
    bind(d->cuMemAlloc, "cuMemAlloc_v2");
    bind(d->cuMemFree, "cuMemFree_v2");
    bind(d->cuMemcpyHtoD, "cuMemcpyHtoD_v2");
    bind(d->cuMemcpyDtoH, "cuMemcpyDtoH_v2");
    bind(d->cuStreamCreate, "cuStreamCreate");
    bind(d->cuStreamSynchronize, "cuStreamSynchronize");
    bind(d->cuStreamDestroy, "cuStreamDestroy_v2");
    if (!missing.empty()) {
      failure = std::string("the CUDA driver ") + path + " lacks " + missing +
                " (a driver older than CUDA 11?)";
      dlclose(lib);
      delete d;
      return nullptr;
    }
    return d;
  }();
  if (!driver)
    error = failure;
  return driver;
}

/// "cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (out of memory)", or nullptr.
kiln_status *check(const Driver &d, CUresult r, const char *call, const std::string &extra = "") {
  if (r == 0)
    return nullptr;
  const char *name = nullptr, *text = nullptr;
  if (d.cuGetErrorName(r, &name) != 0 || !name)
    name = "unknown CUDA error";
  if (d.cuGetErrorString(r, &text) != 0 || !text)
    text = "";
  std::string message = std::string(call) + " failed: " + name + " (" + std::to_string(r) +
                        (*text ? ": " + std::string(text) : std::string()) + ")" + extra;
  return deviceError(message);
}

} // namespace

struct kiln_cuda_device {
  const Driver *driver;
  CUdevice device;
  CUcontext context;
  CUstream stream;
  int capability;
  char name[256];
};

struct kiln_cuda_module {
  kiln_cuda_device *device;
  CUmodule module;
};

namespace {

/// Makes the device's primary context current for a scope.
struct ContextScope {
  const kiln_cuda_device *dev;
  kiln_status *status = nullptr;
  explicit ContextScope(const kiln_cuda_device *d) : dev(d) {
    status = check(*d->driver, d->driver->cuCtxPushCurrent(d->context), "cuCtxPushCurrent_v2");
  }
  ~ContextScope() {
    if (!status) {
      CUcontext popped;
      dev->driver->cuCtxPopCurrent(&popped);
    }
  }
};

} // namespace

extern "C" {

kiln_status *kiln_cuda_device_open(int ordinal, kiln_cuda_device **out) {
  if (!out)
    return kiln_status_create(KILN_INVALID_ARGUMENT, "kiln_cuda_device_open: out is NULL");
  *out = nullptr;
  std::string error;
  const Driver *d = openDriver(error);
  if (!d)
    return deviceError(error);
  if (kiln_status *s = check(*d, d->cuInit(0), "cuInit"))
    return s;
  int count = 0;
  if (kiln_status *s = check(*d, d->cuDeviceGetCount(&count), "cuDeviceGetCount"))
    return s;
  if (ordinal < 0 || ordinal >= count)
    return deviceError("no CUDA device " + std::to_string(ordinal) + ": the driver sees " +
                       std::to_string(count));
  auto *dev = new kiln_cuda_device{};
  dev->driver = d;
  kiln_status *s = check(*d, d->cuDeviceGet(&dev->device, ordinal), "cuDeviceGet");
  int major = 0, minor = 0;
  if (!s)
    s = check(*d, d->cuDeviceGetName(dev->name, sizeof dev->name - 1, dev->device),
              "cuDeviceGetName");
  if (!s)
    s = check(*d, d->cuDeviceGetAttribute(&major, kAttrComputeMajor, dev->device),
              "cuDeviceGetAttribute");
  if (!s)
    s = check(*d, d->cuDeviceGetAttribute(&minor, kAttrComputeMinor, dev->device),
              "cuDeviceGetAttribute");
  if (!s)
    s = check(*d, d->cuDevicePrimaryCtxRetain(&dev->context, dev->device),
              "cuDevicePrimaryCtxRetain");
  if (s) {
    delete dev;
    return s;
  }
  dev->capability = major * 10 + minor;
  {
    ContextScope scope(dev);
    s = scope.status ? scope.status
                     : check(*d, d->cuStreamCreate(&dev->stream, 0), "cuStreamCreate");
  }
  if (s) {
    d->cuDevicePrimaryCtxRelease(dev->device);
    delete dev;
    return s;
  }
  *out = dev;
  return nullptr;
}

void kiln_cuda_device_close(kiln_cuda_device *dev) {
  if (!dev)
    return;
  {
    ContextScope scope(dev);
    if (!scope.status)
      dev->driver->cuStreamDestroy(dev->stream);
    else
      kiln_status_free(scope.status);
  }
  dev->driver->cuDevicePrimaryCtxRelease(dev->device);
  delete dev;
}

const char *kiln_cuda_device_name(const kiln_cuda_device *dev) { return dev ? dev->name : ""; }

int kiln_cuda_device_compute_capability(const kiln_cuda_device *dev) {
  return dev ? dev->capability : 0;
}

kiln_status *kiln_cuda_malloc(kiln_cuda_device *dev, size_t bytes, kiln_cuda_ptr *out) {
  if (!dev || !out)
    return kiln_status_create(KILN_INVALID_ARGUMENT, "kiln_cuda_malloc: NULL argument");
  ContextScope scope(dev);
  if (scope.status)
    return scope.status;
  CUdeviceptr p = 0;
  if (kiln_status *s = check(*dev->driver, dev->driver->cuMemAlloc(&p, bytes ? bytes : 1),
                             "cuMemAlloc_v2", " allocating " + std::to_string(bytes) + " bytes"))
    return s;
  *out = p;
  return nullptr;
}

kiln_status *kiln_cuda_free(kiln_cuda_device *dev, kiln_cuda_ptr ptr) {
  if (!dev)
    return kiln_status_create(KILN_INVALID_ARGUMENT, "kiln_cuda_free: NULL device");
  ContextScope scope(dev);
  if (scope.status)
    return scope.status;
  return ptr ? check(*dev->driver, dev->driver->cuMemFree(ptr), "cuMemFree_v2") : nullptr;
}

kiln_status *kiln_cuda_copy_to_device(kiln_cuda_device *dev, kiln_cuda_ptr dst, const void *src,
                                      size_t bytes) {
  if (!dev || (!src && bytes))
    return kiln_status_create(KILN_INVALID_ARGUMENT, "kiln_cuda_copy_to_device: NULL argument");
  ContextScope scope(dev);
  if (scope.status)
    return scope.status;
  return check(*dev->driver, dev->driver->cuMemcpyHtoD(dst, src, bytes), "cuMemcpyHtoD_v2");
}

kiln_status *kiln_cuda_copy_to_host(kiln_cuda_device *dev, void *dst, kiln_cuda_ptr src,
                                    size_t bytes) {
  if (!dev || (!dst && bytes))
    return kiln_status_create(KILN_INVALID_ARGUMENT, "kiln_cuda_copy_to_host: NULL argument");
  ContextScope scope(dev);
  if (scope.status)
    return scope.status;
  return check(*dev->driver, dev->driver->cuMemcpyDtoH(dst, src, bytes), "cuMemcpyDtoH_v2");
}

kiln_status *kiln_cuda_module_load(kiln_cuda_device *dev, const char *ptx,
                                   kiln_cuda_module **out) {
  if (!dev || !ptx || !out)
    return kiln_status_create(KILN_INVALID_ARGUMENT, "kiln_cuda_module_load: NULL argument");
  *out = nullptr;
  ContextScope scope(dev);
  if (scope.status)
    return scope.status;
  char log[8192] = {0};
  int options[] = {kJitErrorLogBuffer, kJitErrorLogBufferSizeBytes};
  void *values[] = {log, reinterpret_cast<void *>((uintptr_t)sizeof log)};
  CUmodule module = nullptr;
  CUresult r = dev->driver->cuModuleLoadDataEx(&module, ptx, 2, options, values);
  if (kiln_status *s = check(*dev->driver, r, "cuModuleLoadDataEx",
                             *log ? std::string(": ") + log : std::string()))
    return s;
  *out = new kiln_cuda_module{dev, module};
  return nullptr;
}

void kiln_cuda_module_unload(kiln_cuda_module *m) {
  if (!m)
    return;
  {
    ContextScope scope(m->device);
    if (!scope.status)
      m->device->driver->cuModuleUnload(m->module);
    else
      kiln_status_free(scope.status);
  }
  delete m;
}

kiln_status *kiln_cuda_launch(kiln_cuda_module *m, const char *kernel, const uint32_t grid[3],
                              const uint32_t block[3], uint32_t shared_bytes, void **args) {
  if (!m || !kernel || !grid || !block)
    return kiln_status_create(KILN_INVALID_ARGUMENT, "kiln_cuda_launch: NULL argument");
  const Driver &d = *m->device->driver;
  ContextScope scope(m->device);
  if (scope.status)
    return scope.status;
  CUfunction fn = nullptr;
  if (kiln_status *s = check(d, d.cuModuleGetFunction(&fn, m->module, kernel),
                             "cuModuleGetFunction", std::string(" for kernel '") + kernel + "'"))
    return s;
  return check(d,
               d.cuLaunchKernel(fn, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                                shared_bytes, m->device->stream, args, nullptr),
               "cuLaunchKernel", std::string(" for kernel '") + kernel + "'");
}

kiln_status *kiln_cuda_synchronize(kiln_cuda_device *dev) {
  if (!dev)
    return kiln_status_create(KILN_INVALID_ARGUMENT, "kiln_cuda_synchronize: NULL device");
  ContextScope scope(dev);
  if (scope.status)
    return scope.status;
  return check(*dev->driver, dev->driver->cuStreamSynchronize(dev->stream),
               "cuStreamSynchronize");
}

} // extern "C"
