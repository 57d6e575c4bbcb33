#!/usr/bin/python3
"""Builds the kit that measures Kiln's CUDA path on a machine with a GPU but
without LLVM/MLIR (the `device` machines lent to some sessions).

    scripts/gpu/prepare.py --out build/gpu-kit-a --models resnet18,resnet18_b32,matmul
    (then, on the GPU machine) python3 scripts/gpu/device.py build/gpu-kit-a OUTDIR

For each model: kilnc compiles the CUDA host object (sm_90), the object is
linked with scripts/gpu/object-run.c against libkiln_runtime alone, and the
runner's weights are taken out into weights/HASH.bin (each distinct blob
once: ResNet-18 at batch 1 and 32 share one) and zeroed inside the runner,
which is then gzipped; so a kit of several large models fits the 64 MiB that
travels to the GPU machine. The ONNX test data and a manifest go with it.
Models made here (batch-32 ResNet-18, square MatMuls) are written under
build/gpu-models, out of git.
"""
import argparse
import gzip
import hashlib
import json
import lzma
import math
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHARED = os.path.join(os.path.dirname(ROOT), "shared", "models")
BUILD = os.path.join(ROOT, "build")
MADE = os.path.join(BUILD, "gpu-models")


def run(cmd, **kw):
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, **kw)


def batch32(source, name):
    import onnx
    path = os.path.join(MADE, f"{name}_b32.onnx")
    if not os.path.exists(path):
        m = onnx.load(source)
        for v in list(m.graph.input) + list(m.graph.output):
            v.type.tensor_type.shape.dim[0].dim_value = 32
        onnx.save(m, path)
    return path


def resnet18_b32():
    return batch32(os.path.join(SHARED, "resnet18", "model.onnx"), "resnet18")


def resnet50_b32():
    return batch32(resnet50(), "resnet50")


def resnet50():
    """torchvision's ResNet-50 (random weights, BatchNorm calibrated, folded
    into the convolutions by the exporter) with each weight tensor made
    ternary, {-s, 0, s} with four in five zero, s keeping the tensor's norm:
    the kit carries its 100 MB of weights gzipped to a few MB, and the
    network's time does not depend on the values (no kernel of Kiln's skips
    zeros). Reference: ONNX Runtime (CPU, one thread) on this very model."""
    import numpy as np
    import onnx
    from onnx import numpy_helper
    sys.path.insert(0, os.path.join(ROOT, "scripts", "models"))
    import export_models as em
    import torch
    import torchvision
    folder = os.path.join(MADE, "resnet50")
    path = os.path.join(folder, "model.onnx")
    data = os.path.join(folder, "test_data_set_0")
    if em.is_complete(folder):
        return path
    ort = em.ort_dir()
    em.check_ort(ort)
    os.makedirs(data, exist_ok=True)
    torch.manual_seed(em.MODEL_SEED)
    net = torchvision.models.resnet50().eval()
    em.calibrate_batchnorm(net, (1, 3, 224, 224))
    x = torch.randn((1, 3, 224, 224), generator=torch.Generator().manual_seed(em.DATA_SEED))
    with torch.no_grad():
        em.export_onnx(net, x, path, 17)
    m = onnx.load(path)
    for t in m.graph.initializer:
        w = numpy_helper.to_array(t)
        if w.dtype != np.float32 or w.ndim < 2:
            continue
        cut = np.quantile(np.abs(w), 0.8)
        keep = np.abs(w) > cut
        s = np.float32(np.linalg.norm(w) / max(1.0, np.sqrt(keep.sum())))
        t.CopyFrom(numpy_helper.from_array((np.sign(w) * keep * s).astype(np.float32), t.name))
    onnx.save(m, path)
    onnx.save_tensor(numpy_helper.from_array(x.numpy(), "input"), os.path.join(data, "input_0.pb"))
    em.ort_reference(ort, path, data)
    return path


