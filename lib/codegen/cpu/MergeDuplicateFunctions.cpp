// kiln-merge-duplicate-functions: one function for each set of private
// functions that are the same but for their names.
//
// Why: kiln-outline-loop-nests makes a function per top-level op, and a
// network repeats its layers, so most of those functions are copies (the
// weights are arguments): 72 functions, 15 distinct, in a 4-layer GPT-2
// decoder. LLVM optimised and compiled each copy, which is most of what a
// compile for every shape costs at a model's first call. LLVM's own
// MergeFunctions would merge them only after that work is done.
#include "kiln/Codegen/CpuPasses.h"

#include "mlir/IR/OperationSupport.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

namespace kiln {
#define GEN_PASS_DEF_KILNMERGEDUPLICATEFUNCTIONS
#include "kiln/Codegen/CpuPasses.h.inc"
} // namespace kiln

using namespace mlir;

namespace kiln {
namespace {

/// The function's attributes less its name: its type, argument attributes
/// (noalias), linkage and inlining attributes must all agree.
DictionaryAttr attributesButName(func::FuncOp fn) {
  NamedAttrList attrs(fn->getAttrDictionary());
  attrs.erase(SymbolTable::getSymbolAttrName());
  return attrs.getDictionary(fn.getContext());
}

/// Equal for functions that may be the same; the body's ops by name,
/// attributes and types, in order, locations aside.
llvm::hash_code shapeHash(func::FuncOp fn, DictionaryAttr attrs) {
  llvm::hash_code h = llvm::hash_value(attrs.getAsOpaquePointer());
  fn.getBody().walk([&](Operation *op) {
    h = llvm::hash_combine(
        h, OperationEquivalence::computeHash(op, OperationEquivalence::ignoreHashValue,
                                             OperationEquivalence::ignoreHashValue,
                                             OperationEquivalence::IgnoreLocations));
  });
  return h;
}

struct MergeDuplicateFunctionsPass
    : impl::KilnMergeDuplicateFunctionsBase<MergeDuplicateFunctionsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    struct Kept {
      func::FuncOp fn;
      DictionaryAttr attrs;
    };
    // Candidates by hash; a bucket holds the distinct functions seen.
    llvm::DenseMap<llvm::hash_code, SmallVector<Kept, 1>> seen;
    // Each duplicate's name -> the kept function's.
    llvm::DenseMap<StringAttr, FlatSymbolRefAttr> keptFor;
    for (auto fn : module.getOps<func::FuncOp>()) {
      if (!fn.isPrivate() || fn.isDeclaration())
        continue;
      DictionaryAttr attrs = attributesButName(fn);
      SmallVector<Kept, 1> &bucket = seen[shapeHash(fn, attrs)];
      auto same = llvm::find_if(bucket, [&](Kept &k) {
        return k.attrs == attrs &&
               OperationEquivalence::isRegionEquivalentTo(&k.fn.getBody(), &fn.getBody(),
                                                          OperationEquivalence::IgnoreLocations);
      });
      if (same == bucket.end())
        bucket.push_back({fn, attrs});
      else
        keptFor[fn.getSymNameAttr()] = FlatSymbolRefAttr::get(same->fn.getSymNameAttr());
    }
    if (keptFor.empty())
      return;
    // One walk over the module for every duplicate's uses (a walk per
    // duplicate was most of this pass's time on a model function of a few
    // thousand ops). Calls are redirected; a duplicate used any other way
    // stays.
    SmallVector<std::pair<func::CallOp, FlatSymbolRefAttr>> calls;
    llvm::DenseSet<StringAttr> otherwiseUsed;
    std::optional<SymbolTable::UseRange> uses =
        SymbolTable::getSymbolUses(&module.getBodyRegion());
    if (!uses)
      return; // uses it cannot see (an unknown symbol table): merge nothing
    for (const SymbolTable::SymbolUse &use : *uses) {
      StringAttr root = use.getSymbolRef().getRootReference();
      auto it = keptFor.find(root);
      if (it == keptFor.end())
        continue;
      auto call = dyn_cast<func::CallOp>(use.getUser());
      if (call && call.getCalleeAttr() == use.getSymbolRef())
        calls.push_back({call, it->second});
      else
        otherwiseUsed.insert(root);
    }
    for (auto [call, kept] : calls)
      if (!otherwiseUsed.contains(call.getCalleeAttr().getAttr()))
        call.setCalleeAttr(kept);
    for (auto fn : llvm::make_early_inc_range(module.getOps<func::FuncOp>()))
      if (keptFor.contains(fn.getSymNameAttr()) && !otherwiseUsed.contains(fn.getSymNameAttr()))
        fn.erase();
  }
};

} // namespace
} // namespace kiln
