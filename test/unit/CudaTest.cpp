// The CUDA backend (kiln/cuda.h), linked with the runtime alone. Which test
// runs depends on the driver the process sees (test/CMakeLists.txt sets
// KILN_CUDA_DRIVER per test): none, a fake one whose cuInit fails, or the
// machine's own, which runs a kernel when there is a GPU and skips otherwise.
#include "kiln/cuda.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

std::string messageOf(kiln_status *s) {
  std::string m = s ? kiln_status_message(s) : "";
  kiln_status_free(s);
  return m;
}

TEST(Cuda, OpenFailsCleanlyWithoutADriver) {
  kiln_cuda_device *dev = reinterpret_cast<kiln_cuda_device *>(1);
  kiln_status *s = kiln_cuda_device_open(0, &dev);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(kiln_status_get_code(s), KILN_DEVICE_ERROR);
  EXPECT_EQ(dev, nullptr);
  std::string m = messageOf(s);
  EXPECT_NE(m.find("CUDA is not available: cannot load the driver"), std::string::npos) << m;
  EXPECT_NE(m.find("/nonexistent/libcuda.so.1"), std::string::npos) << m;
  // Asking again gives the same answer, not a crash.
  EXPECT_NE(messageOf(kiln_cuda_device_open(0, &dev)), "");
}

TEST(Cuda, DriverErrorsNameTheCallAndTheDriversMessage) {
  kiln_cuda_device *dev = nullptr;
  kiln_status *s = kiln_cuda_device_open(0, &dev);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(kiln_status_get_code(s), KILN_DEVICE_ERROR);
  EXPECT_EQ(dev, nullptr);
  EXPECT_EQ(messageOf(s),
            "cuInit failed: CUDA_ERROR_NO_DEVICE (100: no CUDA-capable device is detected)");
}

// out[i] = in[i] * k for i < n: hand-written PTX, so this test needs no compiler.
const char *kScalePtx = R"(
.version 7.0
.target sm_75
.address_size 64
.visible .entry kiln_test_scale(.param .u64 out, .param .u64 in, .param .f32 k, .param .u32 n)
{
  .reg .pred %p;
  .reg .b32 %r<5>;
  .reg .f32 %f<3>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [out];
  ld.param.u64 %rd2, [in];
  ld.param.f32 %f1, [k];
  ld.param.u32 %r1, [n];
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mov.u32 %r4, %tid.x;
  mad.lo.s32 %r2, %r2, %r3, %r4;
  setp.ge.u32 %p, %r2, %r1;
  @%p bra DONE;
  cvta.to.global.u64 %rd3, %rd1;
  cvta.to.global.u64 %rd4, %rd2;
  mul.wide.u32 %rd5, %r2, 4;
  add.s64 %rd6, %rd4, %rd5;
  ld.global.f32 %f2, [%rd6];
  mul.f32 %f2, %f2, %f1;
  add.s64 %rd7, %rd3, %rd5;
  st.global.f32 [%rd7], %f2;
DONE:
  ret;
}
)";

TEST(Cuda, RunsAKernelWhereThereIsAGpu) {
  kiln_cuda_device *dev = nullptr;
  if (kiln_status *s = kiln_cuda_device_open(0, &dev))
    GTEST_SKIP() << "no CUDA device here: " << messageOf(s);
  std::printf("device: %s (sm_%d)\n", kiln_cuda_device_name(dev),
              kiln_cuda_device_compute_capability(dev));
  kiln_cuda_module *module = nullptr;
  ASSERT_EQ(messageOf(kiln_cuda_module_load(dev, kScalePtx, &module)), "");
  uint32_t n = 1000;
  std::vector<float> in(n), out(n, -1.0f);
  for (uint32_t i = 0; i < n; ++i)
    in[i] = 0.5f * i;
  kiln_cuda_ptr din = 0, dout = 0;
  ASSERT_EQ(messageOf(kiln_cuda_malloc(dev, n * 4, &din)), "");
  ASSERT_EQ(messageOf(kiln_cuda_malloc(dev, n * 4, &dout)), "");
  ASSERT_EQ(messageOf(kiln_cuda_copy_to_device(dev, din, in.data(), n * 4)), "");
  float k = 3.0f;
  void *args[] = {&dout, &din, &k, &n};
  uint32_t grid[3] = {(n + 255) / 256, 1, 1}, block[3] = {256, 1, 1};
  ASSERT_EQ(messageOf(kiln_cuda_launch(module, "kiln_test_scale", grid, block, 0, args)), "");
  ASSERT_EQ(messageOf(kiln_cuda_synchronize(dev)), "");
  ASSERT_EQ(messageOf(kiln_cuda_copy_to_host(dev, out.data(), dout, n * 4)), "");
  for (uint32_t i = 0; i < n; ++i)
    ASSERT_EQ(out[i], 1.5f * i) << i;
  // A kernel that is not in the module: the error names it.
  std::string m = messageOf(kiln_cuda_launch(module, "missing", grid, block, 0, args));
  EXPECT_NE(m.find("cuModuleGetFunction failed"), std::string::npos) << m;
  EXPECT_NE(m.find("'missing'"), std::string::npos) << m;
  // Bad PTX: the driver's JIT log comes back.
  kiln_cuda_module *bad = nullptr;
  m = messageOf(kiln_cuda_module_load(dev, ".version 7.0\n.target sm_75\nnonsense", &bad));
  EXPECT_NE(m.find("cuModuleLoadDataEx failed"), std::string::npos) << m;
  EXPECT_EQ(bad, nullptr);
  EXPECT_EQ(messageOf(kiln_cuda_free(dev, din)), "");
  EXPECT_EQ(messageOf(kiln_cuda_free(dev, dout)), "");
  kiln_cuda_module_unload(module);
  kiln_cuda_device_close(dev);
}

