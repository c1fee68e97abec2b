"""Helpers for save_onnx.sh (issue 6), run with Debian's python3 (python3-onnx, numpy).

  save_compare.py check MODEL.onnx                  onnx.checker.check_model(full_check=True)
  save_compare.py opset9 OUT.onnx DATA_DIR           a small opset-9 model and 3 .npy batches
  save_compare.py probe IN.onnx OUT.onnx            OUT: IN plus every int8 tensor (QuantizeLinear
                                                    / QLinearConv / QLinearMatMul outputs) as outputs
  save_compare.py steps DIR_A DIR_B MAXSTEP         int8 .npy files in both: max |a - b| in steps
  save_compare.py qnames MODEL.onnx                 the QuantizeLinear outputs, comma separated
  save_compare.py ortprobe QDQ.onnx OPT.onnx OUT.onnx MAP.json
                                                    OUT: onnxruntime's optimized graph OPT of QDQ with
                                                    every int8 tensor as an output; MAP: its names
  save_compare.py ortsteps MAP.json ORT_DIR CALQ_DIR MAXSTEP
                                                    those tensors against calq's dumps of QDQ's
                                                    QuantizeLinear outputs, in steps
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
    """Every 8-bit tensor of a QOperator file made a graph output: the outputs of QuantizeLinear,
    of the QLinear ops and of ops that move uint8 tensors (typed like their zero point)."""
    import onnx
    m = onnx.load(src)
    have = {o.name for o in m.graph.output}
    zp_type = {i.name: i.data_type for i in m.graph.initializer}
    q8 = {}
    zp_in = {"QuantizeLinear": 2, "QLinearConv": 7, "QLinearMatMul": 7, "QLinearAdd": 7, "QLinearMul": 7,
             "QLinearConcat": 1, "QLinearGlobalAveragePool": 4, "QLinearSigmoid": 4, "QLinearLeakyRelu": 4,
             "QLinearAveragePool": 4, "QGemm": 8}
    for n in m.graph.node:
        t = None
        if n.op_type in zp_in and len(n.input) > zp_in[n.op_type]:
            t = zp_type.get(n.input[zp_in[n.op_type]], onnx.TensorProto.INT8)
        elif n.input and n.input[0] in q8 and n.op_type != "DequantizeLinear":
            t = q8[n.input[0]]  # MaxPool, Reshape, ... on an 8-bit tensor
        if t is None:
            continue
        q8[n.output[0]] = t
        if n.output[0] not in have:
            m.graph.output.append(onnx.helper.make_tensor_value_info(n.output[0], t, None))
    onnx.save(m, dst)


def steps(a_dir, b_dir, max_step):
    worst, n = 0, 0
    for fa in sorted(glob.glob(os.path.join(a_dir, "*.npy"))):
        fb = os.path.join(b_dir, os.path.basename(fa))
        a = np.load(fa)
        if a.dtype not in (np.int8, np.uint8):
            continue
        if not os.path.exists(fb):
            print("steps: %s missing in %s" % (os.path.basename(fa), b_dir))
            return 1
        d = int(np.abs(a.astype(np.int32) - np.load(fb).astype(np.int32)).max())
        worst = max(worst, d)
        n += 1
    print("8-bit tensors compared: %d, max difference: %d quantization step(s)" % (n, worst))
    return 0 if n > 0 and worst <= max_step else 1


def qnames(path):
    import onnx
    print(",".join(n.output[0] for n in onnx.load(path).graph.node if n.op_type == "QuantizeLinear"))


def ort_probe(src, opt, dst, map_path):
    """onnxruntime rewrites a QDQ model before running it (QLinearConv, QGemm, QLinearMatMul in
    place of DQ -> layer -> Q, int8 recoded to uint8 on x86, NHWC QLinearConv chains), and a Q
    output made a graph output would stop that rewrite. So its int8 tensors are read from its own
    optimized graph OPT (saved by the session, then run without further optimization): every
    QuantizeLinear / QLinear* output there becomes a graph output, named back to the tensor of
    the QDQ file it stands for (the Q node's name; for a fused layer, its weight initializer ->
    the original layer -> the Q after it, past a dropped Relu / Clip)."""
    import json
    import onnx
    from onnx import helper
    orig = onnx.load(src).graph
    prod = {o: n for n in orig.node for o in n.output}
    cons = {}
    for n in orig.node:
        for i in n.input:
            cons.setdefault(i, []).append(n)
    q_by_name = {n.name: n.output[0] for n in orig.node if n.op_type == "QuantizeLinear"}
    q_by_scale = {}  # fallback where onnxruntime recoded a weight: the y_scale initializer
    for n in orig.node:
        if n.op_type == "QuantizeLinear":
            q_by_scale.setdefault(n.input[1], []).append(n.output[0])
    layer_q = {}  # weight initializer name -> the int8 tensor its layer's Q writes
    for n in orig.node:
        if n.op_type not in ("Conv", "Gemm", "MatMul") or len(n.input) < 2 or n.input[1] not in prod:
            continue
        wdq = prod[n.input[1]]
        if wdq.op_type != "DequantizeLinear":
            continue
        out = n.output[0]
        while len(cons.get(out, [])) == 1 and cons[out][0].op_type in ("Relu", "Clip"):
            out = cons[out][0].output[0]
        qs = [c for c in cons.get(out, []) if c.op_type == "QuantizeLinear"]
        if len(qs) == 1:
            layer_q.setdefault(wdq.input[0], []).append(qs[0].output[0])
    # onnxruntime's com.microsoft QLinear ops keep the name of the node they replace; their
    # output is the Q after it (past a Relu / Clip it found redundant): input index of y's zp
    qlinear_zp = {"QLinearAdd": 7, "QLinearMul": 7, "QLinearConcat": 1, "QLinearGlobalAveragePool": 4,
                  "QLinearAveragePool": 4, "QLinearSigmoid": 4, "QLinearLeakyRelu": 4, "QLinearSoftmax": 4}
    by_node = {}
    for n in orig.node:
        out = n.output[0] if n.output else None
        while out and len(cons.get(out, [])) == 1 and cons[out][0].op_type in ("Relu", "Clip"):
            out = cons[out][0].output[0]
        qs = [c for c in cons.get(out, []) if c.op_type == "QuantizeLinear"]
        if n.name and len(qs) == 1:
            by_node[n.name] = qs[0].output[0]
    q_outputs = set(q_by_name.values())
    m = onnx.load(opt)
    zp_type = {i.name: i.data_type for i in m.graph.initializer}
    have = {o.name for o in m.graph.output}
    mapping = {}
    for n in m.graph.node:
        attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
        if n.op_type == "QuantizeLinear":
            name, zp = q_by_name.get(n.name), n.input[2] if len(n.input) > 2 else None
        elif n.op_type in qlinear_zp and (n.name in by_node or n.output[0] in q_outputs):
            # unnamed nodes: onnxruntime names the output after the Q it absorbed
            name, zp = by_node.get(n.name, n.output[0]), n.input[qlinear_zp[n.op_type]]
        elif n.op_type in ("QLinearConv", "QLinearMatMul") or (n.op_type == "QGemm" and len(n.input) > 8):
            cand = layer_q.get(n.input[3]) or q_by_scale.get(n.input[6 if n.op_type != "QGemm" else 7], [])
            name = cand[0] if len(cand) == 1 else None
            zp = n.input[7] if n.op_type != "QGemm" else n.input[8]
        else:
            continue
        if name is None or zp not in zp_type:
            continue
        mapping[n.output[0]] = {"name": name, "nhwc": attrs.get("channels_last", 0) == 1}
        if n.output[0] not in have:
            m.graph.output.append(helper.make_tensor_value_info(n.output[0], zp_type[zp], None))
    onnx.save(m, dst)
    json.dump(mapping, open(map_path, "w"), indent=1)
    fused = sum(1 for n in m.graph.node if n.op_type in ("QLinearConv", "QGemm", "QLinearMatMul", "MatMulIntegerToFloat"))
    print("onnxruntime's graph: %d fused integer layers, %d int8 tensors probed" % (fused, len(mapping)))
    missing = sorted(set(q_by_name.values()) - {v["name"] for v in mapping.values()})
    # onnxruntime's QDQ propagation moves a Q up across ops that only move values (its Q then
    # quantizes the same values in another layout, under a new name): those are not compared
    q_input = {n.output[0]: n.input[0] for n in orig.node if n.op_type == "QuantizeLinear"}
    movers = ("Transpose", "Reshape", "Squeeze", "Unsqueeze", "Flatten", "Gather", "Slice", "Expand", "Tile",
              "MaxPool", "Resize")
    moved = [q for q in missing if q_input[q] in prod and prod[q_input[q]].op_type in movers]
    if moved:
        print("ortprobe: moved up across %s by onnxruntime's QDQ propagation, not compared: %s"
              % ("/".join(sorted({prod[q_input[q]].op_type for q in moved})), ", ".join(moved)))
    missing = [q for q in missing if q not in moved]
    if missing:
        print("ortprobe: not found in onnxruntime's graph: %s" % ", ".join(missing))
        sys.exit(1)


def ort_steps(map_path, ort_dir, calq_dir, max_step):
    import json
    import re
    mapping = json.load(open(map_path))
    safe = lambda s: re.sub(r"[^A-Za-z0-9._-]", "_", s)
    worst, n, beyond = 0, 0, []
    for ort_name, info in sorted(mapping.items(), key=lambda kv: kv[1]["name"]):
        a = np.load(os.path.join(ort_dir, safe(ort_name) + ".npy"))
        if info["nhwc"]:
            a = a.transpose(0, 3, 1, 2)
        # uint8 tensors are int8 ones onnxruntime recoded with +128 (zero point too)
        a = a.astype(np.int32) - (128 if a.dtype == np.uint8 else 0)
        fb = os.path.join(calq_dir, safe(info["name"]) + ".npy")
        if not os.path.exists(fb):
            print("ortsteps: calq did not write %s" % info["name"])
            return 1
        b = np.load(fb)
        b = b.astype(np.int32) - (128 if b.dtype == np.uint8 else 0)  # the same frame as a
        if a.ndim == 4 and a.shape != b.shape and a.transpose(0, 3, 1, 2).shape == b.shape:
            a = a.transpose(0, 3, 1, 2)  # a tensor of onnxruntime's NHWC chain (its layout transformer)
        if a.shape != b.shape and a.size == b.size:
            # a layer's output Q that onnxruntime's QDQ propagation moved up across a Transpose /
            # Reshape onto the layer: the same values in the layer's layout
            print("ortsteps: %s: onnxruntime quantizes it before a layout op (%s vs %s), not compared"
                  % (info["name"], "x".join(map(str, a.shape)), "x".join(map(str, b.shape))))
            continue
        d = int(np.abs(a - b).max())
        worst, n = max(worst, d), n + 1
        if d > max_step:
            beyond.append("%s (%d)" % (info["name"], d))
    print("int8 tensors compared: %d, max difference: %d quantization step(s)%s"
          % (n, worst, "; beyond %d: %s" % (max_step, ", ".join(beyond)) if beyond else ""))
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


def ort_int8_exact():
    """Whether onnxruntime's x86 int8 kernels compute exactly on this CPU. Without VNNI
    (avx512_vnni, avx_vnni, amx_int8) its u8s8 GEMM/conv kernels add pairs of u8 x s8 products
    in 16 bits with saturation (vpmaddubsw), so its results are not the exact integer ones calq
    computes: up to 13 steps apart on UltraFace. calq's own files are not at fault; comparisons
    of int8 execution against it are then reported but not counted. Without VNNI calq itself runs
    a QDQ file's DQ -> Conv -> Q in float (its integer oneDNN path needs VNNI to be exact), and
    float32 sums of large integer products round: up to 8 steps on one UltraFace photo with
    oneDNN held to AVX2 against onnxruntime's exact VNNI kernels (QOperator files run calq's exact
    integer kernels). CALQ_ORT_INT8_EXACT=1/0 overrides the CPU check."""
    force = os.environ.get("CALQ_ORT_INT8_EXACT")
    if force in ("0", "1"):
        return force == "1"
    try:
        with open("/proc/cpuinfo") as f:
            flags = set(f.read().split())
    except OSError:
        return True
    return bool(flags & {"avx512_vnni", "avx_vnni", "amx_int8"})


def not_counted(rc, what):
    if rc and not ort_int8_exact():
        print("NOTE: %s differs, not counted: without VNNI onnxruntime's int8 kernels saturate and calq runs QDQ "
              "in float (save_compare.py ort_int8_exact)" % what)
        return 0
    return rc


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "check":
        check(sys.argv[2])
    elif cmd == "opset9":
        opset9_model(sys.argv[2], sys.argv[3])
    elif cmd == "probe":
        probe(sys.argv[2], sys.argv[3])
    elif cmd == "steps":
        rc = steps(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        ort = "ort" in os.path.basename(os.path.normpath(sys.argv[2]))
        sys.exit(not_counted(rc, "int8 tensors vs onnxruntime") if ort else rc)
    elif cmd == "qnames":
        qnames(sys.argv[2])
    elif cmd == "ortprobe":
        ort_probe(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5])
    elif cmd == "ortsteps":
        sys.exit(not_counted(ort_steps(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])),
                             "int8 tensors vs onnxruntime"))
    elif cmd == "cosine":
        rc = cosine(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5])
        lab = sys.argv[4].lower()
        int8_ort = "onnxruntime" in lab and any(k in lab for k in ("qdq", "qoperator", "int8"))
        sys.exit(not_counted(rc, sys.argv[4].strip()) if int8_ort else rc)
