#!/usr/bin/python3
"""--qdq-scheme int8 on an attention block: the QDQ file as accurate as the QOperator file.

usage: int8_attention.py CALQ

A pre-norm-free transformer block at opset 13 as torch exports nn.MultiheadAttention and a GELU
MLP: MatMul(x, Wqkv), Add(bias, .), three Slices (q, k, v, of ranges 1 : 4 : 1/4), Reshape /
Transpose per head, q Div by sqrt(dh), MatMul(q, k^T), Softmax, MatMul(p, v), Transpose,
Reshape, MatMul(Wo), Add(bo), residual Add, then MatMul, Add(b1), GELU written out (Div, Erf,
Add, Mul, Mul), MatMul, Add(b2), residual Add. Calibrated with --qdq-scheme int8, checked:
  - no tensor is quantized whose readers are all float ops (no integer kernel in onnxruntime to
    gain, only a rounding): not the q / k / v bias Add's output, not the GELU's input, not the q
    branch before its Div;
  - no QuantizeLinear on a data-movement output (Slice, Reshape, Transpose) reads a tensor
    quantized with other factors (onnxruntime drops a DQ -> op -> Q pair only when both sides
    have the same factors; other factors would add a second rounding);
  - the QDQ and the QOperator file quantize the same tensors;
  - onnxruntime-node's outputs of the QDQ file are within 0.005 (cosine against the float model)
    of the QOperator file's, on calibration data and on a held-out input (before the rule: 0.84 vs
    0.95 on ViT-B/16).
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
D, H, TOK, BLOCKS = 64, 4, 32, 4
DH = D // H
MOVERS = ("Reshape", "Transpose", "Flatten", "Squeeze", "Unsqueeze", "Slice", "Gather", "Expand", "Tile",
          "Identity", "MaxPool", "Resize")
# ops onnxruntime runs on 8-bit tensors (QDQ fusion, or as they are with equal factors)
INT8_READERS = ("MatMul", "Conv", "Gemm", "Add", "Mul", "Concat", "GlobalAveragePool", "Sigmoid", "LeakyRelu",
                "Softmax", "AveragePool") + MOVERS




def block(rng, b, x, y):
    """Block b from tensor x to tensor y; its names start with "b<b>_"."""
    c = lambda n, v, t=np.float32: nh.from_array(np.asarray(v, t), "b%d_%s" % (b, n))  # noqa: E731
    wqkv = rng.standard_normal((D, 3 * D)) / np.sqrt(D)
    wqkv[:, D:2 * D] *= 4.0  # k's range 4x q's, v's 1/4: one scale for the three rounds v away
    wqkv[:, 2 * D:] *= 0.25
    inits = [c("Wqkv", wqkv), c("bqkv", rng.standard_normal(3 * D) * 0.1),
             c("Wo", rng.standard_normal((D, D)) / np.sqrt(D)), c("bo", rng.standard_normal(D) * 0.1),
             c("W1", rng.standard_normal((D, 2 * D)) / np.sqrt(D)), c("b1", rng.standard_normal(2 * D) * 0.1),
             c("W2", rng.standard_normal((2 * D, D)) / np.sqrt(2 * D)), c("b2", rng.standard_normal(D) * 0.1),
             c("s0", [0], np.int64), c("s1", [D], np.int64), c("s2", [2 * D], np.int64), c("s3", [3 * D], np.int64),
             c("axis", [-1], np.int64), c("heads", [1, TOK, H, DH], np.int64), c("merged", [1, TOK, D], np.int64),
             c("sqrt_dh", np.sqrt(DH)), c("sqrt2", np.sqrt(2.0)), c("one", 1.0), c("half", 0.5)]
    spec = [("MatMul", [x, "Wqkv"], ["qkv0"], "in_proj", {}),
            ("Add", ["bqkv", "qkv0"], ["qkv"], "in_proj_bias", {}),
            ("Slice", ["qkv", "s0", "s1", "axis"], ["q0"], "slice_q", {}),
            ("Slice", ["qkv", "s1", "s2", "axis"], ["k0"], "slice_k", {}),
            ("Slice", ["qkv", "s2", "s3", "axis"], ["v0"], "slice_v", {}),
            ("Reshape", ["q0", "heads"], ["q1"], "reshape_q", {}),
            ("Reshape", ["k0", "heads"], ["k1"], "reshape_k", {}),
            ("Reshape", ["v0", "heads"], ["v1"], "reshape_v", {}),
            ("Transpose", ["q1"], ["q2"], "transpose_q", {"perm": [0, 2, 1, 3]}),
            ("Transpose", ["k1"], ["kt"], "transpose_k", {"perm": [0, 2, 3, 1]}),
            ("Transpose", ["v1"], ["v2"], "transpose_v", {"perm": [0, 2, 1, 3]}),
            ("Div", ["q2", "sqrt_dh"], ["q3"], "scale_q", {}),
            ("MatMul", ["q3", "kt"], ["scores"], "qk", {}),
            ("Softmax", ["scores"], ["p"], "softmax", {"axis": -1}),
            ("MatMul", ["p", "v2"], ["o0"], "pv", {}),
            ("Transpose", ["o0"], ["o1"], "transpose_o", {"perm": [0, 2, 1, 3]}),
            ("Reshape", ["o1", "merged"], ["o2"], "reshape_o", {}),
            ("MatMul", ["o2", "Wo"], ["a0"], "out_proj", {}),
            ("Add", ["a0", "bo"], ["a1"], "out_proj_bias", {}),
            ("Add", [x, "a1"], ["r1"], "residual1", {}),
            ("MatMul", ["r1", "W1"], ["f0"], "fc1", {}),
            ("Add", ["f0", "b1"], ["f1"], "fc1_bias", {}),
            ("Div", ["f1", "sqrt2"], ["g0"], "gelu_div", {}),
            ("Erf", ["g0"], ["g1"], "gelu_erf", {}),
            ("Add", ["g1", "one"], ["g2"], "gelu_add", {}),
            ("Mul", ["f1", "g2"], ["g3"], "gelu_mul", {}),
            ("Mul", ["g3", "half"], ["g4"], "gelu_half", {}),
            ("MatMul", ["g4", "W2"], ["m0"], "fc2", {}),
            ("Add", ["m0", "b2"], ["m1"], "fc2_bias", {}),
            ("Add", ["r1", "m1"], [y], "residual2", {})]
    nm = lambda v: v if v in (x, y) else "b%d_%s" % (b, v)  # noqa: E731
    nodes = [h.make_node(op, [nm(i) for i in ins], [nm(o) for o in outs], name="b%d_%s" % (b, name), **attrs)
             for op, ins, outs, name, attrs in spec]
    return nodes, inits


def make_model(path):
    rng = np.random.default_rng(7)
    nodes, inits = [], []
    for b in range(BLOCKS):
        n, i = block(rng, b, "x" if b == 0 else "h%d" % b, "y" if b == BLOCKS - 1 else "h%d" % (b + 1))
        nodes += n
        inits += i
    g = h.make_graph(nodes, "attention_blocks", [h.make_tensor_value_info("x", T.FLOAT, [1, TOK, D])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, TOK, D])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    m.ir_version = 7
    onnx.checker.check_model(m)
    onnx.save(m, path)
    return rng



def quantized(m):
    """The model's tensors that have a uint8 form in the file (<name>_quantized, calq's naming)."""
    return {o[:-len("_quantized")] for n in m.graph.node for o in n.output if o.endswith("_quantized")}


def check_qdq(path, source):
    m = onnx.load(path)
    inits = {t.name: nh.to_array(t) for t in m.graph.initializer}
    readers = {}
    for n in m.graph.node:
        for i in n.input:
            readers.setdefault(i, []).append(n)
    src_readers = {}
    for n in source.graph.node:
        for i in n.input:
            src_readers.setdefault(i, []).append(n.op_type)
    q_of = {n.input[0]: n for n in m.graph.node if n.op_type == "QuantizeLinear"}
    # a tensor quantized although every op of the model reading it is float
    for t in sorted(q_of):
        ops = src_readers.get(t, [])
        if ops and not any(op in INT8_READERS for op in ops):
            fail("qdq: %s is quantized but only float ops read it: %s" % (t, ops))
    for t in ("b%d_%s" % (b, v) for b in range(BLOCKS) for v in ("qkv", "f1", "q2", "q1", "q0")):
        if t in q_of:
            fail("qdq: %s (read by float ops only, or by data movement into them) is quantized" % t)
        for r in readers.get(t, []):
            if r.op_type == "QuantizeLinear":
                fail("qdq: a QuantizeLinear reads %s" % t)

    def factors(q):
        return (float(inits[q.input[1]].ravel()[0]), int(inits[q.input[2]].ravel()[0]))
    producer = {o: n for n in source.graph.node for o in n.output}
    movers = 0
    for t, q in q_of.items():
        p = producer.get(t)
        if p is None or p.op_type not in MOVERS:
            continue
        movers += 1
        src = p.input[0]
        if src in q_of and factors(q_of[src]) != factors(q):
            fail("qdq: the Q of %s output %s has factors %s, its input %s %s" %
                 (p.op_type, t, factors(q), src, factors(q_of[src])))
    return quantized(m), movers


def main():
    calq = sys.argv[1]
    node_path = os.path.join(os.environ.get("CALQ_PEERS_DIR", os.path.expanduser("~/.cache/calq-peers")),
                             "node_modules")
    if onnx is None or not os.path.isdir(os.path.join(node_path, "onnxruntime-node")):
        print("SKIP: python3-onnx or onnxruntime-node (%s) missing" % node_path)
        return 77
    env = dict(os.environ, NODE_PATH=node_path)
    with tempfile.TemporaryDirectory(prefix="calq_int8_attn.") as t:
        model = os.path.join(t, "m.onnx")
        rng = make_model(model)
        cal = os.path.join(t, "cal")
        os.makedirs(cal)
        for k in range(3):
            np.save(os.path.join(cal, "%d.npy" % k), rng.standard_normal((1, TOK, D)).astype(np.float32))
        out = os.path.join(t, "out", "m")
        run([calq, "calibration", "--model", model, "--npy", cal, "--batch_num", "2", "--save_path", out,
             "--format", "qdq,qoperator", "--qdq-scheme", "int8"])
        qdq_set, movers = check_qdq(out + "_qdq.onnx", onnx.load(model))
        qop_set = quantized(onnx.load(out + "_qoperator.onnx"))
        if qdq_set != qop_set:
            fail("the files quantize different tensors: QDQ only %s, QOperator only %s" %
                 (sorted(qdq_set - qop_set), sorted(qop_set - qdq_set)))
        for f in ("qdq", "qoperator"):  # every initializer is read (the QOperator file kept unread factors)
            mf = onnx.load("%s_%s.onnx" % (out, f))
            used = {i for n in mf.graph.node for i in n.input}
            unread = [i.name for i in mf.graph.initializer if i.name not in used]
            if unread:
                fail("%s: %d initializers nothing reads: %s" % (f, len(unread), unread[:4]))
        for must in ("b%d_%s" % (b, v) for b in range(BLOCKS) for v in ("kt", "v2", "p", "o2")):
            if must not in qdq_set:  # read by the MatMuls: still int8
                fail("qdq: %s (a MatMul's input) is not quantized" % must)
        print("quantized tensors: QDQ %d, QOperator %d; data-movement outputs with a Q: %d" %
              (len(qdq_set), len(qop_set), movers))
        for k, name in ((0, "calibration"), (2, "held-out")):
            x = "x=" + os.path.join(cal, "%d.npy" % k)
            ys = {}
            for f, path in (("float", model), ("qdq", out + "_qdq.onnx"), ("qoperator", out + "_qoperator.onnx")):
                d = os.path.join(t, "r_%s_%d" % (f, k))
                os.makedirs(d)
                run(["node", os.path.join(HERE, "ort_run.js"), path, d, x], env=env)
                ys[f] = np.load(os.path.join(d, "y.npy"))
            c_qdq, c_qop = cosine(ys["float"], ys["qdq"]), cosine(ys["float"], ys["qoperator"])
            print("onnxruntime cosine vs float (%s input): qdq %.5f, qoperator %.5f" % (name, c_qdq, c_qop))
            if abs(c_qdq - c_qop) > 0.005:
                fail("%s input: qdq cosine %.5f, qoperator %.5f: more than 0.005 apart" % (name, c_qdq, c_qop))
            if min(c_qdq, c_qop) < 0.99:
                fail("%s input: cosine below 0.99 (qdq %.5f, qoperator %.5f)" % (name, c_qdq, c_qop))
    print("FAIL: %d" % len(FAILS) if FAILS else "ok")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
