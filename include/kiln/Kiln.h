// Kiln's C++ API: compile ONNX models in process and run them.
//
//   std::string err;
//   auto model = kiln::Model::load("model.onnx", {}, &err);
//   kiln::Tensor x(KILN_FLOAT32, {1, 3, 224, 224});
//   std::vector<kiln::Tensor> y;
//   kiln::Status s = model->run({x.get()}, y);
//
// Only standard-library and runtime types appear here: including this
// header does not pull in LLVM or MLIR.
#ifndef KILN_KILN_H
#define KILN_KILN_H

#include "kiln/Support/DisplaySafe.h"
#include "kiln/Support/CodegenOptions.h"
#include "kiln/Support/Status.h"
#include "kiln/runtime.h"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

std::string version();


/// A runtime tensor with unique ownership.
class Tensor {
public:
  Tensor() = default;
  Tensor(kiln_dtype dtype, const std::vector<int64_t> &dims);
  explicit Tensor(kiln_tensor *adopt) : t(adopt) {}
  Tensor(Tensor &&o) noexcept : t(o.t) { o.t = nullptr; }
  Tensor &operator=(Tensor &&o) noexcept;
  Tensor(const Tensor &) = delete;
  Tensor &operator=(const Tensor &) = delete;
  ~Tensor() { kiln_tensor_free(t); }

  bool valid() const { return t != nullptr; }
  kiln_tensor *get() const { return t; }
  /// Gives up ownership; the caller frees with kiln_tensor_free.
  kiln_tensor *release() {
    kiln_tensor *r = t;
    t = nullptr;
    return r;
  }
  kiln_dtype dtype() const { return (kiln_dtype)kiln_tensor_dtype(t); }
  std::vector<int64_t> dims() const;
  int64_t numElements() const { return kiln_tensor_num_elements(t); }
  size_t numBytes() const { return kiln_tensor_num_bytes(t); }
  void *data() const { return kiln_tensor_data(t); }
  template <typename T> T *data() const { return static_cast<T *>(data()); }

private:
  kiln_tensor *t = nullptr;
};

/// What a graph input or output holds. ONNX also has sequences of tensors
/// and optionals (of a tensor or a sequence); run() with Values passes them.
enum class ValueKind {
  Tensor,
  Sequence, ///< a list of tensors of one dtype, any number, shapes may differ
  None,     ///< an empty optional
};

struct TensorInfo {
  std::string name;
  kiln_dtype dtype; ///< of the tensor, or of a sequence's elements
  std::vector<int64_t> dims; ///< -1 for a dimension known only at run time
  /// As declared: Tensor, or Sequence for a sequence (dims: of its
  /// elements, as far as declared).
  ValueKind kind = ValueKind::Tensor;
  /// Declared as an optional (of `kind`): may be given or returned as None.
  bool optional = false;
  /// Per dim of an input's declared shape: its ONNX dim_param ("seq"), or ""
  /// when it has none. Tensor inputs that name the same dim must agree on
  /// its value at run time (a KILN_SHAPE_MISMATCH otherwise). Empty when not
  /// declared.
  std::vector<std::string> dimNames;
};

/// A graph input for run(): a tensor, a sequence of tensors, or None (an
/// empty optional). The tensors are borrowed.
struct ValueView {
  ValueKind kind = ValueKind::Tensor;
  std::vector<const kiln_tensor *> tensors; ///< one for a Tensor, none for None
  static ValueView tensor(const kiln_tensor *t) { return {ValueKind::Tensor, {t}}; }
  static ValueView sequence(std::vector<const kiln_tensor *> ts) {
    return {ValueKind::Sequence, std::move(ts)};
  }
  static ValueView none() { return {ValueKind::None, {}}; }
};

/// A graph output from run(): owns its tensors.
struct Value {
  ValueKind kind = ValueKind::Tensor;
  std::vector<Tensor> tensors; ///< one for a Tensor, none for None
};

