#!/usr/bin/env python3
"""Issue 14 item 3: name lookups are hashed, so a model, config and record with many layers
cost time linear in the layer count. An ONNX chain of MatMul layers and a Caffe chain of
average-pooling layers (quantizable, no weights) are calibrated and saved in every format at
N and 4N layers; the CPU time of the 4N run must stay below 12x the N run's (linear is about
4x; the quadratic lookups this replaces -- config, record, calibration groups, export names
and initializer pruning -- gave 16x and more: saving 2500 MatMul layers took 240 s).
CPU time of the children, not wall time: the machine is shared.

usage: many_layers.py CALQ"""
import os
import resource
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
SMALL, RATIO = 1000, 12.0


def onnx_chain(n, path):
    rng = np.random.default_rng(0)
    nodes, inits, prev = [], [], "x"
    for i in range(n):
        w = (np.eye(4) + 0.01 * rng.standard_normal((4, 4))).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        out = f"t{i}" if i < n - 1 else "y"
        nodes.append(helper.make_node("MatMul", [prev, f"w{i}"], [out], name=f"mm{i}"))
        prev = out
    g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    onnx.save(m, path)
    np.save(path + ".npy", rng.standard_normal((1, 4)).astype(np.float32))
    return ["--model", path], path + ".npy"


def caffe_chain(n, path):
    lines = ['name: "chain"', 'input: "data"', "input_shape { dim: 1 dim: 1 dim: 2 dim: 2 }"]
    prev = "data"
    for i in range(n):
        lines.append(f'layer {{ name: "p{i}" type: "Pooling" bottom: "{prev}" top: "t{i}" '
                     "pooling_param { pool: AVE kernel_size: 1 stride: 1 } }")
        prev = f"t{i}"
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    weights = path + ".caffemodel"
    with open(weights, "wb") as f:
        f.write(b"\x0a\x05chain")  # a NetParameter with its name only: no layer has blobs
    np.save(path + ".npy", np.random.default_rng(0).standard_normal((1, 1, 2, 2)).astype(np.float32))
    return ["--model", path, "--weights", weights], path + ".npy"


def cpu_of(args):
    """CPU seconds (user + system) of one calq run; fails the test on a non-zero exit."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run([CALQ] + args, capture_output=True, text=True, timeout=600)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        print("FAIL: calq " + " ".join(args) + "\n" + p.stderr[-2000:])
        sys.exit(1)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(tmp, kind, make, n):
    d = os.path.join(tmp, f"{kind}{n}")
    os.makedirs(d)
    model, npy = make(n, os.path.join(d, "m.onnx" if kind == "onnx" else "m.prototxt"))
    prefix = os.path.join(d, "cal")
    t_cal = cpu_of(["calibration"] + model + ["--npy", npy, "--save_path", prefix, "--save_type", "None"])
    with open(prefix + "_record.txt") as f:
        keys = sum(1 for line in f if line.lstrip().startswith("key:"))
    if keys != n:
        print(f"FAIL: {kind} {n} layers: the record has {keys} entries")
        sys.exit(1)
    fmt = ["--format", "all"] if kind == "onnx" else []
    t_save = cpu_of(["save"] + model + ["--record", prefix + "_record.txt", "--config", prefix + "_config.json",
                                        "--save_path", prefix] + fmt)
    return t_cal + t_save


def main():
    bad = 0
    with tempfile.TemporaryDirectory(prefix="calq_many.") as tmp:
        for kind, make in (("onnx", onnx_chain), ("caffe", caffe_chain)):
            small = measure(tmp, kind, make, SMALL)
            big = measure(tmp, kind, make, 4 * SMALL)
            ratio = big / max(small, 0.05)
            ok = ratio < RATIO
            bad += not ok
            print(f"{'ok' if ok else 'FAIL'}: {kind}: {SMALL} layers {small:.2f} s CPU, {4 * SMALL} layers "
                  f"{big:.2f} s CPU (x{ratio:.1f}; linear is x4, the limit x{RATIO:.0f})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
