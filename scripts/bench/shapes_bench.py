#!/usr/bin/env python3
"""What a user pays when input shapes vary, Kiln against ONNX Runtime: the
"Shapes II" workloads (issue 39).

    /usr/bin/python3 scripts/bench/shapes_bench.py [--threads 1] [--lengths 38]
        [--tokens 48] [--d 256] [--layers 4] [--batch 1]
        [--only encoder|decode|masked] [--rounds 3]
        [--json FILE]

encoder: ../shared/models/encoder4 (input [1, seq, 256]) at --lengths
  sequence lengths from 1 to 256 (and 37, 128), each called once at a new
  length and then 7 more times (steady state), through two Kiln models side
  by side: compiled once for every shape (the default), and specialised to
  each length (dynamic_shapes=False: a compile at each new length; the
  compile cache is off). ONNX Runtime runs the same lengths through one
  session.
decode: a GPT-2-style decoder (export_shape_models.Gpt2Decoder, --d wide,
  --layers deep, 4 heads, random weights), exported once into the bench
  cache; greedy generation of --tokens tokens at --batch rows (default 1)
  from 8-token prompts and an empty KV cache. Every step has a new past length. The
  tokens both engines choose must agree. --rounds alternating rounds, each a
  fresh process (Kiln: its compile included, the cache off; ONNX Runtime:
  its session creation included); the ratios are of the rounds' medians.

masked: a BERT-style encoder with input_ids and attention_mask, batch and
  length dynamic (scripts/models/export_bert_mask.py, d = 256, 4 layers),
  at batch x length in {1, 4} x {7, 64, 384}, rows padded to different
  lengths; Kiln's output is checked against ONNX Runtime's.

Kiln runs in this process through its Python API (the build's, build/ or
$KILN_BUILD_DIR); ONNX Runtime in node (ort_shapes.js, onnxruntime-node from
the bench cache that scripts/bench.sh installs), one engine after the other.
Times are wall-clock per call; "first" includes Kiln's compile.
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "scripts", "models"))


def bench_cache():
    return os.environ.get("KILN_BENCH_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "kiln", "bench")


def ort_dir():
    d = os.path.join(bench_cache(), "onnxruntime-node-1.30.0")
    if not os.path.isdir(os.path.join(d, "node_modules", "onnxruntime-node")):
        sys.exit(f"shapes_bench: no onnxruntime-node in {d}: run scripts/bench.sh once")
    return d


def ort_run(args):
    r = subprocess.run(["node", os.path.join(HERE, "ort_shapes.js"), "--ort", ort_dir()] + args,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode:
        sys.exit(f"shapes_bench: ONNX Runtime failed: {r.stderr.strip()}")
    return json.loads(r.stdout)


def lengths_list(n):
    """n lengths from 1 to 256: every one up to 16, then spread to 256."""
    out = list(range(1, min(n, 16) + 1))
    rest = n - len(out)
    for k in range(1, rest + 1):
        out.append(int(round(16 * (256 / 16) ** (k / rest))))
    return sorted(set(out))


def encoder(kiln, np, args):
    """encoder4 at every length through two Kiln models side by side: the
    one compile for every shape (dynamic_shapes, the default) and the code
    specialised to each length (dynamic_shapes=False, a compile per length),
    alternating call by call; then ONNX Runtime on the same lengths."""
    model = os.path.join(ROOT, "..", "shared", "models", "encoder4", "model.onnx")
    lengths = sorted(set(lengths_list(args.lengths)) | {37, 128})
    # The process's first compile pays for faulting in LLVM's and MLIR's
    # code and growing the heap (60-100 ms here), whichever kind it is; a
    # server pays it once at start. One specialised compile at a length not
    # in the list takes it, so that both kinds are compared warm.
    t0 = time.perf_counter()
    warm = kiln.compile(model, threads=args.threads, cache=False, dynamic_shapes=False)
    warm.run(None, {"input": np.zeros((1, 300, 256), np.float32)})
    warm_ms = (time.perf_counter() - t0) * 1e3
    del warm
    t0 = time.perf_counter()
    dyn = kiln.compile(model, threads=args.threads, cache=False)
    load_ms = (time.perf_counter() - t0) * 1e3
    spec = kiln.compile(model, threads=args.threads, cache=False, dynamic_shapes=False)
    rows = []
    for L in lengths:
        x = (0.01 * ((np.arange(L * 256) % 13) - 6)).astype(np.float32).reshape(1, L, 256)
        first = {}
        for name, m in (("dyn", dyn), ("spec", spec)):
            t = time.perf_counter()
            m.run(None, {"input": x})
            first[name] = (time.perf_counter() - t) * 1e3
        times = {"dyn": [], "spec": []}
        for _ in range(7):
            for name, m in (("dyn", dyn), ("spec", spec)):
                t = time.perf_counter()
                m.run(None, {"input": x})
                times[name].append((time.perf_counter() - t) * 1e3)
        rows.append({"length": L, "first_ms": first["dyn"], "steady_ms": statistics.median(times["dyn"]),
                     "spec_first_ms": first["spec"],
                     "spec_steady_ms": statistics.median(times["spec"])})
    ort = ort_run(["--model", model, "--mode", "lengths", "--lengths",
                   ",".join(map(str, lengths)), "--threads", str(args.threads)])
    print(f"\n== encoder4 at {len(lengths)} lengths (1..256), threads={args.threads}")
    print(f"{'length':>6}  {'first ms':>8}  {'Kiln ms':>8}  {'spec first':>10}  {'spec ms':>8}  "
          f"{'ORT ms':>8}  {'Kiln/spec':>9}  {'Kiln/ORT':>8}")
    for k, o in zip(rows, ort["lengths"]):
        print(f"{k['length']:>6}  {k['first_ms']:>8.1f}  {k['steady_ms']:>8.3f}  "
              f"{k['spec_first_ms']:>10.1f}  {k['spec_steady_ms']:>8.3f}  {o['steady_ms']:>8.3f}  "
              f"{k['steady_ms'] / k['spec_steady_ms']:>9.2f}  "
              f"{k['steady_ms'] / o['steady_ms']:>8.2f}")
    geo = lambda pairs: math.exp(statistics.mean(math.log(a / b) for a, b in pairs))
    kiln_first = sum(r["first_ms"] for r in rows)
    kiln_steady = sum(r["steady_ms"] for r in rows)
    # A first call's compile: the first call less a steady run.
    compile_dyn = sum(r["first_ms"] - r["steady_ms"] for r in rows)
    compiles_spec = [r["spec_first_ms"] - r["spec_steady_ms"] for r in rows]
    one_spec = statistics.median(compiles_spec)
    ort_first = sum(o["first_ms"] for o in ort["lengths"])
    vs_ort = geo((k["steady_ms"], o["steady_ms"]) for k, o in zip(rows, ort["lengths"]))
    vs_spec = geo((k["steady_ms"], k["spec_steady_ms"]) for k in rows)
    at = {k["length"]: k["steady_ms"] / o["steady_ms"] for k, o in zip(rows, ort["lengths"])}
    print(f"Kiln: load {load_ms:.0f} ms, first calls {kiln_first / 1e3:.2f} s in all, "
          f"steady runs {kiln_steady:.1f} ms in all")
    print(f"compiling: every length together {compile_dyn:.0f} ms, one specialised compile "
          f"(median) {one_spec:.0f} ms: {compile_dyn / one_spec:.2f}x (target <= 1.5); the "
          f"specialised model compiled {sum(compiles_spec) / 1e3:.2f} s in all (the process's "
          f"first compile, specialised at length 300 before these: {warm_ms:.0f} ms)")
    print(f"ORT:  session {ort['session_ms']:.0f} ms, first calls {ort_first:.1f} ms in all")
    print(f"steady-state geomean Kiln/specialised {vs_spec:.3f} (target <= 1.10), "
          f"Kiln/ORT {vs_ort:.2f}; at 37: {at[37]:.2f}, at 128: {at[128]:.2f} (target <= 0.9)")
    print(f"executables: {dyn.compilations} for every shape, {spec.compilations} specialised")
    return {"kiln": rows, "kiln_load_ms": load_ms, "warm_up_ms": warm_ms, "ort": ort,
            "steady_geomean": vs_ort,
            "vs_specialised": vs_spec, "compile_ratio": compile_dyn / one_spec}


def decoder_model(args):
    """The decoder's ONNX file in the bench cache, exported on first use.
    PyTorch is imported only to export: loaded in Kiln's process, its
    libraries slowed the compile's symbol lookups."""
    folder = os.path.join(bench_cache(), f"gpt2_d{args.d}_l{args.layers}")
    path = os.path.join(folder, "model.onnx")
    if os.path.exists(path):
        return path
    import export_shape_models as esm
    torch = esm.torch
    os.makedirs(folder, exist_ok=True)
    torch.manual_seed(0)
    model = esm.Gpt2Decoder(vocab=512, d=args.d, heads=4, layers=args.layers,
                            max_pos=512).eval()
    hd = args.d // 4
    ids = torch.randint(0, 512, (1, 5))
    past = [torch.randn(1, 4, 2, hd) for _ in range(2 * args.layers)]
    names = ["input_ids"] + [f"past_{kv}_{i}" for i in range(args.layers) for kv in ("key", "value")]
    outs = ["logits"] + [f"present_{kv}_{i}" for i in range(args.layers)
                         for kv in ("key", "value")]
    dyn = {"input_ids": {0: "batch", 1: "new"}, "logits": {0: "batch", 1: "new"}}
    for n in names[1:]:
        dyn[n] = {0: "batch", 2: "past"}
    for n in outs[1:]:
        dyn[n] = {0: "batch", 2: "total"}
    kwargs = dict(opset_version=17, input_names=names, output_names=outs, dynamic_axes=dyn,
                  do_constant_folding=True)
    if "dynamo" in esm.em.inspect.signature(torch.onnx.export).parameters:
        kwargs["dynamo"] = False
    tmp = path + ".tmp"
    torch.onnx.export(model, (ids, *past), tmp, **kwargs)
    os.rename(tmp, path)
    return path


