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
// greedy "largest first, lowest fitting offset" heuristic. Intermediates
// of run-time size are planned by liveness too, in one block per run
// (planRunTimeSized).
//
// With debug-memory the plan is off: allocations stay separate, and each is
// filled with NaN when made, so that a read of memory nobody wrote shows up
// in the outputs.
#include "kiln/Conversion/Passes.h"

#include "BufferLiveness.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"

#include <functional>
#include <limits>
#include <map>
#include <numeric>

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

/// Bytes per element as buffers lay them out (i1 in a byte, index as i64),
/// or 0 for an element type the plan leaves alone.
int64_t elementBytes(Type t) {
  if (t.isIndex())
    return 8;
  if (!t.isIntOrFloat())
    return 0;
  return std::max<int64_t>(1, (t.getIntOrFloatBitWidth() + 7) / 8);
}

int64_t byteSize(MemRefType t) { return t.getNumElements() * elementBytes(t.getElementType()); }

/// Places `buffers` (their bytes and live ranges set): largest first, each
/// at the lowest offset that overlaps no buffer already placed whose live
/// range meets its own. The placed buffers are looked up by the start of
/// their live range: those that can meet [begin, end] start in [begin -
/// longest placed range, end], so a graph of short-lived intermediates is
/// placed in about n log n, not n^2 (a chain of 50,000 MatMuls spent a
/// second here). Returns the bytes the placement spans.
int64_t placeLargestFirst(std::vector<Buffer> &buffers) {
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
  return total;
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

  /// Buffers of run-time size in the top-level block, by liveness too, in
  /// one block allocated where the first of them was (the runtime's
  /// allocator recycles it across runs, kiln/runtime.h). Without this, each
  /// had its own allocation, freed at the function's end: every
  /// intermediate of a run was live at once (encoder4 at a run-time length
  /// held all 41 of its buffers to the end of the run).
  ///
  /// Sizes are constants times products of run-time dims: buffers with
  /// the same product are placed together as the static plan places its
  /// buffers (see the groups below), and the groups are laid end to end;
  /// offsets and the block's size are computed once where the block is
  /// allocated (with the pure arithmetic on dims that sizes them moved up
  /// there). A buffer whose dims come from data read at run time keeps its
  /// own allocation.
  void planRunTimeSized(Block *block, const DenseMap<Operation *, int64_t> &index) {
    SmallVector<memref::AllocOp> candidates;
    for (Operation &op : *block)
      if (auto alloc = dyn_cast<memref::AllocOp>(op))
        if (!alloc.getType().hasStaticShape() && alloc.getType().getLayout().isIdentity() &&
            !alloc.getType().getMemorySpace() && alloc.getSymbolOperands().empty())
          candidates.push_back(alloc);
    if (candidates.size() < 2)
      return;
    Operation *at = candidates.front();
    int64_t atIndex = index.lookup(at);
    // A size computed later from values known at `at` (an affine.apply of
    // the batch, as ViT's batch x 197 rows) is computed there instead:
    // pure ops on available values move up, operands first.
    DenseSet<Operation *> hoisted;
    std::function<bool(Value)> availableAt = [&](Value v) -> bool {
      if (auto arg = dyn_cast<BlockArgument>(v))
        return arg.getOwner() == block;
      Operation *def = v.getDefiningOp();
      if (def->getBlock() != block)
        return false;
      if (index.lookup(def) < atIndex || hoisted.contains(def))
        return true;
      if (def->getNumRegions() || !isMemoryEffectFree(def) ||
          !llvm::all_of(def->getOperands(), availableAt))
        return false;
      def->moveBefore(at);
      hoisted.insert(def);
      return true;
    };

    // Groups of buffers whose sizes are a constant times the same product
    // of run-time values (a CNN's [batch, h, w, c] intermediates: batch
    // times h * w * c; a transformer's [seq, 256] and [seq, 1024]: seq
    // times 1 KB and 4 KB). Within a group, sizes compare as their
    // constants do, so the group is placed as the static plan is (largest
    // first, lowest fitting offset, in units of the constants), and every
    // offset is a constant times the product. Slots of equal sizes only
    // (the plan before) laid each layer's size of a CNN end to end: with a
    // dynamic batch, MobileNet-V3-Small's block was the sum of its
    // intermediates, and its layers read colder memory than the static
    // plan's (1.08-1.15x the specialised code).
    struct Group {
      SmallVector<Value> dims;
      std::vector<Buffer> buffers; // bytes: the constant factor
    };
    SmallVector<Group> groups;
    for (memref::AllocOp alloc : candidates) {
      if (!llvm::all_of(alloc.getDynamicSizes(), availableAt))
        continue;
      MemRefType type = alloc.getType();
      int64_t staticBytes = elementBytes(type.getElementType());
      if (!staticBytes)
        continue;
      for (int64_t d : type.getShape())
        if (!ShapedType::isDynamic(d))
          staticBytes *= d;
      SmallVector<Value> dims(alloc.getDynamicSizes());
      llvm::sort(dims, [](Value a, Value b) {
        return a.getAsOpaquePointer() < b.getAsOpaquePointer();
      });
      size_t g = 0;
      while (g < groups.size() && groups[g].dims != dims)
        ++g;
      if (g == groups.size())
        groups.push_back({dims, {}});
      Buffer buf;
      buf.alloc = alloc;
      buf.bytes = staticBytes; // times the group's product (rounded, below)
      buf.begin = index.lookup(alloc);
      buf.end = std::max(buf.begin, lastUse(alloc, block, index));
      groups[g].buffers.push_back(buf);
    }
    size_t planned = 0;
    for (Group &g : groups)
      planned += g.buffers.size();
    if (planned < 2)
      return;

    OpBuilder b(at);
    Location loc = at->getLoc();
    auto constant = [&](int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); };
    Value total = constant(0);
    SmallVector<Value> bases, products;
    for (Group &group : groups) {
      int64_t extent = placeLargestFirst(group.buffers);
      Value product = constant(1);
      for (Value d : group.dims)
        product = arith::MulIOp::create(b, loc, product, d);
      // Every offset is a sum of factors, so a multiple of their gcd g:
      // the product rounded up to a multiple of 64 / gcd(g, 64) makes each
      // offset times it a multiple of 64 (rounding each factor to 64
      // instead gave a [n] float buffer 64 n bytes).
      int64_t g = 0;
      for (const Buffer &m : group.buffers)
        g = std::gcd(g, m.bytes);
      int64_t step = kAlignment / std::gcd(g, kAlignment);
      if (step > 1)
        product = arith::MulIOp::create(
            b, loc,
            arith::DivUIOp::create(b, loc,
                                   arith::AddIOp::create(b, loc, product, constant(step - 1)),
                                   constant(step)),
            constant(step));
      bases.push_back(total);
      products.push_back(product);
      total = arith::AddIOp::create(b, loc, total,
                                    arith::MulIOp::create(b, loc, constant(extent), product));
    }
    auto blockType = MemRefType::get({ShapedType::kDynamic}, b.getI8Type());
    Value storage = memref::AllocOp::create(b, loc, blockType, ValueRange{total},
                                            b.getI64IntegerAttr(kAlignment));
    for (auto [g, group] : llvm::enumerate(groups))
      for (Buffer &m : group.buffers) {
        b.setInsertionPoint(m.alloc);
        Value offset = arith::AddIOp::create(
            b, m.alloc.getLoc(), bases[g],
            arith::MulIOp::create(b, m.alloc.getLoc(),
                                  arith::ConstantIndexOp::create(b, m.alloc.getLoc(), m.offset),
                                  products[g]));
        Value view = memref::ViewOp::create(b, m.alloc.getLoc(), m.alloc.getType(), storage,
                                            offset, m.alloc.getDynamicSizes());
        m.alloc.replaceAllUsesWith(view);
        m.alloc.erase();
      }
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

    int64_t total = placeLargestFirst(buffers);

    planRunTimeSized(block, index);

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
