#!/usr/bin/env python3
"""Writes test/fuzz/onnx.dict, the libFuzzer dictionary of the fuzz targets:
the protobuf tags of ONNX's messages (field number << 3 | wire type, as
varints) and the op types and attribute names the importer looks for, so
that mutations produce well-formed fields and known names far more often
than random bytes would.

    python3 scripts/fuzz/make_onnx_dict.py > test/fuzz/onnx.dict
"""

VARINT, LEN, FIXED32 = 0, 2, 5

# Field numbers from onnx.proto (onnx/onnx.proto3 in the ONNX sources).
FIELDS = {
    "model": [("ir_version", 1, VARINT), ("opset_import", 8, LEN), ("producer_name", 2, LEN),
              ("graph", 7, LEN), ("domain", 4, LEN), ("model_version", 5, VARINT),
              ("metadata_props", 14, LEN), ("functions", 25, LEN)],
    "opset": [("domain", 1, LEN), ("version", 2, VARINT)],
    "graph": [("node", 1, LEN), ("name", 2, LEN), ("initializer", 5, LEN),
              ("sparse_initializer", 15, LEN), ("input", 11, LEN), ("output", 12, LEN),
              ("value_info", 13, LEN)],
    "node": [("input", 1, LEN), ("output", 2, LEN), ("name", 3, LEN), ("op_type", 4, LEN),
             ("attribute", 5, LEN), ("domain", 7, LEN)],
    "attribute": [("name", 1, LEN), ("f", 2, FIXED32), ("i", 3, VARINT), ("s", 4, LEN),
                  ("t", 5, LEN), ("g", 6, LEN), ("floats", 7, LEN), ("ints", 8, LEN),
                  ("strings", 9, LEN), ("tensors", 10, LEN), ("graphs", 11, LEN),
                  ("type", 20, VARINT), ("ref_attr_name", 21, LEN)],
    "tensor": [("dims", 1, VARINT), ("dims_packed", 1, LEN), ("data_type", 2, VARINT),
               ("segment", 3, LEN), ("float_data", 4, LEN), ("int32_data", 5, LEN),
               ("string_data", 6, LEN), ("int64_data", 7, LEN), ("name", 8, LEN),
               ("raw_data", 9, LEN), ("double_data", 10, LEN), ("uint64_data", 11, LEN),
               ("external_data", 13, LEN), ("data_location", 14, VARINT)],
    "value_info": [("name", 1, LEN), ("type", 2, LEN)],
    "type": [("tensor_type", 1, LEN), ("sequence_type", 4, LEN), ("map_type", 5, LEN),
             ("optional_type", 9, LEN), ("sparse_tensor_type", 8, LEN)],
    "type_tensor": [("elem_type", 1, VARINT), ("shape", 2, LEN)],
    "shape": [("dim", 1, LEN)],
    "dim": [("dim_value", 1, VARINT), ("dim_param", 2, LEN)],
    "string_entry": [("key", 1, LEN), ("value", 2, LEN)],
    "sequence_proto": [("name", 1, LEN), ("elem_type", 2, VARINT), ("tensor_values", 3, LEN),
                       ("sequence_values", 4, LEN)],
    "optional_proto": [("name", 1, LEN), ("elem_type", 2, VARINT), ("tensor_value", 3, LEN),
                       ("sequence_value", 4, LEN)],
}

OPS = """Abs Add And ArgMax AveragePool BatchNormalization Cast Ceil Clip Concat Constant
ConstantOfShape Conv ConvTranspose CumSum DepthToSpace DequantizeLinear Div Dropout Einsum Elu
Equal Erf Exp Expand Flatten Floor Gather GatherElements GatherND Gemm GlobalAveragePool Greater
GRU HardSigmoid Identity If InstanceNormalization LayerNormalization LeakyRelu Less Log Loop LRN
LSTM MatMul Max MaxPool Mean Min Mod Mul Neg NonMaxSuppression NonZero Not OneHot Or Pad Pow
QuantizeLinear QLinearConv Range Reciprocal ReduceMax ReduceMean ReduceSum Relu Reshape Resize
RNN RoiAlign Scan ScatterElements ScatterND Selu SequenceAt SequenceConstruct SequenceInsert
Shape Sigmoid Sign Sin Size Slice Softmax Split Sqrt Squeeze Sub Sum Tanh Tile TopK Transpose
Trilu Unsqueeze Upsample Where Xor""".split()

ATTRS = """axis axes keepdims kernel_shape pads strides dilations group auto_pad ceil_mode perm
shape value to mode alpha beta gamma epsilon transA transB body then_branch else_branch
direction hidden_size allowzero starts ends split num_outputs coordinate_transformation_mode
nearest_mode scales sizes location offset length checksum""".split()


def varint(v):
    out = bytearray()
    while True:
        b, v = v & 0x7F, v >> 7
        out.append(b | 0x80 if v else b)
        if not v:
            return bytes(out)


def escaped(data):
    return "".join("\\x%02x" % b for b in data)


def main():
    print("# ONNX protobuf field tags (field number << 3 | wire type) and the names")
    print("# the importer looks for: a libFuzzer dictionary (-dict=test/fuzz/onnx.dict).")
    print("# Made by scripts/fuzz/make_onnx_dict.py; edit that, not this file.")
    for message, fields in FIELDS.items():
        for name, number, wire in fields:
            print(f'{message}_{name}="{escaped(varint(number << 3 | wire))}"')
    for op in OPS:
        print(f'op_{op}="{op}"')
    for attr in ATTRS:
        print(f'attr_{attr}="{attr}"')
    print('domain_onnx="ai.onnx"')
    print('domain_ml="ai.onnx.ml"')
    print(f'varint_max="{escaped(varint(2**64 - 1))}"')
    print(f'varint_2_40="{escaped(varint(2**40))}"')


if __name__ == "__main__":
    main()
