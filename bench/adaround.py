#!/usr/bin/python3
"""ada_quantize (AdaRound) against ARQ's nearest rounding, full settings by default.

    /usr/bin/python3 bench/adaround.py CALQ MODEL.onnx IMAGES_DIR [--iterations N] [--batch-num B]
        [--eval-batches E] [--threads T] [--input-shape NAME:1,3,H,W] [--out DIR] -- IMAGE FLAGS...

IMAGE FLAGS are calq's image flags for the model (e.g. --resize 320x240 --mean 127 --std 128).
Runs `calq calibration` twice (ARQ: the default config; ada: a .cfg with common_config
ada_quantize { num_iteration: N }, AMCT's default 10000), then `calq compare` of each AMCT
fake-quant model against the float model on the first E images, and prints: the output cosine
(the smallest over the outputs, and per output) for both, the learned/nearest reconstruction
error summed over the layers (the calibration log's figures), and the AdaRound time per layer and
iteration (median and max over the layers) and in total. The tests run a short schedule
(tests/unit/test_adaround.c); this is the long one. Timings on a shared machine are noisy."""
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time


def main(argv):
    if "--" in argv:
        cut = argv.index("--")
        argv, img = argv[:cut], argv[cut + 1:]
    else:
        img = []
    if len(argv) < 3:
        print(__doc__)
        return 2
    calq, model, images = argv[:3]
    opt = {"--iterations": "10000", "--batch-num": "4", "--eval-batches": "8", "--threads": "2",
           "--input-shape": None, "--out": None}
    rest = argv[3:]
    for i in range(0, len(rest), 2):
        if rest[i] not in opt or i + 1 >= len(rest):
            print("unknown or incomplete option %s" % rest[i])
            return 2
        opt[rest[i]] = rest[i + 1]
    out = opt["--out"] or tempfile.mkdtemp(prefix="calq_adaround_")
    os.makedirs(out, exist_ok=True)
    shape = ["--input_shape", opt["--input-shape"]] if opt["--input-shape"] else []
    data = ["--images", images] + img
    cfg = os.path.join(out, "ada.cfg")
    with open(cfg, "w") as f:
        f.write("batch_num : %s\ncommon_config : { ada_quantize : { num_iteration : %s } }\n"
                % (opt["--batch-num"], opt["--iterations"]))
    res = {}
    for name, extra in (("arq", []), ("ada", ["--calibration_config", cfg])):
        t0 = time.time()
        p = subprocess.run([calq, "calibration", "--model", model, "--batch_num", opt["--batch-num"],
                            "--threads", opt["--threads"], "--save_path", os.path.join(out, name),
                            "--format", "ascend", "--save_type", "Fakequant"] + shape + data + extra,
                           capture_output=True, text=True)
        if p.returncode != 0:
            print(p.stderr[-3000:])
            return 1
        secs = time.time() - t0
        layers = re.findall(r"ada_quantize: layer (\S+): (\d+) samples of (\d+) values, (\d+) iterations in "
                            r"([0-9.]+) s \(([0-9.]+) ms per iteration\); output error with nearest rounding "
                            r"([0-9.eE+-]+), learned ([0-9.eE+-]+)", p.stderr)
        js = os.path.join(out, name + "_compare.json")
        p = subprocess.run([calq, "compare", "--model", model, "--quantized",
                            os.path.join(out, name + "_fake_quant_model.onnx"), "--batch_num",
                            opt["--eval-batches"], "--threads", opt["--threads"], "--json", js] + shape + data,
                           capture_output=True, text=True)
        if p.returncode != 0:
            print(p.stderr[-3000:])
            return 1
        with open(js) as f:
            outs = json.load(f)["outputs"]
        res[name] = {"secs": secs, "layers": layers, "outputs": [(o["name"], o["cosine"]) for o in outs]}
    a, d = res["arq"], res["ada"]
    print("model %s, %s calibration images, compared on %s, %s iterations" %
          (os.path.basename(model), opt["--batch-num"], opt["--eval-batches"], opt["--iterations"]))
    print("output cosine vs float: ARQ min %.6f, ada_quantize min %.6f" %
          (min(c for _, c in a["outputs"]), min(c for _, c in d["outputs"])))
    for (n, c1), (_, c2) in zip(a["outputs"], d["outputs"]):
        print("  %-24s ARQ %.6f  ada %.6f" % (n, c1, c2))
    ms = [float(x[5]) for x in d["layers"]]
    near = sum(float(x[6]) for x in d["layers"])
    learned = sum(float(x[7]) for x in d["layers"])
    if ms:
        print("AdaRound: %d layers, %.1f ms per layer and iteration (median; max %.1f), %.0f s in all "
              "(calibration %.0f s with ARQ); layer output error learned / nearest %.3f (summed)" %
              (len(ms), statistics.median(ms), max(ms), sum(float(x[4]) for x in d["layers"]), a["secs"],
               learned / near if near > 0 else 1.0))
    print("files in %s" % out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
