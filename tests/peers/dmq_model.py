"""Models with activation outliers for tests/peers/dmq.sh (DMQ balancing, issue 12 item 2), built
with Debian's python3-torch. In each, a few input channels of a quantized layer carry activations
about 50x larger than the others (the pattern SmoothQuant-style balancing is for):

  cnn  Conv - BatchNorm (gamma 50 on channels 2 and 9: calq folds it, so the next Conv reads the
       outliers, with weights 1/50 of its others there, so every channel weighs alike in its output) - ReLU - Conv - ReLU - depthwise Conv - ReLU - GlobalAveragePool - Linear (Gemm)
  mlp  tokens [1, 16, 24]: Linear (MatMul with a constant weight, 3-D input) - x * gain (gain 50 on
       channels 5 and 17) - GELU - Linear (MatMul, the outlier input; its weights there 1/50) - ReLU - Linear

  dmq_model.py DIR    writes DIR/cnn.onnx, DIR/mlp.onnx, DIR/cnn_data/<i>.npy and DIR/mlp_data/<i>.npy
                      (4 calibration batches each; standard normal inputs, fixed seed)
"""
import os
import sys

import numpy as np
import torch
import torch.nn as nn


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 16, 3, padding=1)
        self.bn = nn.BatchNorm2d(16)
        self.c2 = nn.Conv2d(16, 24, 3, padding=1)
        self.dw = nn.Conv2d(24, 24, 3, padding=1, groups=24)
        self.fc = nn.Linear(24, 10)
        with torch.no_grad():
            g = torch.ones(16)
            g[2] = g[9] = 50.0
            self.bn.weight.copy_(g)
            self.bn.bias.copy_(torch.full((16,), 0.1))
            self.c2.weight[:, [2, 9]] /= 50.0  # the outlier channels weigh like the others in the output

    def forward(self, x):
        y = torch.relu(self.bn(self.c1(x)))
        y = torch.relu(self.c2(y))
        y = torch.relu(self.dw(y))
        return self.fc(y.mean(dim=(2, 3)))


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(24, 32)
        self.b = nn.Linear(32, 32)
        self.c = nn.Linear(32, 10)
        g = torch.ones(32)
        g[5] = g[17] = 50.0
        self.register_buffer("gain", g)
        with torch.no_grad():
            self.b.weight[:, [5, 17]] /= 50.0

    def forward(self, x):
        y = torch.nn.functional.gelu(self.a(x) * self.gain)
        return self.c(torch.relu(self.b(y)))


def export(model, x, path):
    torch.onnx.export(model, x, path, input_names=["x"], output_names=["y"], opset_version=13, do_constant_folding=True)


def main(out):
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    for name, model, shape in (("cnn", Cnn(), (1, 3, 16, 16)), ("mlp", Mlp(), (1, 16, 24))):
        model.eval()
        export(model, torch.zeros(shape), os.path.join(out, name + ".onnx"))
        d = os.path.join(out, name + "_data")
        os.makedirs(d, exist_ok=True)
        for i in range(4):
            np.save(os.path.join(d, "%d.npy" % i), rng.standard_normal(shape).astype(np.float32))


if __name__ == "__main__":
    main(sys.argv[1])
