#!/usr/bin/env python3
"""Saving a model whose If / Loop bodies read outer-scope values (issue 14, hostile round):
calq's IR lists those values after the node's own inputs (graph.h n_formal); the ONNX writers
copied them into the node (an If with 3 inputs: onnx.checker and onnxruntime refuse the file),
and the initializers only a subgraph reads must be kept. Every written ONNX file must pass
onnx.checker, keep the captured initializers, and give calq's own result in onnxruntime-node
when it is available.

usage: subgraph_save.py CALQ TESTS_PEERS_DIR"""
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


def model(path):
    rng = np.random.default_rng(0)
    f = TensorProto.FLOAT
    w = numpy_helper.from_array((rng.standard_normal((4, 4)) * 0.5).astype(np.float32), "w")
    cst = numpy_helper.from_array(np.full((1, 4), 2.0, np.float32), "cst")  # read only inside If
    step = numpy_helper.from_array(np.full((1, 4), 0.25, np.float32), "step")  # read only inside Loop
    cond = numpy_helper.from_array(np.array(True), "cond")
    trips = numpy_helper.from_array(np.array(3, np.int64), "trips")
    then = helper.make_graph([helper.make_node("Add", ["t", "cst"], ["o1"])], "then", [],
                             [helper.make_tensor_value_info("o1", f, [1, 4])])
    other = helper.make_graph([helper.make_node("Sub", ["t", "cst"], ["o2"])], "else", [],
                              [helper.make_tensor_value_info("o2", f, [1, 4])])
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]), helper.make_node("Add", ["acc", "step"], ["acc2"])],
        "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                 helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
                 helper.make_tensor_value_info("acc", f, [1, 4])],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc2", f, [1, 4])])
    nodes = [helper.make_node("MatMul", ["x", "w"], ["t"], name="mm"),
             helper.make_node("If", ["cond"], ["u"], name="branch", then_branch=then, else_branch=other),
             helper.make_node("Loop", ["trips", "cond", "u"], ["v"], name="loop", body=body),
             helper.make_node("MatMul", ["v", "w"], ["y"], name="mm2")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", f, [1, 4])],
                          [helper.make_tensor_value_info("y", f, [1, 4])], [w, cst, step, cond, trips])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    onnx.checker.check_model(m)
    onnx.save(m, path)
    x = rng.standard_normal((1, 4)).astype(np.float32)
    np.save(path + ".npy", x)
    return x


def run(args):
    p = subprocess.run(args, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        print("FAIL: " + " ".join(args) + "\n" + p.stderr[-2000:])
        sys.exit(1)
    return p


def main():
    bad = 0
    node_path = os.path.join(os.environ.get("CALQ_PEERS_DIR", os.path.expanduser("~/.cache/calq-peers")),
                             "node_modules")
    have_ort = os.path.isdir(os.path.join(node_path, "onnxruntime-node"))
    with tempfile.TemporaryDirectory(prefix="calq_subgraph.") as tmp:
        src = os.path.join(tmp, "m.onnx")
        model(src)
        prefix = os.path.join(tmp, "q")
        run([CALQ, "calibration", "--model", src, "--npy", src + ".npy", "--save_path", prefix, "--format", "all"])
        for kind in ("fake_quant_model", "qdq", "qoperator", "deploy_model"):
            path = f"{prefix}_{kind}.onnx"
            m = onnx.load(path)
            names = {i.name for i in m.graph.initializer}
            node = {n.name: n for n in m.graph.node}
            problems = []
            if not {"cst", "step"} <= names:
                problems.append(f"initializers read inside the subgraphs dropped: {sorted({'cst', 'step'} - names)}")
            if len(node["branch"].input) != 1 or len(node["loop"].input) != 3:
                problems.append(f"If has {len(node['branch'].input)} inputs, Loop {len(node['loop'].input)}")
            if kind != "deploy_model":  # AscendQuant is not an ONNX operator
                try:
                    onnx.checker.check_model(m)
                except Exception as e:  # noqa: BLE001 - the checker's own exception types vary by version
                    problems.append(f"onnx.checker: {str(e).splitlines()[0]}")
            if kind != "deploy_model" and have_ort and not problems:
                out_c, out_o = os.path.join(tmp, kind + "_calq"), os.path.join(tmp, kind + "_ort")
                os.makedirs(out_c)
                os.makedirs(out_o)
                run([CALQ, "run", path, "--input", "x=" + src + ".npy", "--output-dir", out_c])
                env = dict(os.environ, NODE_PATH=node_path)
                p = subprocess.run(["node", os.path.join(PEERS, "ort_run.js"), path, out_o, "x=" + src + ".npy"],
                                   capture_output=True, text=True, timeout=300, env=env)
                if p.returncode != 0:
                    problems.append("onnxruntime-node: " + p.stderr.strip()[-300:])
                else:
                    a, b = np.load(os.path.join(out_c, "y.npy")), np.load(os.path.join(out_o, "y.npy"))
                    if not np.allclose(a, b, rtol=1e-4, atol=1e-4):
                        problems.append(f"calq and onnxruntime differ: max {np.abs(a - b).max()}")
            bad += bool(problems)
            print(f"{'FAIL' if problems else 'ok'}: {kind}" + "".join("\n  " + p for p in problems))
    if not have_ort:
        print("note: onnxruntime-node not found; checked with onnx.checker only")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
