#!/usr/bin/python3
"""Models with dynamic dims other than the batch (a text recogniser's width, an attention block's
sequence length) calibrate on .npy batches without --input_shape: the .npy header gives every
dim the model leaves unknown, as it gives a dynamic batch. The saved files keep the dim dynamic
and run at another width. A later file of another width is refused naming both shapes.
usage: dynamic_dims.py CALQ"""
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
# one batch per width: a file of another width is refused, naming both shapes
np.save(os.path.join(cal, "1.npy"), rng.standard_normal((1, 1, 8, 24)).astype(np.float32))
r = calq("calibration", "--model", model, "--npy", cal, "--batch_num", "2", "--save_path",
         os.path.join(T, "mixed", "m"))
if r.returncode != 1 or "1x1x8x24" not in r.stderr or "1x1x8x20" not in r.stderr:
    failures.append("batches of widths 20 and 24: expected a refusal naming both shapes, got rc %d: %s" %
                    (r.returncode, r.stderr.strip()))
subprocess.run(["rm", "-rf", T])
for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
