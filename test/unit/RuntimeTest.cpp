// The runtime on its own: no compiler involved. The "compiled model" here
// is a hand-written entry point following the kiln_entry ABI.
#include "kiln/cuda.h"
#include "kiln/runtime.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace {

// y[i] = a[i] + b[i] over 3 floats.
void addEntry(void **buffers) {
  auto *a = static_cast<float *>(buffers[0]);
  auto *b = static_cast<float *>(buffers[1]);
  auto *y = static_cast<float *>(buffers[2]);
  for (int i = 0; i < 3; ++i)
    y[i] = a[i] + b[i];
}

const int64_t kDims3[] = {3};
const kiln_tensor_desc kIn[] = {{"a", KILN_FLOAT32, 1, kDims3}, {"b", KILN_FLOAT32, 1, kDims3}};
const kiln_tensor_desc kOut[] = {{"y", KILN_FLOAT32, 1, kDims3}};
const kiln_model_desc kModel = {KILN_ABI_VERSION, "add", 2, 1, kIn, kOut, 0, addEntry};

struct TensorDeleter {
  void operator()(kiln_tensor *t) const { kiln_tensor_free(t); }
};
using TensorPtr = std::unique_ptr<kiln_tensor, TensorDeleter>;

TensorPtr floats(std::initializer_list<float> v) {
  int64_t n = v.size();
  TensorPtr t(kiln_tensor_create(KILN_FLOAT32, 1, &n));
  std::memcpy(kiln_tensor_data(t.get()), v.begin(), n * sizeof(float));
  return t;
}

TensorPtr floats(const std::vector<float> &v) {
  int64_t n = v.size();
  TensorPtr t(kiln_tensor_create(KILN_FLOAT32, 1, &n));
  if (n)
    std::memcpy(kiln_tensor_data(t.get()), v.data(), n * sizeof(float));
  return t;
}

} // namespace

TEST(Runtime, DtypeSizesFollowOnnxNumbering) {
  EXPECT_EQ(kiln_dtype_size(KILN_FLOAT32), 4u);
  EXPECT_EQ(kiln_dtype_size(KILN_INT64), 8u);
  EXPECT_EQ(kiln_dtype_size(KILN_BOOL), 1u);
  EXPECT_EQ(kiln_dtype_size(KILN_FLOAT16), 2u);
  EXPECT_EQ(kiln_dtype_size(8 /* STRING */), 0u);
  EXPECT_STREQ(kiln_dtype_name(KILN_INT32), "int32");
}

TEST(Runtime, TensorCreateIsZeroedAndAligned) {
  int64_t dims[] = {2, 3};
  TensorPtr t(kiln_tensor_create(KILN_FLOAT64, 2, dims));
  ASSERT_TRUE(t);
  EXPECT_EQ(kiln_tensor_num_elements(t.get()), 6);
  EXPECT_EQ(kiln_tensor_num_bytes(t.get()), 48u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(kiln_tensor_data(t.get())) % 64, 0u);
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(static_cast<double *>(kiln_tensor_data(t.get()))[i], 0.0);
  int64_t bad[] = {-1};
  EXPECT_EQ(kiln_tensor_create(KILN_FLOAT32, 1, bad), nullptr);
  EXPECT_EQ(kiln_tensor_create(123, 1, dims), nullptr);
}

// Found by the C API fuzzer: 2^61 int64s are 2^64 bytes, which wrapped to
// 0 in kiln_tensor_num_bytes, and absurd sizes reached the allocator. Shapes
// of 2^48 bytes or more are refused, created or wrapped.
TEST(Runtime, AbsurdTensorSizesAreRefused) {
  int64_t wraps[] = {int64_t(1) << 61};
  EXPECT_EQ(kiln_tensor_create(KILN_INT64, 1, wraps), nullptr);
  int64_t huge[] = {int64_t(1) << 24, int64_t(1) << 22}; // 2^46 floats: 256 TiB
  EXPECT_EQ(kiln_tensor_create(KILN_FLOAT32, 2, huge), nullptr);
  float storage[1];
  EXPECT_EQ(kiln_tensor_wrap(KILN_FLOAT32, 2, huge, storage), nullptr);
  int64_t justBelow[] = {(int64_t(1) << 48) - 1};
  TensorPtr wrapped(kiln_tensor_wrap(KILN_UINT8, 1, justBelow, storage));
  ASSERT_TRUE(wrapped);
  EXPECT_EQ(kiln_tensor_num_bytes(wrapped.get()), (size_t(1) << 48) - 1);
}

