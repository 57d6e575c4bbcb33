// kiln-concat-in-place: concatenations whose parts are written straight
// into their slice of the result, and concatenations that extend one
// another sharing one buffer.
//
// A Concat lowers to a chain of tensor.insert_slice ops into a
// tensor.empty: after bufferization, one copy per part. This pass rebuilds
// each chain so that
//   * each part is inserted right after it is computed, and the op that
//     computes it (a linalg op, or a kernel call, in destination-passing
//     style) writes into an extract_slice of the chain: one-shot
//     bufferization then makes the write in place, and the insert a copy
//     onto itself that CSE and canonicalization remove;
//   * a concatenation whose parts are a leading subset of a larger one's
//     (DenseNet: every layer concatenates all earlier features) becomes an
//     extract_slice of the larger chain, so each feature map is written once
//     instead of once per later layer.
// Upstream empty-tensor elimination covers the first point only where the
// insert's destination already dominates the producer; in a chain it does
// not, since the chain is built after all its parts.
//
// Nothing here decides buffers: where a write cannot be in place (a value
// read after a later part was written over its slice), one-shot
// bufferization's analysis inserts a copy, so the rewrite is always
// correct.
#include "kiln/IR/KilnDialect.h"
#include "kiln/Conversion/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"

namespace kiln {
#define GEN_PASS_DEF_KILNCONCATINPLACE
#include "kiln/Conversion/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace kiln {
namespace {

/// A part's box in the chain: static offsets and sizes (kDynamic where a
/// run-time value gives them: the batch of a CNN compiled for every batch)
/// and the mixed form the slices are rebuilt from.
struct Part {
  Value source;
  SmallVector<int64_t> offsets, sizes;
  SmallVector<OpFoldResult> mixedOffsets, mixedSizes;
  bool operator==(const Part &o) const {
    return source == o.source && mixedOffsets == o.mixedOffsets && mixedSizes == o.mixedSizes;
  }
};

/// insert_slice ops into one tensor.empty, each into the previous result.
struct Chain {
  SmallVector<tensor::InsertSliceOp> inserts;
  RankedTensorType type;
  SmallVector<Value> dynamicSizes; // of its tensor.empty
  SmallVector<Part, 2> parts;
  Value result() { return inserts.back().getResult(); }
};

/// A run-time size read from a part (tensor.dim of it, just before its
/// insert) as the size its producer's destination was created with, which
/// exists earlier (a dim read at entry): the chain's buffer is created
/// before the first part's producer and every size must exist there.
OpFoldResult earliestSize(OpFoldResult size) {
  auto v = dyn_cast<Value>(size);
  auto dim = v ? v.getDefiningOp<tensor::DimOp>() : tensor::DimOp();
  std::optional<int64_t> index = dim ? dim.getConstantIndex() : std::nullopt;
  if (!index)
    return size;
  for (Value t = dim.getSource();;) {
    if (auto empty = t.getDefiningOp<tensor::EmptyOp>())
      return empty.getType().isDynamicDim(*index) ? OpFoldResult(empty.getDynamicSize(*index))
                                                  : size;
    auto result = dyn_cast<OpResult>(t);
    if (!result)
      return size;
    if (auto call = dyn_cast<CallKernelOp>(result.getOwner()))
      t = call.getInit();
    else if (auto dps = dyn_cast<DestinationStyleOpInterface>(result.getOwner()))
      t = dps.getTiedOpOperand(result)->get();
    else
      return size;
  }
}

std::optional<Part> partOf(tensor::InsertSliceOp op) {
  if (!op.hasUnitStride() || op.getSourceType().getRank() != op.getDestType().getRank())
    return std::nullopt;
  SmallVector<OpFoldResult> sizes = op.getMixedSizes();
  for (OpFoldResult &size : sizes)
    size = earliestSize(size);
  return Part{op.getSource(), SmallVector<int64_t>(op.getStaticOffsets()),
              SmallVector<int64_t>(op.getStaticSizes()), op.getMixedOffsets(), sizes};
}

/// Whether two parts may overlap: they do not where some dim keeps them
/// apart by static offsets and sizes (a Concat's axis; a run-time batch
/// that both span proves nothing).
bool overlap(const Part &a, const Part &b) {
  for (size_t d = 0; d < a.offsets.size(); ++d) {
    if (llvm::any_of(ArrayRef<int64_t>{a.offsets[d], a.sizes[d], b.offsets[d], b.sizes[d]},
                     ShapedType::isDynamic))
      continue;
    if (a.offsets[d] + a.sizes[d] <= b.offsets[d] || b.offsets[d] + b.sizes[d] <= a.offsets[d])
      return false;
  }
  return true;
}

/// The chain that starts with `first`, or nullopt when it is not one this
/// pass can rebuild (dynamic or overlapping parts, parts from other blocks).
std::optional<Chain> chainFrom(tensor::InsertSliceOp first) {
  Chain chain;
  chain.type = first.getDestType();
  chain.dynamicSizes = first.getDest().getDefiningOp<tensor::EmptyOp>().getDynamicSizes();
  Block *block = first->getBlock();
  for (tensor::InsertSliceOp op = first; op;) {
    std::optional<Part> part = partOf(op);
    if (!part || part->source.getParentBlock() != block)
      return std::nullopt;
    for (const Part &p : chain.parts)
      if (overlap(p, *part))
        return std::nullopt;
    chain.inserts.push_back(op);
    chain.parts.push_back(*part);
    Value r = op.getResult();
    op = r.hasOneUse() ? dyn_cast<tensor::InsertSliceOp>(*r.getUsers().begin()) : nullptr;
    if (op && op.getDest() != r)
      op = nullptr;
  }
  return chain;
}

/// `member` is `host` restricted to a leading box: the same element type,
/// and each of its parts is one of the host's.
/// A dim of run-time size must be the same value in both (a CNN's batch
/// read at entry): DenseNet's blocks under a run-time batch.
bool extends(const Chain &host, const Chain &member) {
  if (host.type.getElementType() != member.type.getElementType() ||
      host.type.getRank() != member.type.getRank())
    return false;
  for (int64_t d = 0; d < host.type.getRank(); ++d) {
    bool hostDynamic = host.type.isDynamicDim(d), memberDynamic = member.type.isDynamicDim(d);
    if (hostDynamic != memberDynamic)
      return false;
    if (hostDynamic) {
      if (host.dynamicSizes[host.type.getDynamicDimIndex(d)] !=
          member.dynamicSizes[member.type.getDynamicDimIndex(d)])
        return false;
    } else if (member.type.getDimSize(d) > host.type.getDimSize(d)) {
      return false;
    }
  }
  return llvm::all_of(member.parts,
                      [&](const Part &p) { return llvm::is_contained(host.parts, p); });
}

/// The destination operand through which `source`'s producer writes its
/// result, when it can take a slice of the chain instead of its own empty
/// tensor (directly, or under a linalg.fill that initialises it).
OpOperand *redirectableInit(Value source) {
  auto result = dyn_cast<OpResult>(source);
  if (!result)
    return nullptr;
  Operation *producer = result.getOwner();
  OpOperand *init = nullptr;
  if (auto call = dyn_cast<CallKernelOp>(producer))
    init = &call.getInitMutable();
  else if (auto dps = dyn_cast<DestinationStyleOpInterface>(producer);
           dps && isa<linalg::LinalgOp>(producer) && producer->getNumResults() == 1 &&
           dps.getNumDpsInits() == 1)
    init = dps.getDpsInitOperand(0);
  if (!init)
    return nullptr;
  if (init->get().getDefiningOp<tensor::EmptyOp>())
    return init;
  if (auto fill = init->get().getDefiningOp<linalg::FillOp>();
      fill && fill->hasOneUse() && fill.getDpsInitOperand(0)->get().getDefiningOp<tensor::EmptyOp>())
    return fill.getDpsInitOperand(0);
  return nullptr;
}

struct ConcatInPlacePass : impl::KilnConcatInPlaceBase<ConcatInPlacePass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.getBody().empty())
      return;
    Block &block = func.getBody().front();

