#!/bin/sh
# calq calibration end to end (issue 5): real models on the shared photos, the seed failure
# scenarios of user-journeys §2 with their exit status and message, and the record being
# byte-identical for any thread count. Usage: calib_cli.sh CALQ SHARED_DIR
set -u
CALQ=$1
SHARED=$2
T=$(mktemp -d "${TMPDIR:-/tmp}"/calq_calib_cli.XXXXXX)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
UF=$SHARED/models/ultraface
MT=$SHARED/models/mtcnn
FACES=$SHARED/data/faces
. "$(dirname "$0")/../support/need.sh"
need_files "$UF/version-slim-320.onnx" "$MT/det1.prototxt" "$FACES/ultraface_1.jpg"

# run NAME EXPECTED_RC ARGS...: runs calq calibration, keeps stderr in $T/NAME.log
run() {
    name=$1 want=$2
    shift 2
    "$CALQ" calibration "$@" >"$T/$name.log" 2>&1
    rc=$?
    if [ "$want" = 0 ] && [ $rc -ne 0 ]; then fail "$name: exit $rc"; sed 's/^/    /' "$T/$name.log" | tail -20; fi
    if [ "$want" != 0 ] && [ $rc -eq 0 ]; then fail "$name: succeeded, expected a failure"; fi
}
has() { grep -qF -- "$2" "$T/$1.log" || { fail "$1: no '$2' in the output"; sed 's/^/    /' "$T/$1.log" | tail -20; }; }
hasnt() { if grep -qF -- "$2" "$T/$1.log"; then fail "$1: unexpected '$2'"; fi; }
keys() { grep -c '^  key: ' "$1"; }

# ---- real models --------------------------------------------------------------------------
run uf_onnx 0 --model "$UF/version-slim-320.onnx" --images "$FACES" --resize 320x240 --mean 127 --std 128 \
    --input_shape input:2,3,240,320 --batch_num 2 --threads 1 --save_path "$T/uf/t1"
has uf_onnx "Doing layer Conv_0 data calibration: data already stored 2/2"
has uf_onnx "Do layer Conv_0 data calibration succeeded!"
has uf_onnx "calq: calibrated 42 layers in"
[ "$(keys "$T/uf/t1_record.txt")" = 42 ] || fail "uf_onnx: the record does not list all 42 quantizable layers"
[ -s "$T/uf/t1_config.json" ] || fail "uf_onnx: no config written"
run uf_onnx_t2 0 --model "$UF/version-slim-320.onnx" --images "$FACES" --resize 320x240 --mean 127 --std 128 \
    --input_shape input:2,3,240,320 --batch_num 2 --threads 2 --save_path "$T/uf/t2"
cmp -s "$T/uf/t1_record.txt" "$T/uf/t2_record.txt" || fail "the record differs between --threads 1 and --threads 2"

