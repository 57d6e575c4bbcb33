// kiln::Model: the in-process JIT with a per-shape executable cache.
#include "CompileCache.h"
#include "KernelTuning.h"
#include "CompileHeap.h"
#include "CudaExecution.h"
#include "Driver.h"
#include "ModelSource.h"
#include "TensorDescs.h"
#include "kiln/IR/ShapeErrors.h"
#include "kiln/Interp/Interpreter.h"

#include "kiln/Target/ConstantPool.h"
#include "kiln/Target/TargetEmitter.h"
#include "kiln/InvocationLog.h"
#include "onnx/onnx_pb.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "llvm/IR/LLVMContext.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Target/TargetMachine.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>

using namespace mlir;

namespace kiln {

Tensor::Tensor(kiln_dtype dtype, const std::vector<int64_t> &dims)
    : t(kiln_tensor_create(dtype, (int32_t)dims.size(), dims.data())) {}

Tensor &Tensor::operator=(Tensor &&o) noexcept {
  if (this != &o) {
    kiln_tensor_free(t);
    t = o.t;
    o.t = nullptr;
  }
  return *this;
}

std::vector<int64_t> Tensor::dims() const {
  const int64_t *d = kiln_tensor_dims(t);
  return d ? std::vector<int64_t>(d, d + kiln_tensor_rank(t)) : std::vector<int64_t>();
}

namespace {

/// Whether a tensor has a dim known only at run time (-1).
bool hasUnknownDim(const TensorInfo &t) {
  return std::find(t.dims.begin(), t.dims.end(), -1) != t.dims.end();
}

/// One compiled specialisation: the JIT'd code and the runtime descriptor
/// that points into it. The descriptor's strings and dims live here.
struct Executable {
  ConstantPool constants; ///< outlives `code`, which points into it
  std::unique_ptr<JitCode> code;
  std::vector<TensorInfo> inputs, outputs;
  /// Per graph output: kLayoutTensor, kLayoutNone or a sequence length;
  /// `outputs` are the flattened tensors.
  std::vector<int64_t> outputLayout;
  /// Per flattened output: the index in `outputs` of the hidden result that
  /// holds its number of valid entries along `countAxes[k]` (known only at
  /// run time), or -1. Hidden results follow the visible ones; empty when
  /// there are none.
  std::vector<int64_t> rowCounts, countAxes;
  size_t numVisible() const { return rowCounts.empty() ? outputs.size() : rowCounts.size(); }
  std::vector<kiln_tensor_desc> inputDescs, outputDescs;
  std::vector<kiln_output_rows> outputRows;
  kiln_model_desc desc{};
  /// Set when the model runs through the reference interpreter instead.
  std::shared_ptr<interp::Program> interpreted;
  /// Set when the model runs on a GPU: `code`'s entry point is host code
  /// that launches its kernels.
  std::unique_ptr<CudaExecutable> cuda;

  void finalize(kiln_entry_fn entry) {
    inputDescs = describeTensors(inputs);
    outputDescs = describeTensors(outputs);
    desc.abi_version = KILN_ABI_VERSION;
    desc.name = "model";
    desc.workspace_alignment = 64;
    desc.num_inputs = (int32_t)inputs.size();
    desc.num_outputs = (int32_t)outputs.size();
    desc.inputs = inputDescs.data();
    desc.outputs = outputDescs.data();
    desc.entry = entry;
    // Compiled code's row counts are the runtime's to apply, as for a
    // bundle: the descriptor lists the visible outputs, then the counts.
    if (!rowCounts.empty() && !interpreted) {
      size_t visible = numVisible();
      desc.num_outputs = (int32_t)visible;
      outputRows.clear();
      for (size_t k = 0; k < visible; ++k)
        outputRows.push_back({rowCounts[k] < 0 ? -1 : (int32_t)(rowCounts[k] - visible),
                              (int32_t)countAxes[k]});
      desc.output_rows = outputRows.data();
      desc.num_row_counts = (int32_t)(outputs.size() - visible);
    }
  }
};

} // namespace

using Shapes = std::vector<std::vector<int64_t>>;
/// Per graph input: kLayoutTensor, kLayoutNone or a sequence length. Empty:
/// all tensors.
using Layout = std::vector<int64_t>;
using InputValues = std::map<size_t, std::string>; // raw bytes

/// Small inputs whose values may decide shapes or other compile-time facts
/// (a Reshape target, reduction axes or Resize scales fed as graph inputs)
/// are candidates for value specialisation.
constexpr int64_t kMaxSpecialisedElements = 64;

static bool isValueCandidate(const kiln_tensor *t) {
  int32_t dt = kiln_tensor_dtype(t);
  // Booleans too: a Loop's initial condition decides its number of
  // iterations, and so the shapes of its scan outputs.
  bool supported = dt == KILN_INT64 || dt == KILN_INT32 || dt == KILN_FLOAT32 ||
                   dt == KILN_FLOAT64 || dt == KILN_BOOL;
  return supported && kiln_tensor_num_elements(t) <= kMaxSpecialisedElements;
}

static InputValues valuesOf(const std::vector<const kiln_tensor *> &inputs) {
  InputValues values;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!isValueCandidate(inputs[i]))
      continue;
    const char *data =
        static_cast<const char *>(kiln_tensor_data(const_cast<kiln_tensor *>(inputs[i])));
    values[i] = std::string(data, kiln_tensor_num_bytes(inputs[i]));
  }
  return values;
}

/// Compile errors that value specialisation can cure.
static bool needsValues(const Status &s) {
  return s.message.find("not known after shape inference") != std::string::npos ||
         s.message.find("must be a constant") != std::string::npos ||
         s.message.find("must be constant") != std::string::npos ||
         s.message.find("dynamic shape") != std::string::npos;
}

