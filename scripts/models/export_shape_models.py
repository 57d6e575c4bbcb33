#!/usr/bin/env python3
"""Exports real networks whose shapes are computed inside the graph, for the
"every exported graph compiles" work (shape arithmetic, empty tensors, If).

    /usr/bin/python3 scripts/models/export_shape_models.py [--out DIR] [--only NAMES]
                                                            [--opsets 13,17] [--force]

Each model is exported with dynamic axes, once per opset, to
OUT/NAME-opsetK/ in the ONNX backend-test layout, with two data sets of
different shapes (test_data_set_0 and _1: input_J.pb in graph-input order,
output_K.pb from ONNX Runtime, one thread). A reference is kept only if ONNX
Runtime agrees with PyTorch on it (1e-3 + 1e-3*|ref|; for detection models
on the number of detections too), except where a model's spec names an
opset whose graph rounds differently from PyTorch (torch_disagrees; the
summary line says so).

Weights are random with a fixed seed (nothing can be downloaded); BatchNorm
statistics are calibrated as in export_models.py. OUT defaults to
$XDG_CACHE_HOME/kiln/shape-models. Check Kiln on one with

    build/bin/kiln-run OUT/NAME/model.onnx --inputs OUT/NAME/test_data_set_1 \\
        --check OUT/NAME/test_data_set_1

Needs Debian's python3-torch, python3-torchvision, python3-onnx and
onnxruntime-node (scripts/bench.sh installs it).
"""

import argparse
import math
import os
import shutil
import sys
import tempfile
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import export_models as em  # noqa: E402  (checks the imports and says what to install)

np, onnx, numpy_helper, torch, nn, torchvision = (em.np, em.onnx, em.numpy_helper, em.torch,
                                                  em.nn, em.torchvision)
F = torch.nn.functional


# ---------------------------------------------------------------------------
# Wrappers: the exporter wants tensors in and tensors out.

