#!/usr/bin/python3
"""Which layers are to blame: `calq compare --sensitivity` and the accuracy search ranked by it.

usage: sensitivity.py CALQ SHARED_DIR

On the PAN MobileNetV3 segmenter of the zoo (a depthwise-heavy net whose first depthwise
convolution, Conv_137, takes most of the output cosine while its own, isolated error is small:
docs/performance.md), calibrated on two of its photos and compared on the two others:
  - the table and the JSON rank Conv_137 first by the outputs' cosine with it alone quantized,
    clearly below every other layer, while its isolated cosine ranks it below the fifth place
    (what the isolated ranking missed); the table's hint names it, and following the hint
    (--skip_layers Conv_137) raises the outputs' cosine;
  - each layer's figure equals an independent measure: the fake-quant model saved with only that
    layer enabled (calq save --config), run by onnxruntime-node against the float model in
    onnxruntime (Conv_137 and the layer ranked last), and by calq compare;
  - the figures are the same for 1 and 2 threads;
  - calq calibration --target-cosine 0.99 (ranked by it, the default) meets the target with
    Conv_137 in float; the log's sensitivity line names it first.
Exit 0 / 1 / 77 (python3-opencv, onnxruntime-node or a shared file missing).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from checks import FAILS, cosine, fail, run  # noqa: E402
from zoo_vs_ort import cv2, image  # noqa: E402  (the zoo's preprocessing)






def main():
    calq, shared = sys.argv[1], sys.argv[2]
    zoo = os.path.join(shared, "models/zoo/pan_mnv3s_skin_clothes_hair_512")
    model = os.path.join(zoo, "pan_mobilenetv3_small_100_simplifier.onnx")
    node_path = os.path.join(os.environ.get("CALQ_PEERS_DIR", os.path.expanduser("~/.cache/calq-peers")), "node_modules")
    if cv2 is None or not os.path.isfile(model) or not shutil.which("node") or \
            not os.path.isdir(os.path.join(node_path, "onnxruntime-node")):
        print("SKIP: python3-opencv, node, onnxruntime-node (%s) or %s is missing" % (node_path, model))
        return 77
    env = dict(os.environ, NODE_PATH=node_path)
    work = tempfile.mkdtemp(prefix="calq_sens_")
    try:
        def prep(name):
            return image(os.path.join(zoo, "images", name), 512, 512, rgb=True, scale=1 / 255,
                         mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
        for sub, names in (("cal", ("fastestdet_data_2.jpg", "sample1.webp")),
                           ("val", ("fastestdet_data_3.jpg", "sample2.webp"))):
            os.makedirs(os.path.join(work, sub))
            for k, n in enumerate(names):
                np.save(os.path.join(work, sub, "%d.npy" % k), prep(n))
        cal, val = os.path.join(work, "cal"), os.path.join(work, "val")
        p = os.path.join(work, "q", "pan")
        run([calq, "calibration", "--model", model, "--npy", cal, "--batch_num", "2", "--save_path", p,
             "--format", "ascend", "--save_type", "Fakequant"])
        fq = p + "_fake_quant_model.onnx"

        res = {}
        for t in (1, 2):
            j = os.path.join(work, "s%d.json" % t)
            r = run([calq, "compare", "--model", model, "--quantized", fq, "--npy", val, "--sensitivity", "--isolated",
                     "--threads", str(t), "--json", j, "--top", "5"])
            res[t] = json.load(open(j))
            if t == 1:
                print(r.stdout, flush=True)
        layers = res[1]["layers"]
        key = ("sensitivity_cosine", "sensitivity_cosine_min", "sensitivity_sqnr_db", "isolated_cosine")
        if [[l[k] for k in key] for l in layers] != [[l[k] for k in key] for l in res[2]["layers"]]:
            fail("the sensitivity figures differ between 1 and 2 threads")
        if any(l["sensitivity_cosine"] is None or l["sensitivity_output"] is None for l in layers):
            fail("a layer has no sensitivity figure")
        by_sens = sorted(layers, key=lambda l: l["sensitivity_cosine"])
        by_iso = sorted(layers, key=lambda l: l["isolated_cosine"])
        worst = by_sens[0]
        iso_rank = [l["name"] for l in by_iso].index("Conv_137") + 1
        print("ranked by the outputs: %s; Conv_137: outputs cosine %.6f, isolated %.6f (isolated rank %d of %d)" %
              (", ".join("%s %.5f" % (l["name"], l["sensitivity_cosine"]) for l in by_sens[:4]),
               [l for l in layers if l["name"] == "Conv_137"][0]["sensitivity_cosine"],
               [l for l in layers if l["name"] == "Conv_137"][0]["isolated_cosine"], iso_rank, len(layers)))
        if worst["name"] != "Conv_137":
            fail("the layer costing the outputs most is %s, expected Conv_137" % worst["name"])
        if not (worst["sensitivity_cosine"] < 0.985 and by_sens[1]["sensitivity_cosine"] - worst["sensitivity_cosine"] > 0.01):
            fail("Conv_137 does not stand out: %.6f vs %.6f" % (worst["sensitivity_cosine"], by_sens[1]["sensitivity_cosine"]))
        if iso_rank <= 5:
            fail("Conv_137 ranks %d by its isolated cosine: the case no longer shows the difference" % iso_rank)
        table = run([calq, "compare", "--model", model, "--quantized", fq, "--npy", val, "--sensitivity", "--top",
                     "1"]).stdout
        if "by the outputs' cosine with the layer alone quantized" not in table or "Conv_137" not in table:
            fail("the table is not ranked by the outputs' cosine with Conv_137 first")
        hint = [x for x in table.splitlines() if x.startswith("the outputs lose most to")]
        if not hint or not hint[0].split(":", 1)[1].strip().startswith("Conv_137") or \
                "--skip_layers Conv_137" not in table:
            fail("no 'lose most to' hint naming Conv_137 first: %s" % table[-600:])
        else:
            print(hint[0])
        # following the hint pays: Conv_137 alone in float
        sp = os.path.join(work, "skip", "pan")
        run([calq, "calibration", "--model", model, "--npy", cal, "--batch_num", "2", "--save_path", sp,
             "--format", "ascend", "--save_type", "Fakequant", "--skip_layers", "Conv_137"])
        j = os.path.join(work, "skip.json")
        run([calq, "compare", "--model", model, "--quantized", sp + "_fake_quant_model.onnx", "--npy", val,
             "--json", j])
        before, after = res[1]["outputs"][0]["cosine"], json.load(open(j))["outputs"][0]["cosine"]
        print("outputs cosine: every layer quantized %.6f, Conv_137 in float %.6f" % (before, after))
        if not after > before + 0.01:
            fail("keeping Conv_137 in float does not help: %.6f -> %.6f" % (before, after))

        # independent measure: the model saved with only that layer quantized, in onnxruntime
        cfg = json.load(open(p + "_config.json"))
        names = [k for k, v in cfg.items() if isinstance(v, dict) and "quant_enable" in v]
        fl = os.path.join(work, "float")
        run(["node", os.path.join(HERE, "ort_runs.js"), model, fl, "x.1",
             os.path.join(val, "0.npy"), os.path.join(val, "1.npy")], env=env)
        for lname in ("Conv_137", by_sens[-1]["name"]):
            c = json.loads(json.dumps(cfg))
            for k in names:
                c[k]["quant_enable"] = k == lname
            cp = os.path.join(work, "only_%s.json" % lname)
            json.dump(c, open(cp, "w"))
            op = os.path.join(work, "only_" + lname, "m")
            run([calq, "save", "--model", model, "--record", p + "_record.txt", "--config", cp, "--save_path", op,
                 "--format", "ascend", "--save_type", "Fakequant"])
            out = os.path.join(work, "ort_" + lname)
            run(["node", os.path.join(HERE, "ort_runs.js"), op + "_fake_quant_model.onnx", out, "x.1",
                 os.path.join(val, "0.npy"), os.path.join(val, "1.npy")], env=env)
            # compare's cosine runs over every element of every batch
            ys, qs = [], []
            for k in range(2):
                for n in sorted(os.listdir(os.path.join(fl, str(k)))):
                    ys.append(np.load(os.path.join(fl, str(k), n)))
                    qs.append(np.load(os.path.join(out, str(k), n)))
            ort_cos = cosine(np.concatenate([y.ravel() for y in ys]), np.concatenate([q.ravel() for q in qs]))
            mine = [l for l in layers if l["name"] == lname][0]["sensitivity_cosine"]
            j = os.path.join(work, "one_%s.json" % lname)
            run([calq, "compare", "--model", model, "--quantized", op + "_fake_quant_model.onnx", "--npy", val,
                 "--json", j])
            cmp_cos = json.load(open(j))["outputs"][0]["cosine"]
            print("%s alone: calq compare --sensitivity %.6f, saved alone: onnxruntime %.6f, calq compare %.6f" %
                  (lname, mine, ort_cos, cmp_cos), flush=True)
            if abs(mine - ort_cos) > 2e-4 * max(1.0, 1 - ort_cos) or abs(mine - cmp_cos) > 1e-5:
                fail("%s: the sensitivity figure %.6f does not match the model saved with it alone (onnxruntime "
                     "%.6f, calq compare %.6f)" % (lname, mine, ort_cos, cmp_cos))

        # attention: a MatMul of two activations (§8.1) gets its figure too, from both inputs'
        # quantize chains; checked against the model saved with it alone, in onnxruntime
        if subprocess.run(["/usr/bin/python3", "-c", "import torch"], capture_output=True).returncode == 0:
            at = os.path.join(work, "attn")
            run(["/usr/bin/python3", os.path.join(HERE, "attention_model.py"), at, "13"])
            am, ad = os.path.join(at, "attn13.onnx"), os.path.join(at, "data")
            ap = os.path.join(at, "q", "m")
            run([calq, "calibration", "--model", am, "--npy", ad, "--batch_num", "4", "--input_shape", "x:1,8,20",
                 "--save_path", ap, "--format", "ascend", "--save_type", "Fakequant"])
            j = os.path.join(at, "s.json")
            run([calq, "compare", "--model", am, "--quantized", ap + "_fake_quant_model.onnx", "--npy", ad,
                 "--input_shape", "x:1,8,20", "--batch_num", "4", "--sensitivity", "--isolated", "--json", j])
            al = json.load(open(j))["layers"]
            two = [k[:-2] for k in open(ap + "_record.txt").read().split('"') if k.endswith(":1")]
            if not two or any(l["sensitivity_cosine"] is None or l["isolated_cosine"] is None for l in al):
                fail("attention: layers without figures (two-input MatMuls %s): %s" %
                     (two, [l["name"] for l in al if l["sensitivity_cosine"] is None]))
            acfg = json.load(open(ap + "_config.json"))
            anames = [k for k, v in acfg.items() if isinstance(v, dict) and "quant_enable" in v]
            files = sorted(os.path.join(ad, n) for n in os.listdir(ad))[:4]
            afl = os.path.join(at, "float")
            run(["node", os.path.join(HERE, "ort_runs.js"), am, afl, "x"] + files, env=env)
            for lname in two:
                c = json.loads(json.dumps(acfg))
                for k in anames:
                    c[k]["quant_enable"] = k == lname
                cp = os.path.join(at, "only.json")
                json.dump(c, open(cp, "w"))
                op = os.path.join(at, "only", lname.replace("/", "_"))
                run([calq, "save", "--model", am, "--record", ap + "_record.txt", "--config", cp, "--save_path", op,
                     "--format", "ascend", "--save_type", "Fakequant", "--input_shape", "x:1,8,20"])
                out = os.path.join(at, "ort_" + lname.replace("/", "_"))
                run(["node", os.path.join(HERE, "ort_runs.js"), op + "_fake_quant_model.onnx", out, "x"] + files,
                    env=env)
                ys = [np.load(os.path.join(afl, str(k), n)) for k in range(len(files))
                      for n in sorted(os.listdir(os.path.join(afl, str(k))))]
                qs = [np.load(os.path.join(out, str(k), n)) for k in range(len(files))
                      for n in sorted(os.listdir(os.path.join(out, str(k))))]
                ort_cos = cosine(np.concatenate([y.ravel() for y in ys]), np.concatenate([q.ravel() for q in qs]))
                mine = [l for l in al if l["name"] == lname][0]["sensitivity_cosine"]
                print("attention %s (two activations) alone: 1 - cosine: calq compare --sensitivity %.4g, saved "
                      "alone in onnxruntime %.4g" % (lname, 1 - mine, 1 - ort_cos), flush=True)
                # the losses agree to a few percent (onnxruntime's float kernels differ by ~1e-7), and
                # the copy is quantized (a float copy would give exactly 1)
                if abs((1 - mine) - (1 - ort_cos)) > 0.05 * (1 - ort_cos) + 2e-7 or not mine < 1.0 - 1e-9:
                    fail("attention %s: the sensitivity figure %.6f does not match onnxruntime's %.6f (or the "
                         "layer is not quantized in the copy)" % (lname, mine, ort_cos))
        else:
            print("SKIP (part): no python3-torch for the attention model")

        # the accuracy search ranked by it
        r = run([calq, "calibration", "--model", model, "--npy", cal, "--batch_num", "2", "--save_path",
                 os.path.join(work, "fb", "pan"), "--format", "ascend", "--save_type", "Fakequant",
                 "--target-cosine", "0.99", "--eval-data", val])
        log = r.stderr + r.stdout
        for line in log.splitlines():
            if line.startswith(("calq: sensitivity", "calq: step", "calq: pruned", "calq: min output")):
                print("    " + line)
        sens_line = [x for x in log.splitlines() if x.startswith("calq: sensitivity:")]
        if not sens_line or "output cosine with the layer alone quantized: Conv_137" not in sens_line[0]:
            fail("the search's ranking does not start with Conv_137: %s" % sens_line)
        if "target met" not in log:
            fail("--target-cosine 0.99 is not met")
        c = json.load(open(os.path.join(work, "fb", "pan_config.json")))
        if c.get("Conv_137", {}).get("quant_enable", True):
            fail("the search did not keep Conv_137 in float")
    except RuntimeError as e:
        fail(str(e))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("sensitivity: %s" % ("all checks passed" if not FAILS else "%d failures" % len(FAILS)))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
