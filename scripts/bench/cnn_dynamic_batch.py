#!/usr/bin/env python3
"""Issue 39's CNN target: a CNN with a dynamic batch compiled once runs
within 1.05x of code specialised to each batch (1, 2 and 8); with
--sizes, the same for image sizes (a CNN whose height and width are known
only at run time: segmentation, detection backbones).

    /usr/bin/python3 scripts/bench/cnn_dynamic_batch.py \
        ~/.cache/kiln/shape-models/regnet_y_400mf-opset17 [DIR...] \
        [--batches 1,2,8 | --sizes 224x224,192x256,320x320] [--threads 1] \
        [--rounds 3] [--runs 10]

DIR holds model.onnx and test_data_set_0/ (scripts/models/
export_shape_models.py writes them, batch as the first input's dim 0).
The batch-B input repeats test set 0's image B times; the HxW input is one
image of N(0, 1) values (seed 0). In one process: the model compiled once
for every shape (`dynamic_shapes=True`) and one model specialised per shape
(`dynamic_shapes=False`: it compiles per shape), then alternating rounds of
`--runs` runs each; the medians over all runs. Each shape's outputs of the
two agree (atol 1e-4, rtol 1e-3) and, where its input is test set 0's,
match its reference (ONNX Runtime's), or the line says so. No compile
cache.
"""

import argparse
import math
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "build", "python"))

import kiln  # noqa: E402


def timed_runs(model, feeds, runs):
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        model.run(None, feeds)
        times.append((time.perf_counter() - t) * 1e3)
    return times


def bench(folder, batches, threads, rounds, runs, sizes=None):
    path = os.path.join(folder, "model.onnx")
    data = os.path.join(folder, "test_data_set_0")
    t0 = time.perf_counter()
    dyn = kiln.compile(path, threads=threads, cache=False, dynamic_shapes=True)
    name = dyn.inputs[0].name
    image = kiln.read_tensor(os.path.join(data, "input_0.pb"))
    want = kiln.read_tensor(os.path.join(data, "output_0.pb"))
    if sizes:
        gen = np.random.default_rng(0)
        feeds = {hw: {name: gen.standard_normal((1, image.shape[1]) + hw, dtype=np.float32)}
                 for hw in sizes}
        batches = sizes
    else:
        feeds = {b: {name: np.ascontiguousarray(np.repeat(image[:1], b, axis=0))}
                 for b in batches}
    first = {}
    for b in batches:  # the first call at each batch, compile included for the first
        t = time.perf_counter()
        dyn.run(None, feeds[b])
        first[b] = (time.perf_counter() - (t0 if b == batches[0] else t)) * 1e3
    spec = {}
    for b in batches:
        spec[b] = kiln.compile(path, threads=threads, cache=False, dynamic_shapes=False)
        spec[b].run(None, feeds[b])
    checks = {}
    for b in batches:
        got, ref = dyn.run(None, feeds[b])[0], spec[b].run(None, feeds[b])[0]
        ok = bool(np.allclose(got, ref, rtol=1e-3, atol=1e-4))
        if not sizes:
            ok &= bool(np.allclose(got[:1], want[:1], rtol=1e-3, atol=1e-4))
        checks[b] = ok
    times = {(k, b): [] for k in ("dyn", "spec") for b in batches}
    for _ in range(rounds):
        for b in batches:
            times[("dyn", b)] += timed_runs(dyn, feeds[b], runs)
            times[("spec", b)] += timed_runs(spec[b], feeds[b], runs)
    if sizes:  # the reference's own input, where one size is the reference's
        for hw in sizes:
            if tuple(image.shape[2:]) == hw:
                ok = np.allclose(dyn.run(None, {name: image})[0], want, rtol=1e-3, atol=1e-4)
                checks[hw] &= bool(ok)
    return dyn.compilations, first, times, checks


def main():
    p = argparse.ArgumentParser()
    p.add_argument("folders", nargs="+")
    p.add_argument("--batches", default="1,2,8")
    p.add_argument("--sizes", help="image sizes HxW instead of batches, e.g. 224x224,192x256")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--runs", type=int, default=10)
    args = p.parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    sizes = [tuple(int(v) for v in hw.split("x")) for hw in args.sizes.split(",")] \
        if args.sizes else None
    what = "image size" if sizes else "batch"
    ratios_all = []
    for folder in args.folders:
        name = os.path.basename(os.path.normpath(folder))
        compiles, first, times, checks = bench(folder, batches, args.threads, args.rounds,
                                               args.runs, sizes)
        print(f"\n== {name}, {args.threads} thread(s): {compiles} executable(s) compiled "
              f"for every {what}")
        print(f"{what:>10}  {'first ms':>9}  {'dynamic ms':>10}  {'specialised ms':>14}  "
              f"{'ratio':>6}  outputs")
        ratios = []
        for b in sizes or batches:
            d = statistics.median(times[("dyn", b)])
            s = statistics.median(times[("spec", b)])
            ratios.append(d / s)
            label = "x".join(map(str, b)) if sizes else str(b)
            print(f"{label:>10}  {first[b]:>9.1f}  {d:>10.3f}  {s:>14.3f}  {d / s:>6.3f}  "
                  f"{'match' if checks[b] else 'MISMATCH'}")
        geo = math.exp(sum(map(math.log, ratios)) / len(ratios))
        ratios_all += ratios
        print(f"geomean ratio {geo:.3f} (target <= 1.05)")
    if len(args.folders) > 1:
        geo = math.exp(sum(map(math.log, ratios_all)) / len(ratios_all))
        print(f"\nall models: geomean ratio {geo:.3f}, worst {max(ratios_all):.3f}")


if __name__ == "__main__":
    main()