def matmul(n):
    import onnx
    from onnx import TensorProto, helper
    path = os.path.join(MADE, f"matmul{n}.onnx")
    if not os.path.exists(path):
        g = helper.make_graph(
            [helper.make_node("MatMul", ["a", "b"], ["c"], name="matmul")], f"matmul{n}",
            [helper.make_tensor_value_info("a", TensorProto.FLOAT, [n, n]),
             helper.make_tensor_value_info("b", TensorProto.FLOAT, [n, n])],
            [helper.make_tensor_value_info("c", TensorProto.FLOAT, [n, n])])
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def matmul_half(n, kind="f16"):
    """An f16 or bf16 product of two buffers of Kiln's: the f32 inputs cast
    (kiln-gpu-mma-contractions needs operands at known alignments, which a
    model input need not be), the result cast back to f32."""
    import onnx
    from onnx import TensorProto, helper
    path = os.path.join(MADE, f"matmul_{kind}_{n}.onnx")
    if not os.path.exists(path):
        half = helper.make_attribute(
            "to", TensorProto.FLOAT16 if kind == "f16" else TensorProto.BFLOAT16)
        full = helper.make_attribute("to", TensorProto.FLOAT)
        nodes = [helper.make_node("Cast", ["a"], ["a16"], name=f"a_to_{kind}"),
                 helper.make_node("Cast", ["b"], ["b16"], name=f"b_to_{kind}"),
                 helper.make_node("MatMul", ["a16", "b16"], ["c16"], name="matmul"),
                 helper.make_node("Cast", ["c16"], ["c"], name="c_to_f32")]
        nodes[0].attribute.append(half)
        nodes[1].attribute.append(half)
        nodes[3].attribute.append(full)
        g = helper.make_graph(
            nodes, f"matmul_{kind}_{n}",
            [helper.make_tensor_value_info("a", TensorProto.FLOAT, [n, n]),
             helper.make_tensor_value_info("b", TensorProto.FLOAT, [n, n])],
            [helper.make_tensor_value_info("c", TensorProto.FLOAT, [n, n])])
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def shared(name):
    return os.path.join(SHARED, name, "model.onnx")


