"""Static int8 quantization of a float ONNX model, in the QDQ layout that
ONNX Runtime's own quantizer (quantize_static) writes:

    import kiln.quantize
    kiln.quantize.quantize("model.onnx", "model.int8.onnx", calibration)

or `python3 -m kiln quantize MODEL.onnx -o OUT.onnx --calibration DIR`
(`kiln-quantize` once installed). `calibration` is an iterable of
{input name: NumPy array} feeds, or a folder holding test_data_set_*
folders of input_J.pb files (ONNX's test layout).

What it writes, for every Conv, Gemm and MatMul whose weight is a constant:
- its activation input and its output (after a Relu or Clip that is the
  output's only reader, which the quantized range then covers) through
  QuantizeLinear -> DequantizeLinear, u8 with a zero point (asymmetric;
  the range always includes 0 so that 0 is exact);
- its weight as s8 per output channel, symmetric (zero point 0, scale
  max|w| / 127, values in [-127, 127]), through DequantizeLinear with the
  channel axis;
- its bias as i32 in the scale input scale x weight scale (zero point 0).
This is the form Kiln's importer runs on its int8 kernels (QDQ chains
around a convolution become one integer convolution) and ONNX Runtime on
its integer kernels. Other ops stay in float between DequantizeLinear and
QuantizeLinear. With quant_format="qoperator" the same model is written in
ONNX Runtime's QOperator form instead (QLinearConv, QLinearMatMul and the
com.microsoft QLinear ops; kiln.qoperator says which).

The ranges come from running the float model on the calibration feeds with
Kiln: the minimum and maximum over all feeds ("minmax"), or the mean over
feeds of each feed's `percentile` and 100 - `percentile` percentiles
("percentile": ignores rare outliers; ONNX Runtime merges histograms
instead, so its ranges differ slightly).
"""

import glob
import os

import numpy as np

__all__ = ["quantize", "quantize_dynamic", "QuantizeError"]


class QuantizeError(Exception):
    """A model or calibration set that cannot be quantized (the message says why)."""


def _onnx():
    try:
        import onnx  # noqa: F401
        from onnx import helper, numpy_helper, shape_inference  # noqa: F401
    except ImportError as e:
        raise QuantizeError("kiln.quantize needs the onnx Python package "
                            "(Debian: python3-onnx)") from e
    return onnx


def _calibration_feeds(calibration, input_names):
    """Feeds from an iterable of dicts or from a folder of test_data_set_* folders."""
    from . import read_tensor
    if isinstance(calibration, (str, os.PathLike)):
        folders = sorted(glob.glob(os.path.join(os.fspath(calibration), "test_data_set_*")))
        if not folders:
            raise QuantizeError(f"no test_data_set_* folders in '{os.fspath(calibration)}'")
        for folder in folders:
            feed = {}
            for j, name in enumerate(input_names):
                path = os.path.join(folder, f"input_{j}.pb")
                if not os.path.exists(path):
                    raise QuantizeError(f"'{path}' is missing (input '{name}')")
                feed[name] = np.asarray(read_tensor(path))
            yield feed
    else:
        for feed in calibration:
            yield {k: np.asarray(v) for k, v in feed.items()}


def _drop_unread_initializers(graph):
    """Removes the initializers no node of `graph` reads."""
    read = {i for node in graph.node for i in node.input}
    kept = [i for i in graph.initializer if i.name in read]
    del graph.initializer[:]
    graph.initializer.extend(kept)