/// Constants this large live in the executable's constant pool rather than
/// in its code; smaller ones stay where LLVM can fold their values.
constexpr size_t kMinPooledConstantBytes = 4096;

struct Model::Impl {
  /// Parsed on the first compile that misses the on-disk cache (under
  /// `mutex`, as every compile).
  mutable ModelSource source;
  CompileOptions options;
  /// The model's own pool when numThreads > 1; with 0 runs use the
  /// runtime's shared pool, with 1 none.
  std::unique_ptr<kiln_thread_pool, void (*)(kiln_thread_pool *)> pool{nullptr,
                                                                       kiln_thread_pool_free};
  kiln_thread_pool *runPool() const {
    if (options.numThreads == 0)
      return kiln_default_thread_pool();
    return pool.get();
  }
  std::vector<TensorInfo> inputs, outputs;
  /// Open when options.device is "cuda".
  CudaDevice cuda;

  mutable std::mutex mutex;
  mutable std::map<std::tuple<Layout, Shapes, InputValues>, std::shared_ptr<Executable>> cache;
  /// Shapes whose compile the inputs' fault refused (KILN_SHAPE_MISMATCH: a
  /// broadcast or Reshape they break): the same inputs again get the same
  /// error at once, not another compile under the lock every run waits on.
  mutable std::map<std::tuple<Layout, Shapes, InputValues>, Status> refused;
  mutable Stats stats;
  /// Set once a compile showed that shapes depend on input values.
  mutable bool specialiseValues = false;
  /// Set once the compile for every shape (dims known at run time) failed.
  mutable bool dynamicFailed = false;

  /// Whether the model has unknown input dims that one compile may cover.
  bool dynamicCandidate() const {
    if (!options.dynamicShapes || options.interpret || options.gpuTensorPassesOnCpu || cuda)
      return false;
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (dynamicFailed)
        return false;
    }
    return std::any_of(inputs.begin(), inputs.end(), [](const TensorInfo &t) {
      return t.kind == ValueKind::Tensor && hasUnknownDim(t);
    });
  }
  /// The executable compiled with the declared (unknown) input dims.
  Status getDynamicExecutable(std::shared_ptr<Executable> &out) const {
    Status s = getExecutable({}, {}, {}, out);
    if (s.ok() && std::none_of(out->inputs.begin(), out->inputs.end(), hasUnknownDim))
      s = Status::error(KILN_INTERNAL, "not compiled for dims known at run time");
    if (!s.ok()) {
      std::lock_guard<std::mutex> lock(mutex);
      dynamicFailed = true;
      if (options.progress)
        options.progress(("one compile for every shape failed, compiling per shape: " +
                          s.message.substr(0, 300))
                             .c_str(),
                         0.0);
    }
    return s;
  }

  /// The on-disk cache (null when CompileOptions::cache is off).
  std::unique_ptr<CompileCache> diskCache;

  Status compileNow(const Layout &layout, const Shapes &shapes, const InputValues &values,
                    std::shared_ptr<Executable> &out, InvocationLog *log) const;
  Status compile(const Layout &layout, const Shapes &shapes, const InputValues &values,
                 std::shared_ptr<Executable> &out) const;
  std::string diskKey(const Layout &layout, const Shapes &shapes, const InputValues &values,
                      const llvm::TargetMachine &tm) const;
  Status getExecutable(const Layout &layout, const Shapes &shapes, const InputValues &values,
                       std::shared_ptr<Executable> &out) const {
    std::lock_guard<std::mutex> lock(mutex);
    auto key = std::make_tuple(layout, shapes, values);
    auto it = cache.find(key);
    if (it != cache.end()) {
      out = it->second;
      return {};
    }
    if (auto r = refused.find(key); r != refused.end())
      return r->second;
    Status s = compile(layout, shapes, values, out);
    if (s.ok())
      cache[key] = out;
    else if (s.code == KILN_SHAPE_MISMATCH && !shapes.empty())
      refused[key] = s;
    return s;
  }
};

/// A cache entry's payload: the executable's signature and output
/// bookkeeping, its constant pool and its object code.
static std::string serializeExecutable(const Executable &exe, const std::string &object) {
  PayloadWriter w;
  w.tensorInfos(exe.inputs);
  w.tensorInfos(exe.outputs);
  w.i64s(exe.outputLayout);
  w.i64s(exe.rowCounts);
  w.i64s(exe.countAxes);
  w.u64(exe.desc.workspace_size);
  w.u64(exe.constants.symbols.size());
  for (const auto &[name, offset] : exe.constants.symbols) {
    w.bytes(name);
    w.u64(offset);
  }
  w.alignedBytes(std::string_view(exe.constants.data.get(), exe.constants.size));
  w.bytes(object);
  return std::move(w.out);
}

