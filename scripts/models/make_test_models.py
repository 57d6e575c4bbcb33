#!/usr/bin/env python3
"""Writes the small exported models of test/e2e/models (checked in: CI has
neither PyTorch nor ONNX Runtime, and each model is a few kilobytes).

    /usr/bin/python3 scripts/models/make_test_models.py [--out DIR]

Each model goes to OUT/NAME/model.onnx with test_data_set_K/input_J.pb and
output_J.pb, the outputs computed by ONNX Runtime (onnxruntime-node, through
ort_reference.js) and kept only when they agree with PyTorch's own outputs
where PyTorch made the model. The end-to-end tests (test/CMakeLists.txt) run
`kiln-run --check` on every set.

| model | what it exercises |
| --- | --- |
| loop_if | TorchScript export: a Loop with a run-time trip count and loop-carried state, then an If on a value computed at run time |
| loop_rnn | TorchScript export of an RNN written as a Python loop: a Loop whose body Gathers x[t] and appends each step's output to a sequence (SequenceEmpty / SequenceInsert / ConcatFromSequence) |
| scan_rnn | Scan (opset 16) with a reversed scanned input, a scan output along axis 1, an RNN-style tanh cell |
| rnn_seq_lens | bidirectional LSTM and a GRU over a padded batch with run-time sequence_lens (lengths 7, 3, 0, 5) |
| qdq_cnn | a CNN in the QDQ form ONNX Runtime's quantizer writes: uint8 activations, per-channel int8 conv weights, int32 biases, QuantizeLinear/DequantizeLinear around Conv, Relu, MaxPool, Add, GlobalAveragePool and Gemm |
| masked_select | TorchScript export of `x[x > t]` and `torch.nonzero(x > 0)` with a threshold computed from the input: NonZero, Transpose and GatherND on run-time values, outputs whose length depends on the data |
| qlinear_cnn | the QOperator form: QuantizeLinear, two QLinearConv (per-channel int8 weights, int32 biases, 16 channels on 14x14) and DequantizeLinear; Kiln runs them on the f32 kernels where the integer sums are exact in f32, so outputs must match ONNX Runtime's integer kernels to the quantum |
| qdq_convnet | the QDQ form with two 64-channel 3x3 convolutions (one with a Relu before a non-zero output zero point) and a per-column quantized MatMul, which Kiln fuses into integer kernels; checked to the bit |
| gpt2_kv | a GPT-2-style decoder step with a KV cache: past and new lengths, batch dynamic; run from an empty past (0-length cache), then with 7 cached and 1 new token |
| gpt2_hf_mask | gpt2_kv with Hugging Face GPT-2's causal mask: a slice of a 32 x 32 buffer from past to past + new rows and up to past + new columns, bounds from the inputs' shapes, one compile for every length (the slices assume past + new <= 32, checked at entry) |
| bert_mask | a BERT-style encoder with input_ids and attention_mask (torch's TransformerEncoder, key padding mask), batch and length dynamic: 1 x 7, 3 x 5 and 2 x 12, rows padded to different lengths |
| swin_block | two torchvision Swin Transformer blocks (plain and shifted 4x4 windows) with a dynamic batch: the window pad and the shifted window's mask come from shape arithmetic; batch 1, 3 and 2 |
| bilstm_tagger | a bidirectional LSTM tagger with dynamic batch and length, batch 1 x 40 and 3 x 9 |
| empty_tensors | MatMul/Gemm with K = 0, Concat with an empty part, reductions over an empty axis, Softmax/LayerNormalization/Add on empty tensors |
| if_sample_rate | If on a scalar sample-rate input whose branches differ in rank (as in Silero VAD): Kiln specialises on the input's value |
| qdq_tool_cnn | a small MobileNet-style CNN (ReLU6, a max pool on the bytes, a depthwise block, a residual Add, a linear head) exported by PyTorch and quantized by Kiln's own kiln-quantize (kiln.quantize, needs PYTHONPATH=build/python): the int8 kernels (direct, flat and depthwise windows, each requantizing its result itself), Clip fused into the requantization; ONNX Runtime runs the same file on its integer kernels |
| qoperator_tool_cnn | a CNN with a residual Add, a squeeze-excitation gate (GlobalAveragePool, Sigmoid, Mul), AveragePool, Concat, LeakyRelu and a MatMul head, quantized by kiln-quantize in ONNX Runtime's QOperator form (needs PYTHONPATH=build/python): QLinearConv, QLinearMatMul and the com.microsoft QLinearAdd, QLinearMul, QLinearSigmoid, QLinearGlobalAveragePool, QLinearAveragePool, QLinearConcat and QLinearLeakyRelu; ONNX Runtime runs the same file |
| dynamic_quant_mlp | ONNX Runtime's quantize_dynamic form (DynamicQuantizeLinear, MatMulInteger with constant s8 weights, the scales applied in float) on a [2, seq, 64] input with seq dynamic (5 and 9): the int8 kernel over a run-time number of rows, a zero point known only at run time |
| keypoint_decode | torchvision's keypoint decoding (`heatmaps_to_keypoints`, as Keypoint R-CNN exports it) after a small detector: NonMaxSuppression picks the boxes, then a Loop over the detections resizes each one's heatmaps (bicubic) to its box's size, computed from the box, takes ArgMax positions and appends a row per detection to two tensors: shapes computed from data inside a loop, and 9 or 10 detections |
| resize_runtime_sizes | Resize (linear align_corners, nearest asymmetric, cubic with exclude_outside) to sizes computed from the input's values, so neither the sizes nor the result's dims are known while compiling |
| resize_fractional | Resize of a static-shaped input by scales that are no powers of two (sizes 45x56 -> 48x60 and 37x41, scales 1.3 and 0.7; linear, cubic, nearest) on a +-100 checkerboard: the taps' source coordinates computed in float32 as ONNX Runtime does |
| cnn_image_size | a small segmentation-style CNN (strided and depthwise convolutions, max pooling, average pooling in ceil mode, squeeze-and-excitation, a channel shuffle on x.size(), logits resized to the input's size and upsampled by 2) with batch, height and width dynamic: 1 x 32 x 32, 2 x 24 x 40, 1 x 17 x 23, one compile for every size |
| position_table | a BERT-style embedding with batch and length dynamic: a learned table of 16 positions sliced to the length (`pos[:n]`) and position ids taken from a [1, 16] buffer (`position_ids[:, :n]`, as Hugging Face's BERT writes it), each Slice's end from Shape(x): lengths 5, 16 (the whole table) and 1, one compile for every length (the slices assume n <= 16, checked at entry) |
| ssd_tail | an SSD-style detector: a conv head giving 256 anchor boxes and 3 classes of scores, NonMaxSuppression on them (computed at run time), then the selected boxes and scores gathered: outputs whose number of rows depends on the image |

Needs python3-torch, python3-onnx, python3-numpy and onnxruntime-node (see
README.md beside this script).
"""

import argparse
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
import torch  # noqa: E402

from export_models import check_ort, ort_dir, ort_reference  # noqa: E402
import make_quant_bench  # noqa: E402

ATOL = 1e-4
RTOL = 1e-4


