// The interpreter's driver: values by SSA name, regions for ONNX control
// flow (scf.if/for/while), the few tensor and arith ops the importer writes
// around them, constants decoded once, and conversion from and to the
// runtime's tensors.
#include "kiln/Interp/Interpreter.h"
#include "HostTensor.h"
#include "kiln/IR/Dtypes.h"
#include "kiln/IR/KilnDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

#include <cstring>
#include <unordered_map>

using namespace mlir;

namespace kiln::interp {

struct Program::Constants {
  llvm::DenseMap<mlir::Value, HostTensor> values;
};

namespace {

HostTensor fromDense(DenseElementsAttr dense) {
  ShapedType t = dense.getType();
  HostTensor h(t.getElementType(), Shape(t.getShape().begin(), t.getShape().end()));
  int64_t n = h.size();
  Type elt = t.getElementType();
  if (!dense.isSplat() && elt.isF32()) {
    const float *p = reinterpret_cast<const float *>(dense.getRawData().data());
    for (int64_t k = 0; k < n; ++k)
      h.f[k] = p[k];
  } else if (!dense.isSplat() && elt.isInteger(64)) {
    if (n) // an empty vector's data() may be null, and memcpy's may not be (UBSan)
      std::memcpy(h.i.data(), dense.getRawData().data(), n * sizeof(int64_t));
  } else if (h.isFloat()) {
    int64_t k = 0;
    for (const llvm::APFloat &v : dense.getValues<llvm::APFloat>())
      h.f[k++] = v.convertToDouble();
  } else {
    int64_t k = 0;
    for (const llvm::APInt &v : dense.getValues<llvm::APInt>())
      h.i[k++] = v.getBitWidth() == 1 ? (int64_t)v.getZExtValue() : v.getSExtValue();
  }
  h.normalize();
  return h;
}

HostTensor fromAttribute(Attribute a, Type resultType) {
  if (auto dense = dyn_cast<DenseElementsAttr>(a))
    return fromDense(dense);
  if (auto i = dyn_cast<IntegerAttr>(a)) {
    HostTensor h(resultType, {});
    h.i[0] = i.getType().isInteger(1) ? (int64_t)i.getValue().getZExtValue() : i.getValue().getSExtValue();
    h.normalize();
    return h;
  }
  if (auto f = dyn_cast<FloatAttr>(a)) {
    HostTensor h(resultType, {});
    h.f[0] = f.getValueAsDouble();
    return h;
  }
  throw InterpError("a constant the interpreter cannot decode");
}

Type elementTypeOf(Type t) {
  if (auto s = dyn_cast<ShapedType>(t))
    return s.getElementType();
  return t;
}

/// The evaluation of one function body: values by SSA name.
class Evaluator {
public:
  explicit Evaluator(const llvm::DenseMap<mlir::Value, HostTensor> &constants) : constants(constants) {}

  const HostTensor &get(mlir::Value v) const {
    auto it = env.find(v);
    if (it != env.end())
      return it->second;
    auto c = constants.find(v);
    if (c != constants.end())
      return c->second;
    throw InterpError("a value used before it is defined");
  }

  /// Runs `block` with its arguments bound to `args`; returns the operands
  /// of its terminator.
  std::vector<HostTensor> runBlock(Block &block, std::vector<HostTensor> args) {
    if (args.size() != block.getNumArguments())
      throw InterpError("a region given the wrong number of values");
    for (size_t k = 0; k < args.size(); ++k)
      env[block.getArgument(k)] = std::move(args[k]);
    const std::vector<std::vector<mlir::Value>> &dead = deathsOf(block);
    size_t index = 0;
    for (Operation &op : block) {
      if (op.hasTrait<OpTrait::IsTerminator>()) {
        std::vector<HostTensor> out;
        for (mlir::Value v : op.getOperands())
          out.push_back(get(v));
        forget(dead[index]);
        return out;
      }
      evaluate(&op);
      forget(dead[index++]);
    }
    throw InterpError("a block without a terminator");
  }