// Outputs of one run freed before the next give their pages to it: a fresh
// mmap for every large output cost page faults on every element page
// (buffer_cache.cpp). A recycled buffer is still zeroed by
// kiln_tensor_create.
TEST(Runtime, LargeBuffersAreRecycledAndStillZeroed) {
  int64_t dims[] = {256, 1024}; // 1 MiB of floats
  kiln_tensor *t = kiln_tensor_create(KILN_FLOAT32, 2, dims);
  ASSERT_TRUE(t);
  float *first = static_cast<float *>(kiln_tensor_data(t));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % 64, 0u);
  first[12345] = 7.0f;
  kiln_tensor_free(t);
  TensorPtr again(kiln_tensor_create(KILN_FLOAT32, 2, dims));
  ASSERT_TRUE(again);
  EXPECT_EQ(kiln_tensor_data(again.get()), static_cast<void *>(first));
  EXPECT_EQ(static_cast<float *>(kiln_tensor_data(again.get()))[12345], 0.0f);
  // Another size does not take it.
  int64_t other[] = {255, 1024};
  TensorPtr different(kiln_tensor_create(KILN_FLOAT32, 2, other));
  ASSERT_TRUE(different);
  EXPECT_NE(kiln_tensor_data(different.get()), kiln_tensor_data(again.get()));
  kiln_release_cached_memory();
}

// When the input shapes change, buffers of another size are taken from the
// cache: the smallest one that fits, and not one over four times too large
// (buffer_cache.cpp). The tensor still reads as zeros in its own bytes.
TEST(Runtime, SmallerBuffersTakeRecycledLargerOnes) {
  kiln_release_cached_memory();
  int64_t big[] = {256, 1024}, half[] = {128, 1024}, tiny[] = {32, 1024};
  kiln_tensor *t = kiln_tensor_create(KILN_FLOAT32, 2, big);
  ASSERT_TRUE(t);
  void *bigData = kiln_tensor_data(t);
  std::fill_n(static_cast<float *>(bigData), 256 * 1024, 5.0f);
  kiln_tensor_free(t);
  // 128 KiB floats (a quarter of the buffer) must not take it: over 4x.
  TensorPtr small(kiln_tensor_create(KILN_FLOAT32, 2, tiny));
  ASSERT_TRUE(small);
  EXPECT_NE(kiln_tensor_data(small.get()), bigData);
  TensorPtr mid(kiln_tensor_create(KILN_FLOAT32, 2, half));
  ASSERT_TRUE(mid);
  EXPECT_EQ(kiln_tensor_data(mid.get()), bigData);
  const float *m = static_cast<const float *>(kiln_tensor_data(mid.get()));
  EXPECT_EQ(m[0], 0.0f);
  EXPECT_EQ(m[128 * 1024 - 1], 0.0f);
  // Freed again, it keeps its true size: the larger tensor gets it back.
  kiln_tensor_free(mid.release());
  TensorPtr again(kiln_tensor_create(KILN_FLOAT32, 2, big));
  ASSERT_TRUE(again);
  EXPECT_EQ(kiln_tensor_data(again.get()), bigData);
  EXPECT_EQ(static_cast<const float *>(kiln_tensor_data(again.get()))[256 * 1024 - 1], 0.0f);
  kiln_release_cached_memory();
}

extern "C" void *_mlir_memref_to_llvm_alloc(uint64_t size);
extern "C" void _mlir_memref_to_llvm_free(void *ptr);

// Intermediates of run-time size (generated code's allocations) recycle the
// same way: a shorter sequence reuses a longer one's buffer, and the longer
// one finds it again afterwards.
TEST(Runtime, RunTimeSizedIntermediatesAreRecycledAcrossSizes) {
  kiln_release_cached_memory();
  void *a = _mlir_memref_to_llvm_alloc(1 << 20);
  ASSERT_TRUE(a);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);
  static_cast<char *>(a)[(1 << 20) - 1] = 1; // the whole size is usable
  _mlir_memref_to_llvm_free(a);
  void *b = _mlir_memref_to_llvm_alloc(600 << 10);
  EXPECT_EQ(b, a);
  _mlir_memref_to_llvm_free(b);
  void *c = _mlir_memref_to_llvm_alloc(1 << 20);
  EXPECT_EQ(c, a);
  static_cast<char *>(c)[(1 << 20) - 1] = 2;
  // A larger size than any cached buffer gets a new one.
  void *d = _mlir_memref_to_llvm_alloc(4 << 20);
  ASSERT_TRUE(d);
  EXPECT_NE(d, a);
  static_cast<char *>(d)[(4 << 20) - 1] = 3;
  _mlir_memref_to_llvm_free(d);
  _mlir_memref_to_llvm_free(c);
  kiln_release_cached_memory();
}

TEST(Runtime, ExecuteRunsTheEntryPoint) {
  TensorPtr a = floats({1, 2, 3}), b = floats({10, 20, 30});
  const kiln_tensor *ins[] = {a.get(), b.get()};
  kiln_tensor *out = nullptr;
  kiln_status *s = kiln_model_execute(&kModel, ins, 2, &out, 1);
  ASSERT_EQ(s, nullptr) << kiln_status_message(s);
  TensorPtr y(out);
  const float *p = static_cast<float *>(kiln_tensor_data(y.get()));
  EXPECT_EQ(p[0], 11);
  EXPECT_EQ(p[1], 22);
  EXPECT_EQ(p[2], 33);
}

