#!/usr/bin/python3
"""Architectures beyond the zoo's (the arch sweep): exported to ONNX at opset 13 (or the opset a
MODELS entry gives) with random but seeded weights (BatchNorm statistics randomised), plus two
calibration batches of each.

    /usr/bin/python3 tests/peers/arch_models.py OUT_DIR [NAME ...]

Writes OUT_DIR/<NAME>.onnx (one input "x", outputs "y"...), OUT_DIR/<NAME>/cal/0.npy, 1.npy
(calibration batches) and OUT_DIR/<NAME>/eval/0.npy (a held-out input). Image models take
1 x 3 x S x S (ImageNet-normalised noise with some spatial structure); the text recognisers take
1 x 1 x 32 x W with W dynamic ("W"), the attention block N x T x D with T dynamic ("T");
torchvision's detectors take 1 x 3 x S x S pixels in 0..1 (fixed: their exports fix it), the
optical flow model two frames stacked as 1 x 6 x S x S.
"""
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision


class CRNN(nn.Module):
    """A CRNN text recogniser (the PaddleOCR / EasyOCR rec family): conv stack, height squeezed to
    1, a bidirectional LSTM or GRU over the width, Linear, log_softmax over the classes."""

    def __init__(self, rnn="lstm", classes=37):
        super().__init__()

        def block(i, o, pool):
            return [nn.Conv2d(i, o, 3, padding=1, bias=False), nn.BatchNorm2d(o), nn.ReLU()] + (
                [nn.MaxPool2d(pool, pool)] if pool else [])
        self.cnn = nn.Sequential(*block(1, 32, (2, 2)), *block(32, 64, (2, 2)), *block(64, 96, (2, 1)),
                                 *block(96, 128, (2, 1)), *block(128, 128, None))
        cls = nn.LSTM if rnn == "lstm" else nn.GRU
        self.rnn = cls(128 * 2, 96, num_layers=2, bidirectional=True, batch_first=False)
        self.fc = nn.Linear(192, classes)

    def forward(self, x):
        f = self.cnn(x)  # N x 128 x 2 x W/4
        n, c, h, w = f.shape
        f = f.reshape(n, c * h, w).permute(2, 0, 1)  # T x N x C
        y, _ = self.rnn(f)
        return F.log_softmax(self.fc(y), dim=2)


class TextDet(nn.Module):
    """A small text detector: a strided conv encoder and a ConvTranspose decoder with skips
    (Add and Concat), sigmoid probability map."""

    def __init__(self):
        super().__init__()

        def cbr(i, o, s):
            return nn.Sequential(nn.Conv2d(i, o, 3, s, 1, bias=False), nn.BatchNorm2d(o), nn.ReLU())
        self.e1, self.e2, self.e3, self.e4 = cbr(3, 16, 2), cbr(16, 32, 2), cbr(32, 64, 2), cbr(64, 96, 2)
        self.u3 = nn.ConvTranspose2d(96, 64, 4, 2, 1)
        self.u2 = nn.ConvTranspose2d(64, 32, 4, 2, 1)
        self.u1 = nn.ConvTranspose2d(64, 16, 2, 2)
        self.head = nn.Sequential(nn.Conv2d(32, 16, 3, 1, 1), nn.ReLU(), nn.ConvTranspose2d(16, 1, 2, 2),
                                  nn.Sigmoid())

    def forward(self, x):
        a = self.e1(x)
        b = self.e2(a)
        c = self.e3(b)
        d = self.e4(c)
        c = F.relu(self.u3(d) + c)
        b = torch.cat([F.relu(self.u2(c)), b], 1)
        a = torch.cat([F.relu(self.u1(b)), a], 1)
        return self.head(a)


