#!/usr/bin/env python3
"""Runs a kit from scripts/gpu/prepare.py on a machine with a GPU, PyTorch
and numpy/onnx (no LLVM/MLIR needed):

    python3 scripts/gpu/device.py KIT OUTDIR [--rounds 3] [--runs 30]

1. the runtime's CUDA tests (kiln-cuda-tests: a hand-written kernel on the GPU);
2. every runner of the kit on its ONNX test data (or, for the MatMuls, random
   inputs against a float64 product on the GPU), outputs checked with
   |out - ref| <= 1e-3 + 1e-3 |ref| (cuda-model.sh's tolerance; for a TF32 kit,
   prepare.py --gpu-precision=tf32, the default, 1e-2 + 2e-3 max|ref| +
   1e-2 |ref|, and for its MatMuls an atol of 5e-3 sqrt(n)); a runner that
   fails is run again under compute-sanitizer;
3. latency: alternating rounds of Kiln (device time of one run, CUDA events)
   and PyTorch eager on the same architecture and shapes (cuDNN/cuBLAS, FP32
   with TF32 off, and PyTorch's defaults), medians. PyTorch's models have
   random weights: only their time is used.
Writes OUTDIR/results.json and prints a table.
"""
import argparse
import gzip
import json
import lzma
import os
import shutil
import statistics
import subprocess
import time

import numpy as np

TMP = "/tmp/kiln-gpu"


def log(*a):
    print(*a, flush=True)


def data_set(d, kind):
    """KIND_0, KIND_1, ... of test-data folder `d` (kind: input or output)."""
    return [load_pb(os.path.join(d, f"{kind}_{j}.pb")) for j in range(100)
            if any(os.path.exists(os.path.join(d, f"{kind}_{j}{ext}")) for ext in (".npy", ".pb"))]


def load_pb(path):
    if os.path.exists(path[:-3] + ".npy"):  # prepare.py's copy: no onnx needed here
        return np.load(path[:-3] + ".npy")
    import onnx
    from onnx import numpy_helper
    t = onnx.TensorProto()
    t.ParseFromString(open(path, "rb").read())
    return numpy_helper.to_array(t)


def materialize(kit, entry):
    d = os.path.join(TMP, entry["name"])
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    runner = os.path.join(d, "runner")
    with gzip.open(os.path.join(kit, entry["runner"])) as f:
        open(runner, "wb").write(f.read())
    os.chmod(runner, 0o755)
    for lib in os.listdir(kit):  # libkiln_runtime.so.ABI, its SONAME
        if lib.startswith("libkiln_runtime.so"):
            shutil.copy(os.path.join(kit, lib), d)
    weights = None
    if entry["weights"]:
        base = entry["weights"]["base"]
        with (lzma.open if base.endswith(".xz") else gzip.open)(os.path.join(kit, base)) as f:
            blob = bytearray(f.read())
        for off, hexbytes in entry["weights"]["patch"]:
            b = bytes.fromhex(hexbytes)
            blob[off:off + len(b)] = b
        weights = os.path.join(d, "weights.bin")
        open(weights, "wb").write(blob)
    return d, runner, weights


def inputs_and_refs(kit, entry):
    """[(inputs, refs)] per test set; refs None where computed later."""
    out = []
    if entry["data"] in ("sets", "replicate"):
        for s in entry["sets"]:
            d = os.path.join(kit, s)
            ins, refs = data_set(d, "input"), data_set(d, "output")
            if entry["data"] == "replicate":
                b = entry["batch"]
                ins = [np.concatenate([x] * b, axis=0) for x in ins]
                refs = [np.concatenate([r] * b, axis=0) for r in refs]
            out.append((ins, refs))
    else:
        rng = np.random.default_rng(0)
        scale = entry["baseline"].get("scale", 1.0)
        ins = [rng.standard_normal(s, dtype=np.float32) * np.float32(scale)
               for s in entry["shapes"]]
        import torch
        a, b = (torch.from_numpy(x).cuda().double() for x in ins)
        out.append((ins, [(a @ b).float().cpu().numpy()]))
    return out