/// `entry` holds `payload`; the constant pool stays in it (mapped, not
/// copied) when it lies aligned there.
static bool deserializeExecutable(const std::shared_ptr<llvm::MemoryBuffer> &entry,
                                  std::string_view payload, Executable &exe,
                                  std::string_view &object) {
  PayloadReader r(payload);
  exe.inputs = r.tensorInfos();
  exe.outputs = r.tensorInfos();
  exe.outputLayout = r.i64s();
  exe.rowCounts = r.i64s();
  exe.countAxes = r.i64s();
  exe.desc.workspace_size = r.u64();
  uint64_t symbols = r.u64();
  for (uint64_t i = 0; r.ok && i < symbols; ++i) {
    std::string name(r.bytes());
    exe.constants.symbols.emplace_back(std::move(name), r.u64());
  }
  std::string_view pool = r.alignedBytes();
  object = r.bytes();
  if (!r.ok || r.pos != payload.size())
    return false;
  if (!pool.empty()) {
    if ((uintptr_t)pool.data() % 64 == 0) {
      exe.constants.data = std::shared_ptr<const char>(entry, pool.data());
    } else { // a small entry read into the heap rather than mapped
      char *data = static_cast<char *>(std::aligned_alloc(64, (pool.size() + 63) / 64 * 64));
      if (!data)
        return false;
      std::memcpy(data, pool.data(), pool.size());
      exe.constants.data.reset(data, ConstantPool::FreeDeleter());
    }
    exe.constants.size = pool.size();
  }
  for (const auto &[name, offset] : exe.constants.symbols)
    if (offset > exe.constants.size)
      return false;
  return true;
}

/// Links `object` into the process with `exe`'s constants and points the
/// descriptor at its entry point.
static bool linkExecutable(Executable &exe, std::string_view object, const TargetOptions &to,
                           std::string &error) {
  exe.code = JitCode::createFromObject(object, to, &exe.constants, error);
  void *entry = exe.code ? exe.code->lookup("kiln_entry", error) : nullptr;
  if (!entry)
    return false;
  exe.finalize(reinterpret_cast<kiln_entry_fn>(entry));
  // Compiled once for every shape: the dims known only at run time.
  if (std::any_of(exe.inputs.begin(), exe.inputs.end(), hasUnknownDim)) {
    void *count = exe.code->lookup("kiln_entry_num_dims", error);
    void *fn = exe.code->lookup("kiln_entry_dims", error);
    if (!count || !fn)
      return false;
    exe.desc.num_runtime_dims = (int32_t) * static_cast<const int64_t *>(count);
    exe.desc.runtime_dims = reinterpret_cast<int64_t (*)(int64_t *)>(fn);
  }
  return true;
}

std::string Model::Impl::diskKey(const Layout &layout, const Shapes &shapes,
                                 const InputValues &values, const llvm::TargetMachine &tm) const {
  CacheKey key;
  key.add(compilerIdentity()).add(version()).add(LLVM_VERSION_STRING).add(KILN_ABI_VERSION);
  key.add(source.digest()).add(layout).add((int64_t)shapes.size());
  for (const auto &shape : shapes)
    key.add(shape);
  for (const auto &[index, bytes] : values)
    key.add((int64_t)index).add(bytes);
  key.add(static_cast<const CodegenOptions &>(options));
  // Tuned code is tuned for a thread count (0: physical cores).
  key.add(options.tune ? (options.numThreads ? options.numThreads : kiln_default_num_threads())
                       : -1);
  key.add(tm.getTargetTriple().str()).add(tm.getTargetCPU().str())
      .add(tm.getTargetFeatureString().str());
  return key.digest();
}

/// "[1x8], [8x4]": the shapes as logs and errors give them.
static std::string shapesText(const Shapes &shapes) {
  std::string text;
  for (const auto &shape : shapes) {
    text += text.empty() ? "[" : ", [";
    for (size_t d = 0; d < shape.size(); ++d)
      text += (d ? "x" : "") + std::to_string(shape[d]);
    text += "]";
  }
  return text;
}

/// Each compile goes into the invocation log of the tool running it (or one
/// of its own, "jit"): options, model digest, shapes, stage timings, errors.
Status Model::Impl::compile(const Layout &layout, const Shapes &shapes,
                            const InputValues &values, std::shared_ptr<Executable> &out) const {
  std::unique_ptr<InvocationLog> own;
  InvocationLog *log = InvocationLog::current();
  if (!log) {
    own = InvocationLog::begin("jit", {"kiln::Model", "cpu=" + options.cpu,
                                       "opt_level=" + std::to_string(options.optLevel),
                                       "threads=" + std::to_string(options.numThreads),
                                       "cache=" + std::string(options.cache ? "on" : "off"),
                                       "debug_memory=" + std::to_string(options.debugMemory),
                                       "profile=" + std::to_string(options.profile),
                                       "interpret=" + std::to_string(options.interpret),
                                       "gpu_tensor_passes=" +
                                           std::to_string(options.gpuTensorPassesOnCpu)},
                               InvocationLog::Scope::Thread);
    log = own.get();
  }
  if (log)
    log->note("jit compile",
              "model digest " + source.digest() + ", input shapes " + shapesText(shapes));
  Status s = compileNow(layout, shapes, values, out, log);
  if (log && !s.ok())
    log->error(s.message);
  if (own)
    own->finish(s.ok() ? 0 : 1);
  return s;
}