/// Least and greatest values of dims the model names (ONNX dim_param),
/// by name: {{"seq", {1, 512}}}.
using DimBounds = std::map<std::string, std::pair<int64_t, int64_t>>;

/// Parses one bound as kilnc and kiln-run take it, "NAME=LO..HI" (e.g.
/// "seq=1..512"): false where `text` is not that with 0 <= LO <= HI.
bool parseDimBound(const std::string &text, std::string &name,
                   std::pair<int64_t, int64_t> &range);

/// The JIT's options: the code generator's (CodegenOptions: cpu, optLevel,
/// debugMemory, profile, gpuTensorPassesOnCpu, gpu; the triple must stay
/// empty, the JIT generates code for this machine) and those of running and
/// caching.
struct CompileOptions : CodegenOptions {
  /// Threads that run() spreads kernels over, the calling thread included
  /// (a run-time choice: compiled code is the same for any count). 0: the
  /// number of physical cores, from the runtime's shared pool; 1: no pool.
  int numThreads = 0;
  /// Called after each compilation stage with its name and duration (as
  /// EmitOptions::progress), for progress output on long compiles. It may be
  /// called from any thread that compiles.
  std::function<void(const std::string &stage, double seconds)> progress;
  /// Reuse compiled executables across processes from an on-disk cache,
  /// keyed by the model's bytes, input shapes (and specialised values),
  /// these options, the target CPU and the Kiln and LLVM builds.
  bool cache = true;
  /// The largest tensor a compile accepts, in bytes: a model whose tensors
  /// would need more is refused, naming the node, before anything is
  /// allocated. 0: $KILN_MAX_TENSOR_BYTES, else 16 GiB.
  uint64_t maxTensorBytes = 0;
  /// Debugging: run the model through Kiln's reference interpreter (plain
  /// loops over the imported kiln IR, lib/interp) instead of compiled code.
  /// Slow; a second opinion on the compiler's results (kiln-run --verify,
  /// kiln-conformance --interpret).
  bool interpret = false;
  /// Compile once for every input shape where the model leaves dims unknown
  /// (an ONNX dim_param or an unnamed dim): the code takes them at run time.
  /// Where it cannot (an op whose lowering needs static shapes), or with
  /// false, each new set of input shapes is compiled on its first run.
  bool dynamicShapes = true;
  /// Bounds on the dims the model names (ONNX dim_param), e.g. {{"seq", {1,
  /// 512}}}: run() refuses inputs outside them (KILN_SHAPE_MISMATCH, naming
  /// the input, the dim and the bounds) before compiling or running
  /// anything. A name no input dim has is an error of load().
  DimBounds dimBounds;
  /// Test-only: compiled code adds 1 to every element of the first output of
  /// the ONNX node with this name, a deliberate miscompile that verify()
  /// must find. Ignored by the interpreter.
  std::string testPerturbNode;
  /// Where the model runs: "cpu", or "cuda" (the first NVIDIA GPU, through
  /// the driver loaded at run time, kiln/cuda.h): kernels compiled to PTX
  /// for the GPU's architecture, weights uploaded once per executable,
  /// inputs and outputs copied at each run. Loading fails with the driver's
  /// reason where there is no GPU. CUDA executables are not kept in the
  /// on-disk cache, and the CPU-only debugging options (interpret,
  /// debugMemory, profile, testPerturbNode) are refused with it.
  std::string device = "cpu";
  /// Empty: $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else ~/.cache/kiln.
  /// The size bound is KILN_CACHE_MAX_MB (default 2048) MiB.
  std::string cacheDir;
};

/// A loaded ONNX model. Executables are compiled per input-shape signature
/// on first use and cached (shape specialisation): every compiled kernel
/// sees static shapes, and a model with dynamic dims (a sequence axis, say)
/// runs at any length from one Model.
class Model {
public:
  static std::unique_ptr<Model> load(const std::string &path, const CompileOptions &options,
                                     std::string *error);
  static std::unique_ptr<Model> loadFromMemory(const void *data, size_t size,
                                               const std::string &baseDir,
                                               const CompileOptions &options,
                                               std::string *error);
  ~Model();

