"""DMQ balancing in AMCT's Caffe models saved by calq (tests/peers/save_caffe.sh dmq; issue 12 item 2),
run with /usr/bin/python3 (numpy, python3-opencv).

  caffe_dmq_check.py json-config IN.json OUT.json ALPHA
      OUT: calq's config IN with "dmq_balancer_param": ALPHA on every layer with weights.
  caffe_dmq_check.py check FLOAT.prototxt FLOAT.caffemodel FQ.prototxt FQ.caffemodel RECORD STRIPPED.prototxt
      The fake-quant model against the balancing math (docs/caffe.md, "DMQ"):
        - every layer with tensor_balance_factor s in the record reads its bottom through the
          Scale layer "<layer>_dmq_scale" (scale_param axis, num_axes, bias_term false), which its
          Quant reads;
        - writes STRIPPED: the fake-quant prototxt without its Quant / DeQuant / AntiQuant layers
          (AMCT's types, which OpenCV does not know), each reader of a Quant reading its bottom;
        - through OpenCV's DNN reading STRIPPED + FQ.caffemodel (an independent reader of both
          files): the Scale's blob is exactly float32(1) / s, and the layer's weights exactly
          round_half_away(W·s / scale_w) * scale_w of the float model's W balanced by hand.
  caffe_dmq_check.py compare CALQ_DIR OPENCV_DIR FLOAT_DIR NAME
      calq vs OpenCV on the stripped model (max difference, fails above 1e-4 of the output's
      range), and its cosine to the float model's outputs (printed).
  caffe_dmq_check.py twin ONNX_RECORD CAFFE_RECORD ONNX_OUT.npy CAFFE_OUT.npy
      The ONNX and Caffe twins of one net calibrated alike: the records list the same factors and
      scale_d layer by layer (their layer names differ), and the two outputs are equal (1e-6).
  caffe_dmq_check.py improves ROOT OUTPUT
      ROOT/<batch>/{float,plain,dmq}/OUTPUT.npy: the fake-quant cosine vs float over all batches,
      without and with DMQ; fails unless DMQ's is higher.
"""
import collections
import glob
import json
import os
import re
import sys

import numpy as np


def json_config(src, dst, alpha):
    c = json.load(open(src), object_pairs_hook=collections.OrderedDict)
    n = 0
    for k, v in list(c.items()):
        if isinstance(v, dict) and "weight_quant_params" in v:
            items = [(a, b) for a, b in v.items() if a != "quant_enable"]
            c[k] = collections.OrderedDict([("quant_enable", v["quant_enable"]), ("dmq_balancer_param", float(alpha))] +
                                           items)
            n += 1
    json.dump(c, open(dst, "w"), indent=4)
    print("config: dmq_balancer_param %s on %d layers" % (alpha, n))
    return 0 if n else 1


def blocks(path):
    """(header text, [top-level layer blocks]) of a prototxt as calq writes it."""
    text = open(path).read()
    first = text.index("layer {")
    head, rest = text[:first], text[first:]
    out = re.split(r"(?m)^(?=layer \{)", rest)
    return head, [b for b in out if b.strip()]


def field(b, name):
    """The string values of field `name` of layer block b (one-line or indented prototxt)."""
    return re.findall(r'(?<![\w])%s:\s*"([^"]*)"' % name, b)


def read_record(path):
    rec = {}
    for blk in re.split(r"(?=^record \{)", open(path).read(), flags=re.M):
        m = re.search(r'key: "([^"]+)"', blk)
        if not m:
            continue
        s = np.array([np.float32(v) for v in re.findall(r"tensor_balance_factor: (\S+)", blk)], dtype=np.float32)
        sw = np.array([np.float32(v) for v in re.findall(r"scale_w: (\S+)", blk)], dtype=np.float32)
        if s.size:
            rec[m.group(1)] = (s, sw)
    return rec


def round_away(t):
    t = t.astype(np.float64)
    i = np.trunc(t)
    return i + np.sign(t) * (np.abs(t - i) >= 0.5)


