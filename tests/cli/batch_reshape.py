#!/usr/bin/python3
"""Issue 14, item 8: models whose file fixes batch 1 run at batch 4, as Caffe and OpenCV reshape
a net to its data: every sample of a batch-4 `calq run` must equal its own batch-1 run (MTCNN
det1-3, UltraFace's ONNX model). Models whose graph ties the batch are refused naming the node:
UltraFace's Caffe model and YuNet (a Reshape to [1, -1, k] that folds the batch into the anchor
axis: OpenCV runs the Caffe model at batch 4 and returns 1 x 17680 x 2 with the samples' anchors
interleaved), NanoDet, FastestDet and HyperLPR3 (static exports' Reshapes to [1, ...] or
[24, ...], which do not fit another batch). Built here: a Reshape to [1, -1] or [1, 48] is
refused, [0, -1] and [-1, 48] run. Calibration takes .npy batches of 8 for a `dim: 1` prototxt.
usage: batch_reshape.py CALQ SHARED_DIR"""
import os
import subprocess
import sys
import tempfile

import numpy as np

CALQ, SHARED = sys.argv[1], sys.argv[2]
B = 4
T = tempfile.mkdtemp(prefix="calq_batch_")
failures = []


def run(model, x, out, weights=None):
    cmd = [CALQ, "run"] + (["--model", model, "--weights", weights] if weights else [model])
    cmd += ["--input", x, "--output-dir", out, "--threads", "1"]
    return subprocess.run(cmd, capture_output=True, text=True)


def check(name, model, shape, weights=None, tied_at=None):
    """tied_at: the node the refusal must name (the graph ties the batch), or None."""
    if not os.path.exists(model):
        return False
    rng = np.random.default_rng(1)
    x = rng.random((B,) + tuple(shape[1:]), dtype=np.float32)
    d = os.path.join(T, name)
    os.makedirs(d)
    np.save(os.path.join(d, "b.npy"), x)
    r = run(model, os.path.join(d, "b.npy"), os.path.join(d, "ob"), weights)
    if tied_at is not None:
        if r.returncode == 0 or f"node '{tied_at}' (Reshape)" not in r.stderr:
            failures.append(f"{name}: batch {B}: expected a refusal naming node '{tied_at}', got rc "
                            f"{r.returncode}: {r.stderr.strip()}")
        else:
            print(f"{name}: batch {B} refused: node '{tied_at}' ties the batch")
        return True
    if r.returncode != 0:
        failures.append(f"{name}: batch {B}: {r.stderr.strip()}")
        return True
    outs = sorted(f for f in os.listdir(os.path.join(d, "ob")))
    worst = 0.0
    for k in range(B):
        np.save(os.path.join(d, f"s{k}.npy"), x[k : k + 1])
        r = run(model, os.path.join(d, f"s{k}.npy"), os.path.join(d, f"o{k}"), weights)
        if r.returncode != 0:
            failures.append(f"{name}: sample {k}: {r.stderr.strip()}")
            return True
        for o in outs:
            yb = np.load(os.path.join(d, "ob", o))
            y1 = np.load(os.path.join(d, f"o{k}", o))
            if yb.shape[0] != B or yb.shape[1:] != y1.shape[1:] or y1.shape[0] != 1:
                failures.append(f"{name}: {o}: batch {B} gives {yb.shape}, batch 1 {y1.shape}")
                return True
            diff = float(np.max(np.abs(yb[k] - y1[0]))) if y1.size else 0.0
            scale = float(np.max(np.abs(y1))) if y1.size else 0.0
            worst = max(worst, diff / max(scale, 1e-6))
            if diff > 1e-4 * max(scale, 1.0):
                failures.append(f"{name}: {o} sample {k} differs by {diff} (scale {scale})")
    print(f"{name}: batch {B} = {B} batch-1 runs ({len(outs)} outputs, largest relative difference {worst:.2e})")
    return True


M, Z = os.path.join(SHARED, "models"), os.path.join(SHARED, "models", "zoo")
ran = 0
for det, size in (("det1", 12), ("det2", 24), ("det3", 48)):
    ran += check(det, f"{M}/mtcnn/{det}.prototxt", (1, 3, size, size), f"{M}/mtcnn/{det}.caffemodel")
