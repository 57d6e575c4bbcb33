#!/usr/bin/env python3
"""Deep graphs for measuring compile-time growth (issue "Reliability").

    python3 scripts/models/make_deep_graph.py N chain|mm|wide | \
        protoc --encode=onnx.ModelProto -I/usr/include/onnx onnx.proto > deep.onnx
    build/bin/kilnc deep.onnx --no-cache --emit=obj -o deep.o -v

Writes an ONNX model in protobuf text format (no onnx Python package
needed): N nodes in one chain on a 4x8 float tensor. "chain": Add, Mul, Relu
in turn (elementwise: fused into bounded kernels); "mm": MatMul with one
shared 8x8 weight, then Relu (one kernel call per MatMul); "wide": N / 2
branches that each read x (Mul by a constant of their own), summed by a balanced tree of Adds
(N - 1 nodes in all), so that the graph is about log2(N) deep.
"""
import sys


def main():
    if len(sys.argv) != 3 or sys.argv[2] not in ("chain", "mm", "wide"):
        sys.exit(__doc__)
    n, kind = int(sys.argv[1]), sys.argv[2]
    out = ['ir_version: 8', 'opset_import { domain: "" version: 13 }', 'graph {', '  name: "deep"']
    prev = "x"
    if kind == "wide":
        level = []
        for i in range(max(n // 2, 1)):
            # A constant of its own per branch, or CSE would merge them all.
            out.append(f'  node {{ input: "x" input: "c{i}" output: "b{i}" name: "b{i}" op_type: "Mul" }}')
            out.append(f'  initializer {{ name: "c{i}" data_type: 1 float_data: {i + 1} }}')
            level.append(f"b{i}")
        k = 0
        while len(level) > 1:
            nxt = []
            for j in range(0, len(level) - 1, 2):
                out.append(f'  node {{ input: "{level[j]}" input: "{level[j + 1]}" output: "s{k}" '
                           f'name: "s{k}" op_type: "Add" }}')
                nxt.append(f"s{k}")
                k += 1
            if len(level) % 2:
                nxt.append(level[-1])
            level = nxt
        prev = level[0]
    for i in range(n if kind != "wide" else 0):
        if kind == "chain":
            op = ["Add", "Mul", "Relu"][i % 3]
            ins = f'input: "{prev}"' + ('' if op == "Relu" else ' input: "c"')
        else:
            op = "MatMul" if i % 2 == 0 else "Relu"
            ins = f'input: "{prev}"' + (' input: "w"' if op == "MatMul" else '')
        out.append(f'  node {{ {ins} output: "v{i}" name: "n{i}" op_type: "{op}" }}')
        prev = f"v{i}"
    out.append('  initializer { name: "c" data_type: 1 float_data: 0.5 }')
    out.append('  initializer { name: "w" data_type: 1 dims: 8 dims: 8 float_data: ['
               + ", ".join(["0.125"] * 64) + '] }')
    out.append('  input { name: "x" type { tensor_type { elem_type: 1 shape { '
               'dim { dim_value: 4 } dim { dim_value: 8 } } } } }')
    out.append(f'  output {{ name: "{prev}" type {{ tensor_type {{ elem_type: 1 shape {{ '
               f'dim {{ dim_value: 4 }} dim {{ dim_value: 8 }} }} }} }} }}')
    out.append('}')
    print("\n".join(out))


if __name__ == "__main__":
    main()
