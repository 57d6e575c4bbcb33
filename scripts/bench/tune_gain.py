#!/usr/bin/env python3
"""What kernel tuning (kiln.compile(..., tune=True), kilnc/kiln-run --tune)
costs and gains, per model and thread count.

    PYTHONPATH=build/python /usr/bin/python3 scripts/bench/tune_gain.py \\
        MODEL_DIR... [--threads 1,2] [--rounds 5] [--runs 20]

Each MODEL_DIR holds model.onnx (and test_data_set_0/input_*.pb, else the
inputs are random). For each thread count the model is compiled tuned into
a fresh cache (so the tuning is paid here, as on a new machine), then tuned
again from that cache (what every later compile pays), and untuned; the
tuned and untuned executables then run in alternating rounds on the same
inputs, and the medians give the gain. Printed per model: tuning time
(fresh and cached), samples raced against the fixed-sample baseline (100
per candidate), layers whose choice changed, the medians and tuned/untuned.
"""

import argparse
import glob
import os
import re
import statistics
import sys
import tempfile
import time

import numpy as np

import kiln


def inputs_for(model, folder):
    files = sorted(glob.glob(os.path.join(folder, "test_data_set_0", "input_*.pb")),
                   key=lambda p: int(re.findall(r"(\d+)\.pb$", p)[0]))
    if len(files) == len(model.inputs):
        return {i.name: kiln.read_tensor(f) for i, f in zip(model.inputs, files)}
    rng = np.random.default_rng(0)
    feeds = {}
    for i in model.inputs:
        shape = [d if d is not None else 1 for d in i.shape]
        feeds[i.name] = rng.standard_normal(shape).astype(i.dtype)
    return feeds


def compile_in(cache_dir, path, threads, tune):
    os.environ["KILN_CACHE_DIR"] = cache_dir
    start = time.perf_counter()
    model = kiln.compile(path, threads=threads, tune=tune, cache=True)
    return model, time.perf_counter() - start


def first_run(model, feeds):
    start = time.perf_counter()
    model.run(None, feeds)
    return time.perf_counter() - start


def timed_runs(model, feeds, runs):
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        model.run(None, feeds)
        times.append(time.perf_counter() - start)
    return times


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--verbose", action="store_true", help="print each layer's tuning")
    args = ap.parse_args()
    rows = []
    for folder in args.models:
        path = os.path.join(folder, "model.onnx")
        name = os.path.basename(os.path.normpath(folder))
        for threads in [int(t) for t in args.threads.split(",")]:
            with tempfile.TemporaryDirectory() as fresh, tempfile.TemporaryDirectory() as plain:
                # Compile + first run (a model with dynamic dims compiles at
                # its first run): untuned; tuned into a fresh cache (tuning
                # paid); tuned again with the compiled code removed from that
                # cache, so that only the tuning comes from it.
                untuned, plain_s = compile_in(plain, path, threads, False)
                feeds = inputs_for(untuned, folder)
                plain_s += first_run(untuned, feeds)
                tuned, fresh_s = compile_in(fresh, path, threads, True)
                fresh_s += first_run(tuned, feeds)
                report = tuned.tuning
                for code in glob.glob(os.path.join(fresh, "**", "*.kjit"), recursive=True):
                    os.remove(code)
                again, cached_s = compile_in(fresh, path, threads, True)
                cached_s += first_run(again, feeds)
                del again
                if args.verbose:
                    print(f"{name} t{threads}: {report}", flush=True)
                summary = report.split("\n")[0]
                m = re.search(r"in ([\d.]+) s: (\d+) changed.*?; (\d+) samples .*?, (\d+) % of the "
                              r"(\d+)", summary)
                tune_s, changed, samples, share, baseline = m.groups() if m else ("?",) * 5
                base, tune = [], []
                for r in range(args.rounds):
                    order = [(untuned, base), (tuned, tune)]
                    if r % 2:
                        order.reverse()
                    for model, into in order:
                        into.extend(timed_runs(model, feeds, args.runs))
                b, t = statistics.median(base) * 1e3, statistics.median(tune) * 1e3
                rows.append((name, threads, tune_s, changed, samples, baseline, share, b, t, t / b,
                             plain_s, fresh_s, cached_s))
                print(f"{name:22s} t{threads} tuning {tune_s:>5s} s, {changed:>2s} layers changed, "
                      f"{samples:>5s} samples = {share:>3s} % of {baseline:>5s}; untuned "
                      f"{b:8.3f} ms, tuned {t:8.3f} ms, tuned/untuned {t / b:.3f}; compile "
                      f"untuned {plain_s:.1f} s, tuning {fresh_s:.1f} s, from the cache "
                      f"{cached_s:.1f} s", flush=True)
    print()
    print("| model | threads | tuning (s) | layers changed | samples / baseline | untuned ms "
          "| tuned ms | tuned/untuned | compile s: untuned / tuning / tuned from cache |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for (name, threads, tune_s, changed, samples, baseline, share, b, t, ratio, plain_s, fresh_s,
         cached_s) in rows:
        print(f"| {name} | {threads} | {tune_s} | {changed} | {samples} / {baseline} ({share} %) "
              f"| {b:.3f} | {t:.3f} | {ratio:.3f} | {plain_s:.1f} / {fresh_s:.1f} / "
              f"{cached_s:.1f} |")
    changed_rows = [r for r in rows if r[3] not in ("0", "?")]
    if changed_rows:
        geo = float(np.exp(np.mean([np.log(r[9]) for r in changed_rows])))
        print(f"\ngeomean tuned/untuned where tuning changed a layer: {geo:.3f} "
              f"({len(changed_rows)} of {len(rows)} model/thread pairs)")


if __name__ == "__main__":
    sys.exit(main())