class LoopIf(torch.nn.Module):
    """h <- tanh(W h + b) + h, `steps` times; then one of two heads, picked by
    the sign of a gate computed from h."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(16, 16)
        self.gate = torch.nn.Linear(16, 1)

    def forward(self, x, steps: torch.Tensor):
        h = x
        for _ in range(int(steps)):
            h = torch.tanh(self.lin(h)) + h
        if bool(self.gate(h).sum() > 0):
            y = torch.relu(h) * 2.0
        else:
            y = torch.sigmoid(h) - 1.0
        return y


def loop_if(folder):
    torch.manual_seed(0)
    module = LoopIf()
    scripted = torch.jit.script(module)
    x = torch.randn(4, 16)
    model_path = os.path.join(folder, "model.onnx")
    torch.onnx.export(scripted, (x, torch.tensor(3)), model_path, opset_version=13,
                      input_names=["x", "steps"], output_names=["y"])
    ops = {n.op_type for n in onnx.load(model_path).graph.node}
    assert {"Loop", "If"} <= ops, f"the export has no Loop/If: {sorted(ops)}"
    # Two sets that take different branches, one with no iterations at all.
    sets = []
    for steps, sign in ((3, 1.0), (0, -1.0), (5, -1.0)):
        xs = sign * x
        with torch.no_grad():
            ref = module(xs, torch.tensor(steps)).numpy()
        sets.append(([xs.numpy(), np.array(steps, dtype=np.int64)], [ref]))
    return sets


class LoopRNN(torch.nn.Module):
    """h <- tanh(Wx x[t] + Wh h), y[t] = Wo h, as a Python loop."""

    def __init__(self):
        super().__init__()
        self.wx = torch.nn.Linear(8, 12)
        self.wh = torch.nn.Linear(12, 12)
        self.out = torch.nn.Linear(12, 3)

    def forward(self, x):
        h = torch.zeros(x.size(1), 12)
        ys = []
        for t in range(x.size(0)):
            h = torch.tanh(self.wx(x[t]) + self.wh(h))
            ys.append(self.out(h))
        return torch.stack(ys), h


def loop_rnn(folder):
    torch.manual_seed(0)
    module = LoopRNN()
    x = torch.randn(6, 2, 8)
    model_path = os.path.join(folder, "model.onnx")
    torch.onnx.export(torch.jit.script(module), (x,), model_path, opset_version=13,
                      input_names=["x"], output_names=["y", "h"])
    ops = {n.op_type for n in onnx.load(model_path).graph.node}
    assert {"Loop", "SequenceEmpty"} <= ops, f"unexpected export: {sorted(ops)}"
    with torch.no_grad():
        y, h = module(x)
    return [([x.numpy()], [y.numpy(), h.numpy()])]


def scan_rnn(folder):
    """A Scan built with ONNX's helpers (PyTorch does not export Scan): an
    RNN cell h' = tanh(x W + h R) over the time axis of x (1x? layout [B, T,
    D], scanned along axis 1, backwards), emitting h' along axis 1."""
    rng = np.random.default_rng(3)
    d, hdim, t, b = 5, 6, 7, 2
    w = rng.standard_normal((d, hdim)).astype(np.float32) * 0.5
    r = rng.standard_normal((hdim, hdim)).astype(np.float32) * 0.5
    body = helper.make_graph(
        [helper.make_node("MatMul", ["x_t", "W"], ["xw"]),
         helper.make_node("MatMul", ["h", "R"], ["hr"]),
         helper.make_node("Add", ["xw", "hr"], ["pre"]),
         helper.make_node("Tanh", ["pre"], ["h_next"]),
         helper.make_node("Identity", ["h_next"], ["y_t"])],
        "cell",
        [helper.make_tensor_value_info("h", TensorProto.FLOAT, [b, hdim]),
         helper.make_tensor_value_info("x_t", TensorProto.FLOAT, [b, d])],
        [helper.make_tensor_value_info("h_next", TensorProto.FLOAT, [b, hdim]),
         helper.make_tensor_value_info("y_t", TensorProto.FLOAT, [b, hdim])])
    node = helper.make_node("Scan", ["h0", "x"], ["h_last", "ys"], body=body,
                            num_scan_inputs=1, scan_input_axes=[1],
                            scan_input_directions=[1], scan_output_axes=[1])
    graph = helper.make_graph(
        [node], "scan_rnn",
        [helper.make_tensor_value_info("h0", TensorProto.FLOAT, [b, hdim]),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, [b, t, d])],
        [helper.make_tensor_value_info("h_last", TensorProto.FLOAT, [b, hdim]),
         helper.make_tensor_value_info("ys", TensorProto.FLOAT, [b, t, hdim])],
        initializer=[numpy_helper.from_array(w, "W"), numpy_helper.from_array(r, "R")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(folder, "model.onnx"))
    h0 = rng.standard_normal((b, hdim)).astype(np.float32)
    x = rng.standard_normal((b, t, d)).astype(np.float32)
    return [([h0, x], None)]


def save_model(folder, graph, opset, ir_version=7):
    """Checks a graph built with ONNX's helpers and writes it as
    FOLDER/model.onnx."""
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = ir_version
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(folder, "model.onnx"))


def rnn_seq_lens(folder):
    """A bidirectional LSTM (with initial states) and a GRU on its output,
    both reading sequence_lens, a graph input: padded batch entries of
    different lengths, one empty."""
    rng = np.random.default_rng(5)
    t, b, d, h = 7, 4, 6, 5
    def w(*shape):
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.4).astype(np.float32))
    inits = [w(2, 4 * h, d), w(2, 4 * h, h), w(2, 8 * h), w(2, b, h), w(2, b, h),
             w(1, 3 * h, 2 * h), w(1, 3 * h, h), w(1, 6 * h)]
    for init, name in zip(inits, ["W", "R", "B", "h0", "c0", "GW", "GR", "GB"]):
        init.name = name
    nodes = [
        helper.make_node("LSTM", ["x", "W", "R", "B", "lens", "h0", "c0"], ["y", "yh", "yc"],
                         hidden_size=h, direction="bidirectional"),
        # [T, 2, B, H] -> [T, B, 2H]
        helper.make_node("Transpose", ["y"], ["y_t"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["y_t", "shape"], ["y2"]),
        helper.make_node("GRU", ["y2", "GW", "GR", "GB", "lens"], ["gy", "gyh"], hidden_size=h,
                         linear_before_reset=1),
    ]
    inits.append(numpy_helper.from_array(np.array([t, b, 2 * h], dtype=np.int64), "shape"))
    graph = helper.make_graph(
        nodes, "rnn_seq_lens",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [t, b, d]),
         helper.make_tensor_value_info("lens", TensorProto.INT32, [b])],
        [helper.make_tensor_value_info("yh", TensorProto.FLOAT, [2, b, h]),
         helper.make_tensor_value_info("yc", TensorProto.FLOAT, [2, b, h]),
         helper.make_tensor_value_info("gy", TensorProto.FLOAT, [t, 1, b, h]),
         helper.make_tensor_value_info("gyh", TensorProto.FLOAT, [1, b, h])],
        initializer=inits)
    save_model(folder, graph, opset=14)
    x = rng.standard_normal((t, b, d)).astype(np.float32)
    return [([x, np.array([7, 3, 0, 5], dtype=np.int32)], None),
            ([x, np.array([1, 7, 7, 2], dtype=np.int32)], None)]


def rnn_variants(folder):
    """The recurrent cells' other options, each over 6 steps (a loop over
    time in Kiln): a reversed LSTM with peepholes and clip, a reversed GRU
    with linear_before_reset=0 on its output, and a bidirectional RNN with
    initial state on that, sequence_lens on the last two."""
    rng = np.random.default_rng(11)
    t, b, d, h = 6, 3, 4, 5
    def w(name, *shape, scale=0.4):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)
    inits = [w("LW", 1, 4 * h, d), w("LR", 1, 4 * h, h), w("LB", 1, 8 * h, scale=0.1),
             w("LP", 1, 3 * h, scale=0.3),
             w("GW", 1, 3 * h, h), w("GR", 1, 3 * h, h), w("GB", 1, 6 * h, scale=0.1),
             w("RW", 2, h, h), w("RR", 2, h, h), w("RB", 2, 2 * h, scale=0.1),
             w("RH0", 2, b, h, scale=0.3),
             numpy_helper.from_array(np.array([t, b, h], dtype=np.int64), "shape")]
    nodes = [
        helper.make_node("LSTM", ["x", "LW", "LR", "LB", "", "", "", "LP"], ["ly", "lyh", "lyc"],
                         hidden_size=h, direction="reverse", clip=1.5),
        helper.make_node("Reshape", ["ly", "shape"], ["ly2"]),
        helper.make_node("GRU", ["ly2", "GW", "GR", "GB", "lens"], ["gy", "gyh"], hidden_size=h,
                         direction="reverse", linear_before_reset=0),
        helper.make_node("Reshape", ["gy", "shape"], ["gy2"]),
        helper.make_node("RNN", ["gy2", "RW", "RR", "RB", "lens", "RH0"], ["ry", "ryh"],
                         hidden_size=h, direction="bidirectional"),
    ]
    graph = helper.make_graph(
        nodes, "rnn_variants",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [t, b, d]),
         helper.make_tensor_value_info("lens", TensorProto.INT32, [b])],
        [helper.make_tensor_value_info("lyc", TensorProto.FLOAT, [1, b, h]),
         helper.make_tensor_value_info("gyh", TensorProto.FLOAT, [1, b, h]),
         helper.make_tensor_value_info("ry", TensorProto.FLOAT, [t, 2, b, h]),
         helper.make_tensor_value_info("ryh", TensorProto.FLOAT, [2, b, h])],
        initializer=inits)
    save_model(folder, graph, opset=14)
    x = rng.standard_normal((t, b, d)).astype(np.float32)
    return [([x, np.array([6, 2, 0], dtype=np.int32)], None),
            ([x, np.array([6, 6, 6], dtype=np.int32)], None)]