class FirstOutput(nn.Module):
    """Segmentation models return {"out": ..., "aux": ...}; keep "out"."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, x):
        return self.m(x)["out"]


class Detector(nn.Module):
    """A torchvision detector on one image (3xHxW): boxes, scores, labels
    (and whatever else `keys` names, such as a keypoint head's)."""

    def __init__(self, m, keys=("boxes", "scores", "labels")):
        super().__init__()
        self.m = m
        self.keys = keys

    def forward(self, x):
        out = self.m([x])[0]
        return tuple(out[k] for k in self.keys)


class Gpt2Decoder(nn.Module):
    """A GPT-2-style decoder step with a KV cache: input_ids [B, T] and, per
    layer, past_key/past_value [B, H, P, D]; returns logits [B, T, V] and
    present_key/present_value [B, H, P+T, D]. Positions start at P (the
    past length read from the cache's shape) and the causal mask is offset by
    P, so the shape arithmetic is the one real exported decoders have."""

    def __init__(self, vocab=96, d=64, heads=4, layers=2, max_pos=128, hf_mask=False,
                 last_token=False):
        super().__init__()
        self.h, self.d, self.layers = heads, d, layers
        # last_token: the logits of the last position only, x[:, -1:] as
        # generation exports write it: a Slice from -1 to INT64_MAX along
        # the new tokens' dim, known only at run time.
        self.last_token = last_token
        # hf_mask: the causal mask sliced from a [1, 1, max_pos, max_pos]
        # buffer as Hugging Face's GPT-2 does (bias[:, :, total - t : total,
        # :total]): Slices whose bounds come from the cache's and the input's
        # shapes, not a mask computed from Range.
        self.hf_mask = hf_mask
        if hf_mask:
            self.register_buffer("bias", torch.tril(torch.ones(max_pos, max_pos, dtype=torch.bool))
                                 .view(1, 1, max_pos, max_pos))
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(max_pos, d)
        self.ln1 = nn.ModuleList(nn.LayerNorm(d) for _ in range(layers))
        self.qkv = nn.ModuleList(nn.Linear(d, 3 * d) for _ in range(layers))
        self.proj = nn.ModuleList(nn.Linear(d, d) for _ in range(layers))
        self.ln2 = nn.ModuleList(nn.LayerNorm(d) for _ in range(layers))
        self.fc = nn.ModuleList(nn.Linear(d, 4 * d) for _ in range(layers))
        self.fc2 = nn.ModuleList(nn.Linear(4 * d, d) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, input_ids, *past):
        b, t = input_ids.shape
        p = past[0].shape[2]
        pos = torch.arange(p, p + t, dtype=torch.long).unsqueeze(0)
        x = self.wte(input_ids) + self.wpe(pos)
        hd = self.d // self.h
        presents = []
        for i in range(self.layers):
            q, k, v = self.qkv[i](self.ln1[i](x)).split(self.d, dim=2)
            q = q.view(b, t, self.h, hd).transpose(1, 2)
            k = torch.cat([past[2 * i], k.view(b, t, self.h, hd).transpose(1, 2)], dim=2)
            v = torch.cat([past[2 * i + 1], v.view(b, t, self.h, hd).transpose(1, 2)], dim=2)
            presents += [k, v]
            att = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
            total = k.shape[2]
            if self.hf_mask:
                causal = self.bias[:, :, total - t:total, :total]
                att = torch.where(causal, att, torch.tensor(float("-inf")))
            else:
                rows = torch.arange(t).unsqueeze(1) + (total - t)
                cols = torch.arange(total).unsqueeze(0)
                att = att.masked_fill(cols > rows, float("-inf"))
            y = (att.softmax(-1) @ v).transpose(1, 2).reshape(b, t, self.d)
            x = x + self.proj[i](y)
            x = x + self.fc2[i](F.gelu(self.fc[i](self.ln2[i](x))))
        if self.last_token:
            x = x[:, -1:, :]
        return (self.head(self.ln_f(x)), *presents)


class BiLstmTagger(nn.Module):
    def __init__(self, vocab=50, emb=32, hidden=48, tags=9):
        super().__init__()
        self.emb = nn.Embedding(vocab, emb)
        self.rnn = nn.LSTM(emb, hidden, batch_first=True, bidirectional=True)
        self.out = nn.Linear(2 * hidden, tags)

    def forward(self, tokens):
        return self.out(self.rnn(self.emb(tokens))[0])


class GruLanguageModel(nn.Module):
    def __init__(self, vocab=60, emb=32, hidden=64):
        super().__init__()
        self.emb = nn.Embedding(vocab, emb)
        self.rnn = nn.GRU(emb, hidden, num_layers=2, batch_first=True)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, tokens):
        y, h = self.rnn(self.emb(tokens))
        return self.out(y), h


class TransformerLanguageModel(nn.Module):
    """PyTorch's own nn.TransformerEncoder (pre-norm, GELU, batch first) as a
    causal language model: its attention comes out of the exporter's
    nn.MultiheadAttention, not a hand-written one like Gpt2Decoder's."""

    def __init__(self, vocab=80, d=64, heads=4, layers=2, max_len=128):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(max_len, d) * 0.1)
        layer = nn.TransformerEncoderLayer(d, heads, dim_feedforward=4 * d, dropout=0.0,
                                           activation="gelu", batch_first=True, norm_first=True)
        self.body = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.out = nn.Linear(d, vocab)

    def forward(self, tokens):
        n = tokens.shape[1]
        # Without triu, which opset 13 lacks: -inf above the diagonal.
        pos = torch.arange(n)
        causal = torch.zeros(n, n).masked_fill(pos[None, :] > pos[:, None], float("-inf"))
        x = self.emb(tokens) + self.pos[:n]
        return self.out(self.body(x, mask=causal))


# ---------------------------------------------------------------------------
# The models: builder, input specs per data set, names, dynamic axes.
# An input spec is (kind, shape): "image" N(0, 1) floats, "tokens" int64 in
# [0, vocab), "zeros"/"randn" floats.