def _fold_initializer_identities(model):
    """Readers of Identity(initializer) read the initializer itself
    (PyTorch's exporter writes one Identity per duplicate weight or bias:
    EfficientNet's squeeze-excitation biases), and those Identity nodes go."""
    graph = model.graph
    inits = {i.name for i in graph.initializer}
    outputs = {o.name for o in graph.output}

    def subgraph_reads(g):
        # Names read inside If/Loop/Scan bodies (outer-scope references).
        names = set()
        for n in g.node:
            for a in n.attribute:
                for sub in list(a.graphs) + ([a.g] if a.HasField("g") else []):
                    names |= {i for m in sub.node for i in m.input} | subgraph_reads(sub)
        return names
    nested = subgraph_reads(graph)
    alias = {n.output[0]: n.input[0] for n in graph.node
             if n.op_type == "Identity" and n.domain in ("", "ai.onnx") and
             n.input[0] in inits and n.output[0] not in outputs and n.output[0] not in nested}
    if not alias:
        return
    kept = [n for n in graph.node if not (n.op_type == "Identity" and n.output[0] in alias)]
    for n in kept:
        for k, i in enumerate(n.input):
            if i in alias:
                n.input[k] = alias[i]
    del graph.node[:]
    graph.node.extend(kept)


def _quantizable(model, onnx):
    """(node, weight input index, channel axis, bias input index or None) for
    each Conv/Gemm/MatMul with a constant float weight."""
    inits = {i.name: i for i in model.graph.initializer}
    found = []
    for node in model.graph.node:
        if node.domain not in ("", "ai.onnx"):
            continue
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        if node.op_type == "Conv" and len(node.input) >= 2 and node.input[1] in inits:
            if len(node.input) > 2 and node.input[2] and node.input[2] not in inits:
                continue  # a bias computed at run time
            found.append((node, 1, 0, 2 if len(node.input) > 2 and node.input[2] else None))
        elif node.op_type == "Gemm" and len(node.input) >= 2 and node.input[1] in inits:
            if attrs.get("transA", 0):
                continue
            if attrs.get("alpha", 1.0) != 1.0 or attrs.get("beta", 1.0) != 1.0:
                continue
            bias = 2 if len(node.input) > 2 and node.input[2] in inits else None
            found.append((node, 1, 0 if attrs.get("transB", 0) else 1, bias))
        elif node.op_type == "MatMul" and node.input[1] in inits and \
                len(inits[node.input[1]].dims) == 2:
            found.append((node, 1, 1, None))
    float_type = onnx.TensorProto.FLOAT
    return [f for f in found if inits[f[0].input[f[1]]].data_type == float_type]


def _activation_tensors(model, nodes):
    """The activation inputs of `nodes` and their outputs (a Relu's or
    Clip's output where one is the output's only reader: ReLU6's range is
    then the quantized one, and the importer drops the Clip)."""
    readers = {}
    for node in model.graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    graph_outputs = {o.name for o in model.graph.output}
    tensors = []
    for node, _, _, _ in nodes:
        tensors.append(node.input[0])
        out = node.output[0]
        # Relu, Clip, or both (PyTorch 1.13 writes ReLU6 as Relu then Clip).
        for _ in range(2):
            after = readers.get(out, [])
            if len(after) == 1 and after[0].op_type in ("Relu", "Clip") and \
                    out not in graph_outputs:
                out = after[0].output[0]
        tensors.append(out)
    return list(dict.fromkeys(tensors))


