#!/bin/sh
# The accuracy search (calq calibration --target-cosine) on models nobody tuned it for: the zoo
# (shared/models/zoo) and torchvision exports (~/.cache/calq-bench-zoo, random weights, when
# present). Per model: the worst output cosine with every layer quantized (AMCT's defaults), after
# the search, the layers kept in float, the trials and the time. Preprocessing from the zoo's
# README. Usage: bench/fallback_zoo.sh CALQ SHARED_DIR [TARGET] [BATCHES]
set -u
CALQ=$1
SHARED=$2
TARGET=${3:-0.99}
NB=${4:-8}
Z=$SHARED/models/zoo
T=$(mktemp -d "${TMPDIR:-/tmp}"/calq_fallback_zoo.XXXXXX)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/det" "$T/plate" "$T/seg"
cp "$Z"/fastestdet_352/images/*.jpg "$SHARED"/data/faces/*.jpg "$T/det/"
cp "$Z"/hyperlpr3_plate_color_cls_96/images/*.jpg "$T/plate/"
cp "$Z"/pan_mnv3s_skin_clothes_hair_512/images/*.jpg "$SHARED"/data/faces/ultraface_*.jpg "$T/seg/"
for w in "$Z"/pan_mnv3s_skin_clothes_hair_512/images/*.webp; do # stb reads no WebP; OpenCV does
    /usr/bin/python3 -c "import cv2,sys; cv2.imwrite(sys.argv[2], cv2.imread(sys.argv[1]))" "$w" \
        "$T/seg/$(basename "$w" .webp).png" 2>/dev/null
done
printf '%-22s %7s %9s %9s %7s %7s %8s  %s\n' model layers before after float trials time "float layers"
# NAME MODEL IMAGES INPUT SIZE MEAN STD [bgr]
run() {
    name=$1 model=$2 imgs=$3 input=$4 size=$5 mean=$6 std=$7 bgr=${8:-}
    [ -f "$model" ] || return 0
    w=${size%x*} h=${size#*x}
    nb=$(ls "$imgs" | wc -l)
    [ "$nb" -gt "$NB" ] && nb=$NB
    # shellcheck disable=SC2086
    /usr/bin/time -f "%e" -o "$T/$name.time" "$CALQ" calibration --model "$model" --images "$imgs" --resize "$size" \
        --mean "$mean" --std "$std" $bgr --input_shape "$input:1,3,$h,$w" --batch_num "$nb" --format ascend \
        --save_path "$T/$name/m" --target-cosine "$TARGET" --time-budget 900 >"$T/$name.log" 2>&1 ||
        { printf '%-22s failed: %s\n' "$name" "$(grep 'error' "$T/$name.log" | head -1)"; return 0; }
    line=$(grep '^calq: min output cosine' "$T/$name.log")
    before=$(echo "$line" | sed -n 's/^calq: min output cosine \([0-9.e-]*\) -> .*/\1/p')
    after=$(echo "$line" | sed -n 's/.* -> \([0-9.e-]*\).*/\1/p')
    nf=$(echo "$line" | sed -n 's/.*, \([0-9]*\) of \([0-9]*\) layers float.*/\1/p')
    nl=$(echo "$line" | sed -n 's/.*, \([0-9]*\) of \([0-9]*\) layers float.*/\2/p')
    trials=$(echo "$line" | sed -n 's/.*; \([0-9]*\) trials in.*/\1/p')
    met=$(echo "$line" | grep -q 'target met' && echo "" || echo " (target NOT met)")
    layers=$(echo "$line" | sed -n 's/.*-> [0-9.e-]* (\(.*\) float).*/\1/p')
    printf '%-22s %7s %9s %9s %7s %7s %7ss  %s%s\n' "$name" "$nl" "$before" "$after" "$nf" "$trials" \
        "$(cat "$T/$name.time")" "$layers" "$met"
}
run ultraface_simplified "$SHARED/models/ultraface/version-slim-320_simplified.onnx" "$T/det" input 320x240 127 128
run yunet_n_320 "$Z/yunet_n_320/yunet_n_320_320.onnx" "$T/det" input 320x320 0 1 --bgr
run nanodet_m_320 "$Z/nanodet_m_320/nanodet_m_320.onnx" "$T/det" input.1 320x320 103.53,116.28,123.675 \
    57.375,57.12,58.395 --bgr
run fastestdet_352 "$Z/fastestdet_352/FastestDet.onnx" "$T/det" input.1 352x352 0 255 --bgr
run pan_mnv3s_seg_512 "$Z/pan_mnv3s_skin_clothes_hair_512/pan_mobilenetv3_small_100_simplifier.onnx" "$T/seg" x.1 \
    512x512 123.675,116.28,103.53 58.395,57.12,57.375
run hyperlpr3_cls_96 "$Z/hyperlpr3_plate_color_cls_96/litemodel_cls_96x_r1.onnx" "$T/plate" data 96x96 0 255 --bgr
TV=${HOME:-/root}/.cache/calq-bench-zoo
for m in mobilenet_v2 mobilenet_v3_small resnet18; do
    run "tv_$m" "$TV/$m.onnx" "$T/det" input 224x224 123.675,116.28,103.53 58.395,57.12,57.375
done