def vision(name, **kw):
    return lambda: getattr(torchvision.models, name)(weights=None, **kw)


def segmentation(name):
    return lambda: FirstOutput(getattr(torchvision.models.segmentation, name)(
        weights=None, weights_backbone=None))


def detection(name, cls_scale, keys=("boxes", "scores", "labels"), **kw):
    def build():
        m = getattr(torchvision.models.detection, name)(weights=None, weights_backbone=None, **kw)
        # Freshly initialised class logits are tiny (N(0, 0.01) weights), so
        # every anchor scores about 1/num_classes: thousands of exact ties
        # that each implementation orders its own way (ONNX Runtime's boxes
        # then differ from PyTorch's by whole images). Scaled up, the scores
        # spread and the detections, their order and their number are a
        # property of the model, not of the sort. SSDlite's head has several
        # layers, each scaled, so a small factor spreads it already (a large
        # one saturates every score at 1.0: ties again).
        with torch.no_grad():
            for pname, p in m.named_parameters():
                if any(k in pname for k in ("classification_head", "cls_logits", "cls_score")):
                    p.mul_(cls_scale)
        return Detector(m, keys)
    return build


def gpt2_sets():
    layers, heads, hd = 2, 4, 16
    def one(b, t, p):
        return [("tokens", (b, t), 96)] + [("randn", (b, heads, p, hd))] * (2 * layers)
    return [one(1, 5, 0), one(2, 1, 7)]


def gpt2_entry(build):
    """A Gpt2Decoder's entry: two layers' caches, batch, past and new dynamic."""
    return dict(
        build=build, sets=gpt2_sets(),
        names=["input_ids", "past_key_0", "past_value_0", "past_key_1", "past_value_1"],
        outputs=["logits", "present_key_0", "present_value_0", "present_key_1",
                 "present_value_1"],
        dyn=dict({"input_ids": {0: "batch", 1: "new"}},
                 **{f"past_{kv}_{i}": {0: "batch", 2: "past"}
                    for i in range(2) for kv in ("key", "value")}),
        out_dyn=dict({"logits": {0: "batch", 1: "new"}},
                     **{f"present_{kv}_{i}": {0: "batch", 2: "total"}
                        for i in range(2) for kv in ("key", "value")}))


IMG = dict(names=["input"], dyn={"input": {0: "batch"}})
HW = dict(names=["input"], dyn={"input": {0: "batch", 2: "height", 3: "width"}})

