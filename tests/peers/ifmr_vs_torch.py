#!/usr/bin/python3
"""IFMR (calq) against PyTorch's HistogramObserver on real activations.

For each selected activation tensor: calq's IFMR factors (from `calq factors --algo ifmr --json`,
or a JSON-lines file of them) and HistogramObserver's qparams (8 bits, per tensor, affine, fed
batch by batch); then the fake-quant MSE of both on the same data. Prints the ratios
calq/torch and exits nonzero when calq wins (MSE <= torch's) on fewer than --min-wins tensors.

Activations come from `calq run MODEL --dump-all --output-dir DIR`, one DIR per calibration
batch (repeat --dir); a tensor's batches are concatenated along dim 0.

  ifmr_vs_torch.py --calq build/calq --model m.onnx --dir dump0 --dir dump1 [--count 10]
Run with /usr/bin/python3 (Debian python3-torch)."""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np


def safe_name(name):
    # the file names `calq run --dump-all` writes (tools/cli.c cli_safe_name)
    return "".join(c if (c.isalnum() or c in "._-") else "_" for c in name)


def quantized_inputs(model_path):
    """Activation inputs of the layers calq quantizes, in graph order (amct-reference.md §8.1)."""
    import onnx
    m = onnx.load(model_path)
    inits = {i.name for i in m.graph.initializer}
    out = []
    for n in m.graph.node:
        if n.op_type in ("Conv", "ConvTranspose", "Gemm", "MatMul") and n.input and n.input[0] not in inits:
            if n.input[0] not in out:
                out.append(n.input[0])
    return out


def round_away(v):
    t = np.trunc(v)
    return np.where(np.abs(v - t) >= np.float32(0.5), t + np.sign(v), t).astype(np.float32)


def calq_fake_quant(x, scale, offset):
    """AMCT's fake quant (amct-reference.md §2.3, §9.2): ties away from zero, int8 range."""
    s = np.float32(scale)
    q = np.clip(round_away((x / s).astype(np.float32)) + offset, -128, 127)
    return ((q - offset).astype(np.float32) * s).astype(np.float32)


def torch_fake_quant(batches):
    import torch
    from torch.ao.quantization import HistogramObserver
    obs = HistogramObserver(dtype=torch.quint8, qscheme=torch.per_tensor_affine)
    for b in batches:
        obs(torch.from_numpy(np.ascontiguousarray(b)))
    scale, zp = obs.calculate_qparams()
    x = torch.from_numpy(np.concatenate([b.reshape(-1) for b in batches]))
    y = torch.fake_quantize_per_tensor_affine(x, float(scale), int(zp), 0, 255)
    return y.numpy(), float(scale), int(zp)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calq", help="path to the calq executable (computes the factors)")
    ap.add_argument("--factors", help="JSON lines from `calq factors --json` (input = <name>.npy) instead of --calq")
    ap.add_argument("--dir", action="append", required=True, help="a --dump-all directory (one per batch)")
    ap.add_argument("--model", help="ONNX model: compare the inputs of its Conv/Gemm/MatMul layers")
    ap.add_argument("--tensors", help="comma-separated tensor names instead of --model")
    ap.add_argument("--count", type=int, default=10, help="tensors to compare, spread over the depth (default 10)")
    ap.add_argument("--min-wins", type=int, default=9, help="wins needed to pass (default 9)")
    ap.add_argument("--symmetric", action="store_true", help="symmetric IFMR (torch stays affine)")
    ap.add_argument("--work", help="directory for the concatenated tensors (default: a temporary one)")
    a = ap.parse_args()
    if not a.calq and not a.factors:
        ap.error("give --calq or --factors")

    if a.tensors:
        names = a.tensors.split(",")
    elif a.model:
        names = quantized_inputs(a.model)
    else:
        names = sorted(f[:-4] for f in os.listdir(a.dir[0]) if f.endswith(".npy"))
    names = [n for n in names if all(os.path.exists(os.path.join(d, safe_name(n) + ".npy")) for d in a.dir)]
    if len(names) > a.count:  # spread the choice over the network's depth
        idx = np.linspace(0, len(names) - 1, a.count).round().astype(int)
        names = [names[i] for i in sorted(set(idx))]
    if not names:
        print("no activation tensors found", file=sys.stderr)
        return 2

    given = {}
    if a.factors:
        with open(a.factors) as f:
            for line in f:
                if line.strip():
                    r = json.loads(line)
                    given[os.path.basename(r["input"])[:-4]] = r
    work = a.work or tempfile.mkdtemp(prefix="ifmr_vs_torch_")
    wins = 0
    print(f"{'tensor':>14s} {'elements':>10s} {'range':>24s} | {'calq scale/offset':>22s} {'torch scale/zp':>20s} |"
          f" {'calq mse':>10s} {'torch mse':>10s} {'ratio':>7s}")
    for n in names:
        sn = safe_name(n)
        batches = [np.load(os.path.join(d, sn + ".npy")).astype(np.float32) for d in a.dir]
        x = np.concatenate([b.reshape(-1) for b in batches])
        if sn in given:
            r = given[sn]
        else:
            path = os.path.join(work, sn + ".npy")
            np.save(path, np.concatenate([b.reshape((1,) + b.shape) if b.ndim == 0 else b for b in batches]))
            args = [a.calq, "factors", "--algo", "ifmr", "--input", path, "--json", "--layer", n,
                    "--batches", str(len(batches))]
            if a.symmetric:
                args.append("--symmetric")
            p = subprocess.run(args, capture_output=True, text=True)
            if p.returncode != 0:
                print(f"{n}: calq factors failed: {p.stderr.strip()}", file=sys.stderr)
                return 1
            r = json.loads(p.stdout)
        mse_c = float(np.mean((calq_fake_quant(x, r["scale"], r["offset"]).astype(np.float64) - x) ** 2))
        y, ts, tz = torch_fake_quant(batches)
        mse_t = float(np.mean((y.astype(np.float64) - x) ** 2))
        ratio = mse_c / mse_t if mse_t > 0 else (0.0 if mse_c == 0 else float("inf"))
        win = mse_c <= mse_t
        wins += win
        rng = f"[{x.min():.3g}, {x.max():.3g}]"
        print(f"{n:>14s} {x.size:10d} {rng:>24s} | {r['scale']:12.6g} {r['offset']:9d} {ts:12.6g} {tz:7d} |"
              f" {mse_c:10.4g} {mse_t:10.4g} {ratio:7.4f} {'win' if win else 'LOSS'}")
    print(f"calq IFMR MSE <= HistogramObserver MSE on {wins} of {len(names)} tensors (need {a.min_wins})")
    return 0 if wins >= min(a.min_wins, len(names)) else 1


if __name__ == "__main__":
    sys.exit(main())
