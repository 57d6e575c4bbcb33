#!/usr/bin/env python3
"""ConvTranspose straight from its definition (ONNX operator docs), as an
independent reference for convtranspose_phases.textproto: Kiln's importer
rewrites ConvTranspose into a convolution, so its reference interpreter
runs the rewrite and cannot check it.

    convtranspose_reference.py make DIR     random inputs DIR/NAME.npy and
                                            the expected DIR/expected_J.npy
    convtranspose_reference.py check DIR OUT  compares OUT/output_J.npy
"""
import itertools
import os
import sys

import numpy as np


def conv_transpose(x, w, b, strides, pads, output_padding=None, group=1):
    """y[n, g*Mg + m, o...] = b + sum over c in group g, i..., t... with
    o = i * s + t - pad_begin of x[n, c, i...] w[c, m, t...]."""
    n, c = x.shape[:2]
    mg = w.shape[1]
    spatial = x.ndim - 2
    k = w.shape[2:]
    op = output_padding or [0] * spatial
    out = [strides[d] * (x.shape[2 + d] - 1) + op[d] + k[d] - pads[d] - pads[spatial + d]
           for d in range(spatial)]
    y = np.zeros((n, group * mg, *out), dtype=np.float64)
    cg = c // group
    for ch in range(c):
        g = ch // cg
        for i in itertools.product(*[range(s) for s in x.shape[2:]]):
            for t in itertools.product(*[range(s) for s in k]):
                o = [i[d] * strides[d] + t[d] - pads[d] for d in range(spatial)]
                if any(o[d] < 0 or o[d] >= out[d] for d in range(spatial)):
                    continue
                y[(slice(None), slice(g * mg, (g + 1) * mg), *o)] += \
                    x[(slice(None), ch, *i)][:, None] * w[(ch, slice(None), *t)][None, :]
    if b is not None:
        y += b.reshape(1, -1, *([1] * spatial))
    return y.astype(np.float32)


def make(d):
    rng = np.random.default_rng(11)
    r = lambda *s: rng.uniform(-1, 1, s).astype(np.float32)
    v = dict(x=r(2, 4, 5, 7), w=r(4, 3, 4, 4), b=r(3), wg=r(4, 3, 3, 3), bg=r(6),
             a=r(1, 3, 9), w1=r(3, 2, 5))
    os.makedirs(d, exist_ok=True)
    for name, a in v.items():
        np.save(os.path.join(d, name + ".npy"), a)
    expected = [
        conv_transpose(v["x"], v["w"], v["b"], [2, 2], [1, 1, 1, 1]),
        conv_transpose(v["x"], v["wg"], v["bg"], [3, 2], [2, 0, 1, 1], [1, 1], group=2),
        conv_transpose(v["a"], v["w1"], None, [4], [3, 0]),
    ]
    for j, e in enumerate(expected):
        np.save(os.path.join(d, f"expected_{j}.npy"), e)


def check(d, out):
    worst = 0.0
    for j in range(3):
        e = np.load(os.path.join(d, f"expected_{j}.npy"))
        o = np.load(os.path.join(out, f"output_{j}.npy"))
        if o.shape != e.shape:
            print(f"output {j}: shape {o.shape}, expected {e.shape}")
            sys.exit(1)
        err = float(np.abs(o - e).max())
        worst = max(worst, err)
        if not np.allclose(o, e, atol=1e-5, rtol=1e-5):
            print(f"output {j}: max abs error {err}")
            sys.exit(1)
    print(f"all 3 outputs match the direct ConvTranspose (max abs error {worst:.1e})")


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2])
    else:
        check(sys.argv[2], sys.argv[3])