def kiln_generate(kiln, np, args):
    """One greedy generation through Kiln: compile (cache off) and steps."""
    path = decoder_model(args)
    heads, hd = 4, args.d // 4
    # Row r's prompt: 8 tokens, shifted by 11 r (rows differ, so do their
    # generations).
    prompts = [[(7 * i + 3 + 11 * r) % 512 for i in range(8)] for r in range(args.batch)]
    t0 = time.perf_counter()
    m = kiln.compile(path, threads=args.threads, cache=False)
    load_ms = (time.perf_counter() - t0) * 1e3
    feeds = {f"past_{kv}_{i}": np.zeros((args.batch, heads, 0, hd), np.float32)
             for i in range(args.layers) for kv in ("key", "value")}
    ids, steps, tokens = prompts, [], []
    for _ in range(args.tokens + 1):
        feeds["input_ids"] = np.array(ids, np.int64)
        t = time.perf_counter()
        out = m.run(None, feeds)
        steps.append((time.perf_counter() - t) * 1e3)
        best = [int(np.argmax(out[0][r, -1])) for r in range(args.batch)]
        tokens.append(best[0] if args.batch == 1 else best)
        ids = [[b] for b in best]
        for i in range(args.layers):
            feeds[f"past_key_{i}"] = out[1 + 2 * i]
            feeds[f"past_value_{i}"] = out[2 + 2 * i]
    return {"load_ms": load_ms, "steps_ms": steps, "tokens": tokens, "prompts": prompts}


