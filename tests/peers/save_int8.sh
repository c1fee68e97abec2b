#!/bin/sh
# The int8 QDQ / QOperator files (issue 12, items 5 and 6): calibrated with --qdq-scheme int8, the
# tensors between layers carry factors, so onnxruntime runs the networks on 8-bit tensors.
#   tiny_fpn (tests/peers/torchvision_models.py: Conv + LeakyRelu / ReLU6 / Relu, MaxPool, nearest
#   Resize, Concat, Sigmoid * Mul, Add, GlobalAveragePool, Gemm) and a torchvision ResNet-18, 64x64:
#   (a) onnx.checker passes on both files;
#   (b) onnxruntime's optimized graph of each file has no float op left of the kinds the plan
#       quantizes (every Conv but the head that is a graph output a QLinearConv, Add / Mul / Concat /
#       Sigmoid / LeakyRelu / GlobalAveragePool their QLinear* forms, Gemm a QGemm), and the QOperator
#       file as written uses the QLinear* operators (com.microsoft ones included);
#   (c) onnxruntime's outputs of both files vs the float model: cosine >= 0.999;
#   (d) calq runs both files (QLinearAdd, QLinearMul, QLinearConcat, QLinearSigmoid, QLinearLeakyRelu,
#       QLinearGlobalAveragePool, QGemm) with onnxruntime's outputs (cosine >= 0.9999).
# Usage: save_int8.sh CALQ SHARED_DIR
set -u
CALQ=$1
SHARED=$2
HERE=$(cd "$(dirname "$0")" && pwd)
PY=/usr/bin/python3
CMP="$PY $HERE/save_compare.py"
export NODE_PATH=${CALQ_PEERS_DIR:-$HOME/.cache/calq-peers}/node_modules
$PY -c 'import torchvision' 2>/dev/null || { echo "SKIP: no python3-torchvision"; exit 77; }
[ -d "$NODE_PATH/onnxruntime-node" ] || { echo "SKIP: no onnxruntime-node in $NODE_PATH"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}"/calq_int8.XXXXXX)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ORT_OPT=$T/ort_opt.js
sed -n '/^cat >"\$ORT_OPT" <<JSEOF$/,/^JSEOF$/p' "$HERE/save_onnx.sh" | sed '1d;$d' | sed "s|\$HERE|$HERE|g" >"$ORT_OPT"
CALQ_SHARED=$SHARED $PY "$HERE/torchvision_models.py" "$T" 64 tiny_fpn resnet18 >"$T/torch.log" 2>&1 ||
    { cat "$T/torch.log"; echo "FAIL: torch export"; exit 1; }
in=$T/data/3.npy
# counts.py FILE KIND: checks the node types of an optimized (or written) graph
cat >"$T/counts.py" <<'PYEOF'
import collections, sys, onnx
path, model, where = sys.argv[1], sys.argv[2], sys.argv[3]
m = onnx.load(path)
c = collections.Counter(n.op_type for n in m.graph.node)
print("%s %s: %s" % (model, where, ", ".join("%s %d" % kv for kv in sorted(c.items()))))
want = {"tiny_fpn": {"QLinearConv": 5, "QLinearAdd": 1, "QLinearMul": 1, "QLinearConcat": 1, "QLinearSigmoid": 1,
                     "QLinearLeakyRelu": 1, "QLinearGlobalAveragePool": 1},
        "resnet18": {"QLinearConv": 20, "QLinearAdd": 8, "QLinearGlobalAveragePool": 1}}[model]
float_left = {"tiny_fpn": {"Conv": 1}, "resnet18": {"Conv": 0}}[model]
if where == "written" and model == "tiny_fpn":
    want["QLinearConv"] = 4  # the Conv + ReLU6 is written in QDQ form (the Clip is kept); onnxruntime fuses it
bad = ["%s: %d, expected %d" % (k, c[k], v) for k, v in want.items() if c[k] != v]
if where == "optimized":  # the float kinds onnxruntime would otherwise run around the integer layers
    bad += ["%s left in float: %d" % (k, c[k]) for k in ("Add", "Mul", "Concat", "Sigmoid", "LeakyRelu",
                                                         "GlobalAveragePool", "Gemm") if c[k]]
    bad += ["Conv left in float: %d, expected %d" % (c["Conv"], v) for k, v in float_left.items() if c[k] != v]
    if c["QGemm"] != 1: bad.append("QGemm: %d, expected 1" % c["QGemm"])
for b in bad: print("  " + b)
sys.exit(1 if bad else 0)
PYEOF
for model in tiny_fpn resnet18; do
    M=$T/$model.onnx
    P=$T/$model/m
    "$CALQ" calibration --model "$M" --npy "$T/data" --batch_num 8 --save_path "$P" --format qdq,qoperator \
        --qdq-scheme int8 >"$T/calib.log" 2>&1 || { fail "$model: calibration or save"; tail -5 "$T/calib.log"; continue; }
    grep -q 'tensors between layers calibrated' "$T/calib.log" || fail "$model: no tensors between layers calibrated"
    d=$T/$model/run
    mkdir -p "$d/float"
    node "$HERE/ort_run.js" "$M" "$d/float" "x=$in" || fail "$model: onnxruntime runs the float model"
    for f in qdq qoperator; do
        F=${P}_$f.onnx
        $CMP check "$F" || fail "$model: $f fails onnx.checker"
        node "$ORT_OPT" save "$F" "$d/opt_$f.onnx" && $PY "$T/counts.py" "$d/opt_$f.onnx" $model optimized ||
            fail "$model: onnxruntime does not run $f on 8-bit tensors"
        [ $f = qoperator ] && { $PY "$T/counts.py" "$F" $model written || fail "$model: the QOperator file's ops"; }
        mkdir -p "$d/$f/ort" "$d/$f/calq"
        node "$HERE/ort_run.js" "$F" "$d/$f/ort" "x=$in" || fail "$model: onnxruntime runs $f"
        "$CALQ" run "$F" --input "x=$in" --output-dir "$d/$f/calq" >"$T/run.log" 2>&1 ||
            { fail "$model: calq runs $f"; tail -3 "$T/run.log"; }
        $CMP cosine "$d/float" "$d/$f/ort" "$model $f (onnxruntime) vs float" 0.999 || fail "$model: $f vs float"
        $CMP cosine "$d/$f/ort" "$d/$f/calq" "$model $f calq vs onnxruntime" 0.9999 ||
            fail "$model: $f calq vs onnxruntime"
    done
done
[ $fails -eq 0 ] && echo "save_int8: all passed" || echo "save_int8: $fails failure(s)"
[ $fails -eq 0 ]
