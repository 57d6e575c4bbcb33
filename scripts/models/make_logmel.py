#!/usr/bin/env python3
"""Makes a log-mel audio front end (as Whisper's or wav2vec's feature
extractors compute it) as an ONNX model, for scripts/bench.sh --models.

    /usr/bin/python3 scripts/models/make_logmel.py [--out DIR] [--seconds 5]

Writes DIR/logmel/model.onnx (opset 17): audio [1, 16000 x seconds] ->
Reshape -> STFT (frame 400, hop 160, Hann window, one-sided) ->
ReduceSumSquare over (re, im) -> MatMul with an 80-band triangular mel
filterbank -> Add 1e-6 -> Log: logmel [1, frames, 80]; and
test_data_set_0/{input_0,output_0}.pb, the reference computed in float64
with NumPy's FFT (not by any runtime). PyTorch 1.13 cannot export
torch.stft, so the graph is written with onnx.helper.
"""

import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

N_FFT, HOP, N_MELS, RATE = 400, 160, 80, 16000


def mel_filterbank():
    freqs = np.linspace(0, RATE / 2, N_FFT // 2 + 1)
    to_mel = lambda hz: 2595 * np.log10(1 + hz / 700)
    to_hz = lambda m: 700 * (10 ** (m / 2595) - 1)
    points = to_hz(np.linspace(to_mel(0), to_mel(RATE / 2), N_MELS + 2))
    bank = np.zeros((N_FFT // 2 + 1, N_MELS), np.float32)
    for m in range(N_MELS):
        lo, mid, hi = points[m], points[m + 1], points[m + 2]
        bank[:, m] = np.maximum(0, np.minimum((freqs - lo) / (mid - lo), (hi - freqs) / (hi - mid)))
    return bank


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.expanduser("~/.cache/kiln/audio-models"))
    ap.add_argument("--seconds", type=int, default=5)
    args = ap.parse_args()
    length = RATE * args.seconds
    frames = 1 + (length - N_FFT) // HOP
    window = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(N_FFT) / N_FFT)).astype(np.float32)
    bank = mel_filterbank()
    inits = [numpy_helper.from_array(np.array(HOP, np.int64), "hop"),
             numpy_helper.from_array(window, "window"),
             numpy_helper.from_array(bank, "mel_bank"),
             numpy_helper.from_array(np.array(1e-6, np.float32), "eps"),
             numpy_helper.from_array(np.array([1, length, 1], np.int64), "signal_shape")]
    nodes = [
        helper.make_node("Reshape", ["audio", "signal_shape"], ["signal"]),
        helper.make_node("STFT", ["signal", "hop", "window"], ["spectrum"], onesided=1),
        helper.make_node("ReduceSumSquare", ["spectrum"], ["power"], axes=[-1], keepdims=0),
        helper.make_node("MatMul", ["power", "mel_bank"], ["mel"]),
        helper.make_node("Add", ["mel", "eps"], ["mel_eps"]),
        helper.make_node("Log", ["mel_eps"], ["logmel"]),
    ]
    graph = helper.make_graph(
        nodes, "logmel", [helper.make_tensor_value_info("audio", TensorProto.FLOAT, [1, length])],
        [helper.make_tensor_value_info("logmel", TensorProto.FLOAT, [1, frames, N_MELS])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    folder = os.path.join(args.out, "logmel")
    data = os.path.join(folder, "test_data_set_0")
    os.makedirs(data, exist_ok=True)
    onnx.save(model, os.path.join(folder, "model.onnx"))
    audio = np.random.default_rng(0).standard_normal((1, length)).astype(np.float32)
    # The reference, in float64.
    x = audio[0].astype(np.float64)
    framed = np.stack([x[i * HOP:i * HOP + N_FFT] for i in range(frames)]) * window
    spectrum = np.fft.rfft(framed, axis=1)
    power = spectrum.real ** 2 + spectrum.imag ** 2
    logmel = np.log(power @ bank.astype(np.float64) + 1e-6)[None].astype(np.float32)
    for name, value in [("input_0.pb", audio), ("output_0.pb", logmel)]:
        with open(os.path.join(data, name), "wb") as f:
            f.write(numpy_helper.from_array(value).SerializeToString())
    print(f"{folder}: audio [1, {length}] -> logmel [1, {frames}, {N_MELS}]")


if __name__ == "__main__":
    main()
