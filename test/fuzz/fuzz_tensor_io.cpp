// Fuzz target: the readers of test data and inputs that kiln-run,
// kiln-conformance and the Python API take from users: TensorProto files
// (input_J.pb), SequenceProto and OptionalProto files read against a
// declared sequence or optional, and NumPy .npy files (a hand-written
// header parser). The first byte picks the reader; the rest is the file.
#include "FuzzSupport.h"

#include "kiln/TensorIO.h"

#include <cstdio>
#include <string>
#include <unistd.h>

namespace {

/// One scratch file per process: the readers take paths.
const std::string &scratchPath() {
  static const std::string path = [] {
    const char *dir = std::getenv("TMPDIR");
    return std::string(dir && *dir ? dir : "/tmp") + "/kiln-fuzz-tensor-io-" +
           std::to_string(getpid());
  }();
  return path;
}

/// Reads back what was read: exercises the sizes the reader reported.
void touch(const kiln::Tensor &t) {
  if (!t.get())
    return;
  volatile unsigned char sink = 0;
  const unsigned char *p = static_cast<const unsigned char *>(t.data());
  size_t n = t.numBytes();
  for (size_t i = 0; i < n; i += 4096)
    sink ^= p[i];
  if (n)
    sink ^= p[n - 1];
  (void)sink;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  int which = data[0] % 4;
  {
    FILE *f = std::fopen(scratchPath().c_str(), "wb");
    if (!f)
      return 0;
    std::fwrite(data + 1, 1, size - 1, f);
    std::fclose(f);
  }
  kiln::Status s;
  if (which == 0) {
    kiln::Tensor t;
    std::string name;
    s = kiln::readTensorFile(scratchPath(), t, &name);
    if (s.ok())
      touch(t);
  } else if (which == 3) {
    kiln::Tensor t;
    s = kiln::readNpyFile(scratchPath(), t);
    if (s.ok())
      touch(t);
  } else {
    kiln::TensorInfo declared;
    declared.name = "x";
    declared.dtype = KILN_FLOAT32;
    declared.kind = which == 1 ? kiln::ValueKind::Sequence : kiln::ValueKind::Tensor;
    declared.optional = which == 2;
    kiln::Value v;
    s = kiln::readValueFile(scratchPath(), declared, v);
    if (s.ok())
      for (const kiln::Tensor &t : v.tensors)
        touch(t);
  }
  if (!s.ok())
    kiln::fuzz::requireMessage(s.message, "tensor reader");
  std::remove(scratchPath().c_str());
  return 0;
}