MODELS = {
    # A plain CNN whose batch varies (1 and 3): one compile for every batch
    # (convolutions, pooling, residual adds, the classifier).
    "resnet18": dict(build=vision("resnet18"), sets=[[("image", (1, 3, 224, 224))],
                                                    [("image", (3, 3, 224, 224))]], **IMG),
    "vit_b_16": dict(build=vision("vit_b_16"), sets=[[("image", (1, 3, 224, 224))],
                                                    [("image", (2, 3, 224, 224))]], **IMG),
    # The tracer bakes the shifted-window mask of Swin for the traced image
    # size (ONNX Runtime then disagrees with PyTorch at 192x256), so only the
    # batch varies.
    "swin_t": dict(build=vision("swin_t"), sets=[[("image", (1, 3, 224, 224))],
                                                [("image", (2, 3, 224, 224))]], **IMG),
    "maxvit_t": dict(build=vision("maxvit_t"), sets=[[("image", (1, 3, 224, 224))],
                                                    [("image", (2, 3, 224, 224))]], **IMG),
    # Channel shuffles (reshape, transpose, reshape over the batch) and
    # grouped convolutions with squeeze-and-excitation, at two batches.
    "shufflenet_v2_x1_0": dict(build=vision("shufflenet_v2_x1_0"),
                               sets=[[("image", (1, 3, 224, 224))],
                                     [("image", (3, 3, 224, 224))]], **IMG),
    "regnet_y_400mf": dict(build=vision("regnet_y_400mf"),
                           sets=[[("image", (1, 3, 224, 224))], [("image", (3, 3, 224, 224))]],
                           **IMG),
    # Dense blocks (each layer concatenates every earlier feature map) and
    # MobileNet-V3's hard-swish squeeze-and-excitation, at two batches.
    "densenet121": dict(build=vision("densenet121"),
                        sets=[[("image", (1, 3, 224, 224))], [("image", (3, 3, 224, 224))]],
                        **IMG),
    "mobilenet_v3_small": dict(build=vision("mobilenet_v3_small"),
                               sets=[[("image", (1, 3, 224, 224))],
                                     [("image", (3, 3, 224, 224))]], **IMG),
    # Squeeze-and-excitation blocks and SiLU at two image sizes.
    "efficientnet_b0": dict(build=vision("efficientnet_b0"),
                            sets=[[("image", (1, 3, 224, 224))], [("image", (1, 3, 192, 256))]],
                            **HW),
    "lraspp_mobilenet_v3_large": dict(build=segmentation("lraspp_mobilenet_v3_large"),
                                      sets=[[("image", (1, 3, 224, 224))],
                                            [("image", (1, 3, 256, 320))]], **HW),
    "deeplabv3_mobilenet_v3_large": dict(build=segmentation("deeplabv3_mobilenet_v3_large"),
                                         sets=[[("image", (1, 3, 224, 224))],
                                               [("image", (1, 3, 256, 320))]], **HW),
    "fcn_resnet50": dict(build=segmentation("fcn_resnet50"),
                         sets=[[("image", (1, 3, 224, 224))], [("image", (1, 3, 192, 256))]],
                         **HW),
    "ssdlite320_mobilenet_v3_large": dict(
        build=detection("ssdlite320_mobilenet_v3_large", 2.0, detections_per_img=25, score_thresh=0.5),
        sets=[[("image", (3, 320, 320))], [("image", (3, 240, 300))]],
        names=["image"], outputs=["boxes", "scores", "labels"],
        dyn={"image": {1: "height", 2: "width"}}, detection=True),
    "fasterrcnn_mobilenet_v3_large_320_fpn": dict(
        # A score threshold that the first image's detections pass in their
        # dozens and the second's in a handful: the two data sets differ in
        # the number of detections, as the checks need.
        build=detection("fasterrcnn_mobilenet_v3_large_320_fpn", 30.0, box_detections_per_img=50,
                        box_score_thresh=0.3),
        sets=[[("image", (3, 320, 320))], [("image", (3, 240, 300))]],
        names=["image"], outputs=["boxes", "scores", "labels"],
        dyn={"image": {1: "height", 2: "width"}}, detection=True,
        # At opset 16 and later, torch 1.13's exporter writes RoiAlign-16
        # without coordinate_transformation_mode, whose default (half_pixel)
        # shifts the sampling grid by half a pixel against torchvision's
        # aligned=False (output_half_pixel): the graph detects other boxes (2
        # where PyTorch has 6 on the second image). ONNX Runtime's outputs,
        # which follow the graph, are kept as its references.
        torch_disagrees={17: "the exported RoiAlign-16 has the default half_pixel mode, "
                             "torchvision's aligned=False is output_half_pixel"}),
    # Keypoint R-CNN at 320 pixels: Faster R-CNN's box head on a ResNet-50
    # FPN, plus a keypoint head whose heatmaps become keypoints in a Loop
    # over the detections.
    "keypointrcnn_resnet50_fpn": dict(
        build=detection("keypointrcnn_resnet50_fpn", 30.0,
                        keys=("boxes", "scores", "labels", "keypoints", "keypoints_scores"),
                        min_size=320, max_size=320, box_detections_per_img=20,
                        # Its two classes' scaled logits leave the person
                        # scores small (0.023, 0.019 and 0.006 on the first
                        # image, at most 0.0003 on the second): this
                        # threshold keeps three detections on the first
                        # image, so that the heatmap Loop runs, and none on
                        # the second.
                        box_score_thresh=0.002),
        sets=[[("image", (3, 320, 320))], [("image", (3, 240, 300))]],
        # The first image of the default seed (1) has a keypoint whose two
        # heatmap peaks differ by 2.3e-4 (KEYPOINT_PEAK_MARGIN): seed 6's
        # smallest gap is 1.2e-3.
        seeds=[6, 2],
        names=["image"],
        outputs=["boxes", "scores", "labels", "keypoints", "keypoints_scores"],
        dyn={"image": {1: "height", 2: "width"}}, detection=True,
        # As Faster R-CNN's: at opset 17 the graph keeps 5 of PyTorch's 6
        # detections on the first image.
        torch_disagrees={17: "the exported RoiAlign-16 has the default half_pixel mode, "
                             "torchvision's aligned=False is output_half_pixel"}),
    "gpt2_kv": gpt2_entry(Gpt2Decoder),
    # The same decoder with Hugging Face GPT-2's causal mask: a slice of a
    # 128 x 128 buffer whose bounds follow from the past and new lengths.
    "gpt2_hf_mask": gpt2_entry(lambda: Gpt2Decoder(hf_mask=True)),
    # The logits of the last position only (x[:, -1:]): a Slice with
    # constant bounds along the run-time dim of new tokens.
    "gpt2_last_token": dict(gpt2_entry(lambda: Gpt2Decoder(last_token=True)),
                            out_dyn=dict(gpt2_entry(Gpt2Decoder)["out_dyn"],
                                         logits={0: "batch"})),
    "bilstm_tagger": dict(build=BiLstmTagger,
                          sets=[[("tokens", (1, 40), 50)], [("tokens", (3, 9), 50)]],
                          names=["tokens"], outputs=["tags"],
                          dyn={"tokens": {0: "batch", 1: "length"}},
                          out_dyn={"tags": {0: "batch", 1: "length"}}),
    # nn.TransformerEncoder with a causal mask built from the run-time
    # length, at two batches and lengths.
    "transformer_lm": dict(build=TransformerLanguageModel,
                           sets=[[("tokens", (1, 23), 80)], [("tokens", (3, 70), 80)]],
                           names=["tokens"], outputs=["logits"],
                           dyn={"tokens": {0: "batch", 1: "length"}},
                           out_dyn={"logits": {0: "batch", 1: "length"}}),
    "gru_lm": dict(build=GruLanguageModel,
                   sets=[[("tokens", (1, 17), 60)], [("tokens", (4, 6), 60)]],
                   names=["tokens"], outputs=["logits", "state"],
                   dyn={"tokens": {0: "batch", 1: "length"}},
                   out_dyn={"logits": {0: "batch", 1: "length"}, "state": {1: "batch"}}),
}


