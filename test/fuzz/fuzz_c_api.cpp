// Fuzz target: the C API's argument checks. The input is a script of calls
// with hostile arguments: tensors of any dtype, rank and dims (negative,
// zero, overflowing, NULL dims, NULL data), runs of a compiled model with
// wrong counts, NULL entries, wrong dtypes and shapes, descriptor queries
// out of range, compiles of NULL or short buffers, statuses and thread
// pools from odd values. Every call must return an error or a value, never
// crash; every error status must carry a message.
#include "FuzzSupport.h"

#include "kiln/kiln_c.h"

#include "onnx/onnx_pb.h"

#include <fuzzer/FuzzedDataProvider.h>

#include <string>
#include <vector>

extern "C" kiln_status *kiln_fuzz_status_from_int(int32_t code, const char *message);

namespace {

/// z = x + y over float inputs of shape [2, n], n dynamic: a model with a
/// static and a dynamic dim, so that runs are checked against both.
std::string tinyModel() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  onnx::GraphProto *g = m.mutable_graph();
  g->set_name("tiny");
  onnx::NodeProto *n = g->add_node();
  n->set_op_type("Add");
  n->add_input("x");
  n->add_input("y");
  n->add_output("z");
  auto declare = [](onnx::ValueInfoProto *v, const char *name) {
    v->set_name(name);
    auto *t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    t->mutable_shape()->add_dim()->set_dim_value(2);
    t->mutable_shape()->add_dim()->set_dim_param("n");
  };
  declare(g->add_input(), "x");
  declare(g->add_input(), "y");
  declare(g->add_output(), "z");
  return m.SerializeAsString();
}

kiln_compiled_model *model = nullptr;

void checkStatus(kiln_status *s, const char *where) {
  if (!s)
    return;
  const char *msg = kiln_status_message(s);
  if (!msg || !*msg)
    kiln::fuzz::broken(where, "error status without a message");
  if (kiln_status_get_code(s) == KILN_OK)
    kiln::fuzz::broken(where, "a returned status says OK");
  kiln_status_free(s);
}

