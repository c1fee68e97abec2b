#!/usr/bin/python3
"""Models with dynamic dims other than the batch (a text recogniser's width, an attention block's
sequence length) calibrate on .npy batches without --input_shape: the .npy header gives every
dim the model leaves unknown, as it gives a dynamic batch. The saved files keep the dim dynamic
and run at another width. Files of several widths run each at its own, and the factors are those
of all the layer inputs together; a file that differs in a fixed dim is refused. Photos
(--images) bind a dynamic N x 3 x H x W input: N at the images per batch, H x W at --resize (or
the first photo's size, refused naming the photo when another differs). A tensor whose size
depends on the data (rows picked by NonZero) calibrates when a later batch has more rows.
usage: dynamic_dims.py CALQ [SHARED_DIR]"""
import os
import subprocess
import sys
import tempfile

import numpy as np

try:
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError:
    print("SKIP: python3-onnx is missing")
    sys.exit(77)

CALQ = sys.argv[1]
FACES = os.path.join(sys.argv[2], "data", "faces") if len(sys.argv) > 2 else None
T = tempfile.mkdtemp(prefix="calq_dyn_")
failures = []


def calq(*args):
    return subprocess.run([CALQ] + list(args), capture_output=True, text=True)


def recogniser(path):
    """x [1, 1, 8, W] -> Conv 3x3 -> Relu -> ReduceMean over H -> [1, 4, W] -> Transpose ->
    MatMul [4, 5] -> y [1, W, 5]."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 1, 3, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b")
    fc = numpy_helper.from_array(rng.standard_normal((4, 5)).astype(np.float32), "fc")
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("ReduceMean", ["r"], ["m"], name="mean", axes=[2], keepdims=0),
        helper.make_node("Transpose", ["m"], ["t"], name="tr", perm=[0, 2, 1]),
        helper.make_node("MatMul", ["t", "fc"], ["y"], name="fc"),
    ]
    g = helper.make_graph(nodes, "rec", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 8, "W"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "W", 5])], [w, b, fc])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)


def cosine(a, b):
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


model = os.path.join(T, "rec.onnx")
recogniser(model)
rng = np.random.default_rng(1)
cal = os.path.join(T, "cal")
os.makedirs(cal)
for k in range(2):
    np.save(os.path.join(cal, "%d.npy" % k), rng.standard_normal((1, 1, 8, 20)).astype(np.float32))
prefix = os.path.join(T, "out", "m")
r = calq("calibration", "--model", model, "--npy", cal, "--batch_num", "2", "--save_path", prefix, "--format",
         "qdq,qoperator")
if r.returncode != 0:
    failures.append("calibration on 1x1x8x20 .npy batches of a 1x1x8xW model: rc %d: %s" %
                    (r.returncode, r.stderr.strip()[-600:]))
elif "x:1x1x8x20 float32" not in r.stderr:
    failures.append("the data summary does not give the batches' shape 1x1x8x20: %s" % r.stderr)
else:
    # the saved files keep W dynamic: they run at another width and follow the float model
    x = os.path.join(T, "x33.npy")
    np.save(x, rng.standard_normal((1, 1, 8, 33)).astype(np.float32))
    r = calq("run", model, "--input", "x=" + x, "--output-dir", os.path.join(T, "f"))
    ref = np.load(os.path.join(T, "f", "y.npy")) if r.returncode == 0 else None
    if ref is None or ref.shape != (1, 33, 5):
        failures.append("float run at width 33: %s" % (r.stderr.strip() or str(ref.shape)))
    for f in ("qdq", "qoperator"):
        r = calq("run", "%s_%s.onnx" % (prefix, f), "--input", "x=" + x, "--output-dir", os.path.join(T, f))
        if r.returncode != 0:
            failures.append("%s file at width 33: %s" % (f, r.stderr.strip()[-600:]))
            continue
        y = np.load(os.path.join(T, f, "y.npy"))
        if ref is not None and (y.shape != ref.shape or cosine(ref, y) < 0.99):
            failures.append("%s file at width 33: shape %s, cosine %.5f" % (f, y.shape, cosine(ref, y)))
        else:
            print("%s at width 33: cosine %.5f" % (f, cosine(ref, y)))
# batches of several widths (text lines as they come): each batch runs at its own width, and
# every layer's factors are those of all its inputs together (calq factors on the concatenation)
np.save(os.path.join(cal, "1.npy"), rng.standard_normal((1, 1, 8, 24)).astype(np.float32))
mixed = os.path.join(T, "mixed", "m")
r = calq("calibration", "--model", model, "--npy", cal, "--batch_num", "2", "--save_path", mixed, "--format", "qdq")
if r.returncode != 0:
    failures.append("batches of widths 20 and 24: rc %d: %s" % (r.returncode, r.stderr.strip()[-600:]))
else:
    rec = open(mixed + "_record.txt").read()

    def record_factors(key):
        block = rec[rec.index('key: "%s"' % key):]
        return (float(block.split("scale_d:")[1].split()[0]), int(block.split("offset_d:")[1].split()[0]))

    for layer, tensor in (("conv", "x"), ("fc", "t")):
        parts = []
        for k in range(2):
            f = os.path.join(cal, "%d.npy" % k)
            if tensor == "x":
                parts.append(np.load(f).ravel())
            else:
                d = os.path.join(T, "dump%d" % k)
                calq("run", model, "--input", "x=" + f, "--output-dir", d, "--dump", tensor, "--no-fusion")
                parts.append(np.load(os.path.join(d, tensor + ".npy")).ravel())
        cat = os.path.join(T, "cat_%s.npy" % tensor)
        np.save(cat, np.concatenate(parts))
        r = calq("factors", "--algo", "ifmr", "--input", cat, "--json")
        import json
        want = json.loads(r.stdout) if r.returncode == 0 else None
        got = record_factors(layer)
        if not want or abs(want["scale"] - got[0]) > 1e-9 * max(1.0, abs(got[0])) or want["offset"] != got[1]:
            failures.append("widths 20 and 24, layer %s: record %s, calq factors on both batches' inputs %s" %
                            (layer, got, r.stdout.strip() or r.stderr.strip()))
        else:
            print("widths 20 and 24, layer %s: scale_d %.9g offset_d %d = calq factors on both inputs" %
                  ((layer,) + got))
    # calq compare reads each batch at its own width too: its output figures equal those computed
    # from the two models' outputs (calq run, as compare runs them) over both widths; every layer
    # gets its isolated and sensitivity figures; the accuracy search runs on these batches
    import json
    j = os.path.join(T, "mixed.json")
    r = calq("compare", "--model", model, "--quantized", mixed + "_qdq.onnx", "--npy", cal, "--isolated",
             "--sensitivity", "--json", j)
    if r.returncode != 0:
        failures.append("compare on widths 20 and 24: rc %d: %s" % (r.returncode, r.stderr.strip()[-600:]))
    else:
        rep = json.load(open(j))
        ys, qs = [], []
        for k in range(2):
            f = os.path.join(cal, "%d.npy" % k)
            for m, acc in ((model, ys), (mixed + "_qdq.onnx", qs)):
                d = os.path.join(T, "cmp%d_%d" % (k, len(acc)))
                calq("run", m, "--input", "x=" + f, "--output-dir", d, "--no-fusion")
                acc.append(np.load(os.path.join(d, "y.npy")).ravel())
        want = cosine(np.concatenate(ys), np.concatenate(qs))
        got = rep["outputs"][0]
        if got["count"] != (20 + 24) * 5 or abs(got["cosine"] - want) > 1e-6:
            failures.append("compare on widths 20 and 24: %d values, cosine %s; calq run gives %d, %.9f" %
                            (got["count"], got["cosine"], (20 + 24) * 5, want))
        elif rep["layers"][0]["sensitivity_cosine"] is None or \
                any((l["isolated_cosine"] is None) != (l["sensitivity_cosine"] is None) for l in rep["layers"]):
            failures.append("compare on widths 20 and 24: layers without figures: %s" % rep["layers"])
        else:
            print("compare on widths 20 and 24: %d values, cosine %.6f = calq run's; layers alone at the outputs: %s"
                  % (got["count"], got["cosine"],
                     ", ".join("%s %s" % (l["name"], l["sensitivity_cosine"]) for l in rep["layers"])))
    r = calq("calibration", "--model", model, "--npy", cal, "--batch_num", "2", "--save_path",
             os.path.join(T, "mixed_fb", "m"), "--format", "qdq", "--target-cosine", "0.99998")
    if r.returncode != 0 or "calq: min output cosine" not in r.stderr:
        failures.append("--target-cosine on widths 20 and 24: rc %d: %s" % (r.returncode, r.stderr.strip()[-600:]))
# a fixed dim may not differ: the model takes 8 rows
np.save(os.path.join(cal, "1.npy"), rng.standard_normal((1, 1, 9, 20)).astype(np.float32))
r = calq("calibration", "--model", model, "--npy", cal, "--batch_num", "2", "--save_path",
         os.path.join(T, "rows", "m"))
if r.returncode != 1 or "1x1x9x20" not in r.stderr or "1x1x8x20" not in r.stderr:
    failures.append("a batch of 9 rows for an 8-row input: expected a refusal naming both shapes, got rc %d: %s" %
                    (r.returncode, r.stderr.strip()))

def detector(path, dims):
    """x [dims] -> Conv 3x3 stride 2 -> Relu -> Conv 1x1 -> y."""
    rng = np.random.default_rng(2)
    w1 = numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "w1")
    w2 = numpy_helper.from_array(rng.standard_normal((2, 8, 1, 1)).astype(np.float32), "w2")
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c"], name="conv1", pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Conv", ["r", "w2"], ["y"], name="conv2")]
    g = helper.make_graph(nodes, "det", [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w1, w2])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)


if FACES and os.path.isdir(FACES):
    # photos: a dynamic batch (the common torch export), and dynamic N, H and W
    for tag, dims, resize, fed in (("n", ["N", 3, 48, 64], ["--resize", "64x48"], "x:1x3x48x64"),
                                   ("nhw", ["N", 3, "H", "W"], ["--resize", "40x24"], "x:1x3x24x40")):
        model = os.path.join(T, "det_%s.onnx" % tag)
        detector(model, dims)
        r = calq("calibration", "--model", model, "--images", FACES, "--batch_num", "2", "--save_path",
                 os.path.join(T, tag, "m"), "--format", "qdq", *resize)
        if r.returncode != 0 or fed not in r.stderr:
            failures.append("photos into a %s model with %s: rc %d, expected batches of %s: %s" %
                            ("x".join(map(str, dims)), " ".join(resize), r.returncode, fed, r.stderr.strip()[-600:]))
        else:
            print("photos into %s: fed at %s" % ("x".join(map(str, dims)), fed))
    # without --resize, every photo must have the first one's size; the first that does not is named
    r = calq("calibration", "--model", os.path.join(T, "det_nhw.onnx"), "--images", FACES, "--batch_num", "13",
             "--save_path", os.path.join(T, "nhw_keep", "m"))
    if r.returncode != 1 or "add --resize" not in r.stderr:
        failures.append("photos of several sizes without --resize: expected a refusal, got rc %d: %s" %
                        (r.returncode, r.stderr.strip()[-600:]))

# A data-dependent size with inputs of one shape: NonZero picks the positive entries of x and a
# Gemm maps each (as RoIs after NMS reach a detector's box head). The first batch has fewer rows
# than the second; the bound calibration derived from the first batch (rows x batches) used to
# refuse the second ("more than the ... declared as max_count"). Factors: those of both batches'
# Gemm inputs together, as `calq factors` computes them on the concatenation.
def rows_model(path):
    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array(rng.standard_normal((4, 8)).astype(np.float32), "W"),
             numpy_helper.from_array(np.array([-1, 4], np.int64), "shp"),
             numpy_helper.from_array(np.array([-1], np.int64), "flat"),
             numpy_helper.from_array(np.array(0, np.float32), "zero"),
             numpy_helper.from_array(np.array(1, np.int64), "one")]
    nodes = [helper.make_node("Greater", ["x", "zero"], ["pos"]),
             helper.make_node("NonZero", ["pos"], ["nz"]),
             helper.make_node("Gather", ["nz", "one"], ["cols"], axis=0),
             helper.make_node("Reshape", ["x", "flat"], ["xf"]),
             helper.make_node("Gather", ["xf", "cols"], ["v"], axis=0),
             helper.make_node("Concat", ["v", "v", "v", "v"], ["v4"], axis=0),
             helper.make_node("Reshape", ["v4", "shp"], ["rows"]),
             helper.make_node("Gemm", ["rows", "W"], ["y"], name="head_fc")]
    g = helper.make_graph(nodes, "rows", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["K", 8])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)


model = os.path.join(T, "rows.onnx")
rows_model(model)
rcal = os.path.join(T, "rows_cal")
os.makedirs(rcal)
rng = np.random.default_rng(4)
for k, npos in enumerate((10, 40, 0, 35)):  # the third batch gives no rows at all
    x = -np.abs(rng.standard_normal((1, 64))).astype(np.float32)
    x[0, :npos] *= -1
    np.save(os.path.join(rcal, "%d.npy" % k), x)
prefix = os.path.join(T, "rows_out", "m")
r = calq("calibration", "--model", model, "--npy", rcal, "--batch_num", "4", "--save_path", prefix, "--format", "qdq")
if r.returncode != 0:
    failures.append("10, 40, 0, 35 rows into a Gemm: rc %d: %s" % (r.returncode, r.stderr.strip()[-600:]))
else:
    parts = []
    for k in range(4):
        d = os.path.join(T, "rows_dump%d" % k)
        calq("run", model, "--input", "x=" + os.path.join(rcal, "%d.npy" % k), "--output-dir", d, "--dump", "rows",
             "--no-fusion")
        parts.append(np.load(os.path.join(d, "rows.npy")).ravel())
    cat = os.path.join(T, "cat_rows.npy")
    np.save(cat, np.concatenate(parts))
    r = calq("factors", "--algo", "ifmr", "--input", cat, "--json")
    import json
    want = json.loads(r.stdout) if r.returncode == 0 else None
    rec = open(prefix + "_record.txt").read()
    block = rec[rec.index('key: "head_fc"'):]
    got = (float(block.split("scale_d:")[1].split()[0]), int(block.split("offset_d:")[1].split()[0]))
    if not want or abs(want["scale"] - got[0]) > 1e-9 * max(1.0, abs(got[0])) or want["offset"] != got[1]:
        failures.append("rows 10, 40, 0, 35: record %s, calq factors on all rows %s" %
                        (got, r.stdout.strip() or r.stderr.strip()))
    else:
        print("rows 10, 40, 0, 35 into a Gemm: scale_d %.9g offset_d %d = calq factors on all rows" % got)
subprocess.run(["rm", "-rf", T])
for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