  Operation *failedOp = nullptr; ///< the innermost op an error came from

private:
  const llvm::DenseMap<mlir::Value, HostTensor> &constants;
  llvm::DenseMap<mlir::Value, HostTensor> env;
  /// deathsOf's lists by block. Node-based: runBlock holds a reference to
  /// its block's list while nested blocks (an scf.if's, a loop body's) add
  /// theirs, and a DenseMap's growth would move it.
  std::unordered_map<Block *, std::vector<std::vector<mlir::Value>>> deaths;

  /// For each op of `block` in order, the values defined in the block (its
  /// arguments and its ops' results) that nothing after that op uses (a use
  /// inside a nested region counts as one by the op holding the region), so
  /// that they leave `env` there: only live tensors are held (Keypoint
  /// R-CNN, every intermediate kept to the end, took more than 24 GiB).
  const std::vector<std::vector<mlir::Value>> &deathsOf(Block &block) {
    auto [it, inserted] = deaths.try_emplace(&block);
    if (!inserted)
      return it->second;
    llvm::DenseMap<Operation *, size_t> position;
    for (Operation &op : block)
      position[&op] = position.size();
    std::vector<std::vector<mlir::Value>> &dead = it->second;
    dead.resize(position.size());
    auto place = [&](mlir::Value v, size_t defined) {
      size_t last = defined;
      for (Operation *user : v.getUsers())
        if (Operation *holder = block.findAncestorOpInBlock(*user))
          last = std::max(last, position.lookup(holder));
      dead[last].push_back(v);
    };
    if (!dead.empty())
      for (BlockArgument a : block.getArguments())
        place(a, 0);
    for (Operation &op : block)
      for (mlir::Value r : op.getResults())
        place(r, position.lookup(&op));
    return dead;
  }

  void forget(const std::vector<mlir::Value> &values) {
    for (mlir::Value v : values)
      env.erase(v);
  }

  int64_t intOf(OpFoldResult r) const {
    if (auto a = llvm::dyn_cast_if_present<Attribute>(r))
      return cast<IntegerAttr>(a).getInt();
    return get(cast<mlir::Value>(r)).integer(0);
  }
  std::vector<int64_t> intsOf(ArrayRef<OpFoldResult> rs) const {
    std::vector<int64_t> v;
    for (OpFoldResult r : rs)
      v.push_back(intOf(r));
    return v;
  }

  void evaluate(Operation *op) {
    if (op->getNumResults() && constants.count(op->getResult(0)))
      return;
    std::vector<HostTensor> results;
    try {
      results = evaluateOp(op);
    } catch (const InterpError &) {
      if (!failedOp)
        failedOp = op;
      throw;
    }
    if (results.size() != op->getNumResults())
      throw InterpError("'" + op->getName().getStringRef().str() + "' gave " +
                        std::to_string(results.size()) + " results, not " +
                        std::to_string(op->getNumResults()));
    for (size_t k = 0; k < results.size(); ++k) {
      results[k].normalize();
      env[op->getResult(k)] = std::move(results[k]);
    }
  }

