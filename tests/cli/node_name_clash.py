#!/usr/bin/env python3
"""Node names calq adds that a model already uses. The writers name their new nodes after tensors and
layers ("<tensor>_quantized_QuantizeLinear", "<layer>.weight_DequantizeLinear", "<layer>.quant", DMQ's
"<layer>.dmq" Mul, the opset upgrade's "<softmax>.shape" ...); only tensor names were made unique, so a
model with a node of such a name got a saved file with two nodes of one name (onnxruntime and most tools
key nodes by name), and the opset upgrade of a 2-D Softmax always wrote its Reshape under the Softmax's
own name.

The test saves an opset-11 model (Conv, Relu, a DMQ-balanced Conv, a 2-D Softmax the upgrade rewrites)
in every format, with AMCT's scheme and with --qdq-scheme int8, and collects the node names calq
added. It then names the model's nodes (and a chain of Identity nodes before the output) with those
names and saves again: every file must have unique node names, node outputs and initializers, pass
onnx.checker (full_check; not the deploy file, whose AscendQuant is no ONNX operator) and run in
`calq run`. The first model's files must keep the short names (no "_calq<k>" suffix on any node).

usage: node_name_clash.py CALQ"""
import glob
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
TIMEOUT = 60
bad = 0


def fail(msg):
    global bad
    print("FAIL: " + msg)
    bad += 1


def calq(*args):
    try:
        p = subprocess.run([CALQ, *args], capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        fail(f"calq {args[0]} did not finish in {TIMEOUT} s")
        return False
    if p.returncode != 0:
        fail(f"calq {' '.join(args)}: exit {p.returncode}\n{p.stderr[-1500:]}")
        return False
    return True


def build(path, names, extra, rng):
    """The model; names: the node names of conv1, relu1, conv2 (DMQ-balanced), conv3, softmax; extra:
    Identity node names before the output."""
    f = TensorProto.FLOAT
    nodes = [helper.make_node("Conv", ["x", "W1", "B1"], ["c1"], name=names[0], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"], name=names[1]),
             helper.make_node("Conv", ["r1", "W2"], ["c2"], name=names[2]),
             helper.make_node("Conv", ["c2", "W3"], ["c3"], name=names[3]),
             helper.make_node("Softmax", ["c3"], ["s0" if extra else "y"], name=names[4], axis=1)]
    for i, nm in enumerate(extra):
        nodes.append(helper.make_node("Identity", [f"s{i}"], ["y" if i == len(extra) - 1 else f"s{i + 1}"], name=nm))
    inits = [numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "W1"),
             numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "B1"),
             numpy_helper.from_array(rng.standard_normal((4, 4, 3, 3)).astype(np.float32), "W2"),
             numpy_helper.from_array(rng.standard_normal((4, 4, 1, 1)).astype(np.float32), "W3")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", f, [1, 3, 8, 8])],
                          [helper.make_tensor_value_info("y", f, [1, 4, 6, 6])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)])
    m.ir_version = 6
    onnx.save(m, path)
    with open(path + ".json", "w") as fp:
        layer = {"quant_enable": True, "activation_quant_params": {"act_algo": "ifmr", "num_bits": 8},
                 "weight_quant_params": {"wts_algo": "arq_quantize", "channel_wise": True}}
        json.dump({"version": 1, "batch_num": 1, "activation_offset": True, "do_fusion": True, names[0]: layer,
                   names[2]: dict(layer, dmq_balancer_param=0.5), names[3]: layer}, fp)


def saved_files(model, npy, prefix):
    """Every file of both schemes: {label: path}."""
    files = {}
    for scheme in ("layers", "int8"):
        p = f"{prefix}_{scheme}"
        if calq("calibration", "--model", model, "--npy", npy, "--config", model + ".json", "--save_path", p,
                "--format", "all", "--qdq-scheme", scheme):
            for path in sorted(glob.glob(p + "_*.onnx")):
                files[f"{scheme}:{os.path.basename(path)[len(os.path.basename(p)) + 1:]}"] = path
    want = {f"{s}:{k}" for s in ("layers", "int8") for k in ("qdq.onnx", "qoperator.onnx")} | {
        "layers:deploy_model.onnx", "layers:fake_quant_model.onnx"}
    if not want <= files.keys():
        fail(f"{prefix}: saved {sorted(files)}, expected at least {sorted(want)}")
    return files


def check(label, path, npy):
    m = onnx.load(path)
    gr = m.graph
    for what, names in (("node", [n.name for n in gr.node]), ("initializer", [i.name for i in gr.initializer]),
                        ("node output", [o for n in gr.node for o in n.output if o])):
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            fail(f"{label}: {len(dup)} duplicate {what} names: {dup[:6]}")
    if "" in [n.name for n in gr.node]:
        fail(f"{label}: a node without a name")
    if "deploy" not in label:
        try:
            onnx.checker.check_model(m, full_check=True)
        except Exception as e:  # noqa: BLE001 - the checker's exception types vary by version
            fail(f"{label}: onnx.checker: {str(e).splitlines()[0][:300]}")
    out = path + ".run"
    if calq("run", path, "--input", "x=" + npy, "--output-dir", out) and not glob.glob(os.path.join(out, "*.npy")):
        fail(f"{label}: calq run wrote no output")


def main():
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory(prefix="calq_node_clash.") as tmp:
        npy = os.path.join(tmp, "x.npy")
        np.save(npy, rng.standard_normal((1, 3, 8, 8)).astype(np.float32))
        # 1. plain names: what calq adds, and those names stay short
        plain = os.path.join(tmp, "plain.onnx")
        base = ["conv1", "relu1", "conv2", "conv3", "softmax"]
        build(plain, base, [], rng)
        added = []
        for label, path in saved_files(plain, npy, os.path.join(tmp, "plain")).items():
            check(label, path, npy)
            for n in onnx.load(path).graph.node:
                if n.name not in base and n.name not in added:
                    added.append(n.name)
                if "_calq" in n.name:
                    fail(f"{label}: node {n.name!r} has a suffix in a model without a clash")
        for want in ("x_quantized_QuantizeLinear", "conv1.weight_DequantizeLinear", "conv2.dmq", "conv1.quant",
                     "softmax.shape"):
            if want not in added:
                fail(f"plain: calq added no node {want!r} (the names this test collides with changed?)")
        if not bad:
            print(f"ok: plain model saved in every format; calq added {len(added)} node names")
        # 2. the model's own nodes named like those: the Relu and a quantized Conv (whose record entry
        # and config must still find it, not DMQ's Mul) take two, an Identity chain before the output
        # carries the rest; conv1, conv2 and softmax keep their names, from which calq derives the others
        names = ["conv1", "x_quantized_QuantizeLinear", "conv2", "conv2.dmq", "softmax"]
        clash = os.path.join(tmp, "clash.onnx")
        build(clash, names, [n for n in added if n not in names], rng)
        n_before = bad
        for label, path in saved_files(clash, npy, os.path.join(tmp, "clash")).items():
            check("clash " + label, path, npy)
        if bad == n_before:
            print(f"ok: a model with {len(added)} node names calq adds saved in every format with unique names")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