def qdq_cnn(folder):
    """Built with ONNX's helpers in the layout of ONNX Runtime's static QDQ
    quantization (activations uint8 per tensor, weights int8 per output
    channel, biases int32 with scale = input scale * weight scale)."""
    rng = np.random.default_rng(11)
    nodes, inits = [], []

    def const(name, value):
        inits.append(numpy_helper.from_array(value, name))
        return name

    def qdq(x, scale, zero, name):
        s = const(name + "_s", np.array(scale, dtype=np.float32))
        z = const(name + "_z", np.array(zero, dtype=np.uint8))
        nodes.append(helper.make_node("QuantizeLinear", [x, s, z], [name + "_q"]))
        nodes.append(helper.make_node("DequantizeLinear", [name + "_q", s, z], [name + "_dq"]))
        return name + "_dq", scale

    def conv(x, x_scale, cin, cout, k, name, pads):
        w = (rng.standard_normal((cout, cin, k, k)) / np.sqrt(cin * k * k)).astype(np.float32)
        w_scale = (np.abs(w).reshape(cout, -1).max(axis=1) / 127).astype(np.float32)
        wq = np.clip(np.round(w / w_scale[:, None, None, None]), -127, 127).astype(np.int8)
        b = (rng.standard_normal(cout) * 0.1).astype(np.float32)
        b_scale = (x_scale * w_scale).astype(np.float32)
        bq = np.round(b / b_scale).astype(np.int32)
        nodes.append(helper.make_node(
            "DequantizeLinear", [const(name + "_wq", wq), const(name + "_ws", w_scale),
                                 const(name + "_wz", np.zeros(cout, np.int8))], [name + "_w"],
            axis=0))
        nodes.append(helper.make_node(
            "DequantizeLinear", [const(name + "_bq", bq), const(name + "_bs", b_scale),
                                 const(name + "_bz", np.zeros(cout, np.int32))], [name + "_b"],
            axis=0))
        nodes.append(helper.make_node("Conv", [x, name + "_w", name + "_b"], [name + "_y"],
                                      pads=[pads] * 4))
        return name + "_y"

    x, s = qdq("x", 0.02, 128, "in")
    y = conv(x, s, 3, 8, 3, "c1", 1)
    nodes.append(helper.make_node("Relu", [y], ["r1"]))
    a1, s1 = qdq("r1", 0.01, 0, "a1")
    nodes.append(helper.make_node("MaxPool", [a1], ["p1"], kernel_shape=[2, 2], strides=[2, 2]))
    p1, s1 = qdq("p1", 0.01, 0, "p1q")
    y2 = conv(p1, s1, 8, 8, 3, "c2", 1)
    a2, s2 = qdq(y2, 0.01, 128, "a2")
    nodes.append(helper.make_node("Add", [a2, p1], ["sum"]))
    a3, s3 = qdq("sum", 0.015, 128, "a3")
    nodes.append(helper.make_node("GlobalAveragePool", [a3], ["gap"]))
    g, sg = qdq("gap", 0.005, 128, "g")
    nodes.append(helper.make_node("Flatten", [g], ["flat"]))
    fw = (rng.standard_normal((8, 4)) * 0.3).astype(np.float32)
    fs = np.float32(np.abs(fw).max() / 127)
    nodes.append(helper.make_node(
        "DequantizeLinear", [const("fc_wq", np.round(fw / fs).astype(np.int8)),
                             const("fc_ws", np.array(fs, np.float32)),
                             const("fc_wz", np.array(0, np.int8))], ["fc_w"]))
    nodes.append(helper.make_node("Gemm", ["flat", "fc_w"], ["logits"]))
    out, _ = qdq("logits", 0.01, 128, "out")
    nodes.append(helper.make_node("Identity", [out], ["y"]))
    graph = helper.make_graph(
        nodes, "qdq_cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(folder, "model.onnx"))
    return [([rng.standard_normal((1, 3, 16, 16)).astype(np.float32)], None),
            ([rng.uniform(-2.5, 2.5, (1, 3, 16, 16)).astype(np.float32)], None)]


class MaskedSelect(torch.nn.Module):
    """Entries above the input's mean, doubled, and the coordinates of the
    positive ones: both of data-dependent size."""

    def forward(self, x):
        picked = x[x > x.mean()] * 2.0
        return picked, torch.nonzero(x > 0)


def masked_select(folder):
    torch.manual_seed(3)
    model_path = os.path.join(folder, "model.onnx")
    x = torch.randn(4, 6)
    torch.onnx.export(MaskedSelect(), (x,), model_path, opset_version=13,
                      input_names=["x"], output_names=["picked", "where"])
    ops = {n.op_type for n in onnx.load(model_path).graph.node}
    assert "NonZero" in ops, f"the export has no NonZero: {sorted(ops)}"
    sets = []
    for seed in (1, 2):
        g = torch.Generator().manual_seed(seed)
        xi = torch.randn(4, 6, generator=g)
        picked, where = MaskedSelect()(xi)
        sets.append(([xi.numpy()], [picked.numpy(), where.numpy()]))
    return sets


def qlinear_cnn(folder):
    rng = np.random.default_rng(29)
    x = make_quant_bench.qlinear_cnn(folder, rng, c=16, hw=14)[0]
    return [([x], None), ([rng.uniform(-2, 2, x.shape).astype(np.float32)], None)]


def ssd_tail(folder):
    """Built with ONNX's helpers: boxes = anchors (4x4 boxes at stride 1 on a
    16x16 grid, [y1, x1, y2, x2]) + 0.05 x a 1x1 conv's deltas, scores =
    sigmoid of another; NonMaxSuppression (at most 100 per class, IoU 0.5,
    score 0.3); the selected boxes by Gather on the box column, their scores
    by Gather at class * 256 + box of the flattened scores."""
    rng = np.random.default_rng(17)
    n, classes = 256, 3
    ys, xs = np.meshgrid(np.arange(16), np.arange(16), indexing="ij")
    anchors = np.stack([ys, xs, ys + 4, xs + 4], axis=-1).reshape(1, n, 4).astype(np.float32)
    def w(name, *shape, scale=0.3):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)
    def i64(name, values):
        return numpy_helper.from_array(np.array(values, dtype=np.int64), name)
    def f32(name, values):
        return numpy_helper.from_array(np.array(values, dtype=np.float32), name)
    inits = [w("w1", 8, 3, 3, 3), w("b1", 8), w("wb", 4, 8, 1, 1), w("bb", 4),
             w("ws", classes, 8, 1, 1), w("bs", classes),
             numpy_helper.from_array(anchors, "anchors"), f32("scale", 0.05),
             i64("box_shape", [1, n, 4]), i64("score_shape", [1, classes, n]),
             i64("max_out", [100]), f32("iou", [0.5]), f32("score_thr", [0.3]),
             i64("col_class", 1), i64("col_box", 2), i64("n", n), i64("flat", [-1]),
             i64("rows", [n, 4])]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["f"]),
        helper.make_node("Conv", ["f", "wb", "bb"], ["deltas_nchw"]),
        helper.make_node("Transpose", ["deltas_nchw"], ["deltas_nhwc"], perm=[0, 2, 3, 1]),
        helper.make_node("Reshape", ["deltas_nhwc", "box_shape"], ["deltas"]),
        helper.make_node("Mul", ["deltas", "scale"], ["offsets"]),
        helper.make_node("Add", ["anchors", "offsets"], ["boxes"]),
        helper.make_node("Conv", ["f", "ws", "bs"], ["logits"]),
        helper.make_node("Reshape", ["logits", "score_shape"], ["logits3"]),
        helper.make_node("Sigmoid", ["logits3"], ["scores"]),
        helper.make_node("NonMaxSuppression", ["boxes", "scores", "max_out", "iou", "score_thr"],
                         ["selected"]),
        helper.make_node("Gather", ["selected", "col_box"], ["box_index"], axis=1),
        helper.make_node("Gather", ["selected", "col_class"], ["class_index"], axis=1),
        helper.make_node("Reshape", ["boxes", "rows"], ["box_rows"]),
        helper.make_node("Gather", ["box_rows", "box_index"], ["det_boxes"], axis=0),
        helper.make_node("Mul", ["class_index", "n"], ["class_base"]),
        helper.make_node("Add", ["class_base", "box_index"], ["score_index"]),
        helper.make_node("Reshape", ["scores", "flat"], ["score_list"]),
        helper.make_node("Gather", ["score_list", "score_index"], ["det_scores"], axis=0),
    ]
    graph = helper.make_graph(
        nodes, "ssd_tail", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("selected", TensorProto.INT64, ["K", 3]),
         helper.make_tensor_value_info("det_boxes", TensorProto.FLOAT, ["K", 4]),
         helper.make_tensor_value_info("det_scores", TensorProto.FLOAT, ["K"])],
        initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(folder, "model.onnx"))
    return [([rng.standard_normal((1, 3, 16, 16)).astype(np.float32)], None),
            ([rng.uniform(-3, 3, (1, 3, 16, 16)).astype(np.float32)], None)]


