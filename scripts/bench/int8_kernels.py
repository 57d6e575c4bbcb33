#!/usr/bin/env python3
"""int8 kernels against this machine's int8 dot-product peak, measured in
the same run (issue 40's "int8 GEMM 1024^3 and 3x3 conv >= 80 % of the
machine's int8 VNNI peak"), with ONNX Runtime on the same files:

    /usr/bin/python3 scripts/bench/int8_kernels.py [--rounds 5] [--runs 20] [--threads 1]

Each kernel is a one-node model written here with onnx.helper (into a
temporary folder): a MatMulInteger of 1024^3 (u8 input, constant s8
weights, input zero point 3: the zero point's correction is part of the
work), and QLinearConv 3x3 layers (u8 in and out, per-channel s8 weights,
i32 bias; 128 channels on 28x28, 256 on 14x14, 64 on 56x56, the shapes of
ResNet's stages). Rounds alternate vnni_peak.c (compiled here with
-march=native: vpdpbusd on zmm, or ymm with AVX-VNNI), Kiln (`kiln-run
--bench`, compile excluded) and ONNX Runtime (ort_run.js, session creation
excluded); the table gives medians over the rounds, Gop/s with 2 ops per
multiply-add, and % of THREADS x the one-core peak of the same run. On a CPU
without VNNI the peak is "none" and the % column is empty (Kiln then runs
its vpmaddwd form: docs/int8.md).

Kiln is the build's (build/, or $KILN_BUILD_DIR); ONNX Runtime is
onnxruntime-node from the bench cache that scripts/bench.sh installs.
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def bench_cache():
    return os.environ.get("KILN_BENCH_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "kiln", "bench")


def save_input(folder, arr):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "input_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(arr).SerializeToString())


def matmul_integer(folder, rng, n=1024):
    a = helper.make_tensor_value_info("a", TensorProto.UINT8, [n, n])
    y = helper.make_tensor_value_info("y", TensorProto.INT32, [n, n])
    b = numpy_helper.from_array(rng.integers(-128, 128, (n, n), dtype=np.int8), "b")
    azp = numpy_helper.from_array(np.array(3, np.uint8), "azp")
    node = helper.make_node("MatMulInteger", ["a", "b", "azp"], ["y"], name="mmi")
    g = helper.make_graph([node], "mmi", [a], [y], [b, azp])
    write(folder, g, rng.integers(0, 256, (n, n), dtype=np.uint8))
    return 2 * n ** 3


def qlinear_conv(folder, rng, c, hw):
    x = helper.make_tensor_value_info("x", TensorProto.UINT8, [1, c, hw, hw])
    y = helper.make_tensor_value_info("y", TensorProto.UINT8, [1, c, hw, hw])
    w = rng.integers(-127, 128, (c, c, 3, 3), dtype=np.int8)
    inits = [
        numpy_helper.from_array(np.array(0.02, np.float32), "xs"),
        numpy_helper.from_array(np.array(7, np.uint8), "xzp"),
        numpy_helper.from_array(w, "w"),
        numpy_helper.from_array((rng.random(c) * 0.002 + 0.001).astype(np.float32), "ws"),
        numpy_helper.from_array(np.zeros(c, np.int8), "wzp"),
        numpy_helper.from_array(np.array(0.5, np.float32), "ys"),
        numpy_helper.from_array(np.array(120, np.uint8), "yzp"),
        numpy_helper.from_array(rng.integers(-5000, 5000, c, dtype=np.int32), "bias"),
    ]
    node = helper.make_node("QLinearConv", ["x", "xs", "xzp", "w", "ws", "wzp", "ys", "yzp", "bias"],
                            ["y"], name="qconv", pads=[1, 1, 1, 1], kernel_shape=[3, 3])
    g = helper.make_graph([node], "qconv", [x], [y], inits)
    write(folder, g, rng.integers(0, 256, (1, c, hw, hw), dtype=np.uint8))
    return 2 * hw * hw * c * c * 9


def write(folder, graph, inp):
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    os.makedirs(folder, exist_ok=True)
    onnx.save(m, os.path.join(folder, "model.onnx"))
    save_input(os.path.join(folder, "test_data_set_0"), inp)


def build_dir():
    return os.environ.get("KILN_BUILD_DIR") or os.path.join(ROOT, "build")


def vnni_peak(tmp):
    cc = shutil.which("clang-22") or shutil.which("clang") or shutil.which("cc")
    exe = os.path.join(tmp, "vnni_peak")
    r = subprocess.run([cc, "-O2", "-march=native", os.path.join(HERE, "vnni_peak.c"), "-o", exe],
                       capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"int8_kernels: compiling vnni_peak.c failed: {r.stderr.strip()}")
    return exe


def run_peak(exe):
    out = subprocess.run([exe, "30000000"], capture_output=True, text=True).stdout
    m = re.search(r"isa=(\S+) gops=([\d.]+)", out)
    if not m or m.group(1) == "none":
        return None
    return float(m.group(2))


def run_kiln(model, runs, threads, tmp):
    """(whole run's median ms, the int8 kernel's median ms and its op count
    per call) from `kiln-run --bench --profile`: the profile times each
    kernel call, so the layout changes an NCHW model needs around the
    convolution (its input and output transposed to NHWC and back) are not
    counted as the kernel's."""
    kr = os.path.join(build_dir(), "bin", "kiln-run")
    d = os.path.join(os.path.dirname(model), "test_data_set_0")
    prof = os.path.join(tmp, "profile.json")
    r = subprocess.run([kr, model, "--inputs", d, "--threads", str(threads), "--bench", str(runs),
                        "--profile", prof], capture_output=True, text=True)
    m = re.search(r"median_ms=([\d.]+)", r.stdout)
    if r.returncode or not m:
        sys.exit(f"int8_kernels: kiln-run {model} failed:\n{r.stdout}{r.stderr}")
    with open(prof) as f:
        events = [e for e in json.load(f)["traceEvents"]
                  if e.get("ph") == "X" and e["args"].get("kernel") == "kiln_qconv2d_nhwc_u8s8"]
    if not events:
        sys.exit(f"int8_kernels: {model}: no kiln_qconv2d_nhwc_u8s8 call in the profile")
    return float(m.group(1)), statistics.median(e["dur"] for e in events) / 1e3, events[0]["args"]["flops"]


