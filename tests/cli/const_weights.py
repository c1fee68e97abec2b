#!/usr/bin/env python3
"""Weights that reach their layer through Identity or Transpose (the architecture sweep of 2026-12):
torch's exporter writes Identity(W) for deduplicated / tied initializers, and MatMul(x, Transpose(W))
when it exports without constant folding. calq took only initializers as constant weights, so a Gemm
reading Identity(W) silently stayed float and a MatMul reading Transpose(W) was quantized as
activation x activation (its float weight quantized at run time).

The model: a Conv whose weight is Identity(Wc), a Gemm reading W directly and a second Gemm reading
Identity(W) (tied weights), and a MatMul(x, Transpose(W2)). Calibrated with both --qdq-scheme values and
--format all, and once with those layers skipped (float layers reading the folded weights). Checks:
every one of those layers (unless skipped) has scale_w in the record; in every QDQ file its weight
is a DequantizeLinear of an int8 initializer; every saved ONNX file passes onnx.checker (not the deploy
file, whose AscendQuant is no ONNX operator), has unique initializer names, no initializer and no node
output nothing reads; each file run in calq and onnxruntime-node has cosine >= 0.99 with the float
model; and `calq run` of the float model matches numpy.

usage: const_weights.py CALQ TESTS_PEERS_DIR"""
import glob
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

CALQ, PEERS = sys.argv[1], sys.argv[2]
LAYERS = ("conv_identity", "gemm_direct", "gemm_identity", "matmul_transpose")
bad = 0


def fail(msg):
    global bad
    bad += 1
    print("FAIL: " + msg)


