#!/bin/sh
# Streaming and determinism of issue 11's tools on UltraFace slim-320 (bench/calib_memory.sh's
# method): peak RSS (/usr/bin/time -v) of `calq calibration --act_algo auto` (every candidate
# calibrator plus the evaluation pass) and of `calq compare --isolated` with batch_num 16 against
# batch_num 1 must stay within 1.25x; and the auto record must be identical for --threads 1 and 2
# (batch_num 2). The activation cache (--cache-mb 4, below one photo's 12.9 MB) spills to its file in
# both runs, so its memory does not grow with batch_num.
# Usage: accuracy_memory.sh CALQ SHARED_DIR
set -u
CALQ=$1
SHARED=$2
T=$(mktemp -d "${TMPDIR:-/tmp}"/calq_acc_mem.XXXXXX)
trap 'rm -rf "$T"' EXIT
M=$SHARED/models/ultraface/version-slim-320.onnx
[ -f "$M" ] || { echo "shared model missing"; exit 77; }
mkdir -p "$T/img"
i=0
for k in 1 2; do # 16 photos: the 13 shared ones, then the first 3 again
    for f in "$SHARED"/data/faces/*.jpg; do
        [ $i -lt 16 ] && cp "$f" "$T/img/$(printf '%02d' $i).jpg"
        i=$((i + 1))
    done
done
IMG="--images $T/img --resize 320x240 --mean 127 --std 128 --input_shape input:1,3,240,320"
fails=0
peak() { # NAME ARGS...: peak RSS in kB
    name=$1
    shift
    /usr/bin/time -v "$CALQ" "$@" >"$T/$name.out" 2>"$T/$name.log" ||
        { echo "FAIL: $name:" >&2; tail -5 "$T/$name.log" >&2; fails=$((fails + 1)); echo 0; return; }
    sed -n 's/.*Maximum resident set size (kbytes): //p' "$T/$name.log"
}
# shellcheck disable=SC2086
a1=$(peak auto1 calibration --model "$M" $IMG --act_algo auto --batch_num 1 --threads 2 --cache-mb 4 --save_type None \
    --save_path "$T/a1/m")
# shellcheck disable=SC2086
a16=$(peak auto16 calibration --model "$M" $IMG --act_algo auto --batch_num 16 --threads 2 --cache-mb 4 --save_type None \
    --save_path "$T/a16/m")
for t in 1 2; do
    # shellcheck disable=SC2086
    "$CALQ" calibration --model "$M" $IMG --act_algo auto --batch_num 2 --threads $t --save_type None \
        --save_path "$T/t$t/m" >/dev/null 2>&1 || fails=$((fails + 1))
done
cmp -s "$T/t1/m_record.txt" "$T/t2/m_record.txt" || { echo "FAIL: auto's record differs for --threads 1 and 2"; fails=$((fails + 1)); }
# shellcheck disable=SC2086
"$CALQ" calibration --model "$M" $IMG --batch_num 2 --format ascend --save_path "$T/q/m" >/dev/null 2>&1 ||
    fails=$((fails + 1))
# shellcheck disable=SC2086
c1=$(peak cmp1 compare --model "$M" --quantized "$T/q/m_fake_quant_model.onnx" $IMG --isolated --batch_num 1 --threads 2)
# shellcheck disable=SC2086
c16=$(peak cmp16 compare --model "$M" --quantized "$T/q/m_fake_quant_model.onnx" $IMG --isolated --batch_num 16 \
    --threads 2)
for pair in "auto $a1 $a16" "compare $c1 $c16"; do
    # shellcheck disable=SC2086
    set -- $pair
    ratio=$(awk -v a="$3" -v b="$2" 'BEGIN { printf "%.3f", (b > 0 ? a / b : 99) }')
    echo "peak RSS of $1: batch_num 1: $2 kB, batch_num 16: $3 kB, ratio $ratio (limit 1.25)"
    awk -v r="$ratio" 'BEGIN { exit !(r <= 1.25) }' || fails=$((fails + 1))
done
exit $((fails != 0))
