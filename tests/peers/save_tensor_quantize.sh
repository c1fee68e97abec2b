#!/bin/sh
# tensor_quantize (issue 12, item 3; amct-reference.md §7.2, §9.3): inputs of float ops quantized
# on their own.
#   ONNX: a torchvision ResNet-18 (64x64) with every input of its MaxPool, Adds and
#   GlobalAveragePool in the config's tensor_quantize, calibrated and saved in every format:
#   (a) the record has one "<layer>:<input>" entry per listed input (scale_d / offset_d only);
#   (b) onnx.checker passes; the deploy file has AscendQuant -> AscendAntiQuant before each listed
#       input; onnxruntime-node runs the fake-quant, QDQ and QOperator files and calq all five,
#       with the same outputs (cosine >= 0.9999), fake-quant vs float >= 0.99;
#   (c) deploy vs fake-quant within one step (ascend_compare.py), QDQ int8 tensors of calq within
#       one step of onnxruntime's.
#   Caffe: MTCNN det1 with its MAX Pooling's bottom in tensor_quantize: the deploy prototxt has
#   the Quant -> AntiQuant pair, both models load back and run in calq, cosine vs float >= 0.99.
# Usage: save_tensor_quantize.sh CALQ SHARED_DIR
set -u
CALQ=$1
SHARED=$2
HERE=$(cd "$(dirname "$0")" && pwd)
PY=/usr/bin/python3
CMP="$PY $HERE/save_compare.py"
export NODE_PATH=${CALQ_PEERS_DIR:-$HOME/.cache/calq-peers}/node_modules
$PY -c 'import torchvision' 2>/dev/null || { echo "SKIP: no python3-torchvision"; exit 77; }
[ -d "$NODE_PATH/onnxruntime-node" ] || { echo "SKIP: no onnxruntime-node in $NODE_PATH"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}"/calq_tq.XXXXXX)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ORT_OPT=$T/ort_opt.js
sed -n '/^cat >"\$ORT_OPT" <<JSEOF$/,/^JSEOF$/p' "$HERE/save_onnx.sh" | sed '1d;$d' | sed "s|\$HERE|$HERE|g" >"$ORT_OPT"
CALQ_SHARED=$SHARED $PY "$HERE/torchvision_models.py" "$T" 64 resnet18 >"$T/torch.log" 2>&1 ||
    { cat "$T/torch.log"; echo "FAIL: torchvision export"; exit 1; }
M=$T/resnet18.onnx
P=$T/o/m
"$CALQ" create-config --model "$M" --config_file "$T/cfg.json" >/dev/null 2>&1 &&
    $PY "$HERE/torchvision_models.py" tq "$T/cfg.json" "$M" "$T/cfg_tq.json" MaxPool Add GlobalAveragePool ||
    fail "config"
"$CALQ" calibration --model "$M" --npy "$T/data" --batch_num 8 --config "$T/cfg_tq.json" --save_path "$P" \
    >"$T/calib.log" 2>&1 || { fail "calibration or save"; tail -5 "$T/calib.log"; }
n=$(grep -c 'key: ".*:[0-9]*"' "${P}_record.txt")
[ "$n" = 18 ] || fail "$n '<layer>:<input>' keys in the record, expected 18"
for f in fake_quant_model qdq qoperator; do $CMP check "${P}_$f.onnx" || fail "$f fails onnx.checker"; done
$PY "$HERE/ascend_compare.py" check-deploy "${P}_deploy_model.onnx" || fail "deploy fails onnx.checker"
$PY - "${P}_deploy_model.onnx" <<'PYEOF' || fail "deploy: the AntiQuant pairs"
import sys, onnx
m = onnx.load(sys.argv[1])
prod = {o: n for n in m.graph.node for o in n.output}
n = sum(1 for x in m.graph.node if x.op_type in ("MaxPool", "Add", "GlobalAveragePool") for i in x.input
        if i in prod and prod[i].op_type == "AscendAntiQuant" and prod[prod[i].input[0]].op_type == "AscendQuant")
print("deploy: %d inputs of MaxPool / Add / GlobalAveragePool read AscendQuant -> AscendAntiQuant" % n)
assert n == 18
PYEOF
d=$T/run
in=$T/data/3.npy
for f in float fake_quant_model deploy_model qdq qoperator; do
    m=${P}_$f.onnx
    [ $f = float ] && m=$M
    mkdir -p "$d/$f/ort" "$d/$f/calq"
    [ $f != deploy_model ] && { node "$HERE/ort_run.js" "$m" "$d/$f/ort" "x=$in" || fail "onnxruntime runs $f"; }
    dump=
    [ $f = fake_quant_model ] || [ $f = deploy_model ] && dump="--dump-all --no-fusion"
    # shellcheck disable=SC2086
    "$CALQ" run "$m" --input "x=$in" --output-dir "$d/$f/calq" $dump >"$T/run.log" 2>&1 ||
        { fail "calq runs $f"; tail -3 "$T/run.log"; }
    # the fake-quant file as written (--no-fusion) rounds float sums; onnxruntime fuses and sums
    # in another order, and a value on a rounding tie then lands one step away and propagates
    lim=0.9999
    [ $f = fake_quant_model ] && lim=0.999
    [ $f != deploy_model ] && { $CMP cosine "$d/$f/ort" "$d/$f/calq" "$f calq vs onnxruntime" $lim ||
        fail "$f calq vs onnxruntime"; }