def run(args):
    p = subprocess.run(args, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        print("FAIL: " + " ".join(args) + "\n" + p.stderr[-2000:])
        sys.exit(1)
    return p


def model(path):
    rng = np.random.default_rng(0)
    f = TensorProto.FLOAT
    arr = {
        "Wc": rng.standard_normal((4, 3, 3, 3)) * 0.3, "bc": rng.standard_normal(4) * 0.1,
        "Wp": rng.standard_normal((144, 16)) * 0.1, "bp": rng.standard_normal(16) * 0.1,
        "W": rng.standard_normal((16, 16)) * 0.3, "b": rng.standard_normal(16) * 0.1,
        "W2": rng.standard_normal((16, 16)) * 0.3,
    }
    arr = {k: v.astype(np.float32) for k, v in arr.items()}
    inits = [numpy_helper.from_array(v, k) for k, v in arr.items()]
    nodes = [
        helper.make_node("Identity", ["Wc"], ["Wc_dup"], name="dedup_c"),
        helper.make_node("Conv", ["x", "Wc_dup", "bc"], ["c"], name="conv_identity", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("Flatten", ["r"], ["fl"], name="flatten"),
        helper.make_node("Gemm", ["fl", "Wp", "bp"], ["h"], name="gemm_proj"),
        helper.make_node("Gemm", ["h", "W", "b"], ["g0"], name="gemm_direct", transB=1),
        helper.make_node("Identity", ["W"], ["W_dup"], name="dedup"),
        helper.make_node("Gemm", ["g0", "W_dup", "b"], ["g1"], name="gemm_identity", transB=1),
        helper.make_node("Transpose", ["W2"], ["W2_t"], name="unfolded_t", perm=[1, 0]),
        helper.make_node("MatMul", ["g1", "W2_t"], ["y"], name="matmul_transpose"),
    ]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", f, [2, 3, 6, 6])],
                          [helper.make_tensor_value_info("y", f, [2, 16])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    onnx.checker.check_model(m)
    onnx.save(m, path)
    x = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    np.save(path + ".npy", x)
    return arr, x


def reference(a, x):
    """The float model in numpy."""
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    c = np.zeros((2, 4, 6, 6), np.float32)
    for i in range(6):
        for j in range(6):
            c[:, :, i, j] = np.einsum("nchw,ochw->no", xp[:, :, i:i + 3, j:j + 3], a["Wc"])
    r = np.maximum(c + a["bc"][None, :, None, None], 0).reshape(2, -1)
    h = r @ a["Wp"] + a["bp"]
    g0 = h @ a["W"].T + a["b"]
    g1 = g0 @ a["W"].T + a["b"]
    return g1 @ a["W2"].T


def cosine(a, b):
    a, b = a.ravel().astype(np.float64), b.ravel().astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-30))


def check_record(path, layers):
    text = open(path).read()
    blocks = {}
    for block in text.split("record {")[1:]:
        key = block.split('key: "', 1)[1].split('"', 1)[0]
        blocks[key] = block
    for layer in layers:
        if layer not in blocks or "scale_w" not in blocks[layer]:
            fail(f"{path}: layer {layer} has no scale_w in the record (keys {sorted(blocks)})")
    for key in blocks:
        if ":" in key and key.split(":")[0] in LAYERS:
            fail(f"{path}: {key}: a weight input calibrated as an activation")


def check_structure(label, m, deploy):
    inits = [i.name for i in m.graph.initializer]
    if len(inits) != len(set(inits)):
        fail(f"{label}: duplicate initializers {sorted({n for n in inits if inits.count(n) > 1})}")
    read = {i for n in m.graph.node for i in n.input} | {o.name for o in m.graph.output}
    unread = sorted(set(inits) - read)
    if unread:
        fail(f"{label}: initializers nothing reads: {unread}")
    dead = [n.name for n in m.graph.node if not any(o in read for o in n.output if o)]
    if dead:
        fail(f"{label}: nodes whose outputs nothing reads: {dead}")
    if not deploy:
        try:
            onnx.checker.check_model(m, full_check=True)
        except Exception as e:  # noqa: BLE001 - the checker's exception types vary by version
            fail(f"{label}: onnx.checker: {str(e).splitlines()[0]}")


def check_qdq_weights(label, m, layers):
    inits = {i.name: i for i in m.graph.initializer}
    prod = {o: n for n in m.graph.node for o in n.output}
    node = {n.name: n for n in m.graph.node}
    for layer in layers:
        n = node.get(layer)
        if n is None:
            fail(f"{label}: no node {layer}")
            continue
        p = prod.get(n.input[1])
        q = inits.get(p.input[0]) if p is not None and p.op_type == "DequantizeLinear" else None
        if q is None or q.data_type != TensorProto.INT8:
            what = "initializer" if p is None else p.op_type + (
                " of " + (prod[p.input[0]].op_type if p.input[0] in prod else "a non-int8 tensor")
                if p.op_type == "DequantizeLinear" else "")
            fail(f"{label}: {layer}'s weight is {what}, not a DequantizeLinear of an int8 initializer")


def main():
    node_path = os.path.join(os.environ.get("CALQ_PEERS_DIR", os.path.expanduser("~/.cache/calq-peers")),
                             "node_modules")
    have_ort = os.path.isdir(os.path.join(node_path, "onnxruntime-node"))
    with tempfile.TemporaryDirectory(prefix="calq_constw.") as tmp:
        src = os.path.join(tmp, "m.onnx")
        arr, x = model(src)
        ref = reference(arr, x)
        out = os.path.join(tmp, "float")
        os.makedirs(out)
        run([CALQ, "run", src, "--input", "x=" + src + ".npy", "--output-dir", out])
        y = np.load(os.path.join(out, "y.npy"))
        if not np.allclose(y, ref, rtol=1e-4, atol=1e-4):
            fail(f"calq run of the float model differs from numpy: max {np.abs(y - ref).max()}")
        # the folded Transpose's output is still the model's tensor: --dump writes it (it printed
        # "dumped 0 tensors" once the import folded it)
        dump = os.path.join(tmp, "dump")
        run([CALQ, "run", src, "--input", "x=" + src + ".npy", "--output-dir", dump, "--dump", "W2_t"])
        wt = os.path.join(dump, "W2_t.npy")
        if not os.path.exists(wt) or not np.array_equal(np.load(wt), arr["W2"].astype(np.float32).T):
            fail("--dump W2_t: %s" % ("not written" if not os.path.exists(wt) else "not W2 transposed"))
        skipped = ["conv_identity", "gemm_identity", "matmul_transpose"]
        for scheme, skip in (("layers", []), ("int8", []), ("skip", skipped)):
            prefix = os.path.join(tmp, scheme)
            layers = [n for n in LAYERS if n not in skip]
            run([CALQ, "calibration", "--model", src, "--npy", src + ".npy", "--save_path", prefix, "--format",
                 "all", "--qdq-scheme", "int8" if scheme == "int8" else "layers"] +
                (["--skip_layers", ",".join(skip)] if skip else []))
            check_record(prefix + "_record.txt", layers)
            files = sorted(glob.glob(prefix + "_*.onnx"))
            if len(files) < 4:
                fail(f"{scheme}: saved {files}")
            for path in files:
                label = f"{scheme}:{os.path.basename(path)}"
                deploy = path.endswith("_deploy_model.onnx")
                m = onnx.load(path)
                check_structure(label, m, deploy)
                if path.endswith("_qdq.onnx"):
                    check_qdq_weights(label, m, layers)
                outs = {}
                d = os.path.join(tmp, label.replace(":", "_") + "_calq")
                os.makedirs(d)
                run([CALQ, "run", path, "--input", "x=" + src + ".npy", "--output-dir", d])
                outs["calq"] = np.load(os.path.join(d, "y.npy"))
                if have_ort and not deploy:
                    d = os.path.join(tmp, label.replace(":", "_") + "_ort")
                    os.makedirs(d)
                    env = dict(os.environ, NODE_PATH=node_path)
                    p = subprocess.run(["node", os.path.join(PEERS, "ort_run.js"), path, d, "x=" + src + ".npy"],
                                       capture_output=True, text=True, timeout=300, env=env)
                    if p.returncode != 0:
                        fail(f"{label}: onnxruntime-node: {p.stderr.strip()[-300:]}")
                    else:
                        outs["onnxruntime"] = np.load(os.path.join(d, "y.npy"))
                for who, o in outs.items():
                    c = cosine(o, ref)
                    if c < 0.99:
                        fail(f"{label}: {who}: cosine {c:.4f} with the float model")
                print(f"ok: {label}: " + ", ".join(f"{w} cosine {cosine(o, ref):.5f}" for w, o in outs.items()))
    if not have_ort:
        print("note: onnxruntime-node not found; the files were run in calq only")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
