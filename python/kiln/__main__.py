"""python3 -m kiln compile|run|bench|quantize: kilnc, kiln-run and kiln-quantize for Python users.

    python3 -m kiln compile MODEL.onnx -o model.o [--emit obj|asm|llvm|ptx|bundle]
                                       [--target TRIPLE] [--mcpu CPU] [-O N]
                                       [--external-weights]
    python3 -m kiln run MODEL.onnx [--inputs DIR] [--input NAME=FILE]...
                                   [--check DIR] [--atol A] [--rtol R] [--threads N]
                                   [--outputs DIR] [--specialize] [--no-cache]
    python3 -m kiln bench MODEL.onnx [the inputs as for run] [--runs N] [--warmup N]

Inputs: a folder in the ONNX backend-test layout (input_K.pb), or NAME=FILE
with FILE a TensorProto (.pb) or NumPy array (.npy). --check compares the
outputs with a folder's output_K.pb or .npy (exit status 1 when one differs). A
compile that runs for more than a second shows its time on stderr, only
when stderr is a terminal. Errors are one line on stderr and exit status 2.

    python3 -m kiln quantize MODEL.onnx -o OUT.onnx --calibration DIR
                             [--method minmax|percentile] [--percentile P]

quantize writes a QDQ int8 model (kiln-quantize; kiln/quantize.py says how).
"""

import argparse
import os
import statistics
import sys
import threading
import time

import numpy as np

import kiln


class _Progress:
    """`kiln: compiling NAME ... 3.1 s` on stderr while a call runs, redrawn
    every 0.2 s after the first second, only when stderr is a terminal."""

    def __init__(self, what):
        self.what = what
        self.done = threading.Event()
        self.shown = False
        self.thread = None

    def __enter__(self):
        if sys.stderr.isatty():
            self.thread = threading.Thread(target=self._show, daemon=True)
            self.thread.start()
        return self

    def _show(self):
        start = time.monotonic()
        # KILN_PROGRESS_AFTER_S: after how long it shows (the tests use 0).
        if self.done.wait(float(os.environ.get("KILN_PROGRESS_AFTER_S", "1.0"))):
            return
        while not self.done.wait(0.2):
            sys.stderr.write(f"\rkiln: {self.what} ... {time.monotonic() - start:.1f} s")
            sys.stderr.flush()
            self.shown = True

    def __exit__(self, *exc):
        self.done.set()
        if self.thread:
            self.thread.join()
            if self.shown:
                sys.stderr.write("\r\033[K")
                sys.stderr.flush()


def _read(path):
    if path.endswith(".npy"):
        return np.load(path)
    return kiln.read_tensor(path)


def _feeds(model, args):
    feeds = {}
    if args.inputs:
        for k, info in enumerate(model.inputs):
            path = os.path.join(args.inputs, f"input_{k}.pb")
            if os.path.exists(path):
                feeds[info.name] = _read(path)
    for item in args.input:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise kiln.InvalidArgument(f"--input wants NAME=FILE, not '{item}'")
        feeds[name] = _read(path)
    missing = [i.name for i in model.inputs if i.name not in feeds]
    if missing:
        raise kiln.InvalidArgument(
            "no value for input(s) " + ", ".join(f"'{m}'" for m in missing) +
            " (give --inputs DIR or --input NAME=FILE)")
    return feeds


def _compile_model(args):
    return kiln.compile(args.model, threads=args.threads, cache=not args.no_cache,
                        dynamic_shapes=not args.specialize)


def _first_run(model, feeds, name):
    # A model compiles on its first run at a shape: that is the long call.
    with _Progress(f"compiling {name}"):
        return model.run(None, feeds)


def cmd_compile(args):
    with _Progress(f"compiling {os.path.basename(args.model)}"):
        written = kiln.compile_to_file(args.model, args.output, emit=args.emit,
                                       target=args.target, cpu=args.mcpu, opt_level=args.O,
                                       external_weights=args.external_weights)
    for path in written:
        print(path)
    return 0


