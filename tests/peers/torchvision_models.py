"""torchvision classifiers exported to ONNX for the tensor_quantize / int8-export tests and
bench/ort-int8 (Debian's python3-torch and python3-torchvision; random weights, BatchNorm
statistics drawn so that activations are not degenerate):

  torchvision_models.py DIR SIZE NAME...   writes DIR/<NAME>.onnx (input x [1, 3, SIZE, SIZE],
                                           opset 13) for resnet18, mobilenet_v2, ..., tiny_fpn
                                           (below), and
                                           DIR/data/<i>.npy: 8 photos of the shared data set
                                           (ImageNet mean / std, NCHW)
  torchvision_models.py tq CONFIG MODEL OUT OP...  adds a tensor_quantize entry (§7.2) for every input
                                           of every node of the given op types to the JSON config
"""
import glob
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def tiny_fpn():
    """A small detector-like network with the ops between layers that the int8 exports quantize
    (issue 12, item 5): Conv + LeakyRelu, Conv + ReLU6 (Clip), MaxPool, a nearest Resize, Concat,
    a Sigmoid attention Mul, a residual Add, GlobalAveragePool + Gemm, and a Conv graph output."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class TinyFPN(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1, self.c2 = nn.Conv2d(3, 16, 3, 2, 1), nn.Conv2d(16, 32, 3, 2, 1)
            self.c3, self.c4 = nn.Conv2d(32, 32, 3, 1, 1), nn.Conv2d(64, 32, 1)
            self.att, self.det = nn.Conv2d(64, 32, 1), nn.Conv2d(32, 6, 1)
            self.fc = nn.Linear(32, 10)

        def forward(self, x):
            a = F.leaky_relu(self.c1(x), 0.1)
            b = F.relu6(self.c2(a))
            c = F.relu(self.c3(F.max_pool2d(b, 2)))
            cat = torch.cat([F.interpolate(c, scale_factor=2.0, mode="nearest"), b], 1)
            y = self.c4(cat) * torch.sigmoid(self.att(cat)) + b
            return self.fc(torch.flatten(F.adaptive_avg_pool2d(y, 1), 1)), self.det(y)

    return TinyFPN()


def export(out, size, names):
    import torch
    import torchvision
    torch.manual_seed(0)
    for name in names:
        m = (tiny_fpn() if name == "tiny_fpn" else getattr(torchvision.models, name)(weights=None)).eval()
        for mod in m.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.1, 0.1)
                mod.running_var.uniform_(0.5, 1.5)
        outs = ["y", "det"] if name == "tiny_fpn" else ["y"]
        torch.onnx.export(m, torch.randn(1, 3, size, size), os.path.join(out, name + ".onnx"), opset_version=13,
                          input_names=["x"], output_names=outs)
    import cv2
    os.makedirs(os.path.join(out, "data"), exist_ok=True)
    shared = os.environ.get("CALQ_SHARED", os.path.join(HERE, "..", "..", "..", "shared"))
    photos = sorted(glob.glob(os.path.join(shared, "data", "faces", "*.jpg")))[:8]
    for i, f in enumerate(photos):
        im = cv2.cvtColor(cv2.resize(cv2.imread(f), (size, size)), cv2.COLOR_BGR2RGB).astype(np.float32) / 255
        im = (im - [0.485, 0.456, 0.406]) / [0.229, 0.224, 0.225]
        np.save(os.path.join(out, "data", "%d.npy" % i), im.transpose(2, 0, 1)[None].astype(np.float32))


def add_tensor_quantize(config, model_path, out, ops):
    import onnx
    m = onnx.load(model_path)
    c = json.load(open(config))
    c["tensor_quantize"] = [{"layer_name": n.name, "input_index": k} for n in m.graph.node if n.op_type in ops
                            for k in range(len(n.input))]
    json.dump(c, open(out, "w"), indent=1)
    print("tensor_quantize: %d inputs of %s" % (len(c["tensor_quantize"]), ", ".join(ops)))


if __name__ == "__main__":
    if sys.argv[1] == "tq":
        add_tensor_quantize(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:])
    else:
        export(sys.argv[1], int(sys.argv[2]), sys.argv[3:])
