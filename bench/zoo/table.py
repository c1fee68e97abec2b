#!/usr/bin/python3
"""The benchmark zoo table (docs/performance.md): bench/forward on every zoo model.

    /usr/bin/python3 bench/zoo/table.py [--batches 1,8] [--rounds 7] [--runs 15] [--only a,b] [--arch]
                                        [--baseline BUILD_DIR]

Models: the exports of bench/zoo/export.py (in $CALQ_ZOO_DIR or ~/.cache/calq-bench-zoo; run it
first) and the real models under ../shared/models that calq runs; with --arch also the arch sweep's
(tests/peers/arch_models.py, in $CALQ_ARCH_DIR or ~/.cache/calq-arch). Prints one markdown row per
model and batch: calq's and onnxruntime's medians, the median per-round ratio and the ratio of the
median CPU time per run (all threads; steadier than wall time when the machine is shared). A model that
fails in either runtime gets its error in the row instead of figures."""
import argparse
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SHARED = os.environ.get("CALQ_SHARED", os.path.join(ROOT, "..", "shared"))

# Real models: (label, path under ../shared/models, input name, dims with the batch first).
REAL = [
    ("ultraface slim-320", "ultraface/version-slim-320.onnx", "input", [3, 240, 320]),
    ("ultraface slim-320 simplified", "ultraface/version-slim-320_simplified.onnx", "input", [3, 240, 320]),
    ("yunet_n_320", "zoo/yunet_n_320/yunet_n_320_320.onnx", "input", [3, 320, 320]),
    ("nanodet_m_320", "zoo/nanodet_m_320/nanodet_m_320.onnx", "input.1", [3, 320, 320]),
    ("fastestdet_352", "zoo/fastestdet_352/FastestDet.onnx", "input.1", [3, 352, 352]),
    ("hyperlpr3_plate_color_cls_96", "zoo/hyperlpr3_plate_color_cls_96/litemodel_cls_96x_r1.onnx", "data",
     [3, 96, 96]),
    ("pan_mnv3s_skin_clothes_hair_512", "zoo/pan_mnv3s_skin_clothes_hair_512/pan_mobilenetv3_small_100_simplifier.onnx",
     "x.1", [3, 512, 512]),
    ("lyt_net_lolv1_640x360", "zoo/lyt_net_lolv1_640x360/lyt_net_lolv1_640x360.onnx", "input_1", [360, 640, 3]),
]


def models(arch_models=False):
    zoo = os.environ.get("CALQ_ZOO_DIR", os.path.expanduser("~/.cache/calq-bench-zoo"))
    out = []
    index = os.path.join(zoo, "zoo.json")
    if os.path.exists(index):
        for name, e in json.load(open(index)).items():
            out.append((name, os.path.join(zoo, e["file"]), e["input"], e["shape"][1:]))
    else:
        print(f"note: no {index}: run bench/zoo/export.py first", file=sys.stderr)
    for label, rel, inp, dims in REAL:
        out.append((label, os.path.join(SHARED, "models", rel), inp, dims))
    # the arch sweep's models (tests/peers/arch_models.py), when exported: input "x", the shape of
    # each one's held-out batch
    arch = os.environ.get("CALQ_ARCH_DIR", os.path.expanduser("~/.cache/calq-arch"))
    if arch_models and os.path.isdir(arch):
        import numpy as np
        for f in sorted(os.listdir(arch)):
            name = f[:-5] if f.endswith(".onnx") else None
            ev = os.path.join(arch, name or "", "eval", "0.npy")
            if name and os.path.exists(ev):
                out.append(("arch " + name, os.path.join(arch, f), "x", list(np.load(ev).shape[1:])))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--only", default=None)
    ap.add_argument("--baseline", default=None, help="another calq build dir: adds a calq/baseline column")
    ap.add_argument("--arch", action="store_true", help="also the arch sweep's models (batch 1 only: their "
                    "text and sequence models fix other dims)")
    a = ap.parse_args()
    only = set(a.only.split(",")) if a.only else None
    base_hdr = " calq/baseline |" if a.baseline else ""
    print("| model | batch | calq ms | onnxruntime ms | calq/onnxruntime | CPU time calq/onnxruntime |" + base_hdr)
    print("|---|---|---|---|---|---|" + ("---|" if a.baseline else ""))
    for label, path, inp, dims in models(a.arch):
        if only and label not in only:
            continue
        for b in [int(x) for x in a.batches.split(",")]:
            if label.startswith("arch ") and b != 1:
                continue
            shape = f"{inp}:{','.join(str(d) for d in [b] + dims)}"
            r = subprocess.run([os.path.join(ROOT, "bench", "forward"), path, "--input-shape", shape, "--threads",
                                str(a.threads), "--rounds", str(a.rounds), "--runs", str(a.runs)] +
                               (["--baseline", a.baseline] if a.baseline else []),
                               capture_output=True, text=True)
            med = re.search(r"medians: calq ([\d.]+) ms, onnxruntime ([\d.]+) ms", r.stdout)
            ratio = re.search(r"ratio calq/onnxruntime: ([\d.]+)", r.stdout)
            cpu = re.search(r"cpu per run \(median\):.*calq/onnxruntime ([\d.]+)", r.stdout)
            base = re.search(r"ratio calq/baseline: ([\d.]+)", r.stdout)
            bcol = (f" {float(base[1]):.2f} |" if base else " - |") if a.baseline else ""
            if r.returncode or not med or not ratio:
                why = (r.stderr.strip().splitlines() or ["failed"])[-1][:120]
                print(f"| {label} | {b} | - | - | {why} | |" + (" |" if a.baseline else ""), flush=True)
            else:
                c = f"{float(cpu[1]):.2f}" if cpu else "-"
                print(f"| {label} | {b} | {float(med[1]):.2f} | {float(med[2]):.2f} | {float(ratio[1]):.2f} | {c} |" +
                      bcol, flush=True)


if __name__ == "__main__":
    main()
