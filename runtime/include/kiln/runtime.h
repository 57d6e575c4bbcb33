/* Kiln runtime: the C ABI between compiled models and their callers.
 *
 * This header is the one contract between the compiler and the runtime.
 * A compiled model is described by a kiln_model_desc: its entry point, its
 * signature and its workspace needs. The JIT fills one in after compiling;
 * ahead-of-time bundles will export one. The runtime validates inputs
 * against the signature, allocates outputs and calls the entry point. It has
 * no dependency on LLVM or MLIR.
 */
#ifndef KILN_RUNTIME_H
#define KILN_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped whenever kiln_model_desc or the entry-point ABI changes
 * (3: compiled code calls kiln_parallel_for; 4: workspace alignment, model
 * hash and external weights in kiln_model_desc; 6: compiled code calls
 * kiln_loop_guard; 7: kiln_model_desc.cuda; 8: outputs whose number of rows
 * is known only at run time, kiln_model_desc.output_rows; 9: dims known only
 * at run time, kiln_model_desc.num_runtime_dims; 10: their declared bounds,
 * kiln_model_desc.runtime_dim_bounds). */
#define KILN_ABI_VERSION 10
#define KILN_MAX_RANK 16

/* Element types; the values are ONNX's TensorProto.DataType numbers. */
typedef enum kiln_dtype {
  KILN_FLOAT32 = 1,
  KILN_UINT8 = 2,
  KILN_INT8 = 3,
  KILN_UINT16 = 4,
  KILN_INT16 = 5,
  KILN_INT32 = 6,
  KILN_INT64 = 7,
  KILN_BOOL = 9,
  KILN_FLOAT16 = 10,
  KILN_FLOAT64 = 11,
  KILN_UINT32 = 12,
  KILN_UINT64 = 13,
  KILN_BFLOAT16 = 16
} kiln_dtype;

typedef enum kiln_status_code {
  KILN_OK = 0,
  KILN_INVALID_ARGUMENT = 1, /* null pointers, wrong counts */
  KILN_DTYPE_MISMATCH = 2,   /* an input of the wrong element type */
  KILN_SHAPE_MISMATCH = 3,   /* an input of the wrong rank or dims */
  KILN_OUT_OF_MEMORY = 4,
  KILN_COMPILE_ERROR = 5,    /* the model could not be loaded or compiled */
  KILN_IO_ERROR = 6,
  KILN_INTERNAL = 7,
  KILN_DEVICE_ERROR = 8,     /* a GPU driver or device is missing or failed (kiln/cuda.h) */
  KILN_LIMIT_EXCEEDED = 9    /* a run went past a limit, such as kiln_max_loop_iterations() */
} kiln_status_code;

/* A status with a message. NULL means success everywhere a kiln_status* is
 * returned; a non-NULL status must be freed with kiln_status_free. */
typedef struct kiln_status kiln_status;
kiln_status_code kiln_status_get_code(const kiln_status *status);
const char *kiln_status_message(const kiln_status *status);
void kiln_status_free(kiln_status *status);
kiln_status *kiln_status_create(kiln_status_code code, const char *message);

/* One signature entry. dims[i] == -1 marks a dimension known only at run time. */
typedef struct kiln_tensor_desc {
  const char *name;
  int32_t dtype;
  int32_t rank;
  const int64_t *dims;
} kiln_tensor_desc;

/* The entry point of a compiled model: buffers holds the input data
 * pointers, then the output data pointers, in signature order, then one
 * 8-byte buffer per row count (kiln_model_desc.num_row_counts), then (when
 * workspace_size > 0) the workspace: scratch memory of workspace_size bytes,
 * 64-byte aligned, where the compiled code keeps its intermediates at
 * offsets planned at compile time. Buffers are dense, row-major, and at
 * least 64-byte aligned for outputs. Inputs are only read. No two buffers
 * may overlap: the compiled code assumes they do not (kiln_model_execute
 * allocates outputs and workspace). A workspace needs no initialisation and
 * may be reused from run to run, but not by two runs at the same time. */
typedef void (*kiln_entry_fn)(void **buffers);

/* Weights a bundle keeps outside its object (kilnc --weights=external):
 * storage inside the bundle that kiln_model_load_weights fills from the
 * NAME.weights file kilnc wrote next to it. */
typedef struct kiln_weights {
  void *data;       /* `size` bytes, 64-byte aligned */
  uint64_t size;
  uint64_t hash;    /* kiln_hash64 of the bytes */
  int32_t loaded;   /* set by kiln_model_load_weights */
} kiln_weights;

