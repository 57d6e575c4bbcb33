// Builds the descriptor and weights of an ahead-of-time bundle in LLVM IR;
// see include/kiln/Target/Bundle.h.
#include "kiln/Target/Bundle.h"
#include "kiln/Target/ConstantPool.h"

#include "kiln/runtime.h"

#include "llvm/IR/Constants.h"
#include "llvm/IR/DerivedTypes.h"
#include "llvm/IR/GlobalVariable.h"
#include "llvm/IR/Module.h"
#include "llvm/TargetParser/Triple.h"

#include <algorithm>

namespace kiln {

static std::string weightsSymbol(const std::string &name) { return name + "_weights"; }

static std::vector<BundleTensor> common(const std::vector<BundleVariant> &variants,
                                        std::vector<BundleTensor> BundleVariant::*list) {
  std::vector<BundleTensor> out = variants.front().*list;
  for (const BundleVariant &v : variants)
    for (size_t i = 0; i < out.size() && i < (v.*list).size(); ++i)
      for (size_t d = 0; d < out[i].dims.size() && d < (v.*list)[i].dims.size(); ++d)
        if (out[i].dims[d] != (v.*list)[i].dims[d])
          out[i].dims[d] = -1;
  return out;
}

std::vector<BundleTensor> BundleLayout::commonInputs() const {
  return common(variants, &BundleVariant::inputs);
}
std::vector<BundleTensor> BundleLayout::commonOutputs() const {
  return common(variants, &BundleVariant::outputs);
}
uint64_t BundleLayout::maxWorkspaceSize() const {
  uint64_t size = 0;
  for (const BundleVariant &v : variants)
    size = std::max(size, v.workspaceSize);
  return size;
}

void bindBundleWeights(llvm::Module &module, const ConstantPool &pool, const std::string &name,
                       const std::vector<std::string> &entries) {
  llvm::LLVMContext &ctx = module.getContext();
  llvm::Type *i8 = llvm::Type::getInt8Ty(ctx);
  if (pool.size) {
    auto *arrayTy = llvm::ArrayType::get(i8, pool.size);
    // Constant while the optimiser runs: the code never writes its weights
    // (defineBundleData makes external storage writable for the loader).
    auto *weights = new llvm::GlobalVariable(module, arrayTy, /*isConstant=*/true,
                                             llvm::GlobalValue::ExternalLinkage, nullptr,
                                             weightsSymbol(name));
    weights->setAlignment(llvm::Align(64));
    for (const auto &[symbol, offset] : pool.symbols) {
      llvm::GlobalVariable *gv = module.getGlobalVariable(symbol);
      if (!gv)
        continue; // folded away
      llvm::Constant *at = llvm::ConstantExpr::getInBoundsGetElementPtr(
          i8, weights, llvm::ConstantInt::get(llvm::Type::getInt64Ty(ctx), offset));
      gv->replaceAllUsesWith(at);
      gv->eraseFromParent();
    }
  }
  for (llvm::GlobalValue &gv : module.global_values())
    if (!gv.isDeclaration() &&
        std::find(entries.begin(), entries.end(), gv.getName().str()) == entries.end())
      gv.setLinkage(llvm::GlobalValue::InternalLinkage);
}

namespace {
/// Emits the constant globals the descriptor points to.
class DescriptorBuilder {
public:
  DescriptorBuilder(llvm::Module &module)
      : module(module), ctx(module.getContext()), ptr(llvm::PointerType::get(ctx, 0)),
        i32(llvm::Type::getInt32Ty(ctx)), i64(llvm::Type::getInt64Ty(ctx)),
        tensorTy(llvm::StructType::get(ctx, {ptr, i32, i32, ptr})) {}

  llvm::Constant *string(const std::string &s) {
    llvm::Constant *init = llvm::ConstantDataArray::getString(ctx, s, /*AddNull=*/true);
    return privateConstant(init, "str");
  }

