"""DMQ balancing checks for tests/peers/dmq.sh (issue 12 item 2), Debian python3 + numpy + onnx.

  dmq_check.py fake-quant FLOAT.onnx FAKE_QUANT.onnx RECORD
      For every layer with tensor_balance_factor s in the record: the fake-quant model has the Mul
      "<layer>.dmq" of the layer's input by exactly float32(1) / float32(s) (shaped [C, 1, 1] or
      [C]), and, where no BatchNorm follows the layer in the float model (nothing folded into its
      weight), the layer's weight is exactly ARQ's w_q = clip(round(W·s / scale_w)) of the float
      weight W balanced by hand (docs/numerics.md, "DMQ balancing").
  dmq_check.py balanced FLOAT.onnx RECORD OUT.onnx
      Writes the float model balanced by hand: Mul(1/s) before each balanced layer, W·s as its
      weight (no quantization): the same function as FLOAT, which dmq.sh checks in onnxruntime.
"""
import re
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper


def read_record(path):
    t = open(path).read()
    out = {}
    for key, body in re.findall(r'key: "([^"]+)"\s*value \{([^}]*)\}', t):
        s = [float(v) for v in re.findall(r"tensor_balance_factor: (\S+)", body)]
        w = [float(v) for v in re.findall(r"scale_w: (\S+)", body)]
        if s:
            out[key] = (np.array(s, dtype=np.float32), np.array(w, dtype=np.float32))
    return out


def attr(node, name, dflt):
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return dflt


def in_channel_scale(node, w, s):
    """s broadcast onto weight w of node (the layer's input channels, graph/balance.c)."""
    if node.op_type == "Conv":
        g = attr(node, "group", 1)
        o, cg = w.shape[0], w.shape[1]
        ch = (np.arange(o)[:, None] // (o // g)) * cg + np.arange(cg)[None, :]  # [O, Cin/g]
        return s[ch].reshape(o, cg, *([1] * (w.ndim - 2)))
    if node.op_type == "ConvTranspose":
        return s.reshape(-1, *([1] * (w.ndim - 1)))
    if node.op_type == "Gemm" and attr(node, "transB", 0):
        return s.reshape(1, -1)
    return s.reshape(-1, 1)  # Gemm / MatMul B [K, N]


def round_away(t):
    t = t.astype(np.float64)
    i = np.trunc(t)
    return i + np.sign(t) * (np.abs(t - i) >= 0.5)


def fake_quant(float_path, fq_path, record):
    fm, qm = onnx.load(float_path), onnx.load(fq_path)
    finit = {t.name: numpy_helper.to_array(t) for t in fm.graph.initializer}
    qinit = {t.name: numpy_helper.to_array(t) for t in qm.graph.initializer}
    qnodes = {n.name: n for n in qm.graph.node}
    readers = {}
    for n in fm.graph.node:
        for i in n.input:
            readers.setdefault(i, []).append(n.op_type)
    rec = read_record(record)
    n_mul = n_w = 0
    for layer, (s, scale_w) in rec.items():
        mul = qnodes.get(layer + ".dmq")
        assert mul is not None and mul.op_type == "Mul", "%s: no Mul %s.dmq in the fake-quant model" % (layer, layer)
        inv = qinit[mul.input[1]]
        want = (np.float32(1) / s).astype(np.float32)
        assert inv.dtype == np.float32 and np.array_equal(inv.ravel(), want), "%s: the Mul's factors are not 1/s" % layer
        chain = qnodes[layer + ".quant.mul"]  # the §9.2 quantization chain of the layer's input
        assert chain.input[0] == mul.output[0], "%s: its quantization does not read the balancing Mul" % layer
        n_mul += 1
        fnode = next(n for n in fm.graph.node if n.name == layer)
        if "BatchNormalization" in readers.get(fnode.output[0], []):
            continue  # the BatchNorm is folded into the weight (§8.3): not this check's arithmetic
        w = finit[fnode.input[1]].astype(np.float32)
        wb = (w * in_channel_scale(fnode, w, s)).astype(np.float32)
        sw = scale_w.reshape(-1, *([1] * (w.ndim - 1))) if scale_w.size > 1 else scale_w[0]
        q = np.clip(round_away((wb / np.float32(sw)).astype(np.float32)), -128, 127)
        got = qinit[qnodes[layer].input[1]]
        assert np.array_equal(got, q.astype(np.float32)), "%s: weight differs from round(W*s/scale_w) at %d places" % (
            layer, int((got != q).sum()))
        n_w += 1
    print("fake-quant: %d balancing Muls equal 1/s, %d weights equal round(W*s/scale_w)" % (n_mul, n_w))
    return 0 if n_mul > 0 and n_w > 0 else 1


def balanced(float_path, record, out):
    m = onnx.load(float_path)
    init = {t.name: t for t in m.graph.initializer}
    rec = read_record(record)
    nodes = []
    for n in m.graph.node:
        if n.name in rec:
            s = rec[n.name][0]
            w_t = init[n.input[1]]
            w = numpy_helper.to_array(w_t).astype(np.float32)
            wb = (w * in_channel_scale(n, w, s)).astype(np.float32)
            w_t.CopyFrom(numpy_helper.from_array(wb, w_t.name))
            inv = (np.float32(1) / s).astype(np.float32)
            if n.op_type in ("Conv", "ConvTranspose"):
                inv = inv.reshape(-1, *([1] * (w.ndim - 2)))
            m.graph.initializer.append(numpy_helper.from_array(inv, n.name + ".dmq.scale"))
            y = n.name + ".dmq.output0"
            nodes.append(helper.make_node("Mul", [n.input[0], n.name + ".dmq.scale"], [y], name=n.name + ".dmq"))
            n.input[0] = y
        nodes.append(n)
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    onnx.checker.check_model(m)
    onnx.save(m, out)
    print("balanced by hand: %d layers" % len(rec))
    return 0


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "fake-quant":
        sys.exit(fake_quant(sys.argv[2], sys.argv[3], sys.argv[4]))
    if cmd == "balanced":
        sys.exit(balanced(sys.argv[2], sys.argv[3], sys.argv[4]))
    sys.exit("unknown command " + cmd)
