#!/usr/bin/env python3
"""Writes an f16 copy of an f32 ONNX model: every float initializer and
Constant tensor rounded to float16, Casts to float made Casts to float16,
and the graph's float inputs, outputs and value infos declared float16.
Enough for models without ops whose type constraints exclude float16; it
is how Kiln's f16 paths (kiln-gpu-mma-contractions, f16 vector accesses)
are tried on a real network.

Usage: /usr/bin/python3 scripts/models/to_float16.py IN.onnx OUT.onnx
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper


def to_half(t):
    if t.data_type == TensorProto.FLOAT:
        t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float16), t.name))


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    m = onnx.load(sys.argv[1])
    g = m.graph
    for t in g.initializer:
        to_half(t)
    for n in g.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.TENSOR:
                to_half(a.t)
            if n.op_type == "Cast" and a.name == "to" and a.i == TensorProto.FLOAT:
                a.i = TensorProto.FLOAT16
    for v in list(g.input) + list(g.output) + list(g.value_info):
        if v.type.tensor_type.elem_type == TensorProto.FLOAT:
            v.type.tensor_type.elem_type = TensorProto.FLOAT16
    onnx.save(m, sys.argv[2])


if __name__ == "__main__":
    main()