namespace {
// The loop of a compiled ONNX Loop: counts its iterations into y[0] while
// kiln_loop_guard lets it go on, like the scf.while the importer writes,
// for a[0] iterations (then a second, nested-like Loop that must not start
// once the run has stopped).
void loopEntry(void **buffers) {
  auto *a = static_cast<float *>(buffers[0]);
  auto *y = static_cast<float *>(buffers[2]);
  y[0] = y[1] = y[2] = 0;
  for (int64_t i = 0; i < (int64_t)a[0] && kiln_loop_guard(i, "count\x1b[31m"); ++i)
    y[0] += 1;
  for (int64_t i = 0; i < 5 && kiln_loop_guard(i, "later"); ++i)
    y[1] += 1;
}
const kiln_model_desc kLoopModel = {KILN_ABI_VERSION, "loop", 2, 1, kIn, kOut, 0, loopEntry};
} // namespace

TEST(Runtime, LoopsStopAtTheIterationLimit) {
  EXPECT_EQ(kiln_max_loop_iterations(), KILN_DEFAULT_MAX_LOOP_ITERATIONS);
  int64_t before = kiln_set_max_loop_iterations(10);
  EXPECT_EQ(before, KILN_DEFAULT_MAX_LOOP_ITERATIONS);
  TensorPtr b = floats({0, 0, 0});
  for (float count : {10.0f, 11.0f, 10.0f}) {
    TensorPtr a = floats({count, 0, 0});
    const kiln_tensor *ins[] = {a.get(), b.get()};
    kiln_tensor *out = nullptr;
    kiln_status *s = kiln_model_execute(&kLoopModel, ins, 2, &out, 1);
    if (count == 10) { // exactly the limit: runs, and the next run starts afresh
      ASSERT_EQ(s, nullptr) << kiln_status_message(s);
      TensorPtr y(out);
      EXPECT_EQ(static_cast<float *>(kiln_tensor_data(y.get()))[0], 10);
      EXPECT_EQ(static_cast<float *>(kiln_tensor_data(y.get()))[1], 5);
      continue;
    }
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(kiln_status_get_code(s), KILN_LIMIT_EXCEEDED);
    // The name comes from the model: its escape sequence is not printed raw.
    EXPECT_EQ(std::string(kiln_status_message(s)),
              "the Loop node 'count\\x1b[31m' reached the limit of 10 iterations and its run "
              "was stopped; raise the limit with kiln_set_max_loop_iterations() (kiln-run "
              "--max-loop-iterations N) if the model needs more");
    EXPECT_EQ(out, nullptr);
    kiln_status_free(s);
  }
  // Called directly, as a program linking the object may: the stop is
  // taken afterwards, once.
  float in[3] = {11, 0, 0}, zeros[3] = {}, y[3] = {};
  void *buffers[] = {in, zeros, y, nullptr};
  loopEntry(buffers);
  EXPECT_EQ(y[0], 10);
  EXPECT_EQ(y[1], 0); // the second Loop did not start
  kiln_status *taken = kiln_take_run_error();
  ASSERT_NE(taken, nullptr);
  EXPECT_EQ(kiln_status_get_code(taken), KILN_LIMIT_EXCEEDED);
  kiln_status_free(taken);
  EXPECT_EQ(kiln_take_run_error(), nullptr);
  EXPECT_EQ(kiln_set_max_loop_iterations(0), 10); // <= 0: back to the default
  EXPECT_EQ(kiln_max_loop_iterations(), KILN_DEFAULT_MAX_LOOP_ITERATIONS);
  EXPECT_EQ(kiln_loop_guard(KILN_DEFAULT_MAX_LOOP_ITERATIONS - 1, "x"), 1);
}

TEST(Runtime, RejectsWrongInputs) {
  TensorPtr a = floats({1, 2, 3}), shortB = floats({1, 2});
  int64_t n = 3;
  TensorPtr ints(kiln_tensor_create(KILN_INT32, 1, &n));
  kiln_tensor *out = nullptr;

  const kiln_tensor *wrongShape[] = {a.get(), shortB.get()};
  kiln_status *s = kiln_model_execute(&kModel, wrongShape, 2, &out, 1);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(kiln_status_get_code(s), KILN_SHAPE_MISMATCH);
  EXPECT_STREQ(kiln_status_message(s), "input 1 'b' must have shape [3], got [2]");
  kiln_status_free(s);

  const kiln_tensor *wrongType[] = {a.get(), ints.get()};
  s = kiln_model_execute(&kModel, wrongType, 2, &out, 1);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(kiln_status_get_code(s), KILN_DTYPE_MISMATCH);
  EXPECT_STREQ(kiln_status_message(s), "input 1 'b' must be float32, got int32");
  kiln_status_free(s);

  const kiln_tensor *tooFew[] = {a.get()};
  s = kiln_model_execute(&kModel, tooFew, 1, &out, 1);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(kiln_status_get_code(s), KILN_INVALID_ARGUMENT);
  kiln_status_free(s);
  EXPECT_EQ(out, nullptr);
}

TEST(Runtime, RejectsOtherAbiVersions) {
  kiln_model_desc future = kModel;
  future.abi_version = KILN_ABI_VERSION + 1;
  TensorPtr a = floats({1, 2, 3}), b = floats({1, 2, 3});
  const kiln_tensor *ins[] = {a.get(), b.get()};
  kiln_tensor *out = nullptr;
  kiln_status *s = kiln_model_execute(&future, ins, 2, &out, 1);
  ASSERT_NE(s, nullptr);
  EXPECT_NE(std::string(kiln_status_message(s)).find("ABI"), std::string::npos);
  kiln_status_free(s);
}