def decode(kiln, np, args):
    """--rounds alternating rounds: Kiln's generation in a fresh process (its
    first compile is what a user pays: a process that compiled before keeps
    a warm heap), then ONNX Runtime's (a fresh node process and session)."""
    path = decoder_model(args)
    heads, hd = 4, args.d // 4
    cmd = [sys.executable, os.path.abspath(__file__), "--kiln-decode-round",
           "--tokens", str(args.tokens), "--d", str(args.d), "--layers", str(args.layers),
           "--batch", str(args.batch), "--threads", str(args.threads)]
    print(f"\n== GPT-2-style decoder d={args.d}, {args.layers} layers: 8-token prompt, "
          f"{args.tokens} tokens, batch {args.batch}, threads={args.threads}, "
          f"{args.rounds} alternating rounds")
    rounds = []
    for r in range(args.rounds):
        run = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if run.returncode:
            sys.exit(f"shapes_bench: Kiln's round failed: {run.stderr.strip()}")
        k = json.loads(run.stdout.strip().splitlines()[-1])
        ort = ort_run(["--model", path, "--mode", "decode",
                       "--prompt", ";".join(",".join(map(str, p)) for p in k["prompts"]),
                       "--tokens", str(args.tokens), "--layers", str(args.layers), "--heads",
                       str(heads), "--head-dim", str(hd), "--threads", str(args.threads)])
        same = k["tokens"] == ort["tokens"]
        k_total = k["load_ms"] + sum(k["steps_ms"])
        o_total = ort["session_ms"] + sum(ort["steps_ms"])
        k_med = statistics.median(k["steps_ms"][1:])
        o_med = statistics.median(ort["steps_ms"][1:])
        print(f"round {r + 1}: Kiln {k_total / 1e3:.2f} s in all (load {k['load_ms']:.0f} ms, "
              f"prompt step {k['steps_ms'][0]:.0f} ms), per token {k_med:.3f} ms | ORT "
              f"{o_total / 1e3:.3f} s (session {ort['session_ms']:.0f} ms, prompt step "
              f"{ort['steps_ms'][0]:.1f} ms), per token {o_med:.3f} ms | tokens "
              f"{'agree' if same else 'DIFFER'}")
        rounds.append({"kiln": k, "ort": ort, "tokens_agree": same, "kiln_total_ms": k_total,
                       "ort_total_ms": o_total, "kiln_token_ms": k_med, "ort_token_ms": o_med})
    med = lambda key: statistics.median(x[key] for x in rounds)
    agree = all(x["tokens_agree"] for x in rounds)
    print(f"medians of the rounds: Kiln {med('kiln_total_ms') / 1e3:.2f} s, per token "
          f"{med('kiln_token_ms'):.3f} ms; ORT {med('ort_total_ms') / 1e3:.3f} s, per token "
          f"{med('ort_token_ms'):.3f} ms")
    print(f"total Kiln/ORT {med('kiln_total_ms') / med('ort_total_ms'):.2f} (target <= 2); "
          f"per token Kiln/ORT {med('kiln_token_ms') / med('ort_token_ms'):.2f} "
          f"(target <= 0.75); tokens {'agree' if agree else 'DIFFER'}")
    return {"rounds": rounds, "tokens_agree": agree, "batch": args.batch}


