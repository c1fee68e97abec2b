#!/bin/sh
# --reduce-range (CALQ_SAVE_REDUCE_RANGE): the QDQ / QOperator files with 7-bit weights, for
# onnxruntime on x86 CPUs without VNNI, whose u8s8 kernels add pairs of products in 16 bits with
# saturation (save_compare.py ort_int8_exact). On UltraFace slim-320 (2 photos, AMCT's scheme),
# from one record:
#   (a) the record is the same bytes after the reduce-range save, and the plain save of it still
#       writes weights beyond +-64 (so (b) can fail);
#   (b) every int8 weight of both reduce-range files is in [-64, 63], and no pair of u8 x s8
#       products can reach 2^15;
#   (c) onnxruntime's int8 tensors equal calq's within one step: on the QOperator file counted on
#       every CPU (CALQ_ORT_INT8_EXACT=1; calq's QLinearConv is its exact integer kernel), the
#       point of the option: on a CPU without VNNI the 8-bit files drift by up to 13 steps
#       (save_onnx.sh does not count them there). On the QDQ file as save_onnx.sh counts it:
#       without VNNI calq runs DQ -> Conv -> Q in float (float32 sums of large integer products
#       round), which alone differs by up to 8 steps on one photo (measured with oneDNN held to
#       AVX2 against onnxruntime's exact VNNI kernels);
#   (d) the reduce-range QDQ file's outputs vs the float model's on a photo: cosine >= 0.999, and
#       vs the 8-bit file's: >= 0.999;
#   (e) --reduce-range with only AMCT's formats is a usage error (exit 2).
# Usage: save_reduce_range.sh CALQ SHARED_DIR
set -u
CALQ=$1
SHARED=$2
HERE=$(cd "$(dirname "$0")" && pwd)
PY=/usr/bin/python3
CMP="$PY $HERE/save_compare.py"
export NODE_PATH=${CALQ_PEERS_DIR:-$HOME/.cache/calq-peers}/node_modules
. "$HERE/../support/need.sh"
need_python numpy onnx
need_node_module onnxruntime-node
need_files "$SHARED/models/ultraface/version-slim-320.onnx" "$SHARED/data/faces/ultraface_1.jpg"
T=$(mktemp -d "${TMPDIR:-/tmp}"/calq_rr.XXXXXX)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ORT_OPT=$T/ort_opt.js
sed -n '/^cat >"\$ORT_OPT" <<JSEOF$/,/^JSEOF$/p' "$HERE/save_onnx.sh" | sed '1d;$d' | sed "s|\$HERE|$HERE|g" >"$ORT_OPT"
FACES=$SHARED/data/faces
M=$SHARED/models/ultraface/version-slim-320.onnx
IMG="--resize 320x240 --mean 127 --std 128"
mkdir -p "$T/calib"
cp "$FACES/mtcnn_test1.jpg" "$FACES/ultraface_1.jpg" "$T/calib/"
P=$T/uf/plain
R=$T/uf/rr
# shellcheck disable=SC2086
"$CALQ" calibration --model "$M" --images "$T/calib" $IMG --input_shape input:1,3,240,320 --batch_num 2 \
    --save_path "$P" --format both >"$T/calib.log" 2>&1 || { tail "$T/calib.log"; echo "FAIL: calibration"; exit 1; }
cp "${P}_record.txt" "$T/record_before.txt"
"$CALQ" save --model "$M" --record "${P}_record.txt" --config "${P}_config.json" --save_path "$R" --format both \
    --reduce-range >"$T/save.log" 2>&1 || { cat "$T/save.log"; echo "FAIL: save --reduce-range"; exit 1; }
if grep -q warning "$T/save.log"; then fail "save --reduce-range warned"; cat "$T/save.log"; fi
cmp -s "$T/record_before.txt" "${P}_record.txt" || fail "(a) the record changed"

# (a), (b) the weights: the int8 initializers a QLinearConv / QLinearMatMul / QGemm or a
# DequantizeLinear of a constant reads
cat >"$T/wrange.py" <<'PYEOF'
import sys, onnx
from onnx import numpy_helper
path, want = sys.argv[1], sys.argv[2]
g = onnx.load(path).graph
inits = {t.name: t for t in g.initializer}
lo = hi = 0
n = 0
for node in g.node:
    ins = {"QLinearConv": [3], "QLinearMatMul": [3], "QGemm": [3], "DequantizeLinear": [0]}.get(node.op_type, [])
    for k in ins:
        t = inits.get(node.input[k]) if k < len(node.input) else None
        if t is None or t.data_type != onnx.TensorProto.INT8:
            continue
        a = numpy_helper.to_array(t).astype(int)
        if a.size < 2:
            continue
        lo, hi, n = min(lo, a.min()), max(hi, a.max()), n + 1
