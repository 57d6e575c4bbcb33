#include "kiln/Frontend/ModelLoader.h"

#include "onnx/checker.h"
#include "onnx/onnx_pb.h"

#include <google/protobuf/io/coded_stream.h>

#include <cerrno>
#include <climits>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace fs = std::filesystem;

namespace kiln {

static bool parseModel(const void *data, size_t size, onnx::ModelProto &model,
                       std::string &error) {
  if (size == 0) {
    error = "file is empty, not an ONNX model";
    return false;
  }
  if (size > (size_t)INT_MAX) {
    error = "model is larger than 2 GiB; store its weights as external data";
    return false;
  }
  google::protobuf::io::CodedInputStream stream(static_cast<const uint8_t *>(data),
                                                static_cast<int>(size));
  stream.SetTotalBytesLimit(INT_MAX);
  if (!model.ParseFromCodedStream(&stream) || !stream.ConsumedEntireMessage()) {
    error = "not a valid ONNX model (protobuf parsing failed; truncated or not a "
            "ModelProto?)";
    return false;
  }
  if (!model.has_graph()) {
    error = "not a valid ONNX model: it has no graph";
    return false;
  }
  return true;
}

std::vector<const onnx::ValueInfoProto *> modelInputs(const onnx::ModelProto &model) {
  std::set<std::string> initializers;
  for (const auto &init : model.graph().initializer())
    initializers.insert(init.name());
  std::vector<const onnx::ValueInfoProto *> inputs;
  for (const auto &in : model.graph().input())
    if (!initializers.count(in.name()))
      inputs.push_back(&in);
  return inputs;
}

bool decodeTensorPayload(const onnx::TensorProto &t, size_t elementBytes, int64_t count,
                         std::string &bytes, std::string &error) {
  if (count < 0) {
    error = "has a negative number of elements";
    return false;
  }
  size_t n = (size_t)count, total = 0;
  auto mismatch = [&](size_t have) {
    error = "holds " + std::to_string(have) + " values but its shape needs " + std::to_string(n);
    return false;
  };
  if (__builtin_mul_overflow(n, elementBytes, &total)) {
    error = "has a shape of " + std::to_string(n) + " elements, more than 2^64 bytes";
    return false;
  }
  if (t.has_raw_data()) {
    if (t.raw_data().size() != total)
      return mismatch(t.raw_data().size() / std::max<size_t>(elementBytes, 1));
    bytes = t.raw_data();
    return true;
  }
  // Copies each value's low `elementBytes` bytes (little-endian), which is
  // how narrow integers, booleans and 16-bit float bit patterns are stored
  // in the wider typed fields. The count is checked before anything is
  // allocated: a tensor claiming 2^40 elements with no data is refused, not
  // allocated.
  auto copy = [&](const auto &field) {
    if ((size_t)field.size() != n)
      return mismatch(field.size());
    bytes.assign(total, '\0');
    for (size_t i = 0; i < n; ++i) {
      auto v = field.Get(i);
      std::memcpy(&bytes[i * elementBytes], &v, std::min(sizeof(v), elementBytes));
    }
    return true;
  };
  switch (t.data_type()) {
  case onnx::TensorProto::FLOAT: return copy(t.float_data());
  case onnx::TensorProto::DOUBLE: return copy(t.double_data());
  case onnx::TensorProto::INT64: return copy(t.int64_data());
  case onnx::TensorProto::UINT32:
  case onnx::TensorProto::UINT64: return copy(t.uint64_data());
  default: return copy(t.int32_data());
  }
}

static bool isInside(const fs::path &child, const fs::path &parent) {
  auto c = child.begin(), p = parent.begin();
  for (; p != parent.end(); ++p, ++c)
    if (c == child.end() || *c != *p)
      return false;
  return true;
}

/// A decimal int64 that is all of `text` (std::stoll accepts "12abc" and
/// throws on overflow).
static bool parseInt64(const std::string &text, int64_t &out) {
  if (text.empty())
    return false;
  errno = 0;
  char *end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno == ERANGE || !end || *end != 0)
    return false;
  out = v;
  return true;
}

/// Opens `rel` under the folder `baseFd` so that no path component, link or
/// ".." can leave it: openat2 with RESOLVE_BENEATH checks that in the
/// kernel, at open time, so a file swapped for a link after any check of
/// ours cannot win. -1 with errno set when it fails; errno ENOSYS where
/// the kernel lacks openat2 (before Linux 5.6).
static int openBeneath(int baseFd, const std::string &rel) {
#if defined(__linux__) && defined(SYS_openat2)
  struct {
    uint64_t flags, mode, resolve;
  } how = {(uint64_t)(O_RDONLY | O_CLOEXEC), 0, 0x08 /* RESOLVE_BENEATH */ | 0x02 /* NO_MAGICLINKS */};
  return (int)syscall(SYS_openat2, baseFd, rel.c_str(), &how, sizeof how);
#else
  (void)baseFd;
  (void)rel;
  errno = ENOSYS;
  return -1;
#endif
}