# name -> (model path, kilnc extra args, test data: ("sets", model dir, [K]) |
#          ("replicate", model dir, K, batch) | ("random", shapes), torch baseline)
def specs():
    d = {}
    for name in ["resnet18", "mobilenet_v2", "squeezenet1_1", "mlp_gelu"]:
        d[name] = (shared(name), [], ("sets", name, [0]), {"model": name, "batch": 1})
    d["resnet50"] = (resnet50, [], ("sets", "@resnet50", [0]), {"model": "resnet50", "batch": 1})
    d["resnet50_b32"] = (resnet50_b32, [], ("replicate", "@resnet50", 0, 32),
                         {"model": "resnet50", "batch": 32})
    d["resnet18_b32"] = (resnet18_b32, [], ("replicate", "resnet18", 0, 32),
                         {"model": "resnet18", "batch": 32})
    for k, seq in [(0, 128), (1, 37)]:
        d[f"encoder4_s{seq}"] = (
            shared("encoder4"),
            ["--shapes-from", os.path.join(SHARED, "encoder4", f"test_data_set_{k}")],
            ("sets", "encoder4", [k]), {"model": "encoder4", "seq": seq})
    # The same model with kiln-gpu-split-reductions instead of
    # kiln-gpu-block-reductions, and with neither (one thread per row, as
    # bec683d), to time them in the same run (the weights travel once).
    for suffix, flags in [("split", ["--gpu-split-reductions", "--gpu-block-reductions=false"]),
                          ("noblock", ["--gpu-block-reductions=false"])]:
        d[f"encoder4_s128_{suffix}"] = (
            shared("encoder4"),
            ["--shapes-from", os.path.join(SHARED, "encoder4", "test_data_set_0")] + flags,
            ("sets", "encoder4", [0]), {"model": "encoder4", "seq": 128})
    # Exact FP32 FMAs (--gpu-precision=fp32) beside the default TF32, to
    # compare the two in one run (the weights travel once).
    for name in ["resnet18", "mlp_gelu"]:
        d[f"{name}_fp32"] = (shared(name), ["--gpu-precision=fp32"], ("sets", name, [0]),
                             {"model": name, "batch": 1})
    d["encoder4_s128_fp32"] = (
        shared("encoder4"),
        ["--shapes-from", os.path.join(SHARED, "encoder4", "test_data_set_0"), "--gpu-precision=fp32"],
        ("sets", "encoder4", [0]), {"model": "encoder4", "seq": 128})
    d["resnet18_b32_fp32"] = (resnet18_b32, ["--gpu-precision=fp32"], ("replicate", "resnet18", 0, 32),
                              {"model": "resnet18", "batch": 32})
    for n in [1024, 2048, 4096]:
        d[f"matmul{n}"] = (lambda n=n: matmul(n), [], ("random", [[n, n], [n, n]]),
                           {"model": "matmul", "n": n})
    # Without kiln-gpu-tile-contractions (the one-thread-per-register-tile
    # kernels of bec683d), to time the shared-memory tiles in the same run.
    d["resnet18_b32_notile"] = (resnet18_b32, ["--gpu-tile-contractions=false"],
                                ("replicate", "resnet18", 0, 32),
                                {"model": "resnet18", "batch": 32})
    # Without kiln-gpu-vectorize-elementwise (one thread per element, 4-byte
    # accesses), to time the 16-byte accesses in the same run.
    novec = ["--gpu-vectorize-elementwise=false"]
    d["resnet18_b32_novec"] = (resnet18_b32, novec, ("replicate", "resnet18", 0, 32),
                               {"model": "resnet18", "batch": 32})
    d["mobilenet_v2_novec"] = (shared("mobilenet_v2"), novec, ("sets", "mobilenet_v2", [0]),
                               {"model": "mobilenet_v2", "batch": 1})
    d["encoder4_s128_novec"] = (
        shared("encoder4"),
        ["--shapes-from", os.path.join(SHARED, "encoder4", "test_data_set_0")] + novec,
        ("sets", "encoder4", [0]), {"model": "encoder4", "seq": 128})
    # f16 and bf16 products on tensor cores (kiln-gpu-mma-contractions) and
    # without (--gpu-mma-contractions=false: kiln-gpu-loops' kernels),
    # against torch.matmul in the same type (cuBLAS, tensor cores). Inputs
    # scaled by 1/8 and a looser check: f16 products accumulate in f16,
    # and bf16 inputs keep 8 bits.
    for kind in ["f16", "bf16"]:
        for n in [1024, 4096]:
            for suffix, flags in [("", []), ("_nomma", ["--gpu-mma-contractions=false"])]:
                d[f"matmul_{kind}_{n}{suffix}"] = (
                    lambda n=n, kind=kind: matmul_half(n, kind), flags,
                    ("random", [[n, n], [n, n]]),
                    {"model": f"matmul_{kind}", "n": n, "scale": 0.125, "atol": 0.05,
                     "rtol": 0.05})
    for n in [1024, 4096]:
        d[f"matmul{n}_notile"] = (lambda n=n: matmul(n), ["--gpu-tile-contractions=false"],
                                  ("random", [[n, n], [n, n]]), {"model": "matmul", "n": n})
    return d


def model_flops(path, extra):
    """Multiply-adds x 2 of the model's products and convolutions at the
    shapes it is compiled for: read from kilnc --emit=kiln (kiln.matmul,
    kiln.gemm, kiln.conv after shape inference, shapes computed from Shape
    ops included, which ONNX's own shape inference leaves unknown). What
    device.py divides by the time for GFLOP/s and the share of the peak."""
    kilnc = os.path.join(BUILD, "bin", "kilnc")
    flags = [a for a in extra if not a.startswith("--gpu-")]
    text = subprocess.run([kilnc, path, "--emit=kiln", "-o", "-"] + flags, check=True,
                          capture_output=True, text=True).stdout
    total = 0
    for line in text.splitlines():
        m = re.search(r"kiln\.(matmul|gemm|conv) .*: \((.*)\) -> tensor<([0-9x]+)x[a-z]", line)
        if not m:
            continue
        ins = re.findall(r"tensor<([0-9x]+)x[a-z]", m.group(2))
        n = math.prod(int(d) for d in m.group(3).split("x"))
        if m.group(1) == "conv":
            k = math.prod(int(d) for d in ins[1].split("x")[1:])
        else:
            lhs = [int(d) for d in ins[0].split("x")]
            k = lhs[-2] if m.group(1) == "gemm" and "transA = 1" in line else lhs[-1]
        total += 2 * n * k
    return total


