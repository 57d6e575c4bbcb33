#include "kiln/TensorIO.h"

#include "kiln/Frontend/ModelLoader.h"
#include "onnx/onnx_pb.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

namespace kiln {

static Status ioError(const std::string &msg) { return Status::error(KILN_IO_ERROR, msg); }

Status readTensorFile(const std::string &path, Tensor &tensor, std::string *name) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return ioError("'" + path + "': cannot open");
  onnx::TensorProto proto;
  if (!proto.ParseFromIstream(&in))
    return ioError("'" + path + "': not an ONNX TensorProto");
  if (name)
    *name = proto.name();
  if (proto.data_location() == onnx::TensorProto::EXTERNAL)
    return ioError("'" + path + "': tensors with external data are not supported here");
  std::vector<int64_t> dims(proto.dims().begin(), proto.dims().end());
  kiln_dtype dtype = (kiln_dtype)proto.data_type();
  size_t elt = kiln_dtype_size(dtype);
  if (!elt)
    return ioError("'" + path + "': unsupported element type " + std::to_string(dtype));
  Tensor t(dtype, dims);
  if (!t.valid())
    return ioError("'" + path + "': invalid shape");
  std::string bytes, error;
  if (!decodeTensorPayload(proto, elt, t.numElements(), bytes, error))
    return ioError("'" + path + "': " + error);
  std::memcpy(t.data(), bytes.data(), bytes.size());
  tensor = std::move(t);
  return {};
}

Status writeTensorFile(const std::string &path, const Tensor &tensor, const std::string &name) {
  onnx::TensorProto proto;
  proto.set_name(name);
  proto.set_data_type(tensor.dtype());
  for (int64_t d : tensor.dims())
    proto.add_dims(d);
  proto.set_raw_data(std::string(static_cast<const char *>(tensor.data()), tensor.numBytes()));
  std::ofstream out(path, std::ios::binary);
  if (!out || !proto.SerializeToOstream(&out))
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