  llvm::Constant *tensors(const std::vector<BundleTensor> &list, const std::string &what) {
    if (list.empty())
      return llvm::ConstantPointerNull::get(ptr);
    std::vector<llvm::Constant *> entries;
    for (const BundleTensor &t : list) {
      llvm::Constant *dims = llvm::ConstantPointerNull::get(ptr);
      if (!t.dims.empty()) {
        std::vector<uint64_t> values(t.dims.begin(), t.dims.end());
        dims = privateConstant(llvm::ConstantDataArray::get(ctx, values), "dims");
      }
      entries.push_back(llvm::ConstantStruct::get(
          tensorTy, {string(t.name), llvm::ConstantInt::get(i32, t.dtype),
                     llvm::ConstantInt::get(i32, t.dims.size()), dims}));
    }
    return privateConstant(
        llvm::ConstantArray::get(llvm::ArrayType::get(tensorTy, entries.size()), entries), what);
  }

  llvm::GlobalVariable *privateConstant(llvm::Constant *init, const std::string &name) {
    auto *gv = new llvm::GlobalVariable(module, init->getType(), /*isConstant=*/true,
                                        llvm::GlobalValue::PrivateLinkage, init,
                                        "__kiln_" + name);
    gv->setUnnamedAddr(llvm::GlobalValue::UnnamedAddr::Global);
    return gv;
  }

