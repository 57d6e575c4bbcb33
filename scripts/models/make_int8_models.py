#!/usr/bin/env python3
"""Writes int8 (QDQ) twins of float models with Kiln's own quantizer, for
the int8 benchmark and accuracy checks:

    /usr/bin/python3 scripts/models/make_int8_models.py FLOAT_DIR... [--out DIR]
        [--calibration N] [--method minmax|percentile]
    scripts/bench.sh --models DIR --no-kernels      (Kiln and ONNX Runtime on each file)

FLOAT_DIR: a model in the backend-test layout (model.onnx, test_data_set_0),
e.g. ../shared/models/resnet18 or an export_models.py output. For each, N
calibration inputs are drawn like the model's test input (the same shape;
values from a normal distribution with its mean and deviation, seeded), the
model is quantized with `kiln-quantize` (kiln.quantize), and OUT/NAME_int8/
gets model.onnx, test_data_set_0 (the float model's own test input) with
ONNX Runtime's output on the quantized file as the reference, and
OUT/NAME_f32/ links the float model for a side-by-side row. Default OUT:
~/.cache/kiln/int8-models (outside git). Needs the kiln Python package
(PYTHONPATH=build/python) and onnxruntime-node (scripts/bench.sh installs it).
"""

import argparse
import os
import shutil
import sys

import numpy as np
import onnx
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from export_models import check_ort, ort_dir, ort_reference  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="+", metavar="FLOAT_DIR")
    ap.add_argument("--out", default=os.path.expanduser("~/.cache/kiln/int8-models"))
    ap.add_argument("--calibration", type=int, default=8, metavar="N")
    ap.add_argument("--method", choices=("minmax", "percentile"), default="minmax")
    args = ap.parse_args()
    try:
        import kiln.quantize
    except ImportError:
        sys.exit("make_int8_models: error: the kiln package is not importable "
                 "(PYTHONPATH=build/python)")
    ort = ort_dir()
    check_ort(ort)
    for src in args.models:
        name = os.path.basename(os.path.normpath(src))
        x = numpy_helper.to_array(onnx.load_tensor(os.path.join(src, "test_data_set_0",
                                                                "input_0.pb")))
        model = onnx.load(os.path.join(src, "model.onnx"), load_external_data=False)
        inits = {i.name for i in model.graph.initializer}
        inputs = [i.name for i in model.graph.input if i.name not in inits]
        if len(inputs) != 1:
            print(f"{name}: skipped (one float input expected, it has {len(inputs)})")
            continue
        rng = np.random.default_rng(1234)
        feeds = [{inputs[0]: rng.normal(float(x.mean()), float(x.std()) or 1.0,
                                        x.shape).astype(x.dtype)}
                 for _ in range(args.calibration)]
        out = os.path.join(args.out, name + "_int8")
        data = os.path.join(out, "test_data_set_0")
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(data)
        report = kiln.quantize.quantize(os.path.join(src, "model.onnx"),
                                        os.path.join(out, "model.onnx"), feeds,
                                        method=args.method)
        shutil.copy(os.path.join(src, "test_data_set_0", "input_0.pb"), data)
        ort_reference(ort, os.path.join(out, "model.onnx"), data)
        f32 = os.path.join(args.out, name + "_f32")
        shutil.rmtree(f32, ignore_errors=True)
        os.makedirs(f32)
        os.symlink(os.path.abspath(os.path.join(src, "model.onnx")), os.path.join(f32, "model.onnx"))
        shutil.copytree(os.path.join(src, "test_data_set_0"), os.path.join(f32, "test_data_set_0"))
        print(f"{name}: {report['ops']} ops quantized -> {out}")


if __name__ == "__main__":
    main()
