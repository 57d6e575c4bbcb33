"""Tests of the kiln Python package (run by CTest as `python`).

References are independent of Kiln: tiny_mlp's outputs are computed here
with NumPy from its weights (examples/tiny_mlp/model.textproto); the shared
models' references are ONNX Runtime's outputs stored beside them."""
import gc
import glob
import os
import subprocess
import threading

import numpy as np
import pytest

import kiln

EXAMPLES = os.environ.get("KILN_EXAMPLES_DIR", "")
TINY = os.path.join(EXAMPLES, "tiny_mlp", "model.onnx")
SHARED = os.environ.get("KILN_SHARED_MODELS", "")

W1 = np.array([[1, 0], [0, 1], [1, 0], [0, 1]], np.float32)
B1 = np.array([0.5, -0.5], np.float32)
W2 = np.array([[1, -1], [1, 1]], np.float32)


def tiny_reference(x):
    h = np.maximum(x @ W1 + B1, 0)
    z = h @ W2
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.fixture(scope="module")
def tiny():
    return kiln.compile(TINY, threads=1)


def test_signature(tiny):
    (x,) = tiny.inputs
    (y,) = tiny.outputs
    assert (x.name, x.dtype, x.shape) == ("x", "float32", [1, 4])
    assert (y.name, y.dtype, y.shape) == ("y", "float32", [1, 2])


def test_run_matches_numpy(tiny):
    x = np.array([[1, 2, 3, 4]], np.float32)
    (y,) = tiny.run(None, {"x": x})
    # softmax([10, 1]), derived by hand in output_0.textproto.
    np.testing.assert_allclose(y, [[0.999876605, 0.000123394576]], rtol=1e-5)
    rng = np.random.default_rng(0)
    for _ in range(5):
        x = rng.uniform(-3, 3, (1, 4)).astype(np.float32)
        np.testing.assert_allclose(tiny.run(None, {"x": x})[0], tiny_reference(x), rtol=1e-5,
                                   atol=1e-7)


def test_calling_conventions(tiny):
    x = np.array([[0.5, -1, 2, 0]], np.float32)
    want = tiny_reference(x)
    for got in (tiny.run(None, {"x": x})[0], tiny.run(None, x=x)[0], tiny.run(None, x)[0],
                tiny.run(["y"], {"x": x})[0], tiny.run("y", {"x": x})[0], tiny(x)[0],
                tiny(x=x)[0]):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


def test_inputs_are_not_copied(tiny):
    x = np.array([[1, 2, 3, 4]], np.float32)
    tiny.run(None, {"x": x})
    assert tiny._compiled._last_input_addresses() == [x.__array_interface__["data"][0]]
    # A strided view is copied into a contiguous array (and still correct).
    wide = np.array([[1, 9, 2, 9, 3, 9, 4, 9]], np.float32)
    view = wide[:, ::2]
    assert not view.flags.c_contiguous
    (y,) = tiny.run(None, {"x": view})
    assert tiny._compiled._last_input_addresses() != [view.__array_interface__["data"][0]]
    np.testing.assert_allclose(y, tiny_reference(np.ascontiguousarray(view)), rtol=1e-5)


def test_outputs_are_not_copied(tiny):
    (y,) = tiny.run(None, {"x": np.ones((1, 4), np.float32)})
    # The array does not own its memory: the runtime's buffer is kept alive
    # by a capsule that frees it with the array.
    assert not y.flags.owndata
    assert type(y.base).__name__ == "PyCapsule"
    assert y.flags.c_contiguous and y.flags.writeable
    (y2,) = tiny.run(None, {"x": np.ones((1, 4), np.float32)})
    assert y2.__array_interface__["data"][0] != y.__array_interface__["data"][0]


def test_wrong_dtype(tiny):
    with pytest.raises(kiln.DtypeError, match="input 'x' must be float32, not float64"):
        tiny.run(None, {"x": np.ones((1, 4))})
    with pytest.raises(kiln.InvalidArgument):
        tiny.run(None, {"x": np.ones((1, 4), np.int64)})