KEYPOINT_PEAK_MARGIN = 1e-3


class KeypointPeakGaps:
    """While active, records for each keypoint heatmap that torchvision's
    heatmaps_to_keypoints decodes (resized to its box, bicubic, as that
    function does) the gap between its highest value and its next highest."""

    def __init__(self, active):
        self.active = active
        self.gaps = []

    def __enter__(self):
        if not self.active:
            return self
        from torchvision.models.detection import roi_heads
        self.module, self.original = roi_heads, roi_heads.heatmaps_to_keypoints

        def recording(maps, rois):
            widths = (rois[:, 2] - rois[:, 0]).clamp(min=1).ceil()
            heights = (rois[:, 3] - rois[:, 1]).clamp(min=1).ceil()
            for i in range(len(rois)):
                m = F.interpolate(maps[i][:, None], size=(int(heights[i]), int(widths[i])),
                                  mode="bicubic", align_corners=False)[:, 0]
                top = m.reshape(m.shape[0], -1).topk(2, dim=1).values
                self.gaps.extend((top[:, 0] - top[:, 1]).tolist())
            return self.original(maps, rois)

        roi_heads.heatmaps_to_keypoints = recording
        return self

    def __exit__(self, *exc):
        if self.active:
            self.module.heatmaps_to_keypoints = self.original
        return False

    def clear(self):
        self.gaps = []

    def smallest(self):
        return min(self.gaps) if self.gaps else None


