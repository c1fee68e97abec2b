#!/usr/bin/python3
"""--qdq-scheme int8 on two detector heads onnxruntime used to get wrong.

usage: int8_softmax_compare.py CALQ

1. YOLOv8's DFL: a convolution's 64 channels viewed as 4 x 16 bins, Softmax over the 16 bins,
   then a fixed 1x1 convolution with weights 0..15 (the expected bin). With flat distributions
   (largest probability ~0.08) the calibrated scale of the Softmax's output is ~0.08 / 255, and
   onnxruntime's QLinearSoftmax (which its optimizer fuses DequantizeLinear -> Softmax ->
   QuantizeLinear into, and which the QOperator file writes) multiplies by floor(1 / y_scale) in
   float, overflowing above ~148 x 16: its boxes came out in [0, 1] instead of ~7.5 (cosine 0.6).
   Checked: the Softmax output's scale is 1 / K for an integer K with floor(1 / scale) == K and
   K <= 140 x 16, and onnxruntime's outputs of both files agree with the float model's
   (cosine >= 0.9999) and with calq's run of the same files.
2. CenterNet's peak test: heat = Sigmoid(conv), keep = Equal(MaxPool3x3(heat), heat), out =
   heat * Cast(keep). Quantizing the compared tensors (or the logits the Sigmoid maps one to one)
   makes plateaus of equal 8-bit values, all "peaks". Checked: no tensor that Equal reads, nor
   the Sigmoid's input, is quantized in the QDQ file, and the peaks onnxruntime finds in the QDQ
   file are the float model's (at most 1 % more). Likewise for ArgMax over Sigmoid scores (ties
   pick the first class).
3. Two Softmaxes (D = 16 and 64) joined by a Concat share one scale, which must suit D = 16.
4. Add then Clip(0.5, 6): the Clip is not redundant after a Q, so the Add stays float in the
   QOperator file, and the QDQ file must quantize the same tensors (it rounded the Add's inputs).
5. A Concat joining a Softmax's output and a Clip(0, 6)'s: the Softmax rule (scale 1 / K) runs
   after the Clip's cap and widens the group's scale past 6 / 255, so the Clip is no longer
   redundant after a Q although the plan's pruning saw it redundant. Checked: both files still
   quantize the same tensors (the writers ask the final scale) and their onnxruntime outputs match
   the float model's (cosine >= 0.999).
Exit 0 / 1 / 77 (python3-onnx or onnxruntime-node missing).
"""
import os
import sys
import tempfile

import numpy as np

try:
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh
except ImportError:
    onnx = None

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from checks import FAILS, cosine, fail, run  # noqa: E402
REG = 16




def dfl_model(path, rng):
    c = lambda n, v: nh.from_array(np.asarray(v, np.float32), n)  # noqa: E731
    inits = [c("w0", rng.standard_normal((16, 3, 3, 3)) * 0.3), c("b0", rng.standard_normal(16) * 0.1),
             c("w1", rng.standard_normal((4 * REG, 16, 1, 1)) * 0.01), c("b1", np.zeros(4 * REG)),
             c("wd", np.arange(REG, dtype=np.float32).reshape(1, REG, 1, 1)),
             nh.from_array(np.array([1, 4, REG, 256], np.int64), "shape4"),
             nh.from_array(np.array([1, 4, 256], np.int64), "shape3")]
    nodes = [h.make_node("Conv", ["x", "w0", "b0"], ["f"], name="stem", kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                         strides=[2, 2]),
             h.make_node("Relu", ["f"], ["fr"], name="stem_relu"),
             h.make_node("Conv", ["fr", "w1", "b1"], ["box"], name="box", kernel_shape=[1, 1]),
             h.make_node("Reshape", ["box", "shape4"], ["bins"], name="view"),
             h.make_node("Transpose", ["bins"], ["binst"], name="bins_first", perm=[0, 2, 1, 3]),
             h.make_node("Softmax", ["binst"], ["prob"], name="softmax", axis=1),
             h.make_node("Conv", ["prob", "wd"], ["dist"], name="dfl", kernel_shape=[1, 1]),
             h.make_node("Reshape", ["dist", "shape3"], ["y"], name="boxes")]
    g = h.make_graph(nodes, "dfl", [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 32, 32])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, 4, 256])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    m.ir_version = 7
    onnx.checker.check_model(m)
    onnx.save(m, path)


