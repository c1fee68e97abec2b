#!/bin/sh
# AMCT's Caffe outputs end to end (issue 6, item 3) on MTCNN det1/det2/det3 and UltraFace
# slim-320 (Caffe): calibrate with `calq calibration` on three shared photos, save the
# fake-quant and deploy models (prototxt + caffemodel each), then
#   (a) calq inspect and calq run load and run all four files;
#   (b) fake-quant vs float: cosine of every net output >= 0.99 on every shared photo
#       (UltraFace's raw box regressions: 0.97, see below);
#   (c) deploy vs fake-quant: cosine of every output >= 0.999; every int8 tensor (the Quant
#       outputs) at most one step apart where the two first differ, under 1% of all int8
#       elements differing; the outputs a DeQuant writes are also printed in units of their
#       deq_scale (scale_d * scale_w[c], §6.2).
#   (d) `calq calibration` writes the four files itself (the one-command flow) and `calq save`
#       from its record writes byte-identical ones.
# Usage: save_caffe.sh CALQ SHARED_DIR
set -u
CALQ=$1
SHARED=$2
PY=/usr/bin/python3
T=$(mktemp -d "${TMPDIR:-/tmp}"/calq_save_caffe.XXXXXX)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
FACES=$SHARED/data/faces
. "$(dirname "$0")/../support/need.sh"
need_python numpy
need_files "$SHARED/models/mtcnn/det1.prototxt" "$SHARED/models/ultraface/slim-320.prototxt" "$FACES/ultraface_2.jpg"
mkdir -p "$T/calib"
cp "$FACES/mtcnn_test1.jpg" "$FACES/ultraface_1.jpg" "$FACES/ultraface_2.jpg" "$T/calib/"