def qdq_convnet(folder):
    """The QDQ form at a size where rounding matters: two 3x3 convolutions
    of 64 channels (576 products per output), the first followed by a Relu
    whose output zero point is not 0, and a per-column quantized MatMul.
    Kiln fuses each chain into an integer kernel (QdqFusion.cpp), as ONNX
    Runtime does; all 16,384 quantized values of the second convolution
    and the MatMul's outputs must match ONNX Runtime's to the bit.

    The first convolution stays in float in both (the Relu before a
    non-zero zero point), so its input and weight scales are powers of
    two: every product and partial sum is then exact in float32 and its
    result does not depend on the order of the sum. With other scales a
    value near a rounding tie of the next QuantizeLinear went either way
    with the summation order, which neither runtime specifies (Kiln adding
    the bias last moved two outputs by one step)."""
    rng = np.random.default_rng(23)
    nodes, inits = [], []

    def const(name, value):
        inits.append(numpy_helper.from_array(value, name))
        return name

    def q(x, scale, zero, name):
        nodes.append(helper.make_node("QuantizeLinear", [x, const(name + "_s", np.array(scale, np.float32)),
                                                         const(name + "_z", np.array(zero, np.uint8))],
                                      [name + "_q"]))
        return name + "_q"

    def dq(xq, name):
        nodes.append(helper.make_node("DequantizeLinear", [xq, name + "_s", name + "_z"], [name + "_dq"]))
        return name + "_dq"

    def conv(x, x_scale, cin, cout, name, exact=False):
        w = (rng.standard_normal((cout, cin, 3, 3)) / np.sqrt(cin * 9)).astype(np.float32)
        w_scale = (np.abs(w).reshape(cout, -1).max(axis=1) / 127).astype(np.float32)
        if exact:
            w_scale = np.exp2(np.ceil(np.log2(w_scale))).astype(np.float32)
        wq = np.clip(np.round(w / w_scale[:, None, None, None]), -127, 127).astype(np.int8)
        b_scale = (np.float32(x_scale) * w_scale).astype(np.float32)
        bq = np.round(rng.standard_normal(cout) * 0.1 / b_scale).astype(np.int32)
        nodes.append(helper.make_node(
            "DequantizeLinear", [const(name + "_wq", wq), const(name + "_ws", w_scale),
                                 const(name + "_wz", np.zeros(cout, np.int8))], [name + "_w"], axis=0))
        nodes.append(helper.make_node(
            "DequantizeLinear", [const(name + "_bq", bq), const(name + "_bs", b_scale),
                                 const(name + "_bz", np.zeros(cout, np.int32))], [name + "_b"], axis=0))
        nodes.append(helper.make_node("Conv", [x, name + "_w", name + "_b"], [name + "_y"], pads=[1] * 4,
                                      name=name))
        return name + "_y"

    x = dq(q("x", 2.0 ** -5, 128, "in"), "in")
    y = conv(x, 2.0 ** -5, 16, 64, "c1", exact=True)
    nodes.append(helper.make_node("Relu", [y], ["r1"]))
    a1 = dq(q("r1", 0.02, 10, "a1"), "a1")
    y2 = conv(a1, 0.02, 64, 64, "c2")
    a2 = dq(q(y2, 0.05, 128, "a2"), "a2")
    nodes.append(helper.make_node("GlobalAveragePool", [a2], ["gap"]))
    nodes.append(helper.make_node("Flatten", ["gap"], ["flat"]))
    g = dq(q("flat", 0.01, 128, "g"), "g")
    fw = (rng.standard_normal((64, 32)) * 0.2).astype(np.float32)
    fs = (np.abs(fw).max(axis=0) / 127).astype(np.float32)
    nodes.append(helper.make_node(
        "DequantizeLinear", [const("fc_wq", np.round(fw / fs).astype(np.int8)), const("fc_ws", fs),
                             const("fc_wz", np.zeros(32, np.int8))], ["fc_w"], axis=1))
    nodes.append(helper.make_node("MatMul", [g, "fc_w"], ["logits"], name="fc"))
    out = dq(q("logits", 0.02, 128, "out"), "out")
    # The conv output itself too: the check covers all 16,384 values.
    nodes.append(helper.make_node("Identity", [a2], ["features"]))
    nodes.append(helper.make_node("Identity", [out], ["y"]))
    graph = helper.make_graph(
        nodes, "qdq_convnet", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32]),
         helper.make_tensor_value_info("features", TensorProto.FLOAT, [1, 64, 16, 16])],
        initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(folder, "model.onnx"))
    return [([rng.standard_normal((1, 16, 16, 16)).astype(np.float32)], None),
            ([rng.uniform(-2, 4, (1, 16, 16, 16)).astype(np.float32)], None)]


def gpt2_kv(folder, hf_mask=False):
    """A GPT-2-style decoder step with a KV cache (export_shape_models.py's
    Gpt2Decoder, smaller), exported with dynamic batch, past and new lengths;
    run from an empty past (P = 0, the first call of every generation), then
    with a past of 7 and one new token, then with a past of 2 and 3 new."""
    import export_shape_models as esm
    torch.manual_seed(0)
    model = esm.Gpt2Decoder(vocab=40, d=32, heads=2, layers=2, max_pos=32,
                            hf_mask=hf_mask).eval()
    names = ["input_ids"] + [f"past_{kv}_{i}" for i in range(2) for kv in ("key", "value")]
    outs = ["logits"] + [f"present_{kv}_{i}" for i in range(2) for kv in ("key", "value")]
    dyn = {"input_ids": {0: "batch", 1: "new"}, "logits": {0: "batch", 1: "new"}}
    for i in range(2):
        for kv in ("key", "value"):
            dyn[f"past_{kv}_{i}"] = {0: "batch", 2: "past"}
            dyn[f"present_{kv}_{i}"] = {0: "batch", 2: "total"}
    gen = torch.Generator().manual_seed(1)

    def inputs(b, t, p):
        ids = torch.randint(0, 40, (b, t), generator=gen)
        return [ids] + [torch.randn(b, 2, p, 16, generator=gen) for _ in range(4)]

    sets_in = [inputs(1, 5, 0), inputs(2, 1, 7), inputs(1, 3, 2)]
    torch.onnx.export(model, tuple(sets_in[0]), os.path.join(folder, "model.onnx"),
                      opset_version=17, input_names=names, output_names=outs, dynamic_axes=dyn,
                      do_constant_folding=True, **no_dynamo())
    sets = []
    for xs in sets_in:
        with torch.no_grad():
            refs = [y.numpy() for y in model(*xs)]
        sets.append(([x.numpy() for x in xs], refs))
    return sets


