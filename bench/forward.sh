#!/usr/bin/env bash
# make bench: bench/forward on both UltraFace models at batch 1 and batch 8 (bench/zoo/table.py
# runs the whole benchmark zoo).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export CALQ_BUILD=$here/../${1:-build}
for m in version-slim-320.onnx version-slim-320_simplified.onnx; do
  for b in 1 8; do
    echo "== $m batch $b =="
    "$here/forward" "$here/../examples/ultraface/$m" --batch "$b" --threads 2
  done
done