# NAME NET INPUT WxH MEAN STD
for spec in "det1 mtcnn/det1 data 160x120 127.5 128" "det2 mtcnn/det2 data 24x24 127.5 128" \
    "det3 mtcnn/det3 data 48x48 127.5 128" "slim320 ultraface/slim-320 input 320x240 127 128"; do
    # shellcheck disable=SC2086
    set -- $spec
    n=$1 net=$SHARED/models/$2 in=$3 size=$4 mean=$5 std=$6
    w=${size%x*} h=${size#*x}
    P=$T/$n/$n
    IMG="--resize $size --mean $mean --std $std"
    # shellcheck disable=SC2086
    "$CALQ" calibration --model "$net.prototxt" --weights "$net.caffemodel" --images "$T/calib" $IMG \
        --input_shape "$in:1,3,$h,$w" --batch_num 3 --save_path "$P" >"$T/$n.calib.log" 2>&1 ||
        { fail "$n: calibration"; tail -5 "$T/$n.calib.log"; continue; }
    "$CALQ" save --model "$net.prototxt" --weights "$net.caffemodel" --record "${P}_record.txt" \
        --config "${P}_config.json" --save_path "$T/$n/again" --save_type Both >"$T/$n.save.log" 2>&1 ||
        { fail "$n: save"; cat "$T/$n.save.log"; continue; }
    for f in fake_quant_model.prototxt fake_quant_weights.caffemodel deploy_model.prototxt deploy_weights.caffemodel; do
        cmp -s "${P}_$f" "$T/$n/again_$f" || fail "$n: calq save and calq calibration wrote different $f"
    done
    for k in fake_quant deploy; do
        [ -s "${P}_${k}_model.prototxt" ] && [ -s "${P}_${k}_weights.caffemodel" ] || fail "$n: no $k files"
        "$CALQ" inspect --model "${P}_${k}_model.prototxt" --weights "${P}_${k}_weights.caffemodel" \
            >"$T/$n.$k.inspect" 2>&1 || { fail "$n: calq inspect $k"; tail -3 "$T/$n.$k.inspect"; }
    done
    echo "$n: $(grep -c 'type: "Quant"' "${P}_deploy_model.prototxt") Quant, $(grep -c 'type: "DeQuant"' \
        "${P}_deploy_model.prototxt") DeQuant layers; $(grep -c '^  key: ' "${P}_record.txt") layers in the record"
    # the int8 tensors: the deploy Quant tops, and the fake-quant AscendQuant outputs "<Quant>/quantized"
    quants=$(awk '/type: "Quant"/ { q = 1 } q && /^  top: / { gsub(/"/, "", $2); print $2; q = 0 }' \
        "${P}_deploy_model.prototxt" | paste -sd, -)
    for img in "$FACES"/*.jpg; do
        b=$(basename "$img" .jpg)
        for k in float fake_quant deploy; do
            d=$T/$n/$b/$k
            mkdir -p "$d"
            dump=
            if [ $k = float ]; then m=$net.prototxt wt=$net.caffemodel; else
                m=${P}_${k}_model.prototxt wt=${P}_${k}_weights.caffemodel dump=$quants; fi
            [ $k = fake_quant ] && dump=$(echo "$quants" | sed 's#,#/quantized,#g; s#$#/quantized#')
            # shellcheck disable=SC2086
            "$CALQ" run --model "$m" --weights "$wt" --image "$in=$img" $IMG --input-shape "$in:1,3,$h,$w" \
                ${dump:+--dump "$dump"} --output-dir "$d" >"$T/run.log" 2>&1 ||
                { fail "$n $b: calq run $k"; tail -3 "$T/run.log"; }
            mkdir -p "$d/../int8_$k"
            [ -n "$dump" ] && for q in $(echo "$dump" | tr , ' '); do
                f=$(echo "$q" | tr / _).npy
                mv "$d/$f" "$d/../int8_$k/$(echo "${q%/quantized}" | tr / _).npy"
            done
        done
    done
    $PY - "$T/$n" "${P}_deploy_model.prototxt" "${P}_record.txt" "$n" "$quants" <<'PYEOF' ||
import glob, os, re, sys
import numpy as np
root, proto, record, name, quants = sys.argv[1:6]
# DeQuant tops -> their object layer; record -> (scale_d, scale_w)
deq_of = {}  # blobs whose last writer is a DeQuant
for blk in re.split(r"\nlayer \{", open(proto).read()):
    for top in re.findall(r'\n  top: "([^"]+)"', blk):
        deq_of.pop(top, None)
        if 'type: "DeQuant"' in blk:
            deq_of[top] = re.search(r'object_layer: "([^"]+)"', blk).group(1)
rec = {}
for blk in re.split(r"(?=^record \{)", open(record).read(), flags=re.M):
    m = re.search(r'key: "([^"]+)"', blk)
    if m:
        sd = np.float32(re.search(r"scale_d: (\S+)", blk).group(1))
        sw = np.array([np.float32(v) for v in re.findall(r"scale_w: (\S+)", blk)], dtype=np.float32)
        rec[m.group(1)] = sd * sw
def cos(a, b):
    a, b = a.ravel().astype(np.float64), b.ravel().astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-30))
ok = True
outs = sorted(os.path.basename(f)[:-4] for f in glob.glob(os.path.join(root, "*", "float", "*.npy")))
for o in sorted(set(outs)):
    cf, cd, steps, beyond, n = 1.0, 1.0, 0.0, 0, 0
    for photo in sorted(glob.glob(os.path.join(root, "*", ""))):
        fl = np.load(os.path.join(photo, "float", o + ".npy"))
        fq = np.load(os.path.join(photo, "fake_quant", o + ".npy"))
        dp = np.load(os.path.join(photo, "deploy", o + ".npy"))
        cf, cd, n = min(cf, cos(fl, fq)), min(cd, cos(fq, dp)), n + 1
        if o in deq_of:
            deq = rec[deq_of[o]]
            shape = [1] * fq.ndim
            if deq.size > 1:
                shape[1] = deq.size
            s = np.abs(dp.astype(np.float64) - fq) / deq.reshape(shape).astype(np.float64)
            steps, beyond = max(steps, float(s.max())), beyond + int((s > 1).sum())
    line = "  %-7s %-8s %d photos: fake-quant vs float cosine min %.5f; deploy vs fake-quant cosine min %.6f" % (
        name, o, n, cf, cd)
    if o in deq_of:
        line += ", max %.3g steps of its deq_scale (%d elements beyond 1 step)" % (steps, beyond)
    # UltraFace's boxes are raw box regressions: with AMCT's defaults 0.979, below 0.99, because
    # of the weights of the first depthwise conv "188" (one dominant 3x3 weight per channel, so
    # per-channel ARQ leaves the small ones 5-20% off; the error lands on background anchors).
    # Held at 0.97 here; the remedy AMCT documents (skip that layer) is checked below at 0.99.
    spec = 0.97 if (name, o) == ("slim320", "boxes") else 0.99
    if spec < 0.99:
        line += " [fake-quant spec %.2f]" % spec
    print(line)
    ok = ok and cf >= spec and cd >= 0.999
# every int8 tensor (Quant output, in net order): deploy vs fake-quant in quantization steps. The
# fake-quant layers compute in float, so a value at a rounding boundary can land one step apart
# from the exact integer path; that flip then propagates to later layers. So: where the two
# first differ (per photo), at most one step; overall, printed, and under 1% of the elements.
order = [q.replace("/", "_") for q in quants.split(",")]
worst, first, differ, total = 0, 0, 0, 0
for photo in sorted(glob.glob(os.path.join(root, "*", ""))):
    seen = False
    for q in order:
        a = np.load(os.path.join(photo, "int8_deploy", q + ".npy")).astype(np.int32)
        b = np.load(os.path.join(photo, "int8_fake_quant", q + ".npy")).astype(np.int32)
        d = np.abs(a - b)
        worst, differ, total = max(worst, int(d.max())), differ + int((d > 0).sum()), total + d.size
        if not seen and d.max() > 0:
            first, seen = max(first, int(d.max())), True
print("  %-7s int8     %d Quant outputs x %d photos: deploy vs fake-quant where they first differ %d step(s); "
      "overall max %d steps, %d of %d elements (%.3f%%) differ" % (name, len(order), n, first, worst, differ, total,
                                                                   100.0 * differ / max(total, 1)))
ok = ok and total > 0 and first <= 1 and differ < 0.01 * total
sys.exit(0 if ok else 1)
PYEOF
        fail "$n: outputs out of bounds"
done

# UltraFace (Caffe) with AMCT's remedy for a layer that costs accuracy: keep the first depthwise
# conv "188" in float (--skip_layers): every output >= 0.99 on every shared photo.
P=$T/skip/slim320
net=$SHARED/models/ultraface/slim-320
IMG="--resize 320x240 --mean 127 --std 128"
# shellcheck disable=SC2086
"$CALQ" calibration --model "$net.prototxt" --weights "$net.caffemodel" --images "$T/calib" $IMG \
    --input_shape input:1,3,240,320 --batch_num 3 --skip_layers 188 --save_type Fakequant --save_path "$P" \
    >"$T/skip.log" 2>&1 || { fail "slim320 --skip_layers 188: calibration"; tail -5 "$T/skip.log"; }
grep -q '"188"' "${P}_fake_quant_model.prototxt" && ! grep -q 'object_layer: "188"' "${P}_fake_quant_model.prototxt" ||
    fail "slim320: layer 188 should be kept in float"
[ -e "${P}_deploy_model.prototxt" ] && fail "--save_type Fakequant wrote a deploy model"
for img in "$FACES"/*.jpg; do
    b=$(basename "$img" .jpg)
    for k in float fake; do
        if [ $k = float ]; then m=$net.prototxt wt=$net.caffemodel; else
            m=${P}_fake_quant_model.prototxt wt=${P}_fake_quant_weights.caffemodel; fi
        # shellcheck disable=SC2086
        "$CALQ" run --model "$m" --weights "$wt" --image "input=$img" $IMG --input-shape input:1,3,240,320 \
            --output-dir "$T/skip/$b/$k" >/dev/null 2>&1 || fail "slim320 skip $b: calq run $k"
    done
done
$PY - "$T/skip" <<'PYEOF' || fail "slim320 with layer 188 in float: fake-quant vs float below 0.99"
import glob, os, sys
import numpy as np
ok = True
for o in ("boxes", "scores"):
    c = []
    for photo in sorted(glob.glob(os.path.join(sys.argv[1], "*", "float"))):
        a = np.load(os.path.join(photo, o + ".npy")).ravel().astype(np.float64)
        b = np.load(os.path.join(photo, "..", "fake", o + ".npy")).ravel().astype(np.float64)
        c.append(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
    print("  slim320 (layer 188 in float) %-6s %d photos: fake-quant vs float cosine min %.5f, mean %.5f"
          % (o, len(c), min(c), sum(c) / len(c)))
    ok = ok and len(c) > 0 and min(c) >= 0.99
sys.exit(0 if ok else 1)
PYEOF

[ $fails -eq 0 ] && echo "save_caffe: all passed" || echo "save_caffe: $fails failure(s)"
[ $fails -eq 0 ]
