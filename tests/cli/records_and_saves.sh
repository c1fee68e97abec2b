#!/bin/sh
# Records and saves that a hostile-input probe (2026-12-06) found wrong, end to end through the CLI:
#   stale:  a calibration whose save fails keeps its new record; the previous run's models under
#           the same --save_path are removed, not left beside a record they do not match
#   colon:  input 1 of MatMul "mm" (two variable inputs) is keyed "mm:1"; an Identity named "mm:1"
#           no longer captures the key (calibration and save succeed), and a quantizable layer
#           named "mm:1" is refused before anything is computed
#   deq:    a record whose scale_d * scale_w overflows float32 is refused by save (was: inf scales)
#   const_a: MatMul(constant A, x) is no quantizable layer (was: listed, then an INTERNAL error)
# usage: records_and_saves.sh CALQ
set -u
CALQ=$1
T=$(mktemp -d "${TMPDIR:-/tmp}"/calq_recsave.XXXXXX)
trap 'rm -rf "$T"' EXIT
/usr/bin/python3 - "$T" <<'PY' || { echo "SKIP: no onnx/numpy"; exit 77; }
import sys
import numpy as np
import onnx
from onnx import TensorProto as TP, helper as h, numpy_helper as nh
T = sys.argv[1]
rng = np.random.default_rng(3)
def conv_model(path, bias):
    w = nh.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32) * 0.2, "w")
    b = nh.from_array(np.full(4, bias, np.float32), "b")
    g = h.make_graph([h.make_node("Conv", ["x", "w", "b"], ["y"], name="c1", pads=[1, 1, 1, 1])], "g",
                     [h.make_tensor_value_info("x", TP.FLOAT, [1, 3, 8, 8])],
                     [h.make_tensor_value_info("y", TP.FLOAT, [1, 4, 8, 8])], [w, b])
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 13)]), path)
conv_model(T + "/good.onnx", 0.1)
conv_model(T + "/bad.onnx", 3e38)  # every bias_q overflows int32: each format's save fails
np.save(T + "/x.npy", rng.standard_normal((1, 3, 8, 8)).astype(np.float32))
def mm_model(path, second):
    nodes = [h.make_node("MatMul", ["a", "b"], ["m"], name="mm")]
    if second == "Identity":
        nodes.append(h.make_node("Identity", ["m"], ["y"], name="mm:1"))
    else:
        nodes.append(h.make_node("MatMul", ["m", "b"], ["y"], name="mm:1"))
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("a", TP.FLOAT, [4, 4]),
                                  h.make_tensor_value_info("b", TP.FLOAT, [4, 4])],
                     [h.make_tensor_value_info("y", TP.FLOAT, [4, 4])])
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 13)]), path)
mm_model(T + "/colon.onnx", "Identity")
mm_model(T + "/clash.onnx", "MatMul")
np.save(T + "/a.npy", rng.standard_normal((4, 4)).astype(np.float32))
np.save(T + "/b.npy", rng.standard_normal((4, 4)).astype(np.float32))
A = nh.from_array(rng.standard_normal((2, 4)).astype(np.float32), "A")
g = h.make_graph([h.make_node("MatMul", ["A", "b"], ["y"], name="m")], "g",
                 [h.make_tensor_value_info("b", TP.FLOAT, [4, 4])], [h.make_tensor_value_info("y", TP.FLOAT, [2, 4])], [A])
onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 13)]), T + "/const_a.onnx")
PY
bad=0
fail() { echo "FAIL: $*"; bad=1; }
run() { timeout 60 "$CALQ" "$@" >"$T/out" 2>"$T/err"; }

# stale: the first run writes the record, the config and four models; the second's save fails
mkdir "$T/s"
run calibration --model "$T/good.onnx" --npy "$T/x.npy" --save_path "$T/s/q" || fail "stale: first calibration"
[ -e "$T/s/q_qdq.onnx" ] && [ -e "$T/s/q_deploy_model.onnx" ] || fail "stale: first run wrote no models"
cp "$T/s/q_record.txt" "$T/first_record.txt"
run calibration --model "$T/bad.onnx" --npy "$T/x.npy" --save_path "$T/s/q"
rc=$?
[ $rc -eq 1 ] || fail "stale: second calibration exit $rc (want 1)"
grep -q "calq: removed .*q_qdq.onnx" "$T/err" || fail "stale: no 'removed' line: $(tail -2 "$T/err")"
cmp -s "$T/s/q_record.txt" "$T/first_record.txt" && fail "stale: the record was not replaced"
for f in q_qdq.onnx q_qoperator.onnx q_fake_quant_model.onnx q_deploy_model.onnx; do
    [ -e "$T/s/$f" ] && fail "stale: $f of the first run is still there"
done
[ "$bad" -eq 0 ] && echo "ok: stale models removed with the new record kept"

# colon: the Identity "mm:1" does not capture MatMul mm's input key
run calibration --model "$T/colon.onnx" --npy "$T/a.npy;$T/b.npy" --save_path "$T/c/q" ||
    fail "colon: calibration: $(tail -2 "$T/err")"
grep -q 'key: "mm:1"' "$T/c/q_record.txt" 2>/dev/null || fail "colon: no mm:1 entry in the record"
run save --model "$T/colon.onnx" --record "$T/c/q_record.txt" --save_path "$T/c/s" || fail "colon: save: $(tail -2 "$T/err")"
run calibration --model "$T/clash.onnx" --npy "$T/a.npy;$T/b.npy" --save_path "$T/k/q"
rc=$?
[ $rc -eq 1 ] && grep -q 'which is also the name of the MatMul layer "mm:1"' "$T/err" ||
    fail "colon: clash exit $rc: $(tail -2 "$T/err")"
ls "$T/k" 2>/dev/null | grep -q . && fail "colon: the refused calibration wrote $(ls "$T/k")"
[ "$bad" -eq 0 ] && echo "ok: record keys with colons"

# deq: each factor in range, the product not
printf 'record {\n  key: "c1"\n  value {\n    scale_d: 1e20\n    offset_d: 0\n    scale_w: 1e20\n    offset_w: 0\n  }\n}\n' >"$T/deq.txt"
run save --model "$T/good.onnx" --record "$T/deq.txt" --save_path "$T/d/q"
rc=$?
[ $rc -eq 1 ] && grep -q "deq_scale = scale_d \* scale_w\[0\] = 1.00000002e+20 \* 1.00000002e+20 is inf" "$T/err" ||
    fail "deq: exit $rc: $(tail -2 "$T/err")"
ls "$T/d" 2>/dev/null | grep -q . && fail "deq: the refused save wrote $(ls "$T/d")"
[ "$bad" -eq 0 ] && echo "ok: overflowing deq_scale refused"

# const_a: no quantizable layer
run inspect "$T/const_a.onnx"
grep -q "quantizable layers: 0" "$T/out" || fail "const_a: inspect: $(grep quantizable "$T/out")"
run calibration --model "$T/const_a.onnx" --npy "$T/b.npy" --save_path "$T/a/q"
rc=$?
[ $rc -eq 1 ] && grep -q "has no layer calq quantizes" "$T/err" || fail "const_a: exit $rc: $(tail -2 "$T/err")"
[ "$bad" -eq 0 ] && echo "ok: MatMul with a constant A is no layer"
exit $bad