def make_inputs(specs, seed):
    gen = torch.Generator().manual_seed(seed)
    out = []
    for spec in specs:
        kind, shape = spec[0], spec[1]
        if kind == "tokens":
            out.append(torch.randint(0, spec[2], shape, generator=gen, dtype=torch.long))
        else:
            out.append(torch.randn(shape, generator=gen))
    return out


def as_tuple(y):
    return tuple(y) if isinstance(y, (tuple, list)) else (y,)


def close(got, want):
    if got.shape != want.shape:
        return False, f"shape {got.shape} != PyTorch's {want.shape}"
    if got.size == 0:
        return True, "empty"
    if got.dtype.kind in "iub":
        ok = np.array_equal(got, want)
        return ok, "equal" if ok else "integers differ"
    diff = float(np.max(np.abs(got.astype(np.float64) - want)))
    ok = np.allclose(got, want, atol=em.ATOL, rtol=em.RTOL)
    return ok, f"max abs diff {diff:.2e}"


def make_model(name, opset, out, ort):
    spec = MODELS[name]
    torch.manual_seed(em.MODEL_SEED)
    model = spec["build"]().eval()
    # A classifier initialised to zeros (torchvision's ViT head) makes every
    # reference output 0, which any code matches: such weight matrices are
    # drawn afresh.
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2 and not p.any():
                p.normal_(0.0, 0.02)
    seeds = spec.get("seeds", [em.DATA_SEED + i for i in range(len(spec["sets"]))])
    sets = [make_inputs(s, seed) for s, seed in zip(spec["sets"], seeds)]
    first = spec["sets"][0][0]
    if first[0] == "image":
        # Calibrate BatchNorm on batches shaped like the first data set.
        shape = first[1] if len(first[1]) == 4 else (1,) + tuple(first[1])
        em.calibrate_batchnorm(model if not spec.get("detection") else _Batched(model), shape)
        model.eval()
    expected, peak_gaps = [], []
    with torch.no_grad(), KeypointPeakGaps(active="keypoints" in spec.get("outputs", [])) as gaps:
        for xs in sets:
            gaps.clear()
            expected.append([y.numpy() for y in as_tuple(model(*xs))])
            peak_gaps.append(gaps.smallest())

    outputs = spec.get("outputs", ["output"])
    dyn = dict(spec["dyn"])
    dyn.update(spec.get("out_dyn", {}))
    tmp = tempfile.mkdtemp(prefix=f".{name}.", dir=out)
    final = os.path.join(out, f"{name}-opset{opset}")
    try:
        path = os.path.join(tmp, "model.onnx")
        kwargs = dict(opset_version=opset, do_constant_folding=True, input_names=spec["names"],
                      output_names=outputs, dynamic_axes=dyn)
        if "dynamo" in em.inspect.signature(torch.onnx.export).parameters:
            kwargs["dynamo"] = False
        try:
            # Not under no_grad: with gradients off, torch 1.13's attention
            # takes a fused fast path that the exporter cannot write.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch.onnx.export(model, tuple(sets[0]), path, **kwargs)
            onnx.checker.check_model(path)
        except Exception as e:
            first_line = (str(e).strip().splitlines() or [""])[0]
            raise RuntimeError(f"export failed with torch {torch.__version__}: "
                               f"{type(e).__name__}: {first_line}")
        notes = []
        if spec.get("detection"):
            # Two detections whose scores differ by float noise may come out
            # in either order from two implementations: refuse such data.
            for i, want in enumerate(expected):
                s = np.sort(want[1])[::-1]
                gaps = s[:-1] - s[1:]
                if len(gaps) and gaps.min() < 1e-5 * max(1.0, float(s[0])):
                    raise RuntimeError(f"data set {i}: scores {gaps.argmin()} and "
                                       f"{gaps.argmin() + 1} tie within 1e-5; change the data")
            # A keypoint is the arg-max of its resized heatmap: where the two
            # highest values differ by float32 noise, another implementation
            # may pick the other one, a keypoint pixels away (Keypoint
            # R-CNN's heatmaps from a ResNet-50 FPN differ by ~1e-4 between
            # Kiln and ONNX Runtime; one peak pair 2.3e-4 apart on the
            # first data set of seed 1 came out 7.7 pixels apart).
            for i, gap in enumerate(peak_gaps):
                if gap is not None and gap < KEYPOINT_PEAK_MARGIN:
                    raise RuntimeError(f"data set {i}: a keypoint heatmap's two highest values "
                                       f"differ by {gap:.2e} only (< {KEYPOINT_PEAK_MARGIN}); "
                                       "change the data")
        for i, (xs, want) in enumerate(zip(sets, expected)):
            d = os.path.join(tmp, f"test_data_set_{i}")
            os.makedirs(d)
            for j, x in enumerate(xs):
                onnx.save_tensor(numpy_helper.from_array(x.numpy(), spec["names"][j]),
                                 os.path.join(d, f"input_{j}.pb"))
            em.ort_reference(ort, path, d)
            known = spec.get("torch_disagrees", {}).get(opset)
            for k, w in enumerate(want):
                got = numpy_helper.to_array(onnx.load_tensor(os.path.join(d, f"output_{k}.pb")))
                ok, what = close(got, w)
                if not ok and known:
                    notes.append(f"set {i} output {k}: ONNX Runtime's, not PyTorch's ({what}; "
                                 f"{known})")
                elif not ok:
                    raise RuntimeError(f"data set {i} output {k}: ONNX Runtime and PyTorch "
                                       f"disagree: {what}")
            notes.append("x".join("x".join(map(str, x.shape)) for x in xs[:1]) + " -> " +
                         ", ".join("x".join(map(str, w.shape)) for w in want))
        em.publish(tmp, final)
    finally:
        if os.path.exists(tmp):
            shutil.rmtree(tmp)
    n = len(onnx.load(os.path.join(final, "model.onnx"), load_external_data=False).graph.node)
    return f"{n} nodes; " + "; ".join(notes)