ran += check("ultraface_caffe", f"{M}/ultraface/slim-320.prototxt", (1, 3, 240, 320),
             f"{M}/ultraface/slim-320.caffemodel", tied_at="243")
for name, path, shape, tied in (
    ("ultraface_onnx", f"{M}/ultraface/version-slim-320.onnx", (1, 3, 240, 320), None),
    ("fastestdet", f"{Z}/fastestdet_352/FastestDet.onnx", (1, 3, 352, 352), "Reshape_13"),
    ("hyperlpr3", f"{Z}/hyperlpr3_plate_color_cls_96/litemodel_cls_96x_r1.onnx", (1, 3, 96, 96), "Reshape_100"),
    ("nanodet", f"{Z}/nanodet_m_320/nanodet_m_320.onnx", (1, 3, 320, 320), "Reshape_13"),
    ("yunet", f"{Z}/yunet_n_320/yunet_n_320_320.onnx", (1, 3, 320, 320), "Reshape_93"),
):
    ran += check(name, path, shape, tied_at=tied)
if not ran:
    print("skip: no shared models")
    sys.exit(77)

# graphs that tie the batch, and one that does not
try:
    import onnx
    from onnx import TensorProto, helper

    def reshape_model(path, shape):
        g = helper.make_graph(
            [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Reshape", ["r", "shape"], ["y"], name="flat"),
             helper.make_node("Softmax", ["y"], ["p"], name="softmax", axis=-1)],
            "tie", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])],
            [helper.make_tensor_value_info("p", TensorProto.FLOAT, None)],
            [helper.make_tensor("shape", TensorProto.INT64, [len(shape)], shape)])
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)

    x = np.random.default_rng(2).random((B, 3, 4, 4), dtype=np.float32)
    np.save(os.path.join(T, "x4.npy"), x)
    for shape, want in (([1, -1], "node 'flat' (Reshape) merges the batch of 'r' (axis 0"),
                        ([1, 48], "node 'flat'"), ([0, -1], None), ([-1, 48], None)):
        p = os.path.join(T, "tie.onnx")
        reshape_model(p, shape)
        r = run(p, os.path.join(T, "x4.npy"), os.path.join(T, "otie"))
        if want is None and r.returncode != 0:
            failures.append(f"Reshape {shape}: refused: {r.stderr.strip()}")
        if want is not None and (r.returncode == 0 or want not in r.stderr):
            failures.append(f"Reshape {shape}: expected a refusal naming the node, got rc {r.returncode}: {r.stderr}")
    print("Reshape [1,-1] / [1,48] refused at batch 4 naming the node; [0,-1] / [-1,48] run")
    # nodes that read the batch but do not keep it: a reduction over it, a fixed sample
    for node, inits, want in (
            (helper.make_node("ReduceSum", ["r"], ["y"], name="sum0", axes=[0], keepdims=1), [],
             "node 'sum0' (ReduceSum) reads the batch of 'r' (axis 0) but its output does not carry it"),
            (helper.make_node("Gather", ["r", "idx"], ["y"], name="first", axis=0),
             [helper.make_tensor("idx", TensorProto.INT64, [1], [0])], "node 'first' (Gather)")):
        g = helper.make_graph(
            [helper.make_node("Relu", ["x"], ["r"], name="relu"), node],
            "tie", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
        p = os.path.join(T, "tie2.onnx")
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), p)
        r = run(p, os.path.join(T, "x4.npy"), os.path.join(T, "otie2"))
        if r.returncode == 0 or want not in r.stderr:
            failures.append(f"{node.op_type} over the batch: rc {r.returncode}: {r.stderr}")
    print("ReduceSum over the batch and Gather of sample 0 refused at batch 4 naming the node")
except ImportError:
    print("no python3-onnx: the tie cases were not built")

