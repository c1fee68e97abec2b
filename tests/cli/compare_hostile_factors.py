#!/usr/bin/env python3
"""calq compare against quantized models whose factors are hostile (the hostile-input probe of
12-2026). compare reads each layer's activation factors from the quantized model to report the
clip range and a histogram; it converted them as they were:

  * an AscendQuant `offset` attribute of 1e30, or a fake-quant chain's offset constant of NaN, was
    converted to int (undefined behaviour: UBSan aborted; the Release report showed offset
    -2147483648 and a clip range whose minimum was above its maximum);
  * an AscendQuant `scale` of 1e-45 (1/scale_d, so scale_d is inf) or a fake-quant Mul by 1e-45 gave
    an infinite clip range, and the histogram turned (v - lo) / w = NaN into a bin index
    (undefined behaviour; in Release, hist[INT_MIN]++).

Now such a layer is reported without factors (no scale / offset / clip range / histogram in the JSON,
as for a layer whose factors were not found), and an AscendQuant offset outside [-128, 127] is still
the run's error naming the node. Each command runs under a timeout.

usage: compare_hostile_factors.py CALQ"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

try:
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError:
    print("SKIP: no onnx module")
    sys.exit(77)

CALQ = sys.argv[1]
bad = 0


def fail(msg):
    global bad
    print("FAIL: " + msg)
    bad = 1


def calq(*args):
    """(exit code, stderr) of one calq command; a timeout is exit 124."""
    try:
        p = subprocess.run([CALQ, *args], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return 124, "timeout"
    return p.returncode, p.stderr


def mutate(src, dst, node_attrs=None, inits=None):
    """dst: src with AscendQuant attributes (name -> float) or initializers (name -> value) replaced."""
    m = onnx.load(src)
    for n in m.graph.node:
        if n.op_type == "AscendQuant":
            for a in n.attribute:
                if node_attrs and a.name in node_attrs:
                    a.f = node_attrs[a.name]
    for t in m.graph.initializer:
        if inits and t.name in inits:
            t.CopyFrom(numpy_helper.from_array(np.array(inits[t.name], np.float32), t.name))
    onnx.save(m, dst)


with tempfile.TemporaryDirectory() as T:
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], name="conv1"), helper.make_node("Relu", ["c"], ["y"], name="relu")],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [numpy_helper.from_array(w, "w")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    f = os.path.join(T, "f.onnx")
    onnx.save(model, f)
    x = os.path.join(T, "x.npy")
    np.save(x, rng.standard_normal((1, 3, 8, 8)).astype(np.float32))
    rc, err = calq("calibration", "--model", f, "--npy", x, "--save_path", os.path.join(T, "p"), "--format", "ascend")
    fq, dep = os.path.join(T, "p_fake_quant_model.onnx"), os.path.join(T, "p_deploy_model.onnx")
    if rc != 0 or not os.path.exists(fq) or not os.path.exists(dep):
        print("FAIL: calibration: exit %d: %s" % (rc, err[-400:]))
        sys.exit(1)
    cases = [  # name, source, AscendQuant attributes, initializers
        ("fake_quant_offset_nan", fq, None, {"conv1.quant.offset": np.nan}),
        ("fake_quant_offset_1e30", fq, None, {"conv1.quant.offset": 1e30}),
        ("fake_quant_scale_1e-45", fq, None, {"conv1.quant.scale": 1e-45}),
        ("deploy_scale_1e-45", dep, {"scale": 1e-45}, None),
    ]
    for name, src, attrs, inits in cases:
        q = os.path.join(T, name + ".onnx")
        mutate(src, q, attrs, inits)
        for extra in ([], ["--isolated"]):
            js = os.path.join(T, name + ".json")
            rc, err = calq("compare", "--model", f, "--quantized", q, "--npy", x, "--json", js, *extra)
            label = name + (" " + extra[0] if extra else "")
            if rc != 0:
                fail("%s: exit %d (want 0): %s" % (label, rc, err[-300:]))
                continue
            layer = json.load(open(js))["layers"][0]
            kept = [k for k in ("scale", "offset", "clip_min", "clip_max", "histogram") if k in layer]
            if kept:
                fail("%s: the layer's invalid factors were reported: %s" % (label, {k: layer[k] for k in kept}))
            else:
                print("ok: %s: conv1 reported without factors" % label)
    q = os.path.join(T, "deploy_offset_1e30.onnx")
    mutate(dep, q, {"offset": 1e30})
    rc, err = calq("compare", "--model", f, "--quantized", q, "--npy", x)
    want = "AscendQuant node 'conv1.quant': offset 1e+30 must be an integer in [-128, 127]"
    if rc != 1 or want not in err:
        fail("deploy_offset_1e30: exit %d (want 1 with %r): %s" % (rc, want, err[-300:]))
    else:
        print("ok: deploy_offset_1e30: " + want)
sys.exit(bad)
