#!/bin/sh
# DMQ balancing (issue 12, item 2) on models nobody tuned it for: the torch models with activation
# outliers of tests/peers/dmq_model.py, UltraFace and the zoo (shared/models/zoo). Per model: the
# output cosine of AMCT's fake-quant model vs float (calq compare: mean over the batches, worst
# output) with AMCT's defaults, and with dmq_balancer_param ALPHA on every layer that takes it.
# Preprocessing from the zoo's README. Usage: bench/dmq_zoo.sh CALQ SHARED_DIR [ALPHA...]
set -u
CALQ=$1
SHARED=$2
shift 2
ALPHAS=${*:-0.5}
HERE=$(cd "$(dirname "$0")" && pwd)
Z=$SHARED/models/zoo
NB=4
T=$(mktemp -d "${TMPDIR:-/tmp}"/calq_dmq_zoo.XXXXXX)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/det" "$T/plate"
cp "$Z"/fastestdet_352/images/*.jpg "$SHARED"/data/faces/*.jpg "$T/det/"
cp "$Z"/hyperlpr3_plate_color_cls_96/images/*.jpg "$T/plate/"
/usr/bin/python3 "$HERE/../tests/peers/dmq_model.py" "$T" >/dev/null 2>&1 || echo "no torch: the outlier models are left out"
with_dmq() { # IN.json OUT.json ALPHA
    /usr/bin/python3 - "$@" <<'PYEOF'
import collections, json, sys
c = json.load(open(sys.argv[1]), object_pairs_hook=collections.OrderedDict)
for k, v in list(c.items()):
    if isinstance(v, dict) and "weight_quant_params" in v:
        c[k] = collections.OrderedDict([("quant_enable", v["quant_enable"]), ("dmq_balancer_param", float(sys.argv[3]))] +
                                       [(a, b) for a, b in v.items() if a != "quant_enable"])
json.dump(c, open(sys.argv[2], "w"), indent=4)
PYEOF
}
worst_cos() { awk '/^model outputs/{f=1; next} f && NF==0 {exit} f {print $2}' | sort -g | head -1; }
printf '%-22s %7s %10s' model layers plain
for a in $ALPHAS; do printf ' %10s' "dmq $a"; done
echo
# NAME MODEL DATA-FLAGS...
run() {
    name=$1 model=$2
    shift 2
    [ -f "$model" ] || return 0
    "$CALQ" calibration --model "$model" "$@" --batch_num $NB --format ascend --save_type Fakequant \
        --save_path "$T/$name/p" >"$T/$name.log" 2>&1 || { printf '%-22s failed: %s\n' "$name" "$(grep error "$T/$name.log" | head -1)"; return 0; }
    nl=$(grep -c '^  key:' "$T/$name/p_record.txt")
    c0=$("$CALQ" compare --model "$model" --quantized "$T/$name/p_fake_quant_model.onnx" "$@" --batch_num $NB 2>/dev/null | worst_cos)
    printf '%-22s %7s %10s' "$name" "$nl" "$c0"
    for a in $ALPHAS; do
        with_dmq "$T/$name/p_config.json" "$T/$name/dmq.json" "$a"
        if "$CALQ" calibration --model "$model" "$@" --config "$T/$name/dmq.json" --format ascend --save_type Fakequant \
            --save_path "$T/$name/d$a" >"$T/$name.d.log" 2>&1; then
            c1=$("$CALQ" compare --model "$model" --quantized "$T/$name/d${a}_fake_quant_model.onnx" "$@" --batch_num $NB 2>/dev/null | worst_cos)
        else
            c1="failed"
            grep error "$T/$name.d.log" | head -1 >&2
        fi
        printf ' %10s' "$c1"
    done
    echo
}
run outlier_cnn "$T/cnn.onnx" --npy "$T/cnn_data"
run outlier_mlp "$T/mlp.onnx" --npy "$T/mlp_data"
run ultraface_slim_320 "$SHARED/models/ultraface/version-slim-320_simplified.onnx" --images "$T/det" --resize 320x240 \
    --mean 127 --std 128 --input_shape input:1,3,240,320
run yunet_n_320 "$Z/yunet_n_320/yunet_n_320_320.onnx" --images "$T/det" --resize 320x320 --mean 0 --std 1 --bgr \
    --input_shape input:1,3,320,320
run nanodet_m_320 "$Z/nanodet_m_320/nanodet_m_320.onnx" --images "$T/det" --resize 320x320 \
    --mean 103.53,116.28,123.675 --std 57.375,57.12,58.395 --bgr --input_shape input.1:1,3,320,320
run fastestdet_352 "$Z/fastestdet_352/FastestDet.onnx" --images "$T/det" --resize 352x352 --mean 0 --std 255 --bgr \
    --input_shape input.1:1,3,352,352
run hyperlpr3_cls_96 "$Z/hyperlpr3_plate_color_cls_96/litemodel_cls_96x_r1.onnx" --images "$T/plate" --resize 96x96 \
    --mean 0 --std 255 --bgr --input_shape data:1,3,96,96