TEST(Runtime, RefusesModelsCompiledForAGpu) {
  // A CUDA bundle's entry takes device addresses: running it on host
  // memory would crash, so kiln_model_execute says where it runs instead.
  kiln_cuda_code code{};
  code.compute_capability = 80;
  kiln_model_desc gpu = kModel;
  gpu.cuda = &code;
  bool entryRan = false;
  static bool *ran;
  ran = &entryRan;
  gpu.entry = [](void **) { *ran = true; };
  TensorPtr a = floats({1, 2, 3}), b = floats({1, 2, 3});
  const kiln_tensor *ins[] = {a.get(), b.get()};
  kiln_tensor *out = nullptr;
  kiln_status *s = kiln_model_execute(&gpu, ins, 2, &out, 1);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(kiln_status_get_code(s), KILN_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kiln_status_message(s)).find("compiled for an NVIDIA GPU"),
            std::string::npos)
      << kiln_status_message(s);
  kiln_status_free(s);
  EXPECT_FALSE(entryRan);
  EXPECT_EQ(out, nullptr);
}

namespace {
// y = a + b through a workspace: the sum is staged in scratch memory, and
// the workspace pointer each run saw is recorded.
thread_local void *lastWorkspace = nullptr;
void addViaWorkspace(void **buffers) {
  auto *a = static_cast<float *>(buffers[0]);
  auto *b = static_cast<float *>(buffers[1]);
  auto *y = static_cast<float *>(buffers[2]);
  auto *scratch = static_cast<float *>(buffers[3]);
  lastWorkspace = scratch;
  for (int i = 0; i < 3; ++i)
    scratch[i] = a[i] + b[i];
  for (int i = 0; i < 3; ++i)
    y[i] = scratch[i];
}
const kiln_model_desc kWorkspaceModel = {KILN_ABI_VERSION, "ws", 2, 1, kIn, kOut, 4096,
                                         addViaWorkspace};
} // namespace

TEST(Runtime, WorkspaceIsAlignedAndReusedAcrossRuns) {
  TensorPtr a = floats({1, 2, 3}), b = floats({10, 20, 30});
  const kiln_tensor *ins[] = {a.get(), b.get()};
  void *first = nullptr;
  for (int run = 0; run < 3; ++run) {
    kiln_tensor *out = nullptr;
    ASSERT_EQ(kiln_model_execute(&kWorkspaceModel, ins, 2, &out, 1), nullptr);
    TensorPtr y(out);
    const float *v = static_cast<const float *>(kiln_tensor_data(out));
    EXPECT_EQ(v[0], 11);
    EXPECT_EQ(v[2], 33);
    ASSERT_NE(lastWorkspace, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(lastWorkspace) % 64, 0u);
    if (run == 0)
      first = lastWorkspace;
    EXPECT_EQ(lastWorkspace, first) << "the workspace is allocated once per thread";
  }
}

TEST(Runtime, CallerProvidedWorkspace) {
  TensorPtr a = floats({1, 2, 3}), b = floats({1, 1, 1});
  const kiln_tensor *ins[] = {a.get(), b.get()};
  alignas(64) static float scratch[1024];
  kiln_tensor *out = nullptr;
  ASSERT_EQ(kiln_model_execute_with_workspace(&kWorkspaceModel, ins, 2, &out, 1, scratch),
            nullptr);
  TensorPtr y(out);
  EXPECT_EQ(lastWorkspace, scratch);
  EXPECT_EQ(static_cast<const float *>(kiln_tensor_data(out))[1], 3);

  kiln_tensor *none = nullptr;
  kiln_status *s = kiln_model_execute_with_workspace(&kWorkspaceModel, ins, 2, &none, 1, nullptr);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(kiln_status_get_code(s), KILN_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kiln_status_message(s)).find("workspace of 4096 bytes"), std::string::npos);
  kiln_status_free(s);
  EXPECT_EQ(none, nullptr);
}

namespace {
// Two specialisations of y = a + b: over 3 floats (addEntry) and over 2,
// the latter adding 100 too so that a test sees which one ran.
void add2Plus100Entry(void **buffers) {
  auto *a = static_cast<float *>(buffers[0]);
  auto *b = static_cast<float *>(buffers[1]);
  auto *y = static_cast<float *>(buffers[2]);
  for (int i = 0; i < 2; ++i)
    y[i] = a[i] + b[i] + 100;
}
const int64_t kDims2[] = {2}, kDimsAny[] = {-1};
const kiln_tensor_desc kIn2[] = {{"a", KILN_FLOAT32, 1, kDims2}, {"b", KILN_FLOAT32, 1, kDims2}};
const kiln_tensor_desc kOut2[] = {{"y", KILN_FLOAT32, 1, kDims2}};
const kiln_tensor_desc kInAny[] = {{"a", KILN_FLOAT32, 1, kDimsAny},
                                   {"b", KILN_FLOAT32, 1, kDimsAny}};
const kiln_tensor_desc kOutAny[] = {{"y", KILN_FLOAT32, 1, kDimsAny}};
const kiln_model_desc kVariants[] = {
    {KILN_ABI_VERSION, "add", 2, 1, kIn, kOut, 0, addEntry},
    {KILN_ABI_VERSION, "add", 2, 1, kIn2, kOut2, 0, add2Plus100Entry}};
const kiln_model_desc kMultiModel = {KILN_ABI_VERSION, "add", 2, 1, kInAny, kOutAny, 0, nullptr,
                                     64, nullptr, nullptr, 2, kVariants};
} // namespace