def _ranges(model_path, model, tensors, calibration, method, percentile, threads, onnx):
    """{tensor: (lo, hi)} over the calibration feeds, from Kiln's own runs of
    the float model with those tensors as extra outputs."""
    from . import compile as kiln_compile
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    present = {o.name for o in probe.graph.output}
    # Graph outputs need a type with a shape: ONNX's shape inference gives
    # the intermediate tensors' (dims it cannot infer stay unknown).
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
        known = {v.name: v for v in list(inferred.graph.value_info) + list(inferred.graph.input)}
    except Exception:
        known = {}
    for name in tensors:
        if name in present:
            continue
        if name in known and known[name].type.tensor_type.HasField("shape"):
            probe.graph.output.append(known[name])
        else:
            raise QuantizeError(f"the rank of tensor '{name}' is unknown to ONNX's shape "
                                "inference; it cannot be calibrated")
    try:
        compiled = kiln_compile(probe.SerializeToString(), threads=threads, cache=False,
                                base_dir=os.path.dirname(os.path.abspath(model_path)))
    except Exception as e:
        raise QuantizeError(f"Kiln cannot compile the float model to calibrate it: {e}") from e
    init_names = {i.name for i in model.graph.initializer}
    input_names = [i.name for i in model.graph.input if i.name not in init_names]
    out_names = [o.name for o in compiled.outputs]
    lows, highs = {t: [] for t in tensors}, {t: [] for t in tensors}
    count = 0
    for feed in _calibration_feeds(calibration, input_names):
        values = dict(zip(out_names, compiled.run(None, feed)))
        for t in tensors:
            v = np.asarray(values[t], dtype=np.float64).ravel()
            if v.size == 0:
                continue
            if method == "percentile":
                lo, hi = np.percentile(v, [100.0 - percentile, percentile])
            else:
                lo, hi = v.min(), v.max()
            lows[t].append(float(lo))
            highs[t].append(float(hi))
        count += 1
    if count == 0:
        raise QuantizeError("the calibration set is empty")
    ranges = {}
    for t in tensors:
        if not lows[t]:
            ranges[t] = (0.0, 0.0)
        elif method == "percentile":
            ranges[t] = (float(np.mean(lows[t])), float(np.mean(highs[t])))
        else:
            ranges[t] = (min(lows[t]), max(highs[t]))
    return ranges, count


def _fresh_names(graph):
    """A function giving names no value, node input or initializer of
    `graph` has yet (base, base_1, ...), each once."""
    used = {n for node in graph.node for n in list(node.input) + list(node.output)}
    used |= {i.name for i in graph.initializer} | {i.name for i in graph.input}

    def fresh(base):
        name, k = base, 0
        while name in used:
            k += 1
            name = f"{base}_{k}"
        used.add(name)
        return name
    return fresh


def _u8_params(lo, hi):
    """Scale and zero point of an asymmetric u8 range that includes 0."""
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    if not np.isfinite(lo) or not np.isfinite(hi):
        raise QuantizeError(f"a calibration range is not finite: [{lo}, {hi}]")
    scale = (hi - lo) / 255.0
    if scale == 0.0:
        return np.float32(1.0), np.uint8(0)
    zero_point = int(round(-lo / scale))
    return np.float32(scale), np.uint8(min(max(zero_point, 0), 255))


def _s8_per_channel(w, axis):
    """Symmetric per-channel s8 weights: (values, scales)."""
    moved = np.moveaxis(w, axis, 0).reshape(w.shape[axis], -1)
    scales = np.abs(moved).max(axis=1) / 127.0
    scales = np.where(scales == 0.0, 1.0, scales).astype(np.float32)
    shape = [1] * w.ndim
    shape[axis] = -1
    q = np.clip(np.rint(w / scales.reshape(shape)), -127, 127).astype(np.int8)
    return q, scales


