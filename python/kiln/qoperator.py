"""The QOperator form of a QDQ model (kiln.quantize's quant_format="qoperator"):
what ONNX Runtime's quantizer writes with QuantFormat.QOperator.

Each quantized op whose activation inputs all come from DequantizeLinear
(one scale per tensor) and whose result goes only to a QuantizeLinear
becomes one op on the 8-bit values:
    Conv (its Relu, or Clip from 0, too, where the output's u8 zero point
        is 0: the saturation does the same) -> QLinearConv
    MatMul -> QLinearMatMul
    Add, Mul, Concat, AveragePool, GlobalAveragePool, Sigmoid, LeakyRelu
        -> QLinearAdd, ... of the com.microsoft domain (version 1)
and the DequantizeLinear and QuantizeLinear nodes nothing reads any more
are dropped. What cannot be converted (a Gemm, an op with a float input)
stays in QDQ form: ONNX Runtime and Kiln run such mixed models as they are.
"""

import numpy as np

# The float ops whose com.microsoft QLinear form exists, and that form.
CONTRIB = {"Add": "QLinearAdd", "Mul": "QLinearMul", "Concat": "QLinearConcat",
           "AveragePool": "QLinearAveragePool",
           "GlobalAveragePool": "QLinearGlobalAveragePool",
           "Sigmoid": "QLinearSigmoid", "LeakyRelu": "QLinearLeakyRelu"}


# Ops that only move or pick their first input's values: what they read is
# quantized, so is what they give (PyTorch writes avg_pool2d's padding as a
# Pad before the AveragePool).
MOVES = {"Pad", "Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Identity",
         "MaxPool", "Slice"}


def extra_tensors(model, quantized, onnx):
    """The inputs and output of each CONTRIB op between quantized tensors:
    float inputs (ONNX's shape inference says; no initializer or Constant),
    one of them already among `quantized` (the tensors of Conv, Gemm and
    MatMul, or of a CONTRIB op before it in graph order, or moved from one
    of those by a MOVES op). Integer shape
    arithmetic and ops away from the quantized layers (an attention mask's
    Add) stay float."""
    graph = model.graph
    constant = {i.name for i in graph.initializer}
    constant |= {o for n in graph.node if n.op_type == "Constant" for o in n.output}
    try:
        inferred = onnx.shape_inference.infer_shapes(model).graph
        values = list(inferred.value_info) + list(inferred.input) + list(inferred.output)
    except Exception:
        values = []
    float_type = onnx.TensorProto.FLOAT
    floats = {v.name for v in values if v.type.tensor_type.elem_type == float_type}
    chosen = set(quantized)
    tensors = []
    for node in graph.node:
        if node.domain not in ("", "ai.onnx"):
            continue
        if node.op_type in MOVES and node.input and node.input[0] in chosen and \
                node.output[0] in floats:
            chosen.add(node.output[0])  # the same values, moved: still between
            continue
        if node.op_type not in CONTRIB:
            continue
        inputs = [i for i in node.input if i]
        if not inputs or any(i in constant or i not in floats for i in inputs) or \
                node.output[0] not in floats or not any(i in chosen for i in inputs):
            continue
        tensors += inputs + [node.output[0]]
        chosen |= set(inputs) | {node.output[0]}
    return tensors