def as_npy(folder):
    """Each NAME.pb of a data set also as NAME.npy, so that device.py needs
    numpy but not the onnx package on the GPU machine."""
    import numpy as np
    import onnx
    from onnx import numpy_helper
    for f in os.listdir(folder):
        if f.endswith(".pb"):
            pb = os.path.join(folder, f)
            np.save(pb[:-3] + ".npy", numpy_helper.to_array(onnx.load_tensor(pb)))


def store_weights(out, blob, blobs):
    """Each distinct blob once; a blob that differs from one already stored
    in a few bytes (ResNet-18 at batch 32 differs from batch 1 in one: a
    shape constant) is stored as that one plus the changed bytes."""
    for path, other in blobs.items():
        if len(other) == len(blob):
            diff = [i for i in range(0, len(blob), 4096) if other[i:i + 4096] != blob[i:i + 4096]]
            if len(diff) <= 4:
                return {"base": path, "patch": [[i, blob[i:i + 4096].hex()] for i in diff]}
    # xz: ResNet-50's ternary weights take 6.5 MB instead of gzip's 11 MB,
    # which is what lets ResNet-18 and -50 travel in one kit.
    path = f"weights/{hashlib.sha256(blob).hexdigest()[:16]}.bin.xz"
    if path not in blobs:
        with lzma.open(os.path.join(out, path), "wb", preset=6) as f:
            f.write(blob)
        blobs[path] = blob
    return {"base": path, "patch": []}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--models", required=True, help="comma-separated; 'matmul' = all sizes")
    ap.add_argument("--mcpu", default="sm_90")
    ap.add_argument("--gpu-precision", default="tf32", choices=["tf32", "fp32"],
                    help="kilnc --gpu-precision for float32 models: tf32 (the default) checks "
                         "their outputs at 1e-2 + 1e-2 |ref| (TF32 inputs keep 10 mantissa "
                         "bits), fp32 at 1e-3 + 1e-3 |ref|")
    ap.add_argument("--bundles", default="",
                    help="shared models to carry as CUDA bundles (kilnc --emit=bundle, run by "
                         "test/bundle/bundle-run.c), the first with external weights too")
    args = ap.parse_args()
    os.makedirs(MADE, exist_ok=True)
    out = os.path.abspath(args.out)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(os.path.join(out, "weights"))
    os.makedirs(os.path.join(out, "data"))
    all_specs = specs()
    wanted = []
    for w in args.models.split(","):
        wanted += [k for k in all_specs if k == w or (w == "matmul" and k.startswith("matmul"))]
    kilnc = os.path.join(BUILD, "bin", "kilnc")
    runtime = os.path.join(BUILD, "lib", "libkiln_runtime.so")
    # Under its SONAME (libkiln_runtime.so.ABI), the name the runners ask for.
    shutil.copy(runtime, os.path.join(out, os.path.basename(os.path.realpath(runtime))))
    shutil.copy(os.path.join(BUILD, "bin", "kiln-cuda-tests"), out)
    tmp = os.path.join(MADE, "tmp")
    os.makedirs(tmp, exist_ok=True)
    manifest = []
    blobs = {}
    for name in wanted:
        model, extra, data, baseline = all_specs[name]
        model = model() if callable(model) else model
        obj = os.path.join(tmp, name + ".o")
        precision = next((f.split("=", 1)[1] for f in extra if f.startswith("--gpu-precision=")),
                         args.gpu_precision)
        flags = extra if any(f.startswith("--gpu-precision=") for f in extra) else \
            extra + [f"--gpu-precision={precision}"]
        run([kilnc, model, "--target=nvptx64-nvidia-cuda", f"--mcpu={args.mcpu}", "-o", obj] + flags)
        exe = os.path.join(tmp, name + ".run")
        run(["cc", "-O2", "-I", os.path.join(ROOT, "runtime", "include"),
             os.path.join(ROOT, "scripts", "gpu", "object-run.c"), obj, "-L", os.path.dirname(runtime),
             "-lkiln_runtime", "-Wl,-rpath,$ORIGIN", "-o", exe])
        blob_path = os.path.join(tmp, name + ".weights")
        run([exe, "--dump-weights", blob_path], env=dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(runtime)))
        blob = open(blob_path, "rb").read()
        image = bytearray(open(exe, "rb").read())
        weights = None
        if blob:
            weights = store_weights(out, blob, blobs)
            at = image.find(blob[:4096])
            if at < 0 or image[at:at + len(blob)] != blob or image.find(blob[:4096], at + 1) >= 0:
                sys.exit(f"{name}: the weights are not found once in the runner")
            image[at:at + len(blob)] = bytes(len(blob))
        with gzip.open(os.path.join(out, name + ".run.gz"), "wb", compresslevel=6) as f:
            f.write(image)
        kind = data[0]
        baseline = dict(baseline)
        if precision == "tf32" and "atol" not in baseline:
            # A TF32 product of standard-normal n x n matrices errs by about
            # 7e-4 sqrt(n) (each product of two inputs rounded to 11 bits
            # by 2^-11 sqrt 2 of itself, n of them with random signs): up to
            # about 0.2 at n = 4096 over 16M outputs, whose own spread is
            # sqrt(n) = 64. A wrong fragment layout errs by that spread.
            n = baseline.get("n")
            baseline.update(atol=5e-3 * math.sqrt(n) if n else 1e-2, rtol=1e-2)
        entry = {"name": name, "runner": name + ".run.gz", "weights": weights, "data": kind,
                 "baseline": baseline, "flops": model_flops(model, extra),
                 "precision": precision}
        if kind in ("sets", "replicate"):
            model_dir = data[1]
            sets = data[2] if kind == "sets" else [data[2]]
            entry["sets"] = []
            for k in sets:
                # "@name": a model made here, under build/gpu-models.
                home = MADE if model_dir.startswith("@") else SHARED
                model_dir = model_dir.lstrip("@")
                src = os.path.join(home, model_dir, f"test_data_set_{k}")
                dst = os.path.join(out, "data", f"{model_dir}_{k}")
                if not os.path.exists(dst):
                    shutil.copytree(src, dst)
                    as_npy(dst)
                entry["sets"].append(f"data/{model_dir}_{k}")
            if kind == "replicate":
                entry["batch"] = data[3]
        else:
            entry["shapes"] = data[1]
        manifest.append(entry)
    json.dump(manifest, open(os.path.join(out, "manifest.json"), "w"), indent=1)
    bundles = {}
    os.makedirs(os.path.join(out, "bundle"), exist_ok=True)
    for i, name in enumerate(n for n in args.bundles.split(",") if n):
        data = os.path.join(SHARED, name, "test_data_set_0")
        dst = os.path.join(out, "data", f"{name}_0")
        if not os.path.exists(dst):
            shutil.copytree(data, dst)
        for external in ([False, True] if i == 0 else [False]):
            tag = name + ("_ext" if external else "")
            run([kilnc, shared(name), "--target=nvptx64-nvidia-cuda", f"--mcpu={args.mcpu}",
                 "--emit=bundle", "--shapes-from", data, "-o", os.path.join(tmp, tag)] +
                (["--weights=external"] if external else []))
            run(["cc", "-O2", "-I", tmp, "-I", os.path.join(ROOT, "runtime", "include"),
                 f'-DKILN_BUNDLE_HEADER="{tag}.h"', f"-DKILN_BUNDLE_MODEL={tag}_model",
                 os.path.join(ROOT, "test", "bundle", "bundle-run.c"), os.path.join(tmp, tag + ".o"),
                 "-L", os.path.dirname(runtime), "-lkiln_runtime", "-Wl,-rpath,$ORIGIN/..", "-lm",
                 "-o", os.path.join(out, "bundle", tag)])
            bundles[tag] = {"runner": f"bundle/{tag}", "data": f"data/{name}_0"}
            if external:
                shutil.copy(os.path.join(tmp, tag + ".weights"), os.path.join(out, "bundle"))
                bundles[tag]["weights"] = f"bundle/{tag}.weights"
    json.dump(bundles, open(os.path.join(out, "bundles.json"), "w"), indent=1)
    total = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(out) for f in fs)
    print(f"kit {out}: {len(manifest)} runners, {total / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
