// The reference interpreter's tensors: plain row-major host arrays, one
// element type of the kiln dialect each.
//
// Floats of every width are held as double and rounded to their own type
// after each op (so an f32 op is computed exactly and rounded once, the
// reference a compiled kernel is compared against); integers, booleans and
// `index` are held as int64 (an unsigned type's bits). Nothing here is
// shared with the code generator: the point is a second, obviously correct
// evaluation.
#ifndef KILN_INTERP_HOSTTENSOR_H
#define KILN_INTERP_HOSTTENSOR_H

#include "mlir/IR/Operation.h"
#include "mlir/IR/Types.h"

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace kiln::interp {

/// What an op cannot evaluate (a bad index, an unsupported type): the
/// interpreter turns it into a Status naming the op's ONNX node.
struct InterpError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
/// A Loop past kiln_max_loop_iterations(): the run stops with
/// KILN_LIMIT_EXCEEDED, as compiled code's does.
struct LoopLimitError : InterpError {
  using InterpError::InterpError;
};

using Shape = std::vector<int64_t>;

int64_t numElements(const Shape &shape);
/// Row-major strides, in elements.
Shape stridesOf(const Shape &shape);
std::string shapeString(const Shape &shape);

struct HostTensor {
  mlir::Type type; ///< element type
  Shape shape;
  std::vector<double> f;  ///< float types
  std::vector<int64_t> i; ///< integer, i1 and index types

  HostTensor() = default;
  HostTensor(mlir::Type type, Shape shape);

  bool isFloat() const;
  bool isUnsigned() const;
  int64_t size() const { return numElements(shape); }
  int64_t rank() const { return (int64_t)shape.size(); }

  /// Element k as a number (unsigned types read as unsigned).
  double num(int64_t k) const;
  /// Element k as an integer (floats truncated toward zero).
  int64_t integer(int64_t k) const;
  /// Sets element k from a number: floats as they are (round() later),
  /// integers truncated toward zero.
  void setNum(int64_t k, double v);
  void setInt(int64_t k, int64_t v);
  /// Copies element `from` of `src` (same element type) to element k.
  void copyElement(int64_t k, const HostTensor &src, int64_t from);

  /// Rounds every float to its type's precision and wraps every integer to
  /// its type's width: called on each op's result.
  void normalize();
};

bool isFloatType(mlir::Type t);
bool isUnsignedType(mlir::Type t);
/// A double rounded to float type `t` (f16, bf16, f32, f64).
double roundToType(double v, mlir::Type t);
/// An integer wrapped to integer type `t` (sign- or zero-extended back).
int64_t wrapToType(int64_t v, mlir::Type t);
/// The elements of `t` as int64 (indices, shapes, axes).
std::vector<int64_t> toInts(const HostTensor &t);

/// ONNX multidirectional broadcasting of two shapes; throws if they do not
/// broadcast.
Shape broadcastShapes(const Shape &a, const Shape &b);
/// For each flat index of `out`, the flat index of the element of a tensor
/// of shape `in` that broadcasting reads there.
std::vector<int64_t> broadcastIndices(const Shape &in, const Shape &out);

/// Per-op evaluators, by group. Each returns false for an op it does not
/// know; results are normalized by the caller.
using Operands = std::vector<const HostTensor *>;
bool evalElementwise(mlir::Operation *op, const Operands &in, std::vector<HostTensor> &out);
/// An elementwise kiln op by its mnemonic ("add", "cast", ...), for the
/// arith ops of control flow too.
bool evalElementwiseNamed(llvm::StringRef name, mlir::Type outElt, const Operands &in,
                          std::vector<HostTensor> &out);
bool evalNeuralNet(mlir::Operation *op, const Operands &in, std::vector<HostTensor> &out);
bool evalDataMovement(mlir::Operation *op, const Operands &in, std::vector<HostTensor> &out);

/// The element type of an op result (tensor or scalar).
mlir::Type resultElementType(mlir::Operation *op, unsigned k = 0);

/// A flat index of `shape` as coordinates, and back.
void unravel(int64_t flat, const Shape &shape, std::vector<int64_t> &coords);
int64_t ravel(const std::vector<int64_t> &coords, const Shape &strides);

/// An op's integer and integer-array attributes (throwing when missing).
int64_t attrInt(mlir::Operation *op, llvm::StringRef name);
std::vector<int64_t> attrInts(mlir::Operation *op, llvm::StringRef name);

/// Permutes the dimensions of `x`: result dim d is x's dim perm[d].
HostTensor transpose(const HostTensor &x, const std::vector<int64_t> &perm);

/// Normalizes a possibly negative axis for `rank`, throwing when out of range.
int64_t normalizeAxis(int64_t axis, int64_t rank);

} // namespace kiln::interp

#endif
