#!/usr/bin/env python3
"""Writes an f16 (or bfloat16) copy of an f32 ONNX model: every float
initializer and Constant tensor rounded to the type (to nearest, ties to
even), Casts to float made Casts to it, and the graph's float inputs,
outputs and value infos declared of it. Enough for models without ops whose
type constraints exclude the type; it is how Kiln's f16 and bf16 paths
(kiln-gpu-mma-contractions, f16 vector accesses) are tried on a real
network.

Usage: /usr/bin/python3 scripts/models/to_float16.py [--bfloat16] IN.onnx OUT.onnx
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper


def to_half(t, target):
    if t.data_type != TensorProto.FLOAT:
        return
    x = numpy_helper.to_array(t).astype(np.float32)
    if target == TensorProto.FLOAT16:
        t.CopyFrom(numpy_helper.from_array(x.astype(np.float16), t.name))
        return
    u = x.view(np.uint32)
    one, sixteen = np.uint32(1), np.uint32(16)
    bits = ((u + np.uint32(0x7FFF) + ((u >> sixteen) & one)) >> sixteen).astype("<u2")
    half = TensorProto(name=t.name, data_type=TensorProto.BFLOAT16, dims=list(x.shape),
                       raw_data=bits.tobytes())
    t.CopyFrom(half)


def main():
    args = sys.argv[1:]
    target = TensorProto.FLOAT16
    if args and args[0] == "--bfloat16":
        target = TensorProto.BFLOAT16
        args = args[1:]
    if len(args) != 2:
        sys.exit(__doc__)
    m = onnx.load(args[0])
    g = m.graph
    for t in g.initializer:
        to_half(t, target)
    for n in g.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.TENSOR:
                to_half(a.t, target)
            if n.op_type == "Cast" and a.name == "to" and a.i == TensorProto.FLOAT:
                a.i = target
    for v in list(g.input) + list(g.output) + list(g.value_info):
        if v.type.tensor_type.elem_type == TensorProto.FLOAT:
            v.type.tensor_type.elem_type = target
    onnx.save(m, args[1])


if __name__ == "__main__":
    main()