def test_wrong_shape(tiny):
    with pytest.raises(kiln.ShapeError, match="x"):
        tiny.run(None, {"x": np.ones((2, 4), np.float32)})
    with pytest.raises(kiln.ShapeError):
        tiny.run(None, {"x": np.ones((4,), np.float32)})


def test_missing_and_extra_inputs(tiny):
    with pytest.raises(kiln.InvalidArgument, match="input 'x' is missing"):
        tiny.run(None, {})
    with pytest.raises(kiln.InvalidArgument, match="no input 'z'"):
        tiny.run(None, {"x": np.ones((1, 4), np.float32), "z": np.ones(1, np.float32)})
    with pytest.raises(kiln.InvalidArgument, match="no output 'nope'"):
        tiny.run(["nope"], {"x": np.ones((1, 4), np.float32)})
    with pytest.raises(kiln.InvalidArgument, match="given twice"):
        tiny.run(None, {"x": np.ones((1, 4), np.float32)}, x=np.ones((1, 4), np.float32))
    with pytest.raises(kiln.DtypeError, match="must be float32"):
        tiny.run(None, {"x": "text"})


def test_bad_models(tmp_path):
    with pytest.raises(kiln.CompileError):
        kiln.compile(b"this is not an ONNX model")
    with pytest.raises(kiln.CompileError, match="nonexistent"):
        kiln.compile(str(tmp_path / "nonexistent.onnx"))
    with open(TINY, "rb") as f:
        data = f.read()
    with pytest.raises(kiln.CompileError):
        kiln.compile(data[:60])
    # From bytes, the same model works.
    model = kiln.compile(data, threads=1)
    x = np.array([[1, 2, 3, 4]], np.float32)
    np.testing.assert_allclose(model.run(None, {"x": x})[0], tiny_reference(x), rtol=1e-5)
    assert issubclass(kiln.CompileError, kiln.Error)
    assert issubclass(kiln.DtypeError, kiln.InvalidArgument)


def test_unsupported_operator_names_the_node(tmp_path):
    with open(TINY, "rb") as f:
        data = f.read()
    # Rename the Relu node's op type to one ONNX does not have: same length,
    # so the protobuf stays valid.
    bad = data.replace(b"Relu", b"Rxlu")
    assert bad != data
    with pytest.raises(kiln.CompileError, match="act"):
        kiln.compile(bad)


def test_model_freed_while_running():
    model = kiln.compile(TINY, threads=1)
    x = np.array([[1, 2, 3, 4]], np.float32)
    results, errors = [], []
    started = threading.Event()

    def worker(m):
        started.set()
        try:
            for _ in range(2000):
                results.append(m.run(None, {"x": x})[0])
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    t = threading.Thread(target=worker, args=(model,))
    t.start()
    started.wait()
    del model
    gc.collect()
    t.join()
    assert not errors
    assert len(results) == 2000
    want = tiny_reference(x)
    for y in results[::100]:
        np.testing.assert_allclose(y, want, rtol=1e-5)


def test_threads_run_one_model_at_once(tiny):
    rng = np.random.default_rng(1)
    xs = [rng.uniform(-2, 2, (1, 4)).astype(np.float32) for _ in range(8)]
    out = [None] * len(xs)

    def work(i):
        for _ in range(200):
            out[i] = tiny.run(None, {"x": xs[i]})[0]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(xs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for x, y in zip(xs, out):
        np.testing.assert_allclose(y, tiny_reference(x), rtol=1e-5, atol=1e-7)


def test_inference_session_shim():
    sess = kiln.InferenceSession(TINY, providers=["CPUExecutionProvider"], threads=1)
    (i,) = sess.get_inputs()
    assert (i.name, i.type, i.shape) == ("x", "tensor(float)", [1, 4])
    assert sess.get_outputs()[0].name == "y"
    x = np.array([[2, 1, 0, -1]], np.float32)
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], tiny_reference(x), rtol=1e-5)
    np.testing.assert_allclose(sess.run(["y"], {"x": x})[0], tiny_reference(x), rtol=1e-5)


