#!/usr/bin/env python3
"""A BERT-style encoder with input_ids and attention_mask, batch and
sequence length dynamic (issue 39's third target), from torch's own
nn.TransformerEncoder (no transformers package on Debian):

    /usr/bin/python3 scripts/models/export_bert_mask.py OUT.onnx

4 layers, d = 256, 4 heads, feed-forward 1024, GELU, vocabulary 1000,
random weights (seed 0). The padding mask becomes the attention's key
padding mask, so the export carries the mask arithmetic a Hugging Face
BERT has (Equal, Where/Add of -inf into the scores).
"""
import inspect
import sys

import torch
import torch.nn as nn


class BertMask(nn.Module):
    def __init__(self, vocab=1000, d=256, heads=4, layers=4, ff=1024, max_pos=512):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(max_pos, d)
        self.norm = nn.LayerNorm(d)
        layer = nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, batch_first=True,
                                           activation="gelu")
        self.enc = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)

    def forward(self, input_ids, attention_mask):
        pos = torch.arange(input_ids.shape[1]).unsqueeze(0)
        h = self.norm(self.tok(input_ids) + self.pos(pos))
        return self.enc(h, src_key_padding_mask=attention_mask == 0)


def export(path):
    """Writes the model (seed 0) to `path`."""
    torch.manual_seed(0)
    model = BertMask().eval()
    ids = torch.randint(0, 1000, (2, 16))
    mask = torch.ones(2, 16, dtype=torch.int64)
    mask[1, 12:] = 0
    axes = {0: "batch", 1: "seq"}
    kwargs = dict(opset_version=17, input_names=["input_ids", "attention_mask"],
                  output_names=["hidden"],
                  dynamic_axes={"input_ids": axes, "attention_mask": axes, "hidden": axes})
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        kwargs["dynamo"] = False
    torch.onnx.export(model, (ids, mask), path, **kwargs)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    export(sys.argv[1])


if __name__ == "__main__":
    main()
