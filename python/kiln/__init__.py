"""Kiln: compiles ONNX models to native code and runs them.

    import kiln
    model = kiln.compile("model.onnx")
    (y,) = model.run(None, {"x": x})

Inputs that are C-contiguous arrays of the input's dtype are read in place;
other layouts are copied to a contiguous array first; a wrong dtype is an
error (kiln.DtypeError), not a cast. Outputs are NumPy arrays over the
runtime's own buffers (no copy). The GIL is released while a model runs, so
Python threads run models in parallel, and one model may be run by several
threads at once.

Errors are kiln.Error; kiln.CompileError (bad model, unsupported operator:
the message names the node), kiln.InvalidArgument (missing or unknown
inputs), kiln.DtypeError and kiln.ShapeError (an input of the wrong dtype or
shape, both InvalidArgument), kiln.IOError.

kiln.InferenceSession mirrors onnxruntime.InferenceSession for scripts that
switch with one import.
"""

import os

from ._kiln import (  # noqa: F401
    CompileError,
    DtypeError,
    Error,
    InvalidArgument,
    IOError,
    ShapeError,
    TensorInfo,
    __version__,
    read_tensor,
)
from . import _kiln

__all__ = [
    "compile", "compile_to_file", "Model", "InferenceSession", "read_tensor", "TensorInfo",
    "Error", "CompileError", "InvalidArgument", "DtypeError", "ShapeError", "IOError",
]


class Model:
    """A compiled model. `inputs` and `outputs` list TensorInfo (name, dtype,
    shape with None for dynamic dims); a model with dynamic dims runs at any
    size (each new shape is compiled once, on first use)."""

    def __init__(self, compiled):
        self._compiled = compiled

    @property
    def inputs(self):
        return list(self._compiled.inputs)

    @property
    def outputs(self):
        return list(self._compiled.outputs)

    @property
    def compilations(self):
        """How many executables this model has made so far (compiled or read
        from the cache): one for every shape when its dims lower to code
        that takes them at run time, else one per set of input shapes."""
        return self._compiled._compilations()

    @property
    def tuning(self):
        """compile(..., tune=True): what the last tuned compile's tuning did
        (layers tuned or read from the cache, time, samples, a line per
        layer); "" when none was tuned (or the code came from the cache)."""
        return self._compiled._tuning()

    def run(self, output_names=None, input_feed=None, *args, **kwargs):
        """Runs the model and returns a list of arrays: the outputs named in
        `output_names`, or all of them for None.

        Inputs by name in a dict (`run(None, {"x": x})`), as keywords
        (`run(None, x=x)`), or by position in the model's input order
        (`run(None, x)`, `run(None, x, mask)`)."""
        feeds = {}
        positional = list(args)
        if isinstance(input_feed, dict):
            feeds.update(input_feed)
        elif input_feed is not None:
            positional.insert(0, input_feed)
        if len(positional) > len(self._compiled.inputs):
            raise InvalidArgument(
                f"{len(positional)} inputs given by position; the model has "
                f"{len(self._compiled.inputs)}")
        for info, value in zip(self._compiled.inputs, positional):
            if info.name in feeds:
                raise InvalidArgument(f"input '{info.name}' given twice")
            feeds[info.name] = value
        for name, value in kwargs.items():
            if name in feeds:
                raise InvalidArgument(f"input '{name}' given twice")
            feeds[name] = value
        if output_names is not None and isinstance(output_names, str):
            output_names = [output_names]
        return self._compiled._run(output_names, feeds)

    def __call__(self, *args, **kwargs):
        """`model(x)` or `model(x=x)`: all outputs, as run(None, ...)."""
        return self.run(None, None, *args, **kwargs)

    def __repr__(self):
        return f"kiln.Model(inputs={self.inputs}, outputs={self.outputs})"


