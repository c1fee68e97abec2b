#!/usr/bin/python3
"""The arch sweep: every model of arch_models.py through calq inspect, calq run (float, against
onnxruntime), calq calibration --format all (both --qdq-scheme) and every saved file in both
onnxruntime-node and calq run, cosine against the float model.

    /usr/bin/python3 tests/peers/arch_sweep.py CALQ DIR [NAME ...]

DIR is arch_models.py's output folder. Prints one line per model and file; exit 1 on any crash,
refusal, float mismatch, or a saved file whose outputs in onnxruntime and in calq differ by more
than 0.01 in (centered) cosine against the float model.
"""
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
NODE_PATH = os.path.join(os.environ.get("CALQ_PEERS_DIR", os.path.expanduser("~/.cache/calq-peers")), "node_modules")
ENV = dict(os.environ, NODE_PATH=NODE_PATH)


def cosine(a, b):
    a = a.astype(np.float64).ravel()
    b = b.astype(np.float64).ravel()
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    if na == 0 or nb == 0:
        return 1.0 if na == nb else 0.0
    return float(a @ b / (na * nb))


def centered(a, b):
    """The cosine of the outputs less their means (Pearson's r): log_softmax and sigmoid outputs
    share a large common part that makes the plain cosine near 1 whatever the error."""
    a = a.astype(np.float64).ravel()
    b = b.astype(np.float64).ravel()
    return cosine(a - a.mean(), b - b.mean())


def sh(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def run(rt, calq, model, x, out):
    os.makedirs(out, exist_ok=True)
    if rt == "ort":
        r = sh(["node", os.path.join(HERE, "ort_run.js"), model, out, "x=" + x], env=ENV)
    else:
        r = sh([calq, "run", model, "--input", "x=" + x, "--output-dir", out])
    if r.returncode:
        return None, r.stderr.strip()[-600:]
    # every output, flattened in name order into one vector (shapes checked apart)
    outs = [np.load(os.path.join(out, n)) for n in sorted(os.listdir(out)) if n.endswith(".npy")]
    if len(outs) == 1:
        return outs[0], None
    return np.concatenate([o.astype(np.float64).ravel() for o in outs]), None


def main():
    calq, d = sys.argv[1], sys.argv[2]
    names = sys.argv[3:] or sorted(f[:-5] for f in os.listdir(d) if f.endswith(".onnx"))
    bad = 0
    for name in names:
        model = os.path.join(d, name + ".onnx")
        w = os.path.join(d, name, "work")
        r = sh([calq, "inspect", model])
        if r.returncode:
            print("%-14s inspect FAILED: %s" % (name, r.stderr.strip()[-600:]))
            bad += 1
            continue
        inputs = [os.path.join(d, name, "cal", "0.npy"), os.path.join(d, name, "eval", "0.npy")]
        ref = []
        for k, x in enumerate(inputs):
            fo, e1 = run("ort", calq, model, x, os.path.join(w, "float_ort", str(k)))
            fc, e2 = run("calq", calq, model, x, os.path.join(w, "float_calq", str(k)))
            if fo is None or fc is None:
                print("%-14s float run FAILED on %s: ort %s | calq %s" % (name, x, e1, e2))
                bad += 1
                ref.append(None)
                continue
            if fo.shape != fc.shape:
                print("%-14s float shapes differ: ort %s calq %s" % (name, fo.shape, fc.shape))
                bad += 1
                ref.append(None)
                continue
            diff = float(np.max(np.abs(fo - fc))) if fo.size else 0.0
            scale = (float(np.max(np.abs(fo))) if fo.size else 0.0) or 1.0
            print("%-14s float input %d: max |ort - calq| %.3g (max |y| %.3g)%s" %
                  (name, k, diff, scale, "  MISMATCH" if diff > 1e-4 * max(1.0, scale) else ""))
            bad += diff > 1e-4 * max(1.0, scale)
            ref.append(fo)
        for scheme in ("layers", "int8"):
            prefix = os.path.join(w, scheme, "m")
            fmt = "all" if scheme == "layers" else "qdq,qoperator"
            r = sh([calq, "calibration", "--model", model, "--npy", os.path.join(d, name, "cal"), "--batch_num", "2",
                    "--save_path", prefix, "--format", fmt, "--qdq-scheme", scheme])
            if r.returncode:
                print("%-14s calibration %s FAILED: %s" % (name, scheme, r.stderr.strip()[-800:]))
                bad += 1
                continue
            files = [f for f in ("fake_quant_model", "deploy_model", "qdq", "qoperator")
                     if os.path.exists("%s_%s.onnx" % (prefix, f))]
            for f in files:
                path = "%s_%s.onnx" % (prefix, f)
                seen = {}
                for rt in ("ort", "calq"):
                    if rt == "ort" and f == "deploy_model":
                        continue
                    cos, cen = [], []
                    for k, x in enumerate(inputs):
                        if ref[k] is None:
                            continue
                        y, e = run(rt, calq, path, x, os.path.join(w, scheme, f, rt, str(k)))
                        if y is None:
                            print("%-14s %-6s %-16s %-4s FAILED: %s" % (name, scheme, f, rt, e))
                            bad += 1
                            break
                        cos.append(cosine(ref[k], y) if y.shape == ref[k].shape else float("nan"))
                        cen.append(centered(ref[k], y) if y.shape == ref[k].shape else float("nan"))
                    else:
                        # the same file in both runtimes: they run the same integers, so a gap is
                        # a defect of one of them or of the file (YOLOv8's DFL: onnxruntime 0.61,
                        # calq 1.00000, an overflow in onnxruntime's QLinearSoftmax)
                        seen[rt] = cen
                        gap = (rt == "calq" and "ort" in seen and len(seen["ort"]) == len(cen) and
                               max((abs(a - b) for a, b in zip(seen["ort"], cen)), default=0.0) > 0.01)
                        print("%-14s %-6s %-16s %-4s cosine cal %.5f eval %.5f  centered %.5f %.5f%s" %
                              (name, scheme, f, rt, cos[0] if cos else -1, cos[-1] if cos else -1,
                               cen[0] if cen else -1, cen[-1] if cen else -1,
                               "  RUNTIMES DISAGREE" if gap else ""))
                        bad += gap
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
