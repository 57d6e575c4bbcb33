// The result of a call that can fail: a runtime status code and a message
// safe to print. At the bottom of the library stack, so that every layer
// (interpreter, code generation, drivers) reports errors the same way
// without depending on the API above it.
#ifndef KILN_SUPPORT_STATUS_H
#define KILN_SUPPORT_STATUS_H

#include "kiln/Support/DisplaySafe.h"
#include "kiln/runtime.h"

#include <string>

namespace kiln {

struct Status {
  kiln_status_code code = KILN_OK;
  std::string message;
  bool ok() const { return code == KILN_OK; }
  static Status error(kiln_status_code c, std::string m) { return {c, displaySafe(m)}; }
};

} // namespace kiln

#endif