class _Batched(nn.Module):
    """Calibration feeds batches; a detector takes one 3-D image at a time."""

    def __init__(self, det):
        super().__init__()
        self.det = det

    def forward(self, x):
        self.det.m(list(x))

    def modules(self):
        return self.det.modules()

    def eval(self):
        self.det.eval()
        return self


def main():
    default_out = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                               "kiln", "shape-models")
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] + "\n\nModels: " +
                                 ", ".join(MODELS))
    ap.add_argument("--out", metavar="DIR", default=default_out)
    ap.add_argument("--only", metavar="NAMES", help="comma-separated model names (default: all)")
    ap.add_argument("--opsets", default="13,17", help="comma-separated opsets (default: 13,17)")
    ap.add_argument("--force", action="store_true", help="write models again even if they exist")
    args = ap.parse_args()
    names = [n.strip() for n in args.only.split(",")] if args.only else list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        ap.error(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(MODELS)}")
    opsets = [int(o) for o in args.opsets.split(",")]
    ort = em.ort_dir()
    em.check_ort(ort)
    os.makedirs(args.out, exist_ok=True)
    failed = []
    for name in names:
        for opset in opsets:
            tag = f"{name}-opset{opset}"
            folder = os.path.join(args.out, tag)
            if os.path.isfile(os.path.join(folder, "test_data_set_1", "output_0.pb")) and \
                    not args.force:
                em.log(f"{tag}: exists, skipped")
                continue
            em.log(f"{tag}: exporting ...")
            try:
                em.log(f"{tag}: ok: {make_model(name, opset, args.out, ort)}")
            except Exception as e:
                em.log(f"{tag}: SKIPPED: {e}")
                failed.append(tag)
    if failed:
        em.log(f"export_shape_models: {len(failed)} failed: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
