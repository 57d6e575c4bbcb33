/* Kiln's CUDA backend: the NVIDIA driver API, opened at run time.
 *
 * libkiln_runtime links nothing from CUDA. kiln_cuda_device_open dlopens the
 * driver (libcuda.so.1, or the file KILN_CUDA_DRIVER names), resolves the
 * entry points it needs by their versioned names (cuMemAlloc_v2, ...), and
 * retains the device's primary context. Every driver error becomes a
 * kiln_status naming the call and the driver's own message; on a machine
 * without a driver or a GPU, opening a device is such an error and nothing
 * else in the runtime is affected.
 *
 * The calls push the device's primary context for their duration, so they
 * may come from any thread. PTX comes from `kilnc --emit=ptx`.
 */
#ifndef KILN_CUDA_H
#define KILN_CUDA_H

#include "kiln/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kiln_cuda_device kiln_cuda_device;
typedef struct kiln_cuda_module kiln_cuda_module;
/* A device address (CUdeviceptr). */
typedef uint64_t kiln_cuda_ptr;

/* Opens GPU `ordinal` (0: the first). On failure *out is NULL and the
 * status (code KILN_DEVICE_ERROR) says why: no driver, no device, or the
 * driver call that failed with the driver's message. */
kiln_status *kiln_cuda_device_open(int ordinal, kiln_cuda_device **out);
void kiln_cuda_device_close(kiln_cuda_device *device);
/* The device's name ("NVIDIA H100 80GB HBM3") and compute capability as
 * major * 10 + minor (90 for sm_90). */
const char *kiln_cuda_device_name(const kiln_cuda_device *device);
int kiln_cuda_device_compute_capability(const kiln_cuda_device *device);

kiln_status *kiln_cuda_malloc(kiln_cuda_device *device, size_t bytes, kiln_cuda_ptr *out);
kiln_status *kiln_cuda_free(kiln_cuda_device *device, kiln_cuda_ptr ptr);
kiln_status *kiln_cuda_copy_to_device(kiln_cuda_device *device, kiln_cuda_ptr dst,
                                      const void *src, size_t bytes);
kiln_status *kiln_cuda_copy_to_host(kiln_cuda_device *device, void *dst, kiln_cuda_ptr src,
                                    size_t bytes);

/* Loads PTX text (NUL-terminated) with cuModuleLoadDataEx; a failure
 * carries the driver's JIT error log. */
kiln_status *kiln_cuda_module_load(kiln_cuda_device *device, const char *ptx,
                                   kiln_cuda_module **out);
void kiln_cuda_module_unload(kiln_cuda_module *module);

/* Launches `kernel` of `module` on the device's stream: grid and block are
 * x, y, z; args[i] points at the i-th kernel parameter's value, as
 * cuLaunchKernel takes them. Asynchronous: kiln_cuda_synchronize waits and
 * reports errors of the work in flight. */
kiln_status *kiln_cuda_launch(kiln_cuda_module *module, const char *kernel,
                              const uint32_t grid[3], const uint32_t block[3],
                              uint32_t shared_bytes, void **args);
kiln_status *kiln_cuda_synchronize(kiln_cuda_device *device);

/* --- Compiled models ------------------------------------------------------
 * A model compiled for CUDA (kiln::Model with device "cuda") is PTX plus a
 * host function with the CPU entry point's signature (kiln_entry_fn) that
 * takes device addresses and launches the kernels through
 * kiln_cuda_launch_kernel. A program holds what stays on the device between
 * runs: the loaded kernels, the weights (uploaded once, when it is
 * created) and the workspace for intermediates (the compiler's static
 * memory plan). */
typedef struct kiln_cuda_program kiln_cuda_program;

/* Loads `ptx`, resolves kernels[0..num_kernels) (the compiled code names
 * them by index), uploads the constants and allocates the workspace. */
kiln_status *kiln_cuda_program_create(kiln_cuda_device *device, const char *ptx,
                                      const char *const *kernels, size_t num_kernels,
                                      const void *constants, size_t constants_bytes,
                                      size_t workspace_bytes, kiln_cuda_program **out);
void kiln_cuda_program_free(kiln_cuda_program *program);

/* Runs the compiled host function `entry` on device buffers (inputs, then
 * outputs, outputs at least 64-byte aligned as kiln_cuda_model_run checks;
 * the program appends its workspace and weights). The kernels are
 * queued on the device's stream: kiln_cuda_synchronize, or a copy to the
 * host, waits for them. The first failed launch is the result, and the
 * rest of the run is skipped. Runs of one program are serialised. */
kiln_status *kiln_cuda_program_run(kiln_cuda_program *program, kiln_entry_fn entry,
                                   const kiln_cuda_ptr *buffers, size_t num_buffers);

/* Called by compiled host code during kiln_cuda_program_run: kernel index,
 * grid and block (x, y, z), dynamic shared memory bytes, and pointers to
 * the kernel's parameters. Not for direct use. */
void kiln_cuda_launch_kernel(int64_t kernel, int64_t grid_x, int64_t grid_y, int64_t grid_z,
                             int64_t block_x, int64_t block_y, int64_t block_z,
                             int64_t shared_bytes, void **args);