Status Model::Impl::compileNow(const Layout &layout, const Shapes &shapes,
                               const InputValues &values, std::shared_ptr<Executable> &out,
                               InvocationLog *log) const {
  auto start = std::chrono::steady_clock::now(), last = start;
  auto done = [&](const char *stage) {
    auto now = std::chrono::steady_clock::now();
    double seconds = std::chrono::duration<double>(now - last).count();
    if (options.progress)
      options.progress(stage, seconds);
    if (log)
      log->stage(stage, seconds);
    last = now;
    CompileHeapScope::grown();
  };
  stats.tuning.clear(); // the last compile's (none when its code is cached)
  std::string error;
  const TargetOptions &to = options; // the host: makeImpl refuses a triple
  auto tm = createTargetMachine(to, error);
  if (!tm)
    return Status::error(KILN_INVALID_ARGUMENT, error);
  std::string key;
  if (diskCache && !options.interpret && !cuda) {
    key = diskKey(layout, shapes, values, *tm);
    std::shared_ptr<llvm::MemoryBuffer> entry;
    std::string_view payload, object;
    auto cached = std::make_shared<Executable>();
    if (diskCache->load(key, entry, payload) &&
        deserializeExecutable(entry, payload, *cached, object) &&
        linkExecutable(*cached, object, to, error)) {
        done("load compiled code from the cache");
        out = cached;
        stats.compilations++;
        stats.cacheHits++;
        return {};
    }
    // An entry this build cannot link is compiled afresh (and replaced).
  }
  CompileHeapScope heap; // past the cache: a hit allocates little
  const LoadedModel *model = nullptr;
  if (Status s = source.parsed(model); !s.ok())
    return s;
  // The model imported at `at` (empty: its declared shapes); whether shape
  // inference refused anything on the way.
  auto importAt = [&](MLIRContext &c, const Shapes &at, OwningOpRef<ModuleOp> &m,
                      bool &refused) {
    uint64_t before = shapeInferenceRefusals();
    Status s = importAndOptimize(c, *model, at, values, m, layout, options.maxTensorBytes,
                                 cuda != nullptr || options.gpuTensorPassesOnCpu);
    refused = shapeInferenceRefusals() != before;
    return s;
  };
  auto ctx = createCompilerContext();
  OwningOpRef<ModuleOp> module;
  bool refused = false;
  if (Status s = importAt(*ctx, shapes, module, refused); !s.ok()) {
    // Shapes a run's inputs gave to dims the model leaves unknown, which
    // its ops refuse (a broadcast or a Reshape that does not fit): the
    // inputs' fault, reported as such (kiln.ShapeError), not as a compile
    // error; the model stays usable for other shapes. Only where the
    // model's own declared shapes pass: a model whose ops refuse those too
    // (a Transpose's perm that is no permutation, a Reshape of an
    // initializer that never fits) is at fault itself.
    bool givenDims = !shapes.empty() && std::any_of(inputs.begin(), inputs.end(), hasUnknownDim);
    if (givenDims && s.code == KILN_COMPILE_ERROR && refused) {
      auto declaredCtx = createCompilerContext();
      OwningOpRef<ModuleOp> declared;
      bool refusedAtDeclared = false;
      Status atDeclared = importAt(*declaredCtx, {}, declared, refusedAtDeclared);
      if (atDeclared.ok() || !refusedAtDeclared)
        return Status::error(KILN_SHAPE_MISMATCH,
                             "the input shapes " + shapesText(shapes) +
                                 " do not fit the model: " + s.message);
    }
    return s;
  }
  done("import, shape inference, folding");
  auto exe = std::make_shared<Executable>();
  // No shapes given: the declared ones, whose unknown dims the code takes
  // at run time (Impl::getDynamicExecutable).
  if (Status s = describeSignature(*module, exe->inputs, exe->outputs,
                                   /*runtimeDims=*/shapes.empty());
      !s.ok())
    return s;
  if (auto c = (*module)->getAttrOfType<DenseI64ArrayAttr>("kiln.output_row_counts"))
    exe->rowCounts.assign(c.asArrayRef().begin(), c.asArrayRef().end());
  if (auto c = (*module)->getAttrOfType<DenseI64ArrayAttr>("kiln.output_count_axes"))
    exe->countAxes.assign(c.asArrayRef().begin(), c.asArrayRef().end());
  exe->countAxes.resize(exe->rowCounts.size(), 0);
  if (auto l = (*module)->getAttrOfType<DenseI64ArrayAttr>("kiln.output_layout"))
    exe->outputLayout.assign(l.asArrayRef().begin(), l.asArrayRef().end());
  else
    exe->outputLayout.assign(exe->numVisible(), kLayoutTensor);
  if (options.interpret) {
    exe->interpreted = std::make_shared<interp::Program>(std::move(ctx), std::move(module),
                                                         describeLocation);
    out = exe;
    stats.compilations++;
    return {};
  }
  if (!options.testPerturbNode.empty())
    if (Status s = perturbNode(*module, options.testPerturbNode); !s.ok())
      return s;

  // Empty outputs need no code at all (and MLIR's bare-pointer calling
  // convention rejects zero-sized memrefs).
  if (std::all_of(exe->outputs.begin(), exe->outputs.end(), [](const TensorInfo &t) {
        return std::find(t.dims.begin(), t.dims.end(), 0) != t.dims.end();
      })) {
    exe->finalize([](void **) {});
    out = exe;
    stats.compilations++;
    return {};
  }
  CudaHostCode gpu;
  if (cuda) {
    if (!exe->rowCounts.empty() || llvm::any_of(exe->outputLayout, [](int64_t l) {
          return l != kLayoutTensor;
        }))
      return Status::error(KILN_COMPILE_ERROR,
                           "device cuda: the model returns sequences, optionals or outputs "
                           "whose number of rows is known only at run time, which the GPU "
                           "path does not support yet");
    if (Status s = lowerForCuda(*module, cudaChipOf(cuda.get()), "kiln_entry", gpu, options.gpu);
        !s.ok())
      return s;
    done(("lower to GPU kernels, generate PTX (" + cudaChipOf(cuda.get()) +
          ") and the host code")
             .c_str());
  } else {
    LoweringOptions lowering;
    lowering.codegen = options;
    if (options.tune) {
      TuningReport report;
      if (Status s = tuneModuleKernels(*module, lowering, *tm, options.numThreads,
                                       diskCache.get(), RaceOptions(), report);
          !s.ok())
        return s;
      stats.tuning = report.summary();
      stats.tuningSeconds += report.seconds;
      done(("tune kernels: " + stats.tuning).c_str());
    }
    if (Status s = lower(*module, LowerTo::LLVMDialect, lowering);
        !s.ok())
      return s;
    done("lower to linalg, bufferize, lower to the LLVM dialect");
  }
  // A CUDA program's workspace is on the device (CudaExecutable).
  if (auto ws = (*module)->getAttrOfType<IntegerAttr>("kiln.workspace_size"); ws && !cuda)
    exe->desc.workspace_size = ws.getInt();
  extractConstants(*module, kMinPooledConstantBytes, exe->constants);
  auto llvmCtx = std::make_unique<llvm::LLVMContext>();
  auto llvmModule = translateToLLVMIR(*module, *llvmCtx, *tm, error);
  if (!llvmModule)
    return Status::error(KILN_COMPILE_ERROR, error);
  // The MLIR context holds every weight (and its packed copy) as uniqued
  // attributes until it dies, and the pool has what the code needs of them:
  // release it before LLVM's optimizer and code generator run.
  module = nullptr;
  ctx.reset();
  done("translate to LLVM IR");
  optimizeModule(*llvmModule, *tm, options.optLevel);
  done(options.optLevel ? "optimize LLVM IR" : "LLVM IR (-O0: not optimized)");
  // Machine code as an object file, which the cache can keep.
  std::string object;
  if (!emitMachineCode(*llvmModule, *tm, /*assembly=*/false, object, error))
    return Status::error(KILN_COMPILE_ERROR, error);
  llvmModule.reset();
  llvmCtx.reset();
  if (!linkExecutable(*exe, object, to, error))
    return Status::error(KILN_COMPILE_ERROR, "JIT: " + error);
  done("generate machine code");
  if (cuda) {
    if (Status s = CudaExecutable::create(cuda, gpu, exe->inputs, exe->outputs, exe->cuda);
        !s.ok())
      return s;
    done("load the kernels and upload the weights to the GPU");
  } else if (diskCache) {
    diskCache->store(key, serializeExecutable(*exe, object));
  }
  out = exe;
  stats.compilations++;
  stats.compileSeconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return {};
}

