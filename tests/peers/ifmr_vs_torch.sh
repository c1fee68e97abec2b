#!/bin/sh
# End to end: dump UltraFace's activations for a few photos with `calq run --dump-all`, then
# compare calq's IFMR with PyTorch's HistogramObserver on 10 layer inputs (tests/peers/ifmr_vs_torch.py).
# Usage: tests/peers/ifmr_vs_torch.sh [path/to/calq] [photos]
set -eu
CALQ=${1:-build/calq}
N=${2:-4}
SHARED=${CALQ_SHARED:-$(dirname "$0")/../../../shared}
MODEL=$SHARED/models/ultraface/version-slim-320.onnx
. "$(dirname "$0")/../support/need.sh"
need_python numpy torch
need_files "$MODEL" "$SHARED/data/faces/ultraface_1.jpg"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
dirs=""
i=0
for photo in $(ls "$SHARED"/data/faces/ultraface_*.jpg | head -n "$N"); do
    "$CALQ" run "$MODEL" --image "input=$photo" --resize 320x240 --mean 127 --std 128 --dump-all \
        --output-dir "$WORK/b$i" >/dev/null 2>"$WORK/log" || { cat "$WORK/log" >&2; exit 1; }
    dirs="$dirs --dir $WORK/b$i"
    i=$((i + 1))
done
# shellcheck disable=SC2086
exec /usr/bin/python3 "$(dirname "$0")/ifmr_vs_torch.py" --calq "$CALQ" --model "$MODEL" $dirs --work "$WORK"
