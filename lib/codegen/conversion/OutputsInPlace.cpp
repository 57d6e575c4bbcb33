// kiln-outputs-in-place: a model output computed into a buffer of its own
// is computed into the caller's output buffer instead.
//
// buffer-results-to-out-params turns `return %alloc` into writes to the
// output argument, but when the returned value is a reshape of the buffer
// (a matrix product done as a 1x1 NHWC convolution and reshaped back, a
// Flatten, a Reshape at the end of a model) it leaves an alloc, the kernel
// writing into it, and a `memref.copy` of the whole result into the output:
// one more pass over the output and a workspace slot (mlp_gelu: a 256 KB
// copy, 1.6 % of its run time). Here the alloc becomes a view of the output
// argument itself and the copy goes.
//
// Outputs of run-time size too (code compiled for every shape): a decoder's
// `present` caches are concatenated into buffers of their own and copied
// into the outputs at the end, 8 copies of the whole cache a step (d = 768,
// batch 4, past 64: 0.57 ms of a 7.6 ms step). A copy needs source and
// target of one shape, and the source views the whole alloc, so the two
// hold as many elements even where neither count is known here.
#include "kiln/Conversion/Passes.h"

#include "BufferLiveness.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

namespace kiln {
#define GEN_PASS_DEF_KILNOUTPUTSINPLACE
#include "kiln/Conversion/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace kiln {
namespace {

/// Row-major and whole, of static or run-time size.
bool isDense(MemRefType t) {
  return t.getLayout().isIdentity() && !t.getMemorySpace() && t.getRank() > 0;
}

/// The alloc that `v` views in whole: through reshapes and casts, which
/// keep every element and the row-major order. Null for anything else (a
/// subview is only a part of its buffer).
memref::AllocOp wholeBufferAlloc(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    if (auto alloc = dyn_cast<memref::AllocOp>(def))
      return isDense(alloc.getType()) ? alloc : memref::AllocOp();
    if (auto r = dyn_cast<memref::ReshapeOp>(def))
      v = r.getSource();
    else if (auto e = dyn_cast<memref::ExpandShapeOp>(def))
      v = e.getSrc();
    else if (auto c = dyn_cast<memref::CollapseShapeOp>(def))
      v = c.getSrc();
    else if (auto c = dyn_cast<memref::CastOp>(def))
      v = c.getSource();
    else
      return {};
    if (!isDense(cast<MemRefType>(v.getType())))
      return {};
  }
  return {};
}

/// A view of the dense buffer `from` with the type `to` and the sizes
/// `toSizes` (same element type and count, both identity layouts, both
/// static or both of run-time size): collapse to one dimension, then
/// expand. `from` itself where it is known to have those sizes: the same
/// static type, or `sameShape` (the caller knows the run-time sizes agree);
/// two types of run-time size may be alike and their sizes not (a buffer
/// [x, y] reshaped to [y, x] and copied out).
Value viewAs(OpBuilder &b, Location loc, Value from, MemRefType to,
             ArrayRef<OpFoldResult> toSizes, bool sameShape) {
  auto fromType = cast<MemRefType>(from.getType());
  if (fromType == to && (to.hasStaticShape() || sameShape))
    return from;
  Value flat = from;
  if (fromType.getRank() != 1) {
    ReassociationIndices all;
    for (int64_t d = 0; d < fromType.getRank(); ++d)
      all.push_back(d);
    flat = memref::CollapseShapeOp::create(b, loc, from, ArrayRef<ReassociationIndices>{all});
  }
  if (to.getRank() == 1)
    return flat;
  ReassociationIndices all;
  for (int64_t d = 0; d < to.getRank(); ++d)
    all.push_back(d);
  return memref::ExpandShapeOp::create(b, loc, to, flat, ArrayRef<ReassociationIndices>{all},
                                       toSizes);
}

struct OutputsInPlacePass : impl::KilnOutputsInPlaceBase<OutputsInPlacePass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isDeclaration())
      return;
    Block *block = &func.getBody().front();
    DenseMap<Operation *, int64_t> index;
    int64_t i = 0;
    for (Operation &op : *block)
      index[&op] = i++;

    SmallVector<memref::CopyOp> copies;
    for (Operation &op : *block)
      if (auto copy = dyn_cast<memref::CopyOp>(op))
        copies.push_back(copy);
    for (memref::CopyOp copy : copies) {
      auto out = dyn_cast<BlockArgument>(copy.getTarget());
      if (!out || out.getOwner() != block || !out.hasOneUse())
        continue;
      auto outType = dyn_cast<MemRefType>(out.getType());
      if (!outType || !isDense(outType))
        continue;
      memref::AllocOp alloc = wholeBufferAlloc(copy.getSource());
      if (!alloc || alloc->getBlock() != block ||
          alloc.getType().getElementType() != outType.getElementType())
        continue;
      // Static counts must agree (else the copy is not a whole one); run-time
      // ones do, by the copy's own shapes (above). A static buffer copied
      // into an output of run-time size (or the reverse) is left alone: one
      // type cannot view the other without a cast.
      if (alloc.getType().hasStaticShape() != outType.hasStaticShape() ||
          (outType.hasStaticShape() &&
           alloc.getType().getNumElements() != outType.getNumElements()))
        continue;
      // Nothing may touch the buffer after the copy: from then on the
      // output would change, where before only the dead buffer did.
      if (lastUse(alloc, block, index, copy) >= index.lookup(copy))
        continue;
      OpBuilder b(alloc);
      // Copied straight from the buffer, the output has its shape.
      Value view = viewAs(b, alloc.getLoc(), out, alloc.getType(), alloc.getMixedSizes(),
                          copy.getSource() == alloc.getResult());
      alloc.replaceAllUsesWith(view);
      alloc.erase();
      copy.erase();
    }
  }
};

} // namespace
} // namespace kiln
