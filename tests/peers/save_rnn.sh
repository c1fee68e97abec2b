#!/bin/sh
# Recurrent layers quantized as AMCT does (issue 14, item 12; amct-reference.md §8.1
# CHANNEL_WISE_ONNX_TYPES): a model with a bidirectional LSTM (bias, initial states), a MatMul and
# a GRU (linear_before_reset) built with onnx.helper is calibrated by calq and saved in every
# format. Checked:
#   - the record holds W's then R's scale_w, one per direction and gate row (and matches ARQ on
#     the weights recomputed in numpy: max |w| / 127 per row);
#   - QDQ and QOperator pass onnx.checker, run in onnxruntime-node and in calq, and agree;
#   - AMCT's fake-quant and deploy models run in calq; every model is within cosine 0.995 of float
#     (0.9990 measured on the last GRU output, 0.9999 on the LSTM's);
#   - a record with the wrong number of scale_w for the LSTM is refused naming both counts.
# usage: save_rnn.sh CALQ ORT_RUN_JS
set -u
CALQ=$1
ORT=$2
PY=/usr/bin/python3
export NODE_PATH=${CALQ_PEERS_DIR:-$HOME/.cache/calq-peers}/node_modules
[ -d "$NODE_PATH/onnxruntime-node" ] || { echo "SKIP: onnxruntime-node not in $NODE_PATH"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}"/calq_rnn.XXXXXX)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

$PY - "$T" <<'PY'
import sys, os, numpy as np, onnx
from onnx import helper as h, numpy_helper as nh, TensorProto as TP
out = sys.argv[1]
rng = np.random.default_rng(3)
T, B, I, H = 20, 1, 16, 24
f = lambda name, a: nh.from_array(a.astype(np.float32), name)
inits = [f("W", rng.normal(0, 0.3, (2, 4 * H, I))), f("R", rng.normal(0, 0.2, (2, 4 * H, H))),
         f("Bb", rng.normal(0, 0.1, (2, 8 * H))), f("h0", rng.normal(0, 0.1, (2, B, H))),
         nh.from_array(np.array([T, B, 2 * H], np.int64), "shp"), f("proj", rng.normal(0, 0.2, (2 * H, H))),
         f("gW", rng.normal(0, 0.3, (1, 3 * H, H))), f("gR", rng.normal(0, 0.2, (1, 3 * H, H)))]
nodes = [h.make_node("LSTM", ["x", "W", "R", "Bb", "", "h0"], ["y", "yh", "yc"], name="lstm", hidden_size=H,
                     direction="bidirectional"),
         h.make_node("Transpose", ["y"], ["yt"], perm=[0, 2, 1, 3]),
         h.make_node("Reshape", ["yt", "shp"], ["y2"]),
         h.make_node("MatMul", ["y2", "proj"], ["p"], name="proj"),
         h.make_node("GRU", ["p", "gW", "gR"], ["gy", "gyh"], name="gru", hidden_size=H, linear_before_reset=1)]
g = h.make_graph(nodes, "rnn", [h.make_tensor_value_info("x", TP.FLOAT, [T, B, I])],
                 [h.make_tensor_value_info("gy", TP.FLOAT, [T, 1, B, H]), h.make_tensor_value_info("yh", TP.FLOAT, [2, B, H])],
                 inits)
m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
m.ir_version = 7
onnx.checker.check_model(m)
onnx.save(m, out + "/rnn.onnx")
os.makedirs(out + "/calib")
for k in range(3):
    np.save(out + "/calib/%d.npy" % k, rng.normal(0, 1, (T, B, I)).astype(np.float32))
np.save(out + "/x.npy", rng.normal(0, 1, (T, B, I)).astype(np.float32))
# ARQ's symmetric per-row scale (§6.1): the value of largest magnitude over 127 (positive) or 128
# (negative), W's rows then R's
def arq(a):
    a = a.reshape(-1, a.shape[-1])
    t = np.where(a.max(1) >= -a.min(1), a.max(1), a.min(1))
    return np.where(t > 0, t / np.float32(127), t / np.float32(-128)).astype(np.float32)
np.save(out + "/want_lstm.npy", np.concatenate([arq(nh.to_array(inits[i])) for i in (0, 1)]))
PY
[ -f "$T/rnn.onnx" ] || { echo "FAIL: building the model"; exit 1; }
P=$T/out/q
"$CALQ" calibration --model "$T/rnn.onnx" --npy "$T/calib" --batch_num 3 --save_path "$P" >"$T/cal.log" 2>&1 ||
    { fail "calibration + save"; tail -5 "$T/cal.log"; }
