#!/usr/bin/python3
"""Benchmark zoo: torchvision (and two hand-written) networks exported to ONNX.

    /usr/bin/python3 bench/zoo/export.py [OUT_DIR] [--only NAME,...]

OUT_DIR defaults to $CALQ_ZOO_DIR or ~/.cache/calq-bench-zoo (outside git: the files are
generated, tens of MB each). Weights are random but seeded (torch.manual_seed(0) right before a
model is built), so bench/calibration --torch NAME builds the very same network in PyTorch.
BatchNorm statistics are randomised too, so Conv+BN folding sees realistic, non-identity
factors. Each model is exported with a symbolic batch dimension ("N") at opset 13, as
torch.onnx.export emits it (LayerNorm and GELU decomposed, HardSwish as one node), and a
zoo.json lists every model with its input shape. Existing files are kept (delete to
regenerate)."""
import json
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision


class DetectorFPN(nn.Module):
    """A DBNet-like text/object detector (the PaddleOCR detection family): a MobileNetV3 backbone,
    an FPN (1x1 laterals, Resize upsampling, Add, Concat) and a ConvTranspose head."""

    def __init__(self):
        super().__init__()
        feats = torchvision.models.mobilenet_v3_large().features
        self.stage1 = feats[:4]    # stride 4, 24 channels
        self.stage2 = feats[4:7]   # stride 8, 40 channels
        self.stage3 = feats[7:13]  # stride 16, 112 channels
        self.stage4 = feats[13:]   # stride 32, 960 channels
        inner = 96
        self.lat = nn.ModuleList([nn.Conv2d(c, inner, 1, bias=False) for c in (24, 40, 112, 960)])
        self.smooth = nn.ModuleList([nn.Conv2d(inner, inner // 4, 3, padding=1, bias=False) for _ in range(4)])
        self.head = nn.Sequential(
            nn.Conv2d(inner, inner // 4, 3, padding=1, bias=False), nn.BatchNorm2d(inner // 4), nn.ReLU(),
            nn.ConvTranspose2d(inner // 4, inner // 4, 2, stride=2), nn.BatchNorm2d(inner // 4), nn.ReLU(),
            nn.ConvTranspose2d(inner // 4, 1, 2, stride=2), nn.Sigmoid())

    def forward(self, x):
        c1 = self.stage1(x)
        c2 = self.stage2(c1)
        c3 = self.stage3(c2)
        c4 = self.stage4(c3)
        p4 = self.lat[3](c4)
        p3 = self.lat[2](c3) + F.interpolate(p4, scale_factor=2.0, mode="nearest")
        p2 = self.lat[1](c2) + F.interpolate(p3, scale_factor=2.0, mode="nearest")
        p1 = self.lat[0](c1) + F.interpolate(p2, scale_factor=2.0, mode="nearest")
        outs = [self.smooth[0](p1)]
        for i, p in enumerate((p2, p3, p4)):
            outs.append(F.interpolate(self.smooth[i + 1](p), size=outs[0].shape[2:], mode="bilinear",
                                      align_corners=False))
        return self.head(torch.cat(outs, dim=1))


class TransformerBlocks(nn.Module):
    """A small ViT: 16x16 patch embedding (Conv), then encoder blocks of LayerNorm, multi-head
    self-attention written out as MatMul / Softmax (what exporters emit), LayerNorm and a GELU MLP."""

    def __init__(self, dim=192, heads=3, depth=4, tokens=196):
        super().__init__()
        self.heads = heads
        self.embed = nn.Conv2d(3, dim, 16, stride=16)
        self.pos = nn.Parameter(torch.randn(1, tokens, dim) * 0.02)
        self.blocks = nn.ModuleList()
        for _ in range(depth):
            self.blocks.append(nn.ModuleDict({
                "ln1": nn.LayerNorm(dim), "qkv": nn.Linear(dim, 3 * dim), "proj": nn.Linear(dim, dim),
                "ln2": nn.LayerNorm(dim), "fc1": nn.Linear(dim, 4 * dim), "fc2": nn.Linear(4 * dim, dim)}))
        self.norm = nn.LayerNorm(dim)
        self.cls = nn.Linear(dim, 1000)

    def forward(self, x):
        x = self.embed(x).flatten(2).transpose(1, 2) + self.pos
        n, t, d = x.shape
        h = self.heads
        for b in self.blocks:
            q, k, v = b["qkv"](b["ln1"](x)).reshape(n, t, 3, h, d // h).permute(2, 0, 3, 1, 4)
            a = torch.softmax(torch.matmul(q, k.transpose(-2, -1)) * (d // h) ** -0.5, dim=-1)
            x = x + b["proj"](torch.matmul(a, v).transpose(1, 2).reshape(n, t, d))
            x = x + b["fc2"](F.gelu(b["fc1"](b["ln2"](x))))
        return self.cls(self.norm(x).mean(dim=1))


def tv(name):
    return lambda: getattr(torchvision.models, name)()


# name -> (constructor, input H x W); every model takes one N x 3 x H x W float input.
MODELS = {
    "resnet18": (tv("resnet18"), (224, 224)),
    "resnet50": (tv("resnet50"), (224, 224)),
    "mobilenet_v2": (tv("mobilenet_v2"), (224, 224)),
    "mobilenet_v3_small": (tv("mobilenet_v3_small"), (224, 224)),
    "mobilenet_v3_large": (tv("mobilenet_v3_large"), (224, 224)),
    "efficientnet_b0": (tv("efficientnet_b0"), (224, 224)),  # SiLU (x * Sigmoid(x)), SE blocks
    "detector_fpn": (DetectorFPN, (640, 640)),
    "transformer_vit": (TransformerBlocks, (224, 224)),
}


def build(name):
    """The seeded, eval-mode network bench/calibration --torch NAME also uses."""
    ctor, hw = MODELS[name]
    torch.manual_seed(0)
    m = ctor()
    g = torch.Generator().manual_seed(1)
    for mod in m.modules():
        if isinstance(mod, nn.BatchNorm2d):
            c = mod.num_features
            mod.running_mean.copy_(torch.randn(c, generator=g) * 0.1)
            mod.running_var.copy_(torch.rand(c, generator=g) * 0.5 + 0.5)
            mod.weight.data.copy_(torch.rand(c, generator=g) * 0.5 + 0.75)
            mod.bias.data.copy_(torch.randn(c, generator=g) * 0.1)
    return m.eval(), hw


def main():
    args = sys.argv[1:]
    only = None
    if "--only" in args:
        i = args.index("--only")
        only = set(args[i + 1].split(","))
        del args[i:i + 2]
    out = args[0] if args else os.environ.get("CALQ_ZOO_DIR", os.path.expanduser("~/.cache/calq-bench-zoo"))
    os.makedirs(out, exist_ok=True)
    index = {}
    for name in MODELS:
        _, hw = MODELS[name]
        path = os.path.join(out, name + ".onnx")
        index[name] = {"file": name + ".onnx", "input": "input", "shape": [1, 3, hw[0], hw[1]]}
        if (only and name not in only) or os.path.exists(path):
            continue
        m, hw = build(name)
        x = torch.randn(1, 3, hw[0], hw[1])
        tmp = path + ".tmp"
        with torch.no_grad():
            torch.onnx.export(m, x, tmp, opset_version=13, input_names=["input"], output_names=["output"],
                              dynamic_axes={"input": {0: "N"}, "output": {0: "N"}}, do_constant_folding=True)
        os.replace(tmp, path)
        print(f"{name}: {path}", flush=True)
    with open(os.path.join(out, "zoo.json"), "w") as f:
        json.dump(index, f, indent=1)
    print(out)


if __name__ == "__main__":
    main()