/* An output whose number of entries along one axis is known only at run
 * time: the boxes a NonMaxSuppression keeps, NonZero's indices, what a
 * detector's post-processing gathers with them. The compiled code writes
 * the output at its largest size (the desc's dims) and the number of valid
 * entries along `axis` as an int64 to row-count buffer `count`. */
typedef struct kiln_output_rows {
  int32_t count; /* index of the row-count buffer; -1 for an output of fixed dims */
  int32_t axis;
} kiln_output_rows;

typedef struct kiln_model_desc {
  uint32_t abi_version; /* KILN_ABI_VERSION; checked before anything else is read */
  const char *name;
  int32_t num_inputs;
  int32_t num_outputs;
  const kiln_tensor_desc *inputs;
  const kiln_tensor_desc *outputs;
  uint64_t workspace_size; /* bytes of scratch the entry point needs */
  kiln_entry_fn entry;
  uint64_t workspace_alignment; /* of the workspace, in bytes (64) */
  const char *model_hash; /* hex digest of the ONNX model compiled; NULL if unknown */
  kiln_weights *weights;  /* external weights; NULL when they are in the code */
  /* A bundle of several specialisations (kilnc --dim): num_variants
   * descriptors, each for one set of static input dims and sharing this
   * one's weights. kiln_model_execute runs the variant whose input dims equal
   * the inputs' and refuses other shapes. This descriptor's dims are -1
   * where the variants differ, its workspace_size is the largest of theirs,
   * and its entry is NULL. Or, where the bundle also holds code compiled
   * once for every shape, this descriptor is that code's (its entry and
   * runtime_dims set, its dims -1 where they are known only at run time),
   * and runs the inputs no variant fits. 0 and NULL for a model of one
   * shape set. */
  int32_t num_variants;
  const struct kiln_model_desc *variants;
  /* A bundle compiled for an NVIDIA GPU (kilnc --target=nvptx64-nvidia-cuda
   * --emit=bundle): its kernels, PTX and weights (kiln/cuda.h). Its entry
   * point takes device addresses, so kiln_model_execute refuses it; run it
   * with kiln_cuda_model_load and kiln_cuda_model_execute. NULL for CPU
   * code. */
  const struct kiln_cuda_code *cuda;
  /* NULL when every output has fixed dims; otherwise one entry per output.
   * The entry point takes num_row_counts buffers of one int64 each after
   * the outputs, and kiln_model_execute gives each output with a count
   * cut to that many entries along its axis (so its dims are at most the
   * desc's). */
  const kiln_output_rows *output_rows;
  int32_t num_row_counts;
  /* Dims known only at run time (compiled once for every input shape): the
   * inputs' and outputs' dims that are -1 in this descriptor, in order
   * (inputs first), num_runtime_dims of them. kiln_model_execute fills in
   * the inputs' from the tensors given, calls runtime_dims(dims), which
   * returns 0 after writing the outputs' (or 1 + the index of an input's
   * dim that disagrees with another input's dim of the same name, or -2
   * where the inputs leave a convolution or pooling window larger than its
   * padded input, a size of 0 or less inside the model, or -3 where they
   * take a Slice whose bounds follow from them past the end of the dim it
   * slices, or slice a dim of theirs shorter than a constant bound, which
   * this code assumed they do not), sizes
   * the outputs from it, and passes the array to the entry point as one
   * more buffer, after the workspace (or after the row counts when
   * workspace_size is 0). 0 and NULL for a model of static shapes. */
  int32_t num_runtime_dims;
  int64_t (*runtime_dims)(int64_t *dims);
  /* Bounds declared for dims known only at run time (kilnc --dim
   * NAME=LO..HI, kiln::CompileOptions::dimBounds): for each of the inputs'
   * entries of the runtime dims array, in order, its least and greatest
   * value (two int64 each), and its name (the ONNX dim_param). kiln_model_
   * execute refuses inputs outside them (KILN_SHAPE_MISMATCH, naming the
   * input, the dim and the bounds) before anything runs. NULL: none
   * declared. */
  const int64_t *runtime_dim_bounds;
  const char *const *runtime_dim_names;
} kiln_model_desc;

/* Memory for intermediates whose size is known only at run time: compiled
 * code allocates them through these (MLIR's generic allocation functions)
 * rather than malloc, so that large buffers are recycled from run to run
 * as outputs are (KILN_BUFFER_CACHE_MB) instead of being mapped and
 * faulted in afresh. Alignment is at most 64. */
