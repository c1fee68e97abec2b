#!/usr/bin/python3
"""Every ONNX model of ../shared/models/zoo in calq and in onnxruntime-node, on one of its own
images (or audio chunks), preprocessed as its README says: every output must match.

usage: zoo_vs_ort.py CALQ ORT_RUN_JS SHARED_DIR [--only NAME] [--ref]
Exit 0: all match; 1: a mismatch or a failed run; 77: onnxruntime-node or the zoo is missing.
The tolerance is relative to each output's own range (max |calq - ort| <= tol * max |ort|):
detectors' box regressions are sums of hundreds of products whose order differs.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import wave

import numpy as np

try:
    import cv2
except ImportError:  # pragma: no cover
    cv2 = None


def image(path, w, h, rgb=False, scale=1.0, mean=None, std=None, nhwc=False):
    im = cv2.imread(path)
    if rgb:
        im = im[:, :, ::-1]
    x = cv2.resize(im, (w, h)).astype(np.float32) * scale
    if mean is not None:
        x = (x - np.array(mean, np.float32)) / np.array(std, np.float32)
    return x[None] if nhwc else x.transpose(2, 0, 1)[None].copy()


def first_image(folder):
    names = sorted(n for n in os.listdir(folder) if n.lower().endswith((".jpg", ".jpeg", ".png", ".bmp")))
    return os.path.join(folder, names[0])


# name -> (model file, function(zoo folder) -> list of runs, each a dict input name -> array)
def deimv2(d):
    p = first_image(d + "/images")
    im = cv2.imread(p)
    return [{"images": image(p, 320, 320, rgb=True, scale=1 / 255),
             "orig_target_sizes": np.array([[im.shape[1], im.shape[0]]], np.int64)}]


def silero(d):
    w = wave.open(d + "/samples/test.wav")
    a = np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16).astype(np.float32) / 32768
    return [{"input": a[16000 + 512 * k:16512 + 512 * k].reshape(1, 512), "sr": np.array(16000, np.int64)}
            for k in range(3)]  # the state is carried from run to run


# Detectors whose outputs are detections sorted by score: detections whose scores tie within
# TIE_EPS may come in either order (a 1e-7 difference in a sum decides it), so calq's are put
# in onnxruntime's order within each run of tied scores before comparing. name -> (scores
# output, the outputs ordered with it).
TIES = {"deimv2_atto_320": ("scores", ("labels", "boxes"))}
TIE_EPS = 1e-5


def untie(outs, score_name, others):
    want, got = outs["ort"], outs["calq"]
    if score_name not in want or score_name not in got or any(o not in got for o in others):
        return
    ws, gs = want[score_name], got[score_name]
    if ws.shape != gs.shape or ws.ndim != 2:
        return
    for b in range(ws.shape[0]):
        perm = np.arange(ws.shape[1])
        i = 0
        while i < ws.shape[1]:
            j = i + 1
            while j < ws.shape[1] and abs(float(ws[b, j]) - float(ws[b, j - 1])) <= TIE_EPS:
                j += 1
            free = list(range(i, j))
            for r in range(i, j):  # the calq rank of the same detection, within the run of ties
                def key(c):
                    return sum(float(np.abs(got[o][b, c].astype(np.float64) - want[o][b, r]).max()) for o in others)
                c = min(free, key=key)
                perm[r] = c
                free.remove(c)
            i = j
        for o in (score_name,) + tuple(others):
            got[o][b] = got[o][b][perm]


MODELS = {
    "deimv2_atto_320": ("deimv2_hgnetv2_atto_coco.onnx", deimv2, 2e-4),
    "fastestdet_352": ("FastestDet.onnx", lambda d: [{"input.1": image(first_image(d + "/images"), 352, 352, scale=1 / 255)}], 1e-4),
    "hyperlpr3_plate_color_cls_96": ("litemodel_cls_96x_r1.onnx",
                                     lambda d: [{"data": image(first_image(d + "/images"), 96, 96, scale=1 / 255)}], 1e-4),
    "lyt_net_lolv1_640x360": ("lyt_net_lolv1_640x360.onnx",
                              lambda d: [{"input_1": image(first_image(d + "/images"), 640, 360, scale=2 / 255, mean=[1, 1, 1],
                                                           std=[1, 1, 1], nhwc=True)}], 1e-4),
    "nanodet_m_320": ("nanodet_m_320.onnx",
                      lambda d: [{"input.1": image(first_image(d + "/images"), 320, 320, mean=[103.53, 116.28, 123.675],
                                                   std=[57.375, 57.12, 58.395])}], 1e-4),
    "pan_mnv3s_skin_clothes_hair_512": ("pan_mobilenetv3_small_100_simplifier.onnx",
                                        lambda d: [{"x.1": image(first_image("%s/../fastestdet_352/images" % d), 512, 512,
                                                                 rgb=True, scale=1 / 255, mean=[0.485, 0.456, 0.406],
                                                                 std=[0.229, 0.224, 0.225])}], 1e-4),
    "silero_vad_v5": ("silero_vad.onnx", silero, 1e-4),
    "yunet_n_320": ("yunet_n_320_320.onnx", lambda d: [{"input": image(first_image(d + "/images"), 320, 320)}], 1e-4),
}


def main():
    args = sys.argv[1:]
    if len(args) < 3:
        print(__doc__)
        return 2
    calq, ort_js, shared = args[:3]
    only = args[args.index("--only") + 1] if "--only" in args else None
    ref = "--ref" in args
    zoo = os.path.join(shared, "models", "zoo")
    node_path = os.environ.get("NODE_PATH") or os.path.join(
        os.environ.get("CALQ_PEERS_DIR", os.path.expanduser("~/.cache/calq-peers")), "node_modules")
    if not os.path.isdir(zoo) or not os.path.isdir(os.path.join(node_path, "onnxruntime-node")) or cv2 is None:
        print("SKIP: the zoo, onnxruntime-node or python3-opencv is missing")
        return 77
    env = dict(os.environ, NODE_PATH=node_path)
    work = tempfile.mkdtemp()
    fails = 0
    for name, (fname, make, tol) in MODELS.items():
        if only and only != name:
            continue
        d = os.path.join(zoo, name)
        model = os.path.join(d, fname)
        state = {"calq": np.zeros((2, 1, 128), np.float32), "ort": np.zeros((2, 1, 128), np.float32)}
        worst, fails_before = 0.0, fails
        for k, feeds in enumerate(make(d)):
            wd = os.path.join(work, "%s_%d" % (name, k))
            outs = {}
            for who in ("ort", "calq"):
                od = os.path.join(wd, who)
                os.makedirs(od, exist_ok=True)
                f = dict(feeds)
                if name == "silero_vad_v5":
                    f["state"] = state[who]
                ins = []
                for n, a in f.items():
                    p = os.path.join(wd, "%s.%s.npy" % (n.replace("/", "_"), who))
                    np.save(p, a)
                    ins.append("%s=%s" % (n, p))
                if who == "ort":
                    cmd = ["node", ort_js, model, od] + ins
                else:
                    cmd = [calq, "run", model, "--output-dir", od] + sum([["--input", i] for i in ins], [])
                    if ref:
                        cmd.append("--ref")
                r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                if r.returncode != 0:
                    print("FAIL %-34s %s: %s" % (name, who, (r.stdout + r.stderr).strip()[:500]))
                    fails += 1
                    break
                outs[who] = {n[:-4]: np.load(os.path.join(od, n)) for n in os.listdir(od)}
                if name == "silero_vad_v5":
                    state[who] = outs[who]["stateN"]
            if len(outs) < 2:
                break
            if name in TIES:
                untie(outs, *TIES[name])
            for o, want in outs["ort"].items():
                got = outs["calq"].get(o)
                if got is None or got.shape != want.shape:
                    print("FAIL %-34s output %s: calq %s, onnxruntime %s" % (name, o, None if got is None else got.shape,
                                                                           want.shape))
                    fails += 1
                    continue
                scale = float(np.abs(want).max()) if want.size else 0.0
                diff = float(np.abs(got.astype(np.float64) - want).max()) if want.size else 0.0
                rel = diff / scale if scale > 0 else diff
                worst = max(worst, rel)
                if not rel <= tol:
                    print("FAIL %-34s run %d output %s: max |calq - ort| = %.3g (%.3g of its range; tolerance %.1g)" %
                          (name, k, o, diff, rel, tol))
                    fails += 1
        if fails == fails_before:
            print("ok   %-34s max difference %.2g of the output range" % (name, worst))
    shutil.rmtree(work, ignore_errors=True)
    print("%d failure(s)" % fails)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