def run_ort(model, runs, threads):
    ort = os.path.join(bench_cache(), "onnxruntime-node-1.30.0")
    if not os.path.isdir(os.path.join(ort, "node_modules", "onnxruntime-node")):
        return None
    d = os.path.join(os.path.dirname(model), "test_data_set_0")
    r = subprocess.run(["node", os.path.join(HERE, "ort_run.js"), "--ort", ort, "--model", model,
                        "--inputs", d, "--runs", str(runs), "--threads", str(threads)],
                       capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"int8_kernels: ONNX Runtime on {model} failed:\n{r.stderr}")
    return statistics.median(json.loads(r.stdout)["times_ms"])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--runs", type=int, default=100)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--json")
    args = p.parse_args()
    rng = np.random.default_rng(40)
    tmp = tempfile.mkdtemp(prefix="kiln-int8-kernels-")
    try:
        kernels = [("MatMulInteger 1024^3", "mmi", lambda f: matmul_integer(f, rng))]
        for c, hw in ((128, 28), (256, 14), (64, 56)):
            kernels.append((f"QLinearConv 3x3 {c}->{c} {hw}x{hw}", f"qconv{c}",
                            lambda f, c=c, hw=hw: qlinear_conv(f, rng, c, hw)))
        ops = {name: make(os.path.join(tmp, name)) for _, name, make in kernels}
        exe = vnni_peak(tmp)
        names = [n for _, n, _ in kernels]
        peaks = []
        model_ms, kernel_ms, ort_ms = ({n: [] for n in names} for _ in range(3))
        for r in range(args.rounds):
            peaks.append(run_peak(exe))
            for name in names:
                model = os.path.join(tmp, name, "model.onnx")
                order = ("kiln", "ort") if r % 2 == 0 else ("ort", "kiln")
                for engine in order:
                    if engine == "kiln":
                        whole, kern, flops = run_kiln(model, args.runs, args.threads, tmp)
                        if flops != ops[name]:
                            sys.exit(f"int8_kernels: {name}: the profile counts {flops} ops, "
                                     f"this script {ops[name]}")
                        model_ms[name].append(whole)
                        kernel_ms[name].append(kern)
                    else:
                        ort_ms[name].append(run_ort(model, args.runs, args.threads))
            print(f"round {r + 1}: peak {peaks[-1] or 'none'} Gop/s; " + ", ".join(
                f"{n} kernel {kernel_ms[n][-1]:.3f} ms" for n in names), flush=True)
        peak = None if any(x is None for x in peaks) else statistics.median(peaks)
        print(f"\nint8 dot-product peak (vnni_peak.c, one core, median of {args.rounds} rounds): "
              f"{'none (no VNNI)' if peak is None else f'{peak:.1f} Gop/s'}; threads={args.threads}; "
              f"medians over the rounds of each engine's median of {args.runs} runs")
        print("kernel: the int8 kernel's calls in Kiln's profile; model: the whole run (an NCHW "
              "model's layout changes included), as ONNX Runtime's")
        hdr = (f"{'kernel':32s} {'kernel ms':>9s} {'Gop/s':>7s} {'% peak':>7s} {'model ms':>9s} "
               f"{'ORT ms':>8s} {'Kiln/ORT':>8s}")
        print(hdr)
        print("-" * len(hdr))
        rows = []
        for label, name, _ in kernels:
            k = statistics.median(kernel_ms[name])
            w = statistics.median(model_ms[name])
            o = None if any(x is None for x in ort_ms[name]) else statistics.median(ort_ms[name])
            kg = ops[name] / k / 1e6
            pct = None if peak is None else 100 * kg / (peak * args.threads)
            rows.append({"kernel": label, "kernel_ms": k, "gops": kg, "pct_peak": pct,
                         "model_ms": w, "ort_ms": o})
            print(f"{label:32s} {k:9.3f} {kg:7.1f} {'' if pct is None else f'{pct:6.1f}%':>7s} "
                  f"{w:9.3f} {'' if o is None else f'{o:8.3f}':>8s} "
                  f"{'' if o is None else f'{w / o:8.2f}':>8s}")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"peak_gops": peak, "threads": args.threads, "rows": rows}, f, indent=1)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