def peak_model(path, rng):
    c = lambda n, v: nh.from_array(np.asarray(v, np.float32), n)  # noqa: E731
    inits = [c("w0", rng.standard_normal((16, 3, 3, 3)) * 0.3), c("b0", rng.standard_normal(16) * 0.1),
             c("w1", rng.standard_normal((4, 16, 3, 3)) * 0.1), c("b1", rng.standard_normal(4) * 0.1 - 1.0),
             c("w2", rng.standard_normal((6, 16, 1, 1)) * 0.1), c("b2", np.zeros(6))]
    nodes = [h.make_node("Conv", ["x", "w0", "b0"], ["f"], name="trunk", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             h.make_node("Relu", ["f"], ["fr"], name="trunk_relu"),
             h.make_node("Conv", ["fr", "w1", "b1"], ["logit"], name="hm", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             h.make_node("Sigmoid", ["logit"], ["heat"], name="sigmoid"),
             h.make_node("MaxPool", ["heat"], ["hmax"], name="nms_pool", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             h.make_node("Equal", ["hmax", "heat"], ["peak"], name="is_peak"),
             h.make_node("Cast", ["peak"], ["keep"], name="keep", to=T.FLOAT),
             h.make_node("Mul", ["heat", "keep"], ["y"], name="suppress"),
             h.make_node("Conv", ["fr", "w2", "b2"], ["logit2"], name="cls_head", kernel_shape=[1, 1]),
             h.make_node("Sigmoid", ["logit2"], ["score"], name="cls_sigmoid"),
             h.make_node("ArgMax", ["score"], ["cls"], name="cls_argmax", axis=1, keepdims=0)]
    g = h.make_graph(nodes, "peaks", [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 48, 48])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, 4, 48, 48]),
                      h.make_tensor_value_info("cls", T.INT64, [1, 48, 48])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    m.ir_version = 7
    onnx.checker.check_model(m)
    onnx.save(m, path)



def calibrate(calq, t, name, model, shape, rng):
    """Writes 3 smooth-noise batches (2 calibrated on, 1 held out); returns (out prefix, held-out npy)."""
    cal = os.path.join(t, name + "_cal")
    os.makedirs(cal)
    for k in range(3):
        x = rng.standard_normal(shape).astype(np.float32)
        x = (x + np.roll(x, 1, 2) + np.roll(x, 1, 3)) / 1.7
        np.save(os.path.join(cal, "%d.npy" % k), x.astype(np.float32))
    held = os.path.join(t, name + "_held.npy")
    os.rename(os.path.join(cal, "2.npy"), held)
    out = os.path.join(t, "out", name)
    run([calq, "calibration", "--model", model, "--npy", cal, "--batch_num", "2", "--save_path", out,
         "--format", "qdq,qoperator", "--qdq-scheme", "int8"])
    return out, held


def outputs(calq, t, env, tag, path, held):
    d = os.path.join(t, "ort_" + tag)
    os.makedirs(d)
    run(["node", os.path.join(HERE, "ort_run.js"), path, d, "x=" + held], env=env)
    dc = os.path.join(t, "calq_" + tag)
    run([calq, "run", "--model", path, "--input", "x=" + held, "--output-dir", dc])
    return np.load(os.path.join(d, "y.npy")), np.load(os.path.join(dc, "y.npy"))


def check_dfl(calq, t, env, rng):
    model = os.path.join(t, "dfl.onnx")
    dfl_model(model, rng)
    out, held = calibrate(calq, t, "dfl", model, (1, 3, 32, 32), rng)
    m = onnx.load(out + "_qdq.onnx")
    inits = {i.name: nh.to_array(i) for i in m.graph.initializer}
    qs = [n for n in m.graph.node if n.op_type == "QuantizeLinear" and n.input[0] == "prob"]
    if len(qs) != 1:
        fail("dfl qdq: %d QuantizeLinear on the Softmax's output, expected 1" % len(qs))
    else:
        s = np.float32(inits[qs[0].input[1]])
        k = np.floor(np.float32(1.0) / s)
        print("dfl: softmax output scale %.9g, floor(1 / scale) = %d" % (s, k))
        if not (1 <= k <= 140 * REG) or abs(float(s) * float(k) - 1.0) > 1e-6:
            fail("dfl qdq: softmax output scale %.9g is not 1 / K with K <= %d" % (s, 140 * REG))
    want = None
    d = os.path.join(t, "ort_dfl_float")
    os.makedirs(d)
    run(["node", os.path.join(HERE, "ort_run.js"), model, d, "x=" + held], env=env)
    want = np.load(os.path.join(d, "y.npy"))
    for fmt in ("qdq", "qoperator"):
        ort, mine = outputs(calq, t, env, "dfl_" + fmt, "%s_%s.onnx" % (out, fmt), held)
        c_ort, c_calq = cosine(want, ort), cosine(want, mine)
        print("dfl %s: cosine vs float onnxruntime %.6f, calq %.6f (values %.4f..%.4f, float %.4f..%.4f)" %
              (fmt, c_ort, c_calq, ort.min(), ort.max(), want.min(), want.max()))
        worst = max(np.abs(ort - want).max(), np.abs(mine - want).max())
        if c_ort < 0.9999 or c_calq < 0.9999 or worst > 0.05:
            fail("dfl %s: cosine vs float %.6f (onnxruntime) / %.6f (calq) < 0.9999 or max difference %.4f > 0.05" %
                 (fmt, c_ort, c_calq, worst))


def check_peaks(calq, t, env, rng):
    model = os.path.join(t, "peaks.onnx")
    peak_model(model, rng)
    out, held = calibrate(calq, t, "peaks", model, (1, 3, 48, 48), rng)
    m = onnx.load(out + "_qdq.onnx")
    quantized = {n.input[0] for n in m.graph.node if n.op_type == "QuantizeLinear"}
    for v in ("heat", "hmax", "logit", "score", "logit2"):
        if v in quantized:
            fail("peaks qdq: %s is quantized (a comparison reads it or its one-to-one image)" % v)
    if "fr" not in quantized:
        fail("peaks qdq: the convolution's input fr is not quantized (the int8 plan is off?)")
    d = os.path.join(t, "ort_peaks_float")
    os.makedirs(d)
    run(["node", os.path.join(HERE, "ort_run.js"), model, d, "x=" + held], env=env)
    want = np.load(os.path.join(d, "y.npy")) > 0
    for fmt in ("qdq", "qoperator"):
        ort, _ = outputs(calq, t, env, "peaks_" + fmt, "%s_%s.onnx" % (out, fmt), held)
        got = ort > 0
        print("peaks %s: %d peaks in onnxruntime, float model %d, agreement %.4f" %
              (fmt, got.sum(), want.sum(), (got == want).mean()))
        if got.sum() > want.sum() * 1.01 + 2:
            fail("peaks %s: %d peaks against the float model's %d (plateaus of equal values)" %
                 (fmt, got.sum(), want.sum()))


def two_softmax_model(path, rng):
    """Softmaxes over 16 (axis 1) and 64 (axis 3) elements whose outputs a Concat joins into one
    group: the group's scale must suit the smaller D."""
    c = lambda n, v: nh.from_array(np.asarray(v, np.float32), n)  # noqa: E731
    inits = [c("wa", rng.standard_normal((16, 3, 1, 1)) * 0.01), c("wb", rng.standard_normal((16, 3, 1, 1)) * 0.01),
             c("wc", rng.standard_normal((8, 32, 1, 1)) * 0.1)]
    nodes = [h.make_node("Conv", ["x", "wa"], ["a"], name="conv_a", kernel_shape=[1, 1]),
             h.make_node("Softmax", ["a"], ["pa"], name="softmax_c", axis=1),
             h.make_node("Conv", ["x", "wb"], ["b"], name="conv_b", kernel_shape=[1, 1]),
             h.make_node("Softmax", ["b"], ["pb"], name="softmax_w", axis=3),
             h.make_node("Concat", ["pa", "pb"], ["p"], name="join", axis=1),
             h.make_node("Conv", ["p", "wc"], ["y"], name="conv_c", kernel_shape=[1, 1])]
    g = h.make_graph(nodes, "two_softmax", [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 8, 64])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, 8, 8, 64])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    m.ir_version = 7
    onnx.checker.check_model(m)
    onnx.save(m, path)