  const std::vector<TensorInfo> &inputs() const;
  const std::vector<TensorInfo> &outputs() const;

  /// Compiles the executable for these input shapes now (run() would do it
  /// on first use).
  Status prepare(const std::vector<std::vector<int64_t>> &inputShapes) const;

  /// Compiles (or finds) the executable `run` would use for these inputs:
  /// their shapes, and the values of small inputs the shapes depend on.
  Status prepare(const std::vector<const kiln_tensor *> &inputs) const;

  /// Runs the model. Safe to call from several threads at once.
  Status run(const std::vector<const kiln_tensor *> &inputs, std::vector<Tensor> &outputs) const;

  /// Runs a model whose inputs or outputs may be sequences or optionals
  /// (works for any model). The executable is specialised on each
  /// sequence's length and its elements' shapes, and on which optionals
  /// are empty, as it is on tensor shapes.
  Status run(const std::vector<ValueView> &inputs, std::vector<Value> &outputs) const;
  /// Compiles (or finds) the executable run() with these values would use.
  Status prepare(const std::vector<ValueView> &inputs) const;

  /// The compiled signature for one set of input shapes: all dims static,
  /// except -1 for the rows of an output whose number of rows is known only
  /// at run time (a NonMaxSuppression's selection); run() returns such an
  /// output with the rows it has.
  Status signatureFor(const std::vector<std::vector<int64_t>> &inputShapes,
                      std::vector<TensorInfo> &outputs) const;

  struct Stats {
    int compilations = 0;      ///< executables made, compiled or read from the cache
    int cacheHits = 0;         ///< of those, read from the on-disk cache
    double compileSeconds = 0; ///< total over all compilations
    /// device "cuda": the device time of the last run's kernels, from CUDA
    /// events (copies to and from the host excluded).
    double deviceMilliseconds = 0;
    /// CompileOptions::tune: what the last compile's tuning did ("tuned 21
    /// layers (3 from the cache) in 4.2 s: ...", then a line per layer);
    /// empty when it was not tuned or its code came from the cache.
    /// tuningSeconds: the total over all compilations.
    std::string tuning;
    double tuningSeconds = 0;
  };
  Stats stats() const;