TEST(Runtime, ExecuteRunsTheVariantOfTheInputsShape) {
  auto a3 = floats({1, 2, 3}), b3 = floats({10, 20, 30});
  auto a2 = floats({1, 2}), b2 = floats({10, 20});
  const kiln_tensor *three[] = {a3.get(), b3.get()}, *two[] = {a2.get(), b2.get()};
  kiln_tensor *y = nullptr;
  ASSERT_EQ(kiln_model_execute(&kMultiModel, three, 2, &y, 1), nullptr);
  TensorPtr y3(y);
  ASSERT_EQ(kiln_tensor_num_elements(y3.get()), 3);
  EXPECT_EQ(static_cast<float *>(kiln_tensor_data(y3.get()))[2], 33.0f);
  ASSERT_EQ(kiln_model_execute(&kMultiModel, two, 2, &y, 1), nullptr);
  TensorPtr y2(y);
  ASSERT_EQ(kiln_tensor_num_elements(y2.get()), 2);
  EXPECT_EQ(static_cast<float *>(kiln_tensor_data(y2.get()))[1], 122.0f);
}

namespace {
// The same bundle with code for every length as its own entry (kilnc
// --dim with a variant for every shape): y = a + b + 1000 over n floats,
// n from the dims array (a's, b's, then y's), so that a test sees it ran.
int64_t addAnyDims(int64_t *dims) {
  if (dims[1] != dims[0])
    return 2; // 1 + the index of b's dim, which disagrees with a's
  dims[2] = dims[0];
  return 0;
}
void addAnyPlus1000Entry(void **buffers) {
  auto *a = static_cast<float *>(buffers[0]);
  auto *b = static_cast<float *>(buffers[1]);
  auto *y = static_cast<float *>(buffers[2]);
  int64_t n = static_cast<int64_t *>(buffers[3])[0];
  for (int64_t i = 0; i < n; ++i)
    y[i] = a[i] + b[i] + 1000;
}
kiln_model_desc anyShapeModel() {
  kiln_model_desc d = kMultiModel;
  d.entry = addAnyPlus1000Entry;
  d.num_runtime_dims = 3;
  d.runtime_dims = addAnyDims;
  return d;
}
} // namespace

TEST(Runtime, ShapesNoVariantFitsRunThroughTheCodeForEveryShape) {
  const kiln_model_desc model = anyShapeModel();
  auto a4 = floats({1, 2, 3, 4}), b4 = floats({10, 20, 30, 40});
  auto a2 = floats({1, 2}), b2 = floats({10, 20}), b3 = floats({1, 2, 3});
  const kiln_tensor *four[] = {a4.get(), b4.get()}, *two[] = {a2.get(), b2.get()},
                    *mixed[] = {a4.get(), b3.get()};
  kiln_tensor *y = nullptr;
  // A length a specialisation was compiled for runs that one (+100).
  ASSERT_EQ(kiln_model_execute(&model, two, 2, &y, 1), nullptr);
  TensorPtr y2(y);
  EXPECT_EQ(static_cast<float *>(kiln_tensor_data(y2.get()))[1], 122.0f);
  // Any other through the descriptor's own entry (+1000).
  ASSERT_EQ(kiln_model_check_inputs(&model, four, 2), nullptr);
  ASSERT_EQ(kiln_model_execute(&model, four, 2, &y, 1), nullptr);
  TensorPtr y4(y);
  ASSERT_EQ(kiln_tensor_num_elements(y4.get()), 4);
  EXPECT_EQ(static_cast<float *>(kiln_tensor_data(y4.get()))[3], 1044.0f);
  // Inputs that disagree are still refused, by its dims function.
  kiln_status *s = kiln_model_execute(&model, mixed, 2, &y, 1);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(kiln_status_get_code(s), KILN_SHAPE_MISMATCH);
  kiln_status_free(s);
}