def cmd_run(args):
    model = _compile_model(args)
    feeds = _feeds(model, args)
    outputs = _first_run(model, feeds, os.path.basename(args.model))
    status = 0
    for k, (info, value) in enumerate(zip(model.outputs, outputs)):
        flat = value.reshape(-1)
        print(f"output {k} '{info.name}': {value.dtype}[{'x'.join(map(str, value.shape))}] "
              f"first={flat[:4].tolist()}")
        if args.outputs:
            os.makedirs(args.outputs, exist_ok=True)
            np.save(os.path.join(args.outputs, f"output_{k}.npy"), value)
        if args.check:
            ref = os.path.join(args.check, f"output_{k}.pb")
            if not os.path.exists(ref) and os.path.exists(ref[:-3] + ".npy"):
                ref = ref[:-3] + ".npy"
            want = _read(ref)
            if want.shape != value.shape:
                print(f"check output {k}: MISMATCH: shape {value.shape}, expected {want.shape}")
                status = 1
                continue
            ok = np.allclose(value, want, rtol=args.rtol, atol=args.atol, equal_nan=True)
            err = float(np.max(np.abs(value.astype(np.float64) - want))) if value.size else 0.0
            print(f"check output {k}: {'match' if ok else 'MISMATCH'} (max abs error {err:.6g})")
            status |= 0 if ok else 1
    return status


def cmd_bench(args):
    model = _compile_model(args)
    feeds = _feeds(model, args)
    t = time.perf_counter()
    _first_run(model, feeds, os.path.basename(args.model))
    first_ms = (time.perf_counter() - t) * 1e3
    for _ in range(args.warmup):
        model.run(None, feeds)
    times = []
    for _ in range(args.runs):
        t = time.perf_counter()
        model.run(None, feeds)
        times.append((time.perf_counter() - t) * 1e3)
    print(f"bench: runs={args.runs} median_ms={statistics.median(times):.4f} "
          f"min_ms={min(times):.4f} first_run_ms={first_ms:.1f} (compile included)")
    return 0


def positive_int(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def non_negative_int(text):
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {value}")
    return value


def main(argv=None):
    args = sys.argv[1:] if argv is None else list(argv)
    if args and args[0] == "quantize":
        # Its own parser and errors (kiln-quantize's).
        from . import quantize
        return quantize.main(args[1:])
    p = argparse.ArgumentParser(prog="python3 -m kiln", description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n".join(__doc__.split("\n")[2:]))
    p.add_argument("--version", action="version", version=f"kiln {kiln.__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    sub.add_parser("quantize", add_help=False,
                   help="write a QDQ int8 model (as kiln-quantize; quantize --help)")
    c = sub.add_parser("compile", help="ahead-of-time compile (as kilnc)")
    c.add_argument("model")
    c.add_argument("-o", "--output", required=True, help="the file (DIR/NAME for a bundle)")
    c.add_argument("--emit", default="obj", choices=["obj", "asm", "llvm", "ptx", "bundle"])
    c.add_argument("--target", help="an LLVM triple (default: this machine)")
    c.add_argument("--mcpu", help="the LLVM CPU (default: this machine's)")
    c.add_argument("-O", type=int, default=3, choices=[0, 1, 2, 3])
    c.add_argument("--external-weights", action="store_true",
                   help="a bundle's weights in NAME.weights, not in the object")
    c.set_defaults(fn=cmd_compile)

    for name, fn, text in (("run", cmd_run, "compile, run once, print or check the outputs"),
                           ("bench", cmd_bench, "compile, then time runs")):
        r = sub.add_parser(name, help=text)
        r.add_argument("model")
        r.add_argument("--inputs", help="a folder with input_K.pb")
        r.add_argument("--input", action="append", default=[], metavar="NAME=FILE",
                       help="an input from a .pb or .npy file")
        r.add_argument("--threads", type=int, default=0, help="threads per run (0: every core)")
        r.add_argument("--specialize", action="store_true",
                       help="compile for these inputs' shapes (not once for every shape)")
        r.add_argument("--no-cache", action="store_true", help="do not use the compile cache")
        if name == "run":
            r.add_argument("--check", help="a folder with output_K.pb (or .npy) to compare with")
            r.add_argument("--atol", type=float, default=1e-4)
            r.add_argument("--rtol", type=float, default=1e-3)
            r.add_argument("--outputs", help="write output_K.npy into this folder")
        else:
            r.add_argument("--runs", type=positive_int, default=10, help="timed runs (at least 1)")
            r.add_argument("--warmup", type=non_negative_int, default=1)
        r.set_defaults(fn=fn)

    args = p.parse_args(args)
    try:
        return args.fn(args)
    except (kiln.Error, OSError, ValueError) as e:
        print(f"kiln: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
