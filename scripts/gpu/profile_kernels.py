#!/usr/bin/env python3
"""Where a kit's runner spends its GPU time, kernel by kernel, on a machine
with a GPU (the `device` machines: no LLVM/MLIR there):

    python3 scripts/gpu/profile_kernels.py KIT NAME [--top 25]

Materialises runner NAME of a kit from scripts/gpu/prepare.py (as
device.py does) and runs it on its first test set under Nsight Compute
(`ncu`, which the CUDA toolkit has; the lent machines have no usable
`nsys`): each kernel launch's GPU time (gpu__time_duration) with the
clocks and caches left as they are, so the times are a warm run's. Prints
the kernels by total time: launches, mean time, share. Kiln's kernels are
named by the pass that made them (tf32_tiles* for the tensor-core tiles,
main_kernel* for the rest), so the table says which kind costs what. ncu
replays every launch, so this takes a minute or two for ResNet-50.
"""
import argparse
import csv
import io
import os
import glob
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import device  # noqa: E402  (materialize, inputs_and_refs, run_runner)


def find_tool(name):
    """`name` on PATH or in a CUDA toolkit's bin (x86-64 builds only)."""
    path = shutil.which(name)
    if path:
        return path
    for p in sorted(glob.glob(f"/usr/local/cuda*/bin/{name}"), reverse=True):
        return p
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kit")
    ap.add_argument("name")
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    kit = os.path.abspath(args.kit)
    ncu = find_tool("ncu")
    if not ncu:
        sys.exit("profile_kernels: no ncu on this machine")
    entry = next(e for e in device.json.load(open(os.path.join(kit, "manifest.json")))
                 if e["name"] == args.name)
    d, runner, weights = device.materialize(kit, entry)
    ins, refs = device.inputs_and_refs(kit, entry)[0]
    # run_runner writes the inputs, checks the runner works and gives its
    # arguments (one run after one warm-up).
    rc, text, _, argv = device.run_runner(d, runner, weights, ins, refs)
    if rc:
        sys.exit(f"profile_kernels: the runner failed: {text[-1000:]}")
    env = dict(os.environ, LD_LIBRARY_PATH=d)
    p = subprocess.run([ncu, "--csv", "--metrics", "gpu__time_duration.sum", "--clock-control",
                        "none", "--cache-control", "none"] + argv,
                       capture_output=True, text=True, env=env, timeout=900)
    out = p.stdout
    rows = list(csv.DictReader(io.StringIO(out[out.find('"ID"'):])))
    if not rows:
        sys.exit(f"profile_kernels: no kernel table (rc {p.returncode}):\n"
                 f"{(p.stdout + p.stderr)[-2000:]}")
    by_name, total = {}, 0.0
    for r in rows:
        t = float(r["Metric Value"].replace(",", ""))
        unit = r["Metric Unit"]  # ncu 2025: "ns" (older: "nsecond")
        t *= {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3,
              "msecond": 1e3}.get(unit, 1e-3)
        k = by_name.setdefault(r["Kernel Name"], [0, 0.0, r.get("Grid Size", ""), r.get("Block Size", "")])
        k[0] += 1
        k[1] += t
        total += t
    kinds = {}
    for name, (n, t, _, _) in by_name.items():
        kind = "tf32_tiles" if "tf32_tiles" in name else "other"
        kinds[kind] = kinds.get(kind, 0.0) + t
    print(f"{args.name}: {len(rows)} launches of {len(by_name)} kernels, {total / 1e3:.3f} ms "
          f"of kernel time in all")
    print("by kind: " + ", ".join(f"{k} {v / total * 100:.1f} %" for k, v in kinds.items()))
    print(f"{'share':>6} {'launches':>8} {'mean us':>9}  {'grid':>14} {'block':>10}  kernel")
    for name, (n, t, grid, block) in sorted(by_name.items(), key=lambda kv: -kv[1][1])[:args.top]:
        print(f"{t / total * 100:5.1f}% {n:>8} {t / n:9.1f}  {grid:>14} {block:>10}  {name[:80]}")


if __name__ == "__main__":
    main()