def compile(model, threads=0, cpu="host", opt_level=3, cache=True, base_dir=None,
            dynamic_shapes=True, dim_bounds=None, tune=False):
    """Compiles an ONNX model: a path, or the model's bytes.

    threads: threads per run, the calling one included (0: the number of
    physical cores; 1: no pool). cpu: the LLVM CPU to compile for ("host").
    opt_level: 0..3. cache: keep compiled code in Kiln's on-disk cache
    ($KILN_CACHE_DIR or ~/.cache/kiln). base_dir: where a model given as
    bytes finds its external data (None: it has none). dynamic_shapes: where
    the model leaves input dims unknown, compile once for every shape (the
    code takes the dims at run time); a model whose ops need static shapes,
    or False, compiles once per new set of input shapes instead. dim_bounds:
    {dim name: (least, greatest)} for dims the model names (ONNX dim_param),
    e.g. {"seq": (1, 512)}: run() raises ShapeError for inputs outside them,
    before compiling or running anything. tune: time each convolution
    layer's candidate schedules on this machine (on `threads` threads) until
    a confidence bound separates them, and compile with the winners; choices
    are kept in the on-disk cache, keyed by CPU and layer (Model.tuning says
    what the last tuned compile did)."""
    bounds = {str(k): (int(v[0]), int(v[1])) for k, v in (dim_bounds or {}).items()}
    if isinstance(model, (bytes, bytearray, memoryview)):
        compiled = _kiln._compile_bytes(bytes(model), base_dir or "", threads, cpu, opt_level,
                                        cache, dynamic_shapes, bounds, bool(tune))
    else:
        compiled = _kiln._compile_file(os.fspath(model), threads, cpu, opt_level, cache,
                                       dynamic_shapes, bounds, bool(tune))
    return Model(compiled)


def compile_to_file(model, out, emit="obj", target=None, cpu=None, opt_level=3,
                    external_weights=False):
    """Ahead-of-time compile (as kilnc) of the model at path `model`.

    emit="obj": an object exporting kiln_entry (link it with libkiln_runtime);
    "asm", "llvm" or "ptx" (target "nvptx64-nvidia-cuda"): text; "bundle":
    `out` is DIR/NAME and NAME.o, NAME.h (and NAME.weights with
    external_weights) are written. target: an LLVM triple (None: this
    machine). Returns the paths written."""
    return _kiln._compile_to_file(os.fspath(model), os.fspath(out), emit, target or "",
                                  cpu or "", opt_level, external_weights)


class _NodeArg:
    _TYPES = {"float32": "float", "float64": "double", "float16": "float16", "int8": "int8",
              "int16": "int16", "int32": "int32", "int64": "int64", "uint8": "uint8",
              "uint16": "uint16", "uint32": "uint32", "uint64": "uint64", "bool": "bool"}

    def __init__(self, info):
        self.name = info.name
        self.shape = info.shape
        self.type = f"tensor({self._TYPES.get(info.dtype, info.dtype)})"

    def __repr__(self):
        return f"NodeArg(name='{self.name}', type='{self.type}', shape={self.shape})"


class InferenceSession:
    """onnxruntime.InferenceSession's calling convention over kiln.compile:
    `InferenceSession(path_or_bytes).run(None, {"x": x})`. sess_options and
    providers are accepted and ignored (Kiln runs on this machine's CPU);
    keyword arguments go to kiln.compile (threads=, cpu=, opt_level=,
    cache=)."""

    def __init__(self, path_or_bytes, sess_options=None, providers=None, provider_options=None,
                 **kwargs):
        self._model = compile(path_or_bytes, **kwargs)

    def get_inputs(self):
        return [_NodeArg(i) for i in self._model.inputs]

    def get_outputs(self):
        return [_NodeArg(o) for o in self._model.outputs]

    def get_providers(self):
        return ["KilnExecutionProvider"]

    def run(self, output_names, input_feed, run_options=None):
        return self._model.run(output_names, input_feed)
