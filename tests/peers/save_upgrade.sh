#!/bin/sh
# Save on older models (issue 14, item 10): TF-style segmentation nets at opset 9 (Upsample with
# scales as an input, Pad / Clip / Softmax in their old forms), opset 7 (Upsample with a scales
# attribute, bilinear) and opset 11 (tf2onnx's Resize tf_half_pixel_for_nn + floor) built with
# onnx.helper are calibrated by calq and saved in every format:
#   - QDQ and QOperator are raised to opset 13 (Upsample -> Resize, attributes -> inputs) and
#     pass onnx.checker; onnxruntime-node and calq run them and agree (cosine >= 0.999);
#   - the fake-quant QDQ model stays close to the float model (cosine >= 0.99);
#   - the AMCT fake-quant / deploy models load and run in calq;
#   - opset 11 with an If (tf.cond as tf2onnx exports it; torchvision's detectors have them):
#     its branches, a Loop body and an If nested in a branch are raised too (Squeeze / Unsqueeze
#     / Split attributes -> inputs, the 2-D Softmax rewritten), one model per branch taken;
#   - a model calq cannot raise to opset 13 (an opset 11 Resize tf_half_pixel_for_nn rounding
#     up, a mode opset 13 removed): the default save writes the Ascend models (opset 11 kept) and says
#     QDQ / QOperator were skipped and why; an explicit --format ascend,qdq fails as a whole and
#     writes nothing.
# Usage: save_upgrade.sh CALQ ORT_RUN_JS
set -u
CALQ=$1
ORT=$2
PY=/usr/bin/python3
export NODE_PATH=${CALQ_PEERS_DIR:-$HOME/.cache/calq-peers}/node_modules
. "$(dirname "$0")/../support/need.sh"
need_python numpy onnx
[ -d "$NODE_PATH/onnxruntime-node" ] || { echo "SKIP: onnxruntime-node not in $NODE_PATH"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}"/calq_upgrade.XXXXXX)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

$PY - "$T" <<'PY'
import sys, numpy as np, onnx
from onnx import helper as h, numpy_helper as nh, TensorProto as TP
out = sys.argv[1]
rng = np.random.default_rng(7)