def check_two_softmax(calq, t, rng):
    model = os.path.join(t, "two.onnx")
    two_softmax_model(model, rng)
    out, _ = calibrate(calq, t, "two", model, (1, 3, 8, 64), rng)
    for fmt in ("qdq", "qoperator"):
        m = onnx.load("%s_%s.onnx" % (out, fmt))
        inits = {i.name: nh.to_array(i) for i in m.graph.initializer}
        for v, d in (("pa", 16), ("pb", 64)):
            for n in m.graph.node:
                if n.op_type == "QuantizeLinear" and n.input[0] == v:
                    k = np.floor(np.float32(1.0) / np.float32(inits[n.input[1]]))
                    if k > 140 * d:
                        fail("two softmaxes %s: %s (D = %d) has 1 / scale %d > %d" % (fmt, v, d, k, 140 * d))
                    else:
                        print("two softmaxes %s: %s (D = %d): K = %d" % (fmt, v, d, k))


def clip_add_model(path, rng):
    """Add(x, y) then a Clip whose lower bound is above 0 (not redundant after a Q), then a Conv:
    the Add stays float in the QOperator file, so the QDQ file must not quantize its inputs."""
    c = lambda n, v: nh.from_array(np.asarray(v, np.float32), n)  # noqa: E731
    nodes = [h.make_node("Add", ["x", "y0"], ["s"], name="add"),
             h.make_node("Clip", ["s", "lo", "hi"], ["sc"], name="clip"),
             h.make_node("Conv", ["sc", "w"], ["y"], name="conv", kernel_shape=[1, 1])]
    g = h.make_graph(nodes, "clip_add", [h.make_tensor_value_info("x", T.FLOAT, [1, 4, 8, 8]),
                                         h.make_tensor_value_info("y0", T.FLOAT, [1, 4, 8, 8])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, 4, 8, 8])],
                     [c("lo", 0.5), c("hi", 6.0), c("w", rng.standard_normal((4, 4, 1, 1)))])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    m.ir_version = 7
    onnx.checker.check_model(m)
    onnx.save(m, path)