  std::vector<HostTensor> evaluateOp(Operation *op) {
    Operands in;
    for (mlir::Value v : op->getOperands())
      in.push_back(&get(v));
    std::vector<HostTensor> out;
    StringRef dialect = op->getName().getDialectNamespace();
    if (auto guard = dyn_cast<LoopGuardOp>(op)) {
      // The runtime's own guard, as compiled code calls it: the same limit
      // and the same message. Its stop is taken at once, so that nothing of
      // it stays on this thread.
      if (!kiln_loop_guard(in[0]->integer(0), guard.getNode().str().c_str())) {
        kiln_status *stop = kiln_take_run_error();
        std::string message = stop ? kiln_status_message(stop) : "a Loop reached its iteration limit";
        kiln_status_free(stop);
        throw LoopLimitError(message);
      }
      out.emplace_back(guard.getType(), Shape{});
      out.back().i[0] = 1;
      return out;
    }
    if (dialect == "kiln") {
      if (evalElementwise(op, in, out) || evalNeuralNet(op, in, out) ||
          evalDataMovement(op, in, out))
        return out;
      throw InterpError("the interpreter has no rule for '" + op->getName().getStringRef().str() + "'");
    }
    if (dialect == "arith")
      return evaluateArith(op, in);
    if (auto ifOp = dyn_cast<scf::IfOp>(op)) {
      Region &r = in[0]->integer(0) ? ifOp.getThenRegion() : ifOp.getElseRegion();
      return r.empty() ? out : runBlock(r.front(), {});
    }
    if (auto forOp = dyn_cast<scf::ForOp>(op)) {
      int64_t lb = get(forOp.getLowerBound()).integer(0), ub = get(forOp.getUpperBound()).integer(0),
              step = get(forOp.getStep()).integer(0);
      if (step <= 0)
        throw InterpError("scf.for with a step of " + std::to_string(step));
      std::vector<HostTensor> carried;
      for (mlir::Value v : forOp.getInitArgs())
        carried.push_back(get(v));
      Type ivType = forOp.getInductionVar().getType();
      for (int64_t iv = lb; iv < ub; iv += step) {
        std::vector<HostTensor> args;
        args.emplace_back(ivType, Shape{});
        args[0].i[0] = iv;
        for (HostTensor &c : carried)
          args.push_back(std::move(c));
        carried = runBlock(forOp.getRegion().front(), std::move(args));
      }
      return carried;
    }
    if (auto whileOp = dyn_cast<scf::WhileOp>(op)) {
      std::vector<HostTensor> current;
      for (mlir::Value v : whileOp.getInits())
        current.push_back(get(v));
      for (;;) {
        std::vector<HostTensor> cond = runBlock(whileOp.getBefore().front(), std::move(current));
        bool go = cond[0].integer(0) != 0;
        current.assign(std::make_move_iterator(cond.begin() + 1), std::make_move_iterator(cond.end()));
        if (!go)
          return current;
        current = runBlock(whileOp.getAfter().front(), std::move(current));
      }
    }
    if (dialect == "tensor")
      return evaluateTensor(op, in);
    throw InterpError("the interpreter has no rule for '" + op->getName().getStringRef().str() + "'");
  }

  std::vector<HostTensor> evaluateArith(Operation *op, const Operands &in) {
    std::vector<HostTensor> out;
    Type elt = resultElementType(op);
    if (auto c = dyn_cast<arith::ConstantOp>(op)) {
      out.push_back(fromAttribute(c.getValue(), elt));
      return out;
    }
    static const llvm::StringMap<StringRef> binary = {
        {"addi", "add"}, {"subi", "sub"}, {"muli", "mul"}, {"andi", "and"}, {"ori", "or"},
        {"xori", "xor"}, {"divsi", "div"}, {"divui", "div"}, {"remsi", "frem"}, {"remui", "frem"},
        {"maxsi", "max"}, {"minsi", "min"}, {"maxui", "max"}, {"minui", "min"}, {"addf", "add"},
        {"subf", "sub"}, {"mulf", "mul"}, {"divf", "div"}, {"maximumf", "max"},
        {"minimumf", "min"}, {"maxnumf", "max"}, {"minnumf", "min"}, {"select", "select"},
        {"index_cast", "cast"}, {"index_castui", "cast"}, {"extsi", "cast"}, {"extui", "cast"},
        {"trunci", "cast"}, {"sitofp", "cast"}, {"uitofp", "cast"}, {"fptosi", "cast"},
        {"fptoui", "cast"}, {"extf", "cast"}, {"truncf", "cast"}, {"negf", "neg"}};
    StringRef name = op->getName().stripDialect();
    auto it = binary.find(name);
    if (it != binary.end() && evalElementwiseNamed(it->second, elt, in, out))
      return out;
    StringRef cmp;
    bool negate = false;
    if (auto c = dyn_cast<arith::CmpIOp>(op)) {
      using P = arith::CmpIPredicate;
      switch (c.getPredicate()) {
      case P::eq: cmp = "equal"; break;
      case P::ne: cmp = "equal"; negate = true; break;
      case P::slt: case P::ult: cmp = "less"; break;
      case P::sle: case P::ule: cmp = "less_equal"; break;
      case P::sgt: case P::ugt: cmp = "greater"; break;
      case P::sge: case P::uge: cmp = "greater_equal"; break;
      }
    } else if (auto c = dyn_cast<arith::CmpFOp>(op)) {
      using P = arith::CmpFPredicate;
      switch (c.getPredicate()) {
      case P::OEQ: case P::UEQ: cmp = "equal"; break;
      case P::ONE: case P::UNE: cmp = "equal"; negate = true; break;
      case P::OLT: case P::ULT: cmp = "less"; break;
      case P::OLE: case P::ULE: cmp = "less_equal"; break;
      case P::OGT: case P::UGT: cmp = "greater"; break;
      case P::OGE: case P::UGE: cmp = "greater_equal"; break;
      default: break;
      }
    }
    if (!cmp.empty() && evalElementwiseNamed(cmp, elt, in, out)) {
      if (negate)
        for (int64_t &v : out[0].i)
          v = !v;
      return out;
    }
    throw InterpError("the interpreter has no rule for '" + op->getName().getStringRef().str() + "'");
  }