class SwinLike(nn.Module):
    """Windowless Swin/ViT-style blocks over a dynamic token axis: LayerNorm, multi-head attention
    written out (MatMul, Softmax), a relative-position-free GELU MLP, mean pooling, classifier."""

    def __init__(self, dim=96, heads=3, depth=2, classes=100):
        super().__init__()
        self.heads = heads
        self.inp = nn.Linear(dim, dim)
        self.blocks = nn.ModuleList(nn.ModuleDict({
            "ln1": nn.LayerNorm(dim), "qkv": nn.Linear(dim, 3 * dim), "proj": nn.Linear(dim, dim),
            "ln2": nn.LayerNorm(dim), "fc1": nn.Linear(dim, 4 * dim), "fc2": nn.Linear(4 * dim, dim)})
            for _ in range(depth))
        self.norm = nn.LayerNorm(dim)
        self.cls = nn.Linear(dim, classes)

    def forward(self, x):
        x = self.inp(x)
        n, t, d = x.shape
        h = self.heads
        for b in self.blocks:
            qkv = b["qkv"](b["ln1"](x)).reshape(n, t, 3, h, d // h).permute(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]
            a = torch.softmax(torch.matmul(q, k.transpose(-2, -1)) * (d // h) ** -0.5, dim=-1)
            x = x + b["proj"](torch.matmul(a, v).transpose(1, 2).reshape(n, t, d))
            x = x + b["fc2"](F.gelu(b["fc1"](b["ln2"](x))))
        return self.cls(self.norm(x).mean(dim=1))


class Edges(nn.Module):
    """Layer shapes the zoo lacks: a depthwise ConvTranspose upsampler (groups = channels, as in
    CenterNet-style and segmentation decoders), a grouped ConvTranspose, a module applied twice
    (one weight, two layers), a Conv1d / ConvTranspose1d pair over the flattened rows, and a
    Linear on a 4-D tensor (MatMul of rank 4)."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 32, 3, 2, 1)
        self.shared = nn.Conv2d(32, 32, 3, 1, 1)
        self.up_dw = nn.ConvTranspose2d(32, 32, 4, 2, 1, groups=32)
        self.up_g = nn.ConvTranspose2d(32, 16, 3, 1, 1, groups=4)
        self.c1d = nn.Conv1d(16, 24, 5, padding=2)
        self.t1d = nn.ConvTranspose1d(24, 8, 4, 2, 1)
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        a = F.relu(self.c1(x))
        a = F.relu(self.shared(F.relu(self.shared(a))))
        b = F.relu(self.up_g(F.relu(self.up_dw(a))))  # N x 16 x H x W
        n, c, h, w = b.shape
        r = F.relu(self.c1d(b.reshape(n, c, h * w)))
        r = F.relu(self.t1d(r))  # N x 8 x 2HW
        return self.fc(r.reshape(n, 8, 2 * h, w).permute(0, 2, 3, 1))


class CBS(nn.Sequential):
    """YOLOv5/v8's Conv: convolution, BatchNorm, SiLU (exported as x * Sigmoid(x) at opset 13)."""

    def __init__(self, cin, cout, k=1, s=1):
        super().__init__(nn.Conv2d(cin, cout, k, s, (k - 1) // 2, bias=False), nn.BatchNorm2d(cout), nn.SiLU())


class C3(nn.Module):
    """YOLOv5's CSP block: two 1x1 branches, n residual bottlenecks on one, concatenated."""

    def __init__(self, cin, cout, n=1, shortcut=True):
        super().__init__()
        h = cout // 2
        self.a, self.b, self.out = CBS(cin, h), CBS(cin, h), CBS(2 * h, cout)
        self.m = nn.ModuleList(nn.Sequential(CBS(h, h), CBS(h, h, 3)) for _ in range(n))
        self.shortcut = shortcut

    def forward(self, x):
        a = self.a(x)
        for m in self.m:
            a = a + m(a) if self.shortcut else m(a)
        return self.out(torch.cat([a, self.b(x)], 1))


class YoloLike(nn.Module):
    """A YOLOv5n-shaped detector, the class most edge deployments run: SiLU after every
    convolution, CSP blocks with residual sums, SPPF (three chained 5x5 max pools), an FPN/PAN
    neck of nearest Upsample + Concat, and three 1x1 heads (raw maps, no decoding)."""

    def __init__(self, w=16, na=3, nc=20):
        super().__init__()
        self.stem = CBS(3, w, 6, 2)
        self.s2 = nn.Sequential(CBS(w, 2 * w, 3, 2), C3(2 * w, 2 * w))
        self.s3 = nn.Sequential(CBS(2 * w, 4 * w, 3, 2), C3(4 * w, 4 * w, 2))
        self.s4 = nn.Sequential(CBS(4 * w, 8 * w, 3, 2), C3(8 * w, 8 * w, 3))
        self.s5 = nn.Sequential(CBS(8 * w, 16 * w, 3, 2), C3(16 * w, 16 * w))
        self.sppf_in, self.sppf_out = CBS(16 * w, 8 * w), CBS(32 * w, 16 * w)
        self.lat5, self.td4 = CBS(16 * w, 8 * w), C3(16 * w, 8 * w, shortcut=False)
        self.lat4, self.td3 = CBS(8 * w, 4 * w), C3(8 * w, 4 * w, shortcut=False)
        self.dn3, self.bu4 = CBS(4 * w, 4 * w, 3, 2), C3(8 * w, 8 * w, shortcut=False)
        self.dn4, self.bu5 = CBS(8 * w, 8 * w, 3, 2), C3(16 * w, 16 * w, shortcut=False)
        self.heads = nn.ModuleList(nn.Conv2d(c, na * (5 + nc), 1) for c in (4 * w, 8 * w, 16 * w))

    def forward(self, x):
        p3 = self.s3(self.s2(self.stem(x)))
        p4 = self.s4(p3)
        s = self.sppf_in(self.s5(p4))
        m1 = F.max_pool2d(s, 5, 1, 2)
        m2 = F.max_pool2d(m1, 5, 1, 2)
        p5 = self.sppf_out(torch.cat([s, m1, m2, F.max_pool2d(m2, 5, 1, 2)], 1))
        l5 = self.lat5(p5)
        t4 = self.td4(torch.cat([F.interpolate(l5, scale_factor=2.0, mode="nearest"), p4], 1))
        l4 = self.lat4(t4)
        o3 = self.td3(torch.cat([F.interpolate(l4, scale_factor=2.0, mode="nearest"), p3], 1))
        o4 = self.bu4(torch.cat([self.dn3(o3), l4], 1))
        o5 = self.bu5(torch.cat([self.dn4(o4), l5], 1))
        return tuple(h(o) for h, o in zip(self.heads, (o3, o4, o5)))


class TextEncoder(nn.Module):
    """A BERT-like encoder over int64 token ids with a dynamic length: Embedding (Gather),
    learned positions sliced to the length, nn.TransformerEncoder (post-norm, GELU), mean pool."""

    def __init__(self, vocab=1000, dim=64, heads=4, depth=2, classes=5):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.randn(1, 128, dim) * 0.02)
        layer = nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.0, activation="gelu", batch_first=True)
        self.enc = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.cls = nn.Linear(dim, classes)

    def forward(self, ids):
        x = self.emb(ids) + self.pos[:, :ids.shape[1]]
        return self.cls(self.enc(x).mean(dim=1))


class CausalLM(nn.Module):
    """A GPT-like decoder over int64 ids with a dynamic length: causal mask built from the length
    (a Range comparison, masked_fill with -inf), attention through einsum, pre-norm, tied output embedding."""

    def __init__(self, vocab=500, dim=64, heads=4, depth=2):
        super().__init__()
        self.heads = heads
        self.emb = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(128, dim)
        self.blocks = nn.ModuleList(nn.ModuleDict({
            "ln1": nn.LayerNorm(dim), "qkv": nn.Linear(dim, 3 * dim), "proj": nn.Linear(dim, dim),
            "ln2": nn.LayerNorm(dim), "fc1": nn.Linear(dim, 4 * dim), "fc2": nn.Linear(4 * dim, dim)})
            for _ in range(depth))
        self.norm = nn.LayerNorm(dim)

    def forward(self, ids):
        n, t = ids.shape
        x = self.emb(ids) + self.pos(torch.arange(t).unsqueeze(0))
        r = torch.arange(t)
        mask = r.unsqueeze(0) > r.unsqueeze(1)  # key after query
        h = self.heads
        for b in self.blocks:
            q, k, v = b["qkv"](b["ln1"](x)).reshape(n, t, 3, h, -1).unbind(2)
            a = torch.einsum("nqhd,nkhd->nhqk", q, k) / 4.0
            a = torch.softmax(a.masked_fill(mask, float("-inf")), dim=-1)
            x = x + b["proj"](torch.einsum("nhqk,nkhd->nqhd", a, v).reshape(n, t, -1))
            x = x + b["fc2"](F.gelu(b["fc1"](b["ln2"](x)), approximate="tanh"))
        return self.norm(x) @ self.emb.weight.t()


def hsconv(i, o, k=3, s=1, g=1, act=True):
    return nn.Sequential(nn.Conv2d(i, o, k, s, (k - 1) // 2, groups=g, bias=False), nn.BatchNorm2d(o),
                         *( [nn.Hardswish()] if act else []))


class SEH(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.f1, self.f2 = nn.Conv2d(c, c // 4, 1), nn.Conv2d(c // 4, c, 1)

    def forward(self, x):
        s = F.adaptive_avg_pool2d(x, 1)
        return x * F.hardsigmoid(self.f2(F.relu(self.f1(s))))


class DBNet(nn.Module):
    """PP-OCR-style DB text detector: MobileNetV3-like backbone (Hardswish, SE with hardsigmoid),
    FPN (nearest upsample + add, concat), DB head (conv, 2 ConvTranspose, sigmoid)."""

    def __init__(self):
        super().__init__()
        def ir(i, e, o, s):
            return nn.Sequential(hsconv(i, e, 1), hsconv(e, e, 3, s, e), SEH(e), hsconv(e, o, 1, act=False))
        self.stem = hsconv(3, 16, 3, 2)
        self.s1 = ir(16, 32, 24, 2)   # /4
        self.s2 = ir(24, 72, 40, 2)   # /8
        self.s3 = ir(40, 120, 80, 2)  # /16
        self.s4 = ir(80, 240, 160, 2) # /32
        self.lat = nn.ModuleList(nn.Conv2d(c, 64, 1, bias=False) for c in (24, 40, 80, 160))
        self.smo = nn.ModuleList(nn.Conv2d(64, 16, 3, 1, 1, bias=False) for _ in range(4))
        self.head = nn.Sequential(nn.Conv2d(64, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                                  nn.ConvTranspose2d(16, 16, 2, 2), nn.BatchNorm2d(16), nn.ReLU(),
                                  nn.ConvTranspose2d(16, 1, 2, 2), nn.Sigmoid())

    def forward(self, x):
        c1 = self.s1(self.stem(x)); c2 = self.s2(c1); c3 = self.s3(c2); c4 = self.s4(c3)
        i4, i3, i2, i1 = [l(c) for l, c in zip(self.lat[::-1], (c4, c3, c2, c1))]
        o3 = i3 + F.interpolate(i4, scale_factor=2.0, mode="nearest")
        o2 = i2 + F.interpolate(o3, scale_factor=2.0, mode="nearest")
        o1 = i1 + F.interpolate(o2, scale_factor=2.0, mode="nearest")
        p = [s(o) for s, o in zip(self.smo, (o1, o2, o3, i4))]
        p = [p[0]] + [F.interpolate(q, scale_factor=2.0 ** (k + 1), mode="nearest") for k, q in enumerate(p[1:])]
        return self.head(torch.cat(p[::-1], 1))


class AttnOCR(nn.Module):
    """An attention OCR recogniser (ASTER/SAR-like): conv encoder, BiLSTM, a Bahdanau attention
    GRUCell decoder unrolled 6 greedy steps (argmax -> Embedding), logits stacked."""

    def __init__(self, classes=40, hid=64, steps=6):
        super().__init__()
        self.steps, self.classes = steps, classes
        def block(i, o, pool):
            return [nn.Conv2d(i, o, 3, padding=1, bias=False), nn.BatchNorm2d(o), nn.ReLU()] + (
                [nn.MaxPool2d(pool, pool)] if pool else [])
        self.cnn = nn.Sequential(*block(1, 32, (2, 2)), *block(32, 64, (2, 2)), *block(64, 64, (2, 1)),
                                 *block(64, 64, (4, 1)))
        self.rnn = nn.LSTM(64, hid // 2, bidirectional=True, batch_first=True)
        self.wq, self.wk, self.v = nn.Linear(hid, hid), nn.Linear(hid, hid), nn.Linear(hid, 1)
        self.emb = nn.Embedding(classes, hid)
        self.cell = nn.GRUCell(2 * hid, hid)
        self.fc = nn.Linear(hid, classes)
        self.hid = hid

    def forward(self, x):
        f = self.cnn(x).squeeze(2).permute(0, 2, 1)  # N x T x C
        enc, _ = self.rnn(f)
        k = self.wk(enc)
        n = x.shape[0]
        h = torch.zeros(n, self.hid)
        prev = torch.zeros(n, dtype=torch.long)
        outs = []
        for _ in range(self.steps):
            e = self.v(torch.tanh(k + self.wq(h).unsqueeze(1))).squeeze(2)
            a = torch.softmax(e, dim=1)
            ctx = torch.bmm(a.unsqueeze(1), enc).squeeze(1)
            h = self.cell(torch.cat([self.emb(prev), ctx], 1), h)
            o = self.fc(h)
            outs.append(o)
            prev = o.argmax(1)
        return torch.stack(outs, 1)


class Det(nn.Module):
    """A torchvision detector taking one 1 x 3 x H x W tensor; outputs boxes, scores, labels(, keypoints)."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, x):
        d = self.m([x[0]])[0]
        return tuple(d[k] for k in ("boxes", "scores", "labels", "keypoints") if k in d)


class Raft(nn.Module):
    """raft_small over one 1 x 6 x H x W input (two frames stacked), 3 flow updates, last flow."""

    def __init__(self):
        super().__init__()
        self.m = torchvision.models.optical_flow.raft_small(weights=None)

    def forward(self, x):
        return self.m(x[:, :3], x[:, 3:], num_flow_updates=3)[-1]


def s3d_small():
    m = torchvision.models.video.s3d(weights=None, num_classes=50)
    m.avgpool = nn.AdaptiveAvgPool3d(1)
    return m


def det(name, **kw):
    return lambda: Det(getattr(torchvision.models.detection, name)(weights=None, weights_backbone=None, **kw))


class UNetGN(nn.Module):
    """A small diffusion/segmentation-style UNet: Conv + GroupNorm + SiLU residual blocks, a
    self-attention block at the lowest resolution, a LayerNorm over (C, H, W) (multi-axis
    normalisation), bilinear Resize up, skip Concats."""

    def __init__(self, c=32, size=64):
        super().__init__()
        def rb(i, o):
            return nn.ModuleDict({"n1": nn.GroupNorm(8, i), "c1": nn.Conv2d(i, o, 3, 1, 1), "n2": nn.GroupNorm(8, o),
                                  "c2": nn.Conv2d(o, o, 3, 1, 1), "sk": nn.Conv2d(i, o, 1) if i != o else nn.Identity()})
        self.inp = nn.Conv2d(3, c, 3, 1, 1)
        self.d1, self.d2, self.d3 = rb(c, c), rb(c, 2 * c), rb(2 * c, 4 * c)
        self.down = nn.ModuleList(nn.Conv2d(k, k, 3, 2, 1) for k in (c, 2 * c))
        self.an = nn.GroupNorm(8, 4 * c)
        self.qkv, self.proj = nn.Conv2d(4 * c, 12 * c, 1), nn.Conv2d(4 * c, 4 * c, 1)
        self.lnchw = nn.LayerNorm([4 * c, size // 4, size // 4])
        self.u2, self.u1 = rb(6 * c, 2 * c), rb(3 * c, c)
        self.out = nn.Sequential(nn.GroupNorm(8, c), nn.SiLU(), nn.Conv2d(c, 3, 3, 1, 1))

    @staticmethod
    def run(b, x):
        h = b["c1"](F.silu(b["n1"](x)))
        h = b["c2"](F.silu(b["n2"](h)))
        return b["sk"](x) + h

    def forward(self, x):
        h1 = self.run(self.d1, self.inp(x))
        h2 = self.run(self.d2, self.down[0](h1))
        h3 = self.run(self.d3, self.down[1](h2))
        n, c, hh, ww = h3.shape
        q, k, v = self.qkv(self.an(h3)).reshape(n, 3, c, hh * ww).unbind(1)
        a = torch.softmax(torch.bmm(q.transpose(1, 2), k) * c ** -0.5, dim=-1)
        h3 = self.lnchw(h3 + self.proj(torch.bmm(v, a.transpose(1, 2)).reshape(n, c, hh, ww)))
        u = F.interpolate(h3, scale_factor=2.0, mode="bilinear", align_corners=False)
        u = self.run(self.u2, torch.cat([u, h2], 1))
        u = F.interpolate(u, scale_factor=2.0, mode="bilinear", align_corners=False)
        u = self.run(self.u1, torch.cat([u, h1], 1))
        return self.out(u)


class C2f(nn.Module):
    """YOLOv8's block: a 1x1 conv whose output is split in two (Split), n bottlenecks chained on
    the second half, every intermediate concatenated."""

    def __init__(self, cin, cout, n=1):
        super().__init__()
        self.h = cout // 2
        self.cv1, self.cv2 = CBS(cin, 2 * self.h), CBS((2 + n) * self.h, cout)
        self.m = nn.ModuleList(nn.Sequential(CBS(self.h, self.h, 3), CBS(self.h, self.h, 3)) for _ in range(n))

    def forward(self, x):
        y = list(self.cv1(x).split((self.h, self.h), 1))
        for m in self.m:
            y.append(y[-1] + m(y[-1]))
        return self.cv2(torch.cat(y, 1))


class Yolo8Like(nn.Module):
    """A YOLOv8n-shaped detector with its decoding head: C2f blocks, SPPF, an FPN neck, decoupled
    box / class branches; the box branch's 4 x 16 bins go through DFL (Softmax over the bins, then
    a fixed 1x1 convolution with weights 0..15), classes through Sigmoid, all scales concatenated."""

    def __init__(self, w=16, nc=20, reg=16):
        super().__init__()
        self.reg, self.nc = reg, nc
        self.stem = CBS(3, w, 3, 2)
        self.s2 = nn.Sequential(CBS(w, 2 * w, 3, 2), C2f(2 * w, 2 * w))
        self.s3 = nn.Sequential(CBS(2 * w, 4 * w, 3, 2), C2f(4 * w, 4 * w, 2))
        self.s4 = nn.Sequential(CBS(4 * w, 8 * w, 3, 2), C2f(8 * w, 8 * w, 2))
        self.sppf_in, self.sppf_out = CBS(8 * w, 4 * w), CBS(16 * w, 8 * w)
        self.td3 = C2f(12 * w, 4 * w)
        self.box = nn.ModuleList(nn.Sequential(CBS(c, 2 * w, 3), nn.Conv2d(2 * w, 4 * reg, 1)) for c in (4 * w, 8 * w))
        self.cls = nn.ModuleList(nn.Sequential(CBS(c, 2 * w, 3), nn.Conv2d(2 * w, nc, 1)) for c in (4 * w, 8 * w))
        self.dfl = nn.Conv2d(reg, 1, 1, bias=False)
        with torch.no_grad():
            self.dfl.weight.copy_(torch.arange(reg, dtype=torch.float32).view(1, reg, 1, 1))

    def forward(self, x):
        p3 = self.s3(self.s2(self.stem(x)))
        s = self.sppf_in(self.s4(p3))
        m1 = F.max_pool2d(s, 5, 1, 2)
        m2 = F.max_pool2d(m1, 5, 1, 2)
        p4 = self.sppf_out(torch.cat([s, m1, m2, F.max_pool2d(m2, 5, 1, 2)], 1))
        o3 = self.td3(torch.cat([F.interpolate(p4, scale_factor=2.0, mode="nearest"), p3], 1))
        outs = []
        for o, b, c in zip((o3, p4), self.box, self.cls):
            n, _, hh, ww = o.shape
            bx = b(o).view(n, 4, self.reg, hh * ww).transpose(2, 1).softmax(1)  # n, reg, 4, a
            bx = self.dfl(bx).view(n, 4, hh * ww)
            outs.append(torch.cat([bx, c(o).sigmoid().view(n, self.nc, hh * ww)], 1))
        return torch.cat(outs, 2)


class Ghost(nn.Module):
    """GhostNet's module: a 1x1 primary convolution and a cheap depthwise 3x3 on its output,
    concatenated and sliced to the channel count."""

    def __init__(self, cin, cout, act=True):
        super().__init__()
        h = (cout + 1) // 2
        self.cout = cout
        self.p = nn.Sequential(nn.Conv2d(cin, h, 1, bias=False), nn.BatchNorm2d(h), nn.ReLU() if act else nn.Identity())
        self.c = nn.Sequential(nn.Conv2d(h, h, 3, 1, 1, groups=h, bias=False), nn.BatchNorm2d(h),
                               nn.ReLU() if act else nn.Identity())

    def forward(self, x):
        a = self.p(x)
        return torch.cat([a, self.c(a)], 1)[:, :self.cout]


class GhostLike(nn.Module):
    """A GhostNet-shaped classifier: ghost bottlenecks (expand, depthwise stride 2, squeeze-excite
    with hard-sigmoid gates, project) with residual sums, odd channel counts sliced."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        cfg = [(16, 48, 24, 2), (24, 72, 24, 1), (24, 72, 40, 2), (40, 120, 40, 1), (40, 240, 81, 2)]
        self.blocks = nn.ModuleList()
        for i, e, o, st in cfg:
            self.blocks.append(nn.ModuleDict({
                "g1": Ghost(i, e), "dw": nn.Sequential(nn.Conv2d(e, e, 3, st, 1, groups=e, bias=False), nn.BatchNorm2d(e)),
                "se1": nn.Conv2d(e, e // 4, 1), "se2": nn.Conv2d(e // 4, e, 1), "g2": Ghost(e, o, act=False),
                "sc": nn.Identity() if (i == o and st == 1) else nn.Sequential(
                    nn.Conv2d(i, i, 3, st, 1, groups=i, bias=False), nn.BatchNorm2d(i), nn.Conv2d(i, o, 1, bias=False),
                    nn.BatchNorm2d(o))}))
        self.head = nn.Linear(81, 100)

    def forward(self, x):
        x = self.stem(x)
        for b in self.blocks:
            y = b["dw"](b["g1"](x))
            g = F.hardsigmoid(b["se2"](F.relu(b["se1"](F.adaptive_avg_pool2d(y, 1)))))
            x = b["g2"](y * g) + b["sc"](x)
        return self.head(F.adaptive_avg_pool2d(x, 1).flatten(1))


class MobileViTLike(nn.Module):
    """A MobileViT-shaped net: inverted residuals, then a MobileViT block (local 3x3 and 1x1
    convolutions, the map unfolded into 2x2 patches by Reshape / Transpose, a pre-norm
    transformer with SiLU over the patches, folded back, fused with the input by Concat)."""

    def __init__(self, c=32, d=48, heads=4):
        super().__init__()
        self.d, self.heads = d, heads
        self.stem = nn.Sequential(nn.Conv2d(3, c, 3, 2, 1, bias=False), nn.BatchNorm2d(c), nn.SiLU())
        self.mv2 = nn.Sequential(nn.Conv2d(c, 2 * c, 1, bias=False), nn.BatchNorm2d(2 * c), nn.SiLU(),
                                 nn.Conv2d(2 * c, 2 * c, 3, 2, 1, groups=2 * c, bias=False), nn.BatchNorm2d(2 * c),
                                 nn.SiLU(), nn.Conv2d(2 * c, c, 1, bias=False), nn.BatchNorm2d(c))
        self.local = nn.Sequential(nn.Conv2d(c, c, 3, 1, 1, bias=False), nn.BatchNorm2d(c), nn.SiLU(),
                                   nn.Conv2d(c, d, 1, bias=False))
        self.ln1, self.ln2, self.ln3 = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 2 * d), nn.Linear(2 * d, d)
        self.back = nn.Sequential(nn.Conv2d(d, c, 1, bias=False), nn.BatchNorm2d(c), nn.SiLU())
        self.fuse = nn.Sequential(nn.Conv2d(2 * c, c, 3, 1, 1, bias=False), nn.BatchNorm2d(c), nn.SiLU())
        self.head = nn.Linear(c, 10)

    def forward(self, x):
        x = self.mv2(self.stem(x))
        n, _, hh, ww = x.shape
        t = self.local(x)  # n, d, h, w -> patches: (n*4, h*w/4, d)
        t = t.reshape(n, self.d, hh // 2, 2, ww // 2, 2).permute(0, 3, 5, 2, 4, 1).reshape(n * 4, hh * ww // 4, self.d)
        q, k, v = self.qkv(self.ln1(t)).reshape(n * 4, -1, 3, self.heads, self.d // self.heads).permute(2, 0, 3, 1, 4)
        a = torch.softmax(q @ k.transpose(-1, -2) / (self.d // self.heads) ** 0.5, -1)
        t = t + self.proj((a @ v).transpose(1, 2).reshape(n * 4, -1, self.d))
        t = self.ln3(t + self.fc2(F.silu(self.fc1(self.ln2(t)))))
        t = t.reshape(n, 2, 2, hh // 2, ww // 2, self.d).permute(0, 5, 3, 1, 4, 2).reshape(n, self.d, hh, ww)
        x = self.fuse(torch.cat([x, self.back(t)], 1))
        return self.head(x.mean((2, 3)))


class AudioEnc(nn.Module):
    """A wav2vec2-shaped speech encoder on a raw waveform of dynamic length: strided Conv1d
    feature extractor (GroupNorm with one group per channel on the first, GELU), LayerNorm and a
    projection, a grouped positional Conv1d, one transformer layer, per-frame CTC logits."""

    def __init__(self, c=64, d=96, vocab=32):
        super().__init__()
        self.fe = nn.ModuleList([nn.Conv1d(1, c, 10, 5, bias=False), nn.Conv1d(c, c, 3, 2, bias=False),
                                 nn.Conv1d(c, c, 3, 2, bias=False), nn.Conv1d(c, c, 2, 2, bias=False)])
        self.gn = nn.GroupNorm(c, c)
        self.ln, self.proj = nn.LayerNorm(c), nn.Linear(c, d)
        self.pos = nn.Conv1d(d, d, 15, padding=7, groups=8)
        layer = nn.TransformerEncoderLayer(d, 4, 2 * d, dropout=0.0, activation="gelu", batch_first=True, norm_first=True)
        self.enc = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        self.out = nn.Linear(d, vocab)

    def forward(self, wav):
        x = wav.unsqueeze(1)
        for i, conv in enumerate(self.fe):
            x = conv(x)
            x = F.gelu(self.gn(x) if i == 0 else x)
        x = self.proj(self.ln(x.transpose(1, 2)))
        x = x + F.gelu(self.pos(x.transpose(1, 2))).transpose(1, 2)
        return self.out(self.enc(x)).log_softmax(-1)


class CenterNetLike(nn.Module):
    """A CenterNet-shaped keypoint detector: a ResNet-18 trunk, three ConvTranspose upsamplings
    with BatchNorm / ReLU, heat-map (Sigmoid), size and offset heads, and the max-pool "NMS"
    (MaxPool 3x3 stride 1, Equal, Cast, Mul) exporters emit."""

    def __init__(self, nc=8):
        super().__init__()
        r = torchvision.models.resnet18(weights=None)
        self.trunk = nn.Sequential(r.conv1, r.bn1, r.relu, r.maxpool, r.layer1, r.layer2, r.layer3, r.layer4)
        ups, c = [], 512
        for o in (128, 64, 64):
            ups += [nn.ConvTranspose2d(c, o, 4, 2, 1, bias=False), nn.BatchNorm2d(o), nn.ReLU()]
            c = o
        self.up = nn.Sequential(*ups)
        self.hm = nn.Sequential(nn.Conv2d(64, 32, 3, 1, 1), nn.ReLU(), nn.Conv2d(32, nc, 1))
        self.wh = nn.Sequential(nn.Conv2d(64, 32, 3, 1, 1), nn.ReLU(), nn.Conv2d(32, 2, 1))
        self.off = nn.Sequential(nn.Conv2d(64, 32, 3, 1, 1), nn.ReLU(), nn.Conv2d(32, 2, 1))

    def forward(self, x):
        f = self.up(self.trunk(x))
        heat = torch.sigmoid(self.hm(f))
        keep = (F.max_pool2d(heat, 3, 1, 1) == heat).float()
        return torch.cat([heat * keep, self.wh(f), self.off(f)], 1)


class TfStyle(nn.Module):
    """The graph shape TensorFlow / Keras converters (tf2onnx) give a MobileNet: an NHWC input
    transposed to NCHW, explicit Pad before each strided convolution ("SAME" padding), BatchNorm
    as a per-channel Mul and Add, ReLU6 as Clip, the pool as ReduceMean, the classifier as MatMul
    plus Add, Softmax."""

    def __init__(self):
        super().__init__()
        self.convs = nn.ModuleList()
        self.scales, self.shifts = nn.ParameterList(), nn.ParameterList()
        cfg = [(3, 16, 3, 2, 1), (16, 16, 3, 1, 16), (16, 32, 1, 1, 1), (32, 32, 3, 2, 32), (32, 64, 1, 1, 1),
               (64, 64, 3, 1, 64), (64, 64, 1, 1, 1)]
        self.cfg = cfg
        for i, o, k, st, g in cfg:
            self.convs.append(nn.Conv2d(i, o, k, st, 0 if st == 2 else (k - 1) // 2, groups=g, bias=False))
            self.scales.append(nn.Parameter(torch.rand(1, o, 1, 1) * 0.5 + 0.75))
            self.shifts.append(nn.Parameter(torch.randn(1, o, 1, 1) * 0.1))
        self.w = nn.Parameter(torch.randn(64, 100) * 0.1)
        self.b = nn.Parameter(torch.randn(100) * 0.01)

    def forward(self, x):
        x = x.permute(0, 3, 1, 2)
        for conv, sc, sh, (i, o, k, st, g) in zip(self.convs, self.scales, self.shifts, self.cfg):
            if st == 2:
                x = F.pad(x, (0, 1, 0, 1))  # SAME for an even input: the extra row / column after
            x = torch.clamp(conv(x) * sc + sh, 0.0, 6.0)
        return torch.softmax(x.mean((2, 3)) @ self.w + self.b, -1)


class Espcn(nn.Module):
    """An ESPCN-shaped super-resolution net: Tanh convolutions on a one-channel image, the last
    one's 9 channels rearranged into a 3x larger image by PixelShuffle (DepthToSpace)."""

    def __init__(self, r=3):
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(1, 64, 5, 1, 2), nn.Conv2d(64, 32, 3, 1, 1)
        self.c3 = nn.Conv2d(32, r * r, 3, 1, 1)
        self.ps = nn.PixelShuffle(r)

    def forward(self, x):
        return torch.sigmoid(self.ps(self.c3(torch.tanh(self.c2(torch.tanh(self.c1(x[:, :1])))))))


class HRLike(nn.Module):
    """An HRNet-shaped pose net: a high and a low resolution branch exchanging features (strided
    convolution down, 1x1 convolution + bilinear Resize up, Add), then heat maps at 1/4."""

    def __init__(self, c=32, joints=17):
        super().__init__()
        cbr = lambda i, o, s=1: nn.Sequential(nn.Conv2d(i, o, 3, s, 1, bias=False), nn.BatchNorm2d(o), nn.ReLU())  # noqa: E731
        self.stem = nn.Sequential(cbr(3, c, 2), cbr(c, c, 2))
        self.hi1, self.lo1 = cbr(c, c), cbr(c, 2 * c, 2)
        self.hi2, self.lo2 = cbr(c, c), cbr(2 * c, 2 * c)
        self.down = nn.Sequential(nn.Conv2d(c, 2 * c, 3, 2, 1, bias=False), nn.BatchNorm2d(2 * c))
        self.up = nn.Sequential(nn.Conv2d(2 * c, c, 1, bias=False), nn.BatchNorm2d(c))
        self.head = nn.Conv2d(c, joints, 1)

    def forward(self, x):
        x = self.stem(x)
        h, lo = self.hi1(x), self.lo1(x)
        h, lo = self.hi2(h), self.lo2(lo)
        h2 = F.relu(h + F.interpolate(self.up(lo), size=h.shape[2:], mode="bilinear", align_corners=False))
        lo2 = F.relu(lo + self.down(h))
        h3 = h2 + F.interpolate(self.up(lo2), size=h.shape[2:], mode="bilinear", align_corners=False)
        return self.head(h3)


class SegArgmax(nn.Module):
    """A segmentation net ending in the class map, as PaddleSeg / TF exports ship it: logits
    upsampled to the input size, ArgMax over the classes (int64 output)."""

    def __init__(self, classes=6):
        super().__init__()
        cbr = lambda i, o, s=1: nn.Sequential(nn.Conv2d(i, o, 3, s, 1, bias=False), nn.BatchNorm2d(o), nn.ReLU())  # noqa: E731
        self.enc = nn.Sequential(cbr(3, 16, 2), cbr(16, 32, 2), cbr(32, 32))
        self.cls = nn.Conv2d(32, classes, 1)

    def forward(self, x):
        logits = F.interpolate(self.cls(self.enc(x)), size=x.shape[2:], mode="bilinear", align_corners=False)
        return torch.argmax(logits, 1)


def tv(name, **kw):
    return lambda: getattr(torchvision.models, name)(weights=None, **kw)


# name -> (constructor, input kind, size)
MODELS = {
    "shufflenet_v2": (tv("shufflenet_v2_x1_0"), "image", 128),
    "squeezenet": (tv("squeezenet1_1"), "image", 128),
    "googlenet": (tv("googlenet", aux_logits=False, init_weights=True), "image", 128),
    "densenet121": (tv("densenet121"), "image", 96),
    "regnet": (tv("regnet_x_400mf"), "image", 128),
    "mnasnet": (tv("mnasnet0_5"), "image", 128),
    "convnext": (tv("convnext_tiny"), "image", 64),
    "crnn_lstm": (lambda: CRNN("lstm"), "text", 100),
    "crnn_gru": (lambda: CRNN("gru"), "text", 100),
    "textdet": (TextDet, "image", 128),
    "swin_like": (SwinLike, "tokens", 49),
    "edges": (Edges, "image", 32),
    "swin_t": (tv("swin_t"), "image", 112),
    "text_encoder": (TextEncoder, "ids", 24),
    "causal_lm": (CausalLM, "ids", 20),
    "inception_v3": (tv("inception_v3", aux_logits=False, init_weights=False), "image", 139),
    "deeplabv3": (lambda: torchvision.models.segmentation.deeplabv3_mobilenet_v3_large(
        weights=None, weights_backbone=None, aux_loss=False), "image", 128),
    "lraspp": (lambda: torchvision.models.segmentation.lraspp_mobilenet_v3_large(
        weights=None, weights_backbone=None), "image", 128),
    "r3d_18": (lambda: torchvision.models.video.r3d_18(weights=None), "video", 56),
    "yolo_like": (YoloLike, "image", 320),
    "efficientnet_v2": (tv("efficientnet_v2_s"), "image", 160),
    "ssdlite": (lambda: torchvision.models.detection.ssdlite320_mobilenet_v3_large(
        weights=None, weights_backbone=None, score_thresh=0.0), "image", 320),
    # (ctor, kind, size[, opset]; 13 when not given). Added 2026-12-06: classes users deploy
    # that the ones above lack (squeeze-excite + grouped conv, dilated segmentation, video,
    # optical flow, torchvision's detectors at their documented opset 11 and at 13, a PP-OCR DB
    # detector, an attention OCR decoder, a GroupNorm UNet) and other exporters' forms (opsets
    # 11 / 16 / 17, no constant folding, initializers listed as inputs)
    "regnet_y_400mf": (tv("regnet_y_400mf"), "image", 128),
    "resnext50": (tv("resnext50_32x4d"), "image", 64),
    "s3d": (s3d_small, "video", 64),
    "fcn_resnet50": (lambda: torchvision.models.segmentation.fcn_resnet50(weights=None, weights_backbone=None, aux_loss=False), "image", 96),
    "frcnn_mnv3": (det("fasterrcnn_mobilenet_v3_large_320_fpn", box_score_thresh=0.0), "detimage", 320, 11),
    "retinanet": (det("retinanet_resnet50_fpn", min_size=256, max_size=256, score_thresh=0.0), "detimage", 256, 11),
    "fcos": (det("fcos_resnet50_fpn", min_size=256, max_size=256, score_thresh=0.0), "detimage", 256, 11),
    "keypointrcnn": (det("keypointrcnn_resnet50_fpn", min_size=256, max_size=256, box_score_thresh=0.0), "detimage", 256, 11),
    "raft_small": (Raft, "pair", 128, 16),
    "dbnet": (DBNet, "image", 128),
    "attn_ocr": (AttnOCR, "text", 100),
    "convnext_o17": (tv("convnext_tiny"), "image", 64, 17),
    "convnext_o16": (tv("convnext_tiny"), "image", 64, 16),
    "swin_t_o17": (tv("swin_t"), "image", 112, 17),
    "swin_t_o16": (tv("swin_t"), "image", 112, 16),
    "text_enc_o17": (TextEncoder, "ids", 24, 17),
    "text_enc_o16": (TextEncoder, "ids", 24, 16),
    "swin_like_o17": (SwinLike, "tokens", 49, 17),
    "dbnet_o17": (DBNet, "image", 128, 17),
    "unet_gn_o17": (UNetGN, "image", 64, 17),
    "unet_gn": (UNetGN, "image", 64),
    "text_enc_nofold": (TextEncoder, "ids", 24),
    "text_enc_initin": (TextEncoder, "ids", 24),
    "dbnet_nofold": (DBNet, "image", 128),
    "dbnet_initin": (DBNet, "image", 128),
    "vit_b_16": (tv("vit_b_16"), "image", 224),
    "keypointrcnn_o13": (det("keypointrcnn_resnet50_fpn", min_size=256, max_size=256, box_score_thresh=0.0), "detimage", 256, 13),
    "frcnn_o13": (det("fasterrcnn_mobilenet_v3_large_320_fpn", box_score_thresh=0.0), "detimage", 320, 13),
    "fcos_o13": (det("fcos_resnet50_fpn", min_size=256, max_size=256, score_thresh=0.0), "detimage", 256, 13),
    "retinanet_o13": (det("retinanet_resnet50_fpn", min_size=256, max_size=256, score_thresh=0.0), "detimage", 256, 13),
    "dbnet_o11": (DBNet, "image", 128, 11),
    "text_enc_o11": (TextEncoder, "ids", 24, 11),
    "attn_ocr_o17": (AttnOCR, "text", 100, 17),
    "mnv3_o17": (tv("mobilenet_v3_small"), "image", 96, 17),
    # Added 2026-12-06 (second stop): YOLOv8's C2f / DFL decoding head, GhostNet, MobileViT,
    # a wav2vec2-like speech encoder (Conv1d, GroupNorm, grouped positional conv), CenterNet's
    # ConvTranspose + max-pool NMS, and a tf2onnx-shaped MobileNet (NHWC input, Pad, Mul / Add
    # BatchNorm, Clip, ReduceMean, MatMul)
    "yolo8_like": (Yolo8Like, "image", 256),
    "ghost_like": (GhostLike, "image", 128),
    "mobilevit_like": (MobileViTLike, "image", 64),
    "audio_enc": (AudioEnc, "audio", 8000),
    "centernet_like": (CenterNetLike, "image", 128),
    "tf_style": (TfStyle, "nhwc", 96),
    "espcn": (Espcn, "image", 64),
    "hr_like": (HRLike, "image", 128),
    "seg_argmax": (SegArgmax, "image", 96),
}


def sample(kind, size, rng, width=None):
    if kind == "detimage":
        return sample("image", size, rng) * 0.25 + 0.45  # detectors normalise themselves: 0..1 pixels
    if kind == "pair":
        a = sample("image", size, rng)
        return np.concatenate([a, np.roll(a, (2, 3), (2, 3))], 1)
    if kind == "image":
        # smooth noise: neighbouring pixels correlate as in photos
        x = rng.standard_normal((1, 3, size // 8, size // 8)).astype(np.float32)
        x = F.interpolate(torch.from_numpy(x), size=(size, size), mode="bilinear", align_corners=False)
        return (x + 0.3 * torch.randn(1, 3, size, size, generator=torch.Generator().manual_seed(int(rng.integers(1 << 30))))).numpy()
    if kind == "text":
        w = width or size
        x = rng.random((1, 1, 32, w)).astype(np.float32)
        return (x > 0.7).astype(np.float32) * 2 - 1 + 0.1 * rng.standard_normal((1, 1, 32, w)).astype(np.float32)
    if kind == "video":
        x = rng.standard_normal((1, 3, 2, size // 8, size // 8)).astype(np.float32)
        return F.interpolate(torch.from_numpy(x), size=(8, size, size), mode="trilinear").numpy()
    if kind == "audio":
        n = width or size
        t = np.arange(n, dtype=np.float32) / 8000.0
        f = rng.uniform(100, 800, 3)
        return (0.3 * np.sin(2 * np.pi * f[:, None] * t).sum(0) + 0.05 * rng.standard_normal(n)).astype(np.float32)[None]
    if kind == "nhwc":
        return sample("image", size, rng).transpose(0, 2, 3, 1).copy()
    if kind == "ids":
        return rng.integers(0, 500, (1, width or size)).astype(np.int64)
    return rng.standard_normal((1, size, 96)).astype(np.float32)


def export(out, name):
    ctor, kind, size = MODELS[name][:3]
    opset = MODELS[name][3] if len(MODELS[name]) > 3 else 13
    torch.manual_seed(0)
    m = ctor().eval()
    g = torch.Generator().manual_seed(1)
    for mod in m.modules():
        if isinstance(mod, (nn.BatchNorm2d, nn.BatchNorm3d)):
            c = mod.num_features
            mod.running_mean.copy_(torch.randn(c, generator=g) * 0.1)
            mod.running_var.copy_(torch.rand(c, generator=g) * 0.5 + 0.5)
            mod.weight.data.copy_(torch.rand(c, generator=g) * 0.5 + 0.75)
            mod.bias.data.copy_(torch.randn(c, generator=g) * 0.1)
    for prm in m.parameters():
        # torch's trunc_normal_(std=0.02) (ConvNeXt's init) clamps to its bounds a=-2, b=2 where
        # erfinv overflows: a few weights of exactly +-2, 100 sigma out, that no trained net has
        # and that wreck a per-tensor FC weight scale
        with torch.no_grad():
            big = prm.abs() >= 1.999
            if prm.dim() > 1 and big.any():
                prm[big] = 0.0
    if name == "yolo8_like":
        with torch.no_grad():  # DFL's fixed weights 0..15 (the clamp above zeroed those >= 2)
            m.dfl.weight.copy_(torch.arange(m.reg, dtype=torch.float32).view(1, m.reg, 1, 1))
    if name == "ssdlite":
        # random heads give every anchor a score within 1e-7 of 1/91: the detections' order is
        # then decided by last-bit rounding (float ties); sharper class logits make it a test
        with torch.no_grad():
            for prm in m.head.classification_head.parameters():
                prm.mul_(40.0)
    if name.startswith("retinanet_"):
        # the randomised BatchNorms give cls logits of std ~50: every score saturates to 1.0 and
        # NMS's choice among ties is implementation-defined; scale to std ~1
        with torch.no_grad():
            m.m.head.classification_head.cls_logits.weight.mul_(0.02)
    if name == "vit_b_16":
        # torchvision zero-initialises the ViT head: the output is all zeros (cosine 1 whatever)
        with torch.no_grad():
            m.heads.head.weight.normal_(0, 0.02, generator=torch.Generator().manual_seed(3))
    if name.startswith("keypointrcnn_"):
        # random box regressors push every box off the image (all removed as small): damp them
        with torch.no_grad():
            m.m.rpn.head.bbox_pred.weight.mul_(0.01)
            m.m.roi_heads.box_predictor.bbox_pred.weight.mul_(0.01)
    rng = np.random.default_rng(7)
    d = os.path.join(out, name)
    for sub in ("cal", "eval"):
        os.makedirs(os.path.join(d, sub), exist_ok=True)
    for k in range(2):
        np.save(os.path.join(d, "cal", "%d.npy" % k), sample(kind, size, rng))
    # held out: the text models at another width, the tokens at another length (dynamic axes)
    np.save(os.path.join(d, "eval", "0.npy"),
            sample(kind, size if kind in ("image", "video", "detimage", "pair", "nhwc") else size + 28 if kind == "text" else size + 15, rng,
                   width=None if kind in ("image", "video", "detimage", "pair", "nhwc") else size + 28 if kind == "text" else size + 15))
    x = torch.from_numpy(sample(kind, size, rng))
    dyn = {"x": {0: "N"}, "y": {0: "N"}}
    if kind == "text":
        dyn = {"x": {3: "W"}, "y": {0: "T"}}
    elif kind in ("tokens", "ids"):
        dyn = {"x": {0: "N", 1: "T"}, "y": {0: "N"}}
    elif kind in ("detimage", "pair"):
        dyn = {}
    elif kind == "audio":
        dyn = {"x": {0: "N", 1: "L"}, "y": {0: "N", 1: "T"}}
    # with grad enabled, as nn.TransformerEncoder's fused fast path (no ONNX export) is off then
    torch.onnx.export(m, x, os.path.join(out, name + ".onnx"), opset_version=opset, input_names=["x"],
                      output_names=["y"], dynamic_axes=dyn, do_constant_folding=not name.endswith("_nofold"),
                      keep_initializers_as_inputs=name.endswith("_initin"))
    print(name, flush=True)


if __name__ == "__main__":
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for n in sys.argv[2:] or MODELS:
        export(out, n)