def check_clip_add(calq, t, rng):
    model = os.path.join(t, "clip_add.onnx")
    clip_add_model(model, rng)
    cal = []
    for name in ("x", "y0"):
        d = os.path.join(t, "ca_" + name)
        os.makedirs(d)
        for k in range(2):
            np.save(os.path.join(d, "%d.npy" % k), (rng.standard_normal((1, 4, 8, 8)) + 2).astype(np.float32))
        cal.append(d)
    out = os.path.join(t, "out", "clip_add")
    run([calq, "calibration", "--model", model, "--npy", ";".join(cal), "--batch_num", "2", "--save_path", out,
         "--format", "qdq,qoperator", "--qdq-scheme", "int8"])
    sets = {}
    for fmt in ("qdq", "qoperator"):
        m = onnx.load("%s_%s.onnx" % (out, fmt))
        sets[fmt] = {n.input[0] for n in m.graph.node if n.op_type == "QuantizeLinear"}
    if sets["qdq"] != sets["qoperator"]:
        fail("clip after add: the files quantize different tensors: QDQ %s, QOperator %s" %
             (sorted(sets["qdq"]), sorted(sets["qoperator"])))
    else:
        print("clip after add: both files quantize %s" % sorted(sets["qdq"]))


def softmax_clip_model(path, rng):
    """Concat(Softmax(conv_a(x)), Clip(conv_b(x), 0, 6)) then a Conv: one group holding a Softmax
    output and a ReLU6 output."""
    c = lambda n, v: nh.from_array(np.asarray(v, np.float32), n)  # noqa: E731
    nodes = [h.make_node("Conv", ["x", "wa"], ["a"], name="conv_a", kernel_shape=[1, 1]),
             h.make_node("Softmax", ["a"], ["pa"], name="softmax", axis=1),
             h.make_node("Conv", ["x", "wb"], ["b"], name="conv_b", kernel_shape=[1, 1]),
             h.make_node("Clip", ["b", "lo", "hi"], ["pb"], name="relu6"),
             h.make_node("Concat", ["pa", "pb"], ["p"], name="join", axis=1),
             h.make_node("Conv", ["p", "wc"], ["y"], name="conv_c", kernel_shape=[1, 1])]
    g = h.make_graph(nodes, "softmax_clip", [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 8, 8])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, 8, 8, 8])],
                     [c("wa", rng.standard_normal((16, 3, 1, 1))), c("wb", rng.standard_normal((16, 3, 1, 1)) * 4),
                      c("wc", rng.standard_normal((8, 32, 1, 1)) * 0.1), c("lo", 0.0), c("hi", 6.0)])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    m.ir_version = 7
    onnx.checker.check_model(m)
    onnx.save(m, path)