  std::vector<HostTensor> evaluateTensor(Operation *op, const Operands &in) {
    std::vector<HostTensor> out;
    Type elt = resultElementType(op);
    if (auto e = dyn_cast<tensor::EmptyOp>(op)) {
      out.emplace_back(elt, intsOf(e.getMixedSizes()));
    } else if (auto x = dyn_cast<tensor::ExtractOp>(op)) {
      const HostTensor &t = *in[0];
      Shape s = stridesOf(t.shape);
      int64_t at = 0;
      for (size_t d = 0; d < x.getIndices().size(); ++d) {
        int64_t i = get(x.getIndices()[d]).integer(0);
        if (i < 0 || i >= t.shape[d])
          throw InterpError("tensor.extract index out of range");
        at += i * s[d];
      }
      HostTensor h(elt, {});
      h.copyElement(0, t, at);
      out.push_back(std::move(h));
    } else if (auto f = dyn_cast<tensor::FromElementsOp>(op)) {
      auto t = cast<ShapedType>(f.getType());
      HostTensor h(elt, Shape(t.getShape().begin(), t.getShape().end()));
      for (size_t k = 0; k < in.size(); ++k)
        h.copyElement(k, *in[k], 0);
      out.push_back(std::move(h));
    } else if (auto s = dyn_cast<tensor::ExtractSliceOp>(op)) {
      const HostTensor &src = *in[0];
      std::vector<int64_t> offs = intsOf(s.getMixedOffsets()), sizes = intsOf(s.getMixedSizes()),
                           steps = intsOf(s.getMixedStrides());
      HostTensor h(elt, sizes);
      Shape ss = stridesOf(src.shape);
      std::vector<int64_t> c;
      for (int64_t k = 0; k < h.size(); ++k) {
        unravel(k, sizes, c);
        for (size_t d = 0; d < c.size(); ++d) {
          c[d] = offs[d] + c[d] * steps[d];
          if (c[d] < 0 || c[d] >= src.shape[d])
            throw InterpError("tensor.extract_slice out of bounds");
        }
        h.copyElement(k, src, ravel(c, ss));
      }
      Shape kept; // a rank-reducing slice drops unit dims
      llvm::SmallBitVector dropped = s.getDroppedDims();
      for (size_t d = 0; d < sizes.size(); ++d)
        if (!dropped.test(d))
          kept.push_back(sizes[d]);
      h.shape = kept;
      out.push_back(std::move(h));
    } else if (auto s = dyn_cast<tensor::InsertSliceOp>(op)) {
      const HostTensor &src = *in[0];
      HostTensor h = get(s.getDest());
      std::vector<int64_t> offs = intsOf(s.getMixedOffsets()), sizes = intsOf(s.getMixedSizes()),
                           steps = intsOf(s.getMixedStrides());
      if (numElements(sizes) != src.size())
        throw InterpError("tensor.insert_slice of the wrong size");
      Shape hs = stridesOf(h.shape);
      std::vector<int64_t> c;
      for (int64_t k = 0; k < src.size(); ++k) {
        unravel(k, sizes, c);
        for (size_t d = 0; d < c.size(); ++d) {
          c[d] = offs[d] + c[d] * steps[d];
          if (c[d] < 0 || c[d] >= h.shape[d])
            throw InterpError("tensor.insert_slice out of bounds");
        }
        h.copyElement(ravel(c, hs), src, k);
      }
      out.push_back(std::move(h));
    } else if (isa<tensor::CastOp>(op)) {
      out.push_back(*in[0]);
    } else if (auto d = dyn_cast<tensor::DimOp>(op)) {
      int64_t axis = get(d.getIndex()).integer(0);
      HostTensor h(elt, {});
      h.i[0] = in[0]->shape.at(axis);
      out.push_back(std::move(h));
    } else if (isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp, tensor::ReshapeOp>(op)) {
      auto t = cast<ShapedType>(op->getResult(0).getType());
      if (!t.hasStaticShape())
        throw InterpError("a dynamic reshape");
      HostTensor h = *in[0];
      h.shape.assign(t.getShape().begin(), t.getShape().end());
      if (h.size() != in[0]->size())
        throw InterpError("a reshape that changes the number of elements");
      out.push_back(std::move(h));
    } else {
      throw InterpError("the interpreter has no rule for '" + op->getName().getStringRef().str() + "'");
    }
    return out;
  }
};

/// Calls fn(T()) with the C type of an integer or boolean dtype; false for
/// other dtypes.
template <typename Fn> bool withIntegerType(int32_t dtype, Fn fn) {
  switch (dtype) {
  case KILN_BOOL: case KILN_UINT8: fn(uint8_t()); return true;
  case KILN_INT8: fn(int8_t()); return true;
  case KILN_UINT16: fn(uint16_t()); return true;
  case KILN_INT16: fn(int16_t()); return true;
  case KILN_UINT32: fn(uint32_t()); return true;
  case KILN_INT32: fn(int32_t()); return true;
  case KILN_UINT64: fn(uint64_t()); return true;
  case KILN_INT64: fn(int64_t()); return true;
  default: return false;
  }
}

const llvm::fltSemantics &halfSemantics(int32_t dtype) {
  return dtype == KILN_FLOAT16 ? llvm::APFloat::IEEEhalf() : llvm::APFloat::BFloat();
}

HostTensor fromRuntime(const kiln_tensor *t, Type elt) {
  const int64_t *d = kiln_tensor_dims(t);
  HostTensor h(elt, Shape(d, d + kiln_tensor_rank(t)));
  const void *p = kiln_tensor_data(const_cast<kiln_tensor *>(t));
  int64_t n = h.size();
  auto each = [&](auto tag) {
    using T = decltype(tag);
    const T *q = static_cast<const T *>(p);
    for (int64_t k = 0; k < n; ++k)
      h.setInt(k, (int64_t)q[k]);
  };
  switch (kiln_tensor_dtype(t)) {
  case KILN_FLOAT32:
    for (int64_t k = 0; k < n; ++k)
      h.f[k] = static_cast<const float *>(p)[k];
    break;
  case KILN_FLOAT64:
    for (int64_t k = 0; k < n; ++k)
      h.f[k] = static_cast<const double *>(p)[k];
    break;
  case KILN_FLOAT16:
  case KILN_BFLOAT16: {
    const llvm::fltSemantics &sem = halfSemantics(kiln_tensor_dtype(t));
    for (int64_t k = 0; k < n; ++k)
      h.f[k] = llvm::APFloat(sem, llvm::APInt(16, static_cast<const uint16_t *>(p)[k])).convertToDouble();
    break;
  }
  default:
    if (!withIntegerType(kiln_tensor_dtype(t), each))
      throw InterpError("an input of an unsupported type");
  }
  h.normalize();
  return h;
}

kiln_tensor *toRuntime(const HostTensor &h, kiln_dtype dtype) {
  kiln_tensor *t = kiln_tensor_create(dtype, (int32_t)h.rank(), h.shape.data());
  if (!t)
    throw InterpError("cannot allocate an output of " + shapeString(h.shape));
  void *p = kiln_tensor_data(t);
  int64_t n = h.size();
  auto each = [&](auto tag) {
    using T = decltype(tag);
    T *q = static_cast<T *>(p);
    for (int64_t k = 0; k < n; ++k)
      q[k] = (T)h.integer(k);
  };
  switch (dtype) {
  case KILN_FLOAT32:
    for (int64_t k = 0; k < n; ++k)
      static_cast<float *>(p)[k] = (float)h.f[k];
    break;
  case KILN_FLOAT64:
    for (int64_t k = 0; k < n; ++k)
      static_cast<double *>(p)[k] = h.f[k];
    break;
  case KILN_FLOAT16:
  case KILN_BFLOAT16: {
    const llvm::fltSemantics &sem = halfSemantics(dtype);
    for (int64_t k = 0; k < n; ++k) {
      llvm::APFloat a(h.f[k]);
      bool lost;
      a.convert(sem, llvm::APFloat::rmNearestTiesToEven, &lost);
      static_cast<uint16_t *>(p)[k] = (uint16_t)a.bitcastToAPInt().getZExtValue();
    }
    break;
  }
  default:
    if (!withIntegerType(dtype, each)) {
      kiln_tensor_free(t);
      throw InterpError("an output of an unsupported type");
    }
  }
  return t;
}

kiln_dtype runtimeType(Type t) {
  if (kiln_dtype d = dtypeOf(t))
    return d;
  throw InterpError("a result of an unsupported type");
}

func::FuncOp entryOf(ModuleOp module) {
  func::FuncOp entry;
  module.walk([&](func::FuncOp f) {
    if (!entry && !f.isExternal())
      entry = f;
  });
  return entry;
}

} // namespace

Program::Program(std::unique_ptr<MLIRContext> c, OwningOpRef<ModuleOp> m,
                 std::function<std::string(Location)> d)
    : ctx(std::move(c)), module(std::move(m)), describe(std::move(d)),
      constants(std::make_unique<Constants>()) {
  // Decoded once, not per run: a model's weights are most of its constants.
  module->walk([&](Operation *op) {
    if (op->getNumResults() != 1 || op->getNumOperands() != 0)
      return;
    Attribute value = op->getAttr("value");
    if (!value || !(op->getName().getStringRef() == "kiln.constant" ||
                    op->getName().getStringRef() == "arith.constant"))
      return;
    try {
      constants->values[op->getResult(0)] = fromAttribute(value, elementTypeOf(op->getResult(0).getType()));
    } catch (const InterpError &) {
      // Reported if the value is ever used.
    }
  });
}

Program::~Program() = default;

Status Program::run(const std::vector<const kiln_tensor *> &inputs,
                    std::vector<kiln_tensor *> &outputs) const {
  outputs.clear();
  func::FuncOp entry = entryOf(*module);
  if (!entry)
    return Status::error(KILN_INTERNAL, "interpreter: the module has no function");
  Evaluator ev(constants->values);
  try {
    if (inputs.size() != entry.getNumArguments())
      throw InterpError("the function takes " + std::to_string(entry.getNumArguments()) +
                        " inputs, got " + std::to_string(inputs.size()));
    std::vector<HostTensor> args;
    for (size_t k = 0; k < inputs.size(); ++k)
      args.push_back(fromRuntime(inputs[k], elementTypeOf(entry.getArgument(k).getType())));
    std::vector<HostTensor> results = ev.runBlock(entry.getBody().front(), std::move(args));
    for (size_t k = 0; k < results.size(); ++k)
      outputs.push_back(toRuntime(results[k], runtimeType(results[k].type)));
  } catch (const LoopLimitError &e) {
    for (kiln_tensor *t : outputs)
      kiln_tensor_free(t);
    outputs.clear();
    return Status::error(KILN_LIMIT_EXCEEDED, e.what());
  } catch (const InterpError &e) {
    for (kiln_tensor *t : outputs)
      kiln_tensor_free(t);
    outputs.clear();
    std::string where = ev.failedOp ? describe(ev.failedOp->getLoc()) + ": '" +
                                          ev.failedOp->getName().getStringRef().str() + "': "
                                    : "";
    return Status::error(KILN_INVALID_ARGUMENT, "interpreter: " + where + e.what());
  }
  return {};
}

} // namespace kiln::interp