def in_channel_scale(kind, w, s):
    """s broadcast onto weight w (as OpenCV holds it) of a layer of Caffe type kind."""
    if kind == "InnerProduct":
        return w.reshape(w.shape[0], -1), s.reshape(1, -1)
    if kind == "Deconvolution":
        return w, s.reshape(-1, *([1] * (w.ndim - 1)))
    o, cg = w.shape[0], w.shape[1]
    g = s.size // cg
    ch = (np.arange(o)[:, None] // (o // g)) * cg + np.arange(cg)[None, :]
    return w, s[ch].reshape(o, cg, *([1] * (w.ndim - 2)))


def check(float_proto, float_model, fq_proto, fq_model, record, stripped):
    import cv2

    rec = read_record(record)
    head, bl = blocks(fq_proto)
    by_name = {field(b, "name")[0]: b for b in bl}
    ok = True
    # the Scale of every balanced layer, read by its Quant, which the layer reads
    for layer in rec:
        sc = by_name.get(layer + "_dmq_scale")
        if sc is None or field(sc, "type") != ["Scale"] or "    bias_term: false" not in sc:
            print("FAIL: %s: no Scale layer %s_dmq_scale without bias" % (layer, layer))
            ok = False
            continue
        quant = [b for b in bl if field(b, "type") == ["Quant"] and field(b, "bottom") == [layer + "_dmq_scale"]]
        if len(quant) != 1 or field(by_name[layer], "bottom") != field(quant[0], "top"):
            print("FAIL: %s: its Quant does not read the Scale, or the layer does not read that Quant" % layer)
            ok = False
    # the stripped model: AMCT's layers removed, their readers reading the float blob
    alias, keep = {}, []
    for b in bl:
        t = field(b, "type")[0]
        if t in ("Quant", "AntiQuant"):
            src = field(b, "bottom")[0]
            alias[field(b, "top")[0]] = alias.get(src, src)
            continue
        if t == "DeQuant":
            continue
        b = re.sub(r'(?<![\w])(bottom:\s*")([^"]*)(")', lambda m: m.group(1) + alias.get(m.group(2), m.group(2)) + m.group(3),
                   b)
        keep.append(b)
    with open(stripped, "w") as f:
        f.write(head + "".join(keep))
    # layers whose top a BatchNorm reads: calq folds it into their weights (§8.3), not this
    # check's arithmetic (their Scale blob is still checked)
    _, fbl = blocks(float_proto)
    tops = {field(b, "name")[0]: field(b, "top") for b in fbl}
    bn_read = {t for b in fbl if field(b, "type") == ["BatchNorm"] for t in field(b, "bottom")}
    folded = {name for name, t in tops.items() if set(t) & bn_read}
    fnet = cv2.dnn.readNetFromCaffe(float_proto, float_model)
    qnet = cv2.dnn.readNetFromCaffe(stripped, fq_model)
    n_scale = n_w = 0
    for layer, (s, sw) in rec.items():
        inv = qnet.getParam(layer + "_dmq_scale", 0).ravel()
        want = (np.float32(1) / s).astype(np.float32)
        if inv.size != s.size or not np.array_equal(inv, want):
            print("FAIL: %s: the Scale's blob (%d values) is not float32(1)/s (%d factors)" % (layer, inv.size, s.size))
            ok = False
        else:
            n_scale += 1
        kind = field(by_name[layer], "type")[0]
        if layer in folded:
            print("  %-9s %4d factors in [%.4g, %.4g] (BatchNorm folded: weights not checked)" %
                  (layer, s.size, float(s.min()), float(s.max())))
            continue
        w0 = fnet.getParam(layer, 0).astype(np.float32)
        w, sb = in_channel_scale(kind, w0, s)
        wb = (w * sb).astype(np.float32)
        c = 1 if kind == "Deconvolution" else 0  # the output channels (scale_w, §8.2)
        shape = [1] * wb.ndim
        if sw.size > 1:
            shape[c] = sw.size
        swb = sw.reshape(shape) if sw.size > 1 else sw[0]
        q = np.clip(round_away((wb / swb).astype(np.float32)), -128, 127)
        want_w = (q.astype(np.float32) * swb).astype(np.float32)
        got = qnet.getParam(layer, 0).astype(np.float32).reshape(want_w.shape)
        bad = int((got != want_w).sum())
        if bad:
            print("FAIL: %s: %d of %d fake-quant weights differ from round(W*s/scale_w)*scale_w (max %.3g)" %
                  (layer, bad, got.size, float(np.abs(got - want_w).max())))
            ok = False
        else:
            n_w += 1
        print("  %-9s %4d factors in [%.4g, %.4g]" % (layer, s.size, float(s.min()), float(s.max())))
    print("fake-quant: %d balanced layers; %d Scale blobs equal 1/s, %d weights equal round(W*s/scale_w)*scale_w "
          "(read by OpenCV)%s" % (len(rec), n_scale, n_w, ", %d folded with a BatchNorm" % len(folded & set(rec))
                                  if folded & set(rec) else ""))
    return 0 if ok and rec and n_scale == len(rec) and n_w == len(set(rec) - folded) and n_w > 0 else 1


def cos(a, b):
    a, b = a.ravel().astype(np.float64), b.ravel().astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-30))


