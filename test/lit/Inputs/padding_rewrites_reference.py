#!/usr/bin/env python3
"""Conv and Pad + AveragePool from their ONNX definitions (NumPy), as an
independent reference for padding_rewrites.textproto: the canonicalizations
that rewrite them (dead kernel taps dropped, a zero Pad taken into the
pool) run before Kiln's reference interpreter too, so it cannot check them.

    padding_rewrites_reference.py make DIR      inputs DIR/NAME.npy and
                                                DIR/expected_J.npy
    padding_rewrites_reference.py check DIR OUT  compares OUT/output_J.npy
"""
import os
import sys

import numpy as np


def conv(x, w, strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1)):
    """y[n, f, i, j] = sum over c, kh, kw of xpad[n, c, i sh + kh dh, j sw + kw dw] w[f, c, kh, kw]."""
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    f, _, kh, kw = w.shape
    sh, sw = strides
    dh, dw = dilations
    oh = (xp.shape[2] - ((kh - 1) * dh + 1)) // sh + 1
    ow = (xp.shape[3] - ((kw - 1) * dw + 1)) // sw + 1
    y = np.zeros((x.shape[0], f, oh, ow))
    for a in range(kh):
        for b in range(kw):
            patch = xp[:, :, a * dh:a * dh + (oh - 1) * sh + 1:sh, b * dw:b * dw + (ow - 1) * sw + 1:sw]
            y += np.einsum("nchw,fc->nfhw", patch, w[:, :, a, b].astype(np.float64))
    return y.astype(np.float32)


def avg_pool(x, k, strides):
    oh = (x.shape[2] - k[0]) // strides[0] + 1
    ow = (x.shape[3] - k[1]) // strides[1] + 1
    y = np.zeros((x.shape[0], x.shape[1], oh, ow))
    for a in range(k[0]):
        for b in range(k[1]):
            y += x[:, :, a:a + (oh - 1) * strides[0] + 1:strides[0], b:b + (ow - 1) * strides[1] + 1:strides[1]]
    return (y / (k[0] * k[1])).astype(np.float32)


def make(d):
    rng = np.random.default_rng(5)
    r = lambda *s: rng.standard_normal(s).astype(np.float32)
    v = dict(x=r(1, 8, 14, 14), v=r(1, 8, 1, 2), w1=r(4, 8, 3, 3), w2=r(4, 8, 1, 7), w3=r(4, 8, 5, 3))
    os.makedirs(d, exist_ok=True)
    for name, a in v.items():
        np.save(os.path.join(d, name + ".npy"), a)
    xpad = np.pad(v["x"], ((0, 0), (0, 0), (1, 2), (2, 1)))
    expected = [conv(v["x"], v["w1"], pads=(24, 24, 24, 24), dilations=(24, 24)),
                conv(v["v"], v["w2"], strides=(1, 2), pads=(0, 4, 0, 4)),
                conv(v["x"], v["w3"], strides=(2, 3), pads=(7, 9, 11, 9), dilations=(5, 9)),
                avg_pool(xpad, (3, 3), (2, 1))]
    for j, e in enumerate(expected):
        np.save(os.path.join(d, f"expected_{j}.npy"), e)


def check(d, out):
    worst = 0.0
    for j in range(4):
        e = np.load(os.path.join(d, f"expected_{j}.npy"))
        o = np.load(os.path.join(out, f"output_{j}.npy"))
        if o.shape != e.shape or not np.allclose(o, e, atol=1e-4, rtol=1e-4):
            print(f"output {j}: shape {o.shape} (expected {e.shape}), "
                  f"max abs error {float(np.abs(o - e).max()) if o.shape == e.shape else 'n/a'}")
            sys.exit(1)
        worst = max(worst, float(np.abs(o - e).max()))
    print(f"all 4 outputs match the definitions (max abs error {worst:.1e})")


if __name__ == "__main__":
    make(sys.argv[2]) if sys.argv[1] == "make" else check(sys.argv[2], sys.argv[3])
