#!/usr/bin/env python3
"""Writes the single-operator models of the kernel microbenchmark.

    make_kernel_models.py OUT_DIR [--seed N]

Each kernel goes to OUT_DIR/NAME/ in the ONNX backend-test layout
(model.onnx, test_data_set_0/input_J.pb, test_data_set_0/output_0.pb), so
kiln-run --check and ort_run.js read it like any shared model. Inputs are
random (fixed seed, so every machine times the same data); reference outputs
are computed here with numpy in float64, independent of both engines.

OUT_DIR/kernels.json lists the kernels in order with their FLOP counts (for
bench.py). Needs the `onnx` and `numpy` packages (Debian: python3-onnx,
python3-numpy).
"""

import argparse
import json
import os
import sys

import numpy as np

try:
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError:
    sys.exit("make_kernel_models: error: the 'onnx' Python package is missing "
             "(Debian: apt-get install python3-onnx python3-numpy)")

# Opset and IR version of the shared models, which Kiln and ORT both read.
OPSET = 13
IR_VERSION = 7


def conv_out(size, k, stride, pad):
    return (size + 2 * pad - k) // stride + 1


# Every kernel: name, op, shapes and a one-line description. "const_b" makes
# the MatMul's B operand an initializer (what a compiler can pre-pack) instead
# of a graph input.
KERNELS = [
    dict(name="matmul_1024", op="MatMul", m=1024, k=1024, n=1024, const_b=False,
         desc="MatMul 1024x1024 @ 1024x1024, both operands inputs"),
    dict(name="matmul_1024_constB", op="MatMul", m=1024, k=1024, n=1024, const_b=True,
         desc="MatMul 1024x1024 @ 1024x1024, B a constant"),
    dict(name="gemm_64x1024x4096", op="Gemm", m=64, k=1024, n=4096,
         desc="Gemm 64x1024 -> 4096, constant weights (transB=1) + bias"),
    dict(name="conv3x3_64", op="Conv", n=1, c=64, h=56, w=56, oc=64, k=3, stride=1, pad=1, group=1,
         desc="Conv 3x3 64->64 on 1x64x56x56, pad 1"),
    dict(name="conv3x3s2_128_256", op="Conv", n=1, c=128, h=28, w=28, oc=256, k=3, stride=2, pad=1,
         group=1, desc="Conv 3x3 stride 2 128->256 on 1x128x28x28, pad 1"),
    dict(name="conv1x1_256", op="Conv", n=1, c=256, h=14, w=14, oc=256, k=1, stride=1, pad=0, group=1,
         desc="Conv 1x1 256->256 on 1x256x14x14"),
    dict(name="dwconv7x7_96", op="Conv", n=1, c=96, h=56, w=56, oc=96, k=7, stride=1, pad=3, group=96,
         desc="depthwise Conv 7x7 C=96 on 1x96x56x56, pad 3"),
    dict(name="dwconv3x3_144", op="Conv", n=1, c=144, h=56, w=56, oc=144, k=3, stride=1, pad=1,
         group=144, desc="depthwise Conv 3x3 C=144 on 1x144x56x56, pad 1"),
    dict(name="maxpool3x3s2_64", op="MaxPool", n=1, c=64, h=112, w=112, k=3, stride=2, pad=1,
         desc="MaxPool 3x3 stride 2 on 1x64x112x112, pad 1"),
]


