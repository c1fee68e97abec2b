#!/usr/bin/python3
"""calq's range calibrators (minmax, percentile, kl, mse; docs/numerics.md) held against an
independent NumPy reimplementation of their documented formulas, on real activations of the shared
models (UltraFace ONNX and MTCNN det2 Caffe, dumped with `calq run --dump-all`), asymmetric and
symmetric, and fed in 3 batches (the result must not depend on the split).

The histogram binning and the factors are float32 as in C, so they must agree bit for bit. The
searches are written differently here (KL from P and Q built per window; the squared error from an
antiderivative of the staircase, not per code cell): when the two pick different windows, the
choice of calq must be as good as NumPy's own by NumPy's measure (within 1e-9 relative), else it
is an error.

Usage: range_numpy_ref.py CALQ SHARED_DIR"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

f32 = np.float32
EPS = np.finfo(np.float32).eps
BINS = 1024  # the searches are quadratic in the bins; 1024 keeps this test short


def round_away(v):
    v = f32(v)
    t = np.trunc(v)
    return f32(t + np.sign(v)) if abs(v - t) >= f32(0.5) else f32(t)


def process_scale(s):
    s = f32(s)
    if s < EPS:
        s = f32(1.0)
    ok = bool(np.isfinite(s)) and not (f32(1.0) / s < EPS)
    return s, ok


def factors(lo, hi, asym, n=8):
    """IFMR's final step (amct-reference.md §3.5 / §3.6) on the clip [lo, hi]."""
    lo, hi = f32(lo), f32(hi)
    if asym:
        s, ok = process_scale(f32(f32(hi - lo) / f32(2 ** n - 1)))
        if not ok:
            return s, 0, False
        return s, -int(round_away(f32(lo / s))) - 2 ** (n - 1), True
    a = hi if abs(hi) > abs(lo) else lo
    lim = f32(2 ** (n - 1) - 1) if a > 0 else f32(2 ** (n - 1))
    s, ok = process_scale(f32(f32(abs(a)) / lim))
    return s, 0, ok


def rank(p, L):
    if abs(f32(p) - f32(1)) < np.finfo(np.float64).eps:
        return 1
    return L - int(np.floor(f32(f32(p) * f32(L))))


def forced(x):
    return min(f32(x.min()), f32(0)), max(f32(x.max()), f32(0))


def hist_signed(x, lo, hi, B):
    w = f32(f32(hi - lo) / f32(B))
    t = ((x - lo).astype(f32) / w).astype(f32)
    k = np.where(t < f32(B), np.trunc(t), B - 1).astype(np.int64)
    return np.bincount(np.clip(k, 0, B - 1), minlength=B).astype(np.int64), w


def hist_abs(x, A, B):
    w = f32(A / f32(B))
    t = (np.abs(x).astype(f32) / w).astype(f32)
    k = np.where(t < f32(B), np.trunc(t), B - 1).astype(np.int64)
    return np.bincount(np.clip(k, 0, B - 1), minlength=B).astype(np.int64), w


def first_window_with_zero(lo, w, B):
    z = max(int(np.ceil(-float(lo) / float(w))), 0)
    while z < B and f32(lo + f32(f32(z) * w)) < f32(0):
        z += 1
    return min(z, B)


def kl_window(h, i, nq):
    """KL(P || Q) by definition: P = h[:i] with the outliers in its last bin, Q = h[:i] merged into
    nq groups and spread over the bins where P is not 0."""
    total = float(h.sum())
    P = h[:i].astype(np.float64)
    inside = P.sum()
    if inside <= 0:
        return np.inf
    P[i - 1] += total - inside
    edges = (np.arange(nq + 1, dtype=np.int64) * i) // nq
    gid = np.searchsorted(edges, np.arange(i), side="right") - 1
    m = np.bincount(gid, weights=h[:i].astype(np.float64), minlength=nq)
    nz = np.bincount(gid, weights=(P > 0).astype(np.float64), minlength=nq)
    pos = P > 0
    if np.any(pos & (m[gid] == 0)):
        return np.inf
    Q = np.where(pos, m[gid] / np.maximum(nz[gid], 1), 0.0)
    p, q = P[pos] / total, Q[pos] / inside
    return float(np.sum(p * np.log(p / q)))


