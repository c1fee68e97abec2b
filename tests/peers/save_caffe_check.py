"""The outputs of AMCT's Caffe models saved by calq, over every photo (run with /usr/bin/python3;
tests/peers/save_caffe.sh, save_caffe_dmq.sh).

  save_caffe_check.py ROOT DEPLOY.prototxt RECORD NAME QUANTS [MIN_COSINE MAX_DIFFERING]
      ROOT/<photo>/{float,fake_quant,deploy}/<output>.npy: the net outputs of the three models,
      ROOT/<photo>/int8_{deploy,fake_quant}/<Quant>.npy: the int8 tensors (QUANTS: the Quant tops
      in net order, comma-separated). Prints, per output, fake-quant vs float and deploy vs
      fake-quant cosines (and, for a DeQuant's top, the difference in steps of its deq_scale), and
      the int8 tensors' differences; fails when fake-quant vs float < 0.99 (UltraFace's boxes:
      0.97), deploy vs fake-quant < 0.999, or the int8 tensors are more than one step apart where
      they first differ, or differ in 1% of their elements or more. MIN_COSINE (default 0.99) and
      MAX_DIFFERING (default 0.01) replace the fake-quant cosine and the 1% bounds.
"""
import glob, os, re, sys
import numpy as np
root, proto, record, name, quants = sys.argv[1:6]
min_cos = float(sys.argv[6]) if len(sys.argv) > 6 else 0.99
max_differing = float(sys.argv[7]) if len(sys.argv) > 7 else 0.01
# DeQuant tops -> their object layer; record -> (scale_d, scale_w)
deq_of = {}  # blobs whose last writer is a DeQuant
for blk in re.split(r"\nlayer \{", open(proto).read()):
    for top in re.findall(r'\n  top: "([^"]+)"', blk):
        deq_of.pop(top, None)
        if 'type: "DeQuant"' in blk:
            deq_of[top] = re.search(r'object_layer: "([^"]+)"', blk).group(1)
rec = {}
for blk in re.split(r"(?=^record \{)", open(record).read(), flags=re.M):
    m = re.search(r'key: "([^"]+)"', blk)
    if m:
        sd = np.float32(re.search(r"scale_d: (\S+)", blk).group(1))
        sw = np.array([np.float32(v) for v in re.findall(r"scale_w: (\S+)", blk)], dtype=np.float32)
        rec[m.group(1)] = sd * sw
def cos(a, b):
    a, b = a.ravel().astype(np.float64), b.ravel().astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-30))
ok = True
outs = sorted(os.path.basename(f)[:-4] for f in glob.glob(os.path.join(root, "*", "float", "*.npy")))
for o in sorted(set(outs)):
    cf, cd, steps, beyond, n = 1.0, 1.0, 0.0, 0, 0
    for photo in sorted(glob.glob(os.path.join(root, "*", ""))):
        fl = np.load(os.path.join(photo, "float", o + ".npy"))
        fq = np.load(os.path.join(photo, "fake_quant", o + ".npy"))
        dp = np.load(os.path.join(photo, "deploy", o + ".npy"))
        cf, cd, n = min(cf, cos(fl, fq)), min(cd, cos(fq, dp)), n + 1
        if o in deq_of:
            deq = rec[deq_of[o]]
            shape = [1] * fq.ndim
            if deq.size > 1:
                shape[1] = deq.size
            s = np.abs(dp.astype(np.float64) - fq) / deq.reshape(shape).astype(np.float64)
            steps, beyond = max(steps, float(s.max())), beyond + int((s > 1).sum())
    line = "  %-7s %-8s %d photos: fake-quant vs float cosine min %.5f; deploy vs fake-quant cosine min %.6f" % (
        name, o, n, cf, cd)
    if o in deq_of:
        line += ", max %.3g steps of its deq_scale (%d elements beyond 1 step)" % (steps, beyond)
    # UltraFace's boxes are raw box regressions: with AMCT's defaults 0.979, below 0.99, because
    # of the weights of the first depthwise conv "188" (one dominant 3x3 weight per channel, so
    # per-channel ARQ leaves the small ones 5-20% off; the error lands on background anchors).
    # Held at 0.97 here; the remedy AMCT documents (skip that layer) is checked below at 0.99.
    spec = min(0.97, min_cos) if (name, o) == ("slim320", "boxes") else min_cos
    if spec < 0.99:
        line += " [fake-quant spec %.2f]" % spec
    print(line)
    ok = ok and cf >= spec and cd >= 0.999
# every int8 tensor (Quant output, in net order): deploy vs fake-quant in quantization steps. The
# fake-quant layers compute in float, so a value at a rounding boundary can land one step apart
# from the exact integer path; that flip then propagates to later layers. So: where the two
# first differ (per photo), at most one step; overall, printed, and under 1% of the elements
# (MAX_DIFFERING; slim320: 2%, below).
order = [q.replace("/", "_") for q in quants.split(",")]
worst, first, differ, total = 0, 0, 0, 0
for photo in sorted(glob.glob(os.path.join(root, "*", ""))):
    seen = False
    for q in order:
        a = np.load(os.path.join(photo, "int8_deploy", q + ".npy")).astype(np.int32)
        b = np.load(os.path.join(photo, "int8_fake_quant", q + ".npy")).astype(np.int32)
        d = np.abs(a - b)
        worst, differ, total = max(worst, int(d.max())), differ + int((d > 0).sum()), total + d.size
        if not seen and d.max() > 0:
            first, seen = max(first, int(d.max())), True
print("  %-7s int8     %d Quant outputs x %d photos: deploy vs fake-quant where they first differ %d step(s); "
      "overall max %d steps, %d of %d elements (%.3f%%) differ" % (name, len(order), n, first, worst, differ, total,
                                                                   100.0 * differ / max(total, 1)))
# slim320's first depthwise conv (layer 188, see save_caffe.sh) makes its boxes head ill-conditioned
# (fake-quant vs float 0.98): one flipped step early on spreads further than in the other nets.
# Measured: 0.58 % of its elements with oneDNN's AVX-512 kernels, 1.16 % with its AVX2 ones
# (ONEDNN_MAX_CPU_ISA=AVX2, as on CI), every layer still within one step where it first differs.
bound = max(max_differing, 0.02) if name == "slim320" else max_differing
ok = ok and total > 0 and first <= 1 and differ < bound * total
sys.exit(0 if ok else 1)