TEST(Runtime, ShapesNoVariantWasCompiledForAreRefused) {
  auto a4 = floats({1, 2, 3, 4}), b4 = floats({1, 2, 3, 4}), b3 = floats({1, 2, 3});
  const kiln_tensor *four[] = {a4.get(), b4.get()}, *mixed[] = {a4.get(), b3.get()};
  kiln_tensor *y = nullptr;
  for (auto *inputs : {four, mixed}) {
    // kiln_model_check_inputs, for callers that run the entry themselves,
    // refuses the same shapes.
    kiln_status *checked = kiln_model_check_inputs(&kMultiModel, inputs, 2);
    ASSERT_NE(checked, nullptr);
    EXPECT_EQ(kiln_status_get_code(checked), KILN_SHAPE_MISMATCH);
    kiln_status_free(checked);
    kiln_status *s = kiln_model_execute(&kMultiModel, inputs, 2, &y, 1);
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(kiln_status_get_code(s), KILN_SHAPE_MISMATCH);
    EXPECT_NE(std::string(kiln_status_message(s))
                  .find("was compiled for the input shapes [3] [3]; [2] [2]"),
              std::string::npos)
        << kiln_status_message(s);
    kiln_status_free(s);
  }
  // What every variant shares is still checked first: the dtype.
  int64_t n = 3;
  TensorPtr i3(kiln_tensor_create(KILN_INT32, 1, &n));
  const kiln_tensor *wrongType[] = {i3.get(), b3.get()};
  kiln_status *s = kiln_model_execute(&kMultiModel, wrongType, 2, &y, 1);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(kiln_status_get_code(s), KILN_DTYPE_MISMATCH);
  kiln_status_free(s);
}

// A model whose outputs are padded to their largest size: "kept" is [4, 2]
// with 4 rows at most, "scores" is [2, 4] with its columns counted, both by
// the one row count, which the entry point sets to a[0] (a NonMaxSuppression
// deciding how many boxes it keeps). Buffers: a, kept, scores, count.
void keepEntry(void **buffers) {
  const float *a = static_cast<float *>(buffers[0]);
  auto *kept = static_cast<float *>(buffers[1]);
  auto *scores = static_cast<float *>(buffers[2]);
  auto *count = static_cast<int64_t *>(buffers[3]);
  for (int i = 0; i < 8; ++i) {
    kept[i] = (float)i;
    scores[i] = 10.0f + (float)i;
  }
  *count = (int64_t)a[0];
}

const int64_t kDims1[] = {1}, kDims4x2[] = {4, 2}, kDims2x4[] = {2, 4};
const kiln_tensor_desc kKeepIn[] = {{"a", KILN_FLOAT32, 1, kDims1}};
const kiln_tensor_desc kKeepOut[] = {{"kept", KILN_FLOAT32, 2, kDims4x2},
                                     {"scores", KILN_FLOAT32, 2, kDims2x4}};
const kiln_output_rows kKeepRows[] = {{0, 0}, {0, 1}};

kiln_model_desc keepModel() {
  kiln_model_desc m{};
  m.abi_version = KILN_ABI_VERSION;
  m.name = "keep";
  m.num_inputs = 1;
  m.num_outputs = 2;
  m.inputs = kKeepIn;
  m.outputs = kKeepOut;
  m.entry = keepEntry;
  m.output_rows = kKeepRows;
  m.num_row_counts = 1;
  return m;
}

TEST(Runtime, OutputsAreCutToTheirRunTimeRowCounts) {
  kiln_model_desc m = keepModel();
  for (float n : {3.0f, 0.0f, 9.0f}) {
    TensorPtr a = floats({n});
    const kiln_tensor *in[] = {a.get()};
    kiln_tensor *out[2] = {};
    kiln_status *s = kiln_model_execute(&m, in, 1, out, 2);
    ASSERT_EQ(s, nullptr) << kiln_status_message(s);
    TensorPtr kept(out[0]), scores(out[1]);
    int64_t rows = std::min<int64_t>((int64_t)n, 4); // clamped to the largest size
    ASSERT_EQ(kiln_tensor_rank(kept.get()), 2);
    EXPECT_EQ(kiln_tensor_dims(kept.get())[0], rows);
    EXPECT_EQ(kiln_tensor_dims(kept.get())[1], 2);
    EXPECT_EQ(kiln_tensor_dims(scores.get())[0], 2);
    EXPECT_EQ(kiln_tensor_dims(scores.get())[1], rows);
    // kept keeps its first rows; scores keeps the first `rows` of each of
    // its two rows of 4 (10..13 and 14..17).
    const float *k = static_cast<float *>(kiln_tensor_data(kept.get()));
    const float *sc = static_cast<float *>(kiln_tensor_data(scores.get()));
    for (int64_t i = 0; i < rows * 2; ++i)
      EXPECT_EQ(k[i], (float)i);
    for (int64_t r = 0; r < 2; ++r)
      for (int64_t c = 0; c < rows; ++c)
        EXPECT_EQ(sc[r * rows + c], 10.0f + (float)(r * 4 + c));
  }
}

/// Runs `m` on keepModel's input, expecting KILN_INVALID_ARGUMENT and no
/// outputs; returns the message.
std::string refusal(const kiln_model_desc &m) {
  TensorPtr a = floats({1.0f});
  const kiln_tensor *in[] = {a.get()};
  kiln_tensor *out[2] = {};
  kiln_status *s = kiln_model_execute(&m, in, 1, out, 2);
  EXPECT_NE(s, nullptr);
  EXPECT_EQ(kiln_status_get_code(s), KILN_INVALID_ARGUMENT);
  EXPECT_EQ(out[0], nullptr);
  EXPECT_EQ(out[1], nullptr);
  std::string message = s ? kiln_status_message(s) : "";
  kiln_status_free(s);
  return message;
}