def quantize(model_path, output_path, calibration, method="minmax", percentile=99.999,
             threads=0, quant_format="qdq"):
    """Writes a QDQ int8 model of the float model at `model_path` to
    `output_path`; returns a short report (a dict: ops quantized, tensors,
    calibration feeds). `calibration`: an iterable of {input name: array}
    feeds, or a folder of test_data_set_* folders. `method`: "minmax" or
    "percentile" (with `percentile`, e.g. 99.999). `quant_format`: "qdq", or
    "qoperator" (QLinearConv, QLinearMatMul and the com.microsoft QLinear
    ops, as ONNX Runtime's QuantFormat.QOperator; see kiln.qoperator), which
    also quantizes the Add, Mul, Concat, pooling, Sigmoid and LeakyRelu ops
    between quantized ones. Raises QuantizeError."""
    onnx = _onnx()
    from onnx import helper, numpy_helper
    from . import qoperator
    if quant_format not in ("qdq", "qoperator"):
        raise QuantizeError(f"unknown format '{quant_format}' (qdq or qoperator)")
    if method not in ("minmax", "percentile"):
        raise QuantizeError(f"unknown calibration method '{method}' (minmax or percentile)")
    if not 50.0 < percentile <= 100.0:
        raise QuantizeError(f"percentile {percentile} is not in (50, 100]")
    try:
        model = onnx.load(os.fspath(model_path))
    except Exception as e:
        raise QuantizeError(f"cannot read '{os.fspath(model_path)}': {e}") from e
    opset = max([o.version for o in model.opset_import if o.domain in ("", "ai.onnx")] or [0])
    if opset < 13:
        raise QuantizeError(f"the model's opset is {opset}; per-channel DequantizeLinear "
                            "needs 13 or more")
    _fold_initializer_identities(model)
    nodes = _quantizable(model, onnx)
    if not nodes:
        raise QuantizeError("the model has no Conv, Gemm or MatMul with constant float weights")
    tensors = _activation_tensors(model, nodes)
    if quant_format == "qoperator":
        tensors = list(dict.fromkeys(tensors + qoperator.extra_tensors(model, tensors, onnx)))
    ranges, feeds = _ranges(model_path, model, tensors, calibration, method, percentile,
                            threads, onnx)
    params = {t: _u8_params(*ranges[t]) for t in tensors}

    graph = model.graph
    inits = {i.name: i for i in graph.initializer}
    fresh = _fresh_names(graph)

    new_inits, new_nodes = [], []
    # Activations: the producer writes T_prequant; Q and DQ give T back, so
    # every reader (graph outputs included) reads the dequantized value.
    # A graph input cannot be renamed: its readers move to the DQ's output.
    graph_inputs = {i.name for i in graph.input}
    renamed_inputs = {}
    for t in tensors:
        scale, zero_point = params[t]
        s_name, z_name = fresh(t + "_scale"), fresh(t + "_zero_point")
        new_inits += [numpy_helper.from_array(np.array(scale, np.float32), s_name),
                      numpy_helper.from_array(np.array(zero_point, np.uint8), z_name)]
        q_name = fresh(t + "_quantized")
        if t in graph_inputs:
            source, dq_out = t, fresh(t + "_dequantized")
            renamed_inputs[t] = dq_out
        else:
            source, dq_out = fresh(t + "_prequant"), t
            for node in graph.node:
                for k, o in enumerate(node.output):
                    if o == t:
                        node.output[k] = source
        new_nodes.append((source, [
            helper.make_node("QuantizeLinear", [source, s_name, z_name], [q_name],
                             name=fresh(t + "_QuantizeLinear")),
            helper.make_node("DequantizeLinear", [q_name, s_name, z_name], [dq_out],
                             name=fresh(t + "_DequantizeLinear"))]))
    for node in graph.node:
        for k, i in enumerate(node.input):
            if i in renamed_inputs:
                node.input[k] = renamed_inputs[i]

    # Weights and biases: s8 per channel and i32, each through a DQ of its own.
    weight_dq = []
    for node, wi, axis, bi in nodes:
        w = numpy_helper.to_array(inits[node.input[wi]]).astype(np.float32)
        q, scales = _s8_per_channel(w, axis)
        base = node.name or node.output[0]
        wq, ws, wz = fresh(base + "_weight_quantized"), fresh(base + "_weight_scale"), \
            fresh(base + "_weight_zero_point")
        new_inits += [numpy_helper.from_array(q, wq), numpy_helper.from_array(scales, ws),
                      numpy_helper.from_array(np.zeros(scales.shape, np.int8), wz)]
        w_out = fresh(base + "_weight_dequantized")
        weight_dq.append(helper.make_node("DequantizeLinear", [wq, ws, wz], [w_out], axis=axis,
                                          name=fresh(base + "_weight_DequantizeLinear")))
        node.input[wi] = w_out
        if bi is not None:
            b = numpy_helper.to_array(inits[node.input[bi]]).astype(np.float64).ravel()
            x_name = {v: k for k, v in renamed_inputs.items()}.get(node.input[0], node.input[0])
            x_scale = float(params[x_name][0])
            bias_scale = (x_scale * scales.astype(np.float64))
            if b.size != bias_scale.size:
                continue  # a broadcast Gemm bias stays float
            bq = np.clip(np.rint(b / bias_scale), -2**31, 2**31 - 1).astype(np.int32)
            bqn, bsn, bzn = fresh(base + "_bias_quantized"), fresh(base + "_bias_scale"), \
                fresh(base + "_bias_zero_point")
            new_inits += [numpy_helper.from_array(bq, bqn),
                          numpy_helper.from_array(bias_scale.astype(np.float32), bsn),
                          numpy_helper.from_array(np.zeros(bq.shape, np.int32), bzn)]
            b_out = fresh(base + "_bias_dequantized")
            weight_dq.append(helper.make_node("DequantizeLinear", [bqn, bsn, bzn], [b_out],
                                              axis=0, name=fresh(base + "_bias_DequantizeLinear")))
            node.input[bi] = b_out

    # Topological order: weight DQs first, then each activation's Q/DQ right
    # after its producer (graph inputs' first).
    ordered = list(weight_dq)
    pending = {source: qdq for source, qdq in new_nodes}
    for source in list(pending):
        if source in graph_inputs:
            ordered += pending.pop(source)
    for node in graph.node:
        ordered.append(node)
        for o in node.output:
            if o in pending:
                ordered += pending.pop(o)
    del graph.node[:]
    graph.node.extend(ordered)
    graph.initializer.extend(new_inits)
    del graph.value_info[:]
    converted = qoperator.to_qoperator(model, helper, numpy_helper) if quant_format == "qoperator" \
        else 0
    # The float weights now unread are dropped (and, in the QOperator form,
    # the parameters of the Q/DQ nodes it removed).
    _drop_unread_initializers(graph)
    try:
        onnx.checker.check_model(model)
    except Exception as e:
        raise QuantizeError(f"the quantized model is not valid ONNX: {e}") from e
    onnx.save(model, os.fspath(output_path))
    return {"ops": len(nodes), "tensors": len(tensors), "feeds": feeds, "method": method,
            "format": quant_format, "qoperator_ops": converted}