def compare(calq_dir, cv_dir, float_dir, name):
    ok, n = True, 0
    for f in sorted(glob.glob(os.path.join(cv_dir, "*.npy"))):
        o = os.path.basename(f)
        a, b = np.load(os.path.join(calq_dir, o)), np.load(f)
        fl = np.load(os.path.join(float_dir, o))
        d = float(np.abs(a.astype(np.float64) - b.reshape(a.shape)).max())
        rng = float(np.abs(b).max()) or 1.0
        print("  %s %-8s stripped fake-quant model: calq vs OpenCV max difference %.3g (%.2g of its range); "
              "cosine to float %.5f" % (name, o[:-4], d, d / rng, cos(a, fl)))
        ok, n = ok and d <= 1e-4 * rng, n + 1
    return 0 if ok and n else 1


def records(path):
    out = []
    for blk in re.split(r"(?=^record \{)", open(path).read(), flags=re.M):
        m = re.search(r'key: "([^"]+)"', blk)
        if m:
            s = np.array([np.float32(v) for v in re.findall(r"tensor_balance_factor: (\S+)", blk)], dtype=np.float32)
            out.append((m.group(1), s, np.float32(re.search(r"scale_d: (\S+)", blk).group(1))))
    return out


def twin(onnx_record, caffe_record, onnx_out, caffe_out):
    a, b = records(onnx_record), records(caffe_record)
    ok = len(a) == len(b) and len(a) > 0
    worst_s = worst_d = 0.0
    for (na, sa, da), (nb, sb, db) in zip(a, b):
        if sa.size != sb.size or sa.size == 0:
            print("FAIL: %s (ONNX) has %d factors, %s (Caffe) %d" % (na, sa.size, nb, sb.size))
            ok = False
            continue
        worst_s = max(worst_s, float(np.abs(sa / sb - 1).max()))
        worst_d = max(worst_d, abs(float(da / db) - 1))
    x, y = np.load(onnx_out), np.load(caffe_out)
    d = float(np.abs(x - y.reshape(x.shape)).max())
    print("ONNX vs Caffe twin: %d balanced layers each; factors max relative difference %.3g, scale_d %.3g; "
          "deploy outputs max difference %.3g" % (len(a), worst_s, worst_d, d))
    return 0 if ok and worst_s <= 1e-6 and worst_d <= 1e-6 and d <= 1e-6 else 1


def improves(root, output):
    def cat(k):
        return np.concatenate([np.load(os.path.join(b, k, output + ".npy")).ravel()
                               for b in sorted(glob.glob(os.path.join(root, "*", "")))])

    fl = cat("float")
    c0, c1 = cos(fl, cat("plain")), cos(fl, cat("dmq"))
    print("outliers: fake-quant %s cosine vs float: without DMQ %.6f, with DMQ 0.5 %.6f" % (output, c0, c1))
    return 0 if c1 > c0 else 1


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "json-config" and len(sys.argv) == 5:
        sys.exit(json_config(*sys.argv[2:]))
    if cmd == "check" and len(sys.argv) == 8:
        sys.exit(check(*sys.argv[2:]))
    if cmd == "twin" and len(sys.argv) == 6:
        sys.exit(twin(*sys.argv[2:]))
    if cmd == "improves" and len(sys.argv) == 4:
        sys.exit(improves(*sys.argv[2:]))
    if cmd == "compare" and len(sys.argv) == 6:
        sys.exit(compare(*sys.argv[2:]))
    sys.exit(__doc__)
