#!/usr/bin/env python3
"""Kiln vs ONNX Runtime, side by side, on the same machine and inputs.

Run it through scripts/bench.sh, which installs ONNX Runtime (onnxruntime-node,
from npm) into the bench cache and tells this script where it is.

Models: every folder of --models that holds model.onnx and test_data_set_K/
(the ONNX backend-test layout) gives one row per data set ("NAME" when the
model has one set, "NAME/setK" when it has several, since sets may differ in
shape). For each row:
  * one correctness run of each engine against output_J.pb
    (kiln-run --check, tolerance |out - ref| <= 1e-4 + 1e-3*|ref|; ONNX
    Runtime is checked the same way and only reported when it differs);
  * ROUNDS rounds; in each, Kiln (kiln-run --bench RUNS, one process) and
    ONNX Runtime (ort_run.js, one process: load, 2 warm-up runs, RUNS timed
    runs) take turns, the first engine alternating from round to round so
    that neither always runs on a warmer or quieter machine.
kiln-run prints one median per process, so both engines are summarized the
same way: "ms" is the median over rounds of each round's median run time.
"compile ms" is Kiln's median compile time (it compiles once per process).
"MB" is the peak resident set of the engine's process (ru_maxrss from
wait4), the largest over rounds: Kiln's includes compiling the model with
LLVM, ONNX Runtime's includes node itself (about 50 MB).
The geomean is over rows where both engines ran; Kiln/ORT < 1 means Kiln is
faster.

Kernels (--kernels, or by default after the models): measures one core's
FP32 FMA peak with fma_peak.c, writes single-operator models (MatMul, Gemm,
Conv, depthwise Conv, MaxPool) with numpy float64 reference outputs into the
cache, and times them like the models. GFLOP/s counts a multiply-add as 2
flops; % peak is of THREADS x the measured one-core peak. MaxPool does no
arithmetic: its count is of compares and it gets no % of peak.

Each thread count of --threads gets its own tables (kiln-run --threads T and
intraOpNumThreads=T; interOpNumThreads=1, sequential execution, all graph
optimizations).
"""

import argparse
import hashlib
import json
import math
import os
import platform
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def log(msg="", end="\n"):
    """Progress goes to stderr, so stdout holds only the report."""
    print(msg, end=end, file=sys.stderr, flush=True)


def fail(msg):
    print(f"bench: error: {msg}", file=sys.stderr)
    sys.exit(1)


# --- running a child and measuring its peak memory -----------------------------

class Proc:
    """What a finished child left: exit status, output, peak RSS in MB."""

    def __init__(self, rc, out, err, rss_mb, timed_out):
        self.rc, self.out, self.err, self.rss_mb, self.timed_out = rc, out, err, rss_mb, timed_out

    def error_line(self, timeout):
        """The first line worth showing when the child failed."""
        if self.timed_out:
            return f"timed out after {timeout} s"
        lines = [l.strip() for l in (self.err + "\n" + self.out).splitlines() if l.strip()]
        for line in lines:
            if "error" in line.lower():
                return line
        if self.rc < 0:
            return f"killed by signal {-self.rc}"
        return lines[0] if lines else f"exit status {self.rc}"


