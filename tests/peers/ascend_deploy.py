"""Ascend deploy models (amct-reference.md §9.1) for tests/peers/ascend_deploy.sh: builds them
with onnx.helper (no onnx.checker: AscendQuant/AscendDequant/AscendAntiQuant are custom nodes
in the default domain) and computes, in numpy, the formulas calq's kernels implement:

  AscendQuant      q = clamp(rint(x*scale) + offset, -128, 127)   (x*scale in float32; ties to even,
                   the device's rounding, amct-reference.md §0.3; "RoundHalfAway" for Caffe's fake Quant)
  integer layer    y = sum((q_x - offset) * q_w) + bias_q                     (exact, int64)
  AscendDequant    y = float32(x) * deq  (shift_n = N > 0: clamp(floor(x/2^N), -32768, 32767) * deq * 2^N)
  AscendAntiQuant  y = (float32(x) + offset) * scale

Subcommands:
  tiny DIR                      a small model using every op and attribute, its input, and the
                                expected outputs (DIR/model.onnx, DIR/input.npy, DIR/expected/*.npy)
  ultraface FLOAT.onnx DUMP OUT a deploy model of UltraFace: every Conv becomes AscendQuant -> int8
                                Conv -> AscendDequant, with min/max data factors from calq's float
                                dump of its input (DUMP/<tensor>.npy) and per-channel weights
  layers DEPLOY.onnx DUMP       every integer layer of a deploy model recomputed from calq's dump of
                                its own run: quantized input, int32 output and dequantized output
                                must equal numpy's bit for bit
  same A_DIR B_DIR              every .npy of A_DIR equals B_DIR's (dtype, shape, bits)
  cosine A.npy B.npy MIN        prints the cosine similarity, fails below MIN
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def round_half_away(v):
    v = v.astype(np.float64)  # exact for float32 values: |v| + 0.5 cannot round across an integer
    return np.sign(v) * np.floor(np.abs(v) + 0.5)


def ascend_quant(x, scale, offset, sqrt_mode=0, round_mode="Round"):
    v = x.astype(np.float32) * np.float32(scale)
    if sqrt_mode:
        v = v * np.float32(scale)
    r = {"Round": np.rint, "RoundHalfAway": round_half_away, "Floor": np.floor, "Ceil": np.ceil, "Trunc": np.trunc}[round_mode](
        v.astype(np.float64))
    q = r + offset
    q = np.where(np.isnan(q), 0, q)
    return np.clip(q, -128, 127).astype(np.int8)


def pack_deq(deq, shift_n=None):
    deq = np.asarray(deq, np.float32).reshape(-1)
    bits = deq.view(np.uint32).astype(np.uint64)
    shift = np.zeros(deq.shape, np.uint64) if shift_n is None else np.asarray(shift_n, np.uint64)
    return bits | (shift << np.uint64(32))


def ascend_dequant(x, packed, sqrt_mode=0, relu=0, dtype=0):
    packed = np.asarray(packed, np.uint64).reshape(-1)
    deq = (packed & np.uint64(0xFFFFFFFF)).astype(np.uint32).view(np.float32)
    shift = ((packed >> np.uint64(32)) & np.uint64(0xFF)).astype(np.int64)
    shape = [1] * x.ndim
    if packed.size > 1:
        shape[1] = packed.size
    deq, shift = deq.reshape(shape), shift.reshape(shape)
    x64 = x.astype(np.int64)
    t = np.clip(np.floor_divide(x64, np.left_shift(1, shift)), -32768, 32767)
    base = np.where(shift > 0, t, x64)
    # int -> float32 rounds to nearest, as C's (float) does
    v = base.astype(np.float32) * deq
    if sqrt_mode:
        v = v * deq
    v = np.where(shift > 0, v * np.exp2(shift).astype(np.float32), v).astype(np.float32)
    if relu:
        v = np.where(v < 0, np.float32(0), v)
    return v.astype(np.float16) if dtype == 1 else v


def ascend_antiquant(x, scale, offset, sqrt_mode=0):
    v = (x.astype(np.float32) + np.float32(offset)) * np.float32(scale)
    if sqrt_mode:
        v = v * np.float32(scale)
    return v


def conv_int(xc, w, b, strides=(1, 1), pads=(0, 0, 0, 0), dil=(1, 1), group=1):
    """2-D convolution of the centered int input xc (int64) with int weights, exact."""
    n, c, h, wd = xc.shape
    m, cg, kh, kw = w.shape
    xp = np.pad(xc, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    oh = (h + pads[0] + pads[2] - (kh - 1) * dil[0] - 1) // strides[0] + 1
    ow = (wd + pads[1] + pads[3] - (kw - 1) * dil[1] - 1) // strides[1] + 1
    y = np.zeros((n, m, oh, ow), np.int64)
    mg = m // group
    w = w.astype(np.int64)
    for g in range(group):
        xs = xp[:, g * cg:(g + 1) * cg]
        for i in range(kh):
            for j in range(kw):
                patch = xs[:, :, i * dil[0]:i * dil[0] + strides[0] * (oh - 1) + 1:strides[0],
                           j * dil[1]:j * dil[1] + strides[1] * (ow - 1) + 1:strides[1]]
                y[:, g * mg:(g + 1) * mg] += np.einsum("nchw,mc->nmhw", patch, w[g * mg:(g + 1) * mg, :, i, j])
    if b is not None:
        y += b.astype(np.int64).reshape(1, -1, 1, 1)
    return y


def convtranspose_int(xc, w, b, strides, pads, out_pad):
    """2-D transposed convolution (group 1), exact: input (i, j) scatters to (i*s - p + k)."""
    n, c, h, wd = xc.shape
    _, m, kh, kw = w.shape
    oh = strides[0] * (h - 1) + out_pad[0] + kh - pads[0] - pads[2]
    ow = strides[1] * (wd - 1) + out_pad[1] + kw - pads[1] - pads[3]
    y = np.zeros((n, m, oh, ow), np.int64)
    for i in range(h):
        for j in range(wd):
            for a in range(kh):
                for bb in range(kw):
                    r, s = i * strides[0] - pads[0] + a, j * strides[1] - pads[1] + bb
                    if 0 <= r < oh and 0 <= s < ow:
                        y[:, :, r, s] += np.einsum("nc,cm->nm", xc[:, :, i, j], w[:, :, a, bb].astype(np.int64))
    return y + b.astype(np.int64).reshape(1, -1, 1, 1)


def avgpool_int(xc, k, s, pads, include_pad):
    n, c, h, w = xc.shape
    oh = (h + pads[0] + pads[2] - k[0]) // s[0] + 1
    ow = (w + pads[1] + pads[3] - k[1]) // s[1] + 1
    y = np.zeros((n, c, oh, ow), np.int64)
    for i in range(oh):
        for j in range(ow):
            r0, c0 = i * s[0] - pads[0], j * s[1] - pads[1]
            ra, rb, ca, cb = max(r0, 0), min(r0 + k[0], h), max(c0, 0), min(c0 + k[1], w)
            total = xc[:, :, ra:rb, ca:cb].sum(axis=(2, 3))
            if include_pad:
                cnt = (min(r0 + k[0], h + pads[2]) - r0) * (min(c0 + k[1], w + pads[3]) - c0)
            else:
                cnt = (rb - ra) * (cb - ca)
            q, r = np.divmod(total, cnt)  # floor division: 0 <= r < cnt
            y[:, :, i, j] = q + ((2 * r > cnt) | ((2 * r == cnt) & (q % 2 == 1)))
    return y


def node(op, ins, outs, **attrs):
    return helper.make_node(op, ins, outs, name=outs[0] + "_node", **attrs)


def tiny(out_dir):
    rng = np.random.default_rng(7)
    os.makedirs(os.path.join(out_dir, "expected"), exist_ok=True)
    x = rng.uniform(-3, 3, (1, 3, 6, 6)).astype(np.float32)
    x[0, 0, 0, :4] = [0.025, -0.025, 0.075, -0.125]  # ties of x*20: 0.5, -0.5, 1.5, -2.5
    inits, nodes, exp = [], [], {}

    def init(name, arr, typed=False):
        # raw_data by default; typed=True stores the values in TensorProto's typed fields
        # (uint64_data for UINT64, int32_data for INT8 / INT32), which calq reads too
        if typed:
            elem = {np.dtype(np.uint64): TensorProto.UINT64, np.dtype(np.int8): TensorProto.INT8,
                    np.dtype(np.int32): TensorProto.INT32}[arr.dtype]
            inits.append(helper.make_tensor(name, elem, list(arr.shape), arr.ravel().tolist()))
        else:
            inits.append(numpy_helper.from_array(arr, name))

    # Conv: pads 1, per-channel deq with shift_n on two channels, relu_flag
    w1 = rng.integers(-127, 128, (4, 3, 3, 3)).astype(np.int8)
    b1 = rng.integers(-3000, 3000, 4).astype(np.int32)
    deq1 = pack_deq([0.003, 0.0021, 0.0042, 0.0013], [0, 2, 0, 3])
    init("w1", w1), init("b1", b1), init("deq1", deq1)
    nodes += [node("AscendQuant", ["x"], ["q1"], scale=20.0, offset=-3.0),
              node("Conv", ["q1", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
              node("AscendDequant", ["c1", "deq1"], ["y_conv"], relu_flag=1, dtype=0)]
    exp["q1"] = ascend_quant(x, 20.0, -3)
    exp["c1"] = conv_int(exp["q1"].astype(np.int64) + 3, w1, b1, pads=(1, 1, 1, 1)).astype(np.int32)
    exp["y_conv"] = ascend_dequant(exp["c1"], deq1, relu=1)
    # AveragePool 3x3 stride 2 pads 1 count_include_pad, per-tensor deq
    deq2 = pack_deq([0.1])
    init("deq2", deq2, typed=True)
    nodes += [node("AscendQuant", ["y_conv"], ["q2"], scale=10.0, offset=5.0, round_mode="Floor"),
              node("AveragePool", ["q2"], ["p2"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                   count_include_pad=1),
              node("AscendDequant", ["p2", "deq2"], ["y_pool"])]
    q2 = ascend_quant(exp["y_conv"], 10.0, 5, round_mode="Floor")
    p2 = avgpool_int(q2.astype(np.int64) - 5, (3, 3), (2, 2), (1, 1, 1, 1), True).astype(np.int32)
    exp["y_pool"] = ascend_dequant(p2, deq2)
    # Flatten + Gemm (transB) with an int32 bias: Caffe's InnerProduct in a deploy model
    w3 = rng.integers(-127, 128, (5, 36)).astype(np.int8)
    b3 = rng.integers(-500, 500, 5).astype(np.int32)
    deq3 = pack_deq(rng.uniform(0.001, 0.01, 5))
    init("w3", w3, typed=True), init("b3", b3, typed=True), init("deq3", deq3)
    nodes += [node("AscendQuant", ["y_pool"], ["q3"], scale=8.0, offset=-1.0),
              node("Flatten", ["q3"], ["f3"], axis=1),
              node("Gemm", ["f3", "w3", "b3"], ["g3"], transB=1),
              node("AscendDequant", ["g3", "deq3"], ["y_gemm"])]
    q3 = ascend_quant(exp["y_pool"], 8.0, -1).reshape(1, 36)
    g3 = ((q3.astype(np.int64) + 1) @ w3.astype(np.int64).T + b3).astype(np.int32)
    exp["y_gemm"] = ascend_dequant(g3, deq3)
    # ConvTranspose stride 2 with sqrt_mode on both sides
    w4 = rng.integers(-127, 128, (3, 2, 3, 3)).astype(np.int8)
    b4 = rng.integers(-100, 100, 2).astype(np.int32)
    deq4 = pack_deq([0.05, 0.07])
    init("w4", w4), init("b4", b4), init("deq4", deq4)
    nodes += [node("AscendQuant", ["x"], ["q4"], scale=4.0, offset=2.0, sqrt_mode=1),
              node("ConvTranspose", ["q4", "w4", "b4"], ["t4"], strides=[2, 2], pads=[1, 1, 1, 1],
                   output_padding=[1, 1]),
              node("AscendDequant", ["t4", "deq4"], ["y_deconv"], sqrt_mode=1)]
    q4 = ascend_quant(x, 4.0, 2, sqrt_mode=1)
    t4 = convtranspose_int(q4.astype(np.int64) - 2, w4, b4, (2, 2), (1, 1, 1, 1), (1, 1)).astype(np.int32)
    exp["y_deconv"] = ascend_dequant(t4, deq4, sqrt_mode=1)
    # MatMul (batched A, 2-D B), Trunc rounding, float16 output
    w6 = rng.integers(-127, 128, (6, 4)).astype(np.int8)
    deq6 = pack_deq([0.02])
    init("w6", w6), init("deq6", deq6)
    nodes += [node("AscendQuant", ["x"], ["q6"], scale=12.5, offset=0.0, round_mode="Trunc"),
              node("MatMul", ["q6", "w6"], ["m6"]),
              node("AscendDequant", ["m6", "deq6"], ["y_matmul"], dtype=1)]
    q6 = ascend_quant(x, 12.5, 0, round_mode="Trunc")
    exp["y_matmul"] = ascend_dequant((q6.astype(np.int64) @ w6.astype(np.int64)).astype(np.int32), deq6, dtype=1)
    # AscendQuant -> AscendAntiQuant (the quantize-dequantize AMCT puts before a MaxPool, §9.3)
    nodes += [node("AscendQuant", ["x"], ["q5"], scale=20.0, offset=-3.0),
              node("AscendAntiQuant", ["q5"], ["y_anti"], scale=0.05, offset=3.0)]
    exp["y_anti"] = ascend_antiquant(ascend_quant(x, 20.0, -3), 0.05, 3.0)
    # the Caffe fake Quant's rounding (ties away from zero) on the same ties
    nodes += [node("AscendQuant", ["x"], ["q7"], scale=20.0, offset=0.0, round_mode="RoundHalfAway"),
              node("AscendAntiQuant", ["q7"], ["y_anti_away"], scale=0.05, offset=0.0)]
    exp["y_anti_away"] = ascend_antiquant(ascend_quant(x, 20.0, 0, round_mode="RoundHalfAway"), 0.05, 0.0)
    # the packed deq_scale itself as an output (a uint64 tensor through Identity)
    nodes.append(node("Identity", ["deq1"], ["deq1_copy"]))
    exp["deq1_copy"] = deq1

    types = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float16): TensorProto.FLOAT16,
             np.dtype(np.int8): TensorProto.INT8, np.dtype(np.int32): TensorProto.INT32,
             np.dtype(np.uint64): TensorProto.UINT64}
    outs = [helper.make_tensor_value_info(k, types[v.dtype], list(v.shape)) for k, v in exp.items()]
    graph = helper.make_graph(nodes, "ascend_tiny",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))], outs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="calq-test")
    onnx.save(model, os.path.join(out_dir, "model.onnx"))
    np.save(os.path.join(out_dir, "input.npy"), x)
    for k, v in exp.items():
        np.save(os.path.join(out_dir, "expected", k + ".npy"), v)
    print("tiny deploy model: %d nodes, outputs %s" % (len(nodes), ", ".join(exp)))


def attr(n, name, default):
    for a in n.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def ultraface(float_path, dump, out_path):
    m = onnx.load(float_path)
    g = m.graph
    inits = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    quantized = {}  # data tensor -> (its AscendQuant output, scale_d, offset_d)
    nodes, new_inits, used = [], [], set()
    for n in g.node:
        if n.op_type != "Conv" or n.input[1] not in inits:
            nodes.append(n)
            used.update(n.input)
            continue
        x = n.input[0]
        if x not in quantized:
            data = np.load(os.path.join(dump, x + ".npy"))
            lo, hi = min(float(data.min()), 0.0), max(float(data.max()), 0.0)
            scale_d = (hi - lo) / 255.0 if hi > lo else 1.0
            offset_d = int(np.clip(-128 - np.round(lo / scale_d), -128, 127))
            quantized[x] = (x + "_q", scale_d, offset_d)
            nodes.append(helper.make_node("AscendQuant", [x], [x + "_q"], name=x + "_quant",
                                          scale=float(np.float32(1.0 / scale_d)), offset=float(offset_d),
                                          sqrt_mode=0, round_mode="Round", dst_type="INT8"))
            used.add(x)
        xq, scale_d, _ = quantized[x]
        w = inits[n.input[1]].astype(np.float32)
        scale_w = np.abs(w).reshape(w.shape[0], -1).max(axis=1) / 127.0
        scale_w[scale_w == 0] = 1.0
        wq = np.clip(np.round(w / scale_w.reshape(-1, 1, 1, 1)), -127, 127).astype(np.int8)
        deq = (np.float32(scale_d) * scale_w.astype(np.float32)).astype(np.float32)
        layer = n.name or n.output[0]
        ins = [xq, layer + ".weight_int8"]
        new_inits.append(numpy_helper.from_array(wq, layer + ".weight_int8"))
        if len(n.input) > 2 and n.input[2]:
            bq = np.round(inits[n.input[2]].astype(np.float64) / deq).astype(np.int32)
            new_inits.append(numpy_helper.from_array(bq, layer + ".bias_int32"))
            ins.append(layer + ".bias_int32")
        new_inits.append(numpy_helper.from_array(pack_deq(deq), layer + ".dequant.param"))
        conv = helper.make_node("Conv", ins, [n.output[0] + "_int32"], name=layer)
        conv.attribute.extend(n.attribute)
        nodes.append(conv)
        nodes.append(helper.make_node("AscendDequant", [n.output[0] + "_int32", layer + ".dequant.param"],
                                      [n.output[0]], name=layer + "_dequant", dtype=0, sqrt_mode=0, relu_flag=0))
    keep = [t for t in g.initializer if t.name in used]
    graph = helper.make_graph(nodes, g.name + "_deploy", [i for i in g.input if i.name not in inits], list(g.output),
                              keep + new_inits)
    model = helper.make_model(graph, opset_imports=list(m.opset_import), producer_name="calq-test")
    onnx.save(model, out_path)
    n_conv = sum(1 for n in nodes if n.op_type == "Conv")
    print("deploy model: %d integer Conv layers, %d AscendQuant nodes" % (n_conv, len(quantized)))


def layers(deploy_path, dump):
    m = onnx.load(deploy_path)
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    producer = {o: n for n in m.graph.node for o in n.output}
    consumer = {n.input[0]: n for n in m.graph.node if n.op_type == "AscendDequant"}
    load = lambda name: np.load(os.path.join(dump, name + ".npy"))
    checked, elems, bad = 0, 0, 0
    for n in m.graph.node:
        if n.op_type != "Conv":
            continue
        aq = producer[n.input[0]]
        scale, offset = attr(aq, "scale", 1.0), int(attr(aq, "offset", 0.0))
        q = load(n.input[0])
        want_q = ascend_quant(load(aq.input[0]), scale, offset)
        b = inits[n.input[2]] if len(n.input) > 2 else None
        pads = list(attr(n, "pads", [0, 0, 0, 0]))
        y = load(n.output[0])
        want_y = conv_int(q.astype(np.int64) - offset, inits[n.input[1]], b, tuple(attr(n, "strides", [1, 1])),
                          pads, tuple(attr(n, "dilations", [1, 1])), attr(n, "group", 1))
        dq = consumer[n.output[0]]
        want_f = ascend_dequant(y, inits[dq.input[1]])
        got_f = load(dq.output[0])
        for what, got, want in (("AscendQuant", q, want_q), ("Conv int32", y, want_y), ("AscendDequant", got_f, want_f)):
            if got.dtype != want.dtype and not (what == "Conv int32" and got.dtype == np.int32):
                print("%s %s: dtype %s, expected %s" % (n.name, what, got.dtype, want.dtype))
                bad += 1
            elif got.shape != want.shape or not np.array_equal(got.astype(want.dtype), want):
                diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
                print("%s %s: %d of %d elements differ (max %g)" % (n.name, what, int((diff > 0).sum()), diff.size,
                                                                   float(diff.max())))
                bad += 1
            elems += got.size
        checked += 1
    print("integer layers recomputed in numpy: %d, %d values compared, %d mismatching tensors" % (checked, elems, bad))
    return bad == 0 and checked > 0


def same(a_dir, b_dir):
    ok, n = True, 0
    for f in sorted(os.listdir(b_dir)):
        want = np.load(os.path.join(b_dir, f))
        path = os.path.join(a_dir, f)
        if not os.path.exists(path):
            print("%s: missing from %s" % (f, a_dir))
            ok = False
            continue
        got = np.load(path)
        n += 1
        if got.dtype != want.dtype or got.shape != want.shape:
            print("%s: %s %s, expected %s %s" % (f, got.dtype, got.shape, want.dtype, want.shape))
            ok = False
        elif not np.array_equal(got.view(np.uint8), want.view(np.uint8)):
            diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
            print("%s: %d of %d elements differ (max %g)" % (f, int((diff > 0).sum()), diff.size, float(diff.max())))
            ok = False
        else:
            print("%s: %s %s identical" % (f, got.dtype, "x".join(map(str, got.shape))))
    return ok and n > 0


def cosine(a, b, lim):
    x, y = np.load(a).astype(np.float64).ravel(), np.load(b).astype(np.float64).ravel()
    c = float(x @ y / (np.linalg.norm(x) * np.linalg.norm(y)))
    print("%s: cosine %.6f" % (os.path.basename(a), c))
    return c >= float(lim)


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "tiny":
        tiny(*args)
        ok = True
    elif cmd == "ultraface":
        ultraface(*args)
        ok = True
    elif cmd == "layers":
        ok = layers(*args)
    elif cmd == "same":
        ok = same(*args)
    elif cmd == "cosine":
        ok = cosine(*args)
    else:
        sys.exit("unknown subcommand " + cmd)
    sys.exit(0 if ok else 1)
