// The bufferization model of kiln.call_kernel: one-shot bufferization sees a
// destination-passing op (reads its tensor arguments, writes `init` in
// place), so liveness and in-place decisions stay with the analysis; the
// kernel's pointers are taken only after bufferization, right at the call.
#include "kiln/Conversion/KernelCalls.h"
#include "kiln/IR/KilnDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/MemRef/Utils/MemRefUtils.h"

using namespace mlir;
using namespace mlir::bufferization;

namespace kiln::codegen {
namespace {

bool isInit(CallKernelOp op, OpOperand &operand) {
  return operand.get() == op.getInit() && operand.getOperandNumber() == op->getNumOperands() - 1;
}

/// The i64 address of a memref's first element (aligned pointer + offset).
Value bufferAddress(OpBuilder &b, Location loc, Value memref) {
  auto meta = memref::ExtractStridedMetadataOp::create(b, loc, memref);
  Value base = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, memref);
  Value bytes = arith::MulIOp::create(
      b, loc, meta.getOffset(),
      arith::ConstantIndexOp::create(
          b, loc, cast<MemRefType>(memref.getType()).getElementTypeBitWidth() / 8));
  Value addr = arith::AddIOp::create(b, loc, base, bytes);
  return arith::IndexCastOp::create(b, loc, b.getI64Type(), addr);
}

bool isDense(Value buffer) {
  return memref::isStaticShapeAndContiguousRowMajor(cast<MemRefType>(buffer.getType()));
}

/// The row stride of `buffer` when it is dense row-major except for the
/// stride between rows of its last dimension (a slice of a concatenation
/// along that dimension), static; nullopt otherwise.
std::optional<int64_t> rowStride(Value buffer) {
  auto type = cast<MemRefType>(buffer.getType());
  if (!type.hasStaticShape())
    return std::nullopt;
  int64_t rank = type.getRank();
  if (rank < 2)
    return rank == 1 && isDense(buffer) ? std::optional<int64_t>(type.getDimSize(0))
                                        : std::nullopt;
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(type.getStridesAndOffset(strides, offset)))
    return std::nullopt;
  ArrayRef<int64_t> shape = type.getShape();
  int64_t row = strides[rank - 2];
  if ((strides[rank - 1] != 1 && shape[rank - 1] != 1) || ShapedType::isDynamic(row) ||
      row < shape[rank - 1])
    return std::nullopt;
  int64_t expected = row;
  for (int64_t d = rank - 3; d >= 0; --d) {
    expected *= shape[d + 1];
    if (shape[d] != 1 && strides[d] != expected)
      return std::nullopt;
  }
  return row;
}

/// A buffer of dims known only at run time that is dense row-major: an
/// identity layout (what allocations and the function's arguments have).
bool isDenseDynamic(Value buffer) {
  auto type = cast<MemRefType>(buffer.getType());
  return !type.hasStaticShape() && type.getLayout().isIdentity() && type.getRank() >= 1;
}

/// A fresh dense row-major buffer of `buffer`'s shape and element type.
Value allocDense(RewriterBase &rw, Location loc, Value buffer) {
  auto type = cast<MemRefType>(buffer.getType());
  SmallVector<Value> dynamic;
  for (int64_t i = 0; i < type.getRank(); ++i)
    if (type.isDynamicDim(i))
      dynamic.push_back(memref::DimOp::create(rw, loc, buffer, i));
  return memref::AllocOp::create(rw, loc, MemRefType::get(type.getShape(), type.getElementType()),
                                 dynamic, rw.getI64IntegerAttr(64));
}