def check_softmax_clip(calq, t, env, rng):
    model = os.path.join(t, "smclip.onnx")
    softmax_clip_model(model, rng)
    out, held = calibrate(calq, t, "smclip", model, (1, 3, 8, 8), rng)
    fd = os.path.join(t, "smclip_float")
    os.makedirs(fd)
    run(["node", os.path.join(HERE, "ort_run.js"), model, fd, "x=" + held], env=env)
    ref = np.load(os.path.join(fd, "y.npy"))
    sets = {}
    for fmt in ("qdq", "qoperator"):
        path = "%s_%s.onnx" % (out, fmt)
        m = onnx.load(path)
        sets[fmt] = {n.input[0] for n in m.graph.node if n.op_type == "QuantizeLinear"} | \
                    {n.output[0] for n in m.graph.node if n.op_type.startswith("QLinear")}
        ort, own = outputs(calq, t, env, "smclip_" + fmt, path, held)
        c = cosine(ort, ref)
        print("softmax + clip %s: onnxruntime cosine vs float %.6f, vs calq %.6f" % (fmt, c, cosine(ort, own)))
        if c < 0.999:
            fail("softmax + clip %s: onnxruntime cosine %.6f < 0.999" % (fmt, c))
    qdq = {v for v in sets["qdq"] if not v.endswith("_quantized")}
    qop = {v[:-len("_quantized")] if v.endswith("_quantized") else v for v in sets["qoperator"]}
    if qdq != qop:
        fail("softmax + clip: the files quantize different tensors: QDQ %s, QOperator %s" % (sorted(qdq), sorted(qop)))
    else:
        print("softmax + clip: both files quantize %s" % sorted(qdq))


def main():
    calq = sys.argv[1]
    node_path = os.path.join(os.environ.get("CALQ_PEERS_DIR", os.path.expanduser("~/.cache/calq-peers")),
                             "node_modules")
    if onnx is None or not os.path.isdir(os.path.join(node_path, "onnxruntime-node")):
        print("SKIP: python3-onnx or onnxruntime-node (%s) missing" % node_path)
        return 77
    env = dict(os.environ, NODE_PATH=node_path)
    rng = np.random.default_rng(5)
    with tempfile.TemporaryDirectory(prefix="calq_int8_sm.") as t:
        check_dfl(calq, t, env, rng)
        check_peaks(calq, t, env, rng)
        check_two_softmax(calq, t, rng)
        check_clip_add(calq, t, rng)
        check_softmax_clip(calq, t, env, rng)
    print("FAIL: %d" % len(FAILS) if FAILS else "ok")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
