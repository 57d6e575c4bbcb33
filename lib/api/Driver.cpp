#include "CompileHeap.h"
#include "Driver.h"
#include "KernelTuning.h"
#include "EmitCache.h"

#include "kiln/Target/GpuTarget.h"
#include "kiln/Target/TargetEmitter.h"
#include "kiln/IR/KilnDialect.h"
#include "kiln/InvocationLog.h"
#include "kiln/Pipelines/Pipelines.h"

#include "onnx/onnx_pb.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"
#include "mlir/Transforms/Passes.h"

#include "llvm/IR/LLVMContext.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include "llvm/IR/Module.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"

using namespace mlir;

namespace kiln {

std::string version() { return KILN_VERSION_STRING; }

std::unique_ptr<MLIRContext> createCompilerContext() {
  static DialectRegistry *registry = [] {
    auto *r = new DialectRegistry;
    registerKilnDialects(*r);
    registerKilnPassesAndPipelines();
    return r;
  }();
  auto ctx = std::make_unique<MLIRContext>(*registry, MLIRContext::Threading::DISABLED);
  ctx->loadAllAvailableDialects();
  return ctx;
}

std::string describeLocation(Location loc) {
  if (auto fused = dyn_cast<FusedLoc>(loc))
    return fused.getLocations().empty() ? "" : describeLocation(fused.getLocations().front());
  if (auto name = dyn_cast<NameLoc>(loc)) {
    if (auto opType = dyn_cast<NameLoc>(name.getChildLoc())) {
      std::string file = describeLocation(opType.getChildLoc());
      // Names come from the model: escaped and cut (a name can be megabytes).
      return (file.empty() ? "" : file + ": ") + "node '" + displaySafe(name.getName().str(), 200) +
             "' (" + displaySafe(opType.getName().str(), 100) + ")";
    }
    std::string inner = describeLocation(name.getChildLoc());
    return (inner.empty() ? "" : inner + ": ") + displaySafe(name.getName().str(), 300);
  }
  if (auto file = dyn_cast<FileLineColLoc>(loc))
    return displaySafe(file.getFilename().str(), 300);
  if (auto callsite = dyn_cast<CallSiteLoc>(loc))
    return describeLocation(callsite.getCallee());
  return "";
}

DiagnosticCollector::DiagnosticCollector(MLIRContext &ctx) : ctx(ctx) {
  handlerId = ctx.getDiagEngine().registerHandler([this](Diagnostic &d) {
    if (d.getSeverity() != DiagnosticSeverity::Error)
      return success();
    std::string where = describeLocation(d.getLocation());
    if (!text.empty())
      text += "\n";
    text += (where.empty() ? "" : where + ": ") + d.str();
    return success();
  });
}

DiagnosticCollector::~DiagnosticCollector() { ctx.getDiagEngine().eraseHandler(handlerId); }

std::string DiagnosticCollector::take() {
  std::string t = std::move(text);
  text.clear();
  return t;
}

static Status compileError(DiagnosticCollector &diags, const std::string &fallback) {
  std::string msg = diags.take();
  return Status::error(KILN_COMPILE_ERROR, msg.empty() ? fallback : msg);
}

/// Whether the IR is verified after every pass rather than once after each
/// pipeline (runPipeline) and once after import (importAndOptimize).
/// Verifying after every pass cost 10-20 % of a JIT compile: a d = 256
/// GPT-2-style decoder compiled in a median of 763 ms with it and 672 ms
/// without, encoder4 175 -> 135 ms, ResNet-18 303 -> 275 ms (kiln-run
/// --no-cache, 7-9 alternating runs; the verifier walks every op and its
/// attributes after each of some 80 passes). On in builds with assertions,
/// for the GPU pipeline (whose gpu-module-to-binary translates to LLVM IR
/// inside it), and with KILN_VERIFY_EACH_PASS=1 (the lit tests and the
/// compile fuzzer set it), which names the pass that broke the IR.
static bool verifyEachPass() {
#ifndef NDEBUG
  return true;
#else
  const char *v = std::getenv("KILN_VERIFY_EACH_PASS");
  return v && *v && std::string(v) != "0";
#endif
}

static void configure(PassManager &pm) {
  pm.enableVerifier(verifyEachPass());
  // Honours --mlir-print-ir-* and friends when the tool registered them.
  (void)applyPassManagerCLOptions(pm);
  // --mlir-timing (when the tool registered it): a per-pass time report for
  // each pipeline, printed when the pipeline's pass manager goes away.
  auto timing = std::make_unique<DefaultTimingManager>();
  applyDefaultTimingManagerCLOptions(*timing);
  if (timing->isEnabled())
    pm.enableTiming(std::move(timing));
  // A pass that fails leaves its reproducer (the IR before the pipeline and
  // the pipeline) with the invocation's log, for kiln-rage to archive.
  if (InvocationLog *log = InvocationLog::current())
    pm.enableCrashReproducerGeneration(log->folder() + "/reproducer.mlir",
                                       /*genLocalReproducer=*/false);
}

/// Runs `pm` (made by configure) on `module`; without verification after
/// every pass, the result is verified once here, so that IR a pass left
/// invalid is an error before it reaches translation, not a crash there.
static LogicalResult runPipeline(PassManager &pm, Operation *module) {
  if (failed(pm.run(module)))
    return failure();
  if (!verifyEachPass() && failed(verify(module)))
    return failure();
  return success();
}

Status importAndOptimize(MLIRContext &ctx, const LoadedModel &model,
                         const std::vector<std::vector<int64_t>> &inputShapes,
                         const std::map<size_t, std::string> &inputValues,
                         OwningOpRef<ModuleOp> &module, const std::vector<int64_t> &inputLayout,
                         uint64_t maxTensorBytes, bool forGpu) {
  DiagnosticCollector diags(ctx);
  ImportOptions opts;
  opts.loopRecurrences = !forGpu;
  opts.inputLayout = inputLayout;
  opts.inputShapes = inputShapes;
  opts.inputValues = inputValues;
  module = importModel(ctx, model, opts);
  if (!module)
    return compileError(diags, "import failed");
  // The imported IR is checked before any pass runs on it (the pass
  // manager never verifies its input; with verification after every pass
  // the first pass's caught it).
  if (!verifyEachPass() && failed(verify(*module)))
    return compileError(diags, "the imported IR is invalid");
  PassManager pm(&ctx);
  configure(pm);
  buildKilnOptimizationPipeline(pm);
  if (failed(runPipeline(pm, *module)))
    return compileError(diags, "shape inference failed");
  if (forGpu)
    if (Status s = checkGpuShapes(*module); !s.ok())
      return s;
  return checkTensorSizes(*module, maxTensorBytes);
}

Status checkGpuShapes(ModuleOp module) {
  // Inputs of run-time dims are refused where PTX is made, naming the input.
  for (auto func : module.getOps<func::FuncOp>())
    for (Type t : func.getArgumentTypes())
      if (auto r = dyn_cast<RankedTensorType>(t); r && !r.hasStaticShape())
        return {};
  std::string error;
  module.walk([&](Operation *op) {
    for (mlir::Value r : op->getResults())
      if (auto t = dyn_cast<RankedTensorType>(r.getType()); t && !t.hasStaticShape()) {
        std::string where = describeLocation(op->getLoc());
        error = (where.empty() ? "" : where + ": ") +
                "a tensor whose dims are computed from data at run time; NVIDIA GPU code is "
                "generated for concrete shapes only, so they must be constant when compiling "
                "(the CPU takes such dims at run time)";
        return WalkResult::interrupt();
      }
    return WalkResult::advance();
  });
  return error.empty() ? Status() : Status::error(KILN_COMPILE_ERROR, error);
}

uint64_t tensorByteLimit(uint64_t requested) {
  if (requested)
    return requested;
  if (const char *env = std::getenv("KILN_MAX_TENSOR_BYTES")) {
    char *end = nullptr;
    unsigned long long v = std::strtoull(env, &end, 10);
    if (end && *end == 0 && v > 0)
      return v;
  }
  return kDefaultMaxTensorBytes;
}

static std::string byteCount(double bytes) {
  const char *units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (bytes >= 1024 && u < 6) {
    bytes /= 1024;
    ++u;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, u ? "%.1f %s" : "%.0f %s", bytes, units[u]);
  return buf;
}

Status checkTensorSizes(ModuleOp module, uint64_t maxTensorBytes) {
  uint64_t limit = tensorByteLimit(maxTensorBytes);
  std::string error;
  module.walk([&](Operation *op) {
    for (mlir::Value r : op->getResults()) {
      auto t = dyn_cast<RankedTensorType>(r.getType());
      if (!t || !t.hasStaticShape() || !t.getElementType().isIntOrFloat())
        continue;
      // Checked arithmetic: dims of a hostile model can overflow 64 bits.
      uint64_t bytes = std::max<uint64_t>(1, t.getElementType().getIntOrFloatBitWidth() / 8);
      bool overflow = false;
      for (int64_t d : t.getShape())
        overflow = overflow || __builtin_mul_overflow(bytes, (uint64_t)d, &bytes);
      if (!overflow && bytes <= limit)
        continue;
      std::string shape;
      for (int64_t d : t.getShape())
        shape += (shape.empty() ? "" : "x") + std::to_string(d);
      std::string where = describeLocation(op->getLoc());
      error = (where.empty() ? "" : where + ": ") + "a tensor of shape [" + shape + "] needs " +
              (overflow ? "more than 2^64 bytes" : byteCount((double)bytes)) +
              ", over the limit of " + byteCount((double)limit) +
              " per tensor (raise it with KILN_MAX_TENSOR_BYTES=N or "
              "CompileOptions::maxTensorBytes)";
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  if (!error.empty())
    return Status::error(KILN_COMPILE_ERROR, error);
  return {};
}

/// The ONNX node name an op's location carries, or "".
static std::string nodeNameOf(Location loc) {
  if (auto fused = dyn_cast<FusedLoc>(loc))
    return fused.getLocations().empty() ? "" : nodeNameOf(fused.getLocations().front());
  if (auto name = dyn_cast<NameLoc>(loc))
    if (isa<NameLoc>(name.getChildLoc()))
      return name.getName().str();
  return "";
}

Status perturbNode(ModuleOp module, const std::string &node) {
  // The node's value is what leaves it: a result of one of its ops read by
  // another node's op or returned.
  SmallVector<std::pair<OpResult, SmallVector<OpOperand *>>> leaving;
  module.walk([&](Operation *op) {
    if (op->getDialect() == nullptr || op->getName().getDialectNamespace() != "kiln" ||
        nodeNameOf(op->getLoc()) != node)
      return;
    for (OpResult r : op->getResults()) {
      auto t = dyn_cast<RankedTensorType>(r.getType());
      if (!t || !isa<FloatType>(t.getElementType()))
        continue;
      SmallVector<OpOperand *> uses;
      for (OpOperand &use : r.getUses())
        if (nodeNameOf(use.getOwner()->getLoc()) != node)
          uses.push_back(&use);
      if (!uses.empty())
        leaving.push_back({r, uses});
    }
  });
  if (leaving.empty())
    return Status::error(KILN_INVALID_ARGUMENT,
                         "no float value leaves a node named '" + node + "' to perturb");
  auto &[result, uses] = leaving.front();
  OpBuilder b(result.getOwner()->getContext());
  b.setInsertionPointAfter(result.getOwner());
  Location loc = result.getOwner()->getLoc();
  auto scalar = RankedTensorType::get({}, cast<RankedTensorType>(result.getType()).getElementType());
  mlir::Value one = ConstantOp::create(b, loc, DenseElementsAttr::get(scalar, b.getFloatAttr(scalar.getElementType(), 1.0)));
  mlir::Value bumped = AddOp::create(b, loc, result, one);
  for (OpOperand *use : uses)
    use->set(bumped);
  return {};
}

Status lower(ModuleOp module, LowerTo stage, const LoweringOptions &opts) {
  MLIRContext &ctx = *module.getContext();
  DiagnosticCollector diags(ctx);
  PassManager pm(&ctx);
  configure(pm);
  if (stage == LowerTo::Linalg)
    buildLowerToLinalgPipeline(pm, opts);
  else
    buildLowerToLLVMPipeline(pm, opts);
  if (failed(runPipeline(pm, module)))
    return compileError(diags, "lowering failed");
  return {};
}

void StageClock::done(const std::string &stage) {
  auto now = std::chrono::steady_clock::now();
  if (progress)
    progress(stage, std::chrono::duration<double>(now - last).count());
  last = now;
  CompileHeapScope::grown();
}

/// Where a value of unknown shape gets it: the first op, following operands
/// of unknown shape back, whose own operands all have known shapes (an If
/// whose branches differ, a Reshape to a computed shape); "" for an input.
static std::string originOfUnknownShape(mlir::Value v) {
  auto unknown = [](Type t) {
    auto r = dyn_cast<RankedTensorType>(t);
    return isa<TensorType>(t) && (!r || !r.hasStaticShape());
  };
  for (int steps = 0; steps < 10000; ++steps) {
    Operation *op = v.getDefiningOp();
    if (!op)
      return "";
    auto next =
        llvm::find_if(op->getOperands(), [&](mlir::Value o) { return unknown(o.getType()); });
    if (next == op->getOperands().end()) {
      std::string where = describeLocation(op->getLoc());
      if (where.empty())
        return "";
      std::string what = "; it comes from " + where;
      if (isa<scf::IfOp>(op))
        what += ", whose branches give different shapes and whose condition is known only "
                "while running (Kiln generates code for static shapes)";
      return what;
    }
    v = *next;
  }
  return "";
}

Status describeSignature(ModuleOp module, std::vector<TensorInfo> &inputs,
                         std::vector<TensorInfo> &outputs, bool runtimeDims) {
  auto func = cast<func::FuncOp>(module.getBody()->front());
  auto ret = dyn_cast<func::ReturnOp>(func.getBody().back().getTerminator());
  auto describe = [&](Type t, DictionaryAttr attrs, std::vector<TensorInfo> &list,
                      mlir::Value value) -> Status {
    auto nameAttr = attrs ? attrs.getAs<StringAttr>("kiln.name") : StringAttr();
    std::string name = nameAttr ? nameAttr.str() : std::string();
    auto rt = dyn_cast<RankedTensorType>(t);
    if (!rt || (!rt.hasStaticShape() && !runtimeDims))
      return Status::error(KILN_COMPILE_ERROR,
                           "the shape of '" + name + "' is not known after shape inference" +
                               (value ? originOfUnknownShape(value) : std::string()));
    std::vector<int64_t> dims(rt.getShape().begin(), rt.getShape().end());
    for (int64_t &d : dims)
      if (ShapedType::isDynamic(d))
        d = -1; // known only at run time
    list.push_back({std::move(name), dtypeOf(rt.getElementType()), std::move(dims)});
    return {};
  };
  inputs.clear();
  outputs.clear();
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    if (Status s = describe(func.getArgumentTypes()[i], func.getArgAttrDict(i), inputs, {});
        !s.ok())
      return s;
  for (unsigned i = 0; i < func.getNumResults(); ++i)
    if (Status s = describe(func.getResultTypes()[i], func.getResultAttrDict(i), outputs,
                            ret && i < ret.getNumOperands() ? ret.getOperand(i) : mlir::Value());
        !s.ok())
      return s;
  return {};
}

Status resolveInputShapes(const LoadedModel &model, const EmitOptions &options,
                          std::vector<std::vector<int64_t>> &shapes) {
  shapes = options.inputShapes;
  if (options.inputShapesByName.empty())
    return {};
  std::vector<const onnx::ValueInfoProto *> inputs = modelInputs(*model.proto);
  shapes.resize(inputs.size());
  for (const auto &[name, dims] : options.inputShapesByName) {
    auto it = std::find_if(inputs.begin(), inputs.end(),
                           [&](const onnx::ValueInfoProto *in) { return in->name() == name; });
    if (it == inputs.end())
      return Status::error(KILN_INVALID_ARGUMENT,
                           "a shape is given for '" + name + "', which is not a model input");
    shapes[it - inputs.begin()] = dims;
  }
  return {};
}

Status importForEmit(const LoadedModel &model, const EmitOptions &options, StageClock &clock,
                     std::unique_ptr<MLIRContext> &ctx, OwningOpRef<ModuleOp> &module) {
  std::vector<std::vector<int64_t>> shapes;
  if (Status s = resolveInputShapes(model, options, shapes); !s.ok())
    return s;
  ctx = createCompilerContext();
  bool forGpu = llvm::StringRef(options.triple).starts_with("nvptx");
  if (Status s = importAndOptimize(*ctx, model, shapes, {}, module, {}, 0, forGpu); !s.ok())
    return s;
  clock.done("import, shape inference, folding");
  return {};
}

Status checkFixedOutputs(ModuleOp module, bool rowCounts) {
  // A bare entry point has outputs of fixed shapes (kiln/runtime.h); an
  // output whose number of rows is known only at run time would come back
  // padded, with no way to tell but the bundle descriptor's row counts, and
  // a sequence output as loose tensors.
  auto counts = module->getAttrOfType<DenseI64ArrayAttr>("kiln.output_row_counts");
  if (!rowCounts && counts) {
    std::string name = "an output";
    auto func = dyn_cast<func::FuncOp>(module.getBody()->front());
    for (auto [k, c] : llvm::enumerate(counts.asArrayRef()))
      if (c >= 0 && func && k < func.getNumResults()) {
        if (auto n = func.getResultAttrOfType<StringAttr>(k, "kiln.name"))
          name = "output '" + displaySafe(n.getValue().str(), 200) + "'";
        break;
      }
    return Status::error(KILN_COMPILE_ERROR,
                         name + " has a number of rows known only at run time (from a NonZero "
                         "or NonMaxSuppression on run-time values), which only a CPU bundle "
                         "(--emit=bundle) and the JIT (kiln-run, kiln::Model) support");
  }
  if (module->hasAttr("kiln.output_layout"))
    return Status::error(KILN_COMPILE_ERROR,
                         "an output is a sequence or an optional; kilnc's objects return "
                         "tensors only: run the model through the JIT (kiln-run, kiln::Model)");
  return {};
}

Status resolveGpuTarget(EmitOptions &options) {
  bool nvptx = llvm::StringRef(options.triple).starts_with("nvptx");
  if (options.kind != EmitKind::PTX &&
      (!nvptx || options.kind == EmitKind::Kiln || options.kind == EmitKind::Linalg))
    return {};
  if (options.triple.empty())
    options.triple = "nvptx64-nvidia-cuda";
  if (!llvm::StringRef(options.triple).starts_with("nvptx64"))
    return Status::error(KILN_INVALID_ARGUMENT,
                         "--emit=ptx needs an NVIDIA GPU target (nvptx64-nvidia-cuda), not '" +
                             options.triple + "'");
  if (options.cpu.empty() || options.cpu == "host")
    options.cpu = "sm_80";
  if (!isSupportedGpuChip(options.cpu))
    return Status::error(KILN_INVALID_ARGUMENT,
                         "unknown GPU architecture '" + options.cpu +
                             "': give --mcpu=sm_NN, sm_75 or newer (e.g. sm_80, sm_90)");
  // As for the JIT's device cuda (makeImpl): these change the CPU path's
  // code only, and would otherwise be ignored in silence.
  if (options.profile || options.debugMemory || options.gpuTensorPassesOnCpu)
    return Status::error(KILN_INVALID_ARGUMENT,
                         "NVIDIA GPU targets: profiling (--profile), debug memory and the "
                         "GPU tensor passes on the CPU are CPU-only");
  return {};
}

/// The model's kernels as PTX for `chip`; the host function is left with
/// gpu.launch_func ops (buildLowerToGpuPipeline).
static Status lowerToPtx(ModuleOp module, const std::string &chip, std::string &ptx,
                         const GpuPassOptions &passes = {}) {
  // The GPU path generates code for static shapes only (issue 39 leaves it
  // compiling per shape for now): say so once, naming the input.
  for (auto func : module.getOps<func::FuncOp>())
    for (unsigned i = 0; i < func.getNumArguments(); ++i)
      if (auto t = dyn_cast<RankedTensorType>(func.getArgumentTypes()[i]);
          t && !t.hasStaticShape()) {
        auto name = func.getArgAttrOfType<StringAttr>(i, "kiln.name");
        return Status::error(KILN_COMPILE_ERROR,
                             "input '" + (name ? name.str() : std::to_string(i)) + "' has dims " +
                                 "known only at run time, and NVIDIA GPU code is generated " +
                                 "for concrete shapes only: give them with --shape " +
                                 "NAME=DxD... (the CPU takes such dims at run time)");
      }
  MLIRContext &ctx = *module.getContext();
  DiagnosticCollector diags(ctx);
  PassManager pm(&ctx);
  configure(pm);
  GpuLoweringOptions gpu;
  gpu.chip = chip;
  gpu.libdevice = findLibdevice();
  gpu.passes = passes;
  pm.enableVerifier(true); // gpu-module-to-binary translates inside the pipeline
  buildLowerToGpuPipeline(pm, gpu);
  // gpu-module-to-binary runs LLVM's pipeline (lockLlvmPipelineOptions).
  std::unique_lock<std::mutex> llvmOptions = lockLlvmPipelineOptions();
  if (failed(runPipeline(pm, module)))
    return compileError(diags, "lowering to PTX failed");
  llvmOptions.unlock();
  std::string error;
  if (!extractPtx(module, ptx, error))
    return compileError(diags, error);
  return {};
}

/// The PTX of every kernel of the model, for the GPU chip in options.cpu.
static Status emitPtx(ModuleOp module, const EmitOptions &options, StageClock &clock,
                      std::string &out) {
  Status s = lowerToPtx(module, options.cpu, out, options.gpu);
  if (s.ok())
    clock.done("lower to GPU kernels and generate PTX (" + options.cpu + ")");
  return s;
}

Status lowerForCuda(ModuleOp module, const std::string &chip, const std::string &entryName,
                    CudaHostCode &out, const GpuPassOptions &gpu) {
  if (Status s = lowerToPtx(module, chip, out.ptx, gpu); !s.ok())
    return s;
  MLIRContext &ctx = *module.getContext();
  DiagnosticCollector diags(ctx);
  PassManager pm(&ctx);
  configure(pm);
  buildGpuHostPipeline(pm, entryName);
  if (failed(runPipeline(pm, module)))
    return compileError(diags, "lowering the GPU host code failed");
  std::string error;
  if (!packGpuConstants(module, out.constants, error))
    return Status::error(KILN_INTERNAL, error);
  out.kernels.clear();
  if (auto names = module->getAttrOfType<ArrayAttr>("kiln.gpu_kernels"))
    for (Attribute name : names)
      out.kernels.push_back(cast<StringAttr>(name).str());
  // The host passes each kernel exactly the parameters its PTX declares:
  // a mismatch would read garbage on the GPU, so it is caught here, where
  // no GPU is needed.
  auto arities = module->getAttrOfType<DenseI64ArrayAttr>("kiln.gpu_kernel_arities");
  for (size_t k = 0; k < out.kernels.size(); ++k) {
    int64_t declared = ptxParameterCount(out.ptx, out.kernels[k]);
    int64_t passed = arities && k < arities.size() ? arities[k] : -1;
    if (declared != passed)
      return Status::error(KILN_INTERNAL, "internal error: the host code passes kernel '" +
                                              out.kernels[k] + "' " + std::to_string(passed) +
                                              " parameters; its PTX declares " +
                                              std::to_string(declared));
  }
  out.arities.assign(out.kernels.size(), 0);
  out.launches.assign(out.kernels.size(), {});
  auto launches = module->getAttrOfType<DenseI64ArrayAttr>("kiln.gpu_kernel_launches");
  for (size_t k = 0; k < out.kernels.size(); ++k) {
    out.arities[k] = arities[k];
    for (size_t i = 0; launches && i < 7 && k * 7 + i < (size_t)launches.size(); ++i)
      out.launches[k][i] = launches[k * 7 + i];
  }
  out.workspaceBytes = 0;
  if (auto ws = module->getAttrOfType<IntegerAttr>("kiln.workspace_size"))
    out.workspaceBytes = ws.getInt();
  return {};
}

static Status emitUncached(const LoadedModel &model, const EmitOptions &options,
                           StageClock &clock, std::string &out) {
  std::unique_ptr<MLIRContext> ctx;
  OwningOpRef<ModuleOp> module;
  if (Status s = importForEmit(model, options, clock, ctx, module); !s.ok())
    return s;
  auto print = [&](Operation *op) {
    llvm::raw_string_ostream os(out);
    op->print(os);
    os << "\n";
  };
  if (options.kind == EmitKind::Kiln) {
    print(*module);
    return {};
  }
  if (options.kind == EmitKind::Linalg) {
    LoweringOptions lowering;
    lowering.entryName = options.entryName;
    lowering.codegen = options;
    if (Status s = lower(*module, LowerTo::Linalg, lowering); !s.ok())
      return s;
    print(*module);
    return {};
  }
  if (Status s = checkFixedOutputs(*module); !s.ok())
    return s;
  if (options.kind == EmitKind::PTX)
    return emitPtx(*module, options, clock, out);
  // A CUDA target's obj/asm/llvm is the host code for this machine, which
  // launches the kernels through kiln/cuda.h, with the PTX, the kernels'
  // names and the weights as data beside the entry point.
  bool cuda = llvm::StringRef(options.triple).starts_with("nvptx");
  // Validate the target before the (long) lowering, so a typo fails fast.
  std::string error;
  // For CUDA, the host code's target: this machine.
  TargetOptions host;
  host.optLevel = options.optLevel;
  auto tm = createTargetMachine(cuda ? host : static_cast<const TargetOptions &>(options), error);
  if (!tm)
    return Status::error(KILN_INVALID_ARGUMENT, error);
  if (cuda) {
    CudaHostCode code;
    if (Status s = lowerForCuda(*module, options.cpu, options.entryName, code, options.gpu);
        !s.ok())
      return s;
    defineCudaObjectData(*module, options.entryName, code.ptx, code.kernels, code.constants);
    clock.done("lower to GPU kernels, generate PTX (" + options.cpu + ") and the host code");
  } else {
    LoweringOptions lowering;
    lowering.entryName = options.entryName;
    lowering.codegen = options;
    if (Status s = tuneForEmit(*module, lowering, *tm, options, clock); !s.ok())
      return s;
    if (Status s = lower(*module, LowerTo::LLVMDialect, lowering);
        !s.ok())
      return s;
    clock.done("lower to linalg, bufferize, lower to the LLVM dialect");
  }
  llvm::LLVMContext llvmCtx;
  auto llvmModule = translateAndOptimize(*module, llvmCtx, *tm, options.optLevel, error);
  if (!llvmModule)
    return Status::error(KILN_COMPILE_ERROR, error);
  clock.done("translate to LLVM IR and optimize (-O" + std::to_string(options.optLevel) + ")");
  if (options.kind == EmitKind::LLVMIR) {
    llvm::raw_string_ostream os(out);
    llvmModule->print(os, nullptr);
    return {};
  }
  if (!emitMachineCode(*llvmModule, *tm, options.kind == EmitKind::Assembly, out, error))
    return Status::error(KILN_COMPILE_ERROR, error);
  clock.done("generate machine code");
  return {};
}

Status emit(const std::string &path, const EmitOptions &givenOptions, std::string &out) {
  EmitOptions options = givenOptions;
  if (Status s = resolveGpuTarget(options); !s.ok())
    return s;
  if (Status s = checkTuneOptions(options); !s.ok())
    return s;
  StageClock clock(options.progress);
  EmitCache cache(path, options);
  if (cache.load({&out})) {
    clock.done("load the output from the compile cache");
    return {};
  }
  CompileHeapScope heap; // past the cache: a hit allocates little
  const LoadedModel *model = nullptr;
  if (Status s = cache.model(model); !s.ok())
    return s;
  clock.done("load and check the ONNX model");
  if (Status s = emitUncached(*model, options, clock, out); !s.ok())
    return s;
  cache.store({&out});
  return {};
}

} // namespace kiln
