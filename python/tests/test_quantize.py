"""Tests of kiln.quantize (QDQ int8 models from float ones; run by CTest as
`python`). The float reference is computed here with NumPy from the test
model's own weights; the quantized model's layout is checked against the
form ONNX Runtime's quantize_static writes (s8 per-channel weights of zero
point 0, u8 activations, i32 biases in the scale input x weight)."""
import os
import subprocess
import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import kiln  # noqa: E402
from kiln.quantize import QuantizeError, quantize  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_PARENT = os.path.dirname(os.path.dirname(kiln.__file__))

RNG = np.random.default_rng(7)
W1 = (RNG.standard_normal((8, 3, 3, 3)) * 0.3).astype(np.float32)
B1 = (RNG.standard_normal(8) * 0.1).astype(np.float32)
W2 = (RNG.standard_normal((16, 8, 3, 3)) * 0.2).astype(np.float32)
B2 = (RNG.standard_normal(16) * 0.1).astype(np.float32)
W3 = (RNG.standard_normal((5, 16)) * 0.3).astype(np.float32)  # Gemm, transB=1
B3 = (RNG.standard_normal(5) * 0.1).astype(np.float32)


def small_cnn(path, opset=13):
    """Conv 3->8 (pad 1) -> Relu -> Conv 8->16 (stride 2) -> Relu ->
    GlobalAveragePool -> Flatten -> Gemm 16->5."""
    inits = [numpy_helper.from_array(a, n) for a, n in
             ((W1, "w1"), (B1, "b1"), (W2, "w2"), (B2, "b2"), (W3, "w3"), (B3, "b3"))]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], strides=[2, 2], pads=[1, 1, 1, 1],
                         name="conv2"),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "w3", "b3"], ["y"], transB=1, name="fc"),
    ]
    graph = helper.make_graph(
        nodes, "small_cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 12, 12])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 7
    onnx.save(model, path)


def conv_ref(x, w, b, stride, pad):
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    k = w.shape[2]
    oh = (x.shape[2] - k) // stride + 1
    ow = (x.shape[3] - k) // stride + 1
    y = np.zeros((x.shape[0], w.shape[0], oh, ow), np.float64)
    for i in range(oh):
        for j in range(ow):
            patch = x[:, :, i * stride:i * stride + k, j * stride:j * stride + k]
            y[:, :, i, j] = np.einsum("nckl,ockl->no", patch, w)
    return y + b.reshape(1, -1, 1, 1)


def float_ref(x):
    r1 = np.maximum(conv_ref(x, W1, B1, 1, 1), 0)
    r2 = np.maximum(conv_ref(r1, W2, B2, 2, 1), 0)
    return r2.mean(axis=(2, 3)) @ W3.T + B3


def feeds(n, seed=11):
    rng = np.random.default_rng(seed)
    return [{"x": rng.uniform(-1, 1, (1, 3, 12, 12)).astype(np.float32)} for _ in range(n)]


def assert_near_float_model(path, runs=4):
    """The quantized model at `path` runs (on the int8 kernels) close to
    NumPy's float reference: within a few steps of its output's scale on
    inputs like the calibration's."""
    m = onnx.load(path)
    inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    y_scale = inits[next(n for n in m.graph.node if n.op_type == "QuantizeLinear"
                         and n.input[0].startswith("y")).input[1]]
    model = kiln.compile(path, cache=False)
    for feed in feeds(runs, seed=99):
        (y,) = model.run(None, feed)
        np.testing.assert_allclose(y, float_ref(feed["x"].astype(np.float64)),
                                   atol=8 * float(y_scale))


def test_writes_the_quantize_static_layout_and_stays_near_the_float_model(tmp_path):
    src, out = str(tmp_path / "f.onnx"), str(tmp_path / "q.onnx")
    small_cnn(src)
    report = quantize(src, out, feeds(8))
    assert report["ops"] == 3 and report["feeds"] == 8
    m = onnx.load(out)
    onnx.checker.check_model(m)
    ops = [n.op_type for n in m.graph.node]
    # x, r1 (conv1 after its Relu), r2, f (the Gemm's input) and y.
    assert ops.count("QuantizeLinear") == 5
    inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    dq = {n.output[0]: n for n in m.graph.node if n.op_type == "DequantizeLinear"}
    for name, w, axis in (("conv1", W1, 0), ("conv2", W2, 0), ("fc", W3, 0)):
        node = next(n for n in m.graph.node if n.name == name)
        wdq = dq[node.input[1]]
        q, scale, zp = (inits[i] for i in wdq.input)
        assert q.dtype == np.int8 and zp.dtype == np.int8 and not zp.any()
        assert scale.shape == (w.shape[axis],) and q.min() >= -127
        # Symmetric: each channel's largest |w| is 127 steps.
        np.testing.assert_allclose(scale, np.abs(w.reshape(w.shape[0], -1)).max(axis=1) / 127,
                                   rtol=1e-6)
        np.testing.assert_allclose(q * scale.reshape((-1,) + (1,) * (w.ndim - 1)), w,
                                   atol=scale.max() / 2 + 1e-7)
        bq, bscale, bzp = (inits[i] for i in dq[node.input[2]].input)
        assert bq.dtype == np.int32 and not bzp.any()
        x_dq = dq[node.input[0]]
        x_scale = inits[x_dq.input[1]]
        np.testing.assert_allclose(bscale, x_scale * scale, rtol=1e-6)
    assert_near_float_model(out)


def test_calibration_folder_and_percentile(tmp_path):
    src, out = str(tmp_path / "f.onnx"), str(tmp_path / "q.onnx")
    small_cnn(src)
    for k, feed in enumerate(feeds(3)):
        d = tmp_path / "cal" / f"test_data_set_{k}"
        d.mkdir(parents=True)
        onnx.save_tensor(numpy_helper.from_array(feed["x"]), str(d / "input_0.pb"))
    minmax = quantize(src, out, str(tmp_path / "cal"))
    assert minmax["feeds"] == 3
    scale_of = lambda m: {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}["x_scale"]
    s_minmax = scale_of(onnx.load(out))
    quantize(src, out, str(tmp_path / "cal"), method="percentile", percentile=90.0)
    # Percentiles inside the extremes: a narrower range, a smaller scale.
    assert scale_of(onnx.load(out)) < s_minmax


def test_bad_inputs_are_errors(tmp_path):
    src, out = str(tmp_path / "f.onnx"), str(tmp_path / "q.onnx")
    small_cnn(src)
    with pytest.raises(QuantizeError, match="calibration set is empty"):
        quantize(src, out, [])
    with pytest.raises(QuantizeError, match="no test_data_set_"):
        quantize(src, out, str(tmp_path))
    with pytest.raises(QuantizeError, match="unknown calibration method"):
        quantize(src, out, feeds(1), method="entropy")
    old = str(tmp_path / "old.onnx")
    small_cnn(old, opset=11)
    with pytest.raises(QuantizeError, match="opset is 11"):
        quantize(old, out, feeds(1))
    assert not os.path.exists(out)


def test_command_line(tmp_path):
    src, out = str(tmp_path / "f.onnx"), str(tmp_path / "q.onnx")
    small_cnn(src)
    env = dict(os.environ, PYTHONPATH=PACKAGE_PARENT)
    r = subprocess.run([sys.executable, "-m", "kiln", "quantize", src, "-o", out,
                        "--calibration", str(tmp_path / "missing")],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 2 and "no test_data_set_" in r.stderr
    d = tmp_path / "cal" / "test_data_set_0"
    d.mkdir(parents=True)
    onnx.save_tensor(numpy_helper.from_array(feeds(1)[0]["x"]), str(d / "input_0.pb"))
    r = subprocess.run([sys.executable, "-m", "kiln", "quantize", src, "-o", out,
                        "--calibration", str(tmp_path / "cal")],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert "3 ops" in r.stdout and os.path.exists(out)


def test_dynamic_layout_runs_exactly_as_onnx_defines_it(tmp_path):
    from kiln.quantize import quantize_dynamic
    src, out = str(tmp_path / "f.onnx"), str(tmp_path / "q.onnx")
    rng = np.random.default_rng(3)
    w = rng.standard_normal((16, 6)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "mm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 6])],
        initializer=[numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    onnx.save(model, src)
    assert quantize_dynamic(src, out)["ops"] == 1
    m = onnx.load(out)
    assert [n.op_type for n in m.graph.node] == \
        ["DynamicQuantizeLinear", "MatMulInteger", "Cast", "Mul", "Mul"]
    x = rng.uniform(-3, 2, (3, 16)).astype(np.float32)
    # ONNX's definitions, in NumPy: DynamicQuantizeLinear (u8, range with
    # 0), s8 weights symmetric per tensor, the integer product, the scales.
    lo, hi = min(float(x.min()), 0.0), max(float(x.max()), 0.0)
    a_scale = np.float32((hi - lo) / 255)
    a_zp = np.clip(np.rint(np.float32(0) - np.float32(lo) / a_scale), 0, 255)
    xq = np.clip(np.rint(x / a_scale) + a_zp, 0, 255).astype(np.int64)
    w_scale = np.float32(np.abs(w).max() / 127)
    wq = np.clip(np.rint(w / w_scale), -127, 127).astype(np.int64)
    want = ((xq - int(a_zp)) @ wq).astype(np.float32) * np.float32(a_scale * w_scale)
    (y,) = kiln.compile(out, cache=False).run(None, {"x": x})
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(y, x @ w, atol=0.05 * np.abs(x @ w).max())


def test_qoperator_form(tmp_path):
    """quant_format="qoperator": QLinearConv for the convolutions (their
    Relu gone: the output range starts at 0), QLinearGlobalAveragePool from
    the com.microsoft domain, the Gemm left in QDQ form; the model runs
    close to NumPy's float reference, as the QDQ one does."""
    src, out = str(tmp_path / "f.onnx"), str(tmp_path / "q.onnx")
    small_cnn(src)
    report = quantize(src, out, feeds(8), quant_format="qoperator")
    assert report["format"] == "qoperator" and report["qoperator_ops"] == 3
    m = onnx.load(out)
    onnx.checker.check_model(m)
    ops = [(n.op_type, n.domain) for n in m.graph.node]
    assert ops.count(("QLinearConv", "")) == 2
    assert ("QLinearGlobalAveragePool", "com.microsoft") in ops
    assert ("Relu", "") not in ops and ("Conv", "") not in ops and ("Gemm", "") in ops
    assert any(o.domain == "com.microsoft" and o.version == 1 for o in m.opset_import)
    conv = next(n for n in m.graph.node if n.op_type == "QLinearConv")
    assert len(conv.input) == 9  # x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, bias
    inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    assert inits[conv.input[3]].dtype == np.int8 and inits[conv.input[8]].dtype == np.int32
    assert_near_float_model(out)
    with pytest.raises(QuantizeError, match="unknown format"):
        quantize(src, out, feeds(2), quant_format="qlinear")


def test_weights_behind_identity_nodes(tmp_path):
    """PyTorch writes a duplicate weight or bias as Identity(initializer)
    (EfficientNet's squeeze-excitation biases): it is quantized as the
    initializer it is, and the Identity goes."""
    src, out = str(tmp_path / "f.onnx"), str(tmp_path / "q.onnx")
    small_cnn(src)
    m = onnx.load(src)
    conv1 = next(n for n in m.graph.node if n.name == "conv1")
    conv1.input[2] = "b1_copy"
    m.graph.node.insert(0, helper.make_node("Identity", ["b1"], ["b1_copy"]))
    onnx.save(m, src)
    report = quantize(src, out, feeds(4))
    assert report["ops"] == 3
    q = onnx.load(out)
    assert "Identity" not in [n.op_type for n in q.graph.node]
    assert_near_float_model(out, runs=2)


def test_qoperator_keeps_what_is_not_exact_or_not_float(tmp_path):
    """A Clip whose lower bound is not 0 is more than the u8 saturation: its
    Conv stays in QDQ form (the Clip kept). Integer shape arithmetic (an
    int64 Mul of two dims) is not quantized."""
    src, out = str(tmp_path / "f.onnx"), str(tmp_path / "q.onnx")
    small_cnn(src)
    m = onnx.load(src)
    relu1 = next(n for n in m.graph.node if n.output[0] == "r1")
    relu1.op_type = "Clip"
    relu1.input.extend(["lo", "hi"])
    m.graph.initializer.extend([numpy_helper.from_array(np.array(0.25, np.float32), "lo"),
                                numpy_helper.from_array(np.array(6.0, np.float32), "hi"),
                                numpy_helper.from_array(np.array(2, np.int64), "two")])
    m.graph.node.extend([helper.make_node("Shape", ["x"], ["s"]),
                         helper.make_node("Gather", ["s", "two"], ["d"]),
                         helper.make_node("Mul", ["d", "d"], ["area"])])
    m.graph.output.append(helper.make_tensor_value_info("area", TensorProto.INT64, []))
    onnx.save(m, src)
    quantize(src, out, feeds(4), quant_format="qoperator")
    q = onnx.load(out)
    onnx.checker.check_model(q, full_check=True)
    ops = [n.op_type for n in q.graph.node]
    assert ops.count("QLinearConv") == 1 and "Clip" in ops and "Conv" in ops
    assert "Mul" in ops and "QLinearMul" not in ops
    area = next(n for n in q.graph.node if n.output[0] == "area")
    assert list(area.input) == ["d", "d"]
    model = kiln.compile(out, cache=False)
    y, a = model.run(None, feeds(1, seed=5)[0])
    assert int(a) == 144
