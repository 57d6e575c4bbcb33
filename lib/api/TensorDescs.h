// Runtime descriptors viewing a signature (shared by the JIT executable and
// the C API). Internal to lib/api; no MLIR.
#ifndef KILN_API_TENSORDESCS_H
#define KILN_API_TENSORDESCS_H

#include "kiln/Kiln.h"

namespace kiln {

/// A runtime status as a Status, `context` before its message, freeing it;
/// ok for nullptr.
inline Status takeStatus(kiln_status *s, const std::string &context = "") {
  if (!s)
    return {};
  Status out = Status::error(kiln_status_get_code(s), context + kiln_status_message(s));
  kiln_status_free(s);
  return out;
}

/// Descriptors that point into `infos`, which must outlive them.
inline std::vector<kiln_tensor_desc> describeTensors(const std::vector<TensorInfo> &infos) {
  std::vector<kiln_tensor_desc> descs;
  for (const TensorInfo &i : infos)
    descs.push_back({i.name.c_str(), (int32_t)i.dtype, (int32_t)i.dims.size(), i.dims.data()});
  return descs;
}

} // namespace kiln

#endif