$PY - "$P" "$T/want_lstm.npy" <<'PY' || fail "the record's LSTM scale_w are not ARQ's per row of W then R"
import sys, re, numpy as np
text = open(sys.argv[1] + "_record.txt").read()
blk = text[text.index('key: "lstm"'):]
blk = blk[:blk.index("}")]
got = np.array([float(v) for v in re.findall(r"scale_w: ([-0-9.e+]+)", blk)], np.float32)
want = np.load(sys.argv[2]).astype(np.float32)
print("  lstm: %d scale_w (W: 2 x 96 rows, R: 2 x 96 rows), max relative difference to ARQ in numpy: %.2g"
      % (got.size, np.abs(got - want).max() / want.max() if got.size == want.size else float("nan")))
sys.exit(0 if got.size == want.size and np.allclose(got, want, rtol=1e-6) else 1)
PY
"$CALQ" run "$T/rnn.onnx" --input "x=$T/x.npy" --output-dir "$T/float" >/dev/null 2>&1 || fail "calq run float"
cos() {
    $PY -c "
import sys, numpy as np
ok = True
for o in ('gy', 'yh'):
    a = np.load(sys.argv[1] + '/' + o + '.npy').ravel().astype(float); b = np.load(sys.argv[2] + '/' + o + '.npy').ravel().astype(float)
    c = a @ b / (np.linalg.norm(a) * np.linalg.norm(b)); d = np.abs(a - b).max()
    print('  %-36s %s: cosine %.6f, max |diff| %.3g' % (sys.argv[4], o, c, d)); ok &= c >= float(sys.argv[3])
sys.exit(0 if ok else 1)" "$1" "$2" "$3" "$4"
}
for f in qdq qoperator; do
    $PY -c "import sys, onnx; onnx.checker.check_model(onnx.load(sys.argv[1]))" "${P}_$f.onnx" || fail "$f fails onnx.checker"
    mkdir -p "$T/ort_$f"
    node "$ORT" "${P}_$f.onnx" "$T/ort_$f" "x=$T/x.npy" || { fail "onnxruntime runs $f"; continue; }
    "$CALQ" run "${P}_$f.onnx" --input "x=$T/x.npy" --output-dir "$T/calq_$f" >/dev/null 2>&1 || fail "calq runs $f"
    cos "$T/calq_$f" "$T/ort_$f" 0.999999 "$f calq vs onnxruntime" || fail "$f: calq vs onnxruntime"
    cos "$T/ort_$f" "$T/float" 0.995 "$f (onnxruntime) vs float" || fail "$f vs float"
done
for f in fake_quant_model deploy_model; do
    "$CALQ" run "${P}_$f.onnx" --input "x=$T/x.npy" --output-dir "$T/calq_$f" >/dev/null 2>&1 || { fail "calq runs $f"; continue; }
    cos "$T/calq_$f" "$T/float" 0.995 "ascend $f vs float" || fail "ascend $f vs float"
done
# a record with a truncated LSTM scale_w list is refused
$PY - "$P" <<'PY'
import sys
lines = open(sys.argv[1] + "_record.txt").read().split("\n")
start = next(i for i, l in enumerate(lines) if 'key: "lstm"' in l)
drop, seen = set(), {"scale_w": 0, "offset_w": 0}
for i in range(start, len(lines)):
    if lines[i].strip() == "}" and i > start + 2:
        break
    k = lines[i].strip().split(":")[0]
    if k in seen and seen[k] < 5:  # five values of each fewer: 379 instead of 384
        seen[k] += 1
        drop.add(i)
open(sys.argv[1] + "_bad_record.txt", "w").write("\n".join(l for i, l in enumerate(lines) if i not in drop))
PY
mkdir -p "$T/bad"
if "$CALQ" save --model "$T/rnn.onnx" --record "${P}_bad_record.txt" --save_path "$T/bad/q" --format qdq >"$T/bad.log" 2>&1; then
    fail "a record with too few LSTM scale_w was accepted"
else
    grep -q "its W and R have 192 output channels each" "$T/bad.log" || { fail "no clear message"; cat "$T/bad.log"; }
fi
echo "save_rnn: $fails failure(s)"
[ $fails -eq 0 ]
