#!/usr/bin/env python3
"""Writes a quantized CNN in ONNX Runtime's QOperator form (QLinearConv with
per-channel int8 weights and int32 biases, uint8 activations) for the
benchmark, with ONNX Runtime's outputs as references:

    /usr/bin/python3 scripts/models/make_quant_bench.py [--out DIR] [--channels C] [--size S]
    scripts/bench.sh --models DIR --only qlinear_cnn

Default DIR: ~/.cache/kiln/models (generated files stay out of git). The
model is two 3x3 convolutions of 64 channels on a 56x56 map (the size of
ResNet's first stage) between QuantizeLinear and DequantizeLinear.
"""

import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from export_models import check_ort, ort_dir, ort_reference  # noqa: E402


def qlinear_cnn(folder, rng, c=64, hw=56):
    """Writes FOLDER/model.onnx; returns its input."""
    inits, nodes = [], []

    def add(name, array):
        inits.append(numpy_helper.from_array(array, name))

    add("x_scale", np.array(0.02, dtype=np.float32))
    add("x_zp", np.array(128, dtype=np.uint8))
    nodes.append(helper.make_node("QuantizeLinear", ["x", "x_scale", "x_zp"], ["q0"]))
    prev, prev_scale, prev_zp = "q0", "x_scale", "x_zp"
    for k in range(2):
        w = rng.integers(-127, 128, size=(c, c, 3, 3)).astype(np.int8)
        add(f"w{k}", w)
        add(f"w{k}_scale", (rng.uniform(0.5, 1.5, c) * 1e-3).astype(np.float32))
        add(f"w{k}_zp", np.zeros(c, dtype=np.int8))
        add(f"b{k}", rng.integers(-2000, 2000, size=c).astype(np.int32))
        add(f"y{k}_scale", np.array(0.05, dtype=np.float32))
        add(f"y{k}_zp", np.array(128, dtype=np.uint8))
        nodes.append(helper.make_node(
            "QLinearConv", [prev, prev_scale, prev_zp, f"w{k}", f"w{k}_scale", f"w{k}_zp",
                            f"y{k}_scale", f"y{k}_zp", f"b{k}"], [f"q{k + 1}"], pads=[1, 1, 1, 1]))
        prev, prev_scale, prev_zp = f"q{k + 1}", f"y{k}_scale", f"y{k}_zp"
    nodes.append(helper.make_node("DequantizeLinear", [prev, prev_scale, prev_zp], ["y"]))
    graph = helper.make_graph(
        nodes, "qlinear_cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, hw, hw])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, hw, hw])], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(folder, "model.onnx"))
    return [rng.uniform(-2, 2, (1, c, hw, hw)).astype(np.float32)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.expanduser("~/.cache/kiln/models"))
    ap.add_argument("--channels", type=int, default=64,
                    help="channels of both convolutions (default 64; 256 and more make "
                         "reductions too deep for one exact f32 sum: qlinear_cnn_cN)")
    ap.add_argument("--size", type=int, default=56, help="height and width (default 56)")
    args = ap.parse_args()
    ort = ort_dir()
    check_ort(ort)
    name = "qlinear_cnn" if (args.channels, args.size) == (64, 56) else \
        f"qlinear_cnn_c{args.channels}_s{args.size}"
    folder = os.path.join(args.out, name)
    data = os.path.join(folder, "test_data_set_0")
    os.makedirs(data, exist_ok=True)
    inputs = qlinear_cnn(folder, np.random.default_rng(23), c=args.channels, hw=args.size)
    for j, value in enumerate(inputs):
        onnx.save_tensor(numpy_helper.from_array(value), os.path.join(data, f"input_{j}.pb"))
    ort_reference(ort, os.path.join(folder, "model.onnx"), data)
    print(f"{name} in {folder}")


if __name__ == "__main__":
    main()