Model::Model(std::unique_ptr<Impl> impl) : impl(std::move(impl)) {}
Model::~Model() = default;

static std::unique_ptr<Model::Impl> makeImpl(const CompileOptions &options,
                                             std::string *error) {
  if (options.optLevel < 0 || options.optLevel > 3) {
    if (error)
      *error = "optimization level must be 0..3";
    return nullptr;
  }
  if (!options.triple.empty()) {
    if (error)
      *error = "the JIT generates code for this machine and takes no target triple ('" +
               options.triple + "'): compile for other targets with kiln::emit or kilnc";
    return nullptr;
  }
  if (options.numThreads < 0) {
    if (error)
      *error = "the thread count must be 0 (physical cores) or more";
    return nullptr;
  }
  auto impl = std::make_unique<Model::Impl>();
  impl->options = options;
  if (options.numThreads > 1)
    impl->pool.reset(kiln_thread_pool_create(options.numThreads));
  if (options.cache)
    impl->diskCache = std::make_unique<CompileCache>(options.cacheDir);
  if (options.tune && (options.interpret || options.gpuTensorPassesOnCpu)) {
    if (error)
      *error = "tune tunes the CPU kernels, which the interpreter and the GPU tensor passes "
               "do not call";
    return nullptr;
  }
  if (options.device != "cpu" && options.device != "cuda") {
    if (error)
      *error = "unknown device '" + options.device + "': give cpu or cuda";
    return nullptr;
  }
  if (options.device == "cuda") {
    if (options.interpret || options.debugMemory || options.profile ||
        !options.testPerturbNode.empty() || options.gpuTensorPassesOnCpu || options.tune) {
      if (error)
        *error = "device cuda: interpret, debug memory, profiling, test perturbation, "
                 "kernel tuning and the GPU tensor passes on the CPU are CPU-only";
      return nullptr;
    }
    if (Status s = openCudaDevice(0, impl->cuda); !s.ok()) {
      if (error)
        *error = "device cuda: " + s.message;
      return nullptr;
    }
  }
  return impl;
}

static std::unique_ptr<Model::Impl> finishLoad(std::unique_ptr<Model::Impl> impl,
                                               const Status &opened, std::string *error) {
  if (!opened.ok()) {
    if (error)
      *error = opened.message;
    return nullptr;
  }
  impl->inputs = impl->source.inputs();
  impl->outputs = impl->source.outputs();
  if (Status s = checkDimBounds(impl->inputs, impl->options.dimBounds); !s.ok()) {
    if (error)
      *error = s.message;
    return nullptr;
  }
  return impl;
}

std::unique_ptr<Model> Model::load(const std::string &path, const CompileOptions &options,
                                   std::string *error) {
  auto impl = makeImpl(options, error);
  if (!impl)
    return nullptr;
  Status s = ModelSource::openFile(path, impl->diskCache.get(), impl->source);
  impl = finishLoad(std::move(impl), s, error);
  return impl ? std::unique_ptr<Model>(new Model(std::move(impl))) : nullptr;
}

std::unique_ptr<Model> Model::loadFromMemory(const void *data, size_t size,
                                             const std::string &baseDir,
                                             const CompileOptions &options, std::string *error) {
  auto impl = makeImpl(options, error);
  if (!impl)
    return nullptr;
  Status s = ModelSource::openBuffer(data, size, baseDir, impl->source);
  impl = finishLoad(std::move(impl), s, error);
  return impl ? std::unique_ptr<Model>(new Model(std::move(impl))) : nullptr;
}

const std::vector<TensorInfo> &Model::inputs() const { return impl->inputs; }
const std::vector<TensorInfo> &Model::outputs() const { return impl->outputs; }

