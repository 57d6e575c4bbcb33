// kiln._kiln: the Python binding of Kiln's JIT API (pybind11). The Python
// side (python/kiln/__init__.py) adds the calling conventions; this file
// owns the zero-copy hand-over of tensors and the GIL.
//
// Inputs: a C-contiguous array of the input's dtype is passed to the
// compiled code as it is (kiln_tensor_wrap of its data); any other layout
// is copied into a contiguous array first. A wrong dtype is an error, not a
// silent cast, as in ONNX Runtime.
// Outputs: the runtime allocated them; each becomes a NumPy array over the
// runtime's buffer whose base is a capsule that frees it (kiln_tensor_free
// returns it to the runtime's buffer cache), so nothing is copied.
// The GIL is released while the model runs; the run holds its own
// reference to the compiled model, so deleting the Python object while
// another thread runs it is safe.
#include "kiln/Kiln.h"
#include "kiln/TensorIO.h"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace py = pybind11;

namespace {

/// A Kiln status as a C++ exception, turned into kiln.<class> by the
/// translator registered in the module.
struct KilnException {
  kiln_status_code code;
  std::string message;
};

[[noreturn]] void raise(kiln_status_code code, const std::string &message) {
  throw KilnException{code, message};
}

void check(const kiln::Status &s) {
  if (!s.ok())
    raise(s.code, s.message);
}

struct DtypeName {
  kiln_dtype dtype;
  const char *numpy;
};
constexpr DtypeName kDtypes[] = {
    {KILN_FLOAT32, "float32"}, {KILN_FLOAT64, "float64"}, {KILN_FLOAT16, "float16"},
    {KILN_INT8, "int8"},       {KILN_INT16, "int16"},     {KILN_INT32, "int32"},
    {KILN_INT64, "int64"},     {KILN_UINT8, "uint8"},     {KILN_UINT16, "uint16"},
    {KILN_UINT32, "uint32"},   {KILN_UINT64, "uint64"},   {KILN_BOOL, "bool"},
};

py::dtype toNumpy(kiln_dtype dtype) {
  for (const DtypeName &d : kDtypes)
    if (d.dtype == dtype)
      return py::dtype(d.numpy);
  raise(KILN_INVALID_ARGUMENT, std::string("Kiln dtype ") + kiln_dtype_name(dtype) +
                                   " has no NumPy equivalent");
}

const char *numpyName(kiln_dtype dtype) {
  for (const DtypeName &d : kDtypes)
    if (d.dtype == dtype)
      return d.numpy;
  return kiln_dtype_name(dtype);
}

/// An output tensor handed to NumPy: the array's base owns it.
py::array adopt(kiln::Tensor &&tensor) {
  kiln_tensor *t = tensor.release();
  py::capsule owner(t, [](void *p) { kiln_tensor_free(static_cast<kiln_tensor *>(p)); });
  std::vector<py::ssize_t> shape(kiln_tensor_dims(t), kiln_tensor_dims(t) + kiln_tensor_rank(t));
  return py::array(toNumpy((kiln_dtype)kiln_tensor_dtype(t)), shape, kiln_tensor_data(t), owner);
}

py::object shapeOf(const std::vector<int64_t> &dims) {
  py::list shape;
  for (int64_t d : dims)
    shape.append(d < 0 ? py::object(py::none()) : py::object(py::int_(d)));
  return std::move(shape);
}

struct PyTensorInfo {
  std::string name;
  std::string dtype;
  py::object shape;
};

/// A compiled model. Shared, so a run in flight keeps it alive.
class PyModel {
public:
  explicit PyModel(std::shared_ptr<kiln::Model> m) : model(std::move(m)) {
    for (const kiln::TensorInfo &t : model->inputs())
      inputs.push_back({t.name, numpyName(t.dtype), shapeOf(t.dims)});
    for (const kiln::TensorInfo &t : model->outputs())
      outputs.push_back({t.name, numpyName(t.dtype), shapeOf(t.dims)});
  }

  int compilations() const { return model->stats().compilations; }
  std::string tuning() const { return model->stats().tuning; }

