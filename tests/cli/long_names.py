#!/usr/bin/env python3
"""Layer and tensor names of 600 to 1100 characters (the hostile-input probe of 12-2025): every name
calq invents from an existing one ("<conv>.folded_weight", "<layer>.dmq.scale", "<layer>.weight_quantized",
"calq.iso/<layer>/...") was formatted into a fixed buffer and truncated, so

  * Conv + per-channel Mul folding hung `calq run` / calibration / compare on a Conv name of 503+
    characters (both folded constants and every "_<k>" retry truncated to the same 511 bytes);
  * DMQ balancing hung on a 1023+ character layer whose output has its name ("_calq<k>" truncated away);
  * calibration + save wrote QDQ / QOperator files with duplicate initializers and an AMCT fake-quant
    file with duplicate node names for a 1020-character layer, and exited 0.

Each calq command here runs under a timeout, so a regression fails instead of hanging. Checks: the
folded model gives --no-fusion's outputs; DMQ calibration finishes and saves; every saved ONNX file has
unique initializer, node-output and node names, passes onnx.checker (full_check; not the deploy file,
whose AscendQuant is no ONNX operator) and runs in `calq run`; compare --isolated / --sensitivity work.

usage: long_names.py CALQ"""
import glob
import json
import os
import re
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
TIMEOUT = 60  # each command takes well under a second; the hangs never ended
bad = 0


def short(text):
    """text with each run of 20+ repeated characters (the long names) written as <N x c>."""
    return re.sub(r"(.)\1{19,}", lambda m: f"<{len(m.group(0))} x {m.group(1)}>", text)


def fail(msg):
    global bad
    print("FAIL: " + short(msg))
    bad = 1


def ok(msg):
    if not bad:  # after a failure, the later parts' "ok" would mislead
        print("ok: " + msg)


