// Reading and writing tensors as ONNX TensorProto files (the input_J.pb /
// output_J.pb layout of the ONNX backend tests).
#ifndef KILN_TENSORIO_H
#define KILN_TENSORIO_H

#include "kiln/Kiln.h"

namespace kiln {

Status readTensorFile(const std::string &path, Tensor &tensor, std::string *name = nullptr);
Status writeTensorFile(const std::string &path, const Tensor &tensor, const std::string &name);

/// Elementwise |a - b| <= atol + rtol * |b| (NaN matches NaN). On mismatch
/// `report` says where and by how much.
bool tensorsClose(const Tensor &actual, const Tensor &expected, double atol, double rtol,
                  std::string &report);

} // namespace kiln

#endif