  /// feeds: name -> array, every input exactly once. Returns the outputs
  /// named in `names` (all when None), in that order.
  py::list run(py::object names, py::dict feeds) {
    const std::vector<kiln::TensorInfo> &declared = model->inputs();
    for (auto item : feeds) {
      std::string name = py::str(item.first);
      bool known = false;
      for (const kiln::TensorInfo &t : declared)
        known |= t.name == name;
      if (!known)
        raise(KILN_INVALID_ARGUMENT, "the model has no input '" + name + "'; its inputs are " +
                                         inputNames());
    }
    std::vector<py::array> keep; // arrays (or contiguous copies) read by the run
    std::vector<kiln::Tensor> views;
    std::vector<const kiln_tensor *> args;
    std::vector<const void *> addresses;
    for (const kiln::TensorInfo &t : declared) {
      if (!feeds.contains(t.name))
        raise(KILN_INVALID_ARGUMENT, "input '" + t.name + "' is missing; the model's inputs are " +
                                         inputNames());
      py::object value = feeds[py::str(t.name)];
      py::array a = py::array::ensure(value);
      if (!a)
        raise(KILN_INVALID_ARGUMENT, "input '" + t.name + "' is not an array");
      if (!a.dtype().is(toNumpy(t.dtype)))
        raise(KILN_DTYPE_MISMATCH, "input '" + t.name + "' must be " + numpyName(t.dtype) +
                                       ", not " + std::string(py::str(a.dtype())));
      if (!(a.flags() & py::array::c_style))
        a = py::array::ensure(a, py::array::c_style | py::array::forcecast);
      std::vector<int64_t> dims(a.shape(), a.shape() + a.ndim());
      keep.push_back(a);
      views.emplace_back(kiln_tensor_wrap(t.dtype, (int32_t)dims.size(), dims.data(),
                                          const_cast<void *>(a.data())));
      if (!views.back().valid())
        raise(KILN_OUT_OF_MEMORY, "out of memory");
      args.push_back(views.back().get());
      addresses.push_back(a.data());
    }
    std::vector<int> picked = pick(names);
    std::vector<kiln::Tensor> results;
    kiln::Status status;
    {
      std::shared_ptr<kiln::Model> running = model;
      py::gil_scoped_release release;
      status = running->run(args, results);
    }
    check(status);
    {
      std::lock_guard<std::mutex> lock(addressMutex);
      lastInputAddresses = addresses;
    }
    py::list out;
    for (int k : picked)
      out.append(adopt(std::move(results[k])));
    return out;
  }

  /// Test hook: the data addresses the last run passed to the compiled code.
  std::vector<uintptr_t> lastAddresses() const {
    std::lock_guard<std::mutex> lock(addressMutex);
    std::vector<uintptr_t> out;
    for (const void *p : lastInputAddresses)
      out.push_back(reinterpret_cast<uintptr_t>(p));
    return out;
  }

  std::vector<PyTensorInfo> inputs, outputs;

private:
  std::string inputNames() const {
    std::string s;
    for (const kiln::TensorInfo &t : model->inputs())
      s += (s.empty() ? "'" : ", '") + t.name + "'";
    return s.empty() ? "none" : s;
  }

  std::vector<int> pick(py::object names) const {
    const std::vector<kiln::TensorInfo> &declared = model->outputs();
    std::vector<int> picked;
    if (names.is_none()) {
      for (size_t k = 0; k < declared.size(); ++k)
        picked.push_back((int)k);
      return picked;
    }
    for (py::handle h : names) {
      std::string name = py::str(h);
      int found = -1;
      for (size_t k = 0; k < declared.size(); ++k)
        if (declared[k].name == name)
          found = (int)k;
      if (found < 0)
        raise(KILN_INVALID_ARGUMENT, "the model has no output '" + name + "'");
      picked.push_back(found);
    }
    return picked;
  }