Model::Stats Model::stats() const {
  std::lock_guard<std::mutex> lock(impl->mutex);
  return impl->stats;
}

/// Checks one input's shape against its declared dims.
static Status checkShape(size_t i, const TensorInfo &declared, const std::vector<int64_t> &shape) {
  const auto &d = declared.dims;
  bool ok = d.empty() || d.size() == shape.size();
  for (size_t k = 0; ok && k < d.size(); ++k)
    ok = d[k] < 0 || d[k] == shape[k];
  if (ok)
    return {};
  auto str = [](const std::vector<int64_t> &v) {
    std::string s = "[";
    for (size_t k = 0; k < v.size(); ++k)
      s += (k ? ", " : "") + (v[k] < 0 ? std::string("?") : std::to_string(v[k]));
    return s + "]";
  };
  return Status::error(KILN_SHAPE_MISMATCH, "input " + std::to_string(i) + " '" + declared.name +
                                                "' must have shape " + str(d) + ", got " +
                                                str(shape));
}

/// Tensor inputs that name the same dim (an ONNX dim_param such as "seq")
/// must give it one value, within the bounds declared for it
/// (CompileOptions::dimBounds): checked before any compilation, so that the
/// error names the inputs, the dim and the values instead of a node deep in
/// the model. `shapes[i]` is null for an input that is not one tensor.
static Status checkNamedDims(const std::vector<TensorInfo> &declared,
                             const std::vector<const std::vector<int64_t> *> &shapes,
                             const DimBounds &bounds) {
  struct Seen {
    size_t input, dim;
    int64_t value;
  };
  std::map<std::string, Seen> first;
  for (size_t i = 0; i < shapes.size() && i < declared.size(); ++i) {
    const TensorInfo &d = declared[i];
    if (!shapes[i] || d.kind != ValueKind::Tensor || shapes[i]->size() != d.dimNames.size())
      continue;
    for (size_t k = 0; k < d.dimNames.size(); ++k) {
      // "None" and "?" are what some exporters write for any unknown dim,
      // not the name of one.
      if (d.dimNames[k].empty() || d.dimNames[k] == "None" || d.dimNames[k] == "?")
        continue;
      int64_t value = (*shapes[i])[k];
      if (auto b = bounds.find(d.dimNames[k]);
          b != bounds.end() && (value < b->second.first || value > b->second.second))
        return Status::error(KILN_SHAPE_MISMATCH,
                             "input " + std::to_string(i) + " '" +
                                 displaySafe(d.name, 200) + "' has " + std::to_string(value) +
                                 " in dim " + std::to_string(k) + " ('" +
                                 displaySafe(d.dimNames[k], 200) + "'), outside the bounds " +
                                 std::to_string(b->second.first) + ".." +
                                 std::to_string(b->second.second) + " declared for it");
      auto [at, inserted] = first.emplace(d.dimNames[k], Seen{i, k, value});
      if (inserted || at->second.value == value)
        continue;
      const Seen &s = at->second;
      auto where = [&](size_t input, size_t dim, int64_t v) {
        return std::to_string(v) + " in input " + std::to_string(input) + " '" +
               displaySafe(declared[input].name, 200) + "' (dim " + std::to_string(dim) + ")";
      };
      return Status::error(KILN_SHAPE_MISMATCH,
                           "the inputs disagree on the dim the model names '" +
                               displaySafe(d.dimNames[k], 200) + "': " +
                               where(s.input, s.dim, s.value) + ", " + where(i, k, value));
    }
  }
  return {};
}

/// Checks shapes against the declared signature before any compilation, so
/// a wrong input is reported as such rather than as a compile error.
static Status checkAgainstDeclared(const std::vector<TensorInfo> &declared,
                                   const std::vector<std::vector<int64_t>> &shapes,
                                   const DimBounds &bounds) {
  if (shapes.size() != declared.size())
    return Status::error(KILN_INVALID_ARGUMENT,
                         "the model takes " + std::to_string(declared.size()) + " inputs, got " +
                             std::to_string(shapes.size()));
  for (size_t i = 0; i < shapes.size(); ++i) {
    if (declared[i].kind != ValueKind::Tensor)
      return Status::error(KILN_INVALID_ARGUMENT,
                           "input " + std::to_string(i) + " '" + declared[i].name +
                               "' is a sequence: pass the inputs as kiln::ValueView");
    if (Status s = checkShape(i, declared[i], shapes[i]); !s.ok())
      return s;
  }
  std::vector<const std::vector<int64_t> *> each;
  for (const auto &shape : shapes)
    each.push_back(&shape);
  return checkNamedDims(declared, each, bounds);
}

Status Model::prepare(const std::vector<std::vector<int64_t>> &shapes) const {
  if (Status s = checkAgainstDeclared(impl->inputs, shapes, impl->options.dimBounds); !s.ok())
    return s;
  std::shared_ptr<Executable> exe;
  return impl->getExecutable({}, shapes, {}, exe);
}

Status Model::signatureFor(const std::vector<std::vector<int64_t>> &shapes,
                           std::vector<TensorInfo> &outputs) const {
  if (Status s = checkAgainstDeclared(impl->inputs, shapes, impl->options.dimBounds); !s.ok())
    return s;
  std::shared_ptr<Executable> exe;
  if (Status s = impl->getExecutable({}, shapes, {}, exe); !s.ok())
    return s;
  outputs.assign(exe->outputs.begin(), exe->outputs.begin() + exe->numVisible());
  for (size_t k = 0; k < exe->rowCounts.size(); ++k)
    if (exe->rowCounts[k] >= 0)
      outputs[k].dims[exe->countAxes[k]] = -1; // known only at run time
  return {};
}