def gpt2_hf_mask(folder):
    """gpt2_kv with Hugging Face GPT-2's causal mask, sliced from a 32 x 32
    buffer (bias[:, :, total - new : total, :total])."""
    return gpt2_kv(folder, hf_mask=True)


def bert_mask(folder):
    """A BERT-style encoder with input_ids and attention_mask, batch and
    length dynamic (export_bert_mask.py's BertMask, smaller): torch's
    TransformerEncoder turns the padding mask into shape arithmetic (the
    mask reshaped to [batch, 1, 1, seq] with dims gathered from other
    tensors, ConstantOfShape, Where) that compiles once for every shape.
    Batch 1 of 7 unpadded, batch 3 of 5 and batch 2 of 12 padded."""
    import export_bert_mask as ebm
    torch.manual_seed(0)
    model = ebm.BertMask(vocab=50, d=32, heads=4, layers=2, ff=64, max_pos=32).eval()
    gen = torch.Generator().manual_seed(1)

    def inputs(b, t, keep):
        ids = torch.randint(0, 50, (b, t), generator=gen)
        mask = (torch.arange(t).reshape(1, -1) < torch.tensor(keep).reshape(-1, 1)).long()
        return [ids, mask]

    sets_in = [inputs(1, 7, [7]), inputs(3, 5, [5, 2, 4]), inputs(2, 12, [9, 12])]
    axes = {0: "batch", 1: "seq"}
    torch.onnx.export(model, tuple(sets_in[0]), os.path.join(folder, "model.onnx"),
                      opset_version=17, input_names=["input_ids", "attention_mask"],
                      output_names=["hidden"],
                      dynamic_axes={"input_ids": axes, "attention_mask": axes, "hidden": axes},
                      **no_dynamo())
    sets = []
    for xs in sets_in:
        with torch.no_grad():
            sets.append(([x.numpy() for x in xs], [model(*xs).numpy()]))
    return sets


def swin_block(folder):
    """Two torchvision Swin Transformer blocks (a window block and a shifted
    one, dim 16, 2 heads, 4x4 windows) on [batch, 8, 8, 16], the batch
    dynamic: the export pads the windows with a pad list built by shape
    arithmetic (reshaped, reversed, transposed) and builds the shifted
    window's mask with ScatterND on sizes computed from the input's dims;
    batch 1, 3 and 2."""
    from torchvision.models.swin_transformer import SwinTransformerBlock
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        SwinTransformerBlock(16, 2, [4, 4], [0, 0]),
        SwinTransformerBlock(16, 2, [4, 4], [2, 2])).eval()
    gen = torch.Generator().manual_seed(1)
    sets_in = [torch.randn(b, 8, 8, 16, generator=gen) for b in (1, 3, 2)]
    torch.onnx.export(model, (sets_in[0],), os.path.join(folder, "model.onnx"), opset_version=17,
                      input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}, **no_dynamo())
    sets = []
    for x in sets_in:
        with torch.no_grad():
            sets.append(([x.numpy()], [model(x).numpy()]))
    return sets


def bilstm_tagger(folder):
    """A bidirectional LSTM tagger (embedding, BiLSTM, linear) with dynamic
    batch and length: batch 1 of 40 tokens (where a Reshape copied an
    unknown dimension's sentinel as a size) and batch 3 of 9."""
    import export_shape_models as esm
    torch.manual_seed(0)
    model = esm.BiLstmTagger(vocab=30, emb=16, hidden=24, tags=5).eval()
    gen = torch.Generator().manual_seed(1)
    sets_in = [torch.randint(0, 30, (1, 40), generator=gen),
               torch.randint(0, 30, (3, 9), generator=gen)]
    torch.onnx.export(model, (sets_in[0],), os.path.join(folder, "model.onnx"), opset_version=13,
                      input_names=["tokens"], output_names=["tags"],
                      dynamic_axes={"tokens": {0: "batch", 1: "length"},
                                    "tags": {0: "batch", 1: "length"}},
                      do_constant_folding=True, **no_dynamo())
    sets = []
    for x in sets_in:
        with torch.no_grad():
            sets.append(([x.numpy()], [model(x).numpy()]))
    return sets