TEST(Runtime, RowCountsOutOfRangeAreRefused) {
  kiln_model_desc m = keepModel();
  const kiln_output_rows bad[] = {{1, 0}, {-1, 0}}; // only buffer 0 exists
  m.output_rows = bad;
  EXPECT_NE(refusal(m).find("row count"), std::string::npos);
}

TEST(Runtime, RowCountsWithoutTheirOutputsAreRefused) {
  kiln_model_desc m = keepModel();
  m.output_rows = nullptr; // one count buffer, but no output says it has rows
  EXPECT_NE(refusal(m).find("row counts are malformed"), std::string::npos);
}

TEST(Runtime, TakeLeadingRefusesABadAxis) {
  TensorPtr a = floats({1, 2, 3});
  EXPECT_EQ(kiln_tensor_take_leading(a.get(), 1, 1), nullptr);
  EXPECT_EQ(kiln_tensor_take_leading(a.get(), -1, 1), nullptr);
  TensorPtr two(kiln_tensor_take_leading(a.get(), 0, 2));
  ASSERT_TRUE(two);
  EXPECT_EQ(kiln_tensor_dims(two.get())[0], 2);
  EXPECT_EQ(static_cast<float *>(kiln_tensor_data(two.get()))[1], 2.0f);
}

namespace {

// A model compiled once for every shape (ABI 9+, num_runtime_dims): y =
// concat(a, b) along their only axis, a: [n], b: [n] (they name the same
// dim), y: [2n]. The dims array holds a's n, b's n, then y's 2n.
int64_t concatDims(int64_t *dims) {
  if (dims[1] != dims[0])
    return 2; // 1 + the index of b's dim, which disagrees with a's
  dims[2] = 2 * dims[0];
  return 0;
}

void concatEntry(void **buffers) {
  // inputs, output, then (no row counts, no workspace) the dims array.
  const auto *dims = static_cast<const int64_t *>(buffers[3]);
  auto *a = static_cast<const float *>(buffers[0]);
  auto *b = static_cast<const float *>(buffers[1]);
  auto *y = static_cast<float *>(buffers[2]);
  for (int64_t i = 0; i < dims[0]; ++i) {
    y[i] = a[i];
    y[dims[0] + i] = b[i];
  }
}

const int64_t kDynamic1[] = {-1};
const kiln_tensor_desc kConcatIn[] = {{"a", KILN_FLOAT32, 1, kDynamic1},
                                      {"b", KILN_FLOAT32, 1, kDynamic1}};
const kiln_tensor_desc kConcatOut[] = {{"y", KILN_FLOAT32, 1, kDynamic1}};

kiln_model_desc concatModel() {
  kiln_model_desc m{};
  m.abi_version = KILN_ABI_VERSION;
  m.name = "concat";
  m.num_inputs = 2;
  m.num_outputs = 1;
  m.inputs = kConcatIn;
  m.outputs = kConcatOut;
  m.entry = concatEntry;
  m.num_runtime_dims = 3;
  m.runtime_dims = concatDims;
  return m;
}

} // namespace

TEST(Runtime, RuntimeDimsSizeTheOutputsFromTheInputs) {
  kiln_model_desc m = concatModel();
  std::vector<std::pair<TensorPtr, TensorPtr>> cases;
  cases.emplace_back(floats({1, 2, 3}), floats({4, 5, 6}));
  cases.emplace_back(floats({7}), floats({8}));
  for (auto &[a, b] : cases) {
    const kiln_tensor *in[] = {a.get(), b.get()};
    kiln_tensor *out = nullptr;
    kiln_status *s = kiln_model_execute(&m, in, 2, &out, 1);
    ASSERT_EQ(s, nullptr) << kiln_status_message(s);
    TensorPtr y(out);
    int64_t n = kiln_tensor_dims(a.get())[0];
    ASSERT_EQ(kiln_tensor_rank(y.get()), 1);
    EXPECT_EQ(kiln_tensor_dims(y.get())[0], 2 * n);
    const float *got = static_cast<const float *>(kiln_tensor_data(y.get()));
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_EQ(got[i], static_cast<const float *>(kiln_tensor_data(a.get()))[i]);
      EXPECT_EQ(got[n + i], static_cast<const float *>(kiln_tensor_data(b.get()))[i]);
    }
  }
  // Empty inputs: an empty output, no failure.
  int64_t zero = 0;
  TensorPtr a(kiln_tensor_create(KILN_FLOAT32, 1, &zero)), b(kiln_tensor_create(KILN_FLOAT32, 1, &zero));
  const kiln_tensor *in[] = {a.get(), b.get()};
  kiln_tensor *out = nullptr;
  kiln_status *s = kiln_model_execute(&m, in, 2, &out, 1);
  ASSERT_EQ(s, nullptr) << kiln_status_message(s);
  EXPECT_EQ(kiln_tensor_dims(out)[0], 0);
  kiln_tensor_free(out);
}

