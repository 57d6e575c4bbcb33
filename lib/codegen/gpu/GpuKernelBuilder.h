// What the GPU path's hand-built kernels (kiln-gpu-tile-contractions,
// kiln-gpu-block-reductions) share: reading a linalg.generic's operands at
// loop indices computed from a flattened one, and the CPU emulation's
// "every thread, one after another" loops.
#ifndef KILN_CODEGEN_GPUKERNELBUILDER_H
#define KILN_CODEGEN_GPUKERNELBUILDER_H

#include "kiln/Conversion/BufferRoots.h"

#include "mlir/Dialect/Affine/Utils.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Utils/Utils.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <numeric>

namespace kiln::codegen {

inline mlir::Value indexConstant(mlir::OpBuilder &b, mlir::Location loc, int64_t v) {
  return mlir::arith::ConstantIndexOp::create(b, loc, v);
}

/// Sets `iv[d]` for the loop dims `group` (outermost first) from their
/// row-major flattened index `flat`, given the loops' extents (nothing for
/// an empty group: a reduction to one value has no output dims).
inline void delinearizeLoops(mlir::OpBuilder &b, mlir::Location loc, mlir::Value flat,
                             llvm::ArrayRef<unsigned> group, llvm::ArrayRef<int64_t> ranges,
                             llvm::SmallVectorImpl<mlir::Value> &iv) {
  if (group.empty())
    return;
  for (unsigned d : llvm::reverse(group.drop_front())) {
    mlir::Value extent = indexConstant(b, loc, ranges[d]);
    iv[d] = mlir::arith::RemUIOp::create(b, loc, flat, extent);
    flat = mlir::arith::DivUIOp::create(b, loc, flat, extent);
  }
  iv[group.front()] = flat;
}

/// The static loop ranges of a generic that a hand-built kernel can take:
/// one init, static memref operands whose element types satisfy
/// `elementOk`, an output map that is a permutation of exactly the
/// parallel dims, and no input that may be the output's memory (blocks
/// read the inputs while others write the output). None otherwise.
inline std::optional<llvm::SmallVector<int64_t>>
kernelLoopRanges(mlir::linalg::GenericOp op, llvm::function_ref<bool(mlir::Type)> elementOk) {
  if (op.getNumDpsInits() != 1 || !op.hasPureBufferSemantics())
    return std::nullopt;
  for (mlir::OpOperand &x : op->getOpOperands()) {
    auto type = llvm::dyn_cast<mlir::MemRefType>(x.get().getType());
    if (!type || !type.hasStaticShape() || !elementOk(type.getElementType()))
      return std::nullopt;
  }
  llvm::SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  if (llvm::any_of(ranges, mlir::ShapedType::isDynamic))
    return std::nullopt;
  mlir::AffineMap out = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
  if (!out.isProjectedPermutation())
    return std::nullopt;
  auto iterators = op.getIteratorTypesArray();
  for (unsigned d = 0; d < ranges.size(); ++d)
    if (mlir::linalg::isParallelIterator(iterators[d]) != out.isFunctionOfDim(d))
      return std::nullopt;
  mlir::Value outRoot = rootBuffer(op.getDpsInitOperand(0)->get());
  if (!isKnownRoot(outRoot) ||
      llvm::any_of(op.getDpsInputOperands(), [&](mlir::OpOperand *in) {
        mlir::Value root = rootBuffer(in->get());
        return root == outRoot || !isKnownRoot(root);
      }))
    return std::nullopt;
  return ranges;
}

/// The indices at which `op` reads or writes `operand` for loop indices
/// `iv` (its indexing map, expanded to arith).
inline llvm::SmallVector<mlir::Value> operandIndices(mlir::OpBuilder &b, mlir::Location loc,
                                                     mlir::linalg::GenericOp op,
                                                     mlir::OpOperand *operand,
                                                     llvm::ArrayRef<mlir::Value> iv) {
  mlir::AffineMap map = op.getMatchingIndexingMap(operand);
  llvm::SmallVector<mlir::Value> idx;
  for (mlir::AffineExpr e : map.getResults()) {
    if (auto dim = llvm::dyn_cast<mlir::AffineDimExpr>(e))
      idx.push_back(iv[dim.getPosition()]);
    else
      idx.push_back(mlir::affine::expandAffineExpr(b, loc, e, iv, mlir::ValueRange{}));
  }
  return idx;
}

/// What `op`'s init holds before it when that is one scalar, and the op
/// right before `op` that puts it there: a linalg.fill of the init, or a
/// copy into the init from a buffer whose only writer is a linalg.fill
/// (bufferization fills one buffer and copies it into each reduction's
/// init). A kernel that writes every output element once takes it over:
/// it stores `value` (+) its result, and that fill or copy kernel is not
/// launched (eraseInitProducer).
struct InitFill {
  mlir::Value value;
  mlir::Operation *producer = nullptr;
  explicit operator bool() const { return producer != nullptr; }
};

inline InitFill initFill(mlir::linalg::GenericOp op) {
  mlir::Value init = op.getDpsInitOperand(0)->get();
  mlir::Operation *prev = op->getPrevNode();
  if (auto fill = llvm::dyn_cast_or_null<mlir::linalg::FillOp>(prev))
    if (fill.hasPureBufferSemantics() && fill.getDpsInitOperand(0)->get() == init)
      return {fill.getInputs()[0], fill};
  mlir::Value source;
  if (auto copy = llvm::dyn_cast_or_null<mlir::memref::CopyOp>(prev);
      copy && copy.getTarget() == init)
    source = copy.getSource();
  if (!source || !llvm::isa_and_nonnull<mlir::memref::ViewOp, mlir::memref::AllocOp>(
                     source.getDefiningOp()))
    return {};
  // The source's only writer before the copy is one fill; its other users
  // before the copy only read it (copies from it, linalg ops that take it
  // as an input). After the copy anything goes (the last reduction often
  // takes the filled buffer itself as its init). No other buffer can write
  // the source's bytes in between: kiln-plan-memory never lets buffers
  // whose live ranges overlap share bytes, and the fill and the copy are
  // both within the source's live range.
  mlir::linalg::FillOp fill;
  mlir::Block *block = op->getBlock();
  for (mlir::Operation *user : source.getUsers()) {
    mlir::Operation *here = block->findAncestorOpInBlock(*user);
    if (!here)
      return {};
    if (here == prev || prev->isBeforeInBlock(here))
      continue;
    if (auto f = llvm::dyn_cast<mlir::linalg::FillOp>(user)) {
      if (fill || f.getDpsInitOperand(0)->get() != source || f->getBlock() != op->getBlock() ||
          !f->isBeforeInBlock(prev))
        return {};
      fill = f;
    } else if (auto c = llvm::dyn_cast<mlir::memref::CopyOp>(user)) {
      if (c.getTarget() == source)
        return {};
    } else if (auto l = llvm::dyn_cast<mlir::linalg::LinalgOp>(user)) {
      if (llvm::is_contained(l.getDpsInits(), source))
        return {};
    } else {
      return {};
    }
  }
  if (!fill)
    return {};
  return {fill.getInputs()[0], prev};
}

/// Erases the fill or copy that a kernel took over, and a fill left with
/// no reader.
inline void eraseInitProducer(const InitFill &taken) {
  mlir::Value source;
  if (auto copy = llvm::dyn_cast<mlir::memref::CopyOp>(taken.producer))
    source = copy.getSource();
  taken.producer->erase();
  if (source && source.hasOneUse())
    if (auto fill = llvm::dyn_cast<mlir::linalg::FillOp>(*source.user_begin()))
      fill->erase();
}

/// Replaces `op` by the kernel `build` emits right before it, then drops
/// the fill or copy that the kernel took over (after `op`, its last
/// reader). What every hand-built kernel pass does once it has matched.
inline void replaceWithKernel(mlir::linalg::GenericOp op, const InitFill &taken,
                              llvm::function_ref<void(mlir::OpBuilder &)> build) {
  mlir::OpBuilder b(op);
  build(b);
  op.erase();
  if (taken)
    eraseInitProducer(taken);
}

/// for (i = 0; i < n; ++i) fn(i): the CPU emulation's sequential blocks
/// and threads.
inline void emulationLoop(mlir::OpBuilder &b, mlir::Location loc, int64_t n,
                          llvm::function_ref<void(mlir::OpBuilder &, mlir::Value)> fn) {
  mlir::scf::ForOp::create(b, loc, indexConstant(b, loc, 0), indexConstant(b, loc, n),
                           indexConstant(b, loc, 1), mlir::ValueRange{},
                           [&](mlir::OpBuilder &lb, mlir::Location, mlir::Value i,
                               mlir::ValueRange) {
                             fn(lb, i);
                             mlir::scf::YieldOp::create(lb, loc);
                           });
}

/// What the buffers' first bytes are known to be aligned to: a buffer's
/// root (rootBuffer) is an argument (an output: 64 bytes, the
/// entry point's ABI, which kiln_cuda_model_run checks; an input: only its
/// element size, callers may pass any pointer), a workspace view (gcd(shift,
/// 64)), a global (`globals`, or
/// its own alignment attribute) or an allocation (its attribute).
struct BufferAlignment {
  llvm::DenseSet<mlir::Value> writtenArgs;
  int64_t globals = 0;

