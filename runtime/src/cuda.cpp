// The CUDA backend (kiln/cuda.h): the driver API through dlopen, so that
// libkiln_runtime has no link-time dependency on CUDA and works unchanged on
// machines without it. The few driver types are declared here, so the
// runtime builds where no CUDA headers exist.
#include "kiln/cuda.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

namespace {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st *;
using CUmodule = struct CUmod_st *;
using CUfunction = struct CUfunc_st *;
using CUstream = struct CUstream_st *;
using CUevent = struct CUevent_st *;

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
  CUresult (*cuEventCreate)(CUevent *, unsigned);
  CUresult (*cuEventRecord)(CUevent, CUstream);
  CUresult (*cuEventSynchronize)(CUevent);
  CUresult (*cuEventElapsedTime)(float *, CUevent, CUevent);
  CUresult (*cuEventDestroy)(CUevent);
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
    bind(d->cuEventCreate, "cuEventCreate");
    bind(d->cuEventRecord, "cuEventRecord");
    bind(d->cuEventSynchronize, "cuEventSynchronize");
    bind(d->cuEventDestroy, "cuEventDestroy_v2");
    // CUDA 12.8 renamed it (cuda.h maps the plain name to _v2); older
    // drivers have only the first version, with the same signature.
    d->cuEventElapsedTime = reinterpret_cast<decltype(d->cuEventElapsedTime)>(
        dlsym(lib, "cuEventElapsedTime_v2"));
    if (!d->cuEventElapsedTime)
      bind(d->cuEventElapsedTime, "cuEventElapsedTime");
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

// --- Compiled models on the device --------------------------------------

struct kiln_cuda_program {
  kiln_cuda_device *device = nullptr;
  kiln_cuda_module *module = nullptr;
  std::vector<CUfunction> kernels;
  std::vector<std::string> kernelNames;
  CUdeviceptr constants = 0, workspace = 0;
  size_t constantsBytes = 0, workspaceBytes = 0;
  /// One run at a time: runs share the workspace.
  std::mutex running;
};

struct kiln_cuda_timer {
  kiln_cuda_device *device;
  CUevent start = nullptr, stop = nullptr;
};

namespace {

/// The run in progress on this thread: kiln_cuda_launch_kernel, called by
/// the compiled host code, launches into it and keeps its first error.
struct ActiveRun {
  kiln_cuda_program *program = nullptr;
  kiln_status *error = nullptr;
};
thread_local ActiveRun activeRun;

} // namespace

extern "C" {

void kiln_cuda_program_free(kiln_cuda_program *p) {
  if (!p)
    return;
  const Driver &d = *p->device->driver;
  {
    ContextScope scope(p->device);
    if (!scope.status) {
      if (p->constants)
        d.cuMemFree(p->constants);
      if (p->workspace)
        d.cuMemFree(p->workspace);
    } else {
      kiln_status_free(scope.status);
    }
  }
  kiln_cuda_module_unload(p->module);
  delete p;
}

kiln_status *kiln_cuda_program_create(kiln_cuda_device *dev, const char *ptx,
                                      const char *const *kernels, size_t num_kernels,
                                      const void *constants, size_t constants_bytes,
                                      size_t workspace_bytes, kiln_cuda_program **out) {
  if (!dev || !out || (num_kernels && (!ptx || !kernels)) || (constants_bytes && !constants))
    return kiln_status_create(KILN_INVALID_ARGUMENT, "kiln_cuda_program_create: NULL argument");
  *out = nullptr;
  auto *p = new kiln_cuda_program;
  p->device = dev;
  const Driver &d = *dev->driver;
  kiln_status *s = nullptr;
  if (num_kernels)
    s = kiln_cuda_module_load(dev, ptx, &p->module);
  ContextScope scope(dev);
  if (!s)
    s = scope.status;
  else if (scope.status)
    kiln_status_free(scope.status);
  for (size_t k = 0; !s && k < num_kernels; ++k) {
    CUfunction fn = nullptr;
    s = check(d, d.cuModuleGetFunction(&fn, p->module->module, kernels[k]), "cuModuleGetFunction",
              std::string(" for kernel '") + kernels[k] + "'");
    p->kernels.push_back(fn);
    p->kernelNames.push_back(kernels[k]);
  }
  // Weights go to the device once, here; every run reads them in place.
  if (!s && constants_bytes) {
    s = check(d, d.cuMemAlloc(&p->constants, constants_bytes), "cuMemAlloc_v2",
              " allocating " + std::to_string(constants_bytes) + " bytes of weights");
    if (!s)
      s = check(d, d.cuMemcpyHtoD(p->constants, constants, constants_bytes), "cuMemcpyHtoD_v2");
  }
  p->constantsBytes = constants_bytes;
  if (!s && workspace_bytes)
    s = check(d, d.cuMemAlloc(&p->workspace, workspace_bytes), "cuMemAlloc_v2",
              " allocating the " + std::to_string(workspace_bytes) + "-byte workspace");
  p->workspaceBytes = workspace_bytes;
  if (s) {
    kiln_cuda_program_free(p);
    return s;
  }
  *out = p;
  return nullptr;
}

kiln_status *kiln_cuda_program_run(kiln_cuda_program *p, kiln_entry_fn entry,
                                   const kiln_cuda_ptr *buffers, size_t num_buffers) {
  if (!p || !entry || (num_buffers && !buffers))
    return kiln_status_create(KILN_INVALID_ARGUMENT, "kiln_cuda_program_run: NULL argument");
  if (activeRun.program)
    return kiln_status_create(KILN_INVALID_ARGUMENT,
                              "kiln_cuda_program_run: called from inside a run");
  std::lock_guard<std::mutex> lock(p->running);
  // The compiled code takes device addresses where the CPU's takes host
  // ones: inputs, outputs, then the workspace and the weights.
  std::vector<void *> args;
  for (size_t i = 0; i < num_buffers; ++i)
    args.push_back(reinterpret_cast<void *>((uintptr_t)buffers[i]));
  if (p->workspaceBytes)
    args.push_back(reinterpret_cast<void *>((uintptr_t)p->workspace));
  if (p->constantsBytes)
    args.push_back(reinterpret_cast<void *>((uintptr_t)p->constants));
  ContextScope scope(p->device);
  if (scope.status)
    return scope.status;
  activeRun.program = p;
  activeRun.error = nullptr;
  entry(args.data());
  kiln_status *error = activeRun.error;
  activeRun = ActiveRun();
  return error;
}

void kiln_cuda_launch_kernel(int64_t kernel, int64_t gx, int64_t gy, int64_t gz, int64_t bx,
                             int64_t by, int64_t bz, int64_t shared_bytes, void **args) {
  ActiveRun &run = activeRun;
  if (!run.program || run.error)
    return; // after a failed launch, the rest of the run is skipped
  kiln_cuda_program &p = *run.program;
  if (kernel < 0 || (size_t)kernel >= p.kernels.size()) {
    run.error = kiln_status_create(KILN_INTERNAL, ("compiled code launched kernel " +
                                                   std::to_string(kernel) + " of " +
                                                   std::to_string(p.kernels.size()))
                                                      .c_str());
    return;
  }
  int64_t dims[6] = {gx, gy, gz, bx, by, bz};
  for (int64_t v : dims) {
    if (v == 0)
      return; // an empty tensor: nothing to compute
    if (v < 0 || v > 0x7fffffff) {
      run.error = kiln_status_create(
          KILN_DEVICE_ERROR, ("kernel '" + p.kernelNames[kernel] + "': launch dimension " +
                              std::to_string(v) + " out of range")
                                 .c_str());
      return;
    }
  }
  const Driver &d = *p.device->driver;
  run.error = check(d,
                    d.cuLaunchKernel(p.kernels[kernel], (unsigned)gx, (unsigned)gy,
                                     (unsigned)gz, (unsigned)bx, (unsigned)by, (unsigned)bz,
                                     (unsigned)shared_bytes, p.device->stream, args, nullptr),
                    "cuLaunchKernel", " for kernel '" + p.kernelNames[kernel] + "'");
}

kiln_status *kiln_cuda_timer_create(kiln_cuda_device *dev, kiln_cuda_timer **out) {
  if (!dev || !out)
    return kiln_status_create(KILN_INVALID_ARGUMENT, "kiln_cuda_timer_create: NULL argument");
  *out = nullptr;
  ContextScope scope(dev);
  if (scope.status)
    return scope.status;
  auto *t = new kiln_cuda_timer{dev};
  const Driver &d = *dev->driver;
  kiln_status *s = check(d, d.cuEventCreate(&t->start, 0), "cuEventCreate");
  if (!s)
    s = check(d, d.cuEventCreate(&t->stop, 0), "cuEventCreate");
  if (s) {
    if (t->start)
      d.cuEventDestroy(t->start);
    delete t;
    return s;
  }
  *out = t;
  return nullptr;
}

kiln_status *kiln_cuda_timer_start(kiln_cuda_timer *t) {
  if (!t)
    return kiln_status_create(KILN_INVALID_ARGUMENT, "kiln_cuda_timer_start: NULL timer");
  ContextScope scope(t->device);
  if (scope.status)
    return scope.status;
  const Driver &d = *t->device->driver;
  return check(d, d.cuEventRecord(t->start, t->device->stream), "cuEventRecord");
}

kiln_status *kiln_cuda_timer_stop(kiln_cuda_timer *t, double *milliseconds) {
  if (!t || !milliseconds)
    return kiln_status_create(KILN_INVALID_ARGUMENT, "kiln_cuda_timer_stop: NULL argument");
  ContextScope scope(t->device);
  if (scope.status)
    return scope.status;
  const Driver &d = *t->device->driver;
  float ms = 0;
  kiln_status *s = check(d, d.cuEventRecord(t->stop, t->device->stream), "cuEventRecord");
  if (!s)
    s = check(d, d.cuEventSynchronize(t->stop), "cuEventSynchronize");
  if (!s)
    s = check(d, d.cuEventElapsedTime(&ms, t->start, t->stop), "cuEventElapsedTime");
  *milliseconds = ms;
  return s;
}

void kiln_cuda_timer_free(kiln_cuda_timer *t) {
  if (!t)
    return;
  {
    ContextScope scope(t->device);
    if (!scope.status) {
      t->device->driver->cuEventDestroy(t->start);
      t->device->driver->cuEventDestroy(t->stop);
    } else {
      kiln_status_free(scope.status);
    }
  }
  delete t;
}

} // extern "C"
