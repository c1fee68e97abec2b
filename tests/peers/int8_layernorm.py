#!/usr/bin/python3
"""--qdq-scheme int8 and an Add / Mul with a constant operand (a LayerNorm written out).

usage: int8_layernorm.py CALQ

A small transformer-like block at opset 13, LayerNorm as torch exports it below opset 17
(ReduceMean, Sub, Pow, ReduceMean, Add(var, eps), Sqrt, Div, Mul(gamma), Add(beta); eps a Constant
node, beta an initializer through Identity, i.e. computed from constants), between MatMuls, and a
residual Add of two variable tensors. Tokens' variances differ ~1000x, as in transformers, so
one uint8 scale on the variance rounds the small ones to 0. Calibrated with --qdq-scheme int8:
  - the record has no entry for an input of the Add / Mul with a constant operand, and has one
    for each input of the residual Add;
  - in the QDQ file no DequantizeLinear feeds an Add / Mul whose other input is a constant
    (onnxruntime has no 8-bit form for it: QLinearAdd / QLinearMul need both operands quantized,
    so the pair would only round), while both inputs of the residual Add are dequantized ones;
    the QOperator file has the residual as a QLinearAdd and the LayerNorm's Add / Mul in float;
  - onnxruntime-node's outputs of the QDQ file are as close to the float model's as the
    QOperator file's (cosine within 0.002 of it; before the rule, 0.82 vs 0.998).
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
D = 32




def make_model(path):
    rng = np.random.default_rng(0)
    c = lambda n, v: nh.from_array(np.asarray(v, np.float32), n)  # noqa: E731
    inits = [c("W1", rng.standard_normal((D, D)) / np.sqrt(D)), c("W2", rng.standard_normal((D, D)) / np.sqrt(D)),
             c("W3", rng.standard_normal((D, D)) / np.sqrt(D)), c("two", 2.0),
             c("gamma", rng.uniform(0.8, 1.2, D)), c("beta0", rng.standard_normal(D) * 0.1)]
    nodes = [h.make_node("MatMul", ["x", "W1"], ["a"], name="fc1"),
             h.make_node("ReduceMean", ["a"], ["mu"], axes=[-1], name="mean"),
             h.make_node("Sub", ["a", "mu"], ["d"], name="center"),
             h.make_node("Pow", ["d", "two"], ["d2"], name="square"),
             h.make_node("ReduceMean", ["d2"], ["var"], axes=[-1], name="variance"),
             h.make_node("Constant", [], ["eps"], value=h.make_tensor("eps_v", T.FLOAT, [], [1e-5]), name="eps_c"),
             h.make_node("Add", ["var", "eps"], ["ve"], name="add_eps"),
             h.make_node("Sqrt", ["ve"], ["sd"], name="sqrt"),
             h.make_node("Div", ["d", "sd"], ["n"], name="normalize"),
             h.make_node("Mul", ["n", "gamma"], ["ng"], name="mul_gamma"),
             h.make_node("Identity", ["beta0"], ["beta"], name="beta_id"),
             h.make_node("Add", ["ng", "beta"], ["ln"], name="add_beta"),
             h.make_node("MatMul", ["ln", "W2"], ["b"], name="fc2"),
             h.make_node("Add", ["a", "b"], ["r"], name="residual"),
             h.make_node("MatMul", ["r", "W3"], ["y"], name="fc3")]
    g = h.make_graph(nodes, "ln_block", [h.make_tensor_value_info("x", T.FLOAT, [1, 64, D])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, 64, D])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    m.ir_version = 7
    onnx.checker.check_model(m)
    onnx.save(m, path)
    return rng



def check_qdq(path):
    m = onnx.load(path)
    producer = {o: n for n in m.graph.node for o in n.output}
    inits = {t.name for t in m.graph.initializer}

    def constant(v, depth=8):  # an initializer, a Constant, or computed from them only
        if v in inits:
            return True
        p = producer.get(v)
        if p is None or depth == 0 or (p.op_type != "Constant" and not p.input):
            return False
        return p.op_type == "Constant" or all(constant(i, depth - 1) for i in p.input if i)

    def dequantized(v):
        p = producer.get(v)
        return p is not None and p.op_type == "DequantizeLinear" and not constant(p.input[0])

    seen = set()
    for n in m.graph.node:
        if n.op_type not in ("Add", "Mul") or len(n.input) != 2:
            continue
        seen.add(n.name)
        if any(constant(v) for v in n.input) and any(dequantized(v) for v in n.input):
            fail("qdq: %s %s has a constant operand and a Q/DQ pair on the other" % (n.op_type, n.name))
    for name in ("add_eps", "mul_gamma", "add_beta", "residual"):
        if name not in seen:
            fail("qdq: node %s missing" % name)
    res = [n for n in m.graph.node if n.name == "residual"]
    if res and not all(dequantized(v) for v in res[0].input):
        fail("qdq: the residual Add's inputs are not both dequantized: %s" % list(res[0].input))


def check_qoperator(path):
    m = onnx.load(path)
    ops = {n.name: n.op_type for n in m.graph.node}
    types = [n.op_type for n in m.graph.node]
    if types.count("QLinearAdd") != 1:
        fail("qoperator: %d QLinearAdd, expected 1 (the residual)" % types.count("QLinearAdd"))
    for name, op in (("add_eps", "Add"), ("mul_gamma", "Mul"), ("add_beta", "Add")):
        if ops.get(name) != op:
            fail("qoperator: %s is %s, expected the float %s" % (name, ops.get(name), op))


def main():
    calq = sys.argv[1]
    node_path = os.path.join(os.environ.get("CALQ_PEERS_DIR", os.path.expanduser("~/.cache/calq-peers")),
                             "node_modules")
    if onnx is None or not os.path.isdir(os.path.join(node_path, "onnxruntime-node")):
        print("SKIP: python3-onnx or onnxruntime-node (%s) missing" % node_path)
        return 77
    env = dict(os.environ, NODE_PATH=node_path)
    with tempfile.TemporaryDirectory(prefix="calq_int8_ln.") as t:
        model = os.path.join(t, "m.onnx")
        rng = make_model(model)
        cal = os.path.join(t, "cal")
        os.makedirs(cal)
        for k in range(3):  # per-token scales: variances 1e-3 .. 1
            s = np.exp(rng.uniform(np.log(0.03), np.log(1.0), (1, 64, 1)))
            np.save(os.path.join(cal, "%d.npy" % k), (rng.standard_normal((1, 64, D)) * s).astype(np.float32))
        out = os.path.join(t, "out", "m")
        run([calq, "calibration", "--model", model, "--npy", cal, "--batch_num", "2", "--save_path", out,
             "--format", "qdq,qoperator", "--qdq-scheme", "int8"])
        with open(out + "_record.txt") as f:
            record = f.read()
        for key in ("add_eps:0", "mul_gamma:0", "add_beta:0"):
            if '"%s"' % key in record:
                fail("record: an entry %s for an input of an Add / Mul with a constant operand" % key)
        for key in ("residual:0", "residual:1"):
            if '"%s"' % key not in record:
                fail("record: no entry %s for the residual Add" % key)
        check_qdq(out + "_qdq.onnx")
        check_qoperator(out + "_qoperator.onnx")
        held_out = "x=" + os.path.join(cal, "2.npy")  # not calibrated on
        cos = {}
        for name, path in (("float", model), ("qdq", out + "_qdq.onnx"), ("qoperator", out + "_qoperator.onnx")):
            d = os.path.join(t, "r_" + name)
            os.makedirs(d)
            run(["node", os.path.join(HERE, "ort_run.js"), path, d, held_out], env=env)
            cos[name] = np.load(os.path.join(d, "y.npy"))
        c_qdq, c_qop = cosine(cos["float"], cos["qdq"]), cosine(cos["float"], cos["qoperator"])
        print("onnxruntime cosine vs float: qdq %.5f, qoperator %.5f" % (c_qdq, c_qop))
        if c_qdq < c_qop - 0.002:
            fail("qdq cosine %.5f below the qoperator file's %.5f" % (c_qdq, c_qop))
        if c_qop < 0.99:
            fail("qoperator cosine %.5f < 0.99" % c_qop)
    print("FAIL: %d" % len(FAILS) if FAILS else "ok")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
