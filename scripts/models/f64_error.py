#!/usr/bin/env python3
"""How far Kiln, ONNX Runtime and PyTorch (float32) each are from the exact
answer, for a model of export_shape_models.py: rebuilds the model with the
same seeds, runs it in float64 PyTorch on each data set, and compares.

    /usr/bin/python3 scripts/models/f64_error.py NAME [--opset 17] [--dir DIR]

DIR defaults to $XDG_CACHE_HOME/kiln/shape-models/NAME-opsetK (written by
export_shape_models.py; its output_K.pb are ONNX Runtime's). Kiln runs
through its Python API from the build (build/ or $KILN_BUILD_DIR). Prints,
per data set and output, each engine's largest and mean error against
float64 and how many elements lie beyond 1e-4 + 1e-3*|exact|, then how many
Kiln and ONNX Runtime disagree on at that tolerance. When two engines are
equally close to float64, their disagreements are rounding, not a bug.
Detection models are not supported (float64 boxes change the detections).
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import export_shape_models as esm  # noqa: E402

em, np, torch, onnx, numpy_helper = esm.em, esm.np, esm.torch, esm.onnx, esm.numpy_helper
ATOL, RTOL = 1e-4, 1e-3


def report(label, got, exact):
    err = np.abs(got.astype(np.float64) - exact)
    beyond = int((err > ATOL + RTOL * np.abs(exact)).sum())
    print(f"  {label:<14} max {err.max():.3g}  mean {err.mean():.3g}  "
          f"beyond tolerance of float64: {beyond}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("name", choices=sorted(esm.MODELS))
    p.add_argument("--opset", type=int, default=17)
    p.add_argument("--dir")
    a = p.parse_args()
    spec = esm.MODELS[a.name]
    if spec.get("detection"):
        sys.exit(f"f64_error: {a.name} is a detection model, which this script does not support")
    folder = a.dir or os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")),
                                   "kiln", "shape-models", f"{a.name}-opset{a.opset}")
    build = os.environ.get("KILN_BUILD_DIR", os.path.join(ROOT, "build"))
    sys.path.insert(0, os.path.join(build, "python"))
    import kiln

    # The model exactly as make_model built it: same seeds, same calibration.
    torch.manual_seed(em.MODEL_SEED)
    model = spec["build"]().eval()
    sets = [esm.make_inputs(s, em.DATA_SEED + i) for i, s in enumerate(spec["sets"])]
    first = spec["sets"][0][0]
    if first[0] == "image":
        shape = first[1] if len(first[1]) == 4 else (1,) + tuple(first[1])
        em.calibrate_batchnorm(model, shape)
        model.eval()
    sess = kiln.InferenceSession(os.path.join(folder, "model.onnx"))
    names = [i.name for i in sess.get_inputs()]
    for i, xs in enumerate(sets):
        d = os.path.join(folder, f"test_data_set_{i}")
        stored = [numpy_helper.to_array(onnx.load_tensor(os.path.join(d, f"input_{j}.pb")))
                  for j in range(len(xs))]
        if not all(np.array_equal(s, x.numpy()) for s, x in zip(stored, xs)):
            sys.exit(f"f64_error: {d} does not hold this script's inputs (re-export the model)")
        with torch.no_grad():
            exact = [y.numpy() for y in esm.as_tuple(model.double()(
                *[x.double() if x.is_floating_point() else x for x in xs]))]
            single = [y.numpy() for y in esm.as_tuple(model.float()(*xs))]
        kilns = sess.run(None, dict(zip(names, stored)))
        for k, ex in enumerate(exact):
            ort = numpy_helper.to_array(onnx.load_tensor(os.path.join(d, f"output_{k}.pb")))
            got = np.asarray(kilns[k])
            print(f"set {i} output {k} {list(ex.shape)}, largest |exact| {np.abs(ex).max():.3g}")
            report("ONNX Runtime", ort, ex)
            report("PyTorch f32", single[k], ex)
            report("Kiln", got, ex)
            apart = np.abs(got.astype(np.float64) - ort) > ATOL + RTOL * np.abs(ort)
            print(f"  Kiln vs ONNX Runtime: {int(apart.sum())} of {apart.size} beyond tolerance")


if __name__ == "__main__":
    main()