def flops(kern):
    """FLOPs of one run (a multiply-add counts as 2). For MaxPool, which does no
    arithmetic, the count is of compares, and bench.py reports no % of peak."""
    op = kern["op"]
    if op in ("MatMul", "Gemm"):
        return 2 * kern["m"] * kern["k"] * kern["n"]
    ho = conv_out(kern["h"], kern["k"], kern["stride"], kern["pad"])
    wo = conv_out(kern["w"], kern["k"], kern["stride"], kern["pad"])
    if op == "Conv":
        return 2 * kern["n"] * kern["oc"] * ho * wo * (kern["c"] // kern["group"]) * kern["k"] ** 2
    return kern["n"] * kern["c"] * ho * wo * kern["k"] ** 2  # MaxPool


# --- numpy references, accumulated in float64 --------------------------------

def ref_conv(x, w, bias, stride, pad, group):
    """Direct convolution as a sum over kernel taps; each tap is a (grouped)
    channel contraction, which numpy runs as a matrix product."""
    n, c, h, wd = x.shape
    oc, cg, kh, kw = w.shape
    ho, wo = conv_out(h, kh, stride, pad), conv_out(wd, kw, stride, pad)
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    xp = xp.reshape(n, group, cg, h + 2 * pad, wd + 2 * pad)
    wg = w.astype(np.float64).reshape(group, oc // group, cg, kh, kw)
    out = np.zeros((n, group, oc // group, ho, wo))
    for i in range(kh):
        for j in range(kw):
            xs = xp[:, :, :, i:i + stride * (ho - 1) + 1:stride, j:j + stride * (wo - 1) + 1:stride]
            out += np.einsum("goc,ngchw->ngohw", wg[:, :, :, i, j], xs, optimize=True)
    out = out.reshape(n, oc, ho, wo) + bias.astype(np.float64)[None, :, None, None]
    return out.astype(np.float32)


def ref_maxpool(x, k, stride, pad):
    n, c, h, w = x.shape
    ho, wo = conv_out(h, k, stride, pad), conv_out(w, k, stride, pad)
    # Padding never wins a max (ONNX MaxPool pads with -inf).
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)), constant_values=-np.inf)
    out = np.full((n, c, ho, wo), -np.inf, dtype=np.float32)
    for i in range(k):
        for j in range(k):
            out = np.maximum(out, xp[:, :, i:i + stride * (ho - 1) + 1:stride,
                                     j:j + stride * (wo - 1) + 1:stride])
    return out


# --- model writers -------------------------------------------------------------

def uniform(rng, shape, scale=1.0):
    return (rng.uniform(-1.0, 1.0, size=shape) * scale).astype(np.float32)


def build(kern, rng):
    """Returns (graph nodes, initializers, [(input name, array)], output name, output array)."""
    op = kern["op"]
    if op == "MatMul":
        m, k, n = kern["m"], kern["k"], kern["n"]
        # B scaled by 1/sqrt(K) keeps outputs O(1), so float32 rounding stays
        # well inside kiln-run's default --check tolerance.
        a, b = uniform(rng, (m, k)), uniform(rng, (k, n), 1 / np.sqrt(k))
        y = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
        node = helper.make_node("MatMul", ["A", "B"], ["Y"])
        if kern["const_b"]:
            return [node], [numpy_helper.from_array(b, "B")], [("A", a)], "Y", y
        return [node], [], [("A", a), ("B", b)], "Y", y
    if op == "Gemm":
        m, k, n = kern["m"], kern["k"], kern["n"]
        # Weights stored [N, K] with transB=1, as PyTorch exports a Linear layer.
        a, w, bias = uniform(rng, (m, k)), uniform(rng, (n, k), 1 / np.sqrt(k)), uniform(rng, (n,))
        y = (a.astype(np.float64) @ w.astype(np.float64).T + bias).astype(np.float32)
        node = helper.make_node("Gemm", ["A", "W", "bias"], ["Y"], transB=1)
        inits = [numpy_helper.from_array(w, "W"), numpy_helper.from_array(bias, "bias")]
        return [node], inits, [("A", a)], "Y", y
    if op == "Conv":
        c, oc, k, g = kern["c"], kern["oc"], kern["k"], kern["group"]
        x = uniform(rng, (kern["n"], c, kern["h"], kern["w"]))
        fan_in = (c // g) * k * k
        w, bias = uniform(rng, (oc, c // g, k, k), 1 / np.sqrt(fan_in)), uniform(rng, (oc,))
        y = ref_conv(x, w, bias, kern["stride"], kern["pad"], g)
        p = kern["pad"]
        node = helper.make_node("Conv", ["X", "W", "bias"], ["Y"], kernel_shape=[k, k],
                                strides=[kern["stride"]] * 2, pads=[p, p, p, p], group=g)
        inits = [numpy_helper.from_array(w, "W"), numpy_helper.from_array(bias, "bias")]
        return [node], inits, [("X", x)], "Y", y
    if op == "MaxPool":
        x = uniform(rng, (kern["n"], kern["c"], kern["h"], kern["w"]))
        y = ref_maxpool(x, kern["k"], kern["stride"], kern["pad"])
        p = kern["pad"]
        node = helper.make_node("MaxPool", ["X"], ["Y"], kernel_shape=[kern["k"]] * 2,
                                strides=[kern["stride"]] * 2, pads=[p, p, p, p])
        return [node], [], [("X", x)], "Y", y
    raise ValueError(f"unknown op {op}")


def write_kernel(kern, out_dir, seed):
    # A seed per kernel, so adding a kernel does not change the others' data.
    rng = np.random.default_rng([seed, KERNELS.index(kern)])
    nodes, inits, inputs, out_name, y = build(kern, rng)
    graph = helper.make_graph(
        nodes, kern["name"],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, arr.shape) for name, arr in inputs],
        [helper.make_tensor_value_info(out_name, TensorProto.FLOAT, y.shape)],
        initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="kiln-bench")
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)

    folder = os.path.join(out_dir, kern["name"])
    data = os.path.join(folder, "test_data_set_0")
    os.makedirs(data, exist_ok=True)
    onnx.save(model, os.path.join(folder, "model.onnx"))
    for j, (name, arr) in enumerate(inputs):
        with open(os.path.join(data, f"input_{j}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(arr, name).SerializeToString())
    with open(os.path.join(data, "output_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(y, out_name).SerializeToString())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir")
    ap.add_argument("--seed", type=int, default=20240601)
    args = ap.parse_args()

    for kern in KERNELS:
        print(f"make_kernel_models: {kern['name']}", file=sys.stderr, flush=True)
        write_kernel(kern, args.out_dir, args.seed)
    listing = [dict(name=k["name"], op=k["op"], desc=k["desc"], flops=flops(k)) for k in KERNELS]
    with open(os.path.join(args.out_dir, "kernels.json"), "w") as f:
        json.dump(listing, f, indent=1)


if __name__ == "__main__":
    main()