def conv(name, x, cin, cout, k=3, stride=1):
    w = nh.from_array((rng.standard_normal((cout, cin, k, k)) * (2.0 / (cin * k * k)) ** 0.5).astype(np.float32), name + ".w")
    b = nh.from_array((rng.standard_normal(cout) * 0.1).astype(np.float32), name + ".b")
    n = h.make_node("Conv", [x, w.name, b.name], [name], name=name, kernel_shape=[k, k], pads=[k // 2] * 4,
                    strides=[stride, stride])
    return n, [w, b]

def net(opset, up_nodes):
    nodes, inits = [], []
    for spec in [("c1", "x", 3, 8, 2), ("c2", "r1", 8, 16, 2)]:
        n, i = conv(spec[0], spec[1], spec[2], spec[3], stride=spec[4]); nodes.append(n); inits += i
        nodes.append(h.make_node("Relu", [spec[0]], ["r" + spec[0][1]]))
    nodes += up_nodes("r2", "u1", "s1")       # x2
    n, i = conv("c3", "u1", 16, 8); nodes.append(n); inits += i
    nodes.append(h.make_node("Clip", ["c3"], ["k3"], min=0.0, max=6.0) if opset < 11 else
                 h.make_node("Relu", ["c3"], ["k3"]))
    nodes += up_nodes("k3", "u2", "s2")       # x2 back to the input size
    n, i = conv("c4", "u2", 8, 3, k=1); nodes.append(n); inits += i
    nodes.append(h.make_node("Pad", ["c4"], ["p4"], pads=[0, 0, 1, 1, 0, 0, 1, 1], mode="constant", value=0.0))
    nodes.append(h.make_node("Softmax", ["p4"], ["y"], axis=3))
    nodes = [n for n in nodes if n is not None]
    # old exporters list the weights among the graph inputs too (IR 3)
    ins = [h.make_tensor_value_info("x", TP.FLOAT, [1, 3, 32, 48])]
    ins += [h.make_tensor_value_info(t.name, TP.FLOAT, list(t.dims)) for t in inits]
    g = h.make_graph(nodes, "seg", ins, [h.make_tensor_value_info("y", TP.FLOAT, [1, 3, 34, 50])], inits)
    return g

def up9(x, y, s, sc=(1, 1, 2, 2), mode="nearest"):
    return [h.make_node("Constant", [], [s], value=nh.from_array(np.array(sc, np.float32), s)),
            h.make_node("Upsample", [x, s], [y], mode=mode)]

m9 = h.make_model(net(9, up9), opset_imports=[h.make_opsetid("", 9)])
m9.ir_version = 3
onnx.checker.check_model(m9)
onnx.save(m9, out + "/seg9.onnx")
m7 = h.make_model(net(7, lambda x, y, s: [h.make_node("Upsample", [x], [y], mode="bilinear", scales=[1.0, 1.0, 2.0, 2.0])]),
                  opset_imports=[h.make_opsetid("", 7)])
m7.ir_version = 3
onnx.checker.check_model(m7)
onnx.save(m7, out + "/seg7.onnx")
# opset 11 as tf2onnx writes TensorFlow's half-pixel nearest resize: Resize tf_half_pixel_for_nn
# + floor (removed at 13; calq rewrites it exactly)
def up11(x, y, s):
    return [h.make_node("Constant", [], [s], value=nh.from_array(np.array([1, 1, 2, 2], np.float32), s)),
            h.make_node("Constant", [], [s + "roi"], value=nh.from_array(np.array([], np.float32), s + "roi")),
            h.make_node("Resize", [x, s + "roi", s], [y], mode="nearest",
                        coordinate_transformation_mode="tf_half_pixel_for_nn", nearest_mode="floor")]

def opset11(g, with_if):
    for n in g.node:
        if n.op_type == "Pad":  # pads as an input since 11
            pads = [list(a.ints) for a in n.attribute if a.name == "pads"][0]
            del n.attribute[:]
            n.input.append("padsv")
            g.initializer.append(nh.from_array(np.array(pads, np.int64), "padsv"))
    g.node.insert(0, h.make_node("Clip", ["x"], ["x0"]))
    g.node.insert(0, h.make_node("Constant", [], ["six"], value=nh.from_array(np.array(6.0, np.float32), "six")))
    g.node[1].input.extend(["", "six"])
    for n in g.node:
        if n.op_type == "Conv" and n.input[0] == "x":
            n.input[0] = "x0"
    if with_if is not None:
        # tf.cond as tf2onnx exports it: If on a computed condition (the mean of k3 against
        # with_if: one model takes the then branch, the other the else branch); the branches
        # read k3 and hold opset-11 forms that opset 13 changed
        f = lambda v: nh.from_array(np.array(v), "c")
        g.node.extend([h.make_node("ReduceMean", ["k3"], ["m3"], keepdims=0),
                       h.make_node("Constant", [], ["thr"], value=f(np.float32(with_if))),
                       h.make_node("Constant", [], ["two"], value=f(np.int64(2))),
                       h.make_node("Greater", ["m3", "thr"], ["cond3"])])
        vi = lambda n, t=TP.FLOAT: h.make_tensor_value_info(n, t, None)
        # then: a Loop of 2 whose body squeezes and unsqueezes (axes attributes), and an If
        # nested in the branch doing the same
        body = h.make_graph([h.make_node("Squeeze", ["v_in"], ["v_s"], axes=[0]),
                             h.make_node("Unsqueeze", ["v_s"], ["v_out"], axes=[0]),
                             h.make_node("Identity", ["c_in"], ["c_out"])], "body",
                            [h.make_tensor_value_info("i", TP.INT64, []), h.make_tensor_value_info("c_in", TP.BOOL, []),
                             vi("v_in")], [h.make_tensor_value_info("c_out", TP.BOOL, []), vi("v_out")])
        inner_t = h.make_graph([h.make_node("Squeeze", ["t3l"], ["t3s"], axes=[0]),
                                h.make_node("Unsqueeze", ["t3s"], ["t3u"], axes=[0])], "inner_then", [], [vi("t3u")])
        inner_e = h.make_graph([h.make_node("Neg", ["t3l"], ["t3n"])], "inner_else", [], [vi("t3n")])
        then = h.make_graph([h.make_node("Loop", ["two", "", "k3"], ["t3l"], body=body),
                             h.make_node("If", ["cond3"], ["t3"], then_branch=inner_t, else_branch=inner_e)],
                            "then", [], [vi("t3")])
        # else: Softmax over C x H x W (opset 11's 2-D reading of axis 1) scaled back up, and a
        # Split with its sizes as an attribute
        # (the Mul is named as the Softmax's rewrite would name its Reshape: names a later node
        # of the same body uses are taken too)
        els = h.make_graph([h.make_node("Softmax", ["k3"], ["e3s"], axis=1, name="e3sm"),
                            h.make_node("Constant", [], ["e3k"], value=f(np.float32(8 * 16 * 24))),
                            h.make_node("Mul", ["e3s", "e3k"], ["e3m"], name="e3sm.reshape"),
                            h.make_node("Split", ["e3m"], ["e3a", "e3b"], axis=1, split=[3, 5]),
                            h.make_node("Concat", ["e3b", "e3a"], ["e3"], axis=1)], "else", [], [vi("e3")])
        g.node.append(h.make_node("If", ["cond3"], ["f3"], then_branch=then, else_branch=els))
        for n in g.node:
            if n.op_type == "Resize" and n.input[0] == "k3":
                n.input[0] = "f3"
    # a valid topological order for onnx.checker: constants first, then by data dependence
    order, done = [], {i.name for i in g.input} | {t.name for t in g.initializer}
    pending = list(g.node)
    while pending:
        for n in pending:
            if all(i == "" or i in done for i in n.input):
                order.append(n); pending.remove(n); done |= set(n.output); break
        else:
            raise RuntimeError("cycle")
    del g.node[:]
    g.node.extend(order)
    return g

for name, with_if in (("seg11", None), ("seg11_then", -1.0), ("seg11_else", 1e9)):
    g = opset11(net(11, up11), with_if)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 11)])
    m.ir_version = 6
    onnx.checker.check_model(m)
    onnx.save(m, out + "/%s.onnx" % name)
