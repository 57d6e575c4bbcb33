#include "kiln/TensorIO.h"

#include "kiln/Frontend/ModelLoader.h"
#include "onnx/onnx_pb.h"
#include "onnx/onnx-data_pb.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <iterator>
#include <cstdlib>

namespace kiln {

static Status ioError(const std::string &msg) { return Status::error(KILN_IO_ERROR, msg); }

/// The number of elements `dims` describe; false for a negative dim or a
/// product that overflows int64. The readers check a file's payload against
/// this before allocating: a header may claim any shape.
static bool checkedElementCount(const std::vector<int64_t> &dims, int64_t &count) {
  count = 1;
  for (int64_t d : dims)
    if (d < 0 || __builtin_mul_overflow(count, d, &count))
      return false;
  return true;
}

static Status tensorFromProto(const std::string &path, const onnx::TensorProto &proto,
                              Tensor &tensor);

Status readTensorFile(const std::string &path, Tensor &tensor, std::string *name) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return ioError("'" + path + "': cannot open");
  onnx::TensorProto proto;
  if (!proto.ParseFromIstream(&in))
    return ioError("'" + path + "': not an ONNX TensorProto");
  if (name)
    *name = proto.name();
  return tensorFromProto(path, proto, tensor);
}

static Status sequenceFromProto(const std::string &path, const onnx::SequenceProto &proto,
                                Value &value) {
  if (proto.elem_type() != onnx::SequenceProto::TENSOR)
    return ioError("'" + path + "': only sequences of tensors are supported");
  value.kind = ValueKind::Sequence;
  value.tensors.clear();
  for (const onnx::TensorProto &t : proto.tensor_values()) {
    Tensor element;
    if (Status s = tensorFromProto(path, t, element); !s.ok())
      return s;
    value.tensors.push_back(std::move(element));
  }
  return {};
}

Status readValueFile(const std::string &path, const TensorInfo &declared, Value &value) {
  if (declared.kind == ValueKind::Tensor && !declared.optional) {
    value.kind = ValueKind::Tensor;
    value.tensors.clear();
    value.tensors.emplace_back();
    return readTensorFile(path, value.tensors[0]);
  }
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return ioError("'" + path + "': cannot open");
  if (!declared.optional) {
    onnx::SequenceProto proto;
    if (!proto.ParseFromIstream(&in))
      return ioError("'" + path + "': not an ONNX SequenceProto");
    return sequenceFromProto(path, proto, value);
  }
  onnx::OptionalProto proto;
  if (!proto.ParseFromIstream(&in))
    return ioError("'" + path + "': not an ONNX OptionalProto");
  value.tensors.clear();
  switch (proto.elem_type()) {
  case onnx::OptionalProto::UNDEFINED:
    value.kind = ValueKind::None;
    return {};
  case onnx::OptionalProto::TENSOR:
    if (!proto.has_tensor_value()) {
      value.kind = ValueKind::None;
      return {};
    }
    value.kind = ValueKind::Tensor;
    value.tensors.emplace_back();
    return tensorFromProto(path, proto.tensor_value(), value.tensors[0]);
  case onnx::OptionalProto::SEQUENCE:
    if (!proto.has_sequence_value()) {
      value.kind = ValueKind::None;
      return {};
    }
    return sequenceFromProto(path, proto.sequence_value(), value);
  default:
    return ioError("'" + path + "': only optionals of tensors or sequences are supported");
  }
}

static Status tensorFromProto(const std::string &path, const onnx::TensorProto &proto,
                              Tensor &tensor) {
  if (proto.data_location() == onnx::TensorProto::EXTERNAL)
    return ioError("'" + path + "': tensors with external data are not supported here");
  std::vector<int64_t> dims(proto.dims().begin(), proto.dims().end());
  // Checked as the file's integer before it becomes a kiln_dtype: an enum
  // holding a value it does not name is undefined behaviour.
  size_t elt = kiln_dtype_size(proto.data_type());
  if (!elt)
    return ioError("'" + path + "': unsupported element type " +
                   std::to_string(proto.data_type()));
  kiln_dtype dtype = (kiln_dtype)proto.data_type();
  // A file that claims dims of 2^40 with 4 bytes of data is an error, not a
  // terabyte allocation.
  int64_t count;
  if (!checkedElementCount(dims, count))
    return ioError("'" + path + "': invalid shape");
  std::string bytes, error;
  if (!decodeTensorPayload(proto, elt, count, bytes, error))
    return ioError("'" + path + "': " + error);
  Tensor t(dtype, dims);
  if (!t.valid())
    return ioError("'" + path + "': invalid shape or out of memory");
  std::memcpy(t.data(), bytes.data(), bytes.size());
  tensor = std::move(t);
  return {};
}

