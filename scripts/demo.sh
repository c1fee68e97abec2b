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
echo "== calq calibration: AMCT's IFMR/ARQ factors from the four photos (batch 1, batch_num 4) =="
"$calq" calibration --model "$model" --images "$root/examples/images" --resize 320x240 --mean 127 --std 128 \
    --batch_num 4 --save_path "$out/ultraface" 2>&1 | grep -E '^calq:' | sed 's/^/  /'
echo "  first layer in the record:"
head -n 8 "$out/ultraface_record.txt" | sed 's/^/    /'
echo
echo "Outputs are in $out: the .npy tensors of each run, ultraface_record.txt (AMCT's record format)"
echo "and ultraface_config.json (the config used). Quantized model export comes next (see docs/)."