# opset 11: tf_half_pixel_for_nn with round_prefer_ceil, which opset 13 removed and cannot
# express (with floor it can: seg11); the AMCT formats keep opset 11 and need no rewrite
def up11_bad(x, y, s):
    n = up11(x, y, s)
    n[-1].attribute[-1].s = b"round_prefer_ceil"
    return n
mb = h.make_model(opset11(net(11, up11_bad), None), opset_imports=[h.make_opsetid("", 11)])
mb.ir_version = 6
onnx.checker.check_model(mb)
onnx.save(mb, out + "/seg_bad.onnx")
# calibration data: a few random images as .npy, and one run input
import os
os.makedirs(out + "/calib")
for k in range(2):
    np.save(out + "/calib/%d.npy" % k, rng.uniform(0, 1, (1, 3, 32, 48)).astype(np.float32))
np.save(out + "/x.npy", rng.uniform(0, 1, (1, 3, 32, 48)).astype(np.float32))
PY
[ -f "$T/seg9.onnx" ] || { echo "FAIL: building the models"; exit 1; }

cos() { # cos A.npy B.npy MIN WHAT
    $PY -c "
import sys, numpy as np
a = np.load(sys.argv[1]).astype(np.float64).ravel(); b = np.load(sys.argv[2]).astype(np.float64).ravel()
c = float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-30))
print('  %s: cosine %.6f' % (sys.argv[4], c)); sys.exit(0 if c >= float(sys.argv[3]) else 1)" "$1" "$2" "$3" "$4"
}

for m in seg9 seg7 seg11 seg11_then seg11_else; do
    P=$T/$m/out
    mkdir -p "$T/$m"
    "$CALQ" run "$T/$m.onnx" --input "x=$T/x.npy" --output-dir "$T/$m/float" >/dev/null 2>&1 || fail "$m: calq run float"
    # the float reference itself against onnxruntime: the model's own old-opset semantics
    # (not seg7: onnxruntime refuses Upsample-7's mode "bilinear")
    if [ $m != seg7 ]; then
        mkdir -p "$T/$m/ort_float"
        node "$ORT" "$T/$m.onnx" "$T/$m/ort_float" "x=$T/x.npy" || fail "$m: onnxruntime runs the float model"
        cos "$T/$m/float/y.npy" "$T/$m/ort_float/y.npy" 0.99999 "$m float calq vs onnxruntime" ||
            fail "$m: float calq vs onnxruntime"
    fi
    "$CALQ" calibration --model "$T/$m.onnx" --npy "$T/calib" --batch_num 2 --save_path "$P" >"$T/$m/cal.log" 2>&1 ||
        { fail "$m: calibration + save"; tail -5 "$T/$m/cal.log"; continue; }
    grep -q skipped "$T/$m/cal.log" && { fail "$m: a format was skipped"; grep skipped "$T/$m/cal.log"; }
    for f in qdq qoperator fake_quant_model deploy_model; do
        [ -f "${P}_$f.onnx" ] || fail "$m: no ${f} file"
    done
    for f in qdq qoperator; do
        [ -f "${P}_$f.onnx" ] || continue
        $PY -c "