    std::vector<Chain> chains;
    for (auto op : block.getOps<tensor::InsertSliceOp>())
      if (op.getDest().getDefiningOp<tensor::EmptyOp>())
        if (std::optional<Chain> c = chainFrom(op))
          chains.push_back(std::move(*c));
    // Largest first: a family's host is the chain that all others extend.
    // Counted over the static dims: chains of one family share their
    // run-time dims (extends).
    auto elements = [](const Chain &c) {
      int64_t n = 1;
      for (int64_t d : c.type.getShape())
        if (!ShapedType::isDynamic(d))
          n *= d;
      return n;
    };
    llvm::stable_sort(chains,
                      [&](const Chain &a, const Chain &b) { return elements(a) > elements(b); });
    std::vector<bool> done(chains.size(), false);
    for (size_t h = 0; h < chains.size(); ++h) {
      if (done[h])
        continue;
      remap(chains[h]);
      SmallVector<Chain *> members{&chains[h]};
      for (size_t m = h + 1; m < chains.size(); ++m)
        if (!done[m] && (remap(chains[m]), extends(chains[h], chains[m]))) {
          members.push_back(&chains[m]);
          done[m] = true;
        }
      rebuild(block, chains[h], members);
    }
  }

  /// Old chain results -> the values that replaced them (their ops are gone).
  DenseMap<Value, Value> replaced;

  /// A part may be the result of a chain rebuilt before (a Concat of a
  /// Concat): it refers to the value that replaced it.
  void remap(Chain &chain) {
    for (Part &part : chain.parts)
      for (auto it = replaced.find(part.source); it != replaced.end();
           it = replaced.find(part.source))
        part.source = it->second;
  }

  /// Whether `a` is computed before `b` (block arguments first).
  static bool computedBefore(Value a, Value b) {
    Operation *da = a.getDefiningOp(), *db = b.getDefiningOp();
    if (!da || !db)
      return !da && db;
    return da != db && da->isBeforeInBlock(db);
  }

  void rebuild(Block &block, Chain &host, ArrayRef<Chain *> members) {
    // Parts in the order their values are computed.
    SmallVector<size_t> order(host.parts.size());
    for (size_t i = 0; i < order.size(); ++i)
      order[i] = i;
    llvm::stable_sort(order, [&](size_t a, size_t b) {
      return computedBefore(host.parts[a].source, host.parts[b].source);
    });

    // The buffer is needed from the first part on (the memory plan counts
    // its life from here), not from the start of the function; if that
    // part's producer starts from a linalg.fill, from the fill on.
    OpBuilder b(&block, block.begin());
    Value first = host.parts[order.front()].source;
    if (Operation *def = first.getDefiningOp()) {
      b.setInsertionPoint(def);
      if (OpOperand *init = redirectableInit(first);
          init && init->getOwner()->isBeforeInBlock(def))
        b.setInsertionPoint(init->getOwner());
    }
    // Run-time sizes and offsets must exist where the chain now starts (the
    // dims read at entry do); otherwise the chain stays as it was. A chain
    // whose first part is a function argument starts after them.
    SmallVector<Value> needed(host.dynamicSizes.begin(), host.dynamicSizes.end());
    for (const Part &part : host.parts)
      for (ArrayRef<OpFoldResult> mixed : {ArrayRef(part.mixedOffsets), ArrayRef(part.mixedSizes)})
        for (OpFoldResult r : mixed)
          if (auto v = dyn_cast<Value>(r))
            needed.push_back(v);
    if (!first.getDefiningOp())
      for (Value v : needed)
        if (Operation *def = v.getDefiningOp(); def && def->getBlock() == &block &&
                                                (b.getInsertionPoint() == block.end() ||
                                                 !def->isBeforeInBlock(&*b.getInsertionPoint())))
          b.setInsertionPointAfter(def);
    auto available = [&](Value v) {
      Operation *def = v.getDefiningOp();
      if (!def)
        return v.getParentBlock() == &block;
      return def->getBlock() == &block &&
             (b.getInsertionPoint() == block.end() || def->isBeforeInBlock(&*b.getInsertionPoint()));
    };
    if (!llvm::all_of(needed, available))
      return;
    // Each member's value is cut from the chain where its own last insert
    // was: the chain must have started by then (it moves later when the
    // first part is a function argument and the sizes are computed late).
    auto startsBy = [&](Operation *op) {
      return b.getInsertionPoint() != block.end() &&
             (&*b.getInsertionPoint() == op || b.getInsertionPoint()->isBeforeInBlock(op));
    };
    for (Chain *member : members)
      if (!startsBy(member->inserts.back()))
        return;
    Location loc = host.inserts.front().getLoc();
    Value cur = tensor::EmptyOp::create(b, loc, host.type.getShape(), host.type.getElementType(),
                                        host.dynamicSizes);

    DenseMap<size_t, Value> after; // part index -> the chain with it inserted
    DenseSet<Operation *> redirected;
    for (size_t i : order) {
      const Part &part = host.parts[i];
      const SmallVector<OpFoldResult> &offsets = part.mixedOffsets, &sizes = part.mixedSizes;
      SmallVector<OpFoldResult> strides(part.sizes.size(), b.getIndexAttr(1));
      Operation *producer = part.source.getDefiningOp();
      Operation *last = cur.getDefiningOp();
      // The producer writes into its slice of the chain as built so far.
      if (producer && last->isBeforeInBlock(producer) && !redirected.contains(producer)) {
        // The slice goes where the destination is first written (the
        // producer, or its linalg.fill): the chain so far must exist there.
        // (and the slice's type is the destination's: static and run-time
        // dims agree).
        if (OpOperand *init = redirectableInit(part.source);
            init && last->isBeforeInBlock(init->getOwner()) &&
            init->get().getType() ==
                tensor::ExtractSliceOp::inferResultType(cast<RankedTensorType>(cur.getType()),
                                                        sizes)) {
          OpBuilder pb(init->getOwner());
          Value slice = tensor::ExtractSliceOp::create(
              pb, loc, cast<RankedTensorType>(init->get().getType()), cur, offsets, sizes,
              strides);
          init->set(slice);
          redirected.insert(producer);
        }
      }
      if (producer && last->isBeforeInBlock(producer))
        b.setInsertionPointAfter(producer);
      else
        b.setInsertionPointAfter(last);
      cur = tensor::InsertSliceOp::create(b, loc, part.source, cur, offsets, sizes, strides);
      after[i] = cur;
    }

    // Each member's value: the chain once its last part is in, cut to its
    // box, where its own last insert was.
    for (Chain *member : members) {
      size_t lastPart = 0;
      int64_t lastRank = -1;
      for (const Part &p : member->parts) {
        size_t i = llvm::find(host.parts, p) - host.parts.begin();
        int64_t rank = llvm::find(order, i) - order.begin();
        if (rank > lastRank) {
          lastRank = rank;
          lastPart = i;
        }
      }
      Value value = after[lastPart];
      if (member->type != host.type) {
        OpBuilder mb(member->inserts.back());
        int64_t rank = member->type.getRank();
        SmallVector<OpFoldResult> sizes;
        for (int64_t d = 0; d < rank; ++d)
          sizes.push_back(member->type.isDynamicDim(d)
                              ? OpFoldResult(member->dynamicSizes[member->type.getDynamicDimIndex(d)])
                              : OpFoldResult(mb.getIndexAttr(member->type.getDimSize(d))));
        value = tensor::ExtractSliceOp::create(
            mb, member->inserts.back().getLoc(), member->type, value,
            SmallVector<OpFoldResult>(rank, mb.getIndexAttr(0)), sizes,
            SmallVector<OpFoldResult>(rank, mb.getIndexAttr(1)));
      }
      member->result().replaceAllUsesWith(value);
      replaced[member->result()] = value;
      for (auto op : llvm::reverse(member->inserts))
        op->erase();
    }
  }
};

} // namespace
} // namespace kiln