def to_qoperator(model, helper, numpy_helper):
    """Rewrites `model` (a QDQ model from kiln.quantize) in place; returns the
    number of ops converted."""
    graph = model.graph
    inits = {i.name: i for i in graph.initializer}
    producer = {o: n for n in graph.node for o in n.output}
    readers = {}
    for n in graph.node:
        for i in n.input:
            readers.setdefault(i, []).append(n)
    outputs = {o.name for o in graph.output}

    def size(name):
        t = inits.get(name)
        if t is None:
            return None
        count = 1
        for d in t.dims:
            count *= d
        return count

    def dequantized(name, per_tensor=True):
        d = producer.get(name)
        if d is None or d.op_type != "DequantizeLinear":
            return None
        if per_tensor and size(d.input[1]) != 1:
            return None
        return d

    def triple(d):
        return [d.input[0], d.input[1], d.input[2] if len(d.input) > 2 else ""]

    def value(name):
        t = inits.get(name)
        return None if t is None else numpy_helper.to_array(t)

    def droppable(op, q):
        """Whether Relu/Clip `op` before QuantizeLinear `q` does nothing the
        quantization does not: a u8 zero point of 0 saturates everything
        below 0 to 0, so Relu and Clip(0, hi) go (hi is at least the range's
        top, which calibration took from the Clip's own output). Any other
        Clip stays, and so does its Conv's QDQ form."""
        zp = value(q.input[2]) if len(q.input) > 2 and q.input[2] else None
        if zp is None or zp.dtype != np.uint8 or zp.size != 1 or int(zp.ravel()[0]) != 0:
            return False
        if op.op_type == "Relu":
            return True
        attrs = {a.name: helper.get_attribute_value(a) for a in op.attribute}
        lo = attrs.get("min")
        if len(op.input) > 1 and op.input[1]:
            lo = value(op.input[1])
            lo = None if lo is None or lo.size != 1 else float(lo.ravel()[0])
        return lo == 0.0

    replaced, dropped = {}, set()
    for node in graph.node:
        op = node.op_type
        if node.domain not in ("", "ai.onnx") or op not in ("Conv", "MatMul", *CONTRIB):
            continue
        acts = [0] if op in ("Conv", "MatMul") else [k for k, i in enumerate(node.input) if i]
        dqs = [dequantized(node.input[k]) for k in acts]
        if not dqs or any(d is None for d in dqs):
            continue
        out, between = node.output[0], []
        if op == "Conv":
            for _ in range(2):
                after = readers.get(out, [])
                if len(after) == 1 and after[0].op_type in ("Relu", "Clip") and \
                        out not in outputs:
                    between.append(after[0])
                    out = after[0].output[0]
        after = readers.get(out, [])
        if len(after) != 1 or after[0].op_type != "QuantizeLinear" or out in outputs:
            continue
        q = after[0]
        if not all(droppable(b, q) for b in between):
            continue
        if size(q.input[1]) != 1:
            continue
        y = [q.input[1], q.input[2] if len(q.input) > 2 else ""]
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        name = (node.name or node.output[0]) + "_quant"
        if op in ("Conv", "MatMul"):
            w = dequantized(node.input[1], per_tensor=False)
            if w is None:
                continue
            inputs = triple(dqs[0]) + triple(w) + y
            if op == "Conv" and len(node.input) > 2 and node.input[2]:
                b = dequantized(node.input[2], per_tensor=False)
                if b is None:
                    continue
                inputs.append(b.input[0])
            new = helper.make_node("QLinear" + op, inputs, [q.output[0]], name=name,
                                   **(attrs if op == "Conv" else {}))
        elif op == "Concat":
            inputs = y + [v for d in dqs for v in triple(d)]
            new = helper.make_node("QLinearConcat", inputs, [q.output[0]], name=name,
                                   domain="com.microsoft", axis=attrs.get("axis", 0))
        elif op in ("Add", "Mul"):
            new = helper.make_node(CONTRIB[op], triple(dqs[0]) + triple(dqs[1]) + y,
                                   [q.output[0]], name=name, domain="com.microsoft")
        else:
            new = helper.make_node(CONTRIB[op], triple(dqs[0]) + y, [q.output[0]], name=name,
                                   domain="com.microsoft", **attrs)
        replaced[id(node)] = new
        dropped |= {id(q)} | {id(b) for b in between}

    nodes = [replaced.get(id(n), n) for n in graph.node if id(n) not in dropped]
    # Q/DQ nodes whose results nothing reads any more, until none is left.
    while True:
        read = {i for n in nodes for i in n.input} | outputs
        kept = [n for n in nodes
                if n.op_type not in ("QuantizeLinear", "DequantizeLinear") or
                any(o in read for o in n.output)]
        if len(kept) == len(nodes):
            break
        nodes = kept
    del graph.node[:]
    graph.node.extend(nodes)
    if any(n.domain == "com.microsoft" for n in nodes) and \
            not any(o.domain == "com.microsoft" for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return len(replaced)