for d in det1:12 det2:24 det3:48; do
    n=${d%%:*} s=${d##*:}
    run "$n" 0 --model "$MT/$n.prototxt" --weights "$MT/$n.caffemodel" --images "$FACES" --resize "${s}x$s" \
        --mean 127.5 --std 128 --input_shape "data:1,3,$s,$s" --batch_num 3 --save_path "$T/mt/$n"
    has "$n" "calibration, already store 3/3 data."
    has "$n" "activation calibration success!"
    want=$("$CALQ" inspect --model "$MT/$n.prototxt" --weights "$MT/$n.caffemodel" 2>/dev/null | sed -n 's/^quantizable layers: //p')
    [ "$(keys "$T/mt/${n}_record.txt")" = "$want" ] || fail "$n: the record does not list all $want quantizable layers"
done
run uf_caffe 0 --model "$UF/slim-320.prototxt" --weights "$UF/slim-320.caffemodel" --images "$FACES" \
    --resize 320x240 --mean 127 --std 128 --batch_num 2 --save_path "$T/ufc/uf"
has uf_caffe "activation calibration success!"

# ---- seed scenarios (det1: 1x3x12x12) -----------------------------------------------------
M="--model $MT/det1.prototxt --weights $MT/det1.caffemodel --input_shape data:1,3,12,12"
python3 - "$T" <<'EOF'
import os, random, struct, sys
t = sys.argv[1]
random.seed(5)
n = 3 * 12 * 12
def write(path, vals):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    open(path, 'wb').write(struct.pack('<%df' % len(vals), *vals))
write(t + '/inf/0000.bin', [random.uniform(-1, 1) for _ in range(n)])
v = [random.uniform(-1, 1) for _ in range(n)]
v[200] = float('inf')
write(t + '/inf/0001.bin', v)
for i in range(2):
    write(t + '/big/%04d.bin' % i, [random.uniform(-1, 1) * 1e13 for _ in range(n)])
    write(t + '/ok/%04d.bin' % i, [random.uniform(-1, 1) for _ in range(n)])
    write(t + '/two/%04d.bin' % i, [random.uniform(-1, 1) * 1e13 for _ in range(192)])
write(t + '/one/0000.bin', [random.uniform(-1, 1) for _ in range(n)])
EOF
mkdir -p "$T/out"
echo "an existing record" >"$T/out/keep_record.txt"

# (a) +inf in a .bin file: the first affected layer, the batch, the file and the sample
run inf 1 $M --data_dir "$T/inf/" --batch_num 2 --save_path "$T/out/keep"
has inf "layers cannot be quantized: their activation range is illegal (error -65519, NOT_SUPPORT)"
has inf "conv1    input contains 0 NaN, 1 +inf, 0 -inf values"
has inf "IFMR calibration data has inf value."
has inf "first +inf in batch 1 ($T/inf/0001.bin, sample 0)"
has inf "\"skip_layers\": [\"conv1\", \"conv2\", \"conv3\", \"conv4-1\", \"conv4-2\"]"
has inf "calq: nothing written."

# (b) inputs scaled by 1e13: scale > 1/FLT_EPSILON, with and without activation offset
run big 1 $M --data_dir "$T/big/" --batch_num 2 --save_path "$T/out/keep"
has big "Not support scale greater than 1 / FLT_EPSILON. currentScale:"
has big "[IFMR with offset]"
has big "above 1/FLT_EPSILON (8388608)"
has big "first seen in batch"
has big "(or run again with --skip-illegal)"
"$CALQ" create-config --model "$MT/det1.prototxt" --weights "$MT/det1.caffemodel" --activation_offset false --batch_num 2 --config_file "$T/sym.json" 2>/dev/null ||
    fail "create-config --activation_offset false"
run big_sym 1 $M --data_dir "$T/big/" --config "$T/sym.json" --save_path "$T/out/keep"
has big_sym "Not support scale greater than 1 / FLT_EPSILON. currentScale:"
has big_sym "[IFMR without offset]"
run big_sym2 1 $M --data_dir "$T/big/" --batch_num 2 --activation_offset false --save_path "$T/out/keep"
has big_sym2 "[IFMR without offset]"

# (c) batch_num 2 with one batch: the preflight stops before any inference
run short 1 $M --data_dir "$T/one/" --batch_num 2 --save_path "$T/out/keep"
has short "calq: error: batch_num is 2 but $T/one/ holds 1 batch"
has short "Add calibration batches, or lower --batch_num"
hasnt short "Doing layer"

# every failure above left the existing record alone and wrote nothing else
[ "$(cat "$T/out/keep_record.txt")" = "an existing record" ] || fail "a failed run changed an existing record"
[ -e "$T/out/keep_config.json" ] && fail "a failed run wrote a config"

# (d) --skip-illegal: a net whose one pooling layer sees 1e13 and whose other sees 10
cat >"$T/two.prototxt" <<'EOF'
name: "two_pools"
input: "data"
input_shape { dim: 1 dim: 3 dim: 8 dim: 8 }
layer { name: "pool_big" type: "Pooling" bottom: "data" top: "p1" pooling_param { pool: AVE kernel_size: 2 stride: 2 } }
layer { name: "shrink" type: "Power" bottom: "data" top: "s" power_param { scale: 1e-12 } }
layer { name: "pool_small" type: "Pooling" bottom: "s" top: "p2" pooling_param { pool: AVE kernel_size: 2 stride: 2 } }
EOF
: >"$T/empty.caffemodel"
run strict 1 --model "$T/two.prototxt" --weights "$T/empty.caffemodel" --data_dir "$T/two/" --batch_num 2 \
    --save_path "$T/out/two_strict"
has strict "1 layer cannot be quantized"
has strict "\"skip_layers\": [\"pool_big\"]"
[ -e "$T/out/two_strict_record.txt" ] && fail "strict: a record was written"
run skip 0 --model "$T/two.prototxt" --weights "$T/empty.caffemodel" --data_dir "$T/two/" --batch_num 2 \
    --save_path "$T/out/two" --skip-illegal
has skip "--skip-illegal: 1 layer left in float"
has skip "calq: skipped (kept in float, quant_enable false in $T/out/two_config.json): pool_big"
grep -q 'key: "pool_big"' "$T/out/two_record.txt" && fail "skip: pool_big is in the record"
grep -q 'key: "pool_small"' "$T/out/two_record.txt" || fail "skip: pool_small is missing from the record"
grep -A1 '"pool_big"' "$T/out/two_config.json" | grep -q '"quant_enable": false' ||
    fail "skip: the config written does not disable pool_big"

# (e) a layer in skip_layers is absent from the record
run skipped 0 $M --data_dir "$T/ok/" --batch_num 2 --skip_layers conv2,conv4-1 --save_path "$T/out/e"
grep -q 'key: "conv2"' "$T/out/e_record.txt" && fail "skip_layers: conv2 is in the record"
grep -q 'key: "conv4-1"' "$T/out/e_record.txt" && fail "skip_layers: conv4-1 is in the record"
[ "$(keys "$T/out/e_record.txt")" = 3 ] || fail "skip_layers: expected 3 layers in the record"

# HFMG where the config asks for it: det1's conv1 (it reads the net input, so its data is the
# .bin file itself) gets exactly what `calq factors --algo hfmg` computes on that data.
mkdir -p "$T/hf/calib"
/usr/bin/python3 -c "
import numpy as np
a = np.random.default_rng(1).standard_normal((1, 3, 12, 12)).astype(np.float32)
a.tofile('$T/hf/calib/0000.bin'); np.save('$T/hf/data.npy', a)"
"$CALQ" create-config --model "$MT/det1.prototxt" --weights "$MT/det1.caffemodel" --config_file "$T/hf/c.json" \
    >/dev/null 2>&1 || fail "hfmg: create-config failed"
/usr/bin/python3 -c "
import json
c = json.load(open('$T/hf/c.json'))
c['conv1']['activation_quant_params'] = {'num_bits': 8, 'act_algo': 'hfmg', 'num_of_bins': 4096, 'asymmetric': True}
json.dump(c, open('$T/hf/c.json', 'w'), indent=4)"
"$CALQ" calibration --model "$MT/det1.prototxt" --weights "$MT/det1.caffemodel" --config "$T/hf/c.json" \
    --data_dir "$T/hf/calib/" --input_shape data:1,3,12,12 --data_types float32 --batch_num 1 \
    --save_path "$T/hf/out/d" >"$T/hfmg.log" 2>&1 || fail "hfmg: calibration failed"
want=$("$CALQ" factors --algo hfmg --input "$T/hf/data.npy" | awk '/^scale:/ {s=$2} /^offset:/ {o=$2} END {print s, o}')
got=$(grep -A3 'key: "conv1"' "$T/hf/out/d_record.txt" | awk '/scale_d:/ {s=$2} /offset_d:/ {o=$2} END {print s, o}')
# the record prints the shortest round-trip float, factors prints %.9g: compare as float32
/usr/bin/python3 -c "
import numpy as np, sys
w, g = '$want'.split(), '$got'.split()
ok = len(w) == 2 and len(g) == 2 and np.float32(w[0]) == np.float32(g[0]) and int(w[1]) == int(g[1])
print('hfmg: conv1 record', g, 'calq factors', w, 'equal' if ok else 'DIFFER'); sys.exit(0 if ok else 1)" ||
    fail "hfmg: the record's conv1 factors differ from calq factors"

[ $fails -eq 0 ] && echo "calib_cli: all checks passed"
exit $((fails > 0))