  struct Impl;

private:
  explicit Model(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl;
};

/// What traceNonFinite found.
struct NonFiniteReport {
  bool found = false;     ///< a node made a NaN or an infinity from finite values
  std::string node;       ///< that node's name, op type and index in the graph
  std::string opType;
  int nodeIndex = -1;
  size_t valuesChecked = 0; ///< node outputs and graph outputs looked at
  /// One line each: graph inputs and initializers that hold NaN or
  /// infinities, then the node found (its output, the count and the first
  /// bad element, the shapes of its inputs).
  std::vector<std::string> lines;
};

/// kiln-run --check-finite. Compiles a copy of the model at `path` whose
/// every node output (of the main graph; not those of Loop, If and
/// sequence ops) is also a graph output, runs it on `inputs`, and finds the
/// first node, in graph order, whose float output holds a NaN or an
/// infinity while none of its inputs does. With options.debugMemory every
/// intermediate starts as NaN, so a kernel that reads memory nothing wrote
/// shows up as the node that made the NaN. The copy fuses less than the
/// model (an exposed value is not folded into its reader).
Status traceNonFinite(const std::string &path, const CompileOptions &options,
                      const std::vector<ValueView> &inputs, NonFiniteReport &report);

/// What verify found.
struct VerifyReport {
  bool outputsMatch = true; ///< the compiled outputs agree with the interpreter's
  bool found = false;       ///< a node was found where the difference starts
  std::string node, opType; ///< that node's name and op type, and its index
  int nodeIndex = -1;
  size_t valuesCompared = 0;
  /// One line per differing model output (count, worst element, both
  /// values); then the node found, with its output's worst element and the
  /// shapes of its inputs, which agree.
  std::vector<std::string> lines;
};

/// kiln-run --verify. Runs the model at `path` compiled (with `options`)
/// and through the reference interpreter (CompileOptions::interpret) on
/// `inputs` and compares their outputs: |compiled - interpreted| <= atol +
/// rtol * |interpreted|. When they differ, compiles and interprets a copy
/// whose every node output is a graph output and reports the first node, in
/// graph order, whose output differs while its inputs agree.
Status verify(const std::string &path, const CompileOptions &options,
              const std::vector<ValueView> &inputs, double atol, double rtol,
              VerifyReport &report);

/// What `kilnc --emit=` produces.
enum class EmitKind { Kiln, Linalg, LLVMIR, Assembly, Object, Bundle, PTX };

/// kilnc's options: the code generator's (CodegenOptions: triple, empty for
/// the host and nvptx64-nvidia-cuda for PTX; cpu, for PTX the GPU
/// architecture, sm_80 by default; optLevel, profile, debugMemory,
/// gpuTensorPassesOnCpu, gpu) and what to emit.
struct EmitOptions : CodegenOptions {
  EmitKind kind = EmitKind::Object;
  /// Concrete input shapes: code specialised to them. Empty entries keep
  /// the declared shape, whose unknown dims the code then takes at run time
  /// where the model's ops allow (else they must be given).
  std::vector<std::vector<int64_t>> inputShapes;
  /// The same by input name (kilnc --shape NAME=DIMS); a name that is no
  /// model input is an error.
  std::map<std::string, std::vector<int64_t>> inputShapesByName;
  /// Bundles: one specialisation per combination of values of the model's
  /// named dynamic dims (ONNX dim_param), in the order given, e.g.
  /// {{"seq", {16, 32, 64}}}; the runtime picks by the inputs' dims.
  std::vector<std::pair<std::string, std::vector<int64_t>>> dimValues;
  /// Bundles: bounds on the dims the model names (kilnc --dim seq=1..512)
  /// for the variant compiled once for every shape, which its descriptor
  /// carries (runtime_dim_bounds), its header gives (NAME_DIM_BOUNDS) and
  /// kiln_model_execute checks. --dim values must lie within them.
  DimBounds dimBounds;
  std::string entryName = "kiln_entry";
  /// Bundles: the C identifier that prefixes every exported symbol, and
  /// whether the weights go to a separate file instead of the object.
  std::string bundleName = "model";
  bool externalWeights = false;
  /// Called after each compilation stage with its name and duration, for
  /// progress output on long compiles (kilnc -v).
  std::function<void(const std::string &stage, double seconds)> progress;
  /// Reuse llvm/asm/obj/bundle outputs from the on-disk compile cache (as
  /// CompileOptions::cache; kilnc turns it on), keyed by the model's bytes
  /// and these options with the target resolved.
  bool cache = false;
  std::string cacheDir;
  /// CodegenOptions::tune: the threads the layers are timed on, as the
  /// compiled code will run (kilnc --tune-threads; 0: physical cores).
  int tuneThreads = 0;
};

/// Compiles the model at `path` to the requested form. Text forms (kiln,
/// linalg, llvm, asm) and object bytes land in `out`. Standard MLIR
/// IR-printing flags, when registered by the tool, apply to the passes.
Status emit(const std::string &path, const EmitOptions &options, std::string &out);

/// An ahead-of-time bundle: an object exporting `const kiln_model_desc
/// NAME_model` and its entry points and nothing else (`void NAME_entry(void
/// **)`, with `int64_t NAME_entry_dims(int64_t *)` when no shapes are given
/// and the model's unknown dims are taken at run time, or NAME_entry_K per
/// specialisation with EmitOptions::dimValues),
/// its C header, and with external weights the NAME.weights file
/// (kiln_model_load_weights).
struct Bundle {
  std::string object, header, weights;
};
Status emitBundle(const std::string &path, const EmitOptions &options, Bundle &out);

/// The hex digest Kiln identifies a model's bytes by (xxh3, 128 bits).
std::string modelDigest(const void *data, size_t size);

} // namespace kiln

#endif