def run_runner(d, runner, weights, ins, refs, runs=0, timeout=150):
    args = [runner]
    if weights:
        args += ["--weights", weights]
    if runs:
        args += ["--runs", str(runs), "--warmup", "5"]
    for j, x in enumerate(ins):
        p = os.path.join(d, f"in{j}.bin")
        np.ascontiguousarray(x).tofile(p)
        args.append(p)
    args.append("--")
    for j, r in enumerate(refs):
        args.append(os.path.join(d, f"out{j}.bin") + f":{r.nbytes}")
    t0 = time.time()
    p = subprocess.run(args, capture_output=True, text=True, timeout=timeout,
                       env=dict(os.environ, LD_LIBRARY_PATH=d))
    return p.returncode, p.stdout + p.stderr, time.time() - t0, args


def check(d, refs, atol=1e-3, rtol=1e-3, scale=0.0):
    """|out - ref| <= atol + scale max|ref| + rtol |ref| for every output.
    `scale` is for TF32 kits: TF32's error grows with the output's spread
    (ResNet-50's random-weight logits reach 418 and err by up to 0.34,
    8e-4 of that), so a fixed atol would fail elements near zero."""
    worst, ok = 0.0, True
    for j, r in enumerate(refs):
        o = np.fromfile(os.path.join(d, f"out{j}.bin"), dtype=r.dtype).reshape(r.shape)
        if not np.all(np.isfinite(o)):
            ok = False
        if scale and r.size:
            atol = max(atol, scale * float(np.abs(r.astype(np.float64)).max()))
        err = np.abs(o.astype(np.float64) - r.astype(np.float64))
        worst = max(worst, float(err.max()))
        if not np.all(err <= atol + rtol * np.abs(r.astype(np.float64))):
            ok = False
    return ok, worst


def parse_bench(text):
    for line in text.splitlines():
        if line.startswith("runs "):
            f = line.split()
            return float(f[f.index("device_median_ms") + 1]), float(f[f.index("wall_median_ms") + 1])
    return None, None


# ---- PyTorch eager baselines -------------------------------------------------

def torch_model(spec):
    import torch
    import torch.nn as nn
    m = spec["model"]
    if m in ("resnet18", "resnet50", "mobilenet_v2", "squeezenet1_1"):
        import torchvision
        net = getattr(torchvision.models, m)()
        return net, [torch.randn(spec.get("batch", 1), 3, 224, 224)]
    if m == "encoder4":
        class Enc(nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = nn.Linear(256, 256)
                layer = nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.0, batch_first=True)
                self.enc = nn.TransformerEncoder(layer, 4, enable_nested_tensor=False)

            def forward(self, x):
                return self.enc(self.emb(x))
        return Enc(), [torch.randn(1, spec["seq"], 256)]
    if m == "mlp_gelu":
        return nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 1024)), \
            [torch.randn(64, 1024)]
    if m in ("matmul_f16", "matmul_bf16"):
        n = spec["n"]
        half = torch.float16 if m == "matmul_f16" else torch.bfloat16

        class MM16(nn.Module):
            def forward(self, a, b):
                return torch.matmul(a.to(half), b.to(half)).float()
        return MM16(), [torch.randn(n, n), torch.randn(n, n)]
    if m == "matmul":
        n = spec["n"]

        class MM(nn.Module):
            def forward(self, a, b):
                return torch.matmul(a, b)
        return MM(), [torch.randn(n, n), torch.randn(n, n)]
    raise KeyError(m)


def torch_time(net, xs, runs, tf32):
    import torch
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    with torch.inference_mode():
        for r in range(-5, runs):
            start.record()
            net(*xs)
            stop.record()
            stop.synchronize()
            if r >= 0:
                times.append(start.elapsed_time(stop))
    return statistics.median(times)


def flops(entry):
    """prepare.py's count (kilnc --emit=kiln), for every model of the kit."""
    return float(entry["flops"]) if entry.get("flops") else None


# Dense peaks in TFLOP/s from NVIDIA's data sheets: FP32 on the CUDA cores,
# TF32 on the tensor cores (without sparsity), by a piece of the device name.
PEAKS = [("H100 PCIe", 51.2, 378.0), ("H100 NVL", 60.0, 417.0), ("H100", 66.9, 494.7),
         ("H200", 66.9, 494.7), ("A100", 19.5, 156.0), ("L40S", 91.6, 183.0)]


