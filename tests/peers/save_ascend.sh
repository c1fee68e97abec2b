#!/bin/sh
# AMCT's ONNX models from `calq calibration` (issue 6), UltraFace slim-320 (both ONNX files):
#   (a) calibration ends with the save: the AMCT-named fake-quant and deploy files (§1.3) exist;
#   (b) the fake-quant file passes onnx.checker (full check) and onnxruntime-node runs it with
#       the same outputs as calq (cosine >= 0.99999); the deploy file passes onnx.checker with
#       its Ascend operators moved to a private domain (ascend_compare.py check-deploy);
#   (c) calq runs the deploy file (AscendQuant, int8 Conv with int32 accumulation, AscendDequant)
#       and every quantized activation (int8) equals the fake-quant model's within one
#       quantization step on every shared photo (ascend_compare.py); final outputs as cosine;
#   (d) --save_type Fakequant / Deploy write only their kind; --save_type None only the record;
#   (e) a MaxPool sharing a quantized tensor gets AMCT's Quant -> AntiQuant pair (§9.3).
# Usage: save_ascend.sh CALQ SHARED_DIR
set -u
CALQ=$1
SHARED=$2
HERE=$(cd "$(dirname "$0")" && pwd)
PY=/usr/bin/python3
CMP="$PY $HERE/save_compare.py"
export NODE_PATH=${CALQ_PEERS_DIR:-$HOME/.cache/calq-peers}/node_modules
T=$(mktemp -d "${TMPDIR:-/tmp}"/calq_ascend.XXXXXX)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
FACES=$SHARED/data/faces
. "$(dirname "$0")/../support/need.sh"
need_python numpy onnx
need_node_module onnxruntime-node
need_files "$SHARED/models/ultraface/version-slim-320.onnx" "$FACES/mtcnn_test1.jpg" "$FACES/ultraface_1.jpg"
mkdir -p "$T/calib"
cp "$FACES/mtcnn_test1.jpg" "$FACES/ultraface_1.jpg" "$T/calib/"
IMG="--resize 320x240 --mean 127 --std 128"

