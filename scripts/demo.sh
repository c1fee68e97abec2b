#!/usr/bin/env bash
# make demo: runs the bundled UltraFace model on the bundled photos and says what happened.
set -euo pipefail
calq=${1:-build/calq}
root=$(cd "$(dirname "$0")/.." && pwd)
model="$root/examples/ultraface/version-slim-320.onnx"
out="$root/out/demo"
mkdir -p "$out"

echo "== calq inspect: what the model holds and what calq would quantize =="
"$calq" inspect "$model"

echo
echo "== calq run: float inference on each photo (resized to 320x240, (x-127)/128) =="
for img in "$root"/examples/images/*.jpg; do
  name=$(basename "$img" .jpg)
  "$calq" run "$model" --image "input=$img" --resize 320x240 --mean 127 --std 128 \
      --output-dir "$out/$name" --dump input 2>&1 | sed 's/^/  /'
  # Count anchor boxes that the detector scores as a face (before non-maximum suppression).
  /usr/bin/python3 - "$out/$name" "$name" <<'PY'
import sys, numpy as np
d, name = sys.argv[1], sys.argv[2]
s = np.load(d + "/scores.npy")[0, :, 1]
b = np.load(d + "/boxes.npy")[0]
hits = np.flatnonzero(s > 0.7)
best = int(np.argmax(s))
print(f"  {name}: {len(hits)} anchors score > 0.7 as a face; best {s[best]:.3f} at box "
      f"[{b[best,0]:.2f} {b[best,1]:.2f} {b[best,2]:.2f} {b[best,3]:.2f}] (relative coordinates)")
PY
done
echo
echo "== calq calibration: AMCT's IFMR/ARQ factors from the four photos (batch 1, batch_num 4), then the models =="
"$calq" calibration --model "$model" --images "$root/examples/images" --resize 320x240 --mean 127 --std 128 \
    --batch_num 4 --save_path "$out/ultraface" 2>&1 | grep -E '^calq:' | sed 's/^/  /'
echo "  first layer in the record:"
head -n 8 "$out/ultraface_record.txt" | sed 's/^/    /'

echo
echo "== calq run: the int8 models on each photo, against the float run =="
for img in "$root"/examples/images/*.jpg; do
  name=$(basename "$img" .jpg)
  for kind in deploy_model qoperator; do
    "$calq" run "$out/ultraface_$kind.onnx" --input "input=$out/$name/input.npy" \
        --output-dir "$out/$name/$kind" >/dev/null 2>&1
  done
  /usr/bin/python3 - "$out/$name" "$name" <<'PY'
import sys, numpy as np
d, name = sys.argv[1], sys.argv[2]
def cos(a, b):
    a, b = a.ravel().astype(np.float64), b.ravel().astype(np.float64)
    return a @ b / (np.linalg.norm(a) * np.linalg.norm(b))
fs = np.load(d + "/scores.npy")[0, :, 1]
for kind, label in (("deploy_model", "Ascend deploy (AscendQuant, int8 conv, AscendDequant)"),
                    ("qoperator", "ONNX QOperator (QLinearConv)")):
    s = np.load(d + "/" + kind + "/scores.npy")[0, :, 1]
    b = np.load(d + "/" + kind + "/boxes.npy")
    print(f"  {name} {label}: {int((s > 0.7).sum())} anchors > 0.7 (float {int((fs > 0.7).sum())}), "
          f"best {s.max():.3f} (float {fs.max():.3f}); cosine to float: scores "
          f"{cos(np.load(d + '/scores.npy'), np.load(d + '/' + kind + '/scores.npy')):.5f}, boxes "
          f"{cos(np.load(d + '/boxes.npy'), b):.5f}")
PY
done
echo
echo "Outputs are in $out: the .npy tensors of each run, ultraface_record.txt (AMCT's record format),"
echo "ultraface_config.json (the config used), AMCT's ultraface_fake_quant_model.onnx and"
echo "ultraface_deploy_model.onnx, and the standard ONNX int8 models ultraface_qdq.onnx and"
echo "ultraface_qoperator.onnx (onnxruntime runs them). See docs/cli.md."
