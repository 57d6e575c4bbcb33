"""Prints a model (ONNX text format) with 60 If nodes in a chain, each on
the same condition computed from the input (sum(x) > 0, x too large to
specialise on): y_k+1 = y_k + 1 in the then branch, y_k - 1 in the else
branch, y_0 = x. More blocks than one run of the reference interpreter had
ever held: runBlock kept a reference into its per-block table while nested
blocks grew it."""

N = 60
print('ir_version: 8\nopset_import { domain: "" version: 13 }\ngraph {\n  name: "many_ifs"')
print('  node { input: "x" output: "s" name: "sum" op_type: "ReduceSum" '
      'attribute { name: "keepdims" i: 0 type: INT } }')
print('  node { input: "s" input: "zero" output: "c" name: "positive" op_type: "Greater" }')
vec = 'type { tensor_type { elem_type: 1 shape { dim { dim_value: 80 } } } }'
for k in range(N):
    y, out = ("x" if k == 0 else f"y{k}"), f"y{k + 1}"
    branches = []
    for name, op in (("then_branch", "Add"), ("else_branch", "Sub")):
        branches.append(
            f'    attribute {{ name: "{name}" type: GRAPH g {{ name: "{name}{k}"\n'
            f'      node {{ input: "{y}" input: "one" output: "{name}{k}_out" '
            f'name: "{name}{k}_op" op_type: "{op}" }}\n'
            f'      output {{ name: "{name}{k}_out" {vec} }} }} }}')
    print(f'  node {{\n    input: "c" output: "{out}" name: "if{k}" op_type: "If"\n' +
          "\n".join(branches) + "\n  }")
print('  initializer { name: "zero" data_type: 1 float_data: 0 }')
print('  initializer { name: "one" data_type: 1 float_data: 1 }')
print(f'  input {{ name: "x" {vec} }}')
print(f'  output {{ name: "y{N}" {vec} }}\n}}')