static void tensorToProto(const Tensor &tensor, const std::string &name,
                          onnx::TensorProto &proto) {
  proto.set_name(name);
  proto.set_data_type(tensor.dtype());
  for (int64_t d : tensor.dims())
    proto.add_dims(d);
  proto.set_raw_data(std::string(static_cast<const char *>(tensor.data()), tensor.numBytes()));
}

static Status writeMessage(const std::string &path, const google::protobuf::Message &m) {
  std::ofstream out(path, std::ios::binary);
  if (!out || !m.SerializeToOstream(&out))
    return ioError("'" + path + "': cannot write");
  return {};
}

Status writeTensorFile(const std::string &path, const Tensor &tensor, const std::string &name) {
  onnx::TensorProto proto;
  tensorToProto(tensor, name, proto);
  return writeMessage(path, proto);
}

Status writeValueFile(const std::string &path, const Value &value, const TensorInfo &declared) {
  if (value.kind == ValueKind::Tensor && !declared.optional) {
    if (value.tensors.size() != 1)
      return ioError("'" + path + "': a tensor value must hold one tensor");
    return writeTensorFile(path, value.tensors[0], declared.name);
  }
  onnx::SequenceProto seq;
  seq.set_name(declared.name);
  seq.set_elem_type(onnx::SequenceProto::TENSOR);
  for (const Tensor &t : value.tensors)
    tensorToProto(t, "", *seq.add_tensor_values());
  if (!declared.optional)
    return writeMessage(path, seq);
  onnx::OptionalProto opt;
  opt.set_name(declared.name);
  if (value.kind == ValueKind::Sequence) {
    opt.set_elem_type(onnx::OptionalProto::SEQUENCE);
    *opt.mutable_sequence_value() = seq;
  } else if (value.kind == ValueKind::Tensor && value.tensors.size() == 1) {
    opt.set_elem_type(onnx::OptionalProto::TENSOR);
    tensorToProto(value.tensors[0], "", *opt.mutable_tensor_value());
  }
  return writeMessage(path, opt);
}

static const char *kindName(ValueKind k) {
  return k == ValueKind::Tensor ? "a tensor" : k == ValueKind::Sequence ? "a sequence" : "empty";
}

bool valuesClose(const Value &actual, const Value &expected, double atol, double rtol,
                 std::string &report) {
  if (actual.kind != expected.kind) {
    report = std::string("the value is ") + kindName(actual.kind) + ", the reference " +
             kindName(expected.kind);
    return false;
  }
  if (actual.tensors.size() != expected.tensors.size()) {
    report = "the sequence has " + std::to_string(actual.tensors.size()) +
             " tensors, the reference " + std::to_string(expected.tensors.size());
    return false;
  }
  std::string last;
  for (size_t i = 0; i < actual.tensors.size(); ++i) {
    if (!tensorsClose(actual.tensors[i], expected.tensors[i], atol, rtol, last)) {
      report = actual.kind == ValueKind::Sequence ? "element " + std::to_string(i) + ": " + last
                                                   : last;
      return false;
    }
  }
  report = actual.kind == ValueKind::Tensor ? last
           : actual.kind == ValueKind::None ? "both empty"
                                            : std::to_string(actual.tensors.size()) +
                                                  " tensors; " + last;
  return true;
}

//===----------------------------------------------------------------------===//
// NumPy .npy files (format versions 1.0-3.0, little-endian, C order)
//===----------------------------------------------------------------------===//

