"""Helpers for save_onnx.sh (issue 6), run with Debian's python3 (python3-onnx, numpy).

  save_compare.py check MODEL.onnx                  onnx.checker.check_model(full_check=True)
  save_compare.py opset9 OUT.onnx DATA_DIR           a small opset-9 model and 3 .npy batches
  save_compare.py probe IN.onnx OUT.onnx            OUT: IN plus every int8 tensor (QuantizeLinear
                                                    / QLinearConv / QLinearMatMul outputs) as outputs
  save_compare.py steps DIR_A DIR_B MAXSTEP         int8 .npy files in both: max |a - b| in steps
  save_compare.py cosine REF_DIR DIR LABEL MIN[,OUT=MIN2]  cosine of every float output in both
"""
import glob
import os
import sys

import numpy as np


def opset9_model(path, data_dir):
    """An opset-9 model with the operators save converts when it raises the opset to 13 (Clip,
    Dropout, Split, Slice, ReduceSum, Unsqueeze, Squeeze attributes; Softmax on the last axis),
    around Conv+BN, Conv and Gemm layers; plus three .npy calibration batches."""
    import onnx
    from onnx import TensorProto as TP
    from onnx import helper as h
    from onnx import numpy_helper as nh

    rng = np.random.default_rng(1)
    def init(name, a): return nh.from_array(np.asarray(a, dtype=np.float32), name)
    nodes = [
        h.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
        h.make_node("BatchNormalization", ["c1", "g", "be", "mu", "var"], ["bn1"], name="bn1", epsilon=1e-5),
        h.make_node("Relu", ["bn1"], ["r1"], name="relu1"),
        h.make_node("Clip", ["r1"], ["cl"], name="clip", min=0.0, max=6.0),
        h.make_node("Dropout", ["cl"], ["dr"], name="drop", ratio=0.1),
        h.make_node("Split", ["dr"], ["s1", "s2"], name="split", axis=1, split=[2, 2]),
        h.make_node("Conv", ["s1", "w2"], ["c2"], name="conv2", kernel_shape=[1, 1]),
        h.make_node("Concat", ["c2", "s2"], ["cc"], name="concat", axis=1),
        h.make_node("Slice", ["cc"], ["sl"], name="slice", starts=[0], ends=[3], axes=[1]),
        h.make_node("ReduceSum", ["sl"], ["rs"], name="rsum", axes=[3], keepdims=0),
        h.make_node("Unsqueeze", ["rs"], ["us"], name="unsq", axes=[3]),
        h.make_node("Squeeze", ["us"], ["sq"], name="sq", axes=[3]),
        h.make_node("Flatten", ["sq"], ["fl"], name="flat", axis=1),
        h.make_node("Gemm", ["fl", "wf", "bf"], ["gm"], name="fc", transB=1),
        h.make_node("Softmax", ["gm"], ["y"], name="softmax", axis=1),
    ]
    inits = [init("w1", rng.normal(0, 0.3, (4, 3, 3, 3))), init("b1", rng.normal(0, 0.1, 4)),
             init("g", rng.uniform(0.5, 1.5, 4)), init("be", rng.normal(0, 0.1, 4)), init("mu", rng.normal(0, 0.1, 4)),
             init("var", rng.uniform(0.5, 1.5, 4)), init("w2", rng.normal(0, 0.5, (2, 2, 1, 1))),
             init("wf", rng.normal(0, 0.3, (5, 24))), init("bf", rng.normal(0, 0.1, 5))]
    g = h.make_graph(nodes, "up", [h.make_tensor_value_info("x", TP.FLOAT, [1, 3, 8, 8])],
                     [h.make_tensor_value_info("y", TP.FLOAT, [1, 5])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 9)], ir_version=4)
    onnx.checker.check_model(m)
    onnx.save(m, path)
    os.makedirs(data_dir, exist_ok=True)
    for i in range(3):
        np.save(os.path.join(data_dir, "%d.npy" % i), rng.normal(0, 1, (1, 3, 8, 8)).astype(np.float32))


def check(path):
    import onnx
    onnx.checker.check_model(onnx.load(path), full_check=True)
    print("checker: ok %s" % os.path.basename(path))


def probe(src, dst):
    import onnx
    m = onnx.load(src)
    have = {o.name for o in m.graph.output}
    for n in m.graph.node:
        if n.op_type in ("QuantizeLinear", "QLinearConv", "QLinearMatMul") and n.output[0] not in have:
            m.graph.output.append(onnx.helper.make_tensor_value_info(n.output[0], onnx.TensorProto.INT8, None))
    onnx.save(m, dst)


def steps(a_dir, b_dir, max_step):
    worst, n = 0, 0
    for fa in sorted(glob.glob(os.path.join(a_dir, "*.npy"))):
        fb = os.path.join(b_dir, os.path.basename(fa))
        a = np.load(fa)
        if a.dtype != np.int8:
            continue
        if not os.path.exists(fb):
            print("steps: %s missing in %s" % (os.path.basename(fa), b_dir))
            return 1
        d = int(np.abs(a.astype(np.int32) - np.load(fb).astype(np.int32)).max())
        worst = max(worst, d)
        n += 1
    print("int8 tensors compared: %d, max difference: %d quantization step(s)" % (n, worst))
    return 0 if n > 0 and worst <= max_step else 1


def cosine(ref_dir, d, label, spec):
    """spec: "0.99", or "0.99,boxes=0.97": a lower bound for one output, flagged when used."""
    parts = spec.split(",")
    min_cos, special = float(parts[0]), dict((k, float(v)) for k, v in (p.split("=") for p in parts[1:]))
    bad = 0
    for fr in sorted(glob.glob(os.path.join(ref_dir, "*.npy"))):
        r = np.load(fr).astype(np.float64).ravel()
        x = np.load(os.path.join(d, os.path.basename(fr))).astype(np.float64).ravel()
        c = float(np.dot(r, x) / (np.linalg.norm(r) * np.linalg.norm(x)))
        name = os.path.basename(fr)[:-4]
        note = ""
        if c < min_cos and name in special:
            note = "  (BELOW %.2f, held at %.2f: known gap)" % (min_cos, special[name])
        print("%s %s: cosine %.6f, max abs diff %.4g%s" % (label, name, c, np.abs(r - x).max(), note))
        bad += c < special.get(name, min_cos)
    return 1 if bad else 0


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "check":
        check(sys.argv[2])
    elif cmd == "opset9":
        opset9_model(sys.argv[2], sys.argv[3])
    elif cmd == "probe":
        probe(sys.argv[2], sys.argv[3])
    elif cmd == "steps":
        sys.exit(steps(sys.argv[2], sys.argv[3], int(sys.argv[4])))
    elif cmd == "cosine":
        sys.exit(cosine(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]))