def if_sample_rate(folder):
    """Built with ONNX's helpers, in the shape of the Silero voice-activity
    detector that npm packages ship: If(Equal(sr, 16000)) whose branches give
    results of different rank (a 3-D frame stack at 16 kHz, a 4-D one at
    8 kHz), so the condition must be known while compiling: Kiln specialises
    on the scalar input sr. A second If on sr picks between outputs of the
    same rank and different lengths. References by hand (numpy)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "n"])
    sr = helper.make_tensor_value_info("sr", TensorProto.INT64, [])
    # y leaves the If as 3-D or 4-D; flattened, the graph output is [n].
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n"])
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, "k"])
    flat = helper.make_tensor("flat", TensorProto.INT64, [1], [-1])
    c16k = helper.make_tensor("c16k", TensorProto.INT64, [], [16000])

    def branch(name, shape, scale, zlen):
        s = helper.make_tensor(f"{name}_shape", TensorProto.INT64, [len(shape)], shape)
        k = helper.make_tensor(f"{name}_k", TensorProto.FLOAT, [], [scale])
        st = helper.make_tensor(f"{name}_st", TensorProto.INT64, [1], [0])
        en = helper.make_tensor(f"{name}_en", TensorProto.INT64, [1], [zlen])
        ax = helper.make_tensor(f"{name}_ax", TensorProto.INT64, [1], [1])
        nodes = [helper.make_node("Reshape", ["x", f"{name}_shape"], [f"{name}_r"]),
                 helper.make_node("Mul", [f"{name}_r", f"{name}_k"], [f"{name}_y"]),
                 helper.make_node("Slice", ["x", f"{name}_st", f"{name}_en", f"{name}_ax"],
                                  [f"{name}_z"])]
        rank = len(shape)
        return helper.make_graph(
            nodes, name, [],
            [helper.make_tensor_value_info(f"{name}_y", TensorProto.FLOAT, [None] * rank),
             helper.make_tensor_value_info(f"{name}_z", TensorProto.FLOAT, [1, None])],
            initializer=[s, k, st, en, ax])

    nodes = [helper.make_node("Equal", ["sr", "c16k"], ["is16k"]),
             helper.make_node("If", ["is16k"], ["frames", "z"], name="If_sr",
                              then_branch=branch("then", [1, 4, -1], 2.0, 6),
                              else_branch=branch("else", [1, 2, 2, -1], -1.0, 3)),
             helper.make_node("Reshape", ["frames", "flat"], ["y"], name="flatten")]
    graph = helper.make_graph(nodes, "if_sample_rate", [x, sr], [y, z],
                              initializer=[c16k, flat])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    # No check_model: it wants a shape on every graph output, and y has none
    # (its rank depends on the branch). ONNX Runtime loads it as it is.
    onnx.save(model, os.path.join(folder, "model.onnx"))
    rng = np.random.default_rng(0)
    sets = []
    for rate, n in ((16000, 16), (8000, 8)):
        xv = rng.standard_normal((1, n)).astype(np.float32)
        if rate == 16000:
            refs = [(xv.reshape(1, 4, -1) * 2.0).reshape(-1), xv[:, :6]]
        else:
            refs = [(xv.reshape(1, 2, 2, -1) * -1.0).reshape(-1), xv[:, :3]]
        sets.append(([xv, np.array(rate, dtype=np.int64)], refs))
    return sets


def empty_tensors(folder):
    """Built with ONNX's helpers: ops on tensors with a dimension of 0, as an
    empty KV cache or an empty detection list gives them. MatMul and Gemm
    with K = 0 (zeros; the bias), Concat with an empty part, reductions over
    an empty axis (their identity), Softmax and LayerNormalization of an
    empty tensor, Add broadcasting an empty tensor. The data sets give the
    empty dimension at run time (k = 0 and, for comparison, k = 2)."""
    F = TensorProto.FLOAT
    a = helper.make_tensor_value_info("a", F, [2, "k"])
    b = helper.make_tensor_value_info("b", F, ["k", 3])
    c = helper.make_tensor_value_info("c", F, [2, 3])
    outs = [("mm", [2, 3]), ("gemm", [2, 3]), ("cat", [2, None]), ("rsum", [2]),
            ("rprod", [2]), ("rmax", [2]), ("soft", [2, None]), ("ln", [None, 3]),
            ("add", [2, None]), ("lse", [2])]
    ones = helper.make_tensor("ones", F, [1], [1.0])
    zero = helper.make_tensor("zero", F, [1], [0.0])
    ax1 = helper.make_tensor("ax1", TensorProto.INT64, [1], [1])
    ones3 = helper.make_tensor("ones3", F, [3], [1.0, 0.5, 2.0])
    zero3 = helper.make_tensor("zero3", F, [3], [0.0, 1.0, -1.0])
    nodes = [
        helper.make_node("MatMul", ["a", "b"], ["mm"], name="matmul"),
        helper.make_node("Gemm", ["a", "b", "c"], ["gemm"], name="gemm"),
        helper.make_node("Concat", ["a", "c"], ["cat"], axis=1, name="concat"),
        helper.make_node("ReduceSum", ["a", "ax1"], ["rsum"], keepdims=0, name="reduce_sum"),
        helper.make_node("ReduceProd", ["a"], ["rprod"], axes=[1], keepdims=0, name="reduce_prod"),
        helper.make_node("ReduceMax", ["a"], ["rmax"], axes=[1], keepdims=0, name="reduce_max"),
        helper.make_node("Softmax", ["a"], ["soft"], axis=-1, name="softmax"),
        # ONNX Runtime refuses an empty normalised axis; an empty batch of rows:
        helper.make_node("LayerNormalization", ["b", "ones3", "zero3"], ["ln"], axis=-1,
                         name="layer_norm"),
        helper.make_node("Add", ["a", "zero"], ["add"], name="add"),
        helper.make_node("ReduceLogSumExp", ["a"], ["lse"], axes=[1], keepdims=0, name="lse"),
    ]
    graph = helper.make_graph(nodes, "empty_tensors", [a, b, c],
                              [helper.make_tensor_value_info(n, F, sh) for n, sh in outs],
                              initializer=[ones, zero, ax1, ones3, zero3])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(folder, "model.onnx"))
    rng = np.random.default_rng(0)
    sets = []
    for k in (0, 2):
        sets.append(([rng.standard_normal((2, k)).astype(np.float32),
                      rng.standard_normal((k, 3)).astype(np.float32),
                      rng.standard_normal((2, 3)).astype(np.float32)], None))
    return sets


def quantize_torch_net(net, shape, folder, seed, **quant_kwargs):
    """Exports `net` (input x of `shape`, output y, opset 13) and writes it
    quantized by kiln.quantize (needs PYTHONPATH=build/python's package,
    found from the build tree) to FOLDER/model.onnx, calibrated on 8
    inputs uniform in [-1, 1]; returns the quantizer's report and two data
    sets drawn the same way (one generator seeded with `seed`)."""
    sys.path.insert(0, os.path.join(ROOT, "build", "python"))
    import kiln.quantize
    rng = np.random.default_rng(seed)
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "float.onnx")
        torch.onnx.export(net, torch.zeros(*shape), src, opset_version=13,
                          input_names=["x"], output_names=["y"], **no_dynamo())
        feeds = [{"x": rng.uniform(-1, 1, shape).astype(np.float32)} for _ in range(8)]
        report = kiln.quantize.quantize(src, os.path.join(folder, "model.onnx"), feeds,
                                        **quant_kwargs)
    return report, [([rng.uniform(-1, 1, shape).astype(np.float32)], None) for _ in range(2)]


def qdq_tool_cnn(folder):
    """A float MobileNet-style CNN quantized by kiln.quantize (calibrated on
    8 random inputs); two data sets."""

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = torch.nn.Conv2d(3, 16, 3, stride=2, padding=1)
            self.conv = torch.nn.Conv2d(16, 32, 3, padding=1)
            self.dw = torch.nn.Conv2d(32, 32, 3, padding=1, groups=32)
            self.pw = torch.nn.Conv2d(32, 32, 1)
            self.fc = torch.nn.Linear(32, 10)

        def forward(self, x):
            x = torch.nn.functional.relu6(self.stem(x))
            # ResNet's stem pool: DQ -> MaxPool -> Q with one scale, pooled
            # on the bytes.
            x = torch.nn.functional.max_pool2d(x, 3, stride=2, padding=1)
            x = torch.nn.functional.relu6(self.conv(x))
            x = x + self.pw(torch.nn.functional.relu6(self.dw(x)))
            return self.fc(x.mean((2, 3)))

    torch.manual_seed(5)
    _, sets = quantize_torch_net(Net().eval(), (1, 3, 20, 20), folder, 5)
    return sets


def qoperator_tool_cnn(folder):
    """A float CNN with an op of each com.microsoft QLinear kind between its
    convolutions (residual Add, squeeze-excitation GlobalAveragePool ->
    Sigmoid -> Mul, AveragePool, Concat, LeakyRelu) and a MatMul head,
    quantized by kiln.quantize in the QOperator form (calibrated on 8
    random inputs); two data sets."""

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = torch.nn.Conv2d(3, 16, 3, stride=2, padding=1)
            self.conv = torch.nn.Conv2d(16, 16, 3, padding=1)
            self.se = torch.nn.Conv2d(16, 16, 1)
            self.b1 = torch.nn.Conv2d(16, 8, 1)
            self.b2 = torch.nn.Conv2d(16, 8, 3, padding=1)
            self.w = torch.nn.Parameter(torch.randn(16, 10) * 0.3)

        def forward(self, x):
            f = torch.nn.functional
            x = f.relu(self.stem(x))
            x = x + f.relu(self.conv(x))
            x = x * torch.sigmoid(self.se(f.adaptive_avg_pool2d(x, 1)))
            x = f.avg_pool2d(x, 2)
            x = f.leaky_relu(torch.cat([self.b1(x), self.b2(x)], 1), 0.1)
            return f.adaptive_avg_pool2d(x, 1).flatten(1) @ self.w

    torch.manual_seed(7)
    report, sets = quantize_torch_net(Net().eval(), (1, 3, 24, 24), folder, 7,
                                      quant_format="qoperator")
    kinds = {n.op_type for n in onnx.load(os.path.join(folder, "model.onnx")).graph.node}
    want = {"QLinearConv", "QLinearMatMul", "QLinearAdd", "QLinearMul", "QLinearSigmoid",
            "QLinearGlobalAveragePool", "QLinearAveragePool", "QLinearConcat", "QLinearLeakyRelu"}
    if not want <= kinds:
        sys.exit(f"qoperator_tool_cnn: the quantizer left {sorted(want - kinds)} out "
                 f"({report['qoperator_ops']} QLinear ops)")
    return sets


def dynamic_quant_mlp(folder):
    """Built with ONNX's helpers in quantize_dynamic's layout: two linear
    layers (64 -> 48 -> 40, a Relu between), each DynamicQuantizeLinear ->
    MatMulInteger(., W s8) -> Cast -> Mul(x_scale * w_scale) -> Add bias."""
    rng = np.random.default_rng(17)
    inits, nodes = [], []
    prev = "x"
    for k, (i, o) in enumerate(((64, 48), (48, 40))):
        w = rng.standard_normal((i, o)).astype(np.float32) * 0.2
        w_scale = np.float32(np.abs(w).max() / 127)
        wq = np.clip(np.rint(w / w_scale), -127, 127).astype(np.int8)
        inits += [numpy_helper.from_array(wq, f"w{k}"),
                  numpy_helper.from_array(np.array(w_scale, np.float32), f"w{k}_scale"),
                  numpy_helper.from_array(np.int8(0).reshape(()), f"w{k}_zp"),
                  numpy_helper.from_array(rng.standard_normal(o).astype(np.float32) * 0.1,
                                          f"b{k}")]
        nodes += [
            helper.make_node("DynamicQuantizeLinear", [prev], [f"q{k}", f"s{k}", f"z{k}"]),
            helper.make_node("MatMulInteger", [f"q{k}", f"w{k}", f"z{k}", f"w{k}_zp"], [f"i{k}"]),
            helper.make_node("Cast", [f"i{k}"], [f"f{k}"], to=TensorProto.FLOAT),
            helper.make_node("Mul", [f"s{k}", f"w{k}_scale"], [f"m{k}"]),
            helper.make_node("Mul", [f"f{k}", f"m{k}"], [f"d{k}"]),
            helper.make_node("Add", [f"d{k}", f"b{k}"], [f"y{k}" if k == 0 else "y"]),
        ]
        if k == 0:
            nodes.append(helper.make_node("Relu", ["y0"], ["r0"]))
            prev = "r0"
    graph = helper.make_graph(
        nodes, "dynamic_quant_mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, "seq", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, "seq", 40])],
        initializer=inits)
    save_model(folder, graph, 13)
    return [([rng.uniform(-2, 2, (2, s, 64)).astype(np.float32)], None) for s in (5, 9)]


class KeypointDecode(torch.nn.Module):
    """A 4x4 grid of boxes from a conv head (sizes 1.5 to 13.5 pixels),
    NonMaxSuppression (IoU 0.3, the first 10 kept), each kept box's three
    8x8 heatmaps, and torchvision's heatmaps_to_keypoints on them."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(3)
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.box = torch.nn.Conv2d(8, 4, 4, stride=4)
        self.score = torch.nn.Conv2d(8, 1, 4, stride=4)
        self.heat = torch.nn.Conv2d(8, 3, 1)
        self.maps = torch.nn.Parameter(torch.randn(16, 3, 8, 8, generator=g))
        ys, xs = torch.meshgrid(torch.arange(4.0), torch.arange(4.0), indexing="ij")
        self.register_buffer("anchors", torch.stack([xs * 4, ys * 4], -1).reshape(16, 2))

    def forward(self, x):
        import torchvision
        from torchvision.models.detection.roi_heads import heatmaps_to_keypoints
        f = torch.relu(self.conv(x))
        d = self.box(f).flatten(2).transpose(1, 2)[0]
        xy = self.anchors + 2 * torch.tanh(d[:, :2])
        wh = 1.5 + 12 * torch.sigmoid(d[:, 2:])
        boxes = torch.cat([xy, xy + wh], 1)
        scores = torch.sigmoid(self.score(f).flatten())
        keep = torchvision.ops.nms(boxes, scores, 0.3)[:10]
        rois = boxes[keep]
        maps = torch.nn.functional.interpolate(self.heat(f), size=(8, 8), mode="bilinear",
                                               align_corners=False) + self.maps
        kp, kp_scores = heatmaps_to_keypoints(maps[keep], rois)
        return rois, kp, kp_scores


