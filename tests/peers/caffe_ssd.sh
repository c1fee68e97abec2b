#!/bin/sh
# Caffe SSD detectors and the other common Caffe layers (issue 14, item 11) against OpenCV's DNN
# module (Debian python3-opencv), on the same input tensors:
#   - the zoo's WeChat QR detector (a real Caffe SSD: Permute, Flatten, PriorBox, Concat,
#     Reshape, Softmax, DetectionOutput) on a generated QR code and on a photo with one pasted in:
#     detections and the mbox tensors within 1e-4; its super-resolution net (Crop, Deconvolution)
#     at two input sizes;
#   - a MobileNet-SSD-like net built here (depthwise convolutions, Normalize, two heads, PriorBox
#     with flip / clip / max_size / explicit step, DetectionOutput truncating to keep_top_k, Crop);
#   - PSPNet's Interp (zoom, shrink, explicit size; not in OpenCV 4.6's Caffe schema) against
#     numpy's align-corners bilinear resize;
#   - both detectors calibrated and saved as AMCT's Caffe models: the fake-quant and deploy
#     models run in calq and find the float model's top detection (same label, IoU >= 0.9).
# usage: caffe_ssd.sh CALQ NPY_COMPARE SHARED_DIR
set -u
CALQ=$1
CMP=$2
SHARED=$3
HERE=$(cd "$(dirname "$0")" && pwd)
PY=/usr/bin/python3
Z=$SHARED/models/zoo/wechat_qrcode_detect_caffe
[ -f "$Z/detect.caffemodel" ] || { echo "SKIP: $Z is missing"; exit 77; }
$PY -c "import cv2" 2>/dev/null || { echo "SKIP: python3-opencv is missing"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}"/calq_ssd.XXXXXX)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

$PY - "$T" "$SHARED" <<'PY'
import sys, os, numpy as np, cv2
out, shared = sys.argv[1], sys.argv[2]
enc = cv2.QRCodeEncoder.create() if hasattr(cv2, "QRCodeEncoder") else cv2.QRCodeEncoder_create()
qr = cv2.resize(enc.encode("calq ssd test"), (150, 150), interpolation=cv2.INTER_NEAREST)
img = np.full((384, 384), 255, np.uint8)
img[100:250, 60:210] = qr
np.save(out + "/qr.npy", (img.astype(np.float32) / 255)[None, None])
ph = cv2.resize(cv2.imread(shared + "/models/zoo/fastestdet_352/images/fastestdet_data_1.jpg", 0), (384, 384))
ph[200:350, 200:350] = qr
np.save(out + "/photo.npy", (ph.astype(np.float32) / 255)[None, None])
for s in (64, 200):
    np.save(out + "/sr%d.npy" % s, (ph[100:100 + s, 100:100 + s].astype(np.float32) / 255)[None, None])
os.makedirs(out + "/calib_wq")
np.save(out + "/calib_wq/0.npy", np.load(out + "/qr.npy"))
np.save(out + "/calib_wq/1.npy", np.load(out + "/photo.npy"))
PY
$PY "$HERE/caffe_opencv_run.py" ssd "$T/ssd" || { echo "FAIL: building the SSD net"; exit 1; }

