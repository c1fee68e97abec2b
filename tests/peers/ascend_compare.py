"""Deploy vs fake-quant comparison for AMCT's Ascend models (issue 6), Debian python3 + numpy + onnx.

  ascend_compare.py layers DEPLOY.onnx DEPLOY_DUMP_DIR FAKE_DUMP_DIR LABEL
  ascend_compare.py check-deploy DEPLOY.onnx

Every AscendQuant of the deploy model writes <layer>.quant.output0 (int8 q); the fake-quant model's
chain for the same activation ends in a tensor of the same name holding q - offset_d as a float
(amct-reference.md §9.1, §9.2). Compares the two in quantization steps: every quantized
activation of the network, so a difference that grows through the layers is seen where it
starts. Fails beyond one step.
"""
import os
import re
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def safe(name):
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def layers(deploy, ddir, fdir, label):
    m = onnx.load(deploy)
    worst, worst_at, n, n_off = 0, "", 0, 0
    for node in m.graph.node:
        if node.op_type != "AscendQuant":
            continue
        offset = [a.f for a in node.attribute if a.name == "offset"][0]
        out = safe(node.output[0])
        fd, ff = os.path.join(ddir, out + ".npy"), os.path.join(fdir, out + ".npy")
        if not (os.path.exists(fd) and os.path.exists(ff)):
            print("%s: %s missing from a dump" % (label, out))
            return 1
        d, f = np.load(fd), np.load(ff)
        if d.dtype != np.int8 or d.shape != f.shape:
            print("%s: %s is %s %s in the deploy run, %s in the fake-quant run" % (label, out, d.dtype, d.shape, f.shape))
            return 1
        # the fake-quant chain ends with Sub(offset_d): q - offset_d, an integer in float (§9.2)
        diff = np.abs(d.astype(np.float64) - offset - f.astype(np.float64))
        n_off += int((diff > 0).sum())
        if diff.max() > worst:
            worst, worst_at = int(diff.max()), node.name
        n += 1
    print("%s: %d quantized activations, deploy vs fake-quant max difference %d step(s)%s, %d values differ"
          % (label, n, worst, " (at %s)" % worst_at if worst_at else "", n_off))
    return 0 if n > 0 and worst <= 1 else 1


def maxpool_model(path, data_dir):
    """x -> Conv c1 -> Relu -> r; r read by a Conv (c2) and a MaxPool whose output feeds Conv c3:
    AMCT's §9.3 case (a MaxPool sharing a quantized tensor). Plus two .npy calibration batches."""
    from onnx import TensorProto as TP
    from onnx import helper as h

    rng = np.random.default_rng(3)

    def w(name, *shape):
        return numpy_helper.from_array(rng.normal(0, 0.3, shape).astype(np.float32), name)

    nodes = [
        h.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="c1", pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
        h.make_node("Relu", ["c1"], ["r"], name="relu"),
        h.make_node("Conv", ["r", "w2"], ["y2"], name="c2", kernel_shape=[1, 1]),
        h.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        h.make_node("Conv", ["p", "w3", "b3"], ["y3"], name="c3", kernel_shape=[1, 1]),
    ]
    g = h.make_graph(nodes, "maxpool_share", [h.make_tensor_value_info("x", TP.FLOAT, [1, 3, 8, 8])],
                     [h.make_tensor_value_info("y2", TP.FLOAT, [1, 2, 8, 8]),
                      h.make_tensor_value_info("y3", TP.FLOAT, [1, 3, 4, 4])],
                     [w("w1", 4, 3, 3, 3), w("b1", 4), w("w2", 2, 4, 1, 1), w("w3", 3, 4, 1, 1), w("b3", 3)])
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 13)]), path)
    os.makedirs(data_dir, exist_ok=True)
    for i in range(2):
        np.save(os.path.join(data_dir, "b%d.npy" % i), rng.normal(0, 1, (1, 3, 8, 8)).astype(np.float32))
    return 0


def maxpool_structure(deploy, fake):
    """The deploy MaxPool reads AscendAntiQuant(AscendQuant(r)) with scale_d and -offset_d, the
    same AscendQuant the quantized Conv c2 reads; the fake-quant MaxPool reads Mul(chain, scale_d)."""
    ok = True
    for path, op in ((deploy, "AscendAntiQuant"), (fake, "Mul")):
        m = onnx.load(path)
        prod = {o: n for n in m.graph.node for o in n.output}
        pool = [n for n in m.graph.node if n.op_type == "MaxPool"][0]
        a = prod.get(pool.input[0])
        ok = ok and a is not None and a.op_type == op
        if op == "AscendAntiQuant" and a is not None:
            q = prod.get(a.input[0])
            c2 = [n for n in m.graph.node if n.op_type == "Conv" and n.name == "c2"][0]
            attrs = {x.name: x for x in a.attribute}
            ok = ok and q is not None and q.op_type == "AscendQuant" and c2.input[0] == q.output[0]
            qoff = [x.f for x in q.attribute if x.name == "offset"][0]
            qscale = [x.f for x in q.attribute if x.name == "scale"][0]
            ok = ok and attrs["offset"].f == -qoff and abs(attrs["scale"].f * qscale - 1) < 1e-6
    print("maxpool sharing a quantized tensor (§9.3): %s" % ("AntiQuant pair in place" if ok else "WRONG"))
    return 0 if ok else 1


def check_deploy(path):
    """onnx.checker on the deploy file: the Ascend operators live in the default domain (where
    AMCT writes them and ATC reads them), which has no schema for them, so they are moved to a
    private domain for the check; everything else (graph structure, topological order, names,
    initializer types, attributes) is checked as is. Without full_check: ONNX's Conv has no int8
    signature, which is exactly what the deploy model is for."""
    m = onnx.load(path)
    n = 0
    for node in m.graph.node:
        if node.op_type in ("AscendQuant", "AscendDequant", "AscendAntiQuant"):
            node.domain = "calq.check"
            n += 1
    m.opset_import.append(onnx.helper.make_opsetid("calq.check", 1))
    onnx.checker.check_model(m)
    print("checker: ok %s (%d Ascend nodes)" % (os.path.basename(path), n))
    return 0 if n else 1


if __name__ == "__main__":
    if sys.argv[1] == "maxpool-model":
        sys.exit(maxpool_model(sys.argv[2], sys.argv[3]))
    if sys.argv[1] == "maxpool-structure":
        sys.exit(maxpool_structure(sys.argv[2], sys.argv[3]))
    if sys.argv[1] == "check-deploy":
        sys.exit(check_deploy(sys.argv[2]))
    if sys.argv[1] == "layers":
        sys.exit(layers(*sys.argv[2:6]))
    sys.exit("unknown command")