def keypoint_decode(folder):
    torch.manual_seed(0)
    model = KeypointDecode().eval()
    xs = [torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(s)) * (1 + k)
          for k, s in enumerate((1, 2, 5))]
    with torch.no_grad():
        torch.onnx.export(model, (xs[0],), os.path.join(folder, "model.onnx"), opset_version=17,
                          input_names=["x"], output_names=["rois", "keypoints", "keypoint_scores"],
                          dynamic_axes={"rois": {0: "K"}, "keypoints": {0: "K"},
                                        "keypoint_scores": {0: "K"}}, **no_dynamo())
        return [([x.numpy()], [t.numpy() for t in model(x)]) for x in xs]


def resize_runtime_sizes(folder):
    """Built with ONNX's helpers: sizes = ceil(5 * |x[0, 0, 0, 0:2]|), so
    that they are computed from the input's values (x has 72 elements, more
    than Kiln specialises on), then three Resizes to [1, 2] + sizes, each
    reduced to a sum per channel and the ArgMax of each channel's map."""
    F, I = TensorProto.FLOAT, TensorProto.INT64
    inits = [helper.make_tensor("nc", I, [2], [1, 2]), helper.make_tensor("ax", I, [2], [2, 3]),
             helper.make_tensor("rows", I, [2], [2, -1]),
             helper.make_tensor("s0", I, [4], [0, 0, 0, 0]),
             helper.make_tensor("s1", I, [4], [1, 1, 1, 2]),
             helper.make_tensor("s2", I, [4], [0, 1, 2, 3]),
             helper.make_tensor("two", I, [1], [2]), helper.make_tensor("five", F, [], [5.0])]
    nodes = [helper.make_node("Slice", ["x", "s0", "s1", "s2"], ["corner"]),
             helper.make_node("Reshape", ["corner", "two"], ["pair"]),
             helper.make_node("Abs", ["pair"], ["mag"]),
             helper.make_node("Mul", ["mag", "five"], ["hw"]),
             helper.make_node("Ceil", ["hw"], ["hw_up"]),
             helper.make_node("Cast", ["hw_up"], ["hw_int"], to=I),
             helper.make_node("Concat", ["nc", "hw_int"], ["sizes"], axis=0)]
    outputs = []
    for k, (mode, transform, extra) in enumerate([
            ("linear", "align_corners", {}), ("nearest", "asymmetric", {"nearest_mode": "floor"}),
            ("cubic", "half_pixel", {"exclude_outside": 1})]):
        nodes += [helper.make_node("Resize", ["x", "", "", "sizes"], [f"r{k}"], mode=mode,
                                   coordinate_transformation_mode=transform, **extra),
                  helper.make_node("ReduceSum", [f"r{k}", "ax"], [f"sum{k}"], keepdims=0),
                  helper.make_node("Reshape", [f"r{k}", "rows"], [f"flat{k}"]),
                  helper.make_node("ArgMax", [f"flat{k}"], [f"at{k}"], axis=1, keepdims=0)]
        outputs += [helper.make_tensor_value_info(f"sum{k}", F, [1, 2]),
                    helper.make_tensor_value_info(f"at{k}", I, [2])]
    graph = helper.make_graph(nodes, "resize_runtime_sizes",
                              [helper.make_tensor_value_info("x", F, [1, 2, 6, 6])], outputs,
                              initializer=inits)
    save_model(folder, graph, 17)
    rng = np.random.default_rng(23)
    sets = []
    for hw in ([1.44, 2.7], [0.6, 0.4], [0.1, 0.1], [2.0, 0.9]):
        x = rng.standard_normal((1, 2, 6, 6)).astype(np.float32)
        x[0, 0, 0, 0:2] = hw
        sets.append(([x], None))
    return sets


def resize_fractional(folder):
    """Built with ONNX's helpers: Resizes of an input of static shape by
    scales that are no powers of two (sizes 45x56 -> 48x60, as a detector's
    transform resizes 240x300 to 256x320; 45x56 -> 37x41; given scales 1.3
    and 0.7), linear, cubic and nearest. The input is a checkerboard of
    +-100 with noise, so that an output near 0 between two pixels moves by
    200 times its tap's error: with coordinates computed in double rather
    than in float32 as ONNX Runtime does (1e-5 of a pixel), the linear
    half_pixel output is beyond the tolerance (74 and 81 of 5,760 elements);
    the cubic and asymmetric ones move by less than it (5e-5 to 7e-5) and
    the nearest taps are the same."""
    F = TensorProto.FLOAT
    I = TensorProto.INT64
    inits = [helper.make_tensor("up", I, [4], [1, 2, 48, 60]),
             helper.make_tensor("down", I, [4], [1, 2, 37, 41]),
             helper.make_tensor("near", I, [4], [1, 2, 52, 63]),
             helper.make_tensor("scales", F, [4], [1.0, 1.0, 1.3, 0.7])]
    nodes = [helper.make_node("Resize", ["x", "", "", "up"], ["linear_half_pixel"],
                              mode="linear", coordinate_transformation_mode="half_pixel"),
             helper.make_node("Resize", ["x", "", "", "down"], ["cubic_pytorch"],
                              mode="cubic", coordinate_transformation_mode="pytorch_half_pixel"),
             helper.make_node("Resize", ["x", "", "scales"], ["linear_asymmetric"],
                              mode="linear", coordinate_transformation_mode="asymmetric"),
             helper.make_node("Resize", ["x", "", "", "near"], ["nearest_half_pixel"],
                              mode="nearest", coordinate_transformation_mode="half_pixel",
                              nearest_mode="round_prefer_floor")]
    outputs = [helper.make_tensor_value_info("linear_half_pixel", F, [1, 2, 48, 60]),
               helper.make_tensor_value_info("cubic_pytorch", F, [1, 2, 37, 41]),
               helper.make_tensor_value_info("linear_asymmetric", F, [1, 2, 58, 39]),
               helper.make_tensor_value_info("nearest_half_pixel", F, [1, 2, 52, 63])]
    graph = helper.make_graph(nodes, "resize_fractional",
                              [helper.make_tensor_value_info("x", F, [1, 2, 45, 56])], outputs,
                              initializer=inits)
    save_model(folder, graph, 17)
    rng = np.random.default_rng(31)
    board = np.indices((45, 56)).sum(axis=0) % 2 * 200.0 - 100.0
    return [([(board + rng.standard_normal((1, 2, 45, 56))).astype(np.float32)], None)
            for _ in range(2)]