def masked_model():
    """The BERT-style encoder with input_ids and attention_mask
    (scripts/models/export_bert_mask.py) in the bench cache; PyTorch is
    imported only to export it (as decoder_model)."""
    path = os.path.join(bench_cache(), "bert_mask_d256_l4", "model.onnx")
    if not os.path.exists(path):
        import export_bert_mask
        os.makedirs(os.path.dirname(path), exist_ok=True)
        export_bert_mask.export(path + ".tmp")
        os.rename(path + ".tmp", path)
    return path


def masked_inputs(np, batch, length):
    """Token ids and a padding mask: row r keeps L - floor(r L / 4) tokens
    (ort_shapes.js --mode masked fills the same)."""
    r = np.arange(batch).reshape(-1, 1)
    i = np.arange(length).reshape(1, -1)
    ids = ((r * 131 + i * 17 + 3) % 1000).astype(np.int64)
    mask = (i < length - (r * length) // 4).astype(np.int64)
    return {"input_ids": ids, "attention_mask": mask}


def masked(kiln, np, args):
    """The BERT-style encoder at batch x length in {1, 4} x {7, 64, 384}:
    compiled once for every shape against code specialised to each, then
    ONNX Runtime, in --rounds alternating rounds (Kiln's two models call by
    call, then one ONNX Runtime process); each time is the median over the
    rounds of each round's median. Outputs are checked against ONNX
    Runtime's."""
    path = masked_model()
    shapes = [(b, L) for b in (1, 4) for L in (7, 64, 384)]
    t0 = time.perf_counter()
    dyn = kiln.compile(path, threads=args.threads, cache=False)
    load_ms = (time.perf_counter() - t0) * 1e3
    spec = kiln.compile(path, threads=args.threads, cache=False, dynamic_shapes=False)
    rows = [{"batch": b, "length": L, "steady": [], "spec_steady": [], "ort_steady": []}
            for b, L in shapes]
    ort_runs = []
    for rnd in range(args.rounds):
        for row in rows:
            feeds = masked_inputs(np, row["batch"], row["length"])
            if rnd == 0:
                for name, m in (("", dyn), ("spec_", spec)):
                    t = time.perf_counter()
                    res = m.run(None, feeds)
                    row[name + "first_ms"] = (time.perf_counter() - t) * 1e3
                    if name == "":
                        row["sum_abs"] = float(np.abs(res[0]).sum())
                        row["head"] = [float(x) for x in res[0].reshape(-1)[:8]]
            times = {"": [], "spec_": []}
            for _ in range(7):
                for name, m in (("", dyn), ("spec_", spec)):
                    t = time.perf_counter()
                    m.run(None, feeds)
                    times[name].append((time.perf_counter() - t) * 1e3)
            row["steady"].append(statistics.median(times[""]))
            row["spec_steady"].append(statistics.median(times["spec_"]))
        ort = ort_run(["--model", path, "--mode", "masked", "--runs", "7", "--shapes",
                       ",".join(f"{b}x{L}" for b, L in shapes), "--threads", str(args.threads)])
        ort_runs.append(ort)
        for row, o in zip(rows, ort["shapes"]):
            row["ort_steady"].append(o["steady_ms"])
    for row in rows:
        for k in ("steady", "spec_steady", "ort_steady"):
            row[k + "_ms"] = statistics.median(row[k])
    print(f"\n== BERT-style encoder (input_ids, attention_mask), d=256, 4 layers, "
          f"threads={args.threads}, {args.rounds} rounds")
    print(f"{'shape':>6}  {'first ms':>8}  {'Kiln ms':>8}  {'spec ms':>8}  {'ORT ms':>8}  "
          f"{'Kiln/spec':>9}  {'Kiln/ORT':>8}  {'matches':>7}")
    ok = True
    for k, o in zip(rows, ort_runs[0]["shapes"]):
        match = (abs(k["sum_abs"] - o["sum_abs"]) <= 1e-4 * o["sum_abs"] and
                 all(abs(a - c) <= 1e-4 + 1e-3 * abs(c) for a, c in zip(k["head"], o["head"])))
        k["matches"] = match
        ok &= match
        print(f"{k['batch']:>2}x{k['length']:<3}  {k['first_ms']:>8.1f}  {k['steady_ms']:>8.3f}  "
              f"{k['spec_steady_ms']:>8.3f}  {k['ort_steady_ms']:>8.3f}  "
              f"{k['steady_ms'] / k['spec_steady_ms']:>9.2f}  "
              f"{k['steady_ms'] / k['ort_steady_ms']:>8.2f}  {'yes' if match else 'NO':>7}")
    worst = max(k["steady_ms"] / k["ort_steady_ms"] for k in rows)
    vs_spec = math.exp(statistics.mean(math.log(k["steady_ms"] / k["spec_steady_ms"])
                                       for k in rows))
    print(f"Kiln: load {load_ms:.0f} ms; executables: {dyn.compilations} for every shape, "
          f"{spec.compilations} specialised; ORT session {ort_runs[0]['session_ms']:.0f} ms")
    print(f"worst Kiln/ORT {worst:.2f} (target <= 1.0 at each shape); geomean "
          f"Kiln/specialised {vs_spec:.3f}; outputs "
          f"{'match ONNX Runtime' if ok else 'DIFFER from ONNX Runtime'}")
    return {"kiln": rows, "kiln_load_ms": load_ms, "ort": ort_runs, "worst_vs_ort": worst,
            "vs_specialised": vs_spec, "match": ok, "compilations": dyn.compilations}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--lengths", type=int, default=38)
    p.add_argument("--tokens", type=int, default=48)
    p.add_argument("--d", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--batch", type=int, default=1, help="decode: prompts generated together")
    p.add_argument("--only", choices=["encoder", "decode", "masked"])
    p.add_argument("--rounds", type=int, default=3,
                   help="decode, masked: alternating rounds of Kiln and ONNX Runtime")
    p.add_argument("--kiln-decode-round", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--json")
    args = p.parse_args()
    build = os.environ.get("KILN_BUILD_DIR", os.path.join(ROOT, "build"))
    sys.path.insert(0, os.path.join(build, "python"))
    import numpy as np
    import kiln
    if args.kiln_decode_round:
        print(json.dumps(kiln_generate(kiln, np, args)))
        return
    print(f"date: {time.strftime('%Y-%m-%d %H:%M:%S %z')}; Kiln {kiln.__file__}")
    result = {}
    if args.only in (None, "encoder"):
        result["encoder"] = encoder(kiln, np, args)
    if args.only in (None, "decode"):
        result["decode"] = decode(kiln, np, args)
    if args.only in (None, "masked"):
        result["masked"] = masked(kiln, np, args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