kiln_tensor *makeTensor(FuzzedDataProvider &fdp, std::vector<std::vector<float>> &storage) {
  int32_t dtype = fdp.ConsumeBool() ? KILN_FLOAT32 : fdp.ConsumeIntegral<int32_t>();
  int32_t rank = fdp.ConsumeIntegralInRange<int32_t>(-2, 9);
  std::vector<int64_t> dims;
  for (int32_t i = 0; i < rank && i < 9; ++i)
    dims.push_back(fdp.ConsumeBool() ? fdp.ConsumeIntegralInRange<int64_t>(-1, 4)
                                     : fdp.ConsumeIntegral<int64_t>());
  const int64_t *dimsPtr = fdp.ConsumeBool() || dims.empty() ? dims.data() : nullptr;
  switch (fdp.ConsumeIntegralInRange(0, 2)) {
  case 0:
    return kiln_tensor_create(dtype, rank, dimsPtr);
  case 1: {
    // Wrapped over storage as large as the dims say, when they are small.
    int64_t n = 1;
    for (int64_t d : dims)
      n = d >= 0 && d <= 64 && n <= 4096 ? n * d : -1;
    if (n < 0 || !dimsPtr)
      return kiln_tensor_wrap(dtype, rank, dimsPtr, nullptr);
    storage.emplace_back(size_t(n) * 2 + 1, 1.0f); // room for 8-byte dtypes
    return kiln_tensor_wrap(dtype, rank, dimsPtr, storage.back().data());
  }
  default:
    return nullptr;
  }
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  std::string bytes = tinyModel();
  kiln_compile_options options = {};
  options.opt_level = 1;
  options.num_threads = 1;
  options.no_cache = 1;
  kiln_status *s = kiln_compile_buffer(bytes.data(), bytes.size(), nullptr, &options, &model);
  if (s || !model)
    kiln::fuzz::broken("compiling the tiny model", s ? kiln_status_message(s) : "");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  FuzzedDataProvider fdp(data, size);
  std::vector<kiln_tensor *> tensors;
  std::vector<std::vector<float>> storage;
  for (int step = 0; step < 16 && fdp.remaining_bytes() > 0; ++step) {
    switch (fdp.ConsumeIntegralInRange(0, 7)) {
    case 0: { // tensors and their queries
      kiln_tensor *t = makeTensor(fdp, storage);
      (void)kiln_tensor_num_elements(t);
      (void)kiln_tensor_num_bytes(t);
      (void)kiln_tensor_dims(t);
      (void)kiln_tensor_rank(t);
      (void)kiln_tensor_dtype(t);
      (void)kiln_tensor_data(t);
      tensors.push_back(t);
      break;
    }
    case 1: { // a run with whatever tensors there are
      size_t numInputs = fdp.ConsumeIntegralInRange<size_t>(0, 4);
      std::vector<const kiln_tensor *> inputs;
      for (size_t i = 0; i < numInputs; ++i)
        inputs.push_back(tensors.empty() || fdp.ConsumeBool()
                             ? nullptr
                             : tensors[fdp.ConsumeIntegralInRange<size_t>(0, tensors.size() - 1)]);
      size_t numOutputs = fdp.ConsumeIntegralInRange<size_t>(0, 3);
      std::vector<kiln_tensor *> outputs(numOutputs + 1, nullptr);
      bool nullOutputs = fdp.ConsumeBool();
      kiln_status *s =
          kiln_compiled_model_run(fdp.ConsumeBool() ? model : nullptr,
                                  inputs.empty() && fdp.ConsumeBool() ? nullptr : inputs.data(),
                                  numInputs, nullOutputs ? nullptr : outputs.data(), numOutputs);
      if (!s)
        for (size_t i = 0; i < numOutputs; ++i) {
          (void)kiln_tensor_num_bytes(outputs[i]);
          kiln_tensor_free(outputs[i]);
        }
      checkStatus(s, "kiln_compiled_model_run");
      break;
    }
    case 2: { // descriptors in and out of range
      int32_t i = fdp.ConsumeIntegral<int32_t>();
      const kiln_compiled_model *m = fdp.ConsumeBool() ? model : nullptr;
      (void)kiln_compiled_model_num_inputs(m);
      (void)kiln_compiled_model_num_outputs(m);
      const kiln_tensor_desc *d = kiln_compiled_model_input(m, i);
      if (d && d->rank > 0 && !d->dims)
        kiln::fuzz::broken("kiln_compiled_model_input", "rank without dims");
      (void)kiln_compiled_model_output(m, i);
      break;
    }
    case 3: { // compiles of NULL, empty or short buffers
      std::string bytes = fdp.ConsumeRandomLengthString(64);
      kiln_compiled_model *out = nullptr;
      kiln_compile_options options = {};
      options.opt_level = fdp.ConsumeIntegral<int>();
      options.num_threads = fdp.ConsumeIntegralInRange(-4, 4);
      options.no_cache = 1;
      const void *p = fdp.ConsumeBool() ? bytes.data() : nullptr;
      kiln_status *s = kiln_compile_buffer(p, bytes.size(), nullptr,
                                           fdp.ConsumeBool() ? &options : nullptr,
                                           fdp.ConsumeBool() ? &out : nullptr);
      if (!s && out)
        kiln_compiled_model_free(out);
      checkStatus(s, "kiln_compile_buffer");
      break;
    }
    case 4: { // files that are not there, or not models
      std::string path = fdp.ConsumeRandomLengthString(32);
      kiln_compiled_model *out = nullptr;
      kiln_status *s = kiln_compile_file(fdp.ConsumeBool() ? path.c_str() : nullptr, nullptr,
                                         fdp.ConsumeBool() ? &out : nullptr);
      if (!s && out)
        kiln_compiled_model_free(out);
      checkStatus(s, "kiln_compile_file");
      break;
    }
    case 5: { // dtype tables
      int32_t dtype = fdp.ConsumeIntegral<int32_t>();
      (void)kiln_dtype_size(dtype);
      const char *name = kiln_dtype_name(dtype);
      if (!name)
        kiln::fuzz::broken("kiln_dtype_name", "NULL name");
      break;
    }
    case 6: { // statuses made by callers
      std::string msg = fdp.ConsumeRandomLengthString(32);
      // Any int, as a C caller may pass (fuzz_c_api_caller.c).
      kiln_status *s = kiln_fuzz_status_from_int(fdp.ConsumeIntegral<int32_t>(),
                                                 fdp.ConsumeBool() ? msg.c_str() : nullptr);
      (void)kiln_status_get_code(s);
      (void)kiln_status_message(s);
      kiln_status_free(s);
      (void)kiln_status_get_code(nullptr);
      (void)kiln_status_message(nullptr);
      break;
    }
    default: { // thread pools of odd sizes
      int32_t n = fdp.ConsumeIntegralInRange<int32_t>(-2, 3);
      kiln_thread_pool *pool = kiln_thread_pool_create(n);
      (void)kiln_thread_pool_size(pool);
      kiln_thread_pool_free(pool);
      break;
    }
    }
  }
  for (kiln_tensor *t : tensors)
    kiln_tensor_free(t);
  return 0;
}
