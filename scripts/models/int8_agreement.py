#!/usr/bin/env python3
"""Top-1 agreement of int8 models with their float originals, run by Kiln:

    PYTHONPATH=build/python /usr/bin/python3 scripts/models/int8_agreement.py \
        DIR/NAME_int8... [--count 100] [--seed 3]

Each NAME_int8 folder (make_int8_models.py's output) is paired with its
NAME_f32 beside it. COUNT inputs are drawn like the calibration inputs
make_int8_models.py used (the float model's test input's shape, normal
values with its mean and deviation) but from another seed, so none of them
was calibrated on; both models run on each, and the report gives the share
of inputs whose arg-max (over the last axis of the first output) agrees,
the mean |int8 - float| and the mean |float| for scale.
"""

import argparse
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="+", metavar="INT8_DIR")
    ap.add_argument("--count", type=int, default=100)
    ap.add_argument("--seed", type=int, default=3)
    args = ap.parse_args()
    try:
        import kiln
    except ImportError:
        sys.exit("int8_agreement: error: the kiln package is not importable "
                 "(PYTHONPATH=build/python)")
    print(f"{'model':<24} {'inputs':>6} {'top-1 agree':>11} {'mean |diff|':>11} "
          f"{'mean |float|':>12}")
    for q_dir in args.models:
        q_dir = os.path.normpath(q_dir)
        name = os.path.basename(q_dir)
        if not name.endswith("_int8"):
            sys.exit(f"int8_agreement: error: {q_dir} is not a NAME_int8 folder")
        f_dir = q_dir[:-len("_int8")] + "_f32"
        x = numpy_helper.to_array(onnx.load_tensor(os.path.join(q_dir, "test_data_set_0",
                                                                "input_0.pb")))
        fm = kiln.compile(os.path.join(f_dir, "model.onnx"))
        qm = kiln.compile(os.path.join(q_dir, "model.onnx"))
        input_name = fm.inputs[0].name
        rng = np.random.default_rng(args.seed)
        agree, diffs, mags = 0, [], []
        for _ in range(args.count):
            feed = {input_name: rng.normal(float(x.mean()), float(x.std()) or 1.0,
                                           x.shape).astype(x.dtype)}
            (yf,) = fm.run(None, feed)[:1]
            (yq,) = qm.run(None, feed)[:1]
            yf, yq = np.asarray(yf, np.float64), np.asarray(yq, np.float64)
            agree += int(np.array_equal(yf.argmax(axis=-1), yq.argmax(axis=-1)))
            diffs.append(np.abs(yf - yq).mean())
            mags.append(np.abs(yf).mean())
        print(f"{name[:-5]:<24} {args.count:>6} {agree / args.count:>11.2%} "
              f"{np.mean(diffs):>11.4g} {np.mean(mags):>12.4g}")


if __name__ == "__main__":
    main()