struct CallKernelBufferization
    : BufferizableOpInterface::ExternalModel<CallKernelBufferization, CallKernelOp> {
  bool bufferizesToMemoryRead(Operation *op, OpOperand &operand, const AnalysisState &) const {
    return !isInit(cast<CallKernelOp>(op), operand);
  }
  bool bufferizesToMemoryWrite(Operation *op, OpOperand &operand, const AnalysisState &) const {
    return isInit(cast<CallKernelOp>(op), operand);
  }
  AliasingValueList getAliasingValues(Operation *op, OpOperand &operand,
                                      const AnalysisState &) const {
    auto call = cast<CallKernelOp>(op);
    if (!isInit(call, operand))
      return {};
    return {{call.getResult(), BufferRelation::Equivalent}};
  }

  LogicalResult bufferize(Operation *op, RewriterBase &rw, const BufferizationOptions &options,
                          BufferizationState &state) const {
    auto call = cast<CallKernelOp>(op);
    Location loc = op->getLoc();
    // Tensor argument (-1: the destination) -> its row-stride argument.
    llvm::SmallDenseMap<int64_t, int64_t> strideArg;
    if (auto pairs = call.getRowStrides())
      for (size_t i = 0; i + 1 < pairs->size(); i += 2)
        strideArg[(*pairs)[i]] = (*pairs)[i + 1];
    SmallVector<Value> args(call.getArgs());
    auto setStride = [&](int64_t tensorIndex, Value stride) {
      auto it = strideArg.find(tensorIndex);
      if (it != strideArg.end())
        args[it->second] = stride;
    };
    // A buffer the kernel can take as it is: dense, or row-strided where
    // the kernel is told the stride. Returns the row stride (as i64).
    auto usable = [&](int64_t tensorIndex, Value buffer) -> std::optional<Value> {
      auto type = cast<MemRefType>(buffer.getType());
      auto constant = [&](int64_t v) -> Value {
        return arith::ConstantOp::create(rw, loc, rw.getI64IntegerAttr(v));
      };
      if (isDenseDynamic(buffer)) {
        // Dense: the row stride is the last dim, known only at run time
        // when that dim is.
        int64_t last = type.getRank() - 1;
        if (!type.isDynamicDim(last))
          return constant(type.getDimSize(last));
        return arith::IndexCastOp::create(rw, loc, rw.getI64Type(),
                                          memref::DimOp::create(rw, loc, buffer, last))
            .getResult();
      }
      if (strideArg.count(tensorIndex)) {
        if (auto r = rowStride(buffer))
          return constant(*r);
        return std::nullopt;
      }
      if (!isDense(buffer))
        return std::nullopt;
      return constant(type.getRank() ? type.getShape().back() : 1);
    };
    for (auto [i, v] : llvm::enumerate(call.getArgs())) {
      if (!isa<TensorType>(v.getType()))
        continue;
      FailureOr<Value> buffer = getBuffer(rw, v, options, state);
      if (failed(buffer))
        return failure();
      Value passed = *buffer;
      std::optional<Value> stride = usable(i, passed);
      if (!stride) {
        passed = allocDense(rw, loc, *buffer);
        memref::CopyOp::create(rw, loc, *buffer, passed);
        stride = usable(i, passed);
        if (!stride)
          return op->emitOpError("argument ") << i << " needs a static shape of rank 1 or more";
      }
      setStride(i, *stride);
      args[i] = bufferAddress(rw, loc, passed);
    }
    FailureOr<Value> out = getBuffer(rw, call.getInit(), options, state);
    if (failed(out))
      return failure();
    // A destination the kernel cannot write as it is gets a dense scratch
    // buffer and a copy back.
    std::optional<Value> outStride = usable(-1, *out);
    Value dense = outStride ? *out : allocDense(rw, loc, *out);
    if (!outStride)
      outStride = usable(-1, dense);
    if (!outStride)
      return op->emitOpError("the destination needs a static shape of rank 1 or more");
    setStride(-1, *outStride);
    args.insert(args.begin() + call.getResultPosition(), bufferAddress(rw, loc, dense));
    auto fc = func::CallOp::create(rw, loc, call.getKernel(), TypeRange{}, args);
    if (Attribute flops = op->getAttr("kiln.flops"))
      fc->setAttr("kiln.flops", flops);
    if (dense != *out)
      memref::CopyOp::create(rw, loc, dense, *out);
    replaceOpWithBufferizedValues(rw, op, *out);
    return success();
  }
};

} // namespace

void registerKernelCallBufferization(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, KilnDialect *) {
    CallKernelOp::attachInterface<CallKernelBufferization>(*ctx);
  });
}

} // namespace kiln::codegen