done
for f in fake_quant_model qdq qoperator; do
    $CMP cosine "$d/float/ort" "$d/$f/ort" "$f vs float" 0.99 || fail "$f vs float"
done
$PY "$HERE/ascend_compare.py" layers "${P}_deploy_model.onnx" "$d/deploy_model/calq" "$d/fake_quant_model/calq" \
    "resnet18" || fail "deploy vs fake-quant beyond one step"
mkdir -p "$d/ort_qdq" "$d/calq_qdq"
node "$ORT_OPT" save "${P}_qdq.onnx" "$d/ort_opt.onnx" &&
    $CMP ortprobe "${P}_qdq.onnx" "$d/ort_opt.onnx" "$d/probe.onnx" "$d/probe.json" &&
    node "$ORT_OPT" run "$d/probe.onnx" "$d/ort_qdq" "x=$in" &&
    "$CALQ" run "${P}_qdq.onnx" --input "x=$in" --output-dir "$d/calq_qdq" --dump "$($CMP qnames "${P}_qdq.onnx")" \
        >/dev/null 2>&1 || fail "running the QDQ file"
printf 'qdq (fused as onnxruntime fuses it): '
$CMP ortsteps "$d/probe.json" "$d/ort_qdq" "$d/calq_qdq" 1 || fail "QDQ int8 tensors beyond one step"

# ---- Caffe: MTCNN det1, its MAX Pooling's bottom in tensor_quantize -----------------------
N=$SHARED/models/mtcnn/det1
C=$T/caffe
mkdir -p "$C/calib" "$C/in" "$C/float" "$C/fake" "$C/deploy"
cp "$SHARED/data/faces/mtcnn_test1.jpg" "$SHARED/data/faces/ultraface_1.jpg" "$C/calib/"
IMG="--resize 160x120 --mean 127.5 --std 128 --input_shape data:1,3,120,160"
"$CALQ" create-config --model "$N.prototxt" --weights "$N.caffemodel" --config_file "$C/cfg.json" >/dev/null 2>&1
$PY - "$C/cfg.json" <<'PYEOF'
import json, sys
c = json.load(open(sys.argv[1]))
c["tensor_quantize"] = [{"layer_name": "pool1", "input_index": 0}]
json.dump(c, open(sys.argv[1], "w"), indent=1)
PYEOF
# shellcheck disable=SC2086
"$CALQ" calibration --model "$N.prototxt" --weights "$N.caffemodel" --images "$C/calib" $IMG --batch_num 2 \
    --config "$C/cfg.json" --save_path "$C/d1" >"$T/caffe.log" 2>&1 || { fail "caffe: calibration"; tail -3 "$T/caffe.log"; }
grep -q 'key: "pool1:0"' "$C/d1_record.txt" || fail "caffe: no pool1:0 in the record"
grep -A3 'name: "pool1_antiquant_layer"' "$C/d1_deploy_model.prototxt" | grep -q 'type: "AntiQuant"' ||
    fail "caffe: no AntiQuant before pool1"
# shellcheck disable=SC2086
"$CALQ" run "$N.prototxt" --weights "$N.caffemodel" --image "data=$SHARED/data/faces/ultraface_5.jpg" $IMG --dump data \
    --output-dir "$C/in" >/dev/null 2>&1 &&
    "$CALQ" run "$N.prototxt" --weights "$N.caffemodel" --input "data=$C/in/data.npy" --input_shape data:1,3,120,160 \
        --output-dir "$C/float" >/dev/null 2>&1 || fail "caffe: float run"
for k in fake deploy; do
    kk=$k
    [ $k = fake ] && kk=fake_quant
    "$CALQ" run "$C/d1_${kk}_model.prototxt" --weights "$C/d1_${kk}_weights.caffemodel" --input "data=$C/in/data.npy" \
        --input_shape data:1,3,120,160 --output-dir "$C/$k" >"$T/run.log" 2>&1 || { fail "caffe: calq runs $k"; tail -3 "$T/run.log"; }
    $CMP cosine "$C/float" "$C/$k" "caffe det1 $k vs float" 0.99 || fail "caffe: $k vs float"
done

[ $fails -eq 0 ] && echo "save_tensor_quantize: all passed" || echo "save_tensor_quantize: $fails failure(s)"
[ $fails -eq 0 ]
