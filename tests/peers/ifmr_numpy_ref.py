#!/usr/bin/python3
"""An independent NumPy transcription of AMCT's IFMR C++ (amct-reference.md §3.3-3.6), float32
throughout, with AMCT's float running loss sum. Compares its factors with `calq factors --algo ifmr
--amct-float-loss` on generated tensors. Usage: ifmr_numpy_ref.py path/to/calq [workdir]"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

f32 = np.float32


def round_away(v):
    t = np.trunc(v)
    return np.where(np.abs(v - t) >= f32(0.5), t + np.sign(v), t).astype(f32)


def process_scale(s):
    s = f32(s)
    if s < f32(np.finfo(np.float32).eps):
        s = f32(1.0)
    ok = np.isfinite(s) and not (f32(1.0) / s < f32(np.finfo(np.float32).eps))
    return s, ok


def ifmr(x, asym, pmax=f32(0.999999), pmin=f32(0.999999), a=f32(0.7), b=f32(1.3), step=f32(0.01)):
    x = x.astype(f32).ravel()
    L = x.size
    def rank(p):
        if abs(p - f32(1)) < np.finfo(np.float64).eps:
            return 1
        return L - int(np.floor(f32(p) * f32(L)))
    s = np.sort(x)
    mx = max(f32(0), s[L - rank(pmax)])
    mn = min(f32(0), s[rank(pmin) - 1])
    M = int(f32(f32(b - a) / step) + f32(1))
    Lf = f32(L)
    losses = []
    for i in range(M):
        r = f32(a + f32(f32(i) * step))
        if asym:
            c = f32(r * mx)
            sc = f32(f32(c - mn) / f32(255))
            lo, hi = mn, c
        else:
            A = mx if abs(mx) > abs(mn) else mn
            lim = f32(127) if A > 0 else f32(128)
            c = f32(r * f32(abs(A)))
            sc = f32(c / lim)
            lo, hi = f32(-c), c
        sc, ok = process_scale(sc)
        if not ok:
            losses.append(f32(0))  # AMCT: an illegal candidate keeps loss 0
            continue
        v = np.minimum(np.maximum(x, lo), hi)
        q = (round_away((v / sc).astype(f32)) * sc).astype(f32)
        d = (q - x).astype(f32)
        e = ((d * d).astype(f32) / Lf).astype(f32)
        losses.append(np.cumsum(e, dtype=f32)[-1])  # sequential float sum, as std::accumulate
    best = int(np.argmin(np.array(losses, dtype=f32)))
    r = f32(a + f32(f32(best) * step))
    if asym:
        sc = f32(f32(f32(r * mx) - mn) / f32(255))
        sc, ok = process_scale(sc)
        off = -int(round_away(np.array([f32(mn / sc)]))[0]) - 128
    else:
        A = mx if abs(mx) > abs(mn) else mn
        c = f32(r * f32(abs(A)))
        sc = f32(c / (f32(127) if A > 0 else f32(128)))
        sc, ok = process_scale(sc)
        off = 0
    return sc, off, best, ok


def main():
    calq = sys.argv[1]
    work = sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp()
    rs = np.random.RandomState(3)
    tensors = {
        "normal": rs.randn(200000),
        "relu": np.maximum(rs.randn(3, 64, 32, 32), 0),
        "laplace": rs.laplace(size=150000) * 4,
        "negative": -rs.rand(50000) * 3 - 0.1,
        "bimodal": np.concatenate([rs.randn(30000) - 3, rs.randn(70000) * 0.5 + 4]),
        "ints": np.floor(rs.randn(120000) * 20) * 0.5,
        "large_n": rs.randn(3211264),  # k_max = 4 at this L (§3.3)
    }
    bad = 0
    for name, x in tensors.items():
        x = x.astype(np.float32)
        path = os.path.join(work, name + ".npy")
        np.save(path, x)
        for asym in (True, False):
            want = ifmr(x, asym)
            args = [calq, "factors", "--algo", "ifmr", "--input", path, "--json", "--amct-float-loss", "--batches", "3"]
            if not asym:
                args.append("--symmetric")
            got = json.loads(subprocess.run(args, check=True, capture_output=True, text=True).stdout)
            same = f32(got["scale"]) == want[0] and got["offset"] == want[1] and got["best_index"] == want[2]
            bad += not same
            print(f"{name:9s} {'asym' if asym else 'sym '}: numpy {want[0]:.9g}/{want[1]}/{want[2]}  "
                  f"calq {got['scale']:.9g}/{got['offset']}/{got['best_index']}  {'same' if same else 'DIFFERENT'}")
    print(f"{bad} difference(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
