"""The cost of a Python `run` over the C++ one, on a tiny model.

    PYTHONPATH=build/python /usr/bin/python3 scripts/bench/python_overhead.py [MODEL]

Times `model.run(None, {"x": x})` in Python and `kiln-run --bench` (C++
kiln::Model::run) on the same model, alternating, one thread, and prints
the medians and their difference. Default model: build/examples/tiny_mlp."""
import os
import re
import statistics
import subprocess
import sys
import time

import numpy as np

import kiln

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
model_path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    root, "build", "examples", "tiny_mlp", "model.onnx")
kiln_run = os.path.join(root, "build", "bin", "kiln-run")
model = kiln.compile(model_path, threads=1)
feeds = {i.name: np.random.default_rng(0).uniform(-1, 1, [d or 1 for d in i.shape])
         .astype(i.dtype) for i in model.inputs}

def python_round(runs=20000):
    for _ in range(1000):
        model.run(None, feeds)
    times = []
    for _ in range(runs):
        t = time.perf_counter_ns()
        model.run(None, feeds)
        times.append(time.perf_counter_ns() - t)
    return statistics.median(times) / 1000.0

def cpp_round(runs=4000):
    out = subprocess.run([kiln_run, model_path, "--threads", "1", "--bench", str(runs)],
                         capture_output=True, text=True, check=True).stdout
    return float(re.search(r"median_ms=([0-9.]+)", out).group(1)) * 1000.0

py, cpp = [], []
for r in range(5):
    py.append(python_round())
    cpp.append(cpp_round())
    print(f"round {r + 1}: python {py[-1]:.2f} us, c++ {cpp[-1]:.2f} us")
p, c = statistics.median(py), statistics.median(cpp)
print(f"median per run: python {p:.2f} us, c++ {c:.2f} us, python overhead {p - c:.2f} us")
