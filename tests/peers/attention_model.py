"""A small attention model for tests/peers/save_attention.sh, built with Debian's python3-torch:
a Conv1d stem, LayerNorm, two-head self-attention (MatMul - Softmax - MatMul, both MatMuls with
two variable inputs, amct-reference.md §8.1), a residual Add and a Linear head, exported with a
dynamic sequence axis (torch.onnx.export dynamic_axes).

  attention_model.py DIR OPSET...   writes DIR/attn<OPSET>.onnx for each opset, DIR/data/<i>.npy
                                    (4 calibration batches, [1, 8, 20]) and DIR/long.npy ([1, 8, 33])
"""
import os
import sys

import numpy as np
import torch
import torch.nn as nn


class Attention(nn.Module):
    def __init__(self, d=32, heads=2):
        super().__init__()
        self.heads, self.dk = heads, d // heads
        self.stem = nn.Conv1d(8, d, 3, padding=1)
        self.norm = nn.LayerNorm(d)
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.head = nn.Linear(d, 10)

    def forward(self, x):  # x [B, 8, T]
        y = torch.relu(self.stem(x)).transpose(1, 2)  # [B, T, d]
        z = self.norm(y)
        B, T, D = z.shape
        split = lambda t: t.reshape(B, T, self.heads, self.dk).transpose(1, 2)
        q, k, v = split(self.q(z)), split(self.k(z)), split(self.v(z))
        a = torch.softmax(torch.matmul(q, k.transpose(2, 3)) / self.dk ** 0.5, dim=3)
        c = torch.matmul(a, v).transpose(1, 2).reshape(B, T, D)
        return self.head(y + self.o(c))


def main(out, opsets):
    torch.manual_seed(0)
    m = Attention().eval()
    os.makedirs(os.path.join(out, "data"), exist_ok=True)
    x = torch.randn(1, 8, 20)
    for opset in opsets:
        torch.onnx.export(m, x, os.path.join(out, "attn%d.onnx" % int(opset)), opset_version=int(opset),
                          input_names=["x"], output_names=["y"], dynamic_axes={"x": {2: "T"}, "y": {1: "T"}})
    rng = np.random.default_rng(1)
    for i in range(4):
        np.save(os.path.join(out, "data", "%d.npy" % i), rng.normal(0, 1, (1, 8, 20)).astype(np.float32))
    np.save(os.path.join(out, "long.npy"), rng.normal(0, 1, (1, 8, 33)).astype(np.float32))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