void *_mlir_memref_to_llvm_alloc(uint64_t size);
void *_mlir_memref_to_llvm_aligned_alloc(uint64_t alignment, uint64_t size);
void _mlir_memref_to_llvm_free(void *ptr);

/* A 64-bit hash of `size` bytes (not cryptographic): what kiln_weights.hash
 * and a weights file's header hold. */
uint64_t kiln_hash64(const void *data, size_t size);

/* Reads a weights file written by kilnc --weights=external into
 * model->weights, after checking that it belongs to this model: its header
 * (magic, ABI version, size, hash) and then the hash of its contents, so a
 * truncated, corrupt or other model's file is an error and leaves the model
 * unloaded. Not safe while the model runs. Models without external weights
 * accept any call with path NULL. */
kiln_status *kiln_model_load_weights(const kiln_model_desc *model, const char *path);

/* The layout of a weights file: this header (little-endian), zero padding
 * up to byte 64, then the `size` bytes. */
#define KILN_WEIGHTS_MAGIC "KILNWGT"
#define KILN_WEIGHTS_DATA_OFFSET 64
typedef struct kiln_weights_file_header {
  char magic[8];        /* KILN_WEIGHTS_MAGIC, NUL-terminated */
  uint32_t abi_version; /* KILN_ABI_VERSION of the compiler that wrote it */
  uint32_t reserved;
  uint64_t size;
  uint64_t hash; /* kiln_hash64 of the bytes */
} kiln_weights_file_header;

/* A dense tensor owned by the runtime (or wrapping caller memory). */
typedef struct kiln_tensor kiln_tensor;

size_t kiln_dtype_size(int32_t dtype); /* 0 for unknown types */
const char *kiln_dtype_name(int32_t dtype);

/* Allocates a zero-filled tensor; NULL on a bad dtype/rank/dims, a size of
 * 2^48 bytes or more, or out of memory. */
kiln_tensor *kiln_tensor_create(int32_t dtype, int32_t rank, const int64_t *dims);
/* Wraps caller-owned memory (not freed by kiln_tensor_free). */
kiln_tensor *kiln_tensor_wrap(int32_t dtype, int32_t rank, const int64_t *dims, void *data);
/* Frees the tensor. An owned buffer of 64 KiB or more is kept for the next
 * tensor of that size (outputs of the next run), within KILN_BUFFER_CACHE_MB
 * megabytes (default 256; 0 disables); kiln_release_cached_memory() frees
 * the kept buffers now. */
void kiln_tensor_free(kiln_tensor *tensor);
void kiln_release_cached_memory(void);
int32_t kiln_tensor_dtype(const kiln_tensor *tensor);
int32_t kiln_tensor_rank(const kiln_tensor *tensor);
const int64_t *kiln_tensor_dims(const kiln_tensor *tensor);
int64_t kiln_tensor_num_elements(const kiln_tensor *tensor);
size_t kiln_tensor_num_bytes(const kiln_tensor *tensor);
void *kiln_tensor_data(kiln_tensor *tensor);

/* A new tensor holding the first `count` entries of `tensor` along `axis`
 * (count clamped to [0, dims[axis]]): what kiln_model_execute gives for an
 * output whose number of rows is known only at run time. NULL on a bad
 * axis or out of memory. */
kiln_tensor *kiln_tensor_take_leading(const kiln_tensor *tensor, int32_t axis, int64_t count);

/* Checks `inputs` against the model's signature, allocates outputs[0..n)
 * (not zero-filled: the model writes every element; the caller frees them
 * with kiln_tensor_free; an output with a run-time row count is cut to it,
 * kiln_output_rows) and runs the entry point on
 * kiln_default_thread_pool(). Safe to call concurrently on one model.
 * Returns NULL on success. */
kiln_status *kiln_model_execute(const kiln_model_desc *model, const kiln_tensor *const *inputs,
                                size_t num_inputs, kiln_tensor **outputs, size_t num_outputs);

/* kiln_model_execute with caller-provided scratch: `workspace` holds at least
 * model->workspace_size bytes, 64-byte aligned (may be NULL when that is 0);
 * runs on kiln_default_thread_pool().
 * kiln_model_execute itself uses one workspace per calling thread, kept
 * between runs and grown when a model needs more, so that no run allocates
 * scratch on the hot path. */
kiln_status *kiln_model_execute_with_workspace(const kiln_model_desc *model,
                                               const kiln_tensor *const *inputs, size_t num_inputs,
                                               kiln_tensor **outputs, size_t num_outputs,
                                               void *workspace);

