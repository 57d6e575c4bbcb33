#!/usr/bin/env python3
"""A model compiled once for every shape against code specialised to each
of its test sets' shapes: first call (compile included), steady run, and
the outputs against the test set's references (ONNX Runtime's).

    /usr/bin/python3 scripts/bench/dynamic_vs_specialised.py \
        ~/.cache/kiln/shape-models/regnet_y_400mf-opset17 [DIR...] [--runs 10]

DIR holds model.onnx and test_data_set_*/ (scripts/models/
export_shape_models.py writes them). One thread, no compile cache; the
dynamic and the specialised model are timed in the same process, the
specialised one right after.
"""

import argparse
import glob
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "build", "python"))

import kiln  # noqa: E402


def measure(folder, dynamic, runs):
    t0 = time.perf_counter()
    model = kiln.compile(os.path.join(folder, "model.onnx"), threads=1, cache=False,
                         dynamic_shapes=dynamic)
    load_ms = (time.perf_counter() - t0) * 1e3
    rows = []
    for data in sorted(glob.glob(os.path.join(folder, "test_data_set_*"))):
        feeds = {info.name: kiln.read_tensor(os.path.join(data, f"input_{j}.pb"))
                 for j, info in enumerate(model.inputs)}
        t = time.perf_counter()
        outputs = model.run(None, feeds)
        first = (time.perf_counter() - t) * 1e3
        times = []
        for _ in range(runs):
            t = time.perf_counter()
            model.run(None, feeds)
            times.append((time.perf_counter() - t) * 1e3)
        worst, match = 0.0, True
        for k, got in enumerate(outputs):
            want = kiln.read_tensor(os.path.join(data, f"output_{k}.pb"))
            match &= got.shape == want.shape and bool(np.allclose(got, want, rtol=1e-3, atol=1e-4))
            if got.shape == want.shape and got.size:
                worst = max(worst, float(np.max(np.abs(got.astype(np.float64) - want))))
        shape = "x".join(map(str, next(iter(feeds.values())).shape))
        rows.append((shape, first, statistics.median(times), worst, match))
    return load_ms, model.compilations, rows


def main():
    p = argparse.ArgumentParser()
    p.add_argument("folders", nargs="+")
    p.add_argument("--runs", type=int, default=10)
    args = p.parse_args()
    for folder in args.folders:
        name = os.path.basename(os.path.normpath(folder))
        _, dyn_compiles, dyn = measure(folder, True, args.runs)
        _, spec_compiles, spec = measure(folder, False, args.runs)
        print(f"\n== {name}: {dyn_compiles} executable(s) compiled once for every shape, "
              f"{spec_compiles} specialised")
        print(f"{'input':>16}  {'first ms':>9}  {'steady ms':>9}  {'spec ms':>8}  {'ratio':>6}  "
              f"{'max err':>8}  outputs")
        for (shape, first, steady, worst, ok), (_, _, spec_steady, _, spec_ok) in zip(dyn, spec):
            print(f"{shape:>16}  {first:>9.1f}  {steady:>9.3f}  {spec_steady:>8.3f}  "
                  f"{steady / spec_steady:>6.2f}  {worst:>8.1e}  "
                  f"{'match' if ok and spec_ok else 'MISMATCH'}")


if __name__ == "__main__":
    main()