def test_compile_to_file(tmp_path):
    (obj,) = kiln.compile_to_file(TINY, tmp_path / "tiny.o")
    with open(obj, "rb") as f:
        assert f.read(4) == b"\x7fELF"
    files = kiln.compile_to_file(TINY, tmp_path / "tiny", emit="bundle", external_weights=True)
    assert sorted(os.path.basename(p) for p in files) == ["tiny.h", "tiny.o", "tiny.weights"]
    with open(tmp_path / "tiny.h") as f:
        assert "tiny_model" in f.read()
    (asm,) = kiln.compile_to_file(TINY, tmp_path / "tiny.s", emit="asm",
                                  target="aarch64-linux-gnu")
    with open(asm) as f:
        assert "kiln_entry" in f.read()
    with pytest.raises(kiln.InvalidArgument, match="emit"):
        kiln.compile_to_file(TINY, tmp_path / "x", emit="exe")


def shared_cases():
    for model in sorted(glob.glob(os.path.join(SHARED, "*", "model.onnx"))):
        for data in sorted(glob.glob(os.path.join(os.path.dirname(model), "test_data_set_*"))):
            yield pytest.param(model, data, id=os.path.basename(os.path.dirname(model)) + "/" +
                               os.path.basename(data))


@pytest.mark.skipif(not list(shared_cases()), reason="no shared models at KILN_SHARED_MODELS")
@pytest.mark.parametrize("model_path,data", list(shared_cases()))
def test_shared_model_matches_reference(model_path, data):
    model = kiln.compile(model_path)
    feeds = {}
    for j, info in enumerate(model.inputs):
        feeds[info.name] = kiln.read_tensor(os.path.join(data, f"input_{j}.pb"))
    outputs = model.run(None, feeds)
    for k, got in enumerate(outputs):
        want = kiln.read_tensor(os.path.join(data, f"output_{k}.pb"))
        assert got.shape == want.shape
        # kiln-run --check's tolerance: |out - ref| <= 1e-4 + 1e-3 |ref|.
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)


ENCODER = os.path.join(SHARED, "encoder4", "model.onnx")


@pytest.mark.skipif(not os.path.exists(ENCODER), reason="no encoder4 at KILN_SHARED_MODELS")
@pytest.mark.parametrize("dynamic", [True, False])
def test_one_compile_for_every_length(dynamic):
    """encoder4's sequence length is a dim_param: with dynamic_shapes one
    executable serves both of its test sets (ONNX Runtime's outputs at
    lengths 128 and 37) and a length of 0; without, each length compiles."""
    model = kiln.compile(ENCODER, threads=1, cache=False, dynamic_shapes=dynamic)
    folder = os.path.dirname(ENCODER)
    for data in ("test_data_set_0", "test_data_set_1", "test_data_set_0"):
        x = kiln.read_tensor(os.path.join(folder, data, "input_0.pb"))
        want = kiln.read_tensor(os.path.join(folder, data, "output_0.pb"))
        (got,) = model.run(None, {"input": x})
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)
    (empty,) = model.run(None, {"input": np.zeros((1, 0, 256), np.float32)})
    assert empty.shape == (1, 0, 256)
    assert model.compilations == (1 if dynamic else 3)


E2E_MODELS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "test", "e2e",
                          "models")


@pytest.mark.parametrize("name", ["bert_mask", "gpt2_kv", "swin_block"])
def test_one_compile_for_every_shape_of_an_exported_model(name):
    """Exported models whose dims are dim_params (batch, lengths, an empty
    KV cache, a padding mask turned into shape arithmetic): one executable
    serves every test set, each matching ONNX Runtime's outputs."""
    folder = os.path.join(E2E_MODELS, name)
    model = kiln.compile(os.path.join(folder, "model.onnx"), threads=1, cache=False)
    sets = sorted(glob.glob(os.path.join(folder, "test_data_set_*")))
    assert len(sets) >= 3
    for data in sets:
        feeds = {info.name: kiln.read_tensor(os.path.join(data, f"input_{j}.pb"))
                 for j, info in enumerate(model.inputs)}
        for k, got in enumerate(model.run(None, feeds)):
            want = kiln.read_tensor(os.path.join(data, f"output_{k}.pb"))
            assert got.shape == want.shape, (data, k)
            np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4, err_msg=f"{data} {k}")
    assert model.compilations == 1


