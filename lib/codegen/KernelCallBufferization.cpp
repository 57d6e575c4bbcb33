// The bufferization model of kiln.call_kernel: one-shot bufferization sees a
// destination-passing op (reads its tensor arguments, writes `init` in
// place), so liveness and in-place decisions stay with the analysis; the
// kernel's pointers are taken only after bufferization, right at the call.
#include "KernelCalls.h"
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

/// A fresh dense row-major buffer of `buffer`'s shape and element type.
Value allocDense(RewriterBase &rw, Location loc, Value buffer) {
  auto type = cast<MemRefType>(buffer.getType());
  return memref::AllocOp::create(rw, loc, MemRefType::get(type.getShape(), type.getElementType()),
                                 rw.getI64IntegerAttr(64));
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
    SmallVector<Value> args;
    for (Value v : call.getArgs()) {
      if (!isa<TensorType>(v.getType())) {
        args.push_back(v);
        continue;
      }
      FailureOr<Value> buffer = getBuffer(rw, v, options, state);
      if (failed(buffer))
        return failure();
      Value dense = *buffer;
      if (!isDense(dense)) {
        dense = allocDense(rw, loc, *buffer);
        memref::CopyOp::create(rw, loc, *buffer, dense);
      }
      args.push_back(bufferAddress(rw, loc, dense));
    }
    FailureOr<Value> out = getBuffer(rw, call.getInit(), options, state);
    if (failed(out))
      return failure();
    // A strided destination (a slice of a larger buffer) gets a dense
    // scratch buffer and a copy back.
    Value dense = isDense(*out) ? *out : allocDense(rw, loc, *out);
    args.insert(args.begin() + call.getResultPosition(), bufferAddress(rw, loc, dense));
    func::CallOp::create(rw, loc, call.getKernel(), TypeRange{}, args);
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
