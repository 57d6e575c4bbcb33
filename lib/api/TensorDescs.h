// Runtime descriptors viewing a signature (shared by the JIT executable and
// the C API). Internal to lib/api; no MLIR.
#ifndef KILN_API_TENSORDESCS_H
#define KILN_API_TENSORDESCS_H

#include "kiln/Kiln.h"

namespace kiln {

/// Descriptors that point into `infos`, which must outlive them.
inline std::vector<kiln_tensor_desc> describeTensors(const std::vector<TensorInfo> &infos) {
  std::vector<kiln_tensor_desc> descs;
  for (const TensorInfo &i : infos)
    descs.push_back({i.name.c_str(), (int32_t)i.dtype, (int32_t)i.dims.size(), i.dims.data()});
  return descs;
}

} // namespace kiln

#endif
