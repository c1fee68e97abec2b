#!/usr/bin/env bash
# UltraFace slim-320 (both ONNX files) on three shared photos: calq's float outputs must equal
# onnxruntime-node's within 1e-4. Drives both runtimes on the same input tensor.
set -euo pipefail
calq=$1; compare=$2; shared=$3
here=$(cd "$(dirname "$0")" && pwd)
export NODE_PATH=${CALQ_PEERS_DIR:-$HOME/.cache/calq-peers}/node_modules
. "$(dirname "$0")/../support/need.sh"
need_node_module onnxruntime-node
need_files "$shared/models/ultraface/version-slim-320.onnx" "$shared/data/faces/ultraface_1.jpg"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
fail=0
for model in version-slim-320.onnx version-slim-320_simplified.onnx; do
  for img in ultraface_1 ultraface_5 ultraface_9; do
    d="$work/${model%.onnx}_$img"; mkdir -p "$d/calq" "$d/ort"
    "$calq" run "$shared/models/ultraface/$model" --image "input=$shared/data/faces/$img.jpg" \
        --resize 320x240 --mean 127 --std 128 --dump input --output-dir "$d/calq" 2>/dev/null
    node "$here/ort_run.js" "$shared/models/ultraface/$model" "$d/ort" "input=$d/calq/input.npy"
    for out in scores boxes; do
      printf '%s %s %s: ' "$model" "$img" "$out"
      "$compare" "$d/calq/$out.npy" "$d/ort/$out.npy" --atol 1e-4 --rtol 1e-4 || fail=1
    done
  done
done
# Bit-identical results for any thread count (fast and reference kernels).
for mode in "" --ref; do
  for t in 1 2 3; do
    "$calq" run "$shared/models/ultraface/version-slim-320.onnx" --image "input=$shared/data/faces/ultraface_1.jpg" \
        --resize 320x240 --mean 127 --std 128 --threads $t $mode --output-dir "$work/threads$mode$t" 2>/dev/null
  done
  for t in 2 3; do
    for out in scores boxes; do
      if cmp -s "$work/threads${mode}1/$out.npy" "$work/threads$mode$t/$out.npy"; then
        echo "threads 1 vs $t ${mode:-fast}: $out bit-identical"
      else
        echo "FAIL: threads 1 vs $t ${mode:-fast}: $out differs"; fail=1
      fi
    done
  done
done
exit $fail
