// kiln-gpu-vectorize-elementwise: an elementwise linalg.generic (every loop
// parallel) as an scf.parallel whose threads each compute W consecutive
// elements with 128-bit (W x element) vector loads and stores.
//
// Why: one thread per element issues one 32-bit load per input and one
// store per output; a 16-byte access moves four times the bytes per
// instruction, so a memory-bound chain (bias + ReLU, a residual add, a
// cast, a concat's copies) keeps more bytes in flight per thread and
// issues a quarter of the address arithmetic. This is the issue's
// "vectorised loads where aligned".
//
// The vector runs along G, the longest run of the output's innermost dims
// that every operand either reads as its own innermost dims, in the same
// order and contiguously in memory (loaded as a vector from the operand
// with G collapsed to one dim), or does not read at all (one scalar load,
// broadcast: a per-channel bias, a scalar). An operand that reads only
// part of G, or G out of order (a transpose), shortens G; if no G is left,
// the op keeps kiln-gpu-loops' one thread per element.
//
// Where aligned: a vector access is W * element-size bytes, W the largest
// power of two with W * bits <= 128 over the vector operands that divides
// G's element count. Each operand's accesses carry the alignment they
// have: the largest power of two dividing W, its static offset and its
// strides outside G (in elements), capped by what its buffer's start is
// known to be aligned to (codegen::BufferAlignment: planned buffers 64
// bytes, weights 256, outputs 64 by the ABI, model inputs only their
// element size). Where that is the full W * size, NVPTX emits
// ld/st.global.v4 (v2); elsewhere it splits the access. At least one
// operand must be fully aligned, or a smaller W is tried.
// Elements of fewer than 8 bits (i1) are only ever read as broadcast
// scalars: a vector of i1 is bit-packed in LLVM, the buffer is not.
//
// The body is cloned with each op's results widened to vectors of W; only
// ops that map elementwise onto vectors (arith, math), constants and
// linalg.index of a dim outside G qualify. The result is plain scf and
// vector IR, so the CPU runs exactly what the GPU does (kiln-run
// --gpu-tensor-passes).
#include "kiln/Codegen/GpuPasses.h"

#include "GpuKernelBuilder.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"

#include <numeric>

namespace kiln {
#define GEN_PASS_DEF_KILNGPUVECTORIZEELEMENTWISE
#include "kiln/Codegen/GpuPasses.h.inc"
} // namespace kiln

using namespace mlir;

