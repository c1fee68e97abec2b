"""Caffe PriorBox with more prior boxes per position than a fixed array held (probe of 12-06):
64 aspect ratios with flip make 129 boxes per position, and the kernel wrote only 66 of them
(a `float sizes[2 + 64][2]` and a loop cap of 66) into an output shaped for 129, with exit 0.

Each net is run by calq, by OpenCV's DNN module, and computed here in float64 from Caffe SSD's
PriorBoxLayer::Forward_cpu (the reference neither runtime shares): per position, per min_size,
the min_size square, the sqrt(min_size * max_size) square, then one box per aspect ratio other
than 1 (ratios deduplicated in order, 1 / ratio added after each with flip); corners over the
image size, clipped with clip; channel 1 the variances. All three must agree within 1e-5.

usage: caffe_priorbox.py CALQ        (run with /usr/bin/python3; exit 77 without OpenCV)
"""
import math
import os
import subprocess
import sys
import tempfile

import numpy as np

try:
    import cv2
except ImportError:
    print("SKIP: python3-opencv is missing")
    sys.exit(77)

RATIOS = [round(1.1 + 0.1 * i, 1) for i in range(64)]  # 1.1 ... 7.4: 64 values, the parser's limit


def caffe_priors(fh, fw, ih, iw, mins, maxs, ars, flip, clip, var, step=0.0, offset=0.5):
    """Caffe SSD's PriorBox forward, in float64."""
    ratios = [1.0]
    for a in ars:
        if any(abs(a - r) < 1e-6 for r in ratios):
            continue
        ratios.append(a)
        if flip:
            ratios.append(1.0 / a)
    step_w = step if step > 0 else iw / fw
    step_h = step if step > 0 else ih / fh
    out = []
    for h in range(fh):
        for w in range(fw):
            cx, cy = (w + offset) * step_w, (h + offset) * step_h
            for s, smin in enumerate(mins):
                sizes = [(smin, smin)]
                if maxs:
                    sizes.append((math.sqrt(smin * maxs[s]),) * 2)
                sizes += [(smin * math.sqrt(r), smin / math.sqrt(r)) for r in ratios if abs(r - 1.0) >= 1e-6]
                for bw, bh in sizes:
                    out += [(cx - bw / 2) / iw, (cy - bh / 2) / ih, (cx + bw / 2) / iw, (cy + bh / 2) / ih]
    out = np.array(out)
    if clip:
        out = np.clip(out, 0.0, 1.0)
    variances = np.tile(np.array(var if len(var) == 4 else var * 4), len(out) // 4)
    return np.stack([out, variances])[None], len(out) // 4 // (fh * fw)


def prototxt(data_shape, img_shape, params):
    """Two net inputs, the feature map and the image (OpenCV's PriorBox wants both bottoms even
    when img_size gives the image size)."""
    lines = ['name: "pb"']
    for name, shape in (("data", data_shape), ("img", img_shape)):
        lines += ['input: "%s"' % name, "input_shape { %s }" % " ".join("dim: %d" % d for d in shape)]
    lines.append('layer { name: "pb" type: "PriorBox" bottom: "data" bottom: "img" top: "pb" '
                 "prior_box_param { %s } }" % params)
    return "\n".join(lines) + "\n"


def params_text(mins, maxs, ars, flip, clip, var, img=0, step=0.0, offset=0.5):
    p = ["min_size: %g" % m for m in mins] + ["max_size: %g" % m for m in maxs]
    p += ["aspect_ratio: %g" % a for a in ars] + ["variance: %g" % v for v in var]
    p += ["flip: %s" % ("true" if flip else "false"), "clip: %s" % ("true" if clip else "false")]
    if img:
        p.append("img_size: %d" % img)
    if step:
        p.append("step: %g" % step)
    p.append("offset: %g" % offset)
    return " ".join(p)


CASES = [
    # the probe's net: 1 + 128 boxes per position on a 2 x 2 map of an 8 x 8 image. img_size is
    # the image blob's size here because OpenCV 4.6 takes the blob's even when img_size differs
    # (Caffe and calq take img_size)
    dict(name="ar64_flip", data=(1, 3, 2, 2), img_in=(1, 3, 8, 8), mins=[2.0], maxs=[], ars=RATIOS, flip=True,
         clip=False, var=[0.1], img=8, want_per_pos=129),
    # two min_sizes with max_sizes, clip, four variances, explicit step and offset, the image size
    # from bottom 1 (12 x 10): 2 x (1 + 1 + 128) = 260 boxes per position
    dict(name="two_sizes_max_clip", data=(1, 3, 3, 2), img_in=(1, 3, 12, 10), mins=[1.5, 3.0], maxs=[2.5, 5.0],
         ars=RATIOS, flip=True, clip=True, var=[0.1, 0.1, 0.2, 0.2], step=2.5, offset=0.25, want_per_pos=260),
    # no flip: 1 + 1 + 64 = 66, the old cap exactly (kept as the boundary); a 5 x 7 image
    dict(name="ar64_noflip_max", data=(1, 3, 2, 3), img_in=(1, 3, 5, 7), mins=[2.0], maxs=[4.0], ars=RATIOS, flip=False,
         clip=False, var=[0.1], want_per_pos=66),
]


def main():
    calq = sys.argv[1]
    fails = 0
    with tempfile.TemporaryDirectory(prefix="calq_priorbox.") as t:
        open(os.path.join(t, "empty.caffemodel"), "wb").close()
        for c in CASES:
            d = os.path.join(t, c["name"])
            os.makedirs(d)
            proto = os.path.join(d, "pb.prototxt")
            ptext = params_text(c["mins"], c["maxs"], c["ars"], c["flip"], c["clip"], c["var"], c.get("img", 0),
                                c.get("step", 0.0), c.get("offset", 0.5))
            open(proto, "w").write(prototxt(c["data"], c["img_in"], ptext))
            rng = np.random.default_rng(0)
            x = rng.standard_normal(c["data"]).astype(np.float32)
            img = rng.standard_normal(c["img_in"]).astype(np.float32)
            np.save(os.path.join(d, "data.npy"), x)
            np.save(os.path.join(d, "img.npy"), img)
            r = subprocess.run([calq, "run", "--model", proto, "--weights", os.path.join(t, "empty.caffemodel"),
                                "--input", "data=" + os.path.join(d, "data.npy"),
                                "--input", "img=" + os.path.join(d, "img.npy"), "--output-dir", os.path.join(d, "out")],
                               capture_output=True, text=True, timeout=120)
            if r.returncode != 0:
                print("FAIL: %s: calq run exit %d: %s" % (c["name"], r.returncode, r.stderr.strip()))
                fails += 1
                continue
            got = np.load(os.path.join(d, "out", "pb.npy"))
            net = cv2.dnn.readNetFromCaffe(proto)
            net.setPreferableBackend(cv2.dnn.DNN_BACKEND_OPENCV)
            net.setInput(x, "data")
            net.setInput(img, "img")
            cv = net.forward("pb")
            ih, iw = (c["img"], c["img"]) if c.get("img") else c["img_in"][2:]
            ref, per_pos = caffe_priors(c["data"][2], c["data"][3], ih, iw, c["mins"], c["maxs"], c["ars"], c["flip"],
                                        c["clip"], c["var"], c.get("step", 0.0), c.get("offset", 0.5))
            assert per_pos == c["want_per_pos"], (c["name"], per_pos)
            ok = got.shape == ref.shape == cv.shape
            e_ref = np.abs(got - ref).max() if ok else float("inf")
            e_cv = np.abs(got - cv).max() if ok else float("inf")
            e_cv_ref = np.abs(cv - ref).max() if ok else float("inf")
            ok = ok and e_ref <= 1e-5 and e_cv <= 1e-5 and e_cv_ref <= 1e-5
            print("%s: %-20s %d boxes per position, calq %s OpenCV %s reference %s; max |calq - reference| %.2g, "
                  "|calq - OpenCV| %.2g, |OpenCV - reference| %.2g"
                  % ("ok" if ok else "FAIL", c["name"], per_pos, got.shape, cv.shape, ref.shape, e_ref, e_cv, e_cv_ref))
            if not ok:
                bad = np.argwhere(np.abs(got - ref) > 1e-5) if got.shape == ref.shape else []
                if len(bad):
                    print("  calq's first value off the reference: index", bad[0].tolist(), "of", len(bad))
                fails += 1
    print("caffe_priorbox: %d failure(s)" % fails)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
