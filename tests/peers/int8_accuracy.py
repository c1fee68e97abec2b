#!/usr/bin/python3
"""Accuracy of calq's QDQ / QOperator files in onnxruntime, per scheme (issue 12, item 5).

usage: int8_accuracy.py CALQ SHARED_DIR [--only NAME[,NAME...]] [--schemes int8,layers]
                        [--formats qdq,qoperator] [--floor NAME:SCHEME=WORST ...] [--keep DIR]
                        [--extra-eval DIR] [--runtime ort|calq]
                        [-- extra calq calibration flags]

Each trained model is calibrated by calq on its first (or its named) photos (`calq calibration
--npy`, one photo per batch), once per --qdq-scheme, and onnxruntime-node runs the float model and every file on the
held-out photos. Printed per model and scheme: the cosine of each output to the float model's,
worst and mean over the outputs and the held-out photos (QDQ and QOperator files pooled), the
figures of docs/performance.md ("onnxruntime int8"). --extra-eval adds the photos of DIR (under
SHARED_DIR) but the calibration ones to every model's held-out ones (a steadier worst figure). With --floor, exit 1 when a model's worst
cosine under that scheme is below WORST (the ctest gate peer.int8_accuracy). --runtime calq runs
the float model and the files with `calq run` instead (exact int8 on any CPU: a calibration
question, apart from onnxruntime's kernels).
Exit 0 / 1 / 77 (onnxruntime-node, python3-opencv or a shared file missing).
"""
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from zoo_vs_ort import cv2, image  # noqa: E402  (the zoo's preprocessing)
from save_compare import ort_int8_exact  # noqa: E402


def photos(folder):
    return sorted(os.path.join(folder, n) for n in os.listdir(folder) if n.lower().endswith((".jpg", ".png", ".webp")))


NANODET_MEAN, NANODET_STD = [103.53, 116.28, 123.675], [57.375, 57.12, 58.395]
# name -> (model path under SHARED, input name, photo folder under SHARED, calibration photos, preprocessing)
MODELS = {
    "ultraface": ("models/ultraface/version-slim-320.onnx", "input", "data/faces", 8,
                  lambda p: image(p, 320, 240, rgb=True, mean=[127] * 3, std=[128] * 3)),
    "yunet": ("models/zoo/yunet_n_320/yunet_n_320_320.onnx", "input", "data/faces", 8, lambda p: image(p, 320, 320)),
    "nanodet": ("models/zoo/nanodet_m_320/nanodet_m_320.onnx", "input.1", "models/zoo/nanodet_m_320/images", 3,
                lambda p: image(p, 320, 320, mean=NANODET_MEAN, std=NANODET_STD)),
    "fastestdet": ("models/zoo/fastestdet_352/FastestDet.onnx", "input.1", "models/zoo/fastestdet_352/images", 3,
                   lambda p: image(p, 352, 352, scale=1 / 255)),
    # Stratified by plate colour (its README: output 0 blue/black, 1 green, 2 yellow; the class of
    # each photo is the float model's answer): the first photo of each colour calibrates, the other
    # blue ones are held out. Green and yellow have one photo each, so they are evaluated on their
    # calibration photo too (printed apart as "seen"). Calibrated on its first 3 photos, all blue,
    # the held-out yellow plate gave a worst cosine of 0.09 (docs/numerics.md).
    "hyperlpr3": ("models/zoo/hyperlpr3_plate_color_cls_96/litemodel_cls_96x_r1.onnx", "data",
                  "models/zoo/hyperlpr3_plate_color_cls_96/images",
                  [["plate_a.jpg", "plate_align.jpg", "plate_align_1.jpg", "plate_pad.jpg"],  # blue
                   ["plate_align_5.jpg"],  # green
                   ["plate_align_3.jpg"]],  # yellow
                  lambda p: image(p, 96, 96, scale=1 / 255)),
    # Its own photos (the two samples and two street scenes), calibrated on one of each kind.
    "pan_seg": ("models/zoo/pan_mnv3s_skin_clothes_hair_512/pan_mobilenetv3_small_100_simplifier.onnx", "x.1",
                "models/zoo/pan_mnv3s_skin_clothes_hair_512/images", ("fastestdet_data_2.jpg", "sample1.webp"),
                lambda p: image(p, 512, 512, rgb=True, scale=1 / 255, mean=[0.485, 0.456, 0.406],
                                std=[0.229, 0.224, 0.225])),
}


def cosine(a, b):
    a = a.astype(np.float64).ravel()
    b = b.astype(np.float64).ravel()
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    if na == 0 or nb == 0:
        return 1.0 if na == nb else 0.0
    return float(a @ b / (na * nb))


