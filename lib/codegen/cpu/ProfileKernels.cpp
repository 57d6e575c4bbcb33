// kiln-profile-kernels: brackets each kernel call of the model with
// kiln_profile_begin / kiln_profile_end (runtime/include/kiln/profile.h).
// See Passes.td for the shape of the result.
//
// Why on the LLVM dialect: only after kiln-parallelize-calls is each
// kernel exactly one call in the model's body (a kiln_parallel_for for a
// split loop nest), so one bracket measures the whole kernel, and the
// thread pool attributes the per-thread slices to it.
#include "kiln/Support/DisplaySafe.h"
#include "kiln/Codegen/CpuPasses.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

#include "llvm/ADT/StringExtras.h"

namespace kiln {
#define GEN_PASS_DEF_KILNPROFILEKERNELS
#include "kiln/Codegen/CpuPasses.h.inc"
} // namespace kiln

using namespace mlir;

namespace kiln {
namespace {

constexpr const char *kBegin = "kiln_profile_begin";
constexpr const char *kEnd = "kiln_profile_end";

/// "node (Op)" for each ONNX node in `loc`: the importer names an op's
/// location after its node, wrapping a location named after the op type;
/// fused kernels carry a FusedLoc of their nodes.
void collectNodes(Location loc, SmallVectorImpl<std::string> &out) {
  if (auto name = dyn_cast<NameLoc>(loc)) {
    // Model-supplied names end up in traces and terminals: escaped, cut.
    std::string node = kiln::displaySafe(name.getName().str(), 200);
    if (auto inner = dyn_cast<NameLoc>(name.getChildLoc()))
      node += " (" + kiln::displaySafe(inner.getName().str(), 100) + ")";
    if (!llvm::is_contained(out, node))
      out.push_back(node);
    return;
  }
  if (auto fused = dyn_cast<FusedLoc>(loc)) {
    for (Location l : fused.getLocations())
      collectNodes(l, out);
    return;
  }
  if (auto site = dyn_cast<CallSiteLoc>(loc))
    collectNodes(site.getCallee(), out);
}

/// What the call runs: the callee, or for kiln_parallel_for the task.
std::string kernelName(Operation *op) {
  auto call = dyn_cast<LLVM::CallOp>(op);
  if (!call)
    return op->getName().getStringRef().str();
  StringRef callee = call.getCallee().value_or("");
  if (callee == "kiln_parallel_for" && call.getArgOperands().size() == 4)
    if (auto fn = call.getArgOperands()[2].getDefiningOp<LLVM::AddressOfOp>())
      return fn.getGlobalName().str();
  return callee.str();
}

bool isKernel(Operation *op) {
  if (isa<LLVM::MemcpyOp, LLVM::MemmoveOp, LLVM::MemsetOp>(op))
    return true;
  auto call = dyn_cast<LLVM::CallOp>(op);
  if (!call || !call.getCallee())
    return false;
  StringRef callee = *call.getCallee();
  // Allocation is not a kernel; the hooks themselves are not either.
  return !callee.starts_with("kiln_profile_") && callee != "malloc" && callee != "free" &&
         callee != "aligned_alloc" && callee != "posix_memalign";
}

struct ProfileKernelsPass : impl::KilnProfileKernelsBase<ProfileKernelsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<Operation *> sites;
    for (auto fn : module.getOps<LLVM::LLVMFuncOp>()) {
      if (fn.isExternal() || fn.getLinkage() != LLVM::Linkage::External)
        continue;
      fn.walk([&](Operation *op) {
        if (isKernel(op))
          sites.push_back(op);
      });
    }
    if (sites.empty())
      return;
    MLIRContext *ctx = module.getContext();
    auto ptr = LLVM::LLVMPointerType::get(ctx);
    auto i64 = IntegerType::get(ctx, 64);
    auto voidTy = LLVM::LLVMVoidType::get(ctx);
    OpBuilder top(module.getBodyRegion());
    top.setInsertionPointToStart(module.getBody());
    if (!module.lookupSymbol(kBegin))
      LLVM::LLVMFuncOp::create(top, module.getLoc(), kBegin,
                               LLVM::LLVMFunctionType::get(i64, {ptr}));
    if (!module.lookupSymbol(kEnd))
      LLVM::LLVMFuncOp::create(top, module.getLoc(), kEnd,
                               LLVM::LLVMFunctionType::get(voidTy, {ptr, ptr, i64, i64}));

    // One global per distinct string.
    llvm::StringMap<std::string> globals;
    auto stringAddress = [&](OpBuilder &b, Location loc, StringRef value) -> Value {
      std::string &sym = globals[value];
      if (sym.empty()) {
        sym = "kiln_profile_str_" + std::to_string(globals.size() - 1);
        OpBuilder g(module.getBodyRegion());
        g.setInsertionPointToStart(module.getBody());
        auto type = LLVM::LLVMArrayType::get(IntegerType::get(ctx, 8), value.size() + 1);
        LLVM::GlobalOp::create(g, loc, type, /*isConstant=*/true, LLVM::Linkage::Private, sym,
                               g.getStringAttr(value.str() + '\0'));
      }
      return LLVM::AddressOfOp::create(b, loc, ptr, sym);
    };

    for (Operation *op : sites) {
      Location loc = op->getLoc();
      SmallVector<std::string> nodes;
      collectNodes(loc, nodes);
      std::string kernel = kernelName(op);
      std::string name = nodes.empty() ? kernel : llvm::join(nodes, " + ");
      int64_t flops = 0;
      if (auto attr = op->getAttrOfType<IntegerAttr>("kiln.flops"))
        flops = attr.getInt();
      op->removeAttr("kiln.flops");

      OpBuilder b(op);
      Value nameAddr = stringAddress(b, loc, name);
      Value t0 = LLVM::CallOp::create(b, loc, TypeRange{i64}, kBegin, ValueRange{nameAddr})
                     .getResult();
      b.setInsertionPointAfter(op);
      Value kernelAddr = stringAddress(b, loc, kernel);
      Value f = LLVM::ConstantOp::create(b, loc, i64, b.getI64IntegerAttr(flops));
      LLVM::CallOp::create(b, loc, TypeRange{}, kEnd, ValueRange{nameAddr, kernelAddr, f, t0});
    }
  }
};

} // namespace
} // namespace kiln