  BufferAlignment(mlir::func::FuncOp func, int64_t globals) : globals(globals) {
    func.walk([&](mlir::MemoryEffectOpInterface op) {
      llvm::SmallVector<mlir::MemoryEffects::EffectInstance> effects;
      op.getEffects(effects);
      for (auto &e : effects)
        if (llvm::isa<mlir::MemoryEffects::Write>(e.getEffect()) && e.getValue())
          if (auto arg = llvm::dyn_cast<mlir::BlockArgument>(rootBuffer(e.getValue())))
            writtenArgs.insert(arg);
    });
  }

  /// In bytes; `elementBytes` when nothing more is known.
  int64_t of(mlir::Value mem, int64_t elementBytes) const {
    mlir::Value root = rootBuffer(mem);
    int64_t known = 0;
    if (auto arg = llvm::dyn_cast<mlir::BlockArgument>(root)) {
      known = writtenArgs.contains(arg) ? kOutputAlignment : 0;
    } else if (auto view = root.getDefiningOp<mlir::memref::ViewOp>()) {
      // The planned workspace (an argument: 64 bytes by the ABI).
      llvm::APInt shift;
      if (mlir::matchPattern(view.getByteShift(), mlir::m_ConstantInt(&shift)))
        known = std::gcd(shift.getSExtValue(), llvm::isa<mlir::BlockArgument>(view.getSource())
                                                   ? kWorkspaceAlignment
                                                   : of(view.getSource(), 1));
    } else if (auto get = root.getDefiningOp<mlir::memref::GetGlobalOp>()) {
      known = globals;
      if (!known)
        if (auto global = mlir::SymbolTable::lookupNearestSymbolFrom<mlir::memref::GlobalOp>(
                get, get.getNameAttr()))
          known = global.getAlignment().value_or(0);
    } else if (auto alloc = root.getDefiningOp<mlir::memref::AllocOp>()) {
      known = alloc.getAlignment().value_or(0);
    }
    return std::max(known, elementBytes);
  }

  static constexpr int64_t kOutputAlignment = 64;
  static constexpr int64_t kWorkspaceAlignment = 64;
};

} // namespace kiln::codegen

#endif // KILN_CODEGEN_GPUKERNELBUILDER_H