  std::shared_ptr<kiln::Model> model;
  mutable std::mutex addressMutex;
  std::vector<const void *> lastInputAddresses;
};

kiln::CompileOptions compileOptions(int threads, const std::string &cpu, int optLevel,
                                    bool cache, bool dynamicShapes,
                                    const kiln::DimBounds &dimBounds, bool tune) {
  if (optLevel < 0 || optLevel > 3)
    raise(KILN_INVALID_ARGUMENT, "opt_level must be 0..3");
  if (threads < 0)
    raise(KILN_INVALID_ARGUMENT, "threads must be 0 (the number of cores) or more");
  kiln::CompileOptions o;
  o.numThreads = threads;
  o.cpu = cpu;
  o.optLevel = optLevel;
  o.cache = cache;
  o.dynamicShapes = dynamicShapes;
  o.dimBounds = dimBounds;
  o.tune = tune;
  return o;
}

std::shared_ptr<PyModel> compileFile(const std::string &path, int threads, const std::string &cpu,
                                     int optLevel, bool cache, bool dynamicShapes,
                                     const kiln::DimBounds &dimBounds, bool tune) {
  kiln::CompileOptions o =
      compileOptions(threads, cpu, optLevel, cache, dynamicShapes, dimBounds, tune);
  std::string error;
  std::unique_ptr<kiln::Model> m;
  {
    py::gil_scoped_release release;
    m = kiln::Model::load(path, o, &error);
  }
  if (!m)
    raise(KILN_COMPILE_ERROR, error);
  return std::make_shared<PyModel>(std::shared_ptr<kiln::Model>(std::move(m)));
}

std::shared_ptr<PyModel> compileBytes(py::bytes data, const std::string &baseDir, int threads,
                                      const std::string &cpu, int optLevel, bool cache,
                                      bool dynamicShapes, const kiln::DimBounds &dimBounds,
                                      bool tune) {
  kiln::CompileOptions o =
      compileOptions(threads, cpu, optLevel, cache, dynamicShapes, dimBounds, tune);
  std::string bytes = data;
  std::string error;
  std::unique_ptr<kiln::Model> m;
  {
    py::gil_scoped_release release;
    m = kiln::Model::loadFromMemory(bytes.data(), bytes.size(), baseDir, o, &error);
  }
  if (!m)
    raise(KILN_COMPILE_ERROR, error);
  return std::make_shared<PyModel>(std::shared_ptr<kiln::Model>(std::move(m)));
}

void writeFile(const std::string &path, const std::string &bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), (std::streamsize)bytes.size());
  if (!f)
    raise(KILN_IO_ERROR, "cannot write '" + path + "'");
}

/// kilnc as a function: emit "obj", "asm", "llvm" or "bundle" (out is then
/// DIR/NAME: NAME.o, NAME.h and with external weights NAME.weights).
/// Returns the files written.
std::vector<std::string> compileToFile(const std::string &path, const std::string &out,
                                       const std::string &emit, const std::string &target,
                                       const std::string &cpu, int optLevel,
                                       bool externalWeights) {
  kiln::EmitOptions o;
  o.triple = target;
  o.cpu = cpu.empty() ? (target.empty() ? "host" : "") : cpu;
  o.optLevel = optLevel;
  o.externalWeights = externalWeights;
  std::map<std::string, kiln::EmitKind> kinds{{"obj", kiln::EmitKind::Object},
                                             {"asm", kiln::EmitKind::Assembly},
                                             {"llvm", kiln::EmitKind::LLVMIR},
                                             {"ptx", kiln::EmitKind::PTX},
                                             {"bundle", kiln::EmitKind::Bundle}};
  auto kind = kinds.find(emit);
  if (kind == kinds.end())
    raise(KILN_INVALID_ARGUMENT, "emit must be one of obj, asm, llvm, ptx, bundle; not '" +
                                     emit + "'");
  o.kind = kind->second;
  std::vector<std::string> written;
  kiln::Status s;
  if (o.kind == kiln::EmitKind::Bundle) {
    std::string name = out.substr(out.find_last_of('/') + 1);
    if (name.empty())
      raise(KILN_INVALID_ARGUMENT, "a bundle's out is DIR/NAME, with a NAME");
    o.bundleName = name;
    kiln::Bundle bundle;
    {
      py::gil_scoped_release release;
      s = kiln::emitBundle(path, o, bundle);
    }
    check(s);
    writeFile(out + ".o", bundle.object);
    writeFile(out + ".h", bundle.header);
    written = {out + ".o", out + ".h"};
    if (externalWeights) {
      writeFile(out + ".weights", bundle.weights);
      written.push_back(out + ".weights");
    }
    return written;
  }
  std::string bytes;
  {
    py::gil_scoped_release release;
    s = kiln::emit(path, o, bytes);
  }
  check(s);
  writeFile(out, bytes);
  return {out};
}

