#!/usr/bin/env python3
"""Float16 models (the fp16 probe of 2026-12).

(a) Weights stored as float16 (or float64) initializers behind Cast(to=float), the graph computing
in float32 (mixed-precision exports, models halved for download): calq took only float32
initializers as constant weights, so the Conv and Gemm stayed float without a word and the MatMul
was calibrated as activation x activation. Now the import folds the Cast into a float32 constant.
The model: a Conv (float16 weight behind a Cast, its float16 bias a Constant node behind one), a
BatchNormalization whose float16 parameters are behind Casts (folded into the Conv as in the float32
model), a Gemm whose float16 weight goes through Cast then Transpose, a second Gemm reading the same
Cast output (tied weights), a MatMul whose weight is float64 behind a Cast. Its float32 reference
holds the float16-rounded weights as float32 initializers without Casts. Checks: `calq run` gives
the reference's output bit for bit; every layer is quantizable and has scale_w; the record of each
--qdq-scheme (and of a run with two layers skipped, which then read float32 initializers) equals the
reference's; every saved file passes onnx.checker (not the deploy file), has no unread initializer
or dead node, and its output in calq and onnxruntime-node has cosine >= 0.99 with the float model. A
record from before (matmul64's weight keyed "matmul64:1") is refused by save, saying to calibrate
again.

(b) A model computing in float16 (float16 input, weights and output; or float32 input and output
behind Casts, onnxconverter-common's keep_io_types): calq's layers compute in float32 only.
`calibration` refuses it, naming the first layer and float16 tensor, writing nothing; `calq run`
refuses it at the Conv, saying to convert the model to float32; neither crashes.

usage: fp16_weights.py CALQ TESTS_PEERS_DIR"""
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import const_weights as cw  # noqa: E402 - the shared checks (same argv: CALQ TESTS_PEERS_DIR)

CALQ, PEERS = sys.argv[1], sys.argv[2]
LAYERS = ("conv", "gemm_t", "gemm_tied", "matmul64")


def fail(msg):
    cw.fail(msg)


def arrays():
    rng = np.random.default_rng(1)
    a = {
        "Wc": rng.standard_normal((4, 3, 3, 3)) * 0.3, "bc": rng.standard_normal(4) * 0.1,
        "W": rng.standard_normal((144, 16)) * 0.1, "b": rng.standard_normal(16) * 0.1,
        "W64": rng.standard_normal((16, 8)) * 0.3,
        # the BatchNormalization after the Conv (folded into it by calibration and save)
        "bn_s": rng.uniform(0.5, 1.5, 4), "bn_b": rng.standard_normal(4) * 0.1,
        "bn_m": rng.standard_normal(4) * 0.1, "bn_v": rng.uniform(0.5, 2, 4),
    }
    # float16-rounded values: exactly what the float16 file holds
    out = {k: v.astype(np.float16) for k, v in a.items() if k != "W64"}
    # float16 subnormals and a negative zero: the conversion must be exact for them too
    out["W"][0, :3] = np.array([2.0 ** -24, -(2.0 ** -20), -0.0], np.float16)
    out["W64"] = a["W64"]  # float64 (rounded to float32 by its Cast, as by onnxruntime)
    return out, rng