def test_declared_dim_bounds():
    """dim_bounds: a batch or length outside the declared bounds raises
    ShapeError naming the input, the dim and the bounds, before anything is
    compiled; shapes within them run and match ONNX Runtime's outputs."""
    folder = os.path.join(E2E_MODELS, "bert_mask")
    model = kiln.compile(os.path.join(folder, "model.onnx"), threads=1, cache=False,
                         dim_bounds={"batch": (1, 2), "seq": (1, 8)})
    ran = 0
    for data in sorted(glob.glob(os.path.join(folder, "test_data_set_*"))):
        feeds = {info.name: kiln.read_tensor(os.path.join(data, f"input_{j}.pb"))
                 for j, info in enumerate(model.inputs)}
        batch, seq = feeds["input_ids"].shape
        if batch <= 2 and seq <= 8:
            want = kiln.read_tensor(os.path.join(data, "output_0.pb"))
            np.testing.assert_allclose(model.run(None, feeds)[0], want, rtol=1e-3, atol=1e-4)
            ran += 1
        else:
            name, value, bounds = (("batch", batch, "1..2") if batch > 2 else
                                   ("seq", seq, "1..8"))
            with pytest.raises(kiln.ShapeError,
                               match=f"has {value} in dim \\d \\('{name}'\\), outside the bounds "
                                     f"{bounds}"):
                model.run(None, feeds)
    assert ran >= 1 and model.compilations == 1
    with pytest.raises(kiln.Error, match="no input of the model names"):
        kiln.compile(os.path.join(folder, "model.onnx"), cache=False, dim_bounds={"length": (1, 8)})


def test_input_shapes_the_model_refuses(tmp_path):
    """Inputs whose shapes the model's ops refuse (a broadcast of 6 against
    4, a Reshape of 12 elements into 2x3) raise ShapeError naming the shapes
    and the node, not CompileError; shapes that fit still run, and match
    y = reshape(a + b, [2, 3]) computed here."""
    lit_inputs = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "test",
                              "lit", "Inputs")
    with open(os.path.join(lit_inputs, "shape_refusals.textproto"), "rb") as f:
        text = f.read()
    path = tmp_path / "model.onnx"
    path.write_bytes(subprocess.run(
        ["protoc", "--encode=onnx.ModelProto", "-I/usr/include/onnx", "onnx.proto"],
        input=text, capture_output=True, check=True).stdout)
    model = kiln.compile(path, threads=1, cache=False)
    a = np.arange(6, dtype=np.float32)
    with pytest.raises(kiln.ShapeError, match=r"the input shapes \[6\], \[4\] do not fit the "
                                              r"model: .*: node 'add' \(Add\): operands cannot be "
                                              r"broadcast together"):
        model.run(None, {"a": a, "b": np.ones(4, np.float32)})
    with pytest.raises(kiln.ShapeError, match=r"node 'reshape' \(Reshape\): cannot reshape 12"):
        model.run(None, {"a": np.ones(12, np.float32), "b": np.ones(1, np.float32)})
    (y,) = model.run(None, {"a": a, "b": np.full(1, 0.5, np.float32)})
    np.testing.assert_array_equal(y, (a + 0.5).reshape(2, 3))


def _encoded_lit_model(tmp_path, name):
    lit_inputs = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "test",
                              "lit", "Inputs")
    with open(os.path.join(lit_inputs, name), "rb") as f:
        text = f.read()
    path = tmp_path / "model.onnx"
    path.write_bytes(subprocess.run(
        ["protoc", "--encode=onnx.ModelProto", "-I/usr/include/onnx", "onnx.proto"],
        input=text, capture_output=True, check=True).stdout)
    return path