namespace {
struct NpyType {
  const char *descr;
  kiln_dtype dtype;
};
constexpr NpyType kNpyTypes[] = {
    {"<f4", KILN_FLOAT32}, {"<f8", KILN_FLOAT64}, {"<f2", KILN_FLOAT16}, {"|i1", KILN_INT8},
    {"<i2", KILN_INT16},   {"<i4", KILN_INT32},   {"<i8", KILN_INT64},   {"|u1", KILN_UINT8},
    {"<u2", KILN_UINT16},  {"<u4", KILN_UINT32},  {"<u8", KILN_UINT64},  {"|b1", KILN_BOOL},
};

/// The value text after `'key':` in a .npy header dictionary.
std::string npyField(const std::string &header, const std::string &key) {
  size_t at = header.find("'" + key + "'");
  if (at == std::string::npos)
    return "";
  at = header.find(':', at);
  if (at == std::string::npos)
    return "";
  ++at;
  while (at < header.size() && header[at] == ' ')
    ++at;
  size_t end = at;
  if (at < header.size() && header[at] == '(')
    end = header.find(')', at) + 1;
  else if (at < header.size() && header[at] == '\'')
    end = header.find('\'', at + 1) + 1;
  else
    while (end < header.size() && header[end] != ',' && header[end] != '}')
      ++end;
  return end == 0 || end == std::string::npos ? "" : header.substr(at, end - at);
}
} // namespace

Status readNpyFile(const std::string &path, Tensor &tensor) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return ioError("'" + path + "': cannot open");
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  auto bad = [&](const std::string &why) { return ioError("'" + path + "': " + why); };
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0)
    return bad("not a NumPy .npy file");
  int major = (unsigned char)bytes[6];
  size_t lenBytes = major == 1 ? 2 : 4, start = 8 + lenBytes;
  if (major < 1 || major > 3 || bytes.size() < start)
    return bad("unsupported .npy version " + std::to_string(major));
  size_t headerLen = 0;
  for (size_t i = 0; i < lenBytes; ++i)
    headerLen |= (size_t)(unsigned char)bytes[8 + i] << (8 * i);
  if (bytes.size() < start + headerLen)
    return bad("truncated header");
  std::string header = bytes.substr(start, headerLen);
  std::string descr = npyField(header, "descr"), order = npyField(header, "fortran_order"),
              shape = npyField(header, "shape");
  if (descr.size() >= 2)
    descr = descr.substr(1, descr.size() - 2);
  if (descr == "<b1" || descr == "b1")
    descr = "|b1";
  if (descr == "<i1" || descr == "i1")
    descr = "|i1";
  if (descr == "<u1" || descr == "u1")
    descr = "|u1";
  const NpyType *type = nullptr;
  for (const NpyType &t : kNpyTypes)
    if (descr == t.descr)
      type = &t;
  if (!type)
    return bad("unsupported element type '" + descr +
               "' (little-endian bool, int, uint and float types are)");
  if (order != "False")
    return bad("Fortran-ordered arrays are not supported; save a C-ordered copy");
  if (shape.size() < 2 || shape.front() != '(' || shape.back() != ')')
    return bad("cannot read the shape");
  std::vector<int64_t> dims;
  std::string inner = shape.substr(1, shape.size() - 2);
  size_t pos = 0;
  while (pos < inner.size()) {
    size_t comma = inner.find(',', pos);
    std::string part = inner.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    part.erase(0, part.find_first_not_of(' '));
    part.erase(part.find_last_not_of(' ') + 1);
    if (!part.empty()) {
      char *end = nullptr;
      long long d = std::strtoll(part.c_str(), &end, 10);
      if (!end || *end || d < 0)
        return bad("cannot read the shape");
      dims.push_back(d);
    }
    if (comma == std::string::npos)
      break;
    pos = comma + 1;
  }
  int64_t count;
  size_t need, have = bytes.size() - start - headerLen;
  if (!checkedElementCount(dims, count) ||
      __builtin_mul_overflow((size_t)count, kiln_dtype_size(type->dtype), &need))
    return bad("its shape needs more than 2^64 bytes");
  if (have != need)
    return bad("holds " + std::to_string(have) + " bytes of data; its shape needs " +
               std::to_string(need));
  Tensor t(type->dtype, dims);
  if (!t.valid())
    return bad("invalid shape or out of memory");
  std::memcpy(t.data(), bytes.data() + start + headerLen, t.numBytes());
  tensor = std::move(t);
  return {};
}