/* Threads.
 *
 * Compiled code splits the outer tiles of its kernels with
 * kiln_parallel_for, which runs them on the pool attached to the calling
 * thread, the calling thread included, or serially when there is none. The
 * kiln_model_execute* functions attach a pool for the duration of a run. */
typedef struct kiln_thread_pool kiln_thread_pool;

/* The number of physical cores (the default thread count). */
int32_t kiln_default_num_threads(void);

/* A pool of num_threads threads in all, the caller counted (num_threads - 1
 * workers); num_threads <= 0 means kiln_default_num_threads(). Idle workers
 * spin briefly, then sleep. NULL when out of memory. */
kiln_thread_pool *kiln_thread_pool_create(int32_t num_threads);
void kiln_thread_pool_free(kiln_thread_pool *pool);
int32_t kiln_thread_pool_size(const kiln_thread_pool *pool);

/* The process-wide pool that kiln_model_execute uses (default thread
 * count), created on first use and never freed. */
kiln_thread_pool *kiln_default_thread_pool(void);

/* Makes `pool` the one kiln_parallel_for uses on this thread (NULL: run
 * serially); returns the previously attached pool. */
kiln_thread_pool *kiln_thread_pool_attach(kiln_thread_pool *pool);

/* Calls fn(ctx, begin, end) on disjoint ranges covering [0, n), spread over
 * the attached pool's threads, in chunks of at least `grain` items; returns
 * when all are done. Runs fn(ctx, 0, n) on the calling thread when there is
 * no pool, when n <= grain, inside another kiln_parallel_for, or when
 * another thread is using the pool. */
typedef void (*kiln_task_fn)(void *ctx, int64_t begin, int64_t end);
void kiln_parallel_for(int64_t n, int64_t grain, kiln_task_fn fn, void *ctx);

/* The most iterations that any one ONNX Loop of a compiled model runs. A Loop
 * that would start iteration number `limit` (counting from 0) stops its run
 * instead: kiln_model_execute* returns KILN_LIMIT_EXCEEDED naming the Loop
 * node, with no outputs. This is what keeps a Loop whose trip count or
 * condition comes from the inputs from running forever. Process-wide;
 * default 2^31 (the largest constant trip count Kiln compiles); a limit <= 0
 * restores the default. Returns the previous limit. */
#define KILN_DEFAULT_MAX_LOOP_ITERATIONS ((int64_t)1 << 31)
int64_t kiln_set_max_loop_iterations(int64_t limit);
int64_t kiln_max_loop_iterations(void);

/* Called by compiled code before each iteration of a Loop: 1 to run it, 0 to
 * stop, either because `iteration` reached the limit (the run's error is
 * then recorded, naming `node`, the Loop's NUL-terminated ONNX node name) or
 * because an earlier Loop of the same run stopped so. */
int32_t kiln_loop_guard(int64_t iteration, const char *node);

/* For a program that calls an object's kiln_entry itself rather than through
 * kiln_model_execute*: after the call, the status that stopped the run on
 * this thread (a Loop past its limit, whose outputs are then not valid), or
 * NULL when it ran to the end. Clears it; free it with kiln_status_free. */
kiln_status *kiln_take_run_error(void);

/* kiln_model_execute with an explicit workspace (NULL: the calling thread's
 * own, as kiln_model_execute) and thread pool (NULL: one thread). Safe to
 * call concurrently; runs that share a pool take turns using its workers. */
kiln_status *kiln_model_execute_with_pool(const kiln_model_desc *model,
                                          const kiln_tensor *const *inputs, size_t num_inputs,
                                          kiln_tensor **outputs, size_t num_outputs,
                                          void *workspace, kiln_thread_pool *pool);

/* Only the checks of kiln_model_execute, for callers that run elsewhere. */
kiln_status *kiln_model_check_inputs(const kiln_model_desc *model,
                                     const kiln_tensor *const *inputs, size_t num_inputs);

/* What the model's runtime_dims (see kiln_model_desc) returns for these
 * inputs, given the inputs as kiln_model_execute takes them (their count
 * and ranks the descriptor's, else -1): 0 when they fit, 1 + the index of a
 * dim that disagrees with another of its name, -2 or -3 as described
 * there; 0 for a model without dims known only at run time. `dims`, when
 * not NULL, receives the num_runtime_dims entries (outputs' included). A
 * JIT uses -3 to compile for these shapes where a bundle must refuse them. */
int64_t kiln_model_runtime_dims_result(const kiln_model_desc *model,
                                       const kiln_tensor *const *inputs, size_t num_inputs,
                                       int64_t *dims);

#ifdef __cplusplus
}
#endif

#endif /* KILN_RUNTIME_H */
