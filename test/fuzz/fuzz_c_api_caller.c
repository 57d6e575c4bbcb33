/* Calls kiln_status_create from C, where any int may be passed as an enum:
 * the C++ fuzz target cannot make such a call without undefined behaviour
 * of its own. */
#include "kiln/runtime.h"

kiln_status *kiln_fuzz_status_from_int(int32_t code, const char *message) {
  return kiln_status_create(code, message);
}