for model in version-slim-320 version-slim-320_simplified; do
    M=$SHARED/models/ultraface/$model.onnx
    P=$T/$model/uf
    # shellcheck disable=SC2086
    "$CALQ" calibration --model "$M" --images "$T/calib" $IMG --input_shape input:1,3,240,320 --batch_num 2 \
        --save_path "$P" --format ascend >"$T/calib.log" 2>&1 || { fail "$model: calibration"; tail "$T/calib.log"; continue; }
    grep -q "wrote .*uf_fake_quant_model.onnx, .*uf_deploy_model.onnx" "$T/calib.log" || fail "$model: save line"
    for f in fake_quant_model deploy_model; do [ -s "${P}_$f.onnx" ] || fail "$model: ${P}_$f.onnx missing"; done
    [ -e "${P}_qdq.onnx" ] && fail "$model: --format ascend wrote a qdq file"
    $CMP check "${P}_fake_quant_model.onnx" || fail "$model: fake-quant file fails onnx.checker"
    $PY "$HERE/ascend_compare.py" check-deploy "${P}_deploy_model.onnx" || fail "$model: deploy file fails onnx.checker"
    for img in "$FACES"/*.jpg; do
        b=$(basename "$img" .jpg)
        e=$T/$model/$b
        mkdir -p "$e/in" "$e/float" "$e/fake" "$e/deploy" "$e/ort_fake"
        # shellcheck disable=SC2086
        "$CALQ" run "$M" --image "input=$img" $IMG --dump input --output-dir "$e/in" >/dev/null 2>&1 || fail "$b: calq run"
        "$CALQ" run "$M" --input "input=$e/in/input.npy" --output-dir "$e/float" >/dev/null 2>&1 ||
            fail "$model $b: calq float"
        # --no-fusion: the fake-quant file exactly as written; calq's default folding of the
        # Mul(deq_scale) into the Conv changes results by an ulp, enough to move a value that
        # sits on a rounding tie of the next layer's quantization
        "$CALQ" run "${P}_fake_quant_model.onnx" --input "input=$e/in/input.npy" --output-dir "$e/fake" --dump-all \
            --no-fusion >/dev/null 2>&1 || fail "$model $b: calq cannot run the fake-quant file"
        "$CALQ" run "${P}_deploy_model.onnx" --input "input=$e/in/input.npy" --output-dir "$e/deploy" --dump-all \
            >"$T/run.log" 2>&1 || { fail "$model $b: calq cannot run the deploy file"; tail -3 "$T/run.log"; continue; }
        $PY "$HERE/ascend_compare.py" layers "${P}_deploy_model.onnx" "$e/deploy" "$e/fake" "$model $b" ||
            fail "$model $b: deploy differs from fake-quant by more than one step"
        mkdir -p "$e/out_fake" "$e/out_deploy"
        for o in scores boxes; do cp "$e/fake/$o.npy" "$e/out_fake/" && cp "$e/deploy/$o.npy" "$e/out_deploy/"; done
        $CMP cosine "$e/out_fake" "$e/out_deploy" "  $model $b deploy vs fake-quant" 0.9999 ||
            fail "$model $b: deploy outputs differ from fake-quant"
        # the simplified file's boxes are raw box regressions: 0.979 with AMCT's defaults (the first
        # depthwise conv's weights, see save_caffe.sh); held at 0.97, the remedy is checked below
        spec=0.99
        [ $model = version-slim-320_simplified ] && spec=0.99,boxes=0.97
        $CMP cosine "$e/float" "$e/out_fake" "  $model $b fake-quant vs float" $spec ||
            fail "$model $b: fake-quant vs float"
        if [ "$b" = ultraface_5 ]; then
            node "$HERE/ort_run.js" "${P}_fake_quant_model.onnx" "$e/ort_fake" "input=$e/in/input.npy" ||
                fail "$model: onnxruntime cannot run the fake-quant file"
            # Two float runtimes round differently, so a value on a rounding tie of a quantization
            # can land one step apart, and an ill-conditioned output (the simplified file's boxes)
            # amplifies that as it amplifies quantization itself: the bound is 0.99999, or 1% of
            # the output's quantization damage (1 - fake-quant vs float cosine) where that is
            # looser. Measured on the simplified boxes: 0.99998 with oneDNN's AVX2 kernels against
            # onnxruntime's AVX-512 ones (damage 0.007), 1.000000 with both on AVX-512.
            rt=$($PY -c 'import sys, numpy as np
a, b = (np.load(f).astype(np.float64).ravel() for f in sys.argv[1:3])
c = a @ b / (np.linalg.norm(a) * np.linalg.norm(b))
print("%.7f" % min(0.99999, 1 - 0.01 * (1 - c)))' "$e/float/boxes.npy" "$e/out_fake/boxes.npy")
            $CMP cosine "$e/ort_fake" "$e/out_fake" "  $model fake-quant, calq vs onnxruntime" "0.99999,boxes=$rt" ||
                fail "$model: fake-quant calq vs onnxruntime"
        fi
    done
done

# The simplified model with AMCT's remedy for a layer that costs accuracy: Conv_2 (the first
# depthwise conv) kept in float: every output >= 0.99 on every shared photo.
M=$SHARED/models/ultraface/version-slim-320_simplified.onnx
P=$T/skip/uf
# shellcheck disable=SC2086
"$CALQ" calibration --model "$M" --images "$T/calib" $IMG --input_shape input:1,3,240,320 --batch_num 2 \
    --skip_layers Conv_2 --format ascend --save_type Fakequant --save_path "$P" >"$T/skip.log" 2>&1 ||
    { fail "simplified --skip_layers Conv_2: calibration"; tail -5 "$T/skip.log"; }
grep -aq 'Conv_2\.quant' "${P}_fake_quant_model.onnx" && fail "Conv_2 was quantized"
grep -aq 'Conv_4\.quant' "${P}_fake_quant_model.onnx" || fail "Conv_4 was not quantized"
for img in "$FACES"/*.jpg; do
    b=$(basename "$img" .jpg)
    e=$T/version-slim-320_simplified/$b
    mkdir -p "$T/skip/$b"
    "$CALQ" run "${P}_fake_quant_model.onnx" --input "input=$e/in/input.npy" --output-dir "$T/skip/$b" \
        >/dev/null 2>&1 || fail "simplified skip $b: calq run"
    $CMP cosine "$e/float" "$T/skip/$b" "  simplified, Conv_2 in float, $b: fake-quant vs float" 0.99 ||
        fail "simplified with Conv_2 in float, $b: fake-quant vs float below 0.99"
done

# (e) a MaxPool sharing a quantized tensor (§9.3): AscendQuant -> AscendAntiQuant before it in
# the deploy model, Mul(scale_d) in the fake-quant one; deploy == fake-quant, onnxruntime runs it
V=$T/maxpool
mkdir -p "$V/float" "$V/fake" "$V/deploy" "$V/ort"
$PY "$HERE/ascend_compare.py" maxpool-model "$V/m.onnx" "$V/data" || fail "maxpool: building the model"
"$CALQ" calibration --model "$V/m.onnx" --npy "$V/data" --batch_num 2 --save_path "$V/m" --format ascend \
    >"$V/log" 2>&1 || { fail "maxpool: calibration"; tail -3 "$V/log"; }
$PY "$HERE/ascend_compare.py" maxpool-structure "$V/m_deploy_model.onnx" "$V/m_fake_quant_model.onnx" ||
    fail "maxpool: structure"
$CMP check "$V/m_fake_quant_model.onnx" || fail "maxpool: fake-quant file fails onnx.checker"
$PY "$HERE/ascend_compare.py" check-deploy "$V/m_deploy_model.onnx" || fail "maxpool: deploy file fails onnx.checker"
"$CALQ" run "$V/m.onnx" --input "x=$V/data/b0.npy" --output-dir "$V/float" >/dev/null 2>&1 &&
    "$CALQ" run "$V/m_fake_quant_model.onnx" --input "x=$V/data/b0.npy" --output-dir "$V/fake" --no-fusion \
        >/dev/null 2>&1 &&
    "$CALQ" run "$V/m_deploy_model.onnx" --input "x=$V/data/b0.npy" --output-dir "$V/deploy" >/dev/null 2>&1 &&
    node "$HERE/ort_run.js" "$V/m_fake_quant_model.onnx" "$V/ort" "x=$V/data/b0.npy" || fail "maxpool: runs"
$CMP cosine "$V/fake" "$V/deploy" "  maxpool deploy vs fake-quant" 0.999999 || fail "maxpool: deploy vs fake-quant"
$CMP cosine "$V/fake" "$V/ort" "  maxpool fake-quant calq vs onnxruntime" 0.999999 || fail "maxpool: calq vs onnxruntime"
$CMP cosine "$V/float" "$V/fake" "  maxpool fake-quant vs float" 0.99 || fail "maxpool: fake-quant vs float"

# (d) --save_type
M=$SHARED/models/ultraface/version-slim-320.onnx
R=$T/version-slim-320/uf
for st in Fakequant Deploy None; do
    P=$T/st_$st/uf
    mkdir -p "$T/st_$st"
    "$CALQ" save --model "$M" --record "${R}_record.txt" --save_path "$P" --save_type $st >"$T/st.log" 2>&1
    rc=$?
    n=$(ls "$T/st_$st" | wc -l)
    case $st in
    Fakequant) [ $rc = 0 ] && [ -s "${P}_fake_quant_model.onnx" ] && [ -s "${P}_qdq.onnx" ] && [ "$n" = 2 ] ||
        fail "--save_type Fakequant wrote: $(ls "$T/st_$st")" ;;
    Deploy) [ $rc = 0 ] && [ -s "${P}_deploy_model.onnx" ] && [ -s "${P}_qoperator.onnx" ] && [ "$n" = 2 ] ||
        fail "--save_type Deploy wrote: $(ls "$T/st_$st")" ;;
    None) [ $rc != 0 ] && [ "$n" = 0 ] || fail "calq save --save_type None: rc $rc, wrote $(ls "$T/st_$st")" ;;
    esac
done
"$CALQ" save --model "$M" --record "${R}_record.txt" --save_path "$T/x" --save_type Sometimes >"$T/st.log" 2>&1
[ $? = 2 ] && grep -q "save_type must be Both, Fakequant, Deploy or None" "$T/st.log" || fail "bad --save_type"
"$CALQ" save --model "$M" --record "${R}_record.txt" --save_path "$T/x" --save_type Fakequant --format qoperator \
    >"$T/st.log" 2>&1
[ $? = 2 ] && grep -q "keeps none of --format qoperator" "$T/st.log" || fail "--save_type filtering out every format"
# a record with shift_bit (joint_quant, §6.4): ONNX saves refuse it with AMCT's message (§4.4)
$PY - "${R}_record.txt" "$T/shift_record.txt" <<'PYEOF'
import re, sys
text = open(sys.argv[1]).read()
first = text.index("record {", 1) if text.count("record {") > 1 else len(text)
block = text[:first]
n = len(re.findall(r"scale_w:", block))
block = re.sub(r"(offset_w: 0\n)(?!.*offset_w)", lambda m: m.group(1) + "    shift_bit: 3\n" * n, block, flags=re.S)
open(sys.argv[2], "w").write(block + text[first:])
PYEOF
"$CALQ" save --model "$M" --record "$T/shift_record.txt" --save_path "$T/shift" --format ascend >"$T/st.log" 2>&1
[ $? = 1 ] && grep -q "shift_bit is not support, please delete shift_bit of layer" "$T/st.log" &&
    [ ! -e "$T/shift_deploy_model.onnx" ] || { fail "shift_bit record"; cat "$T/st.log"; }

if [ $fails -ne 0 ]; then
    echo "$fails failure(s)"
    exit 1
fi
echo "save_ascend: all checks passed"
