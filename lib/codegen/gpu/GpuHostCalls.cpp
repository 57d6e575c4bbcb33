// kiln-gpu-host-calls: the host side of a CUDA model calls Kiln's runtime
// (kiln/cuda.h) to launch kernels, and reads its weights from one device
// buffer.
//
// Why not upstream's route: gpu-to-llvm's launches become calls to MLIR's
// `mgpu*` wrappers at translation time, which link libcuda directly with
// unversioned entry points and load the module from a global constructor
// (no error can come back from there). Here the runtime resolves every
// kernel once when the model is loaded and reports each failed launch as a
// status naming the kernel.
#include "kiln/Codegen/GpuPasses.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/DataLayoutInterfaces.h"

namespace kiln {
#define GEN_PASS_DEF_KILNGPUHOSTCALLS
#include "kiln/Codegen/GpuPasses.h.inc"
} // namespace kiln

using namespace mlir;

namespace kiln {
namespace {

struct GpuHostCallsPass : impl::KilnGpuHostCallsBase<GpuHostCallsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    auto ptr = LLVM::LLVMPointerType::get(ctx);
    auto i64 = IntegerType::get(ctx, 64);

    SmallVector<LLVM::LLVMFuncOp> bodies;
    for (auto fn : module.getOps<LLVM::LLVMFuncOp>())
      if (!fn.isExternal())
        bodies.push_back(fn);
    if (bodies.size() > 1) {
      bodies[1].emitError("the GPU host code is in more than one function");
      return signalPassFailure();
    }
    if (bodies.empty())
      return;
    LLVM::LLVMFuncOp host = bodies.front();