def quantize_dynamic(model_path, output_path):
    """Writes the layout of ONNX Runtime's quantize_dynamic (as BERT models
    are usually shipped): each MatMul with a constant 2-D float B becomes
    DynamicQuantizeLinear(A) -> MatMulInteger(., B as s8, a's zero point) ->
    Cast -> Mul(a_scale x b_scale), B symmetric per tensor (zero point 0,
    scale max|B| / 127). No calibration: A's range is measured at run time.
    Returns a report dict; raises QuantizeError."""
    onnx = _onnx()
    from onnx import helper, numpy_helper
    try:
        model = onnx.load(os.fspath(model_path))
    except Exception as e:
        raise QuantizeError(f"cannot read '{os.fspath(model_path)}': {e}") from e
    _fold_initializer_identities(model)
    graph = model.graph
    inits = {i.name: i for i in graph.initializer}
    fresh = _fresh_names(graph)

    out_nodes, new_inits, count = [], [], 0
    for node in graph.node:
        b = inits.get(node.input[1]) if node.op_type == "MatMul" and node.domain in ("", "ai.onnx") \
            else None
        if b is None or len(b.dims) != 2 or b.data_type != onnx.TensorProto.FLOAT:
            out_nodes.append(node)
            continue
        w = numpy_helper.to_array(b).astype(np.float32)
        scale = np.float32(np.abs(w).max() / 127.0) or np.float32(1.0)
        q = np.clip(np.rint(w / scale), -127, 127).astype(np.int8)
        base = node.name or node.output[0]
        wq, ws, wz = fresh(base + "_weight_quantized"), fresh(base + "_weight_scale"), \
            fresh(base + "_weight_zero_point")
        new_inits += [numpy_helper.from_array(q, wq),
                      numpy_helper.from_array(np.array(scale, np.float32), ws),
                      numpy_helper.from_array(np.array(0, np.int8), wz)]
        aq, a_s, az = fresh(base + "_a_quantized"), fresh(base + "_a_scale"), \
            fresh(base + "_a_zero_point")
        acc, accf, sc = fresh(base + "_sum"), fresh(base + "_sum_float"), fresh(base + "_scale")
        out_nodes += [
            helper.make_node("DynamicQuantizeLinear", [node.input[0]], [aq, a_s, az],
                             name=fresh(base + "_DynamicQuantizeLinear")),
            helper.make_node("MatMulInteger", [aq, wq, az, wz], [acc],
                             name=fresh(base + "_MatMulInteger")),
            helper.make_node("Cast", [acc], [accf], to=onnx.TensorProto.FLOAT,
                             name=fresh(base + "_Cast")),
            helper.make_node("Mul", [a_s, ws], [sc], name=fresh(base + "_scales")),
            helper.make_node("Mul", [accf, sc], [node.output[0]], name=fresh(base + "_Mul")),
        ]
        count += 1
    if count == 0:
        raise QuantizeError("the model has no MatMul with a constant 2-D float weight")
    del graph.node[:]
    graph.node.extend(out_nodes)
    graph.initializer.extend(new_inits)
    _drop_unread_initializers(graph)
    try:
        onnx.checker.check_model(model)
    except Exception as e:
        raise QuantizeError(f"the quantized model is not valid ONNX: {e}") from e
    onnx.save(model, os.fspath(output_path))
    return {"ops": count, "tensors": 0, "feeds": 0, "method": "dynamic"}


