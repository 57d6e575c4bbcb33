// What the fuzz targets share: a failure that libFuzzer reports as a crash
// (abort with a message) for broken promises that are not memory errors: a
// failed load or compile without a message, verified IR that does not
// verify.
#ifndef KILN_TEST_FUZZ_FUZZSUPPORT_H
#define KILN_TEST_FUZZ_FUZZSUPPORT_H

#include <cstdio>
#include <cstdlib>
#include <string>

namespace kiln::fuzz {

[[noreturn]] inline void broken(const char *what, const std::string &detail = "") {
  std::fprintf(stderr, "kiln fuzz: broken promise: %s%s%s\n", what, detail.empty() ? "" : ": ",
               detail.c_str());
  std::abort();
}

/// An error must say something.
inline void requireMessage(const std::string &message, const char *where) {
  if (message.empty())
    broken(where, "failed without a message");
}

} // namespace kiln::fuzz

#endif