def calq(*args):
    """Runs calq; returns True on exit 0, reports a timeout or a failure."""
    try:
        p = subprocess.run([CALQ, *args], capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        fail(f"calq {args[0]} did not finish in {TIMEOUT} s (a name-making loop that never ends?)")
        return False
    if p.returncode != 0:
        fail(f"calq {' '.join(args)}: exit {p.returncode}\n{short(p.stderr)[-1500:]}")
        return False
    return True


def save_model(nodes, inits, path, rng, y_shape):
    f = TensorProto.FLOAT
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", f, [1, 3, 8, 8])],
                          [helper.make_tensor_value_info("y", f, y_shape)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    onnx.save(m, path)
    np.save(path + ".npy", rng.standard_normal((1, 3, 8, 8)).astype(np.float32))


def outputs(folder):
    return {os.path.basename(p): np.load(p) for p in sorted(glob.glob(os.path.join(folder, "*.npy")))}


def check_saved(path, label):
    """Unique names, the ONNX checker (standard files), and calq run."""
    m = onnx.load(path)
    gr = m.graph
    for what, names in (("initializer", [i.name for i in gr.initializer]),
                        ("node output", [o for n in gr.node for o in n.output if o]),
                        ("node", [n.name for n in gr.node if n.name])):
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            fail(f"{label}: {os.path.basename(path)}: {len(dup)} duplicate {what} names, e.g. "
                 f"{sorted(dup)[0][-60:]!r}")
    clash = {i.name for i in gr.initializer} & {o for n in gr.node for o in n.output}
    if clash:
        fail(f"{label}: {os.path.basename(path)}: initializers also written by nodes: {sorted(clash)[0][-60:]!r}")
    if "deploy" not in os.path.basename(path):  # AscendQuant / AscendDequant are not ONNX operators
        try:
            onnx.checker.check_model(m, full_check=True)
        except Exception as e:  # noqa: BLE001 - the checker's exception types vary by version
            fail(f"{label}: {os.path.basename(path)}: onnx.checker: {short(str(e).splitlines()[0])[:300]}")
    out = path + ".run"
    if calq("run", path, "--input", "x=" + ARGS_X[label], "--output-dir", out) and not outputs(out):
        fail(f"{label}: calq run {os.path.basename(path)} wrote no output")


ARGS_X = {}


def main():
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory(prefix="calq_long_names.") as tmp:
        # 1. a 600-character Conv followed by a per-channel Mul: folded by default
        conv = "C" * 600
        a = os.path.join(tmp, "fold.onnx")
        save_model([helper.make_node("Conv", ["x", "W"], ["c"], name=conv, pads=[1, 1, 1, 1]),
                    helper.make_node("Mul", ["c", "s"], ["y"], name="mul")],
                   [numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "W"),
                    numpy_helper.from_array(rng.uniform(0.5, 2.0, (4, 1, 1)).astype(np.float32), "s")], a, rng,
                   [1, 4, 8, 8])
        ARGS_X["fold"] = a + ".npy"
        fused, literal = os.path.join(tmp, "fused"), os.path.join(tmp, "literal")
        if calq("run", a, "--input", "x=" + a + ".npy", "--output-dir", fused) and \
                calq("run", a, "--input", "x=" + a + ".npy", "--output-dir", literal, "--no-fusion"):
            of, ol = outputs(fused), outputs(literal)
            if not of or of.keys() != ol.keys():
                fail(f"fold: outputs {sorted(of)} with fusion, {sorted(ol)} without")
            for k in of:
                if of[k].shape != ol[k].shape or not np.allclose(of[k], ol[k], rtol=1e-5, atol=1e-5):
                    fail(f"fold: {k} differs from --no-fusion by {np.max(np.abs(of[k] - ol[k]))}")
            ok("fold: a 600-character Conv + Mul folded, outputs as --no-fusion's")
        prefix = os.path.join(tmp, "fold_q")
        if calq("calibration", "--model", a, "--npy", a + ".npy", "--save_path", prefix, "--format", "all"):
            for path in sorted(glob.glob(prefix + "_*.onnx")):
                check_saved(path, "fold")
            if conv + ".weight_quantized" not in {i.name for i in onnx.load(prefix + "_qdq.onnx").graph.initializer}:
                fail("fold: the QDQ file has no \"<conv>.weight_quantized\" initializer of the whole name")
            if calq("compare", "--model", a, "--quantized", prefix + "_qdq.onnx", "--npy", a + ".npy", "--isolated",
                    "--sensitivity", "--json", os.path.join(tmp, "fold_cmp.json")):
                with open(os.path.join(tmp, "fold_cmp.json")) as f:
                    if conv not in f.read():
                        fail("fold: compare's report does not name the 600-character layer")
            ok("fold: calibration, save and compare --isolated --sensitivity")

        # 2. DMQ balancing of a 1100-character layer whose output tensor has its name
        name = "D" * 1100
        b = os.path.join(tmp, "dmq.onnx")
        save_model([helper.make_node("Conv", ["x", "W"], [name], name=name),
                    helper.make_node("Relu", [name], ["y"], name="relu")],
                   [numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "W")], b, rng, [1, 4, 6, 6])
        ARGS_X["dmq"] = b + ".npy"
        cfg = os.path.join(tmp, "dmq.json")
        with open(cfg, "w") as f:
            json.dump({"version": 1, "batch_num": 1, "activation_offset": True, "do_fusion": True,
                       name: {"quant_enable": True,
                              "activation_quant_params": {"act_algo": "ifmr", "num_bits": 8},
                              "weight_quant_params": {"wts_algo": "arq_quantize", "channel_wise": True},
                              "dmq_balancer_param": 0.5}}, f)
        prefix = os.path.join(tmp, "dmq_q")
        if calq("calibration", "--model", b, "--npy", b + ".npy", "--config", cfg, "--save_path", prefix,
                "--format", "all"):
            for path in sorted(glob.glob(prefix + "_*.onnx")):
                check_saved(path, "dmq")
            if name + ".dmq.scale" not in {i.name for i in onnx.load(prefix + "_qdq.onnx").graph.initializer}:
                fail("dmq: the QDQ file has no \"<layer>.dmq.scale\" initializer: was the layer balanced?")
            ok("dmq: a 1100-character layer balanced, calibrated and saved")

        # 3. a 1020-character layer: every saved file valid
        c = os.path.join(tmp, "long.onnx")
        save_model([helper.make_node("Conv", ["x", "W"], ["y"], name="L" * 1020)],
                   [numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "W")], c, rng, [1, 4, 6, 6])
        ARGS_X["long"] = c + ".npy"
        prefix = os.path.join(tmp, "long_q")
        if calq("calibration", "--model", c, "--npy", c + ".npy", "--save_path", prefix, "--format", "all"):
            files = sorted(glob.glob(prefix + "_*.onnx"))
            kinds = {os.path.basename(p)[len("long_q_"):] for p in files}
            want = {"qdq.onnx", "qoperator.onnx", "deploy_model.onnx", "fake_quant_model.onnx"}
            if not want <= kinds:
                fail(f"long: saved {sorted(kinds)}, expected {sorted(want)}")
            for path in files:
                check_saved(path, "long")
            # compare copies the layer as "calq.iso/<layer>/<value>": cut at 256 characters, the copy's
            # values came out equal ("value ... exists already")
            for kind in ("qdq", "qoperator", "fake_quant_model"):
                calq("compare", "--model", c, "--quantized", f"{prefix}_{kind}.onnx", "--npy", c + ".npy", "--isolated",
                     "--sensitivity", "--json", os.path.join(tmp, f"long_cmp_{kind}.json"))
            ok("long: a 1020-character layer saved in " + ", ".join(sorted(kinds)) + ", and compared")

        # 4. Caffe: two average pools (quantizable, no weights) of 1020 characters, one writing a blob of its name
        name = "P" * 1020
        net = os.path.join(tmp, "pool.prototxt")
        pool = "pooling_param { pool: AVE kernel_size: 2 stride: 1 }"
        with open(net, "w") as f:
            f.write(f'name: "n"\ninput: "data"\ninput_shape {{ dim: 1 dim: 1 dim: 4 dim: 4 }}\n'
                    f'layer {{ name: "{name}" type: "Pooling" bottom: "data" top: "{name}" {pool} }}\n'
                    f'layer {{ name: "{name}x" type: "Pooling" bottom: "{name}" top: "y" {pool} }}\n')
        with open(net + ".caffemodel", "wb") as f:
            f.write(b"\x0a\x01n")  # a NetParameter with its name only: no layer has blobs
        np.save(net + ".npy", rng.standard_normal((1, 1, 4, 4)).astype(np.float32))
        prefix = os.path.join(tmp, "pool_q")
        if calq("calibration", "--model", net, "--weights", net + ".caffemodel", "--npy", net + ".npy", "--save_path",
                prefix):
            for kind in ("deploy", "fake_quant"):
                with open(f"{prefix}_{kind}_model.prototxt") as f:
                    layers = re.findall(r'^layer \{\s*name: "([^"]*)"', f.read(), re.M)
                if len(layers) != len(set(layers)) or len(layers) < 4:
                    fail(f"caffe: {kind}: layer names {[short(n) for n in layers]}")
                calq("run", f"{prefix}_{kind}_model.prototxt", "--weights", f"{prefix}_{kind}_weights.caffemodel",
                     "--input", net + ".npy", "--output-dir", os.path.join(tmp, "pool_run_" + kind))
            ok("caffe: 1020-character layers saved with unique names and run")
    return bad


if __name__ == "__main__":
    sys.exit(main())
