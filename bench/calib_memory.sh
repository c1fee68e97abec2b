#!/bin/sh
# Peak resident memory of `calq calibration` on UltraFace slim-320 with batch_num 8 and with
# batch_num 1 at the same batch size (1 photo), from /usr/bin/time -v. calq streams the batches
# (IFMR keeps bounded percentile tails, src/quant/ifmr_stream.c) and its activation cache holds
# at most --cache-mb in memory (the rest goes to a temporary file, src/calib/act_cache.h), so
# beyond that budget the peak must not grow with batch_num: with a budget of 4 MB (one photo's
# layer inputs are 12.9 MB, so both runs spill) the ratio must be <= 1.25 (AMCT keeps every
# batch, amct-reference.md §3.2).
# Usage: calib_memory.sh CALQ SHARED_DIR
set -u
CALQ=$1
SHARED=$2
. "$(dirname "$0")/../tests/support/need.sh"
need_files "$SHARED/models/ultraface/version-slim-320.onnx" "$SHARED/data/faces/ultraface_1.jpg"
T=$(mktemp -d "${TMPDIR:-/tmp}"/calq_calib_mem.XXXXXX)
trap 'rm -rf "$T"' EXIT
peak() {
    /usr/bin/time -v "$CALQ" calibration --model "$SHARED/models/ultraface/version-slim-320.onnx" \
        --images "$SHARED/data/faces" --resize 320x240 --mean 127 --std 128 --input_shape input:1,3,240,320 \
        --batch_num "$1" --threads 2 --cache-mb 4 --save_path "$T/b$1" >/dev/null 2>"$T/time$1.log" ||
        { echo "calibration with batch_num $1 failed:" >&2; tail -5 "$T/time$1.log" >&2; exit 1; }
    sed -n 's/.*Maximum resident set size (kbytes): //p' "$T/time$1.log"
}
one=$(peak 1)
eight=$(peak 8)
ratio=$(awk -v a="$eight" -v b="$one" 'BEGIN { printf "%.3f", a / b }')
echo "peak RSS: batch_num 1: $one kB, batch_num 8: $eight kB, ratio $ratio (limit 1.25)"
awk -v r="$ratio" 'BEGIN { exit !(r <= 1.25) }'
