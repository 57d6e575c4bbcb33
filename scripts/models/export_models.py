#!/usr/bin/env python3
"""Exports more real-architecture test models for Kiln.

    /usr/bin/python3 scripts/models/export_models.py [--out DIR] [--only NAMES] [--force]

Each model goes to OUT/NAME/ in the ONNX backend-test layout, like the shared
models in ../shared/models:

    OUT/NAME/model.onnx
    OUT/NAME/test_data_set_0/input_0.pb    (onnx TensorProto, float32)
    OUT/NAME/test_data_set_0/output_0.pb   (ONNX Runtime's output, CPU, 1 thread)

The networks are randomly initialised (no weights can be downloaded), with a
fixed seed so that every machine writes the same model. The reference output
comes from ONNX Runtime (onnxruntime-node, through ort_reference.js) and is
kept only if it agrees with PyTorch's own output for the same input.

Needs Debian's PyTorch and ONNX packages, which install for /usr/bin/python3
(a pyenv or venv python3 earlier on PATH will not see them), and
onnxruntime-node, which scripts/bench.sh installs into the bench cache.
"""

import argparse
import inspect
import math
import os
import shutil
import subprocess
import sys
import tempfile
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ORT_VERSION = "1.30.0"  # the version scripts/bench.sh pins

try:
    import numpy as np
    import onnx
    from onnx import numpy_helper
    import torch
    import torch.nn as nn
    import torchvision
except ImportError as e:
    sys.exit(f"export_models: error: {e}\n"
             "  needs PyTorch, torchvision, ONNX and numpy from Debian:\n"
             "    apt-get install -y python3-torch python3-torchvision python3-onnx python3-numpy\n"
             "  and run this script with /usr/bin/python3, which is the interpreter those packages\n"
             "  install for (the first python3 on PATH may be a pyenv or venv one).")

# Closeness of ONNX Runtime's output to PyTorch's, the tolerance the shared
# models' README suggests for comparing different implementations.
ATOL = 1e-3
RTOL = 1e-3

MODEL_SEED = 0   # torch.manual_seed before building each model
DATA_SEED = 1    # the test input
CALIB_SEED = 2   # the BatchNorm calibration batches
CALIB_BATCHES = 4
CALIB_BATCH_SIZE = 8


# ---------------------------------------------------------------------------
# Models written here (torchvision has no transformer decoder block or bare LSTM)

class CausalSelfAttention(nn.Module):
    # GPT-2 / nanoGPT style: one projection for q, k and v, a boolean causal
    # mask applied with masked_fill(-inf), so the export has the Where + Softmax
    # pattern of real decoder models rather than an additive mask.
    def __init__(self, d_model, n_heads, max_len):
        super().__init__()
        self.n_heads = n_heads
        self.head_dim = d_model // n_heads
        self.c_attn = nn.Linear(d_model, 3 * d_model)
        self.c_proj = nn.Linear(d_model, d_model)
        self.register_buffer("causal", torch.tril(torch.ones(max_len, max_len, dtype=torch.bool))
                             .view(1, 1, max_len, max_len), persistent=False)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        hd = self.head_dim
        q = q.view(b, t, self.n_heads, hd).transpose(1, 2)
        k = k.view(b, t, self.n_heads, hd).transpose(1, 2)
        v = v.view(b, t, self.n_heads, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        att = att.masked_fill(~self.causal[:, :, :t, :t], float("-inf"))
        att = torch.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        return self.c_proj(y)


class GPTBlock(nn.Module):
    # Pre-LayerNorm residual block with an exact-GELU 4x MLP, as in GPT-2.
    def __init__(self, d_model=256, n_heads=4, max_len=64):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, n_heads, max_len)
        self.ln_2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(),
                                 nn.Linear(4 * d_model, d_model))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class LSTMSequence(nn.Module):
    # nn.LSTM returns (output, (h, c)); the test wants only the full sequence.
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(input_size=64, hidden_size=128, num_layers=1, batch_first=True)

    def forward(self, x):
        return self.lstm(x)[0]


