#!/usr/bin/env python3
"""Where Kiln's and ONNX Runtime's results first part on one model and input:
every QuantizeLinear output (or, with --all, every node output whose type
shape inference knows) becomes a graph output, both engines run the copy on
one thread, and the tensors that differ are listed in graph order.

    PYTHONPATH=build/python /usr/bin/python3 scripts/models/first_difference.py \\
        MODEL.onnx INPUT_DIR [--all] [--show 8] [--ties]

INPUT_DIR holds input_J.pb (the ONNX backend-test layout). ONNX Runtime is
onnxruntime-node from the bench cache (scripts/bench.sh installs it).

--ties: print the differing elements of the first differing 8-bit tensor
(index, Kiln's value, ONNX Runtime's), to recompute them in float64 from
the inputs both engines agree on (docs/int8.md works one case through).

For quantized models a difference of one step at an op whose float value
lies within float32 rounding of a tie (x.5) is expected: engines compute
the float ops between quantized tensors (SiLU, Sigmoid, a residual Add) with
different approximations and orders, and later layers carry the step on.
"""

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper, shape_inference

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def ort_dir():
    cache = os.environ.get("KILN_BENCH_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "kiln", "bench")
    d = os.path.join(cache, "onnxruntime-node-1.30.0")
    if not os.path.isdir(os.path.join(d, "node_modules", "onnxruntime-node")):
        sys.exit(f"first_difference: no onnxruntime-node in {d}: run scripts/bench.sh once")
    return d


def exposed(model, every):
    """The model with the tensors to compare added as graph outputs, and
    their names in graph order (the model's own outputs first)."""
    m = shape_inference.infer_shapes(model)
    known = {v.name: v for v in m.graph.value_info}
    have = {o.name for o in m.graph.output}
    for n in m.graph.node:
        if not every and n.op_type != "QuantizeLinear":
            continue
        for o in n.output:
            if o and o in known and o not in have:
                m.graph.output.append(known[o])
                have.add(o)
    return m, [o.name for o in m.graph.output]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model")
    p.add_argument("inputs")
    p.add_argument("--all", action="store_true", help="every node output, not only QuantizeLinear's")
    p.add_argument("--show", type=int, default=8, help="differing tensors to list")
    p.add_argument("--ties", action="store_true",
                   help="print each differing element of the first differing quantized tensor")
    args = p.parse_args()
    try:
        import kiln
    except ImportError:
        sys.exit("first_difference: cannot import kiln: run with PYTHONPATH=build/python")

    model, names = exposed(onnx.load(args.model), args.all)
    graph_inputs = [i.name for i in model.graph.input
                    if i.name not in {t.name for t in model.graph.initializer}]
    feeds = []
    for j in range(len(graph_inputs)):
        feeds.append(numpy_helper.to_array(onnx.load_tensor(os.path.join(args.inputs, f"input_{j}.pb"))))
    with tempfile.TemporaryDirectory(prefix="kiln-first-difference-") as tmp:
        path = os.path.join(tmp, "model.onnx")
        onnx.save(model, path)
        for j, x in enumerate(feeds):
            with open(os.path.join(tmp, f"input_{j}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(x).SerializeToString())
        r = subprocess.run(["node", os.path.join(HERE, "ort_reference.js"), "--ort", ort_dir(),
                            "--model", path, "--inputs", tmp], capture_output=True, text=True)
        if r.returncode:
            sys.exit(f"first_difference: ONNX Runtime failed:\n{r.stderr}")
        ort = [numpy_helper.to_array(onnx.load_tensor(os.path.join(tmp, f"output_{k}.pb")))
               for k in range(len(names))]
        got = kiln.compile(path, threads=1, cache=False)(*feeds)
    if not isinstance(got, (list, tuple)):
        got = [got]
    print(f"{len(names)} tensors compared")
    shown = 0
    first = None
    for k, name in enumerate(names):
        a = np.asarray(got[k])
        b = ort[k]
        if a.shape != b.shape:
            print(f"{name}: shapes differ, Kiln {a.shape}, ONNX Runtime {b.shape}")
            shown += 1
            continue
        d = np.abs(a.astype(np.float64) - b.astype(np.float64))
        if d.size and d.max() > 0:
            print(f"{name} ({a.dtype}{list(a.shape)}): {int((d > 0).sum())} of {d.size} differ, "
                  f"max {d.max():g}")
            if first is None and a.dtype in (np.uint8, np.int8):
                first = (name, a, b)
            shown += 1
            if shown >= args.show:
                break
    if shown == 0:
        print("no difference: every compared tensor is equal to the bit")
    if args.ties and first:
        name, a, b = first
        print(f"differing elements of {name} (index: Kiln, ONNX Runtime):")
        for i in np.argwhere(a != b)[:32]:
            i = tuple(int(v) for v in i)
            print(f"  {i}: {a[i]} {b[i]}")


if __name__ == "__main__":
    main()