def model(path, arr, fp32_ref):
    """The fp16-weight model, or (fp32_ref) the same graph with float32 weights and no Casts."""
    f = TensorProto.FLOAT
    nodes, inits = [], []

    def weight(name, const_node=False):  # the tensor name a node reads for weight `name`
        if fp32_ref:
            if not any(i.name == name for i in inits):
                inits.append(numpy_helper.from_array(arr[name].astype(np.float32), name))
            return name
        src = name + ("_f64" if arr[name].dtype == np.float64 else "_f16")
        if not any(n.name == "cast_" + name for n in nodes):
            if const_node:  # a Constant node, not an initializer: the saved files must not keep it
                nodes.append(helper.make_node("Constant", [], [src], name="const_" + name,
                                              value=numpy_helper.from_array(arr[name], src)))
            else:
                inits.append(numpy_helper.from_array(arr[name], src))
            nodes.append(helper.make_node("Cast", [src], [name + "_f32"], name="cast_" + name, to=f))
        return name + "_f32"

    # the transposed weight of gemm_t: a Transpose the reference folds away, the fp16 model computes
    wt = weight("W")
    nodes.append(helper.make_node("Transpose", [wt], ["W_t"], name="unfolded_t", perm=[1, 0]))
    nodes += [
        helper.make_node("Conv", ["x", weight("Wc"), weight("bc", True)], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c"] + [weight(k) for k in ("bn_s", "bn_b", "bn_m", "bn_v")], ["cb"],
                         name="bn"),
        helper.make_node("Relu", ["cb"], ["r"], name="relu"),
        helper.make_node("Flatten", ["r"], ["fl"], name="flatten"),
        helper.make_node("Gemm", ["fl", "W_t", weight("b")], ["g0"], name="gemm_t", transB=1),
        helper.make_node("Gemm", ["fl", wt, weight("b")], ["g1"], name="gemm_tied"),
        helper.make_node("Add", ["g0", "g1"], ["s"], name="add"),
        helper.make_node("MatMul", ["s", weight("W64")], ["y"], name="matmul64"),
    ]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", f, [2, 3, 6, 6])],
                          [helper.make_tensor_value_info("y", f, [2, 8])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    onnx.checker.check_model(m)
    onnx.save(m, path)


def model_fp16(path, arr, io32):
    """(b): weights, activations (and unless io32, input and output) float16; io32: float32 input
    and output behind Casts, as onnxconverter-common's keep_io_types writes."""
    h = TensorProto.FLOAT16
    inits = [numpy_helper.from_array(arr[k], k) for k in ("Wc", "bc", "W", "b")]
    x, y = ("x16", "y16") if io32 else ("x", "y")
    nodes = [
        helper.make_node("Conv", [x, "Wc", "bc"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("Flatten", ["r"], ["fl"], name="flatten"),
        helper.make_node("Gemm", ["fl", "W", "b"], [y], name="gemm"),
    ]
    if io32:
        nodes = [helper.make_node("Cast", ["x"], [x], name="in_cast", to=h)] + nodes + [
            helper.make_node("Cast", [y], ["y"], name="out_cast", to=TensorProto.FLOAT)]
    io = TensorProto.FLOAT if io32 else h
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", io, [2, 3, 6, 6])],
                          [helper.make_tensor_value_info("y", io, [2, 16])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    onnx.checker.check_model(m)
    onnx.save(m, path)


def run_calq(path, feed, out):
    os.makedirs(out, exist_ok=True)
    cw.run([CALQ, "run", path, "--input", feed, "--output-dir", out])
    return np.load(os.path.join(out, "y.npy"))


def part_a(tmp, arr, x_path, node_path, have_ort):
    src, ref_src = os.path.join(tmp, "fp16w.onnx"), os.path.join(tmp, "ref.onnx")
    model(src, arr, False)
    model(ref_src, arr, True)
    feed = "x=" + x_path
    ref = run_calq(ref_src, feed, os.path.join(tmp, "ref_out"))
    y = run_calq(src, feed, os.path.join(tmp, "fp16w_out"))
    if not np.array_equal(y, ref):
        fail(f"calq run of the fp16-weight model differs from its float32 reference: max {np.abs(y - ref).max()}")
    p = cw.run([CALQ, "inspect", src])
    for layer in LAYERS:
        if not any(line.split()[:1] == [layer] for line in p.stdout.split("quantizable layers:")[-1].splitlines()):
            fail(f"inspect: {layer} is not listed as quantizable:\n{p.stdout[-800:]}")
    skipped = ["conv", "gemm_t"]  # float layers reading the folded weights: float32 initializers
    for scheme, skip in (("layers", []), ("int8", []), ("skip", skipped)):
        prefix, ref_prefix = os.path.join(tmp, scheme), os.path.join(tmp, "ref_" + scheme)
        layers = [n for n in LAYERS if n not in skip]
        for model_path, pre in ((src, prefix), (ref_src, ref_prefix)):
            cw.run([CALQ, "calibration", "--model", model_path, "--npy", x_path, "--save_path", pre, "--format", "all",
                    "--qdq-scheme", "int8" if scheme == "int8" else "layers"] +
                   (["--skip_layers", ",".join(skip)] if skip else []))
        cw.LAYERS = LAYERS  # check_record's names of layers whose inputs must not be activations
        cw.check_record(prefix + "_record.txt", layers)
        got, want = open(prefix + "_record.txt").read(), open(ref_prefix + "_record.txt").read()
        if got != want:
            fail(f"{scheme}: the record differs from the float32 reference's:\n{got[:600]}\n--- reference:\n{want[:600]}")
        files = sorted(glob.glob(prefix + "_*.onnx"))
        if len(files) < 4:
            fail(f"{scheme}: saved {files}")
        for path in files:
            label = f"{scheme}:{os.path.basename(path)}"
            deploy = path.endswith("_deploy_model.onnx")
            m = onnx.load(path)
            cw.check_structure(label, m, deploy)
            left = [i.name for i in m.graph.initializer if i.data_type in (TensorProto.FLOAT16, TensorProto.DOUBLE)]
            if left:
                fail(f"{label}: float16 / float64 initializers kept: {left}")
            if path.endswith("_qdq.onnx"):
                cw.check_qdq_weights(label, m, layers)
            outs = {"calq": run_calq(path, feed, os.path.join(tmp, label.replace(":", "_") + "_calq"))}
            if have_ort and not deploy:
                d = os.path.join(tmp, label.replace(":", "_") + "_ort")
                os.makedirs(d)
                p = subprocess.run(["node", os.path.join(PEERS, "ort_run.js"), path, d, feed], capture_output=True,
                                   text=True, timeout=300, env=dict(os.environ, NODE_PATH=node_path))
                if p.returncode != 0:
                    fail(f"{label}: onnxruntime-node: {p.stderr.strip()[-300:]}")
                else:
                    outs["onnxruntime"] = np.load(os.path.join(d, "y.npy"))
            for who, o in outs.items():
                if cw.cosine(o, ref) < 0.99:
                    fail(f"{label}: {who}: cosine {cw.cosine(o, ref):.4f} with the float model")
            print(f"ok: {label}: " + ", ".join(f"{w} cosine {cw.cosine(o, ref):.5f}" for w, o in outs.items()))


def old_record(tmp, src):
    """A record calq wrote before it read the float16 weights: matmul64's weight as input 1."""
    rec = os.path.join(tmp, "old_record.txt")
    with open(rec, "w") as f:
        for key, scale in (("matmul64", 0.002), ("matmul64:1", 0.005)):
            f.write(f'record {{\n  key: "{key}"\n  value {{\n    scale_d: {scale}\n    offset_d: 0\n  }}\n}}\n')
    p = subprocess.run([CALQ, "save", "--model", src, "--record", rec, "--save_path", os.path.join(tmp, "old", "m"),
                        "--format", "qdq"], capture_output=True, text=True, timeout=300)
    if p.returncode != 1 or "calibrate again" not in p.stderr or "Cast from float16" not in p.stderr:
        fail(f"save with a record keyed matmul64:1: expected a refusal saying to calibrate again, got rc "
             f"{p.returncode}:\n{p.stderr[-600:]}")
    else:
        print("ok: an old record's matmul64:1 key: " + p.stderr.split("error: ", 1)[-1][-120:].strip())


def part_b(tmp, arr, x):
    x16 = os.path.join(tmp, "x16.npy")
    np.save(x16, x.astype(np.float16))
    # (file, input data, the float16 tensor the refusal must name: the first the Conv reads whose
    # type calq knows without running, the graph input, else the weight)
    for io32, feed, tensor in ((False, x16, "x"), (True, os.path.join(tmp, "x.npy"), "Wc")):
        name = "fp16_io32" if io32 else "fp16"
        src = os.path.join(tmp, name + ".onnx")
        model_fp16(src, arr, io32)
        for scheme in ("layers", "int8"):
            prefix = os.path.join(tmp, name + "_" + scheme)
            p = subprocess.run([CALQ, "calibration", "--model", src, "--npy", feed, "--save_path", prefix, "--format",
                                "all", "--qdq-scheme", scheme], capture_output=True, text=True, timeout=300)
            err = p.stderr
            if p.returncode <= 0 or "computes in float16" not in err or "'conv'" not in err or f"'{tensor}'" not in err:
                fail(f"{name}, {scheme}: expected a refusal naming layer 'conv' and tensor '{tensor}', got rc "
                     f"{p.returncode}:\n{err[-800:]}")
            elif glob.glob(prefix + "_*"):
                fail(f"{name}, {scheme}: files written: {glob.glob(prefix + '_*')}")
            else:
                print(f"ok: {name}, {scheme}: refused: " + err.split("error: ", 1)[-1][:200])
        cfg = os.path.join(tmp, name + "_config.json")  # the first step refuses too, writing nothing
        p = subprocess.run([CALQ, "create-config", "--model", src, "--config_file", cfg], capture_output=True,
                           text=True, timeout=300)
        if p.returncode <= 0 or "computes in float16" not in p.stderr or os.path.exists(cfg):
            fail(f"{name}, create-config: expected a refusal and no file, got rc {p.returncode}:\n{p.stderr[-800:]}")
        else:
            print(f"ok: {name}, create-config: refused")
        out = os.path.join(tmp, name + "_run")
        os.makedirs(out)
        p = subprocess.run([CALQ, "run", src, "--input", "x=" + feed, "--output-dir", out], capture_output=True,
                           text=True, timeout=300)
        if p.returncode <= 0 or "'conv'" not in p.stderr or "float16 needs converting to float32" not in p.stderr:
            fail(f"{name}, run: expected a refusal at conv, got rc {p.returncode}:\n{p.stderr[-800:]}")
        else:
            print(f"ok: {name}, run: refused: " + p.stderr.split("error: ", 1)[-1][:200])


def main():
    node_path = os.path.join(os.environ.get("CALQ_PEERS_DIR", os.path.expanduser("~/.cache/calq-peers")),
                             "node_modules")
    have_ort = os.path.isdir(os.path.join(node_path, "onnxruntime-node"))
    arr, rng = arrays()
    x = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    with tempfile.TemporaryDirectory(prefix="calq_fp16.") as tmp:
        x_path = os.path.join(tmp, "x.npy")
        np.save(x_path, x)
        part_a(tmp, arr, x_path, node_path, have_ort)
        old_record(tmp, os.path.join(tmp, "fp16w.onnx"))
        part_b(tmp, arr, x)
    if not have_ort:
        print("note: onnxruntime-node not found; the files were run in calq only")
    return 1 if cw.bad else 0


if __name__ == "__main__":
    sys.exit(main())