class UNetSmall(nn.Module):
    """A small U-Net (widths 32-64-128-256) as segmentation models have it:
    two 3x3 conv + BatchNorm + ReLU per level, MaxPool down, ConvTranspose
    2x2 stride 2 up, skip connections concatenated."""

    def __init__(self, widths=(32, 64, 128, 256), classes=2):
        super().__init__()

        def block(cin, cout):
            return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(),
                                 nn.Conv2d(cout, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU())

        self.down = nn.ModuleList()
        cin = 3
        for w in widths:
            self.down.append(block(cin, w))
            cin = w
        self.up = nn.ModuleList()
        self.merge = nn.ModuleList()
        for w in reversed(widths[:-1]):
            self.up.append(nn.ConvTranspose2d(cin, w, 2, stride=2))
            self.merge.append(block(2 * w, w))
            cin = w
        self.head = nn.Conv2d(cin, classes, 1)

    def forward(self, x):
        skips = []
        for i, d in enumerate(self.down):
            x = d(x)
            if i < len(self.down) - 1:
                skips.append(x)
                x = nn.functional.max_pool2d(x, 2)
        for up, merge in zip(self.up, self.merge):
            x = merge(torch.cat([up(x), skips.pop()], dim=1))
        return self.head(x)


class Conv1dStem(nn.Module):
    """The convolutional front end of a Whisper-style audio encoder (80 mel
    bins, 3000 frames; width 384 as whisper-tiny)."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv1d(80, 384, 3, padding=1)
        self.conv2 = nn.Conv1d(384, 384, 3, stride=2, padding=1)

    def forward(self, x):
        return nn.functional.gelu(self.conv2(nn.functional.gelu(self.conv1(x))))


def convnext_tiny():
    m = torchvision.models.convnext_tiny(weights=None)
    # torchvision initialises each block's layer scale to 1e-6, which makes the
    # blocks (depthwise 7x7 conv, LayerNorm, GELU MLP) change the output by
    # about 1e-5: far below any test tolerance, so a wrong block would still
    # "match". Trained ConvNeXts have layer scales of roughly 0.1 to 1.
    with torch.no_grad():
        for name, p in m.named_parameters():
            if name.endswith("layer_scale"):
                p.uniform_(0.1, 1.0)
    return m


def mobilenet_v3_small():
    m = torchvision.models.mobilenet_v3_small(weights=None)
    # torchvision draws both classifier Linears from N(0, 0.01), which shrinks
    # the logits to about 0.03: under a 1e-3 absolute tolerance that would let
    # through relative errors of several percent anywhere in the network.
    # N(0, 1/fan_in) keeps the features' scale, as the other models' heads do.
    with torch.no_grad():
        for layer in m.classifier:
            if isinstance(layer, nn.Linear):
                layer.weight.normal_(0.0, 1.0 / math.sqrt(layer.in_features))
    return m


# name -> builder, input shape, opset, what it exercises
MODELS = {
    "convnext_tiny": (convnext_tiny, (1, 3, 224, 224), 13,
                      "depthwise 7x7 Conv, LayerNorm (decomposed), exact GELU, layer scale"),
    "densenet121": (lambda: torchvision.models.densenet121(weights=None), (1, 3, 224, 224), 13,
                    "dense Concat of all earlier features, BatchNorm+ReLU before Conv, AveragePool"),
    "mobilenet_v3_small": (mobilenet_v3_small, (1, 3, 224, 224), 13,
                           "squeeze-excitation, hard-swish, hard-sigmoid, depthwise Conv"),
    "efficientnet_b0": (lambda: torchvision.models.efficientnet_b0(weights=None), (1, 3, 224, 224), 13,
                        "MBConv, squeeze-excitation with SiLU and Sigmoid, depthwise 3x3/5x5 Conv"),
    "resnet50": (lambda: torchvision.models.resnet50(weights=None), (1, 3, 224, 224), 13,
                 "bottleneck blocks (1x1-3x3-1x1 Conv), residual Add"),
    "gpt_block": (GPTBlock, (1, 64, 256), 13,
                  "decoder block, d=256, 4 heads, causal mask (Where), LayerNorm, GELU MLP 4x"),
    "lstm_small": (LSTMSequence, (1, 32, 64), 13,
                   "LSTM 64 -> 128, one layer, batch_first, full output sequence"),
    "r3d_18": (lambda: torchvision.models.video.r3d_18(weights=None), (1, 3, 8, 112, 112), 13,
               "video ResNet: Conv3d 3x7x7 stem and 3x3x3 blocks (strided in time too), "
               "3-D BatchNorm, AdaptiveAvgPool3d"),
    "inception_v3": (lambda: torchvision.models.inception_v3(weights=None, aux_logits=False,
                                                             init_weights=True),
                     (1, 3, 299, 299), 13,
                     "factorised 1x7/7x1 and 1x3/3x1 Conv, parallel branches Concat, AvgPool 3x3"),
    "resnext50_32x4d": (lambda: torchvision.models.resnext50_32x4d(weights=None), (1, 3, 224, 224),
                        13, "grouped 3x3 Conv, 32 groups of 4-32 channels, bottleneck blocks"),
    "shufflenet_v2": (lambda: torchvision.models.shufflenet_v2_x1_0(weights=None), (1, 3, 224, 224),
                      13, "channel shuffle (Reshape-Transpose-Reshape), Split, depthwise 3x3"),
    "googlenet": (lambda: torchvision.models.googlenet(weights=None, aux_logits=False,
                                                       init_weights=True), (1, 3, 224, 224), 13,
                  "Inception v1 blocks: 1x1/3x3/5x5 branches, MaxPool branch, Concat"),
    "unet_small": (UNetSmall, (1, 3, 128, 128), 13,
                   "U-Net: 3 levels, MaxPool down, ConvTranspose 2x2 stride 2 up, skip Concat"),
    "conv1d_stem": (Conv1dStem, (1, 80, 3000), 13,
                    "Whisper-style audio stem: Conv1d 80 -> 384 k3, GELU, Conv1d k3 stride 2, GELU"),
}


# ---------------------------------------------------------------------------

def log(msg):
    print(msg, flush=True)


def calibrate_batchnorm(model, input_shape):
    """Gives BatchNorm layers running statistics that match their inputs.

    Freshly initialised BatchNorm has mean 0 and variance 1, so in eval mode
    activations grow or vanish layer after layer and the exported model tests
    little. Running a few random batches with only the BatchNorm layers in
    train mode sets their statistics to the actual ones; momentum=None makes
    that a plain average over the batches instead of an exponential one that
    would still remember the initial 0/1. Dropout and stochastic depth stay in
    eval mode so that every layer sees what inference will feed it.
    """
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return 0
    for bn in bns:
        bn.reset_running_stats()
        bn.momentum = None
        bn.train()
    gen = torch.Generator().manual_seed(CALIB_SEED)
    shape = (CALIB_BATCH_SIZE,) + tuple(input_shape[1:])
    with torch.no_grad():
        for _ in range(CALIB_BATCHES):
            model(torch.randn(shape, generator=gen))
    model.eval()
    return len(bns)


def export_onnx(model, x, path, opset):
    kwargs = dict(opset_version=opset, do_constant_folding=True,
                  input_names=["input"], output_names=["output"])
    # torch >= 2.5 also has the dynamo-based exporter (the default from 2.9);
    # the TorchScript one is what wrote the shared models.
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        kwargs["dynamo"] = False
    # The TorchScript exporter warns about things that are harmless for a
    # fixed-shape batch-1 export (LSTM batch size, traced shape arithmetic,
    # prim::Constant shape inference); the output is checked against PyTorch
    # anyway, so keep the log readable.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (x,), path, **kwargs)
    onnx.checker.check_model(path)


def ort_dir():
    if os.environ.get("KILN_BENCH_ORT_DIR"):
        return os.environ["KILN_BENCH_ORT_DIR"]
    cache = os.environ.get("KILN_BENCH_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "kiln", "bench")
    return os.path.join(cache, f"onnxruntime-node-{ORT_VERSION}")


def check_ort(ort):
    if not shutil.which("node"):
        sys.exit("export_models: error: node is missing; run scripts/bench.sh once "
                 "(it installs node, npm and onnxruntime-node)")
    if not os.path.isfile(os.path.join(ort, "node_modules", "onnxruntime-node", "package.json")):
        sys.exit(f"export_models: error: onnxruntime-node is not installed in {ort}; "
                 "run scripts/bench.sh once (it installs it there), or set KILN_BENCH_ORT_DIR")


def ort_reference(ort, model_path, data_dir):
    r = subprocess.run(["node", os.path.join(HERE, "ort_reference.js"), "--ort", ort,
                        "--model", model_path, "--inputs", data_dir],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"ONNX Runtime failed: {r.stderr.strip() or r.stdout.strip()}")
    return numpy_helper.to_array(onnx.load_tensor(os.path.join(data_dir, "output_0.pb")))


def publish(tmp, final):
    """Moves the scratch folder `tmp` to `final`, replacing what was there, so
    that an interrupted or failed run never looks like a finished one."""
    if os.path.exists(final):
        shutil.rmtree(final)
    os.rename(tmp, final)


def is_complete(folder):
    return all(os.path.isfile(os.path.join(folder, f)) for f in
               ("model.onnx", "test_data_set_0/input_0.pb", "test_data_set_0/output_0.pb"))


def make_model(name, out, ort):
    """Writes OUT/NAME; returns a one-line result, raises on failure."""
    build, input_shape, opset, _ = MODELS[name]
    # Seed per model, so a model is the same whether or not --only picked others.
    torch.manual_seed(MODEL_SEED)
    model = build().eval()
    n_bn = calibrate_batchnorm(model, input_shape)
    x = torch.randn(input_shape, generator=torch.Generator().manual_seed(DATA_SEED))
    with torch.no_grad():
        expected = model(x).numpy()

    # Work in a scratch folder that replaces OUT/NAME only once everything
    # checked out, so an interrupted or failed run never looks like a done one.
    tmp = tempfile.mkdtemp(prefix=f".{name}.", dir=out)
    try:
        model_path = os.path.join(tmp, "model.onnx")
        data_dir = os.path.join(tmp, "test_data_set_0")
        os.makedirs(data_dir)
        try:
            with torch.no_grad():
                export_onnx(model, x, model_path, opset)
        except Exception as e:  # the exporter raises many kinds; all mean "skip it"
            first_line = (str(e).strip().splitlines() or [""])[0]
            raise RuntimeError(f"export failed with torch {torch.__version__}: "
                               f"{type(e).__name__}: {first_line}")
        onnx.save_tensor(numpy_helper.from_array(x.numpy(), "input"),
                         os.path.join(data_dir, "input_0.pb"))

        got = ort_reference(ort, model_path, data_dir)
        if got.shape != expected.shape:
            raise RuntimeError(f"ONNX Runtime output shape {got.shape} != PyTorch's {expected.shape}")
        diff = float(np.max(np.abs(got.astype(np.float64) - expected)))
        if not np.allclose(got, expected, atol=ATOL, rtol=RTOL):
            raise RuntimeError(f"ONNX Runtime and PyTorch disagree: max abs diff {diff:.3e} "
                               f"(tolerance {ATOL:g} + {RTOL:g}*|ref|)")

        final = os.path.join(out, name)
        publish(tmp, final)
    finally:
        if os.path.exists(tmp):
            shutil.rmtree(tmp)
    n_nodes = len(onnx.load(os.path.join(final, "model.onnx"), load_external_data=False).graph.node)
    return (f"output {'x'.join(map(str, expected.shape))}, {n_nodes} nodes, "
            f"{n_bn} BatchNorms calibrated, torch vs ORT max abs diff {diff:.2e}, "
            f"output max |y| {float(np.max(np.abs(expected))):.3g}")


def main():
    default_out = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                               "kiln", "models")
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0] + "\n\nModels:\n" +
        "\n".join(f"  {n:20} {' x '.join(map(str, s))}: {d}" for n, (_, s, _, d) in MODELS.items()),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", metavar="DIR", default=default_out,
                    help="folder to write NAME/ folders into (default: $XDG_CACHE_HOME/kiln/models "
                         "or ~/.cache/kiln/models)")
    ap.add_argument("--only", metavar="NAMES", help="comma-separated model names (default: all)")
    ap.add_argument("--force", action="store_true", help="write models again even if they exist")
    args = ap.parse_args()

    names = list(MODELS)
    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in names if n not in MODELS]
        if unknown:
            ap.error(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(MODELS)}")

    ort = ort_dir()
    check_ort(ort)
    os.makedirs(args.out, exist_ok=True)
    log(f"export_models: torch {torch.__version__}, torchvision {torchvision.__version__}, "
        f"onnx {onnx.__version__}, ONNX Runtime from {ort}; writing into {args.out}")

    failed = []
    for name in names:
        folder = os.path.join(args.out, name)
        if is_complete(folder) and not args.force:
            log(f"{name}: exists, skipped (--force writes it again)")
            continue
        log(f"{name}: exporting ...")
        try:
            log(f"{name}: ok: {make_model(name, args.out, ort)}")
        except Exception as e:
            log(f"{name}: SKIPPED: {e}")
            failed.append(name)

    if failed:
        log(f"export_models: {len(failed)} of {len(names)} failed: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