def peaks(name):
    for key, fp32, tf32 in PEAKS:
        if key in name:
            return fp32, tf32
    return None, None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kit")
    ap.add_argument("out")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    kit = os.path.abspath(args.kit)
    started = time.time()
    os.makedirs(args.out, exist_ok=True)
    results = {"runners": {}, "env": {}}
    res_path = os.path.join(args.out, "results.json")

    def save():
        json.dump(results, open(res_path, "w"), indent=1)

    import torch
    results["env"]["torch"] = torch.__version__
    results["env"]["gpu"] = torch.cuda.get_device_name(0)
    log("torch", torch.__version__, torch.cuda.get_device_name(0))
    fp32_peak, tf32_peak = peaks(torch.cuda.get_device_name(0))
    results["env"]["peak_tflops"] = {"fp32": fp32_peak, "tf32": tf32_peak}
    p = subprocess.run([os.path.join(kit, "kiln-cuda-tests"), "--gtest_filter=Cuda.*WhereThereIsAGpu"],
                       capture_output=True, text=True, env=dict(os.environ, LD_LIBRARY_PATH=kit))
    results["cuda_tests"] = {"rc": p.returncode, "tail": (p.stdout + p.stderr)[-3000:]}
    log("kiln-cuda-tests rc", p.returncode)
    log((p.stdout + p.stderr)[-1500:])
    save()
    # CUDA bundles (kilnc --emit=bundle) through test/bundle/bundle-run.c.
    results["bundles"] = {}
    bundles_path = os.path.join(kit, "bundles.json")
    bundles = json.load(open(bundles_path)) if os.path.exists(bundles_path) else {}
    for name, spec in bundles.items():
        argv = [os.path.join(kit, spec["runner"]), os.path.join(kit, spec["data"]),
                "--atol", "1e-3", "--rtol", "1e-3", "--bench", "20"]
        if spec.get("weights"):
            argv += ["--weights", os.path.join(kit, spec["weights"])]
        p = subprocess.run(argv, capture_output=True, text=True, timeout=300,
                           env=dict(os.environ, LD_LIBRARY_PATH=kit))
        results["bundles"][name] = {"rc": p.returncode, "out": (p.stdout + p.stderr)[-2000:]}
        log("bundle", name, "rc", p.returncode)
        log((p.stdout + p.stderr)[-800:])
    save()

    manifest = json.load(open(os.path.join(kit, "manifest.json")))
    if args.only:
        manifest = [e for e in manifest if e["name"] in args.only.split(",")]
    ready = []
    for e in manifest:
        r = results["runners"][e["name"]] = {}
        try:
            d, runner, weights = materialize(kit, e)
            sets = inputs_and_refs(kit, e)
            r["sets"] = []
            for ins, refs in sets:
                rc, text, secs, argv = run_runner(d, runner, weights, ins, refs)
                item = {"rc": rc, "secs": round(secs, 2), "log": text[-2000:]}
                if rc == 0:
                    tol = e["baseline"]
                    item["ok"], item["max_abs_err"] = check(
                        d, refs, tol.get("atol", 1e-3), tol.get("rtol", 1e-3),
                        2e-3 if e.get("precision") == "tf32" else 0.0)
                else:
                    item["ok"] = False
                r["sets"].append(item)
                log(f"{e['name']}: rc {rc} ok {item.get('ok')} max_abs_err {item.get('max_abs_err')}"
                    f" ({secs:.1f} s)\n  " + text.strip().replace("\n", "\n  ")[-1500:])
                if rc != 0 or not item["ok"]:
                    try:
                        san = subprocess.run(["compute-sanitizer", "--print-limit", "5"] + argv,
                                             capture_output=True, text=True, timeout=120,
                                             env=dict(os.environ, LD_LIBRARY_PATH=d))
                        item["sanitizer"] = (san.stdout + san.stderr)[-4000:]
                        log("  compute-sanitizer:\n" + item["sanitizer"][-2500:])
                    except Exception as ex:  # noqa: BLE001
                        log("  compute-sanitizer failed:", ex)
            r["ok"] = all(s["ok"] for s in r["sets"])
            if all(s["rc"] == 0 for s in r["sets"]):
                ready.append((e, d, runner, weights, sets[0]))
        except Exception as ex:  # noqa: BLE001
            r["error"] = repr(ex)
            log(f"{e['name']}: error {ex!r}")
        save()

    # Latency: alternating rounds, Kiln then PyTorch, same shapes.
    for e, d, runner, weights, (ins, refs) in ready:
        r = results["runners"][e["name"]]
        try:
            net, xs = torch_model(e["baseline"])
            net = net.cuda().eval()
            xs = [x.cuda() for x in xs]
        except Exception as ex:  # noqa: BLE001
            net = None
            log(f"{e['name']}: no PyTorch baseline: {ex!r}")
        kd, kw, t32, tdef = [], [], [], []
        for _ in range(args.rounds):
            rc, text, _, _ = run_runner(d, runner, weights, ins, refs, runs=args.runs)
            dev, wall = parse_bench(text)
            if dev is None:
                log(f"{e['name']}: bench failed: {text[-500:]}")
                break
            kd.append(dev)
            kw.append(wall)
            if net is not None:
                t32.append(torch_time(net, xs, args.runs, tf32=False))
                tdef.append(torch_time(net, xs, args.runs, tf32=True))
        if kd:
            r["kiln_device_ms"] = statistics.median(kd)
            r["kiln_wall_ms"] = statistics.median(kw)
        if t32:
            r["torch_fp32_ms"] = statistics.median(t32)
            r["torch_tf32_ms"] = statistics.median(tdef)
        fl = flops(e)
        if fl and kd:
            r["kiln_gflops"] = fl / (r["kiln_device_ms"] * 1e6)
            if fp32_peak:
                r["kiln_pct_fp32_peak"] = 100 * r["kiln_gflops"] / (fp32_peak * 1e3)
                r["kiln_pct_tf32_peak"] = 100 * r["kiln_gflops"] / (tf32_peak * 1e3)
            if t32:
                r["torch_fp32_gflops"] = fl / (r["torch_fp32_ms"] * 1e6)
                r["torch_tf32_gflops"] = fl / (r["torch_tf32_ms"] * 1e6)
        log(e["name"], json.dumps({k: v for k, v in r.items() if k != "sets"}))
        save()

    log(f"\nPeaks (data sheet, dense): FP32 {fp32_peak} TFLOP/s, TF32 {tf32_peak} TFLOP/s")
    log("\n| model | correct | GFLOP | Kiln device ms | Kiln wall ms | PyTorch FP32 ms | PyTorch TF32 ms "
        "| Kiln/PyTorch FP32 | Kiln/PyTorch TF32 | Kiln GFLOP/s | % FP32 peak | % TF32 peak "
        "| PyTorch FP32 GFLOP/s | PyTorch TF32 GFLOP/s |")
    log("| --- " * 15 + "|")
    for e in manifest:
        r = results["runners"].get(e["name"], {})

        def f(k, fmt="{:.3f}"):
            return fmt.format(r[k]) if k in r else "-"

        def ratio(k):
            return f"{r['kiln_device_ms'] / r[k]:.2f}" if k in r and "kiln_device_ms" in r else "-"
        fl = flops(e)
        log(f"| {e['name']} | {r.get('ok')} | {fl / 1e9 if fl else 0:.2f} | {f('kiln_device_ms')} | "
            f"{f('kiln_wall_ms')} | {f('torch_fp32_ms')} | {f('torch_tf32_ms')} | "
            f"{ratio('torch_fp32_ms')} | {ratio('torch_tf32_ms')} | {f('kiln_gflops', '{:.0f}')} | "
            f"{f('kiln_pct_fp32_peak', '{:.1f}')} | {f('kiln_pct_tf32_peak', '{:.1f}')} | "
            f"{f('torch_fp32_gflops', '{:.0f}')} | {f('torch_tf32_gflops', '{:.0f}')} |")
    results["env"]["seconds"] = round(time.time() - started, 1)
    log(f"device.py: {results['env']['seconds']} s")
    save()


if __name__ == "__main__":
    main()