    OpBuilder b(ctx);
    b.setInsertionPointToEnd(module.getBody());
    auto launchType = LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx),
                                                  {i64, i64, i64, i64, i64, i64, i64, i64, ptr});
    auto launchFn = module.lookupSymbol<LLVM::LLVMFuncOp>("kiln_cuda_launch_kernel");
    if (!launchFn)
      launchFn = LLVM::LLVMFuncOp::create(b, module.getLoc(), "kiln_cuda_launch_kernel",
                                          launchType);

    if (failed(lowerConstants(module, host)) || failed(lowerLaunches(module, host, launchFn)))
      return signalPassFailure();
    // The driver has read the PTX out of the binary already.
    for (auto binary : llvm::to_vector(module.getOps<gpu::BinaryOp>()))
      binary.erase();
    module->removeAttr("gpu.container_module");
  }

  /// Constant globals the host addresses -> offsets into a weights argument.
  LogicalResult lowerConstants(ModuleOp module, LLVM::LLVMFuncOp host) {
    MLIRContext *ctx = &getContext();
    auto ptr = LLVM::LLVMPointerType::get(ctx);
    auto i8 = IntegerType::get(ctx, 8);
    DataLayout layout(module);
    llvm::DenseMap<LLVM::GlobalOp, int64_t> offsets;
    int64_t size = 0;
    SmallVector<LLVM::AddressOfOp> uses;
    SymbolTableCollection symbols;
    WalkResult walk = host.walk([&](LLVM::AddressOfOp addr) {
      auto global = addr.getGlobal(symbols);
      if (!global)
        return WalkResult::advance(); // a function's address
      if (!global.getConstant() || !global.getInitializerRegion().empty() ||
          !global.getValueAttr()) {
        addr.emitError("the GPU host code addresses '")
            << global.getSymName() << "', which is not a constant with a plain value";
        return WalkResult::interrupt();
      }
      if (!offsets.count(global)) {
        size = llvm::alignTo(size, kGpuWeightAlignment);
        offsets[global] = size;
        size += (int64_t)layout.getTypeSize(global.getGlobalType());
      }
      uses.push_back(addr);
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();
    if (uses.empty())
      return success();
    // By hand: FunctionOpInterface's insertArgument refuses llvm.func.
    SmallVector<Type> params(host.getFunctionType().getParams());
    params.push_back(ptr);
    host.setFunctionType(LLVM::LLVMFunctionType::get(host.getFunctionType().getReturnType(),
                                                     params));
    if (ArrayAttr argAttrs = host.getArgAttrsAttr()) {
      SmallVector<Attribute> attrs(argAttrs.getValue());
      attrs.push_back(DictionaryAttr::get(ctx));
      host.setArgAttrsAttr(ArrayAttr::get(ctx, attrs));
    }
    Value weights = host.getBody().front().addArgument(ptr, host.getLoc());
    IRRewriter rw(ctx);
    for (LLVM::AddressOfOp addr : uses) {
      auto global = addr.getGlobal(symbols);
      rw.setInsertionPoint(addr);
      rw.replaceOpWithNewOp<LLVM::GEPOp>(addr, ptr, i8, weights,
                                         ArrayRef<LLVM::GEPArg>{offsets[global]});
    }
    for (auto [global, offset] : offsets)
      global->setAttr("kiln.gpu_constant_offset", rw.getI64IntegerAttr(offset));
    module->setAttr("kiln.gpu_constants_size", rw.getI64IntegerAttr(size));
    return success();
  }

  LogicalResult lowerLaunches(ModuleOp module, LLVM::LLVMFuncOp host,
                              LLVM::LLVMFuncOp launchFn) {
    MLIRContext *ctx = &getContext();
    auto ptr = LLVM::LLVMPointerType::get(ctx);
    auto i64 = IntegerType::get(ctx, 64);
    SmallVector<Attribute> kernelNames;
    SmallVector<int64_t> arities;
    // Per kernel: grid x, y, z, block x, y, z and dynamic shared bytes, for
    // a bundle's descriptor; 0 where the host code computes one per run.
    SmallVector<int64_t> launchDims;
    llvm::StringMap<int64_t> kernelIndex;
    SmallVector<gpu::LaunchFuncOp> launches;
    host.walk([&](gpu::LaunchFuncOp launch) { launches.push_back(launch); });
    IRRewriter rw(ctx);
    // Parameter slots live in the entry block's frame, in launch order: the
    // host code has no loops, but LLVM only promotes entry-block allocas.
    OpBuilder frame = OpBuilder::atBlockBegin(&host.getBody().front());
    Value one = LLVM::ConstantOp::create(frame, host.getLoc(), i64, frame.getI64IntegerAttr(1));
    for (gpu::LaunchFuncOp launch : launches) {
      Location loc = launch.getLoc();
      if (launch.getAsyncToken() || !launch.getAsyncDependencies().empty() ||
          launch.getAsyncObject() || launch.hasClusterSize())
        return launch.emitError("asynchronous or clustered launches are not supported");
      StringRef name = launch.getKernelName().getValue();
      auto [it, fresh] = kernelIndex.try_emplace(name, (int64_t)kernelNames.size());
      if (fresh) {
        kernelNames.push_back(StringAttr::get(ctx, name));
        arities.push_back(launch.getKernelOperands().size());
      } else if (arities[it->second] != (int64_t)launch.getKernelOperands().size()) {
        return launch.emitError("kernel '") << name << "' is launched with "
                                            << launch.getKernelOperands().size()
                                            << " parameters here and "
                                            << arities[it->second] << " before";
      }

      ValueRange operands = launch.getKernelOperands();
      auto arrayType = LLVM::LLVMArrayType::get(ptr, std::max<size_t>(operands.size(), 1));
      Value array = LLVM::AllocaOp::create(frame, loc, ptr, arrayType, one);
      SmallVector<Value> slots;
      for (Value v : operands)
        slots.push_back(LLVM::AllocaOp::create(frame, loc, ptr, v.getType(), one));

      rw.setInsertionPoint(launch);
      for (auto [i, v] : llvm::enumerate(operands)) {
        LLVM::StoreOp::create(rw, loc, v, slots[i]);
        Value at = LLVM::GEPOp::create(rw, loc, ptr, arrayType, array,
                                       ArrayRef<LLVM::GEPArg>{0, (int32_t)i});
        LLVM::StoreOp::create(rw, loc, slots[i], at);
      }
      auto asI64 = [&](Value v) -> Value {
        unsigned width = v.getType().getIntOrFloatBitWidth();
        if (width == 64)
          return v;
        return width < 64 ? (Value)LLVM::ZExtOp::create(rw, loc, i64, v)
                          : (Value)LLVM::TruncOp::create(rw, loc, i64, v);
      };
      gpu::KernelDim3 grid = launch.getGridSizeOperandValues();
      gpu::KernelDim3 block = launch.getBlockSizeOperandValues();
      Value sharedSize = launch.getDynamicSharedMemorySize();
      SmallVector<Value> dims = {grid.x, grid.y, grid.z, block.x, block.y, block.z, sharedSize};
      if (fresh)
        launchDims.append(dims.size(), -1);
      for (auto [i, v] : llvm::enumerate(dims)) {
        APInt value;
        int64_t known = !v ? 0 : matchPattern(v, m_ConstantInt(&value)) ? value.getSExtValue() : 0;
        int64_t &slot = launchDims[it->second * dims.size() + i];
        slot = slot == -1 || slot == known ? known : 0;
      }
      Value shared = launch.getDynamicSharedMemorySize()
                         ? asI64(launch.getDynamicSharedMemorySize())
                         : (Value)LLVM::ConstantOp::create(rw, loc, i64, rw.getI64IntegerAttr(0));
      Value index = LLVM::ConstantOp::create(rw, loc, i64, rw.getI64IntegerAttr(it->second));
      LLVM::CallOp::create(rw, loc, launchFn,
                           ValueRange{index, asI64(grid.x), asI64(grid.y), asI64(grid.z),
                                      asI64(block.x), asI64(block.y), asI64(block.z), shared,
                                      array});
      rw.eraseOp(launch);
    }
    module->setAttr("kiln.gpu_kernels", ArrayAttr::get(ctx, kernelNames));
    // For the driver to check against the PTX's parameter lists.
    module->setAttr("kiln.gpu_kernel_arities", DenseI64ArrayAttr::get(ctx, arities));
    module->setAttr("kiln.gpu_kernel_launches", DenseI64ArrayAttr::get(ctx, launchDims));
    return success();
  }
};

} // namespace
} // namespace kiln
