// Fuzz target: the whole JIT path for small models. Model bytes -> load,
// import, lowering, LLVM code generation, then runs on zero-filled inputs
// (unknown dims taken as 1, then as 0..3 from the bytes, then as 1). Tensors are bounded to 1 MiB each so that a
// mutated dim cannot make a run allocate gigabytes, and Loops to 65,536
// iterations so that a mutated trip count cannot make one run take minutes
// (a Loop past that stops its run with KILN_LIMIT_EXCEEDED). Every failure
// must come back as a Status with a message.
#include "FuzzSupport.h"

#include "kiln/Kiln.h"

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  kiln_set_max_loop_iterations(1 << 16);
  // The IR verified after every pass, not once per pipeline: a pass that
  // breaks it on a mutated model is named.
  setenv("KILN_VERIFY_EACH_PASS", "1", /*overwrite=*/0);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  kiln::CompileOptions options;
  options.cache = false;
  options.numThreads = 1;
  options.optLevel = 1; // faster compiles, the same lowering
  options.maxTensorBytes = 1 << 20;
  std::string error;
  auto model = kiln::Model::loadFromMemory(data, size, "", options, &error);
  if (!model) {
    kiln::fuzz::requireMessage(error, "Model::loadFromMemory");
    return 0;
  }
  // Three runs on one compiled model: unknown dims as 1, then as values
  // drawn from the input's bytes (0 to 3: empty tensors too; inputs that
  // should share a dim may then disagree, which must be a clean error),
  // then as 1 again, so that a model compiled once for every shape meets
  // new shapes and comes back to an old one.
  uint64_t h = 1469598103934665603ull; // FNV-1a of the bytes
  for (size_t i = 0; i < size; ++i)
    h = (h ^ data[i]) * 1099511628211ull;
  for (int round = 0; round < 3; ++round) {
    std::vector<kiln::Tensor> inputs;
    std::vector<kiln::ValueView> views;
    uint64_t bits = h;
    for (const kiln::TensorInfo &info : model->inputs()) {
      if (info.kind != kiln::ValueKind::Tensor || info.dims.size() > 8) {
        views.push_back(info.optional ? kiln::ValueView::none() : kiln::ValueView::sequence({}));
        continue;
      }
      std::vector<int64_t> dims;
      int64_t count = 1;
      for (int64_t d : info.dims) {
        int64_t unknown = round == 1 ? (int64_t)(bits & 3) : 1;
        bits = bits >> 2 | bits << 62;
        dims.push_back(d < 0 ? unknown : d);
        if (dims.back() > (1 << 16) || (count *= dims.back()) > (1 << 16))
          return 0; // too large to run on every input; import is fuzzed elsewhere
      }
      inputs.emplace_back(info.dtype, dims);
      if (!inputs.back().get())
        return 0; // a dtype the runtime cannot allocate (strings)
      views.push_back(kiln::ValueView::tensor(inputs.back().get()));
    }
    std::vector<kiln::Value> outputs;
    kiln::Status s = model->run(views, outputs);
    if (!s.ok())
      kiln::fuzz::requireMessage(s.message, "Model::run");
  }
  return 0;
}