# vs_opencv NAME PROTO WEIGHTS INPUT [LAYERS]: calq and OpenCV outputs (and LAYERS) within 1e-4
vs_opencv() {
    d=$T/$1
    mkdir -p "$d"
    dump=${5:+--dump $5}
    # shellcheck disable=SC2086
    "$CALQ" run --model "$2" --weights "$3" --input "data=$4" $dump $EXTRA --output-dir "$d/calq" >"$d/calq.log" 2>&1 ||
        { fail "$1: calq run"; cat "$d/calq.log"; return; }
    $PY "$HERE/caffe_opencv_run.py" run "$2" "$3" "$4" "$d/cv" "${5:-}" >"$d/cv.log" 2>&1 || { fail "$1: OpenCV"; return; }
    for f in "$d"/cv/*.npy; do
        printf '  %-12s %-22s ' "$1" "$(basename "$f" .npy)"
        "$CMP" "$d/calq/$(basename "$f")" "$f" --atol 1e-4 --rtol 0 || fail "$1: $(basename "$f") differs from OpenCV"
    done
}

EXTRA=
vs_opencv qr "$Z/detect.prototxt" "$Z/detect.caffemodel" "$T/qr.npy" mbox_priorbox,mbox_loc,mbox_conf_flatten
vs_opencv photo "$Z/detect.prototxt" "$Z/detect.caffemodel" "$T/photo.npy" mbox_priorbox,mbox_loc,mbox_conf_flatten
for s in 64 200; do
    EXTRA="--input-shape data:1,1,$s,$s"
    vs_opencv sr$s "$Z/sr.prototxt" "$Z/sr.caffemodel" "$T/sr$s.npy"
done
EXTRA=
vs_opencv ssd "$T/ssd/ssd.prototxt" "$T/ssd/ssd.caffemodel" "$T/ssd/data.npy" mbox_prior,mbox_loc,mbox_conf_flatten,conv1_norm
# the detector finds something (a test of DetectionOutput needs detections)
$PY -c "
import sys, numpy as np
for f in sys.argv[1:]:
    d = np.load(f)[0, 0]
    assert (d[:, 2] > 0).sum() >= 1, f" "$T/qr/calq/detection_output.npy" "$T/ssd/calq/detection_out.npy" ||
    fail "no detections"

# Interp against numpy
"$CALQ" run --model "$T/ssd/interp.prototxt" --weights "$T/ssd/interp.caffemodel" --input "data=$T/ssd/interp_data.npy" --output-dir "$T/interp" >/dev/null 2>&1 ||
    fail "interp: calq run"
$PY - "$T/ssd/interp_data.npy" "$T/interp" <<'PY' || fail "interp differs from align-corners bilinear"
import sys, numpy as np
x = np.load(sys.argv[1]).astype(np.float64)
def resize(x, oh, ow):
    n, c, h, w = x.shape
    ys = np.arange(oh) * ((h - 1) / (oh - 1) if oh > 1 else 0)
    xs = np.arange(ow) * ((w - 1) / (ow - 1) if ow > 1 else 0)
    y0 = np.minimum(np.floor(ys).astype(int), h - 1); x0 = np.minimum(np.floor(xs).astype(int), w - 1)
    y1 = np.minimum(y0 + 1, h - 1); x1 = np.minimum(x0 + 1, w - 1)
    fy = (ys - y0)[:, None]; fx = (xs - x0)[None, :]
    a = x[:, :, y0][:, :, :, x0]; b = x[:, :, y0][:, :, :, x1]; c_ = x[:, :, y1][:, :, :, x0]; d = x[:, :, y1][:, :, :, x1]
    return (1 - fy) * ((1 - fx) * a + fx * b) + fy * ((1 - fx) * c_ + fx * d)
want = {"zoom": resize(x, 13, 19), "shrink": resize(x, 3, 4), "fixed": resize(x, 9, 4)}
ok = True
for k, v in want.items():
    got = np.load(sys.argv[2] + "/%s.npy" % k)
    err = np.abs(got - v).max() if got.shape == v.shape else float("inf")
    print("  interp %-8s %s max difference %.2g" % (k, got.shape, err))
    ok &= err < 1e-5
sys.exit(0 if ok else 1)
PY

# calibrate + save both detectors; the saved models find the float model's top detection
mkdir -p "$T/calib_ssd"
cp "$T/ssd/data1.npy" "$T/calib_ssd/0.npy"
cp "$T/ssd/data2.npy" "$T/calib_ssd/1.npy"
for m in wq ssd; do
    if [ $m = wq ]; then P="$Z/detect"; D=$T/calib_wq; IN=$T/photo.npy; F=$T/photo/calq/detection_output.npy; O=detection_output
    else P="$T/ssd/ssd"; D=$T/calib_ssd; IN=$T/ssd/data.npy; F=$T/ssd/calq/detection_out.npy; O=detection_out; fi
    S=$T/save_$m/out
    "$CALQ" calibration --model "$P.prototxt" --weights "$P.caffemodel" --npy "$D" --batch_num 2 --save_path "$S" \
        >"$T/$m.cal.log" 2>&1 || { fail "$m: calibration + save"; tail -5 "$T/$m.cal.log"; continue; }
    for k in fake_quant deploy; do
        "$CALQ" run --model "${S}_${k}_model.prototxt" --weights "${S}_${k}_weights.caffemodel" --input "data=$IN" \
            --output-dir "$T/save_$m/$k" >/dev/null 2>&1 || { fail "$m: calq runs the $k model"; continue; }
        $PY - "$F" "$T/save_$m/$k/$O.npy" "$m $k" <<'PY' || fail "$m: the $k model misses the top detection"
import sys, numpy as np
a, b = np.load(sys.argv[1])[0, 0][0], np.load(sys.argv[2])[0, 0][0]
ix = max(0, min(a[5], b[5]) - max(a[3], b[3])) * max(0, min(a[6], b[6]) - max(a[4], b[4]))
iou = ix / ((a[5] - a[3]) * (a[6] - a[4]) + (b[5] - b[3]) * (b[6] - b[4]) - ix)
print("  %-18s top detection: label %d / %d, score %.3f / %.3f, IoU %.4f" % (sys.argv[3], a[1], b[1], a[2], b[2], iou))
sys.exit(0 if a[1] == b[1] and iou >= 0.9 else 1)
PY
    done
done
echo "caffe_ssd: $fails failure(s)"
[ $fails -eq 0 ]