TEST(Runtime, InputsThatDisagreeOnANamedDimAreRefusedBeforeTheRun) {
  kiln_model_desc m = concatModel();
  TensorPtr a = floats({1, 2, 3}), b = floats({4, 5});
  const kiln_tensor *in[] = {a.get(), b.get()};
  kiln_tensor *out = nullptr;
  kiln_status *s = kiln_model_execute(&m, in, 2, &out, 1);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(kiln_status_get_code(s), KILN_SHAPE_MISMATCH);
  std::string message = kiln_status_message(s);
  EXPECT_NE(message.find("input 1 'b' has 2 in dim 0"), std::string::npos) << message;
  kiln_status_free(s);
  EXPECT_EQ(out, nullptr);
  // The model is still usable.
  TensorPtr c = floats({6, 7});
  const kiln_tensor *ok[] = {b.get(), c.get()};
  s = kiln_model_execute(&m, ok, 2, &out, 1);
  ASSERT_EQ(s, nullptr) << kiln_status_message(s);
  kiln_tensor_free(out);
}

// kiln_model_runtime_dims_result: what runtime_dims says of the inputs
// (the concatenation's: 0 and the output's 2n when a and b agree, 2 when
// b's dim disagrees), without running; -1 for inputs the descriptor does
// not take; 0 for a model without run-time dims.
TEST(Runtime, RuntimeDimsResultWithoutARun) {
  kiln_model_desc m = concatModel();
  TensorPtr a = floats({1, 2, 3}), b = floats({4, 5, 6}), c = floats({7, 8});
  const kiln_tensor *agree[] = {a.get(), b.get()}, *differ[] = {a.get(), c.get()};
  int64_t dims[3] = {0, 0, 0};
  EXPECT_EQ(kiln_model_runtime_dims_result(&m, agree, 2, dims), 0);
  EXPECT_EQ(dims[0], 3);
  EXPECT_EQ(dims[1], 3);
  EXPECT_EQ(dims[2], 6);
  EXPECT_EQ(kiln_model_runtime_dims_result(&m, differ, 2, nullptr), 2);
  EXPECT_EQ(kiln_model_runtime_dims_result(&m, agree, 1, nullptr), -1);
  int64_t two[] = {1, 3};
  TensorPtr matrix(kiln_tensor_create(KILN_FLOAT32, 2, two));
  const kiln_tensor *rank2[] = {matrix.get(), b.get()};
  EXPECT_EQ(kiln_model_runtime_dims_result(&m, rank2, 2, nullptr), -1);
  m.runtime_dims = nullptr;
  m.num_runtime_dims = 0;
  EXPECT_EQ(kiln_model_runtime_dims_result(&m, agree, 2, nullptr), 0);
}

// Bounds declared at compile time (ABI 10, runtime_dim_bounds): n in 1..3
// for a, b unbounded (0..INT64_MAX, as kilnc writes an undeclared entry).
TEST(Runtime, DeclaredBoundsAreCheckedBeforeTheRun) {
  kiln_model_desc m = concatModel();
  const int64_t bounds[] = {1, 3, 0, INT64_MAX};
  const char *const names[] = {"n", "n"};
  m.runtime_dim_bounds = bounds;
  m.runtime_dim_names = names;
  for (int64_t n : {0, 4}) {
    std::vector<float> values(n, 1.0f);
    TensorPtr a = floats(values), b = floats(values);
    const kiln_tensor *in[] = {a.get(), b.get()};
    kiln_tensor *out = nullptr;
    kiln_status *s = kiln_model_execute(&m, in, 2, &out, 1);
    ASSERT_NE(s, nullptr) << n;
    EXPECT_EQ(kiln_status_get_code(s), KILN_SHAPE_MISMATCH);
    EXPECT_EQ(std::string(kiln_status_message(s)),
              "input 0 'a' has " + std::to_string(n) +
                  " in dim 0 ('n'), outside the bounds 1..3 declared for it when the model was "
                  "compiled");
    kiln_status_free(s);
    EXPECT_EQ(out, nullptr);
  }
  for (int64_t n : {1, 3}) {
    std::vector<float> values(n, 2.0f);
    TensorPtr a = floats(values), b = floats(values);
    const kiln_tensor *in[] = {a.get(), b.get()};
    kiln_tensor *out = nullptr;
    kiln_status *s = kiln_model_execute(&m, in, 2, &out, 1);
    ASSERT_EQ(s, nullptr) << kiln_status_message(s);
    EXPECT_EQ(kiln_tensor_dims(out)[0], 2 * n);
    kiln_tensor_free(out);
  }
}

TEST(Runtime, RuntimeDimsWithoutTheirFunctionAreRefused) {
  kiln_model_desc m = concatModel();
  m.runtime_dims = nullptr;
  TensorPtr a = floats({1}), b = floats({2});
  const kiln_tensor *in[] = {a.get(), b.get()};
  kiln_tensor *out = nullptr;
  kiln_status *s = kiln_model_execute(&m, in, 2, &out, 1);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(kiln_status_get_code(s), KILN_INVALID_ARGUMENT);
  kiln_status_free(s);
}