def staircase_G(x, s, o, qmin, qmax):
    """An antiderivative of (fq(t) - t)^2, fq the clamped staircase of step s and offset o."""
    x = np.asarray(x, dtype=np.float64)
    vmin, vmax = (qmin - o) * s, (qmax - o) * s
    xl, xh = (qmin - o + 0.5) * s, (qmax - o - 0.5) * s

    def below(t):
        return (t - vmin) ** 3 / 3.0

    def inner(t):
        c = np.floor((t - xl) / s)
        r = (t - xl) - c * s
        return below(xl) + c * s ** 3 / 12.0 + ((r - s / 2) ** 3 + (s / 2) ** 3) / 3.0

    g_hi = inner(np.float64(xh))
    return np.where(x < xl, below(x), np.where(x < xh, inner(x), g_hi + ((x - vmax) ** 3 - (xh - vmax) ** 3) / 3.0))


def hist_sse(h, lo, w, s, o, n=8):
    B = len(h)
    edges = float(lo) + np.arange(B + 1, dtype=np.float64) * float(w)
    G = staircase_G(edges, float(s), o, -(2 ** (n - 1)), 2 ** (n - 1) - 1)
    return float(np.sum(h / float(w) * (G[1:] - G[:-1])))


def reference(x, algo, asym, B=2048, p=0.99999):
    """(clip_lo, clip_hi, best_bins, loss_of(i) or None)."""
    lo, hi = forced(x)
    pos = abs(hi) > abs(lo)
    nonzero = x[x != 0]  # the histograms leave exact zeros out
    if algo == "minmax":
        return lo, hi, 0, None
    if algo == "percentile":
        s = np.sort(x)
        L = x.size
        vmax, vmin = s[L - rank(p, L)], s[rank(p, L) - 1]
        return min(f32(vmin), f32(0)), max(f32(vmax), f32(0)), 0, None
    A = f32(abs(lo)) if f32(abs(lo)) > hi else hi
    if algo == "kl":
        if not asym:
            h, w = hist_abs(nonzero, A, B)
            nq, imin = 2 ** 7, 2 ** 7

            def clip(i):
                T = f32(f32(i) * w)
                return (f32(0), T) if pos else (-T, f32(0))
        else:
            h, w = hist_signed(nonzero, lo, hi, B)
            if not pos:
                h = h[::-1].copy()
            nq = 2 ** 8
            imin = max(nq, first_window_with_zero(lo if pos else -hi, w, B))

            def clip(i):
                if pos:
                    return lo, max(f32(lo + f32(f32(i) * w)), f32(0))
                return min(f32(hi - f32(f32(i) * w)), f32(0)), hi
        loss = {i: kl_window(h, i, nq) for i in range(imin, B + 1)}
    else:  # mse
        h, w = hist_signed(nonzero, lo, hi, B)
        imin = max(1, first_window_with_zero(lo if pos else -hi, w, B)) if asym else 1

        def clip(i):
            if not asym:
                T = f32(f32(i) * f32(A / f32(B)))
                return (f32(0), T) if pos else (-T, f32(0))
            if pos:
                return lo, max(f32(lo + f32(f32(i) * w)), f32(0))
            return min(f32(hi - f32(f32(i) * w)), f32(0)), hi

        loss = {}
        for i in range(imin, B + 1):
            cl, ch = clip(i)
            s, o, ok = factors(cl, ch, asym)
            if ok:
                loss[i] = hist_sse(h, lo, w, s, o) / x.size
    best = None
    for i in sorted(loss):
        cl, ch = clip(i)
        if not np.isfinite(loss[i]) or not factors(cl, ch, asym)[2]:
            continue
        if best is None or loss[i] < loss[best]:
            best = i
    cl, ch = clip(best)
    return cl, ch, best, (loss, clip)


def dump(calq, args, out):
    subprocess.run([calq, "run"] + args + ["--dump-all", "--output-dir", out], check=True, capture_output=True)
    return out