bool resolveExternalData(onnx::TensorProto &tensor, const std::string &baseDir,
                         std::string &error, ExternalRanges *ranges) {
  std::string location;
  int64_t offset = 0, length = -1;
  bool hasLength = false;
  for (const auto &kv : tensor.external_data()) {
    if (kv.key() == "location") {
      location = kv.value();
    } else if (kv.key() == "offset" || kv.key() == "length") {
      int64_t v;
      if (!parseInt64(kv.value(), v) || v < 0) {
        error = "tensor '" + tensor.name() + "': external data " + kv.key() +
                " is not a number from 0 to 2^63-1: '" + kv.value() + "'";
        return false;
      }
      (kv.key() == "offset" ? offset : length) = v;
      hasLength = hasLength || kv.key() == "length";
    }
  }
  const std::string what = "tensor '" + tensor.name() + "': external data '" + location + "'";
  if (location.empty()) {
    error = "tensor '" + tensor.name() + "': external data has no location";
    return false;
  }
  if (baseDir.empty()) {
    error = what + " cannot be resolved for a model loaded from memory without a base folder";
    return false;
  }
  // A location is a relative path taken literally: "%2e%2e" names a file
  // called that, not "..". A NUL would cut the path the system sees.
  if (location.find('\0') != std::string::npos) {
    error = what + " contains a NUL byte";
    return false;
  }
  fs::path rel(location);
  if (rel.is_absolute()) {
    error = what + " is an absolute path; it must be relative to the model's folder";
    return false;
  }
  std::error_code ec;
  fs::path base = fs::canonical(baseDir, ec);
  if (ec) {
    error = "model folder '" + baseDir + "' cannot be resolved: " + ec.message();
    return false;
  }
  fs::path lexical = (base / rel).lexically_normal();
  if (!isInside(lexical, base)) {
    error = what + " escapes the model's folder";
    return false;
  }
  fs::path real = fs::canonical(lexical, ec);
  if (ec) {
    error = what + " cannot be opened: " + ec.message();
    return false;
  }
  if (!isInside(real, base)) {
    error = what + " is a link that leads outside the model's folder";
    return false;
  }
  // Open once, then check and read the opened file (not the path again).
  int baseFd = ::open(base.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int fd = baseFd < 0 ? -1 : openBeneath(baseFd, real.lexically_relative(base).string());
  // Without openat2 (ENOSYS), or where a seccomp filter refuses it (EPERM):
  // the checked canonical path, not following a final link.
  if (fd < 0 && (errno == ENOSYS || errno == EPERM))
    fd = ::open(real.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  int openErrno = errno;
  if (baseFd >= 0)
    ::close(baseFd);
  if (fd < 0) {
    error = what + (openErrno == EXDEV || openErrno == ELOOP
                        ? " leads outside the model's folder (it changed while it was opened)"
                        : " cannot be opened: " + std::string(std::strerror(openErrno)));
    return false;
  }
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    error = what + " is not a regular file";
    return false;
  }
  // A hard link is a second name of a file that may live anywhere on the
  // file system: nothing shows where the other name is, so refuse it
  // unless the user says the folder is trusted.
  if (st.st_nlink > 1 && !std::getenv("KILN_ALLOW_HARD_LINKS")) {
    error = what + " has " + std::to_string((unsigned long long)st.st_nlink) +
            " hard links: it may be a file from outside the model's folder (set "
            "KILN_ALLOW_HARD_LINKS=1 to accept it)";
    return false;
  }
  uint64_t fileSize = (uint64_t)st.st_size;
  if ((uint64_t)offset > fileSize) {
    error = what + ": offset " + std::to_string(offset) + " lies outside the file (" +
            std::to_string(fileSize) + " bytes)";
    return false;
  }
  if (!hasLength)
    length = (int64_t)(fileSize - (uint64_t)offset);
  // offset and length are each below 2^63: their sum cannot wrap in 64 bits.
  if ((uint64_t)offset + (uint64_t)length > fileSize) {
    error = what + ": offset " + std::to_string(offset) + " + length " +
            std::to_string(length) + " runs past the end of the file (" +
            std::to_string(fileSize) + " bytes)";
    return false;
  }
  if (ranges) {
    // Two tensors over the same bytes: a malformed (or crafted) model.
    auto key = std::make_pair((uint64_t)st.st_dev, (uint64_t)st.st_ino);
    for (const ExternalRange &r : (*ranges)[key])
      if (length > 0 && r.end > offset && r.begin < offset + length) {
        error = what + ": bytes " + std::to_string(offset) + ".." +
                std::to_string(offset + length) + " overlap those of tensor '" + r.tensor +
                "' (" + std::to_string(r.begin) + ".." + std::to_string(r.end) + ")";
        return false;
      }
    (*ranges)[key].push_back({offset, offset + length, tensor.name()});
  }
  std::string bytes((size_t)length, '\0');
  for (int64_t done = 0; done < length;) {
    ssize_t n = ::pread(fd, bytes.data() + done, (size_t)(length - done), offset + done);
    if (n <= 0) {
      error = what + " could not be read (the file shrank or failed)";
      return false;
    }
    done += n;
  }
  tensor.set_raw_data(std::move(bytes));
  tensor.clear_external_data();
  tensor.set_data_location(onnx::TensorProto::DEFAULT);
  return true;
}

static bool resolveAllExternalData(onnx::GraphProto &graph, const std::string &baseDir,
                                   std::set<std::string> &files, std::string &error,
                                   ExternalRanges &ranges) {
  auto fix = [&](onnx::TensorProto &t) {
    if (t.data_location() != onnx::TensorProto::EXTERNAL)
      return true;
    for (const auto &kv : t.external_data())
      if (kv.key() == "location")
        files.insert(kv.value());
    return resolveExternalData(t, baseDir, error, &ranges);
  };
  for (auto &t : *graph.mutable_initializer())
    if (!fix(t))
      return false;
  for (auto &node : *graph.mutable_node())
    for (auto &attr : *node.mutable_attribute()) {
      if (attr.has_t() && !fix(*attr.mutable_t()))
        return false;
      if (attr.has_g() &&
          !resolveAllExternalData(*attr.mutable_g(), baseDir, files, error, ranges))
        return false;
    }
  return true;
}

static bool finishLoading(LoadedModel &out, std::string &error) {
  onnx::ModelProto &model = *out.proto;
  // External data first: the checker would otherwise read the files itself,
  // without our containment rules.
  std::set<std::string> files;
  ExternalRanges ranges;
  if (!resolveAllExternalData(*model.mutable_graph(), out.baseDir, files, error, ranges))
    return false;
  out.externalFiles.assign(files.begin(), files.end());
  try {
    onnx::checker::check_model(model);
  } catch (const std::exception &e) {
    std::string msg = e.what();
    // The checker's messages carry a trailing "==> Context: ..." block.
    for (char &c : msg)
      if (c == '\n')
        c = ' ';
    // The checker quotes the model's names in full: cut (they are escaped
    // with every Status message).
    if (msg.size() > 1000)
      msg = msg.substr(0, 1000) + "...(" + std::to_string(msg.size()) + " bytes)";
    error = "the ONNX checker rejects this model: " + msg;
    return false;
  }
  return true;
}

bool loadModelFromFile(const std::string &path, LoadedModel &out, std::string &error) {
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    error = "'" + path + "': no such file";
    return false;
  }
  if (fs::is_directory(path, ec)) {
    error = "'" + path + "' is a folder, not an ONNX model file";
    return false;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = "'" + path + "' cannot be opened";
    return false;
  }
  // One read of the known size: a character iterator with a growing string
  // took a third of a second on ResNet-18's 47 MB.
  std::string bytes;
  uintmax_t size = fs::file_size(path, ec);
  if (!ec) {
    bytes.resize((size_t)size);
    if (!in.read(bytes.data(), (std::streamsize)size)) {
      error = "'" + path + "' could not be read";
      return false;
    }
  } else {
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  out.proto = std::make_shared<onnx::ModelProto>();
  out.sourceName = path;
  out.baseDir = fs::path(path).parent_path().string();
  if (out.baseDir.empty())
    out.baseDir = ".";
  if (!parseModel(bytes.data(), bytes.size(), *out.proto, error)) {
    error = "'" + path + "': " + error;
    return false;
  }
  if (!finishLoading(out, error)) {
    error = "'" + path + "': " + error;
    return false;
  }
  return true;
}

bool loadModelFromBuffer(const void *data, size_t size, const std::string &baseDir,
                         LoadedModel &out, std::string &error) {
  out.proto = std::make_shared<onnx::ModelProto>();
  out.sourceName = "<memory>";
  out.baseDir = baseDir;
  return parseModel(data, size, *out.proto, error) && finishLoading(out, error);
}

} // namespace kiln