/* Declares, at file scope, what a CUDA host object (kilnc
 * --target=nvptx64-nvidia-cuda -o model.o) defines for its entry point
 * NAME (kilnc --entry; kiln_entry by default): the host function NAME and,
 * for kiln_cuda_program_create, NAME_ptx, NAME_kernels, NAME_num_kernels,
 * NAME_weights, NAME_weights_size and NAME_workspace_size. */
#ifdef __cplusplus
#define KILN_CUDA_OBJECT_LINKAGE extern "C"
#else
#define KILN_CUDA_OBJECT_LINKAGE extern
#endif
#define KILN_CUDA_DECLARE_OBJECT(NAME)                                                     \
  KILN_CUDA_OBJECT_LINKAGE const char NAME##_ptx[];                                        \
  KILN_CUDA_OBJECT_LINKAGE const char *const NAME##_kernels[];                             \
  KILN_CUDA_OBJECT_LINKAGE const int64_t NAME##_num_kernels;                               \
  KILN_CUDA_OBJECT_LINKAGE const char NAME##_weights[];                                    \
  KILN_CUDA_OBJECT_LINKAGE const int64_t NAME##_weights_size;                              \
  KILN_CUDA_OBJECT_LINKAGE const int64_t NAME##_workspace_size;                            \
  KILN_CUDA_OBJECT_LINKAGE void NAME(void **buffers)

/* --- Bundles ----------------------------------------------------------------
 * kilnc MODEL.onnx --target=nvptx64-nvidia-cuda --mcpu=sm_NN --emit=bundle
 * -o DIR/NAME writes NAME.o and NAME.h as for the CPU; the descriptor
 * NAME_model points at this, and its entry point is the host code that
 * launches the kernels. */
/* What the compiler knew of one kernel. grid, block and shared_bytes are 0
 * where the host code computes them at each launch, or where the kernel is
 * launched with different ones; the host code passes them either way. */
typedef struct kiln_cuda_kernel_desc {
  const char *name;      /* the PTX .entry */
  uint32_t grid[3];      /* blocks per launch (x, y, z) */
  uint32_t block[3];     /* threads per block (x, y, z) */
  uint32_t shared_bytes; /* dynamic shared memory per block */
  uint32_t num_params;   /* the .entry's parameters */
} kiln_cuda_kernel_desc;

typedef struct kiln_cuda_code {
  int32_t compute_capability; /* the --mcpu it was compiled for: 80 for sm_80 */
  int32_t num_kernels;
  const kiln_cuda_kernel_desc *kernels; /* in the order the host code names them */
  const char *ptx;                      /* NUL-terminated, every kernel */
  /* The weights uploaded once per loaded model: here, or NULL when they
   * are in the model's external weights file (kiln_model_load_weights). */
  const void *weights;
  uint64_t weights_size;
  /* 1 for an architecture-specific target (--mcpu=sm_90a), whose PTX runs
   * on that architecture only; 0: on compute_capability and newer. */
  int32_t arch_specific;
} kiln_cuda_code;

/* A bundle loaded onto a device: its kernels, its weights and workspace,
 * and device buffers for its inputs and outputs. */
typedef struct kiln_cuda_model kiln_cuda_model;

/* Loads a CUDA bundle's descriptor (&NAME_model) onto `device`: the weights
 * are copied to the device here, so a bundle with external weights needs
 * kiln_model_load_weights first (loading them again later does not reach
 * a model already loaded). Errors: a model compiled for the CPU, of another
 * runtime ABI, whose external weights are not loaded, compiled for a newer
 * GPU than `device` (or, sm_NNa, for another one), or any driver failure
 * (KILN_DEVICE_ERROR naming the call). */
kiln_status *kiln_cuda_model_load(kiln_cuda_device *device, const kiln_model_desc *model,
                                  kiln_cuda_model **out);
void kiln_cuda_model_free(kiln_cuda_model *model);
/* As kiln_model_execute, on the GPU: checks the host tensors `inputs`
 * against the signature, copies them to the device, runs the kernels and
 * copies the outputs into new host tensors (free with kiln_tensor_free).
 * Runs of one model are serialised. */
kiln_status *kiln_cuda_model_execute(kiln_cuda_model *model, const kiln_tensor *const *inputs,
                                     size_t num_inputs, kiln_tensor **outputs,
                                     size_t num_outputs);
/* Runs on device buffers the caller owns (inputs, then outputs, each of
 * the signature's size) and waits for the kernels. Outputs must be at least
 * 64-byte aligned, as for the CPU entry point (cuMemAlloc's are); inputs
 * may be at any address. */
kiln_status *kiln_cuda_model_run(kiln_cuda_model *model, const kiln_cuda_ptr *buffers,
                                 size_t num_buffers);

/* Device time between start and stop, measured with CUDA events on the
 * device's stream. */
typedef struct kiln_cuda_timer kiln_cuda_timer;
kiln_status *kiln_cuda_timer_create(kiln_cuda_device *device, kiln_cuda_timer **out);
kiln_status *kiln_cuda_timer_start(kiln_cuda_timer *timer);
/* Waits for the work queued before it and gives the elapsed milliseconds. */
kiln_status *kiln_cuda_timer_stop(kiln_cuda_timer *timer, double *milliseconds);
void kiln_cuda_timer_free(kiln_cuda_timer *timer);

#ifdef __cplusplus
}
#endif

#endif