def main():
    calq, shared = sys.argv[1], sys.argv[2]
    work = tempfile.mkdtemp(prefix="calq_range_")
    uf = os.path.join(shared, "models/ultraface/version-slim-320.onnx")
    det2 = os.path.join(shared, "models/mtcnn/det2")
    photo = os.path.join(shared, "data/faces/mtcnn_test1.jpg")
    if not (os.path.exists(uf) and os.path.exists(det2 + ".prototxt")):
        print("shared models missing")
        return 77
    d1 = dump(calq, [uf, "--image", "input=" + photo, "--resize", "320x240", "--mean", "127", "--std", "128"],
              os.path.join(work, "uf"))
    d2 = dump(calq, ["--model", det2 + ".prototxt", "--weights", det2 + ".caffemodel", "--image", "data=" + photo,
                     "--resize", "24x24", "--mean", "127.5", "--std", "128"], os.path.join(work, "det2"))
    # real activations of several kinds: the signed image input, post-ReLU maps, depthwise
    # inputs, a head input; PReLU (signed) maps of MTCNN
    names = [f for f in sorted(os.listdir(d1)) if f.endswith(".npy") and f != "input.npy"]
    names = [f for f in names if np.load(os.path.join(d1, f), mmap_mode="r").dtype == np.float32
             and np.load(os.path.join(d1, f), mmap_mode="r").size >= 1000]
    picks = [os.path.join(d1, "input.npy")] + [os.path.join(d1, names[k * len(names) // 4]) for k in range(1, 4)]
    picks += [os.path.join(d2, f) for f in ("conv1.npy", "pool2.npy", "conv4_flatten.npy")
              if os.path.exists(os.path.join(d2, f))]
    bad = near = 0
    for path in picks:
        x = np.load(path).astype(f32).ravel()
        for algo in ("minmax", "percentile", "kl", "mse"):
            for asym in (True, False):
                args = [calq, "factors", "--algo", algo, "--input", path, "--json", "--bins", str(BINS)]
                args += [] if asym else ["--symmetric"]
                one = json.loads(subprocess.run(args, check=True, capture_output=True, text=True).stdout)
                three = json.loads(subprocess.run(args + ["--batches", "3", "--threads", "2"], check=True,
                                                  capture_output=True, text=True).stdout)
                for k in ("scale", "offset", "clip_min", "clip_max", "best_bins", "loss"):
                    if one[k] != three[k]:
                        print(f"FAIL {path} {algo}: {k} differs between 1 and 3 batches: {one[k]} {three[k]}")
                        bad += 1
                cl, ch, best, extra = reference(x, algo, asym, B=BINS)
                s, o, _ = factors(cl, ch, asym)
                same = f32(one["scale"]) == s and one["offset"] == o and f32(one["clip_min"]) == cl and \
                    f32(one["clip_max"]) == ch and (best == 0 or one["best_bins"] == best)
                tag = "same"
                if not same and extra is not None and one["best_bins"] in extra[0]:
                    loss = extra[0]
                    mine, theirs = loss[one["best_bins"]], loss[best]
                    c2 = extra[1](one["best_bins"])
                    s2, o2, _ = factors(*c2, asym)
                    if mine <= theirs * (1 + 1e-9) + 1e-300 and f32(one["scale"]) == s2 and one["offset"] == o2:
                        tag = f"near tie ({one['best_bins']} vs {best}: {mine:.12g} vs {theirs:.12g})"
                        near += 1
                        same = True
                if not same:
                    bad += 1
                    tag = (f"DIFFERENT: numpy clip [{cl:.9g}, {ch:.9g}] bins {best} -> {s:.9g}/{o}; calq "
                           f"[{one['clip_min']:.9g}, {one['clip_max']:.9g}] bins {one['best_bins']} -> "
                           f"{one['scale']:.9g}/{one['offset']}")
                print(f"{os.path.basename(os.path.dirname(path)):4s} {os.path.basename(path):12s} {algo:10s} "
                      f"{'asym' if asym else 'sym '}: scale {one['scale']:.9g} offset {one['offset']:4d} {tag}")
    print(f"{len(picks)} tensors x 4 calibrators x 2 modes: {bad} difference(s), {near} near tie(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