def main(argv=None):
    """kiln-quantize MODEL.onnx -o OUT.onnx --calibration DIR [--method minmax|percentile]."""
    import argparse
    import sys
    p = argparse.ArgumentParser(
        prog="kiln-quantize",
        description="Writes a QDQ (or, with --format qoperator, QOperator) int8 model (s8 "
                    "per-channel weights, u8 activations, i32 biases: ONNX Runtime's "
                    "quantize_static layouts) of a float ONNX model, its ranges calibrated "
                    "by running the float model with Kiln.")
    p.add_argument("model", help="the float model (.onnx)")
    p.add_argument("-o", "--output", required=True, help="where to write the quantized model")
    p.add_argument("--calibration",
                   help="a folder of test_data_set_* folders (input_J.pb files); "
                        "needed but with --dynamic")
    p.add_argument("--dynamic", action="store_true",
                   help="quantize_dynamic's layout instead: MatMul weights s8, activations "
                        "quantized at run time (DynamicQuantizeLinear); no calibration")
    p.add_argument("--format", choices=("qdq", "qoperator"), default="qdq",
                   help="qdq (default): QuantizeLinear/DequantizeLinear around float ops; "
                        "qoperator: QLinearConv, QLinearMatMul and the com.microsoft QLinear "
                        "ops (QLinearAdd, QLinearConcat, ...), ONNX Runtime's QOperator form")
    p.add_argument("--method", choices=("minmax", "percentile"), default="minmax")
    p.add_argument("--percentile", type=float, default=99.999)
    p.add_argument("--threads", type=int, default=0)
    args = p.parse_args(argv)
    try:
        if args.dynamic:
            report = quantize_dynamic(args.model, args.output)
        elif not args.calibration:
            raise QuantizeError("--calibration DIR is needed (or --dynamic)")
        else:
            report = quantize(args.model, args.output, args.calibration, args.method,
                              args.percentile, args.threads, args.format)
    except QuantizeError as e:
        print(f"kiln-quantize: error: {e}", file=sys.stderr)
        return 2
    if report["method"] == "dynamic":
        print(f"kiln-quantize: {report['ops']} MatMul weights quantized (dynamic) -> {args.output}")
    else:
        qop = f", {report['qoperator_ops']} as QLinear ops" if report["format"] == "qoperator" \
            else ""
        print(f"kiln-quantize: {report['ops']} ops and {report['tensors']} activations "
              f"quantized ({report['method']}, {report['feeds']} calibration feeds{qop}) -> "
              f"{args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