  llvm::Module &module;
  llvm::LLVMContext &ctx;
  llvm::PointerType *ptr;
  llvm::IntegerType *i32, *i64;
  llvm::StructType *tensorTy;
};
} // namespace

void defineBundleData(llvm::Module &module, const ConstantPool &pool, const BundleLayout &layout) {
  DescriptorBuilder b(module);
  llvm::Constant *weightsSlot = llvm::ConstantPointerNull::get(b.ptr);
  llvm::GlobalVariable *weights = module.getGlobalVariable(weightsSymbol(layout.name));
  llvm::StringRef bytes(pool.data.get(), pool.size);
  // A CUDA bundle's host code never addresses its weights (the runtime
  // uploads them), so the optimiser dropped the declaration.
  if (!weights && layout.cuda && pool.size) {
    weights = new llvm::GlobalVariable(
        module, llvm::ArrayType::get(llvm::Type::getInt8Ty(b.ctx), pool.size), true,
        llvm::GlobalValue::InternalLinkage, nullptr, weightsSymbol(layout.name));
    weights->setAlignment(llvm::Align(64));
  }
  if (weights) {
    weights->setLinkage(llvm::GlobalValue::InternalLinkage);
    if (layout.externalWeights) {
      weights->setInitializer(llvm::Constant::getNullValue(weights->getValueType()));
      weights->setConstant(false);
    } else {
      weights->setInitializer(
          llvm::ConstantDataArray::getRaw(bytes, bytes.size(), llvm::Type::getInt8Ty(b.ctx)));
    }
    // Beyond the small code model's 2 GB, x86-64 needs the large-data
    // sections (.lrodata, .lbss) and 64-bit addressing for the weights.
    llvm::Triple triple(module.getTargetTriple());
    if (triple.getArch() == llvm::Triple::x86_64 && pool.size > (64u << 10))
      weights->setCodeModel(llvm::CodeModel::Large);
  }
  if (layout.externalWeights) {
    // A slot even with no weights to load, so the program's call to
    // kiln_model_load_weights stays valid whatever the model holds.
    auto *slotTy = llvm::StructType::get(b.ctx, {b.ptr, b.i64, b.i64, b.i32});
    llvm::Constant *data = weights ? llvm::cast<llvm::Constant>(weights)
                                   : llvm::cast<llvm::Constant>(llvm::ConstantPointerNull::get(b.ptr));
    llvm::Constant *slot = llvm::ConstantStruct::get(
        slotTy, {data, llvm::ConstantInt::get(b.i64, bytes.size()),
                 llvm::ConstantInt::get(b.i64, kiln_hash64(bytes.data(), bytes.size())),
                 llvm::ConstantInt::get(b.i32, 0)});
    weightsSlot = new llvm::GlobalVariable(module, slotTy, /*isConstant=*/false,
                                           llvm::GlobalValue::InternalLinkage, slot,
                                           layout.name + "_weights_slot");
  }

  llvm::Constant *null = llvm::ConstantPointerNull::get(b.ptr);
  llvm::Constant *cuda = null;
  if (layout.cuda) {
    // kiln_cuda_kernel_desc and kiln_cuda_code (kiln/cuda.h).
    auto *dim3 = llvm::ArrayType::get(b.i32, 3);
    auto *kernelTy = llvm::StructType::get(b.ctx, {b.ptr, dim3, dim3, b.i32, b.i32});
    auto u32s = [&](const uint32_t (&v)[3]) {
      return llvm::ConstantArray::get(dim3, {llvm::ConstantInt::get(b.i32, v[0]),
                                             llvm::ConstantInt::get(b.i32, v[1]),
                                             llvm::ConstantInt::get(b.i32, v[2])});
    };
    std::vector<llvm::Constant *> kernels;
    for (const BundleCudaKernel &k : layout.cuda->kernels)
      kernels.push_back(llvm::ConstantStruct::get(
          kernelTy, {b.string(k.name), u32s(k.grid), u32s(k.block),
                     llvm::ConstantInt::get(b.i32, k.sharedBytes),
                     llvm::ConstantInt::get(b.i32, k.numParams)}));
    llvm::Constant *table =
        kernels.empty()
            ? null
            : b.privateConstant(
                  llvm::ConstantArray::get(llvm::ArrayType::get(kernelTy, kernels.size()), kernels),
                  "cuda_kernels");
    llvm::Constant *embedded =
        weights && !layout.externalWeights ? llvm::cast<llvm::Constant>(weights) : null;
    auto *codeTy = llvm::StructType::get(b.ctx, {b.i32, b.i32, b.ptr, b.ptr, b.ptr, b.i64, b.i32});
    cuda = b.privateConstant(
        llvm::ConstantStruct::get(
            codeTy, {llvm::ConstantInt::get(b.i32, layout.cuda->computeCapability),
                     llvm::ConstantInt::get(b.i32, kernels.size()), table,
                     b.string(layout.cuda->ptx), embedded,
                     llvm::ConstantInt::get(b.i64, embedded == null ? 0 : bytes.size()),
                     llvm::ConstantInt::get(b.i32, layout.cuda->archSpecific ? 1 : 0)}),
        "cuda_code");
  }

  // kiln_output_rows: {count, axis} per output, or NULL.
  auto *rowsTy = llvm::StructType::get(b.ctx, {b.i32, b.i32});
  auto outputRows = [&](const BundleVariant &v) -> llvm::Constant * {
    if (v.outputRows.empty())
      return null;
    std::vector<llvm::Constant *> entries;
    for (const BundleOutputRows &r : v.outputRows)
      entries.push_back(llvm::ConstantStruct::get(
          rowsTy, {llvm::ConstantInt::get(b.i32, r.count), llvm::ConstantInt::get(b.i32, r.axis)}));
    return b.privateConstant(
        llvm::ConstantArray::get(llvm::ArrayType::get(rowsTy, entries.size()), entries),
        "output_rows");
  };
  auto dimsOf = [&](const BundleVariant &v) -> llvm::Constant * {
    if (v.dimsFunction.empty())
      return null;
    if (llvm::Function *f = module.getFunction(v.dimsFunction))
      return f;
    return null;
  };
  // runtime_dim_bounds and runtime_dim_names, or NULL.
  auto dimBounds = [&](const BundleVariant &v) -> llvm::Constant * {
    if (v.runtimeDimBounds.empty())
      return null;
    std::vector<llvm::Constant *> values;
    for (auto [least, greatest] : v.runtimeDimBounds) {
      values.push_back(llvm::ConstantInt::get(b.i64, least));
      values.push_back(llvm::ConstantInt::get(b.i64, greatest));
    }
    return b.privateConstant(
        llvm::ConstantArray::get(llvm::ArrayType::get(b.i64, values.size()), values),
        "runtime_dim_bounds");
  };
  auto dimNames = [&](const BundleVariant &v) -> llvm::Constant * {
    if (v.runtimeDimBounds.empty())
      return null;
    std::vector<llvm::Constant *> names;
    for (const std::string &n : v.runtimeDimNames)
      names.push_back(b.string(n));
    return b.privateConstant(
        llvm::ConstantArray::get(llvm::ArrayType::get(b.ptr, names.size()), names),
        "runtime_dim_names");
  };
  // kiln_model_desc, field by field (kiln/runtime.h).
  auto *descTy =
      llvm::StructType::get(b.ctx, {b.i32, b.ptr, b.i32, b.i32, b.ptr, b.ptr, b.i64, b.ptr, b.i64,
                                    b.ptr, b.ptr, b.i32, b.ptr, b.ptr, b.ptr, b.i32, b.i32,
                                    b.ptr, b.ptr, b.ptr});
  auto descriptor = [&](const std::vector<BundleTensor> &inputs,
                        const std::vector<BundleTensor> &outputs, uint64_t workspace,
                        llvm::Constant *entry, int32_t numVariants, llvm::Constant *variants,
                        const BundleVariant &rows) {
    return llvm::ConstantStruct::get(
        descTy, {llvm::ConstantInt::get(b.i32, KILN_ABI_VERSION), b.string(layout.name),
                 llvm::ConstantInt::get(b.i32, inputs.size()),
                 llvm::ConstantInt::get(b.i32, outputs.size()), b.tensors(inputs, "inputs"),
                 b.tensors(outputs, "outputs"), llvm::ConstantInt::get(b.i64, workspace), entry,
                 llvm::ConstantInt::get(b.i64, 64), b.string(layout.modelHash), weightsSlot,
                 llvm::ConstantInt::get(b.i32, numVariants), variants, cuda, outputRows(rows),
                 llvm::ConstantInt::get(b.i32, rows.outputRows.empty() ? 0 : rows.numRowCounts),
                 // Dims known only at run time (a bundle compiled once for every
                 // shape): their count and the function that computes them.
                 llvm::ConstantInt::get(b.i32, rows.numRuntimeDims), dimsOf(rows),
                 dimBounds(rows), dimNames(rows)});
  };
  auto entryOf = [&](const BundleVariant &v) -> llvm::Constant * {
    if (llvm::Function *f = module.getFunction(v.entry))
      return f;
    return llvm::ConstantPointerNull::get(b.ptr);
  };
  llvm::Constant *desc;
  if (layout.variants.size() == 1 && !layout.anyShape) {
    const BundleVariant &v = layout.variants.front();
    desc = descriptor(v.inputs, v.outputs, v.workspaceSize, entryOf(v), 0, null, v);
  } else {
    std::vector<llvm::Constant *> variants;
    for (const BundleVariant &v : layout.variants)
      variants.push_back(
          descriptor(v.inputs, v.outputs, v.workspaceSize, entryOf(v), 0, null, v));
    llvm::Constant *array = b.privateConstant(
        llvm::ConstantArray::get(llvm::ArrayType::get(descTy, variants.size()), variants),
        "variants");
    // The runtime runs a variant's own descriptor; the top one tells callers
    // which outputs have run-time counts (the same outputs in every variant).
    // With a variant for every shape, the top one is that variant's (its
    // entry runs the shapes no specialisation fits).
    if (const auto &any = layout.anyShape)
      desc = descriptor(any->inputs, any->outputs,
                        std::max(layout.maxWorkspaceSize(), any->workspaceSize), entryOf(*any),
                        (int32_t)variants.size(), array, *any);
    else
      desc = descriptor(layout.commonInputs(), layout.commonOutputs(), layout.maxWorkspaceSize(),
                        null, (int32_t)variants.size(), array, layout.variants.front());
  }
  new llvm::GlobalVariable(module, descTy, /*isConstant=*/true, llvm::GlobalValue::ExternalLinkage,
                           desc, layout.name + "_model");
}

} // namespace kiln
