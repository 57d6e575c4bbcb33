// The Kiln runtime. Deliberately small and free of LLVM/MLIR: it only
// checks signatures, owns tensor memory and calls entry points.
#include "kiln/runtime.h"

#include "buffer_cache.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

struct kiln_status {
  kiln_status_code code;
  std::string message;
};

struct kiln_tensor {
  int32_t dtype = 0;
  int32_t rank = 0;
  int64_t dims[KILN_MAX_RANK] = {};
  void *data = nullptr;
  /// The buffer's true size when owned (kiln_rt::acquireBuffer).
  size_t capacity = 0;
  bool owned = false;
};

extern "C" {

kiln_status *kiln_status_create(kiln_status_code code, const char *message) {
  // A C caller may pass any int; in C++ an enum holding a value it does not
  // name is undefined behaviour, so the bits are read as an integer and a
  // code that does not exist becomes KILN_INTERNAL.
  static_assert(sizeof(kiln_status_code) == sizeof(int32_t), "C enums are ints here");
  int32_t raw;
  std::memcpy(&raw, &code, sizeof raw);
  kiln_status_code known =
      raw >= KILN_OK && raw <= KILN_LIMIT_EXCEEDED ? (kiln_status_code)raw : KILN_INTERNAL;
  return new (std::nothrow) kiln_status{known, message ? message : ""};
}
kiln_status_code kiln_status_get_code(const kiln_status *s) { return s ? s->code : KILN_OK; }
const char *kiln_status_message(const kiln_status *s) { return s ? s->message.c_str() : "ok"; }
void kiln_status_free(kiln_status *s) { delete s; }

size_t kiln_dtype_size(int32_t dtype) {
  switch (dtype) {
  case KILN_FLOAT32: case KILN_INT32: case KILN_UINT32: return 4;
  case KILN_UINT8: case KILN_INT8: case KILN_BOOL: return 1;
  case KILN_UINT16: case KILN_INT16: case KILN_FLOAT16: case KILN_BFLOAT16: return 2;
  case KILN_INT64: case KILN_FLOAT64: case KILN_UINT64: return 8;
  default: return 0;
  }
}

const char *kiln_dtype_name(int32_t dtype) {
  switch (dtype) {
  case KILN_FLOAT32: return "float32";
  case KILN_UINT8: return "uint8";
  case KILN_INT8: return "int8";
  case KILN_UINT16: return "uint16";
  case KILN_INT16: return "int16";
  case KILN_INT32: return "int32";
  case KILN_INT64: return "int64";
  case KILN_BOOL: return "bool";
  case KILN_FLOAT16: return "float16";
  case KILN_FLOAT64: return "float64";
  case KILN_UINT32: return "uint32";
  case KILN_UINT64: return "uint64";
  case KILN_BFLOAT16: return "bfloat16";
  default: return "unknown";
  }
}

static bool elementCount(int32_t rank, const int64_t *dims, int64_t &count) {
  count = 1;
  for (int32_t i = 0; i < rank; ++i) {
    if (dims[i] < 0)
      return false;
    if (dims[i] != 0 && count > INT64_MAX / dims[i])
      return false;
    count *= dims[i];
  }
  return true;
}

static kiln_tensor *makeTensor(int32_t dtype, int32_t rank, const int64_t *dims) {
  if (kiln_dtype_size(dtype) == 0 || rank < 0 || rank > KILN_MAX_RANK || (rank && !dims))
    return nullptr;
  int64_t count;
  if (!elementCount(rank, dims, count))
    return nullptr;
  // No tensor of 2^48 bytes (256 TiB) or more: then the byte count of any
  // tensor (elements x element size, rounded up by the allocator) fits in
  // size_t with room to spare, and an absurd shape is refused here, before
  // the allocator sees it (2^62 int64s would wrap to 0 bytes).
  constexpr int64_t kMaxTensorBytes = int64_t(1) << 48;
  if (count > (kMaxTensorBytes - 1) / (int64_t)kiln_dtype_size(dtype))
    return nullptr;
  auto *t = new (std::nothrow) kiln_tensor;
  if (!t)
    return nullptr;
  t->dtype = dtype;
  t->rank = rank;
  for (int32_t i = 0; i < rank; ++i)
    t->dims[i] = dims[i];
  return t;
}

/// A tensor whose buffer holds whatever was there: for outputs, which the
/// entry point writes in full. KILN_DEBUG_FILL=1 fills them with 0xff bytes
/// (NaN in floats, -1 in integers) so that an element a kernel leaves
/// unwritten shows in the results instead of passing as a zero.
static kiln_tensor *createUninitialized(int32_t dtype, int32_t rank, const int64_t *dims) {
  kiln_tensor *t = makeTensor(dtype, rank, dims);
  if (!t)
    return nullptr;
  size_t bytes = kiln_tensor_num_bytes(t);
  // Generated code may use aligned vector loads: 64-byte alignment, and a
  // non-zero allocation so that empty tensors still have a valid pointer.
  t->data = kiln_rt::acquireBuffer(bytes, t->capacity);
  if (!t->data) {
    delete t;
    return nullptr;
  }
  t->owned = true;
  static const bool fill = [] {
    const char *env = std::getenv("KILN_DEBUG_FILL");
    return env && *env && std::strcmp(env, "0") != 0;
  }();
  if (fill)
    std::memset(t->data, 0xff, kiln_rt::paddedSize(bytes));
  return t;
}

kiln_tensor *kiln_tensor_create(int32_t dtype, int32_t rank, const int64_t *dims) {
  kiln_tensor *t = makeTensor(dtype, rank, dims);
  if (!t)
    return nullptr;
  size_t bytes = kiln_tensor_num_bytes(t);
  t->data = kiln_rt::acquireBuffer(bytes, t->capacity);
  if (!t->data) {
    delete t;
    return nullptr;
  }
  // The bytes and their 64-byte padding; the rest of the size class stays
  // untouched (never faulted in).
  std::memset(t->data, 0, kiln_rt::paddedSize(bytes));
  t->owned = true;
  return t;
}

kiln_tensor *kiln_tensor_wrap(int32_t dtype, int32_t rank, const int64_t *dims, void *data) {
  kiln_tensor *t = makeTensor(dtype, rank, dims);
  if (t)
    t->data = data;
  return t;
}

// Intermediates of run-time size: a 64-byte header before the buffer holds
// its capacity, which the recycling cache needs and free() does not pass.
void *_mlir_memref_to_llvm_aligned_alloc(uint64_t alignment, uint64_t size) {
  if (alignment > 64 || size > (uint64_t(1) << 48))
    return nullptr;
  size_t capacity = 0;
  auto *block = static_cast<char *>(kiln_rt::acquireBuffer(size + 64, capacity));
  if (!block)
    return nullptr;
  uint64_t stored = capacity;
  std::memcpy(block, &stored, sizeof stored);
  return block + 64;
}

void *_mlir_memref_to_llvm_alloc(uint64_t size) {
  return _mlir_memref_to_llvm_aligned_alloc(64, size);
}

void _mlir_memref_to_llvm_free(void *ptr) {
  if (!ptr)
    return;
  char *block = static_cast<char *>(ptr) - 64;
  uint64_t capacity;
  std::memcpy(&capacity, block, sizeof capacity);
  kiln_rt::releaseBuffer(block, capacity);
}

void kiln_tensor_free(kiln_tensor *t) {
  if (!t)
    return;
  if (t->owned)
    kiln_rt::releaseBuffer(t->data, t->capacity);
  delete t;
}

int32_t kiln_tensor_dtype(const kiln_tensor *t) { return t ? t->dtype : 0; }
int32_t kiln_tensor_rank(const kiln_tensor *t) { return t ? t->rank : 0; }
const int64_t *kiln_tensor_dims(const kiln_tensor *t) { return t ? t->dims : nullptr; }
int64_t kiln_tensor_num_elements(const kiln_tensor *t) {
  int64_t n = 0;
  return t && elementCount(t->rank, t->dims, n) ? n : 0;
}
size_t kiln_tensor_num_bytes(const kiln_tensor *t) {
  return t ? (size_t)kiln_tensor_num_elements(t) * kiln_dtype_size(t->dtype) : 0;
}
void *kiln_tensor_data(kiln_tensor *t) { return t ? t->data : nullptr; }

kiln_tensor *kiln_tensor_take_leading(const kiln_tensor *t, int32_t axis, int64_t count) {
  if (!t || axis < 0 || axis >= t->rank)
    return nullptr;
  int64_t full = t->dims[axis];
  count = count < 0 ? 0 : count > full ? full : count;
  int64_t dims[KILN_MAX_RANK];
  std::memcpy(dims, t->dims, sizeof dims);
  dims[axis] = count;
  kiln_tensor *cut = createUninitialized(t->dtype, t->rank, dims);
  if (!cut)
    return nullptr;
  // `outer` blocks of `count` slices out of each block of `full`.
  size_t slice = kiln_dtype_size(t->dtype), outer = 1;
  for (int32_t d = 0; d < axis; ++d)
    outer *= (size_t)t->dims[d];
  for (int32_t d = axis + 1; d < t->rank; ++d)
    slice *= (size_t)t->dims[d];
  const char *from = static_cast<const char *>(t->data);
  char *to = static_cast<char *>(cut->data);
  for (size_t o = 0; count && o < outer; ++o)
    std::memcpy(to + o * count * slice, from + o * full * slice, count * slice);
  return cut;
}

static std::string shapeString(int32_t rank, const int64_t *dims) {
  std::string s = "[";
  for (int32_t i = 0; i < rank; ++i) {
    if (i)
      s += ", ";
    s += dims[i] < 0 ? std::string("?") : std::to_string(dims[i]);
  }
  return s + "]";
}

static kiln_status *selectVariant(const kiln_model_desc *&m, const kiln_tensor *const *inputs,
                                  size_t n);

kiln_status *kiln_model_check_inputs(const kiln_model_desc *m, const kiln_tensor *const *inputs,
                                     size_t n) {
  if (!m)
    return kiln_status_create(KILN_INVALID_ARGUMENT, "no compiled model");
  if (m->abi_version != KILN_ABI_VERSION)
    return kiln_status_create(KILN_INVALID_ARGUMENT,
                              ("model was compiled for runtime ABI " +
                               std::to_string(m->abi_version) + ", this runtime has " +
                               std::to_string(KILN_ABI_VERSION)).c_str());
  if (!m->entry && (m->num_variants <= 0 || !m->variants))
    return kiln_status_create(KILN_INVALID_ARGUMENT, "no compiled model");
  if (m->weights && !m->weights->loaded)
    return kiln_status_create(KILN_INVALID_ARGUMENT,
                              ("model '" + std::string(m->name ? m->name : "") +
                               "' keeps its weights in a file: load it with "
                               "kiln_model_load_weights before running")
                                  .c_str());
  if (n != (size_t)m->num_inputs || (n && !inputs))
    return kiln_status_create(KILN_INVALID_ARGUMENT,
                              ("the model takes " + std::to_string(m->num_inputs) +
                               " inputs, got " + std::to_string(n)).c_str());
  for (size_t i = 0; i < n; ++i) {
    const kiln_tensor_desc &d = m->inputs[i];
    const kiln_tensor *t = inputs[i];
    std::string what = "input " + std::to_string(i) + " '" + (d.name ? d.name : "") + "'";
    if (!t || !t->data)
      return kiln_status_create(KILN_INVALID_ARGUMENT, (what + " is missing").c_str());
    if (t->dtype != d.dtype)
      return kiln_status_create(KILN_DTYPE_MISMATCH,
                                (what + " must be " + kiln_dtype_name(d.dtype) + ", got " +
                                 kiln_dtype_name(t->dtype)).c_str());
    bool ok = t->rank == d.rank;
    for (int32_t k = 0; ok && k < d.rank; ++k)
      ok = d.dims[k] < 0 || d.dims[k] == t->dims[k];
    if (!ok)
      return kiln_status_create(KILN_SHAPE_MISMATCH,
                                (what + " must have shape " + shapeString(d.rank, d.dims) +
                                 ", got " + shapeString(t->rank, t->dims)).c_str());
  }
  if (m->num_variants > 0 && m->variants) { // a bundle of specialisations
    if (kiln_status *s = selectVariant(m, inputs, n))
      return s;
    if (!m->entry)
      return kiln_status_create(KILN_INVALID_ARGUMENT, "no compiled model");
  }
  return nullptr;
}

namespace {
/// One workspace per thread, reused across runs and models; freed when the
/// thread ends.
struct ThreadWorkspace {
  void *data = nullptr;
  size_t size = 0;
  ~ThreadWorkspace() { std::free(data); }
  void *get(size_t bytes) {
    if (bytes <= size)
      return data;
    std::free(data);
    size = (bytes + 63) / 64 * 64;
    data = std::aligned_alloc(64, size);
    if (!data)
      size = 0;
    return data;
  }
};
thread_local ThreadWorkspace threadWorkspace;
} // namespace

kiln_status *kiln_model_execute(const kiln_model_desc *m, const kiln_tensor *const *inputs,
                                size_t numInputs, kiln_tensor **outputs, size_t numOutputs) {
  return kiln_model_execute_with_pool(m, inputs, numInputs, outputs, numOutputs, nullptr,
                                      kiln_default_thread_pool());
}

kiln_status *kiln_model_execute_with_workspace(const kiln_model_desc *m,
                                               const kiln_tensor *const *inputs, size_t numInputs,
                                               kiln_tensor **outputs, size_t numOutputs,
                                               void *workspace) {
  if (m && m->workspace_size && !workspace)
    return kiln_status_create(KILN_INVALID_ARGUMENT,
                              ("the model needs a 64-byte aligned workspace of " +
                               std::to_string(m->workspace_size) + " bytes")
                                  .c_str());
  return kiln_model_execute_with_pool(m, inputs, numInputs, outputs, numOutputs, workspace,
                                      kiln_default_thread_pool());
}

/// The variant of `m` compiled for exactly the inputs' dims, else `m`
/// itself where it runs any shape, or an error that lists the shapes there
/// are. `m`'s own checks (count, dtypes, the
/// dims all variants share) have passed.
static kiln_status *selectVariant(const kiln_model_desc *&m, const kiln_tensor *const *inputs,
                                  size_t n) {
  for (int32_t v = 0; v < m->num_variants; ++v) {
    const kiln_model_desc &d = m->variants[v];
    bool match = d.num_inputs == (int32_t)n;
    for (size_t i = 0; match && i < n; ++i) {
      match = d.inputs[i].rank == inputs[i]->rank;
      for (int32_t k = 0; match && k < d.inputs[i].rank; ++k)
        match = d.inputs[i].dims[k] == inputs[i]->dims[k];
    }
    if (match) {
      m = &d;
      return nullptr;
    }
  }
  // No specialisation fits: the bundle's variant for every shape runs it,
  // where there is one (the descriptor's own entry, kilnc --dim).
  if (m->entry && m->runtime_dims)
    return nullptr;
  std::string given, known;
  for (size_t i = 0; i < n; ++i)
    given += (i ? " " : "") + shapeString(inputs[i]->rank, inputs[i]->dims);
  for (int32_t v = 0; v < m->num_variants; ++v) {
    known += v ? "; " : "";
    for (int32_t i = 0; i < m->variants[v].num_inputs; ++i)
      known += (i ? " " : "") +
               shapeString(m->variants[v].inputs[i].rank, m->variants[v].inputs[i].dims);
  }
  return kiln_status_create(KILN_SHAPE_MISMATCH,
                            ("model '" + std::string(m->name ? m->name : "") +
                             "' was compiled for the input shapes " + known +
                             " (kilnc --dim), not for " + given)
                                .c_str());
}

static std::atomic<int64_t> maxLoopIterations{KILN_DEFAULT_MAX_LOOP_ITERATIONS};

/// Why the run on this thread stopped early (a Loop past its limit), set by
/// kiln_loop_guard, which compiled code calls on the thread that runs the
/// entry point: a Loop's condition is evaluated outside the kernels'
/// parallel tasks. Null while the run goes on.
static thread_local kiln_status *runError = nullptr;

int64_t kiln_set_max_loop_iterations(int64_t limit) {
  return maxLoopIterations.exchange(limit > 0 ? limit : KILN_DEFAULT_MAX_LOOP_ITERATIONS);
}

int64_t kiln_max_loop_iterations(void) { return maxLoopIterations.load(); }

/// The node name as it may be printed: bytes outside printable ASCII as
/// \xNN, at most 200 of them (names come from the model file).
static std::string printableName(const char *name) {
  std::string out;
  size_t n = 0;
  for (const char *p = name ? name : ""; *p; ++p, ++n) {
    if (n == 200) {
      out += "...";
      break;
    }
    unsigned char c = static_cast<unsigned char>(*p);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      static const char hex[] = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

int32_t kiln_loop_guard(int64_t iteration, const char *node) {
  if (runError)
    return 0;
  int64_t limit = maxLoopIterations.load(std::memory_order_relaxed);
  if (iteration < limit)
    return 1;
  runError = kiln_status_create(
      KILN_LIMIT_EXCEEDED,
      ("the Loop node '" + printableName(node) + "' reached the limit of " +
       std::to_string(limit) +
       " iterations and its run was stopped; raise the limit with "
       "kiln_set_max_loop_iterations() (kiln-run --max-loop-iterations N) if the model "
       "needs more")
          .c_str());
  if (!runError) // out of memory: still stop, with a status made later
    runError = reinterpret_cast<kiln_status *>(&runError);
  return 0;
}

/// The recorded stop as a status of its own (the out-of-memory marker
/// becomes one made now).
static kiln_status *ownedRunError(kiln_status *recorded) {
  if (recorded == reinterpret_cast<kiln_status *>(&runError))
    return kiln_status_create(KILN_LIMIT_EXCEEDED, "a Loop reached its iteration limit");
  return recorded;
}

kiln_status *kiln_take_run_error(void) {
  kiln_status *recorded = runError;
  runError = nullptr;
  return recorded ? ownedRunError(recorded) : nullptr;
}

/// The inputs' entries of a model's run-time dims array (its -1 dims, in
/// order; see kiln_model_desc.num_runtime_dims), and where each came from
/// (input, dim); `n` the number of entries filled. False when the
/// descriptor leaves too few entries.
static bool fillInputDims(const kiln_model_desc *m, const kiln_tensor *const *inputs,
                          size_t numInputs, std::vector<int64_t> &dims,
                          std::vector<std::pair<size_t, int32_t>> *from, size_t &n) {
  dims.assign((size_t)m->num_runtime_dims, 0);
  n = 0;
  for (size_t i = 0; i < numInputs; ++i)
    for (int32_t d = 0; d < m->inputs[i].rank; ++d)
      if (m->inputs[i].dims[d] < 0) {
        if (n == dims.size())
          return false;
        if (from)
          from->push_back({i, d});
        dims[n++] = inputs[i]->dims[d];
      }
  return true;
}

int64_t kiln_model_runtime_dims_result(const kiln_model_desc *m,
                                       const kiln_tensor *const *inputs, size_t numInputs,
                                       int64_t *out) {
  if (!m || !m->runtime_dims || m->num_runtime_dims <= 0)
    return 0;
  if (numInputs != (size_t)m->num_inputs || (numInputs && !inputs))
    return -1;
  for (size_t i = 0; i < numInputs; ++i)
    if (!inputs[i] || inputs[i]->rank != m->inputs[i].rank)
      return -1;
  std::vector<int64_t> dims;
  size_t n = 0;
  if (!fillInputDims(m, inputs, numInputs, dims, nullptr, n))
    return -1;
  int64_t result = m->runtime_dims(dims.data());
  if (out)
    std::copy(dims.begin(), dims.end(), out);
  return result;
}

/// The dims array of a model with dims known only at run time (see
/// kiln_model_desc.num_runtime_dims) and every output's dims.
static kiln_status *computeRuntimeDims(const kiln_model_desc *m, const kiln_tensor *const *inputs,
                                       size_t numInputs, std::vector<int64_t> &dims,
                                       std::vector<std::vector<int64_t>> &outputDims) {
  for (size_t k = 0; k < outputDims.size(); ++k)
    outputDims[k].assign(m->outputs[k].dims, m->outputs[k].dims + m->outputs[k].rank);
  if (!m->runtime_dims)
    return kiln_status_create(KILN_INVALID_ARGUMENT,
                              "the model has dims known only at run time but no runtime_dims");
  // Where each input entry came from, for the error message.
  std::vector<std::pair<size_t, int32_t>> from;
  size_t n = 0;
  if (!fillInputDims(m, inputs, numInputs, dims, &from, n))
    return kiln_status_create(KILN_INVALID_ARGUMENT, "num_runtime_dims is too small");
  if (m->runtime_dim_bounds)
    for (size_t k = 0; k < from.size(); ++k) {
      int64_t lo = m->runtime_dim_bounds[2 * k], hi = m->runtime_dim_bounds[2 * k + 1];
      if (dims[k] >= lo && dims[k] <= hi)
        continue;
      auto [i, d] = from[k];
      const char *input = m->inputs[i].name ? m->inputs[i].name : "";
      const char *dim = m->runtime_dim_names && m->runtime_dim_names[k]
                            ? m->runtime_dim_names[k]
                            : "";
      return kiln_status_create(
          KILN_SHAPE_MISMATCH,
          ("input " + std::to_string(i) + " '" + printableName(input) + "' has " +
           std::to_string(dims[k]) + " in dim " + std::to_string(d) + " ('" +
           printableName(dim) + "'), outside the bounds " + std::to_string(lo) + ".." +
           std::to_string(hi) + " declared for it when the model was compiled")
              .c_str());
    }
  int64_t bad = m->runtime_dims(dims.data());
  if (bad > 0 && (size_t)bad <= from.size()) {
    auto [i, d] = from[bad - 1];
    const char *name = m->inputs[i].name ? m->inputs[i].name : "";
    return kiln_status_create(KILN_SHAPE_MISMATCH,
                              ("input " + std::to_string(i) + " '" + printableName(name) +
                               "' has " + std::to_string(inputs[i]->dims[d]) + " in dim " +
                               std::to_string(d) +
                               ", which the model names as it names a dim of an earlier input "
                               "that has another size")
                                  .c_str());
  }
  auto givenShapes = [&] {
    std::string given;
    for (size_t i = 0; i < numInputs; ++i)
      given += (i ? " " : "") + shapeString(inputs[i]->rank, inputs[i]->dims);
    return given;
  };
  if (bad == -3)
    return kiln_status_create(
        KILN_SHAPE_MISMATCH,
        ("input shapes " + givenShapes() +
         " take a Slice past the end of the tensor it slices somewhere in the model, or "
         "start it after its end (a sequence longer than a table of positions sliced to its "
         "length, or shorter than a slice's constant bounds such as x[:, -3:], say), where ONNX "
         "would cut the slice short: this code, compiled once for "
         "every shape, takes each such slice whole; give smaller inputs, or compile for "
         "these shapes (kiln-run "
         "--specialize, kilnc --shape, kiln.compile(..., dynamic_shapes=False))")
            .c_str());
  if (bad == -2)
    return kiln_status_create(
        KILN_SHAPE_MISMATCH,
        ("input shapes " + givenShapes() + " leave a convolution or pooling window larger than its padded input somewhere in "
         "the model (a size of 0 or less there): give larger inputs")
            .c_str());
  if (bad != 0)
    return kiln_status_create(KILN_INTERNAL, "the model's runtime_dims failed");
  for (size_t k = 0; k < outputDims.size(); ++k)
    for (int64_t &d : outputDims[k])
      if (d < 0) {
        if (n == dims.size())
          return kiln_status_create(KILN_INVALID_ARGUMENT, "num_runtime_dims is too small");
        d = dims[n++];
        if (d < 0)
          return kiln_status_create(KILN_SHAPE_MISMATCH,
                                    ("output " + std::to_string(k) +
                                     " would have a negative dim for these input shapes")
                                        .c_str());
      }
  return nullptr;
}

kiln_status *kiln_model_execute_with_pool(const kiln_model_desc *m,
                                          const kiln_tensor *const *inputs, size_t numInputs,
                                          kiln_tensor **outputs, size_t numOutputs,
                                          void *workspace, kiln_thread_pool *pool) {
  if (m && m->abi_version == KILN_ABI_VERSION && m->cuda)
    return kiln_status_create(KILN_INVALID_ARGUMENT,
                              ("model '" + std::string(m->name ? m->name : "") +
                               "' is compiled for an NVIDIA GPU: run it with "
                               "kiln_cuda_model_load and kiln_cuda_model_execute (kiln/cuda.h)")
                                  .c_str());
  if (kiln_status *s = kiln_model_check_inputs(m, inputs, numInputs))
    return s;
  if (m->num_variants > 0 && m->variants)
    if (kiln_status *s = selectVariant(m, inputs, numInputs))
      return s;
  if (m->workspace_size && !workspace) {
    workspace = threadWorkspace.get(m->workspace_size);
    if (!workspace)
      return kiln_status_create(KILN_OUT_OF_MEMORY, "cannot allocate the model's workspace");
  }
  if (m->workspace_size && reinterpret_cast<uintptr_t>(workspace) % 64)
    return kiln_status_create(KILN_INVALID_ARGUMENT,
                              ("the model needs a 64-byte aligned workspace of " +
                               std::to_string(m->workspace_size) + " bytes")
                                  .c_str());
  if (numOutputs != (size_t)m->num_outputs || (numOutputs && !outputs))
    return kiln_status_create(KILN_INVALID_ARGUMENT,
                              ("the model has " + std::to_string(m->num_outputs) +
                               " outputs, room was given for " + std::to_string(numOutputs))
                                  .c_str());
  // Dims known only at run time: the inputs' from the tensors, the
  // outputs' from the model's runtime_dims. A model of static shapes (the
  // common case) allocates nothing for them.
  std::vector<int64_t> runtimeDims;
  std::vector<std::vector<int64_t>> outputDims;
  if (m->num_runtime_dims > 0) {
    outputDims.resize(numOutputs);
    if (kiln_status *s = computeRuntimeDims(m, inputs, numInputs, runtimeDims, outputDims))
      return s;
  } else {
    for (int32_t k = 0; k < m->num_outputs; ++k)
      for (int32_t d = 0; d < m->outputs[k].rank; ++d)
        if (m->outputs[k].dims[d] < 0)
          return kiln_status_create(KILN_INTERNAL,
                                    "output shapes must be static in a compiled executable");
  }
  int32_t numCounts = m->num_row_counts;
  if (numCounts < 0 || (numCounts > 0 && !m->output_rows))
    return kiln_status_create(KILN_INVALID_ARGUMENT,
                              "the model's row counts are malformed (num_row_counts without "
                              "output_rows, or negative)");
  for (int32_t k = 0; m->output_rows && k < m->num_outputs; ++k) {
    const kiln_output_rows &r = m->output_rows[k];
    if (r.count >= numCounts || (r.count >= 0 && (r.axis < 0 || r.axis >= m->outputs[k].rank)))
      return kiln_status_create(KILN_INVALID_ARGUMENT,
                                ("output " + std::to_string(k) +
                                 "'s row count is out of the model's range").c_str());
  }
  size_t total = numInputs + numOutputs + numCounts + 2;
  void **buffers = static_cast<void **>(std::malloc(total * sizeof(void *)));
  // One 64-byte slot per row count: the compiled code may assume the
  // alignment it gets for every buffer.
  int64_t *counts =
      numCounts ? static_cast<int64_t *>(std::aligned_alloc(64, (size_t)numCounts * 64)) : nullptr;
  if (!buffers || (numCounts && !counts)) {
    std::free(buffers);
    std::free(counts);
    return kiln_status_create(KILN_OUT_OF_MEMORY, "out of memory");
  }
  if (counts) // a count the code failed to write reads as no rows, not as garbage
    std::memset(counts, 0, (size_t)numCounts * 64);
  auto freeOutputs = [&](size_t n) {
    for (size_t j = 0; j < n; ++j) {
      kiln_tensor_free(outputs[j]);
      outputs[j] = nullptr;
    }
  };
  for (size_t i = 0; i < numInputs; ++i)
    buffers[i] = inputs[i]->data;
  for (size_t k = 0; k < numOutputs; ++k) {
    const kiln_tensor_desc &d = m->outputs[k];
    outputs[k] = createUninitialized(d.dtype, d.rank,
                                     outputDims.empty() ? d.dims : outputDims[k].data());
    if (!outputs[k]) {
      freeOutputs(k);
      std::free(buffers);
      std::free(counts);
      return kiln_status_create(KILN_OUT_OF_MEMORY, "cannot allocate an output tensor");
    }
    buffers[numInputs + k] = outputs[k]->data;
  }
  for (int32_t c = 0; c < numCounts; ++c)
    buffers[numInputs + numOutputs + c] = counts + 8 * c;
  buffers[numInputs + numOutputs + numCounts] = workspace;
  if (m->num_runtime_dims > 0)
    buffers[numInputs + numOutputs + numCounts + (m->workspace_size ? 1 : 0)] = runtimeDims.data();
  kiln_thread_pool *previous = kiln_thread_pool_attach(pool);
  kiln_status *outer = runError; // a run inside another run's callback, if ever
  runError = nullptr;
  m->entry(buffers);
  kiln_status *stopped = runError;
  runError = outer;
  kiln_thread_pool_attach(previous);
  std::free(buffers);
  if (stopped) {
    freeOutputs(numOutputs);
    std::free(counts);
    return ownedRunError(stopped);
  }
  for (size_t k = 0; m->output_rows && k < numOutputs; ++k) {
    const kiln_output_rows &r = m->output_rows[k];
    if (r.count < 0 || counts[8 * r.count] >= outputs[k]->dims[r.axis])
      continue; // every row valid: nothing to cut
    kiln_tensor *cut = kiln_tensor_take_leading(outputs[k], r.axis, counts[8 * r.count]);
    if (!cut) {
      freeOutputs(numOutputs);
      std::free(counts);
      return kiln_status_create(KILN_OUT_OF_MEMORY, "cannot allocate an output tensor");
    }
    kiln_tensor_free(outputs[k]);
    outputs[k] = cut;
  }
  std::free(counts);
  return nullptr;
}

} // extern "C"