py::array readTensor(const std::string &path) {
  kiln::Tensor t;
  check(kiln::readTensorFile(path, t));
  return adopt(std::move(t));
}

} // namespace

PYBIND11_MODULE(_kiln, m) {
  m.doc() = "Kiln: an ONNX compiler. See help(kiln).";
  m.attr("__version__") = kiln::version();

  static py::exception<KilnException> error(m, "Error");
  static py::exception<KilnException> compileError(m, "CompileError", error.ptr());
  static py::exception<KilnException> invalidArgument(m, "InvalidArgument", error.ptr());
  static py::exception<KilnException> dtypeError(m, "DtypeError", invalidArgument.ptr());
  static py::exception<KilnException> shapeError(m, "ShapeError", invalidArgument.ptr());
  static py::exception<KilnException> ioError(m, "IOError", error.ptr());
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p)
        std::rethrow_exception(p);
    } catch (const KilnException &e) {
      switch (e.code) {
      case KILN_COMPILE_ERROR: compileError(e.message.c_str()); break;
      case KILN_DTYPE_MISMATCH: dtypeError(e.message.c_str()); break;
      case KILN_SHAPE_MISMATCH: shapeError(e.message.c_str()); break;
      case KILN_INVALID_ARGUMENT: invalidArgument(e.message.c_str()); break;
      case KILN_IO_ERROR: ioError(e.message.c_str()); break;
      default: error(e.message.c_str()); break;
      }
    }
  });

  py::class_<PyTensorInfo>(m, "TensorInfo")
      .def_readonly("name", &PyTensorInfo::name)
      .def_readonly("dtype", &PyTensorInfo::dtype, "NumPy dtype name, e.g. 'float32'")
      .def_readonly("shape", &PyTensorInfo::shape, "dims, None where dynamic")
      .def("__repr__", [](const PyTensorInfo &t) {
        return "TensorInfo(name='" + t.name + "', dtype='" + t.dtype + "', shape=" +
               std::string(py::repr(t.shape)) + ")";
      });

  py::class_<PyModel, std::shared_ptr<PyModel>>(m, "_Model")
      .def_readonly("inputs", &PyModel::inputs)
      .def_readonly("outputs", &PyModel::outputs)
      .def("_run", &PyModel::run, py::arg("output_names"), py::arg("feeds"))
      .def("_last_input_addresses", &PyModel::lastAddresses)
      .def("_compilations", &PyModel::compilations)
      .def("_tuning", &PyModel::tuning);

  m.def("_compile_file", &compileFile, py::arg("path"), py::arg("threads"), py::arg("cpu"),
        py::arg("opt_level"), py::arg("cache"), py::arg("dynamic_shapes"),
        py::arg("dim_bounds"), py::arg("tune") = false);
  m.def("_compile_bytes", &compileBytes, py::arg("data"), py::arg("base_dir"),
        py::arg("threads"), py::arg("cpu"), py::arg("opt_level"), py::arg("cache"),
        py::arg("dynamic_shapes"), py::arg("dim_bounds"), py::arg("tune") = false);
  m.def("_compile_to_file", &compileToFile, py::arg("path"), py::arg("out"), py::arg("emit"),
        py::arg("target"), py::arg("cpu"), py::arg("opt_level"), py::arg("external_weights"));
  m.def("read_tensor", &readTensor, py::arg("path"),
        "Reads an ONNX TensorProto file (.pb, as in the ONNX test layout) into an array.");
}