/// Whether `inputs` take a Slice whose bounds follow from the input dims
/// past the end of the dim it slices (or start it after its end), which the
/// code compiled once for every shape assumed they do not (its runtime_dims
/// returns -3; kiln.slice_checks): ONNX cuts such a slice short, and the
/// code compiled for these very shapes does too (`table[:n]` summed, for n
/// past the table's rows; `x[:, -3:]` of 2 tokens). Bundles, which cannot
/// compile, refuse such inputs (KILN_SHAPE_MISMATCH); the JIT compiles for
/// them instead.
static bool cutsSlicesShort(const Executable &exe, const std::vector<const kiln_tensor *> &inputs) {
  if (exe.interpreted || exe.cuda)
    return false;
  // Other results (-1 for inputs the descriptor does not take) are
  // kiln_model_execute's to report.
  return kiln_model_runtime_dims_result(&exe.desc, inputs.data(), inputs.size(), nullptr) == -3;
}

/// Finds or compiles the executable for these inputs (the graph inputs laid
/// out as `layout` says, sequences flattened): keyed on the layout, their
/// shapes and, once the model turned out to need it, the values of small
/// inputs.
static Status executableFor(const Model::Impl &impl, const Layout &layout,
                            const std::vector<const kiln_tensor *> &inputs,
                            std::shared_ptr<Executable> &exe) {
  std::vector<size_t> owner; // the graph input of each tensor
  for (size_t g = 0; g < layout.size(); ++g)
    owner.insert(owner.end(), layout[g] == kLayoutTensor ? 1 : std::max<int64_t>(layout[g], 0), g);
  if (layout.empty())
    for (size_t i = 0; i < inputs.size(); ++i)
      owner.push_back(i);
  std::vector<std::vector<int64_t>> shapes;
  for (size_t i = 0; i < inputs.size(); ++i) {
    size_t g = owner[i];
    if (!inputs[i])
      return Status::error(KILN_INVALID_ARGUMENT, "input " + std::to_string(g) + " is null");
    if (g < impl.inputs.size() && kiln_tensor_dtype(inputs[i]) != impl.inputs[g].dtype)
      return Status::error(KILN_DTYPE_MISMATCH,
                           "input " + std::to_string(g) + " '" + impl.inputs[g].name +
                               "' must be " + kiln_dtype_name(impl.inputs[g].dtype) + ", got " +
                               kiln_dtype_name(kiln_tensor_dtype(inputs[i])));
    const int64_t *d = kiln_tensor_dims(inputs[i]);
    shapes.emplace_back(d, d + kiln_tensor_rank(inputs[i]));
  }
  if (layout.empty()) {
    if (Status s = checkAgainstDeclared(impl.inputs, shapes, impl.options.dimBounds); !s.ok())
      return s;
  } else {
    std::vector<const std::vector<int64_t> *> each(impl.inputs.size(), nullptr);
    for (size_t i = 0; i < inputs.size(); ++i)
      if (layout[owner[i]] == kLayoutTensor) {
        if (Status s = checkShape(owner[i], impl.inputs[owner[i]], shapes[i]); !s.ok())
          return s;
        if (owner[i] < each.size())
          each[owner[i]] = &shapes[i];
      }
    if (Status s = checkNamedDims(impl.inputs, each, impl.options.dimBounds); !s.ok())
      return s;
  }
  bool specialise;
  {
    std::lock_guard<std::mutex> lock(impl.mutex);
    specialise = impl.specialiseValues;
  }
  // One compile for every shape where the model's unknown dims lower to
  // code that takes them at run time; a model that cannot (an op whose
  // lowering needs static shapes, shapes that depend on input values) is
  // compiled per shape, as before.
  if (layout.empty() && !specialise && impl.dynamicCandidate()) {
    if (impl.getDynamicExecutable(exe).ok() && !cutsSlicesShort(*exe, inputs))
      return {};
  }
  Status s =
      impl.getExecutable(layout, shapes, specialise ? valuesOf(inputs) : InputValues(), exe);
  if (!s.ok() && !specialise && needsValues(s) && !valuesOf(inputs).empty()) {
    {
      std::lock_guard<std::mutex> lock(impl.mutex);
      impl.specialiseValues = true;
    }
    s = impl.getExecutable(layout, shapes, valuesOf(inputs), exe);
  }
  return s;
}