// The host side of a one-kernel "bundle": y = 1.5 * x over 1000 floats,
// launched as compiled host code does (kernel index, grid, block, args).
void scaleEntry(void **buffers) {
  static float k = 1.5f;
  static uint32_t n = 1000;
  void *out = buffers[1], *in = buffers[0];
  void *args[] = {&out, &in, &k, &n};
  kiln_cuda_launch_kernel(0, 4, 1, 1, 256, 1, 1, 0, args);
}

const int64_t kScaleDims[] = {1000};
const kiln_tensor_desc kScaleIn[] = {{"x", KILN_FLOAT32, 1, kScaleDims}};
const kiln_tensor_desc kScaleOut[] = {{"y", KILN_FLOAT32, 1, kScaleDims}};
const kiln_cuda_kernel_desc kScaleKernel[] = {{"kiln_test_scale", {4, 1, 1}, {256, 1, 1}, 0, 4}};

TEST(Cuda, RunsABundleDescriptorWhereThereIsAGpu) {
  kiln_cuda_device *dev = nullptr;
  if (kiln_status *s = kiln_cuda_device_open(0, &dev))
    GTEST_SKIP() << "no CUDA device here: " << messageOf(s);
  kiln_cuda_code code{};
  code.compute_capability = 75;
  code.num_kernels = 1;
  code.kernels = kScaleKernel;
  code.ptx = kScalePtx;
  kiln_model_desc desc{};
  desc.abi_version = KILN_ABI_VERSION;
  desc.name = "scale";
  desc.num_inputs = desc.num_outputs = 1;
  desc.inputs = kScaleIn;
  desc.outputs = kScaleOut;
  desc.entry = scaleEntry;
  desc.cuda = &code;

  kiln_cuda_model *model = nullptr;
  ASSERT_EQ(messageOf(kiln_cuda_model_load(dev, &desc, &model)), "");
  kiln_tensor *x = kiln_tensor_create(KILN_FLOAT32, 1, kScaleDims);
  auto *xs = static_cast<float *>(kiln_tensor_data(x));
  for (int i = 0; i < 1000; ++i)
    xs[i] = (float)i;
  kiln_tensor *y = nullptr;
  for (int run = 0; run < 2; ++run) { // buffers are reused between runs
    ASSERT_EQ(messageOf(kiln_cuda_model_execute(model, &x, 1, &y, 1)), "");
    auto *ys = static_cast<float *>(kiln_tensor_data(y));
    for (int i = 0; i < 1000; ++i)
      ASSERT_EQ(ys[i], 1.5f * i) << i;
    kiln_tensor_free(y);
  }
  // A wrong input shape is refused before anything reaches the device.
  int64_t other = 999;
  kiln_tensor *small = kiln_tensor_create(KILN_FLOAT32, 1, &other);
  std::string m = messageOf(kiln_cuda_model_execute(model, &small, 1, &y, 1));
  EXPECT_NE(m.find("must have shape [1000]"), std::string::npos) << m;
  kiln_tensor_free(small);
  kiln_tensor_free(x);
  kiln_cuda_model_free(model);

  // CPU code, and code for a newer GPU than this one, are refused.
  kiln_model_desc cpu = desc;
  cpu.cuda = nullptr;
  m = messageOf(kiln_cuda_model_load(dev, &cpu, &model));
  EXPECT_NE(m.find("is compiled for the CPU"), std::string::npos) << m;
  kiln_cuda_code future = code;
  future.compute_capability = 990;
  desc.cuda = &future;
  m = messageOf(kiln_cuda_model_load(dev, &desc, &model));
  EXPECT_NE(m.find("is compiled for sm_990"), std::string::npos) << m;
  EXPECT_EQ(model, nullptr);
  // sm_75a runs on sm_75 only (this test's GPU is newer: see the skip).
  kiln_cuda_code specific = code;
  specific.arch_specific = 1;
  desc.cuda = &specific;
  m = messageOf(kiln_cuda_model_load(dev, &desc, &model));
  if (kiln_cuda_device_compute_capability(dev) != 75)
    EXPECT_NE(m.find("is compiled for sm_75a"), std::string::npos) << m;
  kiln_cuda_model_free(model);
  model = nullptr;
  // External weights not loaded yet: refused before anything is uploaded.
  kiln_weights slot{};
  desc.cuda = &code;
  desc.weights = &slot;
  m = messageOf(kiln_cuda_model_load(dev, &desc, &model));
  EXPECT_NE(m.find("keeps its weights in a file"), std::string::npos) << m;
  EXPECT_EQ(model, nullptr);
  kiln_cuda_device_close(dev);
}

} // namespace
