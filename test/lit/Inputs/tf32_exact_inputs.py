#!/usr/bin/env python3
"""Writes NAME.npy for each float input of an ONNX model (given as
NAME=DIMS arguments): uniform multiples of 1/64 in [-1, 1]. They have at
most 7 significant bits, so rounding them to TF32 (10 mantissa bits)
changes nothing, every product of two is exact in f32 (14 bits), and so is
every sum of fewer than 1024 such products in any order: a TF32 tensor-core
product of them must equal the reference interpreter's exactly.

    tf32_exact_inputs.py OUTDIR a=250x37 b=37x256 ...
"""
import os
import sys

import numpy as np

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(7)
for spec in sys.argv[2:]:
    name, dims = spec.split("=")
    shape = [int(d) for d in dims.split("x")]
    values = rng.integers(-64, 65, size=shape).astype(np.float32) / np.float32(64)
    np.save(os.path.join(out, name + ".npy"), values)