Status writeNpyFile(const std::string &path, const Tensor &tensor) {
  const NpyType *type = nullptr;
  for (const NpyType &t : kNpyTypes)
    if (t.dtype == tensor.dtype())
      type = &t;
  if (!type)
    return ioError("'" + path + "': NumPy has no type for " + kiln_dtype_name(tensor.dtype()));
  std::string shape = "(";
  for (int64_t d : tensor.dims())
    shape += std::to_string(d) + ", ";
  if (tensor.dims().size() > 1)
    shape.resize(shape.size() - 2);
  else if (tensor.dims().size() == 1)
    shape.resize(shape.size() - 1);
  shape += ")";
  std::string header = std::string("{'descr': '") + type->descr +
                       "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Data starts on a 64-byte boundary, the header ends in a newline.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += (char)(header.size() & 0xff);
  out += (char)(header.size() >> 8);
  out += header;
  out.append(static_cast<const char *>(tensor.data()), tensor.numBytes());
  std::ofstream f(path, std::ios::binary);
  if (!f || !f.write(out.data(), out.size()))
    return ioError("'" + path + "': cannot write");
  return {};
}

template <typename T> static double at(const Tensor &t, int64_t i) {
  return (double)t.data<T>()[i];
}

static double valueAt(const Tensor &t, int64_t i) {
  switch (t.dtype()) {
  case KILN_FLOAT32: return at<float>(t, i);
  case KILN_FLOAT64: return at<double>(t, i);
  case KILN_INT64: return at<int64_t>(t, i);
  case KILN_INT32: return at<int32_t>(t, i);
  case KILN_INT16: return at<int16_t>(t, i);
  case KILN_INT8: return at<int8_t>(t, i);
  case KILN_UINT8: case KILN_BOOL: return at<uint8_t>(t, i);
  case KILN_UINT16: return at<uint16_t>(t, i);
  case KILN_UINT32: return at<uint32_t>(t, i);
  case KILN_UINT64: return (double)at<uint64_t>(t, i);
  case KILN_FLOAT16: {
    uint16_t h = t.data<uint16_t>()[i];
    int sign = h >> 15, exp = (h >> 10) & 31, mant = h & 1023;
    double v = exp == 0 ? std::ldexp(mant, -24)
               : exp == 31 ? (mant ? NAN : INFINITY)
                           : std::ldexp(mant + 1024, exp - 25);
    return sign ? -v : v;
  }
  case KILN_BFLOAT16: {
    uint32_t bits = (uint32_t)t.data<uint16_t>()[i] << 16;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }
  default: return NAN;
  }
}

bool tensorsClose(const Tensor &actual, const Tensor &expected, double atol, double rtol,
                  std::string &report) {
  std::ostringstream os;
  if (actual.dtype() != expected.dtype()) {
    os << "element type " << kiln_dtype_name(actual.dtype()) << ", expected "
       << kiln_dtype_name(expected.dtype());
    report = os.str();
    return false;
  }
  if (actual.dims() != expected.dims()) {
    os << "shape differs from the reference";
    report = os.str();
    return false;
  }
  int64_t bad = 0, worst = -1;
  double worstErr = 0, maxErr = 0;
  for (int64_t i = 0; i < actual.numElements(); ++i) {
    double a = valueAt(actual, i), e = valueAt(expected, i);
    if (std::isnan(a) && std::isnan(e))
      continue;
    if (std::isinf(a) && std::isinf(e) && (a > 0) == (e > 0))
      continue;
    double err = std::fabs(a - e);
    maxErr = std::isnan(err) ? INFINITY : std::max(maxErr, err);
    if (!(err <= atol + rtol * std::fabs(e))) {
      if (bad++ == 0 || err > worstErr) {
        worst = i;
        worstErr = std::isnan(err) ? INFINITY : err;
      }
    }
  }
  if (bad) {
    os << bad << " of " << actual.numElements() << " elements differ; worst at flat index "
       << worst << ": got " << valueAt(actual, worst) << ", expected " << valueAt(expected, worst);
    report = os.str();
    return false;
  }
  os << "max abs error " << maxErr;
  report = os.str();
  return true;
}

} // namespace kiln