namespace kiln {
namespace {

constexpr int64_t kVectorBits = 128;

struct ElementwisePlan {
  SmallVector<int64_t> ranges;
  /// G: the loop dims flattened into the vector's dim, outermost first.
  SmallVector<unsigned> group;
  /// Per operand (inputs, then inits): read or written as vectors along G.
  SmallVector<bool> vector;
  /// Per vector operand: the alignment of its accesses, in elements (a
  /// power of two dividing `width`).
  SmallVector<int64_t> aligned;
  int64_t width = 0;
};

/// Whether a memref's elements can be read W at a time as a vector.
bool vectorElement(Type t) {
  return (isa<FloatType>(t) || isa<IntegerType>(t)) && t.getIntOrFloatBitWidth() >= 8 &&
         llvm::isPowerOf2_32(t.getIntOrFloatBitWidth()) && t.getIntOrFloatBitWidth() <= 64;
}

/// Whether `map`, an operand's indexing map, reads the loop dims `group` as
/// its last results, in order and nowhere else; `std::nullopt` when it
/// reads some of them otherwise (G must shrink), false when it reads none.
std::optional<bool> readsAlong(AffineMap map, ArrayRef<unsigned> group) {
  unsigned rank = map.getNumResults();
  bool any = llvm::any_of(group, [&](unsigned d) { return map.isFunctionOfDim(d); });
  if (!any)
    return false;
  if (rank < group.size())
    return std::nullopt;
  for (unsigned r = 0; r < rank; ++r) {
    AffineExpr e = map.getResult(r);
    if (r < rank - group.size()) {
      if (llvm::any_of(group, [&](unsigned d) { return e.isFunctionOfDim(d); }))
        return std::nullopt;
      continue;
    }
    auto dim = dyn_cast<AffineDimExpr>(e);
    if (!dim || dim.getPosition() != group[r - (rank - group.size())])
      return std::nullopt;
  }
  return true;
}

/// The largest A (a power of two, at most `maxWidth`) such that every
/// maxWidth-element step along `type`'s last `groupRank` dims starts at a
/// multiple of A elements from the buffer's start; 0 if those dims are not
/// contiguous.
int64_t alignedWidth(MemRefType type, unsigned groupRank, int64_t maxWidth) {
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(type.getStridesAndOffset(strides, offset)) || ShapedType::isDynamic(offset) ||
      llvm::any_of(strides, ShapedType::isDynamic))
    return 0;
  ArrayRef<int64_t> shape = type.getShape();
  unsigned rank = type.getRank();
  if (strides[rank - 1] != 1)
    return 0;
  for (unsigned r = rank - groupRank; r + 1 < rank; ++r)
    if (strides[r] != strides[r + 1] * shape[r + 1])
      return 0;
  int64_t common = offset;
  for (unsigned r = 0; r < rank - groupRank; ++r)
    common = std::gcd(common, strides[r]);
  int64_t width = maxWidth;
  while (width > 1 && common % width != 0)
    width /= 2;
  return width;
}

/// Whether the body can be cloned with its values widened to vectors.
bool vectorizableBody(linalg::GenericOp op, ArrayRef<unsigned> group) {
  for (Operation &inner : op.getBody()->without_terminator()) {
    if (auto index = dyn_cast<linalg::IndexOp>(inner)) {
      if (llvm::is_contained(group, index.getDim()))
        return false;
      continue;
    }
    Attribute value;
    if (matchPattern(&inner, m_Constant(&value))) {
      if (!isa<IntegerAttr, FloatAttr>(value))
        return false; // (a splat of it is built; ub.poison has none)
    } else if (!OpTrait::hasElementwiseMappableTraits(&inner)) {
      return false;
    }
    if (inner.getNumRegions() != 0 ||
        llvm::any_of(inner.getResultTypes(),
                     [](Type t) { return !VectorType::isValidElementType(t); }))
      return false;
  }
  return true;
}

std::optional<ElementwisePlan> planElementwise(linalg::GenericOp op,
                                               const codegen::BufferAlignment &buffers) {
  if (op.getNumLoops() == 0 || op.getNumDpsInits() == 0 || op.getNumReductionLoops() != 0 || !op.hasPureBufferSemantics())
    return std::nullopt;
  ElementwisePlan plan;
  plan.ranges = op.getStaticLoopRanges();
  if (llvm::any_of(plan.ranges, ShapedType::isDynamic))
    return std::nullopt;
  for (OpOperand &x : op->getOpOperands()) {
    auto type = dyn_cast<MemRefType>(x.get().getType());
    if (type ? !type.hasStaticShape() : isa<ShapedType>(x.get().getType()) || op.isDpsInit(&x))
      return std::nullopt;
  }
  AffineMap out = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
  if (!out.isPermutation())
    return std::nullopt;
  unsigned rank = out.getNumResults();
  // From the longest G (every output dim) down to the innermost alone.
  for (unsigned first = 0; first < rank; ++first) {
    SmallVector<unsigned> group;
    for (unsigned r = first; r < rank; ++r)
      group.push_back(out.getDimPosition(r));
    int64_t elements = 1;
    for (unsigned d : group)
      elements *= plan.ranges[d];
    int64_t maxBits = 0;
    SmallVector<bool> vector;
    bool ok = true;
    for (OpOperand &x : op->getOpOperands()) {
      std::optional<bool> along =
          isa<MemRefType>(x.get().getType())
              ? readsAlong(op.getMatchingIndexingMap(&x), group)
              : std::optional<bool>(false); // a scalar operand (a fill's value)
      bool isInit = op.isDpsInit(&x);
      if (!along || (isInit && !*along)) {
        ok = false;
        break;
      }
      vector.push_back(*along);
      if (*along) {
        Type elem = cast<MemRefType>(x.get().getType()).getElementType();
        if (!vectorElement(elem)) {
          ok = false;
          break;
        }
        maxBits = std::max<int64_t>(maxBits, elem.getIntOrFloatBitWidth());
      }
    }
    if (!ok || !vectorizableBody(op, group))
      continue;
    // An operand whose W-element steps are not W-aligned (a copy into a
    // padded buffer's interior, at an odd offset) is accessed with the
    // alignment it has: NVPTX splits those accesses, the others stay
    // 16-byte ones. Unless none is W-aligned: then a smaller W may be (a
    // slice at an even offset), and at none the one thread per element of
    // kiln-gpu-loops is no worse.
    for (int64_t width = kVectorBits / maxBits; width >= 2; width /= 2) {
      if (elements % width != 0)
        continue;
      SmallVector<int64_t> aligned;
      bool anyFull = false;
      for (auto [x, along] : llvm::zip(op->getOpOperands(), vector)) {
        int64_t a = width;
        if (along) {
          auto type = cast<MemRefType>(x.get().getType());
          int64_t bytes = type.getElementTypeBitWidth() / 8;
          a = alignedWidth(type, group.size(), width);
          while (a > 1 && a * bytes > buffers.of(x.get(), bytes))
            a /= 2;
        }
        if (a == 0) {
          ok = false;
          break;
        }
        anyFull |= along && a == width;
        aligned.push_back(a);
      }
      if (!ok)
        break;
      if (!anyFull)
        continue;
      plan.group = std::move(group);
      plan.vector = std::move(vector);
      plan.aligned = std::move(aligned);
      plan.width = width;
      return plan;
    }
  }
  return std::nullopt;
}

/// `mem` with its last `groupRank` dims collapsed into one.
Value collapseGroup(OpBuilder &b, Location loc, Value mem, unsigned groupRank) {
  auto type = cast<MemRefType>(mem.getType());
  if (groupRank == 1)
    return mem;
  SmallVector<ReassociationIndices> reassociation;
  unsigned rank = type.getRank();
  for (unsigned r = 0; r < rank - groupRank; ++r)
    reassociation.push_back({int64_t(r)});
  ReassociationIndices last;
  for (unsigned r = rank - groupRank; r < rank; ++r)
    last.push_back(r);
  reassociation.push_back(last);
  return memref::CollapseShapeOp::create(b, loc, mem, reassociation);
}

void vectorize(RewriterBase &rw, linalg::GenericOp op, const ElementwisePlan &plan) {
  Location loc = op.getLoc();
  rw.setInsertionPoint(op);
  AffineMap out = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
  unsigned outer = out.getNumResults() - plan.group.size();
  int64_t elements = 1;
  for (unsigned d : plan.group)
    elements *= plan.ranges[d];
  // Loops: the output's dims before G, in its order, then G / W.
  SmallVector<Value> lbs, ubs, steps;
  Value zero = codegen::indexConstant(rw, loc, 0), one = codegen::indexConstant(rw, loc, 1);
  for (unsigned r = 0; r <= outer; ++r) {
    int64_t extent =
        r < outer ? plan.ranges[out.getDimPosition(r)] : elements / plan.width;
    lbs.push_back(zero);
    ubs.push_back(codegen::indexConstant(rw, loc, extent));
    steps.push_back(one);
  }
  auto par = scf::ParallelOp::create(rw, loc, lbs, ubs, steps);
  OpBuilder b = OpBuilder::atBlockBegin(par.getBody());
  SmallVector<Value> iv(op.getNumLoops(), Value());
  for (unsigned r = 0; r < outer; ++r)
    iv[out.getDimPosition(r)] = par.getInductionVars()[r];
  Value flat = arith::MulIOp::create(b, loc, par.getInductionVars()[outer],
                                     codegen::indexConstant(b, loc, plan.width));
  // G's dims are read only through `flat` (readsAlong); give them a value
  // anyway so that index expansion never meets a null one.
  for (unsigned d : plan.group)
    iv[d] = flat;

  auto widen = [&](Type t) { return VectorType::get({plan.width}, t); };
  auto access = [&](OpOperand &x, Value &mem, SmallVector<Value> &idx) {
    AffineMap map = op.getMatchingIndexingMap(&x);
    unsigned keep = map.getNumResults() - plan.group.size();
    mem = collapseGroup(b, loc, x.get(), plan.group.size());
    for (unsigned r = 0; r < keep; ++r)
      idx.push_back(affine::expandAffineExpr(b, loc, map.getResult(r), iv, ValueRange{}));
    idx.push_back(flat);
  };
  auto alignment = [&](unsigned operand, Type elem) {
    return llvm::MaybeAlign(plan.aligned[operand] * elem.getIntOrFloatBitWidth() / 8);
  };

  IRMapping mapped;
  Block *body = op.getBody();
  for (auto [i, x] : llvm::enumerate(op->getOpOperands())) {
    BlockArgument arg = body->getArgument(i);
    if (arg.use_empty())
      continue;
    if (!plan.vector[i]) {
      Value scalar = x.get();
      if (isa<MemRefType>(scalar.getType()))
        scalar = memref::LoadOp::create(b, loc, scalar,
                                        codegen::operandIndices(b, loc, op, &x, iv));
      mapped.map(arg, vector::BroadcastOp::create(b, loc, widen(arg.getType()), scalar));
      continue;
    }
    Value mem;
    SmallVector<Value> idx;
    access(x, mem, idx);
    mapped.map(arg, vector::LoadOp::create(b, loc, widen(arg.getType()), mem, idx,
                                           /*nontemporal=*/false, alignment(i, arg.getType())));
  }
  // A value from outside the body, or a constant: the same in every lane.
  auto lanes = [&](Value v) -> Value {
    if (Value m = mapped.lookupOrNull(v))
      return m;
    Value splat = vector::BroadcastOp::create(b, loc, widen(v.getType()), v);
    mapped.map(v, splat);
    return splat;
  };
  for (Operation &inner : body->without_terminator()) {
    if (auto index = dyn_cast<linalg::IndexOp>(inner)) {
      mapped.map(index.getResult(),
                 vector::BroadcastOp::create(b, loc, widen(index.getType()), iv[index.getDim()]));
      continue;
    }
    Attribute value;
    if (matchPattern(&inner, m_Constant(&value))) {
      auto vecType = widen(inner.getResult(0).getType());
      mapped.map(inner.getResult(0),
                 arith::ConstantOp::create(b, loc, vecType,
                                           DenseElementsAttr::get(vecType, value)));
      continue;
    }
    for (Value v : inner.getOperands())
      lanes(v);
    Operation *wide = b.clone(inner, mapped);
    for (OpResult r : wide->getResults())
      r.setType(widen(r.getType()));
  }
  auto yield = cast<linalg::YieldOp>(body->getTerminator());
  for (auto [k, x] : llvm::enumerate(op.getDpsInitsMutable())) {
    Value mem;
    SmallVector<Value> idx;
    access(x, mem, idx);
    Value v = lanes(yield.getOperand(k));
    vector::StoreOp::create(b, loc, v, mem, idx, /*nontemporal=*/false,
                            alignment(x.getOperandNumber(), getElementTypeOrSelf(v.getType())));
  }
  rw.eraseOp(op);
}

/// Vectorizes `named` (a linalg.map, fill or copy) through its generic
/// form; leaves it as it is if that does not qualify. Whether it did.
bool vectorizeNamed(RewriterBase &rw, linalg::LinalgOp named, const codegen::BufferAlignment &buffers) {
  rw.setInsertionPoint(named);
  auto clone = cast<linalg::LinalgOp>(rw.clone(*named.getOperation()));
  FailureOr<linalg::GenericOp> generic = linalg::generalizeNamedOp(rw, clone);
  if (failed(generic)) {
    rw.eraseOp(clone);
    return false;
  }
  std::optional<ElementwisePlan> plan = planElementwise(*generic, buffers);
  if (!plan) {
    rw.eraseOp(*generic);
    return false;
  }
  vectorize(rw, *generic, *plan);
  rw.eraseOp(named);
  return true;
}

bool outsideKernels(Operation *op) {
  return !op->getParentOfType<scf::ParallelOp>() && !op->getParentOfType<gpu::LaunchOp>();
}

struct GpuVectorizeElementwisePass
    : impl::KilnGpuVectorizeElementwiseBase<GpuVectorizeElementwisePass> {
  using KilnGpuVectorizeElementwiseBase::KilnGpuVectorizeElementwiseBase;
  void runOnOperation() override {
    IRRewriter rw(&getContext());
    codegen::BufferAlignment buffers(getOperation(), globalAlignment);
    SmallVector<linalg::LinalgOp> ops;
    getOperation().walk([&](linalg::LinalgOp op) {
      if (outsideKernels(op))
        ops.push_back(op);
    });
    for (linalg::LinalgOp op : ops) {
      if (auto generic = dyn_cast<linalg::GenericOp>(op.getOperation())) {
        if (std::optional<ElementwisePlan> plan = planElementwise(generic, buffers))
          vectorize(rw, generic, *plan);
      } else if (isa<linalg::MapOp, linalg::FillOp, linalg::CopyOp>(op.getOperation())) {
        // A padded buffer's zeros are a linalg.map or linalg.fill.
        vectorizeNamed(rw, op, buffers);
      }
    }
    // Copies (a concat's parts, a slice, a pad's interior) are elementwise
    // too, as a linalg.copy.
    SmallVector<memref::CopyOp> copies;
    getOperation().walk([&](memref::CopyOp copy) {
      auto type = dyn_cast<MemRefType>(copy.getSource().getType());
      if (outsideKernels(copy) && type && type.hasStaticShape() && type.getRank() != 0)
        copies.push_back(copy);
    });
    for (memref::CopyOp copy : copies) {
      rw.setInsertionPoint(copy);
      auto named = linalg::CopyOp::create(rw, copy.getLoc(), copy.getSource(), copy.getTarget());
      if (vectorizeNamed(rw, named, buffers))
        rw.eraseOp(copy);
      else
        rw.eraseOp(named);
    }
  }
};

} // namespace
} // namespace kiln