# calibration: two .npy batches of 8 for det2's `dim: 1` prototxt
det2 = f"{M}/mtcnn/det2"
if os.path.exists(det2 + ".prototxt"):
    d = os.path.join(T, "calib")
    os.makedirs(d)
    rng = np.random.default_rng(3)
    for k in range(2):
        np.save(os.path.join(d, f"b{k}.npy"), rng.random((8, 3, 24, 24), dtype=np.float32))
    r = subprocess.run([CALQ, "calibration", "--model", det2 + ".prototxt", "--weights", det2 + ".caffemodel",
                        "--npy", d, "--batch_num", "2", "--save_path", os.path.join(T, "cal", "det2"),
                        "--save_type", "None"], capture_output=True, text=True)
    if r.returncode != 0 or not os.path.exists(os.path.join(T, "cal", "det2_record.txt")):
        failures.append(f"calibration with batches of 8: rc {r.returncode}: {r.stderr[-2000:]}")
    else:
        print("det2 calibrated on 2 .npy batches of 8 (prototxt dim: 1)")

# calibration of an export with a dynamic batch dim (?x3x240x320) on .npy batches of 2, without
# --input_shape: the batches give the batch size; the QDQ file keeps the dynamic dim and runs at 3
uf = f"{M}/ultraface/version-slim-320.onnx"
try:
    import onnx

    if os.path.exists(uf):
        m = onnx.load(uf)
        dim0 = m.graph.input[0].type.tensor_type.shape.dim[0]
        dim0.ClearField("dim_value")
        dim0.dim_param = "N"
        dyn = os.path.join(T, "uf_dyn.onnx")
        onnx.save(m, dyn)
        d = os.path.join(T, "calib_dyn")
        os.makedirs(d)
        rng = np.random.default_rng(4)
        for k in range(2):
            np.save(os.path.join(d, f"b{k}.npy"), rng.random((2, 3, 240, 320), dtype=np.float32) * 2 - 1)
        pre = os.path.join(T, "cal_dyn", "uf")
        r = subprocess.run([CALQ, "calibration", "--model", dyn, "--npy", d, "--batch_num", "2", "--save_path", pre,
                            "--format", "qdq"], capture_output=True, text=True)
        if r.returncode != 0:
            failures.append(f"dynamic batch: calibration rc {r.returncode}: {r.stderr[-2000:]}")
        elif "batches of input:2x3x240x320" not in r.stderr:
            failures.append(f"dynamic batch: the summary does not give the batches' shape: {r.stderr[:600]}")
        else:
            np.save(os.path.join(T, "x3.npy"), rng.random((3, 3, 240, 320), dtype=np.float32))
            r = run(pre + "_qdq.onnx", os.path.join(T, "x3.npy"), os.path.join(T, "oqdq"))
            shapes = [np.load(os.path.join(T, "oqdq", o)).shape[0] for o in os.listdir(os.path.join(T, "oqdq"))] \
                if r.returncode == 0 else []
            if r.returncode != 0 or not shapes or any(b != 3 for b in shapes):
                failures.append(f"dynamic batch: the QDQ file at batch 3: rc {r.returncode} {shapes}: {r.stderr}")
            else:
                print("UltraFace with a dynamic batch dim calibrated on .npy batches of 2; its QDQ file ran at batch 3")
        # the accuracy search's trial models and calq compare feed the same batches
        r = subprocess.run([CALQ, "calibration", "--model", dyn, "--npy", d, "--batch_num", "2", "--save_path",
                            os.path.join(T, "cal_dyn_search", "uf"), "--format", "qdq", "--target-cosine", "0.9"],
                           capture_output=True, text=True)
        if r.returncode != 0 or "target met" not in r.stderr:
            failures.append(f"dynamic batch: --target-cosine search rc {r.returncode}: {r.stderr[-1500:]}")
        r = subprocess.run([CALQ, "compare", "--model", dyn, "--quantized", pre + "_qdq.onnx", "--npy", d,
                            "--batch_num", "2", "--json", os.path.join(T, "cmp.json")], capture_output=True, text=True)
        if r.returncode != 0 or not os.path.exists(os.path.join(T, "cmp.json")):
            failures.append(f"dynamic batch: calq compare rc {r.returncode}: {r.stderr[-1500:]}")
        else:
            print("the same model's --target-cosine search and calq compare ran on the batches of 2")
except ImportError:
    print("no python3-onnx: the dynamic-batch case was not built")

subprocess.run(["rm", "-rf", T])
for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