print("%s: %d int8 weights, range [%d, %d]" % (path.rsplit("/", 1)[-1], n, lo, hi))
ok = n > 0 and (lo >= -64 and hi <= 63 if want == "7" else lo < -64 or hi > 64)
sys.exit(0 if ok else 1)
PYEOF
for f in qdq qoperator; do
    $CMP check "${R}_$f.onnx" || fail "$f: the reduce-range file fails onnx.checker"
    $PY "$T/wrange.py" "${R}_$f.onnx" 7 || fail "(b) $f: weights outside [-64, 63]"
    $PY "$T/wrange.py" "${P}_$f.onnx" 8 || fail "(a) $f: the 8-bit file has no weight beyond +-64"
done

# (c) int8 tensors, calq vs onnxruntime; the QOperator comparison counted on any CPU
d=$T/run
mkdir -p "$d/in"
# shellcheck disable=SC2086
"$CALQ" run "$M" --image "input=$FACES/ultraface_5.jpg" $IMG --dump input --output-dir "$d/in" >/dev/null 2>&1 ||
    fail "calq run (float)"
$CMP probe "${R}_qoperator.onnx" "$T/probe_qoperator.onnx" || fail "probe qoperator"
mkdir -p "$d/ort_qoperator" "$d/calq_qoperator"
node "$HERE/ort_run.js" "$T/probe_qoperator.onnx" "$d/ort_qoperator" "input=$d/in/input.npy" ||
    fail "onnxruntime cannot run the reduce-range qoperator file"
"$CALQ" run "$T/probe_qoperator.onnx" --input "input=$d/in/input.npy" --output-dir "$d/calq_qoperator" \
    >"$T/run.log" 2>&1 || { fail "calq cannot run the qoperator file"; tail -3 "$T/run.log"; }
XX
node "$ORT_OPT" save "${R}_qdq.onnx" "$T/ort_opt_qdq.onnx" &&
    $CMP ortprobe "${R}_qdq.onnx" "$T/ort_opt_qdq.onnx" "$T/probe_qdq.onnx" "$T/probe_qdq.json" ||
    fail "probing onnxruntime's optimized qdq graph"
mkdir -p "$d/ort_qdq" "$d/calq_qdq"
node "$ORT_OPT" run "$T/probe_qdq.onnx" "$d/ort_qdq" "input=$d/in/input.npy" ||
    fail "onnxruntime cannot run the reduce-range qdq file"
"$CALQ" run "${R}_qdq.onnx" --input "input=$d/in/input.npy" --output-dir "$d/calq_qdq" \
    --dump "$($CMP qnames "${R}_qdq.onnx")" >"$T/run.log" 2>&1 || { fail "calq cannot run the qdq file"; tail -3 "$T/run.log"; }
printf 'reduce-range qdq (fused as onnxruntime fuses it), calq vs onnxruntime: '
$CMP ortsteps "$T/probe_qdq.json" "$d/ort_qdq" "$d/calq_qdq" 1 || fail "(c) qdq: calq differs from onnxruntime"

# (d) accuracy on the outputs
for v in float plain rr; do
    mkdir -p "$d/out_$v"
    case $v in float) F=$M ;; plain) F=${P}_qdq.onnx ;; rr) F=${R}_qdq.onnx ;; esac
    "$CALQ" run "$F" --input "input=$d/in/input.npy" --output-dir "$d/out_$v" >/dev/null 2>&1 || fail "calq run $v"
    rm -f "$d/out_$v/input.npy"
done
$CMP cosine "$d/out_float" "$d/out_rr" "reduce-range qdq vs float" 0.999 || fail "(d) reduce-range vs float"
$CMP cosine "$d/out_plain" "$d/out_rr" "reduce-range qdq vs 8-bit qdq" 0.999 || fail "(d) reduce-range vs 8-bit"

# (e) usage
"$CALQ" save --model "$M" --record "${P}_record.txt" --save_path "$T/x/x" --format ascend --reduce-range \
    >"$T/e.log" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "applies to the qdq and qoperator files" "$T/e.log" ||
    { fail "(e) --reduce-range --format ascend: exit $rc"; cat "$T/e.log"; }
[ -e "$T/x" ] && fail "(e) the refused save created its folder"
[ $fails -eq 0 ] && echo "save_reduce_range: all passed" || echo "save_reduce_range: $fails failure(s)"
[ $fails -eq 0 ]