class ImageSizeCnn(torch.nn.Module):
    """A small segmentation-style CNN: strided convolution, max pooling, a
    depthwise block with hard-swish, squeeze-and-excitation, a channel
    shuffle (view/transpose/view on x.size()), average pooling in ceil mode,
    a 1x1 classifier resized back to the input's size (sizes from Shape)
    and upsampled by 2 (constant scales), and a global mean."""

    def __init__(self):
        super().__init__()
        nn = torch.nn
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.BatchNorm2d(8), nn.ReLU())
        self.pool = nn.MaxPool2d(3, 2, 1)
        self.dw = nn.Sequential(nn.Conv2d(8, 8, 3, 1, 1, groups=8), nn.Conv2d(8, 16, 1),
                                nn.Hardswish())
        self.se = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(16, 4, 1), nn.ReLU(),
                                nn.Conv2d(4, 16, 1), nn.Hardsigmoid())
        self.avg = nn.AvgPool2d(3, 2, ceil_mode=True)
        self.head = nn.Conv2d(16, 3, 1)

    def forward(self, x):
        y = self.dw(self.pool(self.stem(x)))
        y = y * self.se(y)
        n, c, h, w = y.size()
        y = y.view(n, 2, c // 2, h, w).transpose(1, 2).reshape(n, -1, h, w)
        small = self.head(self.avg(y))
        logits = torch.nn.functional.interpolate(small, size=x.shape[-2:],
                                                 mode="bilinear", align_corners=False)
        # Upsampling by 2 (constant scales, as U-Nets write it).
        up = torch.nn.functional.interpolate(small, scale_factor=2.0, mode="nearest")
        return logits, y.mean([2, 3]), up


def cnn_image_size(folder):
    """ImageSizeCnn exported with its batch, height and width dynamic, run
    at 1 x 32 x 32, 2 x 24 x 40 and 1 x 17 x 23 (odd sizes: each stride-2
    layer rounds down) by one compile for every image size."""
    torch.manual_seed(0)
    model = ImageSizeCnn().eval()
    with torch.no_grad():  # BatchNorm statistics other than 0 and 1
        bn = model.stem[1]
        bn.running_mean.uniform_(-0.5, 0.5)
        bn.running_var.uniform_(0.5, 2.0)
    gen = torch.Generator().manual_seed(3)
    sets_in = [torch.randn(shape, generator=gen)
               for shape in ((1, 3, 32, 32), (2, 3, 24, 40), (1, 3, 17, 23))]
    torch.onnx.export(model, (sets_in[0],), os.path.join(folder, "model.onnx"), opset_version=13,
                      input_names=["x"], output_names=["logits", "features", "up"],
                      dynamic_axes={"x": {0: "batch", 2: "height", 3: "width"},
                                    "logits": {0: "batch", 2: "height", 3: "width"},
                                    "features": {0: "batch"},
                                    "up": {0: "batch", 2: "up_height", 3: "up_width"}},
                      **no_dynamo())
    sets = []
    for x in sets_in:
        with torch.no_grad():
            sets.append(([x.numpy()], [t.numpy() for t in model(x)]))
    return sets


class PositionTable(torch.nn.Module):
    """Token embedding plus two positional embeddings over a 16-entry table:
    one sliced (`pos[:n]`), one gathered by ids sliced from a buffer
    (`position_ids[:, :n]`, Hugging Face BERT's form), then LayerNorm and a
    linear head."""

    def __init__(self, vocab=20, positions=16, d=24):
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, d)
        self.pos = torch.nn.Parameter(torch.randn(positions, d) * 0.5)
        self.pos_ids_emb = torch.nn.Embedding(positions, d)
        self.register_buffer("position_ids", torch.arange(positions).unsqueeze(0))
        self.norm = torch.nn.LayerNorm(d)
        self.head = torch.nn.Linear(d, 7)

    def forward(self, tokens):
        n = tokens.shape[1]
        ids = self.position_ids[:, :n]
        h = self.tok(tokens) + self.pos[:n] + self.pos_ids_emb(ids)
        return self.head(self.norm(h))


def position_table(folder):
    """PositionTable with batch and length dynamic, at 1 x 5, 3 x 16 (the
    whole table) and 2 x 1."""
    torch.manual_seed(0)
    model = PositionTable().eval()
    gen = torch.Generator().manual_seed(5)
    sets_in = [torch.randint(0, 20, shape, generator=gen) for shape in ((1, 5), (3, 16), (2, 1))]
    torch.onnx.export(model, (sets_in[0],), os.path.join(folder, "model.onnx"), opset_version=14,
                      input_names=["tokens"], output_names=["logits"],
                      dynamic_axes={"tokens": {0: "batch", 1: "length"},
                                    "logits": {0: "batch", 1: "length"}},
                      **no_dynamo())
    sets = []
    for x in sets_in:
        with torch.no_grad():
            sets.append(([x.numpy()], [model(x).numpy()]))
    return sets


def no_dynamo():
    import inspect
    return {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}


MODELS = {"empty_tensors": empty_tensors, "gpt2_kv": gpt2_kv, "gpt2_hf_mask": gpt2_hf_mask, "bert_mask": bert_mask, "swin_block": swin_block, "bilstm_tagger": bilstm_tagger, "if_sample_rate": if_sample_rate,
          "loop_if": loop_if, "loop_rnn": loop_rnn, "scan_rnn": scan_rnn, "rnn_seq_lens": rnn_seq_lens,
          "rnn_variants": rnn_variants,
          "qdq_cnn": qdq_cnn, "ssd_tail": ssd_tail, "masked_select": masked_select, "qlinear_cnn": qlinear_cnn,
          "qdq_convnet": qdq_convnet, "qdq_tool_cnn": qdq_tool_cnn,
          "qoperator_tool_cnn": qoperator_tool_cnn,
          "dynamic_quant_mlp": dynamic_quant_mlp, "keypoint_decode": keypoint_decode,
          "resize_runtime_sizes": resize_runtime_sizes, "cnn_image_size": cnn_image_size,
          "resize_fractional": resize_fractional, "position_table": position_table}


def write_sets(folder, sets, ort):
    model_path = os.path.join(folder, "model.onnx")
    for k, (inputs, torch_refs) in enumerate(sets):
        data = os.path.join(folder, f"test_data_set_{k}")
        os.makedirs(data, exist_ok=True)
        for j, value in enumerate(inputs):
            onnx.save_tensor(numpy_helper.from_array(value), os.path.join(data, f"input_{j}.pb"))
        ort_reference(ort, model_path, data)
        if torch_refs is None:
            continue
        for j, ref in enumerate(torch_refs):
            got = numpy_helper.to_array(onnx.load_tensor(os.path.join(data, f"output_{j}.pb")))
            err = np.max(np.abs(got - ref) - RTOL * np.abs(ref))
            if got.shape != ref.shape or err > ATOL:
                raise RuntimeError(f"set {k} output {j}: ONNX Runtime and PyTorch disagree "
                                   f"(shape {got.shape} vs {ref.shape}, excess {err})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "test", "e2e", "models"))
    ap.add_argument("--only", nargs="*", default=sorted(MODELS))
    args = ap.parse_args()
    ort = ort_dir()
    check_ort(ort)
    for name in args.only:
        folder = os.path.join(args.out, name)
        os.makedirs(folder, exist_ok=True)
        sets = MODELS[name](folder)
        write_sets(folder, sets, ort)
        print(f"{name}: {len(sets)} set(s) in {folder}")


if __name__ == "__main__":
    main()