/// Runs `exe` on the flattened inputs; its flattened visible outputs go to
/// `raw`, those with a run-time row count cut to it.
static Status execute(const Model::Impl &impl, const Executable &exe,
                      const std::vector<const kiln_tensor *> &inputs,
                      std::vector<kiln_tensor *> &raw) {
  raw.assign(exe.outputs.size(), nullptr);
  if (exe.interpreted) {
    if (Status s = exe.interpreted->run(inputs, raw); !s.ok())
      return s;
    // Shape inference and the interpreter are independent: they must agree.
    for (size_t k = 0; k < raw.size() && k < exe.outputs.size(); ++k) {
      std::vector<int64_t> dims(kiln_tensor_dims(raw[k]), kiln_tensor_dims(raw[k]) + kiln_tensor_rank(raw[k]));
      if (dims != exe.outputs[k].dims) {
        for (kiln_tensor *t : raw)
          kiln_tensor_free(t);
        raw.clear();
        return Status::error(KILN_INTERNAL, "interpreter: output " + std::to_string(k) +
                                                " has a shape other than shape inference's");
      }
    }
  } else if (exe.cuda) {
    if (Status s = takeStatus(kiln_model_check_inputs(&exe.desc, inputs.data(), inputs.size()));
        !s.ok())
      return s;
    double ms = 0;
    if (Status s = exe.cuda->run(exe.desc.entry, inputs, raw, ms); !s.ok())
      return s;
    std::lock_guard<std::mutex> lock(impl.mutex);
    impl.stats.deviceMilliseconds = ms;
  } else {
    // The runtime cuts outputs with a run-time row count (desc.output_rows).
    raw.resize(exe.desc.num_outputs);
    if (Status s = takeStatus(kiln_model_execute_with_pool(&exe.desc, inputs.data(),
                                                           inputs.size(), raw.data(), raw.size(),
                                                           nullptr, impl.runPool()));
        !s.ok())
      return s;
  }
  for (size_t k = 0; exe.interpreted && k < exe.rowCounts.size(); ++k) {
    if (exe.rowCounts[k] < 0)
      continue;
    int64_t count = *static_cast<const int64_t *>(kiln_tensor_data(raw[exe.rowCounts[k]]));
    kiln_tensor *cut = kiln_tensor_take_leading(raw[k], (int32_t)exe.countAxes[k], count);
    if (!cut) {
      for (kiln_tensor *t : raw)
        kiln_tensor_free(t);
      raw.clear();
      return Status::error(KILN_OUT_OF_MEMORY, "cannot allocate output " + std::to_string(k));
    }
    kiln_tensor_free(raw[k]);
    raw[k] = cut;
  }
  for (size_t k = exe.numVisible(); k < raw.size(); ++k)
    kiln_tensor_free(raw[k]);
  raw.resize(exe.numVisible());
  return {};
}

Status Model::prepare(const std::vector<const kiln_tensor *> &inputs) const {
  std::shared_ptr<Executable> exe;
  return executableFor(*impl, {}, inputs, exe);
}

Status Model::run(const std::vector<const kiln_tensor *> &inputs,
                  std::vector<Tensor> &outputs) const {
  std::shared_ptr<Executable> exe;
  if (Status s = executableFor(*impl, {}, inputs, exe); !s.ok())
    return s;
  for (size_t k = 0; k < exe->outputLayout.size(); ++k)
    if (exe->outputLayout[k] != kLayoutTensor)
      return Status::error(KILN_INVALID_ARGUMENT,
                           "output " + std::to_string(k) + " '" + impl->outputs[k].name +
                               "' is a sequence or an empty optional: run the model with "
                               "kiln::ValueView inputs to get kiln::Value outputs");
  std::vector<kiln_tensor *> raw;
  if (Status s = execute(*impl, *exe, inputs, raw); !s.ok())
    return s;
  outputs.clear();
  for (kiln_tensor *t : raw)
    outputs.emplace_back(t);
  return {};
}

/// The executable for `inputs`, which are checked against the declared
/// kinds, and the inputs flattened as it takes them.
static Status executableForValues(const Model::Impl &impl, const std::vector<ValueView> &inputs,
                                  std::vector<const kiln_tensor *> &flat,
                                  std::shared_ptr<Executable> &exe) {
  const std::vector<TensorInfo> &declared = impl.inputs;
  if (inputs.size() != declared.size())
    return Status::error(KILN_INVALID_ARGUMENT,
                         "the model takes " + std::to_string(declared.size()) + " inputs, got " +
                             std::to_string(inputs.size()));
  Layout layout;
  flat.clear();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ValueView &v = inputs[i];
    std::string which = "input " + std::to_string(i) + " '" + declared[i].name + "'";
    if (v.kind == ValueKind::None) {
      if (!declared[i].optional)
        return Status::error(KILN_INVALID_ARGUMENT, which + " is not optional; it needs a value");
      layout.push_back(kLayoutNone);
      continue;
    }
    if (v.kind != declared[i].kind)
      return Status::error(KILN_INVALID_ARGUMENT,
                           which + (declared[i].kind == ValueKind::Sequence
                                        ? " is a sequence; a tensor was given"
                                        : " is a tensor; a sequence was given"));
    if (v.kind == ValueKind::Tensor && v.tensors.size() != 1)
      return Status::error(KILN_INVALID_ARGUMENT, which + " is a tensor: give exactly one");
    layout.push_back(v.kind == ValueKind::Tensor ? kLayoutTensor : (int64_t)v.tensors.size());
    flat.insert(flat.end(), v.tensors.begin(), v.tensors.end());
  }
  // All tensors: the same executables as run() with tensors.
  if (llvm::all_of(layout, [](int64_t l) { return l == kLayoutTensor; }))
    layout.clear();
  return executableFor(impl, layout, flat, exe);
}

Status Model::prepare(const std::vector<ValueView> &inputs) const {
  std::vector<const kiln_tensor *> flat;
  std::shared_ptr<Executable> exe;
  return executableForValues(*impl, inputs, flat, exe);
}

Status Model::run(const std::vector<ValueView> &inputs, std::vector<Value> &outputs) const {
  std::vector<const kiln_tensor *> flat;
  std::shared_ptr<Executable> exe;
  if (Status s = executableForValues(*impl, inputs, flat, exe); !s.ok())
    return s;
  std::vector<kiln_tensor *> raw;
  if (Status s = execute(*impl, *exe, flat, raw); !s.ok())
    return s;
  outputs.clear();
  size_t next = 0;
  for (int64_t l : exe->outputLayout) {
    Value v;
    v.kind = l == kLayoutTensor ? ValueKind::Tensor
             : l == kLayoutNone ? ValueKind::None
                                : ValueKind::Sequence;
    int64_t count = l == kLayoutTensor ? 1 : std::max<int64_t>(l, 0);
    for (int64_t k = 0; k < count; ++k)
      v.tensors.emplace_back(raw[next++]);
    outputs.push_back(std::move(v));
  }
  return {};
}

} // namespace kiln