import sys, onnx
m = onnx.load(sys.argv[1]); onnx.checker.check_model(m)  # subgraphs too: an opset-11 form in a body fails
ops = {n.op_type for n in m.graph.node}
v = [o.version for o in m.opset_import if o.domain in ('', 'ai.onnx')][0]
assert v == 13 and 'Upsample' not in ops and 'Resize' in ops, (v, ops)" "${P}_$f.onnx" || fail "$m: $f is not a valid opset-13 model"
        mkdir -p "$T/$m/ort_$f" "$T/$m/calq_$f"
        node "$ORT" "${P}_$f.onnx" "$T/$m/ort_$f" "x=$T/x.npy" || { fail "$m: onnxruntime runs $f"; continue; }
        "$CALQ" run "${P}_$f.onnx" --input "x=$T/x.npy" --output-dir "$T/$m/calq_$f" >/dev/null 2>&1 || fail "$m: calq runs $f"
        cos "$T/$m/calq_$f/y.npy" "$T/$m/ort_$f/y.npy" 0.999 "$m $f calq vs onnxruntime" || fail "$m: $f calq vs onnxruntime"
    done
    cos "$T/$m/ort_qdq/y.npy" "$T/$m/float/y.npy" 0.99 "$m fake-quant (qdq in onnxruntime) vs float" || fail "$m: qdq vs float"
    for f in fake_quant_model deploy_model; do
        "$CALQ" run "${P}_$f.onnx" --input "x=$T/x.npy" --output-dir "$T/$m/calq_$f" >/dev/null 2>&1 || fail "$m: calq runs $f"
        cos "$T/$m/calq_$f/y.npy" "$T/$m/float/y.npy" 0.99 "$m ascend $f vs float" || fail "$m: ascend $f vs float"
    done
done

# A model that cannot be raised (Resize tf_half_pixel_for_nn rounding up): the Ascend models
# keep opset 11, the default formats skip QDQ / QOperator with the reason...
P=$T/bad/out
mkdir -p "$T/bad"
# an earlier run's QDQ / QOperator files under the prefix go with the skip: they would not match
# the new record (a reviewer's find, 2026-12-06)
echo stale >"${P}_qdq.onnx"
echo stale >"${P}_qoperator.onnx"
if "$CALQ" calibration --model "$T/seg_bad.onnx" --npy "$T/calib" --batch_num 2 --save_path "$P" >"$T/bad/cal.log" 2>&1; then
    grep -q "skipped the qdq model" "$T/bad/cal.log" && grep -q "which opset 13 (needed for per-channel weights) cannot express" "$T/bad/cal.log" ||
        { fail "bad: no skip message"; cat "$T/bad/cal.log"; }
    [ -f "${P}_fake_quant_model.onnx" ] && [ -f "${P}_deploy_model.onnx" ] || fail "bad: the ascend models are missing"
    [ ! -e "${P}_qdq.onnx" ] && [ ! -e "${P}_qoperator.onnx" ] || fail "bad: a qdq / qoperator file was written or left"
else
    fail "bad: default calibration + save failed"; tail -5 "$T/bad/cal.log"
fi
# ... an explicit --format fails as a whole and writes nothing.
rm -f "${P}_fake_quant_model.onnx" "${P}_deploy_model.onnx"
if "$CALQ" save --model "$T/seg_bad.onnx" --record "${P}_record.txt" --save_path "$P" --format ascend,qdq >"$T/bad/save.log" 2>&1; then
    fail "bad: --format ascend,qdq succeeded"
else
    grep -q "which opset 13 (needed for per-channel weights) cannot express" "$T/bad/save.log" || { fail "bad: no reason given"; cat "$T/bad/save.log"; }
    ls "$T/bad" | grep -q 'onnx$' && fail "bad: --format ascend,qdq wrote files: $(ls "$T/bad")"
fi
# calq save with the default formats removes the skipped formats' earlier files the same way
echo stale >"${P}_qdq.onnx"
if "$CALQ" save --model "$T/seg_bad.onnx" --record "${P}_record.txt" --save_path "$P" >"$T/bad/save2.log" 2>&1; then
    [ ! -e "${P}_qdq.onnx" ] && grep -q "calq: removed .*_qdq.onnx" "$T/bad/save2.log" ||
        { fail "bad: save left the earlier qdq file"; cat "$T/bad/save2.log"; }
else
    fail "bad: default save failed"; tail -3 "$T/bad/save2.log"
fi
echo "save_upgrade: $fails failure(s)"
[ $fails -eq 0 ]