def run_ort(env, model, out, input_name, files, calq=None):
    """The model's outputs on each file: onnxruntime-node's, or with calq, calq's own (`calq run`)."""
    if calq:
        for k, f in enumerate(files):
            r = subprocess.run([calq, "run", model, "--input", "%s=%s" % (input_name, f), "--output-dir",
                                os.path.join(out, str(k))], capture_output=True, text=True)
            if r.returncode:
                raise RuntimeError("calq run on %s: %s" % (model, r.stderr.strip()[-800:]))
    else:
        r = subprocess.run(["node", os.path.join(HERE, "ort_runs.js"), model, out, input_name] + files, env=env,
                           capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError("onnxruntime on %s: %s" % (model, r.stderr.strip()[-800:]))
    res = []
    for k in range(len(files)):
        d = os.path.join(out, str(k))
        res.append({n[:-4]: np.load(os.path.join(d, n)) for n in sorted(os.listdir(d))})
    return res


def main():
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        extra = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    if len(argv) < 2:
        print(__doc__)
        return 2
    calq, shared = argv[:2]
    opt = {"--only": ",".join(MODELS), "--schemes": "layers,int8", "--formats": "qdq,qoperator", "--keep": None,
           "--extra-eval": None, "--runtime": "ort"}
    floors = {}
    i = 2
    while i < len(argv):
        if argv[i] == "--floor":
            key, val = argv[i + 1].split("=")
            floors[tuple(key.split(":"))] = float(val)
        elif argv[i] in opt:
            opt[argv[i]] = argv[i + 1]
        else:
            print("int8_accuracy: unknown argument %s" % argv[i])
            return 2
        i += 2
    own = calq if opt["--runtime"] == "calq" else None
    node_path = os.path.join(os.environ.get("CALQ_PEERS_DIR", os.path.expanduser("~/.cache/calq-peers")), "node_modules")
    if cv2 is None or (not own and (not os.path.isdir(os.path.join(node_path, "onnxruntime-node")) or
                                    not shutil.which("node"))):
        print("SKIP: onnxruntime-node (%s), node or python3-opencv is missing" % node_path)
        return 77
    env = dict(os.environ, NODE_PATH=node_path)
    schemes, formats = opt["--schemes"].split(","), opt["--formats"].split(",")
    work = opt["--keep"] or tempfile.mkdtemp(prefix="calq_int8acc_")
    fails = floor_fails = 0
    try:
        for name in opt["--only"].split(","):
            mpath, input_name, folder, n_cal, prep = MODELS[name]
            model = os.path.join(shared, mpath)
            if not os.path.isfile(model) or not os.path.isdir(os.path.join(shared, folder)):
                print("SKIP: %s or %s is missing" % (model, folder))
                return 77
            ph = photos(os.path.join(shared, folder))
            seen = []  # calibration photos evaluated too: the only photo of a class
            if isinstance(n_cal, list):  # classes: the same number of photos of each calibrates
                per = min(max(len(c) - 1, 1) for c in n_cal)
                path = {os.path.basename(p): p for p in ph}
                named = [path[n] for c in n_cal for n in c[:per]]
                seen = [path[c[0]] for c in n_cal if len(c) <= per]
                ph = named + [p for p in ph if p not in named]
                n_cal = len(named)
            elif isinstance(n_cal, tuple):  # named calibration photos first, the rest held out
                named = [p for p in ph if os.path.basename(p) in n_cal]
                ph, n_cal = named + [p for p in ph if p not in named], len(named)
            if opt["--extra-eval"]:
                more = set(photos(os.path.join(shared, opt["--extra-eval"]))) - set(ph[:n_cal])
                ph = ph[:n_cal] + sorted(set(ph[n_cal:]) | more)
            wd = os.path.join(work, name)
            cal, ev = os.path.join(wd, "cal"), os.path.join(wd, "eval")
            os.makedirs(cal, exist_ok=True)
            os.makedirs(ev, exist_ok=True)
            evals, is_seen = [], []
            for k, p in enumerate(ph):
                x = prep(p)
                if k < n_cal:
                    np.save(os.path.join(cal, "%02d.npy" % k), x)
                if k >= n_cal or p in seen:
                    evals.append(os.path.join(ev, "%02d.npy" % k))
                    is_seen.append(k < n_cal)
                    np.save(evals[-1], x)
            ref = run_ort(env, model, os.path.join(wd, "float"), input_name, evals, own)
            for scheme in schemes:
                prefix = os.path.join(wd, scheme, "m")
                cmd = [calq, "calibration", "--model", model, "--npy", cal, "--batch_num", str(n_cal), "--save_path",
                       prefix, "--format", ",".join(formats), "--qdq-scheme", scheme] + extra
                r = subprocess.run(cmd, capture_output=True, text=True)
                if r.returncode:
                    print("FAIL %s %s: calibration: %s" % (name, scheme, r.stderr.strip()[-800:]))
                    fails += 1
                    continue
                cos, cos_seen = {}, []
                for f in formats:
                    got = run_ort(env, "%s_%s.onnx" % (prefix, f), os.path.join(wd, scheme, f), input_name, evals,
                                  own)
                    for k, (want, have) in enumerate(zip(ref, got)):
                        for o in want:
                            c = cosine(want[o], have[o])
                            if is_seen[k]:
                                cos_seen.append(c)
                            else:
                                cos.setdefault(o, []).append(c)
                allc = [c for v in cos.values() for c in v]
                worst, mean = min(allc), float(np.mean(allc))
                per = " ".join("%s %.5f" % (o, min(v)) for o, v in cos.items())
                n_held = len(evals) - sum(is_seen)
                print("%-10s %-6s worst %.5f mean %.5f  (%d outputs x %d photos x %d files; worst per output: %s)" %
                      (name, scheme, worst, mean, len(cos), n_held, len(formats), per), flush=True)
                if cos_seen:
                    print("%-10s %-6s seen  %.5f (worst on the %d calibration photos of a class with one photo)" %
                          (name, scheme, min(cos_seen), sum(is_seen)), flush=True)
                    worst = min(worst, min(cos_seen))
                floor = floors.get((name, scheme))
                if floor is not None and not worst >= floor:
                    print("FAIL %s %s: worst cosine %.5f below the floor %.5f" % (name, scheme, worst, floor))
                    fails += 1
                    floor_fails += 1
    finally:
        if not opt["--keep"]:
            shutil.rmtree(work, ignore_errors=True)
    if fails and fails == floor_fails and not own and not ort_int8_exact():
        print("SKIP: the floors hold for exact int8 kernels; onnxruntime's saturate without VNNI on this CPU "
              "(save_compare.ort_int8_exact), so the figures above are not counted")
        return 77
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
