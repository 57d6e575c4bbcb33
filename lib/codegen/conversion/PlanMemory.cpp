// kiln-plan-memory: a static memory plan for the model function's
// intermediates, computed at compile time, as Glow and TVM do.
//
// Every statically shaped memref.alloc in the function's top-level block
// becomes a memref.view into one workspace buffer, which the function gets
// as a new last argument (the runtime allocates it once and reuses it, see
// runtime/include/kiln/runtime.h). Offsets come from liveness: a buffer is
// live from its allocation to the last top-level op that uses it or
// anything derived from it (views, casts, addresses passed to kernels), and
// buffers whose live ranges are disjoint may share bytes. Placement is the
// greedy "largest first, lowest fitting offset" heuristic.
//
// With debug-memory the plan is off: allocations stay separate, and each is
// filled with NaN when made, so that a read of memory nobody wrote shows up
// in the outputs.
#include "kiln/Conversion/Passes.h"

#include "BufferLiveness.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"

#include <limits>
#include <map>

namespace kiln {
#define GEN_PASS_DEF_KILNPLANMEMORY
#include "kiln/Conversion/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace kiln {
namespace {

constexpr int64_t kAlignment = 64;

struct Buffer {
  memref::AllocOp alloc;
  int64_t bytes = 0, begin = 0, end = 0, offset = -1;
};

int64_t byteSize(MemRefType t) {
  int64_t bits = t.getElementTypeBitWidth();
  if (bits % 8)
    bits = 8; // i1 is stored in bytes
  return t.getNumElements() * bits / 8;
}

struct PlanMemoryPass : impl::KilnPlanMemoryBase<PlanMemoryPass> {
  using Base::Base;

  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isDeclaration() || !func.isPublic())
        continue;
      if (debugMemory)
        fillWithNaN(func);
      else if (failed(plan(func)))
        return signalPassFailure();
    }
  }

  void fillWithNaN(func::FuncOp func) {
    func.walk([](memref::AllocOp alloc) {
      auto type = alloc.getType();
      auto ft = dyn_cast<FloatType>(type.getElementType());
      if (!ft)
        return;
      OpBuilder b(alloc->getContext());
      b.setInsertionPointAfter(alloc);
      Value nan = arith::ConstantOp::create(
          b, alloc.getLoc(), b.getFloatAttr(ft, APFloat::getQNaN(ft.getFloatSemantics())));
      linalg::FillOp::create(b, alloc.getLoc(), ValueRange{nan}, ValueRange{alloc});
    });
  }

  LogicalResult plan(func::FuncOp func) {
    Block *block = &func.getBody().front();
    DenseMap<Operation *, int64_t> index;
    int64_t i = 0;
    for (Operation &op : *block)
      index[&op] = i++;

    std::vector<Buffer> buffers;
    for (Operation &op : *block) {
      auto alloc = dyn_cast<memref::AllocOp>(op);
      if (!alloc || !alloc.getType().hasStaticShape() || !alloc.getType().getLayout().isIdentity() ||
          alloc.getType().getMemorySpace() || byteSize(alloc.getType()) == 0)
        continue;
      Buffer buf;
      buf.alloc = alloc;
      buf.bytes = (byteSize(alloc.getType()) + kAlignment - 1) / kAlignment * kAlignment;
      buf.begin = index[alloc];
      buf.end = std::max(buf.begin, lastUse(alloc, block, index));
      buffers.push_back(buf);
    }

    // Largest first; each at the lowest offset that overlaps no buffer
    // already placed whose live range meets its own. The placed buffers are
    // looked up by the start of their live range: those that can meet
    // [begin, end] start in [begin - longest placed range, end], so a graph
    // of short-lived intermediates is placed in about n log n, not n^2 (a
    // chain of 50,000 MatMuls spent a second here).
    std::vector<Buffer *> order;
    for (Buffer &b : buffers)
      order.push_back(&b);
    std::stable_sort(order.begin(), order.end(),
                     [](Buffer *a, Buffer *b) { return a->bytes > b->bytes; });
    std::multimap<int64_t, Buffer *> placedByBegin;
    int64_t longest = 0, total = 0;
    for (Buffer *b : order) {
      std::vector<std::pair<int64_t, int64_t>> taken;
      for (auto it = placedByBegin.lower_bound(b->begin - longest),
                end = placedByBegin.upper_bound(b->end);
           it != end; ++it) {
        Buffer *p = it->second;
        if (p->end >= b->begin)
          taken.push_back({p->offset, p->offset + p->bytes});
      }
      llvm::sort(taken);
      int64_t offset = 0;
      for (auto [lo, hi] : taken) {
        if (offset + b->bytes <= lo)
          break;
        offset = std::max(offset, hi);
      }
      b->offset = offset;
      total = std::max(total, offset + b->bytes);
      placedByBegin.insert({b->begin, b});
      longest = std::max(longest, b->end - b->begin);
    }

    // No intermediates, no workspace argument (and workspace_size 0).
    if (total == 0)
      return success();
    auto wsType = MemRefType::get({total}, IntegerType::get(&getContext(), 8));
    if (failed(func.insertArgument(func.getNumArguments(), wsType,
                                   DictionaryAttr::get(&getContext()), func.getLoc())))
      return func.emitError("cannot add the workspace argument");
    Value workspace = func.getArgument(func.getNumArguments() - 1);
    for (Buffer &b : buffers) {
      OpBuilder builder(b.alloc);
      Value offset = arith::ConstantIndexOp::create(builder, b.alloc.getLoc(), b.offset);
      Value view = memref::ViewOp::create(builder, b.alloc.getLoc(), b.alloc.getType(), workspace,
                                          offset, ValueRange{});
      b.alloc.replaceAllUsesWith(view);
      b.alloc.erase();
    }
    // One workspace serves whichever public function runs: the largest.
    int64_t size = total;
    if (auto old = getOperation()->getAttrOfType<IntegerAttr>("kiln.workspace_size"))
      size = std::max(size, old.getInt());
    getOperation()->setAttr("kiln.workspace_size",
                            IntegerAttr::get(IntegerType::get(&getContext(), 64), size));
    return success();
  }
};

} // namespace
} // namespace kiln
