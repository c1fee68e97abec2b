#!/usr/bin/env bash
# Whole models through the fast planner (blocked/channels-last layouts, fused post-ops): for a
# torchvision ResNet-18, MobileNetV2 and EfficientNet-B0 (SiLU written as x * Sigmoid(x), squeeze-
# excite), the zoo's ViT (LayerNorm and GELU written out, fused by exec/plan_fuse.c; MatMul + bias)
# (bench/zoo/export.py, seeded weights, batch 2),
# UltraFace and two real zoo detectors, calq's outputs must be bit-identical with 1 and 2
# threads, within 1e-4 of the reference kernels (--ref) and of the literal graph (--no-fusion),
# and the tensors a calibration observes (--dump of every convolution input) bit-identical
# whether the rest of the graph is fused or not (--dump-all fuses nothing).
# Usage: exec_models.sh CALQ NPY_COMPARE SHARED_DIR
set -uo pipefail
calq=$1; compare=$2; shared=$3
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}"/calq_exec_models.XXXXXX); trap 'rm -rf "$work"' EXIT
/usr/bin/python3 -c "import torch, torchvision" 2>/dev/null || { echo "skip: python3-torch / torchvision missing"; exit 77; }
/usr/bin/python3 "$here/../../bench/zoo/export.py" "$work/zoo" --only resnet18,mobilenet_v2,efficientnet_b0,transformer_vit >/dev/null 2>&1 ||
  { echo "FAIL: exporting the torchvision models"; exit 1; }
fail=0
check() { # name model input dims
  local name=$1 model=$2 input=$3 dims=$4 d="$work/$1"
  mkdir -p "$d"
  /usr/bin/python3 -c "import sys, numpy as np; np.save(sys.argv[1], np.random.default_rng(5).uniform(-1, 1, [int(v) for v in sys.argv[2].split(',')]).astype(np.float32))" "$d/x.npy" "$dims"
  for t in 1 2; do
    "$calq" run "$model" --input "$input=$d/x.npy" --input-shape "$input:$dims" --threads $t --output-dir "$d/t$t" 2>"$d/log" ||
      { echo "FAIL: $name --threads $t: $(tail -1 "$d/log")"; fail=1; return; }
  done
  "$calq" run "$model" --input "$input=$d/x.npy" --input-shape "$input:$dims" --ref --output-dir "$d/ref" 2>/dev/null
  "$calq" run "$model" --input "$input=$d/x.npy" --input-shape "$input:$dims" --no-fusion --output-dir "$d/nofuse" 2>/dev/null
  for f in "$d"/t1/*.npy; do
    local out; out=$(basename "$f")
    for t in 2; do
      cmp -s "$f" "$d/t$t/$out" || { echo "FAIL: $name $out: threads 1 vs $t differ"; fail=1; }
    done
    printf '%s %s fast vs ref: ' "$name" "$out"; "$compare" "$f" "$d/ref/$out" --atol 1e-4 --rtol 1e-4 || fail=1
    printf '%s %s fast vs no-fusion: ' "$name" "$out"; "$compare" "$f" "$d/nofuse/$out" --atol 1e-4 --rtol 1e-4 || fail=1
  done
  # the convolution inputs, as calibration observes them, with and without the rest fused
  local obs
  obs=$(/usr/bin/python3 -c "
import onnx, sys
m = onnx.load(sys.argv[1]); seen = []
for n in m.graph.node:
    if n.op_type in ('Conv', 'Gemm', 'MatMul', 'ConvTranspose') and n.input[0] not in seen: seen.append(n.input[0])
print(','.join(seen))" "$model")
  "$calq" run "$model" --input "$input=$d/x.npy" --input-shape "$input:$dims" --threads 2 --dump "$obs" --output-dir "$d/obs" 2>/dev/null
  "$calq" run "$model" --input "$input=$d/x.npy" --input-shape "$input:$dims" --threads 2 --dump-all --output-dir "$d/all" 2>/dev/null
  local n_obs=0 n_diff=0
  for f in "$d"/obs/*.npy; do
    n_obs=$((n_obs + 1))
    cmp -s "$f" "$d/all/$(basename "$f")" || { n_diff=$((n_diff + 1)); echo "FAIL: $name observed $(basename "$f") differs with fusion"; fail=1; }
  done
  echo "$name: threads 1/2 bit-identical outputs; $n_obs observed tensors, $n_diff differ with fusion"
}
check resnet18 "$work/zoo/resnet18.onnx" input 2,3,224,224
check mobilenet_v2 "$work/zoo/mobilenet_v2.onnx" input 1,3,224,224
check efficientnet_b0 "$work/zoo/efficientnet_b0.onnx" input 1,3,224,224
check vit "$work/zoo/transformer_vit.onnx" input 2,3,224,224
check ultraface "$shared/models/ultraface/version-slim-320.onnx" input 1,3,240,320
check yunet "$shared/models/zoo/yunet_n_320/yunet_n_320_320.onnx" input 1,3,320,320
check nanodet "$shared/models/zoo/nanodet_m_320/nanodet_m_320.onnx" input.1 1,3,320,320
exit $fail