def test_constant_slices_of_a_runtime_dim(tmp_path):
    """x[:, 1:], x[:, -1:] and x[:, :-1] of a sequence of n (concatenated):
    one compile for every n >= 1, where the code assumes n >= 1 and checks
    it at entry; at n = 0 (ONNX: three empty slices) the JIT compiles for
    that shape. Expected values from NumPy's slicing, ONNX's semantics."""
    model = kiln.compile(_encoded_lit_model(tmp_path, "sequence_ends.textproto"), threads=1,
                         cache=False)
    for n in (5, 1, 2, 9, 0, 3):
        x = np.arange(2 * n, dtype=np.float32).reshape(2, n) + 1
        (y,) = model.run(None, {"x": x})
        np.testing.assert_array_equal(
            y, np.concatenate([x[:, 1:], x[:, -1:], x[:, :-1]], axis=1))
    assert model.compilations == 2


def test_table_sliced_past_its_end(tmp_path):
    """y = x * sum(table[:n]) with a table of 1..16: the code compiled for
    every n takes n rows, assuming n <= 16; past it the JIT compiles for the
    shape, where ONNX cuts the slice to 16 rows (sum 136)."""
    model = kiln.compile(_encoded_lit_model(tmp_path, "table_sum_cut.textproto"), threads=1,
                         cache=False)
    for n, total in ((4, 10), (16, 136), (1, 1), (20, 136), (7, 28)):
        (y,) = model.run(None, {"x": np.ones((1, n), np.float32)})
        np.testing.assert_array_equal(y, np.full((1, n), total, np.float32))
    assert model.compilations == 2


SQUEEZENET = os.path.join(SHARED, "squeezenet1_1")


@pytest.mark.skipif(not os.path.exists(SQUEEZENET), reason="no squeezenet1_1 at KILN_SHARED_MODELS")
def test_tuned_compile_matches_reference_and_reuses_its_choices(tmp_path, monkeypatch):
    """tune=True times each convolution layer's schedules on this machine;
    whatever it picks, the outputs are ONNX Runtime's (the shared reference).
    Its choices go to the compile cache: a second tuned compile (the compiled
    code removed from the cache) reads every layer from there; a compile for
    another thread count tunes afresh."""
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    data = os.path.join(SQUEEZENET, "test_data_set_0")
    path = os.path.join(SQUEEZENET, "model.onnx")
    tuned = kiln.compile(path, threads=2, tune=True)
    feeds = {tuned.inputs[0].name: kiln.read_tensor(os.path.join(data, "input_0.pb"))}
    want = kiln.read_tensor(os.path.join(data, "output_0.pb"))
    np.testing.assert_allclose(tuned.run(None, feeds)[0], want, rtol=1e-3, atol=1e-4)
    first = tuned.tuning.split("\n")
    # SqueezeNet 1.1: 26 convolutions, 18 distinct layers (shape and
    # epilogue); the 1000-class head's 13x13 map has 169 pixels, so every
    # layer has more than one candidate.
    assert first[0].startswith("tuned 18 layers (0 from the cache)"), first[0]
    assert len(first) == 19
    assert len(glob.glob(os.path.join(str(tmp_path), "**", "*.ktune"), recursive=True)) == 18
    for code in glob.glob(os.path.join(str(tmp_path), "**", "*.kjit"), recursive=True):
        os.remove(code)
    again = kiln.compile(path, threads=2, tune=True)
    np.testing.assert_allclose(again.run(None, feeds)[0], want, rtol=1e-3, atol=1e-4)
    second = again.tuning.split("\n")
    assert second[0].startswith("tuned 18 layers (18 from the cache)"), second[0]
    # The same choices, layer by layer.
    schedules = lambda lines: [line.split("schedule ")[1].split(" ")[0] for line in lines[1:]]
    assert schedules(first) == schedules(second)
    assert kiln.compile(path, threads=2).tuning == ""
    # Another thread count is another tuning (and other compiled code).
    one = kiln.compile(path, threads=1, tune=True)
    np.testing.assert_allclose(one.run(None, feeds)[0], want, rtol=1e-3, atol=1e-4)
    assert one.tuning.startswith("tuned 18 layers (0 from the cache)"), one.tuning
