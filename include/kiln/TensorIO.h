// Reading and writing tensors as ONNX TensorProto files (the input_J.pb /
// output_J.pb layout of the ONNX backend tests).
#ifndef KILN_TENSORIO_H
#define KILN_TENSORIO_H

#include "kiln/Kiln.h"

namespace kiln {

Status readTensorFile(const std::string &path, Tensor &tensor, std::string *name = nullptr);
/// NumPy .npy files (little-endian, C order; bool, int, uint and float
/// element types).
Status readNpyFile(const std::string &path, Tensor &tensor);
Status writeNpyFile(const std::string &path, const Tensor &tensor);

/// Reads what `declared` describes (a model input's or output's info): a
/// TensorProto for a tensor, a SequenceProto for a sequence, an
/// OptionalProto for an optional (empty: ValueKind::None).
Status readValueFile(const std::string &path, const TensorInfo &declared, Value &value);
Status writeTensorFile(const std::string &path, const Tensor &tensor, const std::string &name);

/// Elementwise |a - b| <= atol + rtol * |b| (NaN matches NaN). On mismatch
/// `report` says where and by how much.
bool tensorsClose(const Tensor &actual, const Tensor &expected, double atol, double rtol,
                  std::string &report);

/// Writes a value as readValueFile reads it back for `declared` (named
/// after it).
Status writeValueFile(const std::string &path, const Value &value, const TensorInfo &declared);

/// tensorsClose for values: the same kind, as many tensors, each close.
bool valuesClose(const Value &actual, const Value &expected, double atol, double rtol,
                 std::string &report);

} // namespace kiln

#endif
