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
    if sys.argv[1] == "check-deploy":
        sys.exit(check_deploy(sys.argv[2]))
    if sys.argv[1] == "layers":
        sys.exit(layers(*sys.argv[2:6]))
    sys.exit("unknown command")