def run_measured(cmd, timeout):
    """Runs cmd and reaps it with os.wait4, whose rusage is this child's own
    (getrusage(RUSAGE_CHILDREN) would give the largest of all children so far).
    Output goes to temporary files rather than pipes, so nothing needs reading
    while we wait."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        timed_out = threading.Event()

        def kill():
            timed_out.set()
            p.kill()

        timer = threading.Timer(timeout, kill)
        timer.start()
        try:
            _, status, usage = os.wait4(p.pid, 0)
        finally:
            timer.cancel()
        p.returncode = os.waitstatus_to_exitcode(status)  # Popen must not reap it again
        out.seek(0)
        err.seek(0)
        text = lambda f: f.read().decode("utf-8", "replace")
        # ru_maxrss is in KiB on Linux.
        return Proc(p.returncode, text(out), text(err), usage.ru_maxrss / 1024.0, timed_out.is_set())


# --- the two engines -------------------------------------------------------------

BENCH_RE = re.compile(r"^bench: runs=(\d+) median_ms=([\d.]+) min_ms=([\d.]+) compile_ms=([\d.]+)", re.M)


class Engines:
    def __init__(self, kiln_run, node, ort_dir, timeout):
        self.kiln_run, self.node, self.ort_dir, self.timeout = kiln_run, node, ort_dir, timeout
        self.ort_js = os.path.join(HERE, "ort_run.js")

    def kiln_check(self, case, threads):
        """One untimed run with --check. Returns (status, detail): status is
        'pass', 'mismatch' (ran, outputs differ) or 'error' (did not run)."""
        p = run_measured([self.kiln_run, case["model"], "--inputs", case["data"],
                          "--check", case["data"], "--threads", str(threads)], self.timeout)
        if "all outputs match" in p.out and p.rc == 0:
            return "pass", ""
        if "some outputs do not match" in p.out:
            bad = [l.strip() for l in p.out.splitlines() if "MISMATCH" in l]
            return "mismatch", bad[0] if bad else "outputs do not match"
        return "error", p.error_line(self.timeout)

    def kiln_round(self, case, threads, runs):
        p = run_measured([self.kiln_run, case["model"], "--inputs", case["data"],
                          "--bench", str(runs), "--threads", str(threads)], self.timeout)
        m = BENCH_RE.search(p.out)
        if p.rc != 0 or not m:
            return dict(error=p.error_line(self.timeout) if p.rc != 0 else "no 'bench:' line in kiln-run's output")
        return dict(median_ms=float(m.group(2)), min_ms=float(m.group(3)),
                    compile_ms=float(m.group(4)), rss_mb=p.rss_mb,
                    single_thread_note="kernels run on one thread" in p.out)

    def _ort(self, case, threads, runs, warmup, check):
        cmd = [self.node, self.ort_js, "--ort", self.ort_dir, "--model", case["model"],
               "--inputs", case["data"], "--threads", str(threads),
               "--runs", str(runs), "--warmup", str(warmup)]
        if check:
            cmd += ["--check", case["data"]]
        p = run_measured(cmd, self.timeout)
        try:
            if p.rc != 0:
                raise ValueError
            res = json.loads(p.out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            return dict(error=p.error_line(self.timeout))
        res["rss_mb"] = p.rss_mb
        return res

    def ort_check(self, case, threads):
        res = self._ort(case, threads, runs=0, warmup=0, check=True)
        if "error" in res:
            return "error", res["error"]
        chk = res["check"]
        return ("pass" if chk["ok"] else "mismatch"), "; ".join(chk["outputs"])

    def ort_round(self, case, threads, runs):
        res = self._ort(case, threads, runs=runs, warmup=2, check=False)
        if "error" not in res:
            res["median_ms"] = statistics.median(res["times_ms"])
        return res


def measure(engines, case, threads, args):
    """Alternating rounds of both engines on one case; returns the summary."""
    log(f"  {case['name']:<22} threads={threads}", end="")
    rounds = {"kiln": [], "ort": []}
    run_round = {"kiln": engines.kiln_round, "ort": engines.ort_round}
    # An engine whose correctness run could not even run the model would only
    # fail again; one that fails a round is not tried in later rounds.
    failed = {eng: case[f"{eng}_check"] if case[f"{eng}_check"][0] == "error" else None
              for eng in rounds}
    for r in range(args.rounds):
        order = ["kiln", "ort"] if r % 2 == 0 else ["ort", "kiln"]
        parts = []
        for eng in order:
            if failed[eng]:
                parts.append(f"{eng} FAILED")
                continue
            res = run_round[eng](case, threads, args.runs)
            rounds[eng].append(res)
            if "error" in res:
                failed[eng] = ("error", res["error"])
            parts.append(f"{eng} " + ("FAILED" if "error" in res else f"{res['median_ms']:.2f}"))
        log(f" | r{r + 1}: " + ", ".join(parts), end="")
    log()

    def summary(eng):
        if failed[eng]:
            return dict(error=failed[eng][1], rounds=rounds[eng])
        results = rounds[eng]
        return dict(ms=statistics.median(x["median_ms"] for x in results),
                    rss_mb=max(x["rss_mb"] for x in results), rounds=results)

    kiln, ort = summary("kiln"), summary("ort")
    if "ms" in kiln:
        kiln["compile_ms"] = statistics.median(x["compile_ms"] for x in rounds["kiln"])
        kiln["single_thread_note"] = any(x["single_thread_note"] for x in rounds["kiln"])
    ratio = kiln["ms"] / ort["ms"] if "ms" in kiln and "ms" in ort else None
    return dict(name=case["name"], threads=threads, kiln=kiln, ort=ort, ratio=ratio,
                kiln_check=case["kiln_check"], ort_check=case["ort_check"],
                flops=case.get("flops"))


# --- cases -----------------------------------------------------------------------

def set_index(folder):
    m = re.fullmatch(r"test_data_set_(\d+)", folder)
    return int(m.group(1)) if m else None


def model_cases(models_dir, only, first_set):
    cases = []
    for name in sorted(os.listdir(models_dir)):
        folder = os.path.join(models_dir, name)
        model = os.path.join(folder, "model.onnx")
        if not os.path.isfile(model) or (only and name not in only):
            continue
        sets = sorted(i for i in map(set_index, os.listdir(folder)) if i is not None)
        if first_set:
            sets = sets[:1]
        for k in sets:
            cases.append(dict(name=name if len(sets) == 1 else f"{name}/set{k}", model=model,
                              data=os.path.join(folder, f"test_data_set_{k}")))
    return cases


def file_hash(*paths):
    h = hashlib.sha256()
    for p in paths:
        with open(p, "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:16]


def kernel_cases(cache, python, only):
    """Writes the kernel models into the cache, again only when
    make_kernel_models.py has changed since they were written."""
    gen = os.path.join(HERE, "make_kernel_models.py")
    out = os.path.join(cache, "kernels")
    stamp = os.path.join(out, "stamp")
    want = file_hash(gen)
    if not (os.path.isfile(stamp) and open(stamp).read().strip() == want):
        log(f"bench: writing kernel models into {out}")
        shutil.rmtree(out, ignore_errors=True)
        r = subprocess.run([python, gen, out], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            fail(f"make_kernel_models.py failed:\n{r.stderr.strip()}")
        with open(stamp, "w") as f:
            f.write(want + "\n")
    with open(os.path.join(out, "kernels.json")) as f:
        listing = json.load(f)
    return [dict(name=k["name"], op=k["op"], desc=k["desc"], flops=k["flops"],
                 model=os.path.join(out, k["name"], "model.onnx"),
                 data=os.path.join(out, k["name"], "test_data_set_0"))
            for k in listing if not only or k["name"] in only]


def fma_peak(cache):
    """Compiles fma_peak.c for this host (once per source and compiler) and
    returns (GFLOP/s, its output line)."""
    src = os.path.join(HERE, "fma_peak.c")
    cc = shutil.which("clang-22") or shutil.which("cc")
    if not cc:
        return None, "no C compiler (clang-22 or cc) found"
    exe = os.path.join(cache, f"fma_peak-{file_hash(src)}-{os.path.basename(cc)}")
    if not os.path.exists(exe):
        r = subprocess.run([cc, "-O2", "-march=native", "-o", exe, src, "-lm"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            return None, f"compiling fma_peak.c failed: {r.stderr.strip().splitlines()[0]}"
    r = subprocess.run([exe], capture_output=True, text=True)
    m = re.search(r"isa=(\S+) accumulators=(\d+) iterations=(\d+) .*gflops=([\d.]+)", r.stdout)
    if not m:
        return None, f"fma_peak printed no result: {(r.stdout + r.stderr).strip()}"
    return float(m.group(4)), f"{m.group(1)}, {m.group(2)} accumulators, best of 5 x {m.group(3)} iterations"


# --- reporting ---------------------------------------------------------------------

def table(headers, rows):
    """Plain-text table; the first column left-aligned, the others right-aligned."""
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows)]
    fmt = lambda cells: "  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w)
                                  for i, (c, w) in enumerate(zip(cells, widths)))
    lines = [fmt(headers), "  ".join("-" * w for w in widths)] + [fmt(r) for r in rows]
    return "\n".join(lines)


def f2(x, digits=2):
    return "-" if x is None else f"{x:.{digits}f}"


def fms(x):
    """Milliseconds with about 3-4 significant digits, without exponents."""
    return "-" if x is None else f"{x:.{1 if x >= 100 else 2 if x >= 1 else 3}f}"


def geomean(results):
    ratios = [r["ratio"] for r in results if r["ratio"]]
    if not ratios:
        return None, 0
    return math.exp(sum(map(math.log, ratios)) / len(ratios)), len(ratios)


def check_cell(r):
    status = r["kiln_check"][0]
    return "FAILED" if status == "error" else status


def notes(results):
    """Lines under a table: failures, and what the table alone cannot say."""
    out = []
    for r in results:
        for eng, label in (("kiln", "Kiln"), ("ort", "ONNX Runtime")):
            if "error" in r[eng]:
                out.append(f"  {r['name']}: {label} FAILED: {r[eng]['error']}")
        if r["kiln_check"][0] == "mismatch":
            out.append(f"  {r['name']}: Kiln's outputs differ from the reference: {r['kiln_check'][1]}")
        if r["ort_check"][0] == "mismatch":
            out.append(f"  {r['name']}: ONNX Runtime's check: {r['ort_check'][0]}: {r['ort_check'][1]}")
    if any(r["kiln"].get("single_thread_note") for r in results):
        out.append("  note: kiln-run says its kernels run on one thread in this version")
    return out


def model_report(results, threads):
    rows = []
    for r in results:
        k, o = r["kiln"], r["ort"]
        rows.append([r["name"], fms(o.get("ms")) if "error" not in o else "FAILED",
                     fms(k.get("ms")) if "error" not in k else "FAILED", f2(r["ratio"]),
                     f2(o.get("rss_mb"), 0), f2(k.get("rss_mb"), 0), f2(k.get("compile_ms"), 0),
                     check_cell(r)])
    print(f"\n== Models, threads={threads}")
    print(table(["model", "ORT ms", "Kiln ms", "Kiln/ORT", "ORT MB", "Kiln MB", "compile ms", "check"], rows))
    g, n = geomean(results)
    print(f"geomean Kiln/ORT over {n} rows: {f2(g)}" + (" (Kiln slower)" if g and g > 1 else ""))
    for line in notes(results):
        print(line)


def kernel_report(results, threads, peak):
    rows = []
    for r in results:
        k, o = r["kiln"], r["ort"]
        compares = r["op"] == "MaxPool"
        gf = lambda e: r["flops"] / e["ms"] * 1e-6 if "ms" in e else None
        pct = lambda e: None if compares or not peak or "ms" not in e else 100 * gf(e) / (peak * threads)
        rows.append([r["name"], f"{r['flops'] * 1e-9:.3f}" + ("*" if compares else ""),
                     fms(o.get("ms")) if "error" not in o else "FAILED",
                     fms(k.get("ms")) if "error" not in k else "FAILED", f2(r["ratio"]),
                     f2(gf(o), 1), f2(gf(k), 1), f2(pct(o), 1), f2(pct(k), 1), check_cell(r)])
    print(f"\n== Kernels, threads={threads}"
          + (f" (% of peak: of {threads} x {peak:.1f} GFLOP/s)" if peak else " (no FMA peak measured)"))
    print(table(["kernel", "GFLOP", "ORT ms", "Kiln ms", "Kiln/ORT", "ORT GFLOP/s", "Kiln GFLOP/s",
                 "ORT %peak", "Kiln %peak", "check"], rows))
    g, n = geomean(results)
    print(f"geomean Kiln/ORT over {n} kernels: {f2(g)}")
    if any(r["op"] == "MaxPool" for r in results):
        print("  * MaxPool: Gop of compares, not flops; no % of the FMA peak")
    for line in notes(results):
        print(line)


def machine_info():
    model = "unknown"
    flags = set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, val = line.partition(":")
                if key.strip() == "model name" and model == "unknown":
                    model = val.strip()
                elif key.strip() == "flags" and not flags:
                    flags = set(val.split())
    except OSError:
        pass
    isa = [x for x in ("avx512f", "avx2", "fma") if x in flags]
    return dict(cpu=model, isa=isa, nproc=len(os.sched_getaffinity(0)), cpus=os.cpu_count(),
                loadavg=os.getloadavg(), kernel=platform.release())


def tool_version(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


# --- main ---------------------------------------------------------------------------

def positive_int(s):
    v = int(s)
    if v < 1:
        raise argparse.ArgumentTypeError("must be >= 1")
    return v


def thread_list(s):
    try:
        return [positive_int(x) for x in s.split(",")]
    except (ValueError, argparse.ArgumentTypeError):
        raise argparse.ArgumentTypeError(f"'{s}' is not a comma-separated list of positive integers")


def parse_args():
    ap = argparse.ArgumentParser(
        prog=os.environ.get("KILN_BENCH_PROG", "bench.py"), description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Environment: KILN_BUILD_DIR (default ROOT/build), KILN_BENCH_CACHE (default "
               "$XDG_CACHE_HOME/kiln/bench or ~/.cache/kiln/bench: ONNX Runtime, kernel models, "
               "fma_peak). A model that fails in Kiln is marked FAILED with the error's first line "
               "and the run goes on. Exit status: 0 when every row ran, 1 otherwise.")
    ap.add_argument("--models", metavar="DIR", default=os.path.join(os.path.dirname(ROOT), "shared", "models"),
                    help="folder of model folders (default: ../shared/models beside the checkout)")
    ap.add_argument("--only", metavar="NAMES", type=lambda s: set(s.split(",")),
                    help="comma-separated model folder and/or kernel names to run (default: all)")
    ap.add_argument("--first-set", action="store_true",
                    help="only test_data_set_0 of each model (default: every set)")
    ap.add_argument("--rounds", type=positive_int, default=5, help="alternating rounds per row (default 5)")
    ap.add_argument("--runs", type=positive_int, default=10,
                    help="timed runs per engine per round, after 2 warm-up runs (default 10)")
    ap.add_argument("--threads", type=thread_list, default=[1], metavar="LIST",
                    help="comma-separated thread counts, e.g. 1,2 (default 1)")
    group = ap.add_mutually_exclusive_group()
    group.add_argument("--kernels", action="store_true", help="run only the kernel microbenchmark")
    group.add_argument("--no-kernels", action="store_true", help="run only the models")
    ap.add_argument("--json", metavar="FILE", help="also write the raw results (every round) as JSON")
    ap.add_argument("--timeout", type=positive_int, default=600,
                    help="seconds before one engine process is killed (default 600)")
    return ap.parse_args()


def main():
    args = parse_args()
    build = os.environ.get("KILN_BUILD_DIR") or os.path.join(ROOT, "build")
    cache = os.environ.get("KILN_BENCH_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "kiln", "bench")
    ort_dir = os.environ.get("KILN_BENCH_ORT_DIR")
    kiln_run = os.path.join(build, "bin", "kiln-run")
    node = shutil.which("node")

    if not os.access(kiln_run, os.X_OK):
        fail(f"{kiln_run} not found: build Kiln first with scripts/setup.sh "
             "(or set KILN_BUILD_DIR to your build folder)")
    if not node:
        fail("node not found: run this through scripts/bench.sh, which installs it")
    if not ort_dir or not os.path.isfile(os.path.join(ort_dir, "node_modules", "onnxruntime-node", "package.json")):
        fail("ONNX Runtime for node is not installed: run this through scripts/bench.sh, which installs it")
    run_models, run_kernels = not args.kernels, not args.no_kernels
    if run_models and not os.path.isdir(args.models):
        fail(f"models folder {args.models} not found (use --models DIR)")
    os.makedirs(cache, exist_ok=True)

    with open(os.path.join(ort_dir, "node_modules", "onnxruntime-node", "package.json")) as f:
        ort_version = json.load(f)["version"]
    machine = machine_info()
    invoked = os.environ.get("KILN_BENCH_PROG") or sys.argv[0]
    report = dict(command=shlex.join([invoked] + sys.argv[1:]), date=time.strftime("%Y-%m-%d %H:%M:%S %z"),
                  machine=machine, kiln=tool_version([kiln_run, "--version"]),
                  onnxruntime=f"onnxruntime-node {ort_version}", node=tool_version([node, "--version"]),
                  rounds=args.rounds, runs=args.runs, threads=args.threads, models=[], kernels=[])
    print(f"command: {report['command']}")
    print(f"date:    {report['date']}")
    print(f"cpu:     {machine['cpu']} ({', '.join(machine['isa']) or 'no AVX'}); nproc={machine['nproc']}; "
          f"load average {' '.join(f'{x:.2f}' for x in machine['loadavg'])}")
    print(f"engines: {report['kiln']} ({kiln_run}); {report['onnxruntime']} on node {report['node']}")
    print(f"method:  {args.rounds} alternating rounds x {args.runs} timed runs per engine; "
          f"ms = median of the per-round medians")

    engines = Engines(kiln_run, node, ort_dir, args.timeout)

    def run_cases(cases, key):
        # Correctness first, once per case: a case that cannot even run in
        # Kiln is then only timed in ONNX Runtime.
        for c in cases:
            c["kiln_check"] = engines.kiln_check(c, args.threads[0])
            c["ort_check"] = engines.ort_check(c, args.threads[0])
            log(f"  {c['name']:<22} check: kiln {c['kiln_check'][0]}, ort {c['ort_check'][0]}")
        per_threads = {}
        for t in args.threads:
            per_threads[t] = [measure(engines, c, t, args) for c in cases]
            for r, c in zip(per_threads[t], cases):
                r["op"] = c.get("op")
            report[key].extend(per_threads[t])
        return per_threads

    model_results = {}
    if run_models:
        cases = model_cases(args.models, args.only, args.first_set)
        if not cases and not args.only:  # with --only, the names may all be kernels
            fail(f"no models (folders with model.onnx) in {args.models}")
        if cases:
            log(f"bench: {len(cases)} model rows from {args.models}")
            model_results = run_cases(cases, "models")
            for t in args.threads:
                model_report(model_results[t], t)
                g, _ = geomean(model_results[t])
                report.setdefault("geomean_models", {})[str(t)] = g

    kernel_results = {}
    if run_kernels:
        cases = kernel_cases(cache, sys.executable, args.only)
        if cases:
            log("bench: measuring one core's FP32 FMA peak")
            peak, line = fma_peak(cache)
            report["fma_peak_gflops"], report["fma_peak_output"] = peak, line
            print(f"\nFMA peak, one core: {f2(peak, 1)} GFLOP/s ({line})")
            kernel_results = run_cases(cases, "kernels")
            for t in args.threads:
                kernel_report(kernel_results[t], t, peak)
                g, _ = geomean(kernel_results[t])
                report.setdefault("geomean_kernels", {})[str(t)] = g

    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
        print(f"\nraw results: {args.json}")

    everything = [r for d in (model_results, kernel_results) for rs in d.values() for r in rs]
    if not everything:
        fail(f"nothing matched --only {','.join(sorted(args.only))}")
    ok = all("error" not in r["kiln"] and "error" not in r["ort"] for r in everything)
    return 0 if ok else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
