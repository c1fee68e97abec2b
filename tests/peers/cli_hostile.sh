#!/bin/sh
# Hostile command lines (issue 14 items 1, 2, 7): every bad value is a usage error (exit 2)
# naming the flag and the value, thread counts are bounded, long names are cut, save and
# create-config make their folder, a config that enables no layer saves nothing, and no failed
# run writes a file or touches an existing output. Models are made here: a tiny ONNX (Conv,
# Relu, AveragePool, with Debian's python3-onnx) and a one-pooling-layer Caffe net.
# Usage: cli_hostile.sh CALQ
set -u
CALQ=$1
PY=/usr/bin/python3
$PY -c "import numpy, onnx" 2>/dev/null || { echo "SKIP: needs /usr/bin/python3 with numpy and onnx"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}"/calq_cli_hostile.XXXXXX)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

cd "$T" || exit 1
$PY - <<'EOF'
import numpy as np, onnx
from onnx import helper, TensorProto, numpy_helper
w = numpy_helper.from_array((np.arange(108, dtype=np.float32).reshape(4, 3, 3, 3) % 7 - 3) / 10, "w")
b = numpy_helper.from_array(np.array([0.1, -0.2, 0.3, 0], np.float32), "b")
g = helper.make_graph([
    helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
    helper.make_node("Relu", ["c"], ["r"], name="relu"),
    helper.make_node("AveragePool", ["r"], ["y"], name="pool", kernel_shape=[2, 2], strides=[2, 2])],
    "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])], [w, b])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), "tiny.onnx")
# the same Conv with its weight the DequantizeLinear of int8 (an already quantized model): no layer
# calq quantizes, which the message must say instead of blaming the config (a float16 weight behind
# a Cast was this case until calq read it as a float32 weight: cli.fp16_weights)
w8 = numpy_helper.from_array((np.arange(108).reshape(4, 3, 3, 3) % 7 - 3).astype(np.int8), "w8")
ws = numpy_helper.from_array(np.array(0.1, np.float32), "ws")
g = helper.make_graph([
    helper.make_node("DequantizeLinear", ["w8", "ws"], ["w"], name="dq"),
    helper.make_node("Conv", ["x", "w"], ["y"], name="conv", pads=[1, 1, 1, 1])],
    "dqw", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 16, 16])], [w8, ws])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), "dqw.onnx")
np.save("x.npy", np.random.RandomState(0).rand(1, 3, 16, 16).astype(np.float32))
np.save("p.npy", np.random.RandomState(1).rand(1, 3, 8, 8).astype(np.float32))
EOF
cat >pool.prototxt <<'EOF'
name: "pool"
input: "data"
input_shape { dim: 1 dim: 3 dim: 8 dim: 8 }
layer { name: "pool" type: "Pooling" bottom: "data" top: "p" pooling_param { pool: AVE kernel_size: 2 stride: 2 } }
EOF
: >empty.caffemodel
mkdir keep && echo "an earlier record" >keep/k_record.txt && echo "an earlier model" >keep/k_qdq.onnx
snapshot() { (cd "$T" && find . -path ./log -prune -o -print | sort); }
BEFORE=$(snapshot)

# expect NAME RC NEEDLE CMD...: runs calq CMD..., checks the exit status and one line of stderr
expect() {
    name=$1 want=$2 needle=$3
    shift 3
    "$CALQ" "$@" >"$T/log" 2>&1
    rc=$?
    [ $rc = "$want" ] || { fail "$name: exit $rc, expected $want"; sed 's/^/    /' "$T/log" | head -5; return; }
    grep -qF -- "$needle" "$T/log" || { fail "$name: no '$needle' in:"; head -c 600 "$T/log" | sed 's/^/    /'; }
}
# usage NAME NEEDLE CMD...: a usage error that must leave every file as it was
usage() {
    name=$1 needle=$2
    shift 2
    expect "$name" 2 "$needle" "$@"
    [ "$(snapshot)" = "$BEFORE" ] || { fail "$name: files changed:"; snapshot | sed 's/^/    /'; }
}
CAL="calibration --model tiny.onnx --npy x.npy --save_path keep/k"

# ---- numbers: the whole string, in range (item 2) --------------------------------------------
for v in 1.5 3abc 1,2 0 -1 4294967297 " 3" 0x10; do
    usage "batch_num '$v'" "--batch_num must be a whole number from 1 to 1000000000, not '$v'" $CAL --batch_num "$v"
done
usage "batch_num=" "--batch_num needs a value (it is empty)" $CAL --batch_num=
usage "batch_num missing" "--batch_num needs a value" $CAL --batch_num
usage "create-config batch_num" "--batch_num must be a whole number from 1 to 1000000000, not '2.0'" \
    create-config tiny.onnx --config_file keep/c.json --batch_num 2.0
usage "factors max-percentile" "--max-percentile must be a number in (0.5, 1], not 'abc'" \
    factors --input x.npy --max-percentile abc
usage "factors max-percentile 0.5" "--max-percentile must be a number in (0.5, 1], not '0.5'" \
    factors --input x.npy --max-percentile 0.5
usage "factors search-step" "--search-step must be a number above 0, not '0.01x'" factors --input x.npy --search-step 0.01x
usage "factors search-range" "--search-range must be A,B with 0 < A < B (e.g. 0.7,1.3), not '1.3,0.7'" \
    factors --input x.npy --search-range 1.3,0.7
usage "factors bins" "--bins must be 1024, 2048, 4096 or 8192, not '1000'" factors --input x.npy --bins 1000
usage "factors batches" "--batches must be a whole number from 1 to 1000000000, not '2e3'" factors --input x.npy --batches 2e3
usage "factors group" "--group must be a whole number of at least 1, not '1.0'" factors --algo arq --input x.npy --group 1.0
usage "factors num-bits arq" "--num-bits must be a whole number from 2 to 8 for arq" \
    factors --algo arq --input x.npy --num-bits 9
usage "factors algo" "--algo must be ifmr, hfmg, minmax, percentile, kl, mse or arq, not 'IFMRX'" \
    factors --input x.npy --algo IFMRX
# the accuracy search's and compare's numbers go through the same table
usage "target-cosine 1.5" "--target-cosine must be a number in (-1, 1], not '1.5'" $CAL --target-cosine 1.5
usage "target-cosine x" "--target-cosine must be a number in (-1, 1], not '0.99x'" $CAL --target-cosine 0.99x
usage "target nan" "--target must be a number, not 'nan'" $CAL --evaluator "echo 1" --target nan
usage "max-float-layers 1.5" "--max-float-layers must be a whole number from 1 to 1000000, not '1.5'" \
    $CAL --target-cosine 0.9 --max-float-layers 1.5
usage "time-budget 0" "--time-budget must be a number in (0, 1e+09], not '0'" $CAL --target-cosine 0.9 --time-budget 0
usage "lookahead 0" "--lookahead must be a whole number from 1 to 10000, not '0'" $CAL --target-cosine 0.9 --lookahead 0
usage "act_algo" "--act_algo must be ifmr, hfmg, minmax, percentile, kl, mse or auto, not 'best'" $CAL --act_algo best
usage "strict alone" "go with --target-cosine or --evaluator" $CAL --strict
usage "lower-is-better=1" "--lower-is-better takes no value" $CAL --evaluator "echo 1" --target 1 --lower-is-better=1
CMP="compare --model tiny.onnx --quantized tiny.onnx --npy x.npy"
usage "compare top -1" "--top must be a whole number of at least 0, not '-1'" $CMP --top -1
usage "compare batch_num 0" "--batch_num must be a whole number from 1 to 1000000000, not '0'" $CMP --batch_num 0
usage "compare threads 2.5" "--threads must be a whole number of at least 1, not '2.5'" $CMP --threads 2.5
usage "compare quantized" "--quantized is required" compare --model tiny.onnx --npy x.npy
usage "scale" "--scale must be a number, not '1/255'" run tiny.onnx --image x=a.jpg --scale 1/255 --output-dir keep/o
usage "mean" "--mean must be one number or three separated by commas, not '1,2'" \
    run tiny.onnx --image x=a.jpg --mean 1,2 --output-dir keep/o
usage "std 0" "--std must be one non-zero number or three separated by commas, not '1,0,1'" \
    run tiny.onnx --image x=a.jpg --std 1,0,1 --output-dir keep/o
usage "resize" "--resize must be WIDTHxHEIGHT, two whole numbers from 1 to 65536, e.g. 320x240, not '320x240x'" \
    $CAL --images . --resize 320x240x
usage "input_shape" "--input_shape must be NAME:d0,d1,... with positive dims" $CAL --input_shape x:1,3,16,16,
usage "input_shape dim" "not 'x:1,3,0,16'" $CAL --input_shape x:1,3,0,16
usage "input_shape huge" "not 'x:1,3,99999999999,16'" $CAL --input_shape x:1,3,99999999999,16
usage "activation_offset" "--activation_offset must be true or false, not 'yes'" $CAL --activation_offset yes
usage "save_type" "--save_type must be Both, Fakequant, Deploy or None, not 'fake'" $CAL --save_type fake
usage "switch with value" "--skip-illegal takes no value" $CAL --skip-illegal=true
usage "unknown option" "unknown option '--batchnum' ('calq calibration --help' lists the options)" $CAL --batchnum 2
usage "stray argument" "unexpected argument 'extra'" $CAL extra
usage "required" "--save_path is required" calibration --model tiny.onnx --npy x.npy
# --save_path= used to write _record.txt and friends into the working folder
usage "save_path=" "--save_path needs a value (it is empty)" calibration --model tiny.onnx --npy x.npy --save_path=
usage "save save_path=" "--save_path needs a value (it is empty)" \
    save --model tiny.onnx --record keep/k_record.txt --save_path=
usage "output-dir=" "--output-dir needs a value (it is empty)" run tiny.onnx --input x.npy --output-dir=
# a long value is cut in the message
LONG=$($PY -c "print('9' * 100000)")
usage "long value" "--batch_num must be a whole number from 1 to 1000000000, not '999" $CAL --batch_num "$LONG"
[ "$(wc -c <"$T/log")" -lt 400 ] || fail "long value: a $(wc -c <"$T/log")-byte message"

# ---- threads (item 1): junk and <= 0 refused, huge counts capped, fast ------------------------
for v in 0 -3 abc 4294967297 2.5; do
    usage "threads '$v'" "--threads must be a whole number of at least 1, not '$v'" run tiny.onnx --input x.npy \
        --output-dir keep/o --threads "$v"
done
LIMIT=$(($(getconf _NPROCESSORS_ONLN) * 4))
for v in 100000 2147483647 1000; do
    t0=$(date +%s%N)
    expect "run threads $v" 0 "--threads $v is more than calq uses here (4 per online processor): using $LIMIT" \
        run tiny.onnx --input x.npy --output-dir "$T/run$v" --threads "$v"
    ms=$((($(date +%s%N) - t0) / 1000000))
    [ $ms -lt 5000 ] || fail "run --threads $v took $ms ms"
    expect "calibration threads $v" 0 "using $LIMIT" calibration --model tiny.onnx --npy x.npy \
        --save_path "$T/cal$v/t" --threads "$v"
    cmp -s "$T/cal$v/t_record.txt" "$T/cal100000/t_record.txt" || fail "threads $v: another record"
    expect "factors threads $v" 0 "using $LIMIT" factors --input x.npy --threads "$v"
done
cmp -s "$T/run1000/y.npy" "$T/run2147483647/y.npy" || fail "run: outputs differ between thread counts"
rm -rf "$T"/run* "$T"/cal*

# ---- item 7: folders, a config without layers, long names ------------------------------------
expect "calibration" 0 "calq: wrote" calibration --model tiny.onnx --npy x.npy --save_path "$T/ok/t" --save_type None
expect "save makes its folder" 0 "new/deeper/t_qdq.onnx" save --model tiny.onnx --record "$T/ok/t_record.txt" \
    --save_path "$T/new/deeper/t"
[ -s "$T/new/deeper/t_qdq.onnx" ] || fail "save: no model in the new folder"
expect "create-config makes its folder" 0 "wrote $T/cc/sub/c.json" create-config tiny.onnx --config_file "$T/cc/sub/c.json"
[ -s "$T/cc/sub/c.json" ] || fail "create-config: no config in the new folder"
$PY - "$T" <<'EOF'
import json, sys
t = sys.argv[1]
c = json.load(open(t + "/ok/t_config.json"))
for v in c.values():
    if isinstance(v, dict): v["quant_enable"] = False
json.dump(c, open(t + "/off.json", "w"))
rec = open(t + "/ok/t_record.txt").read()
open(t + "/bigkey.txt", "w").write(rec.replace('key: "conv"', 'key: "%s"' % ("L" * 5000000), 1))
c = json.load(open(t + "/ok/t_config.json"))
c["K" * 5000000] = c.pop("conv")
json.dump(c, open(t + "/bigkey.json", "w"))
EOF
cp keep/k_record.txt keep/k_record.orig
expect "save, every layer disabled" 1 "the config enables no layer, so there is nothing to save (every layer is skipped" \
    save --model tiny.onnx --record "$T/ok/t_record.txt" --config "$T/off.json" --save_path "$T/off/sub/t"
[ -e "$T/off" ] && fail "save, every layer disabled: wrote $(find "$T/off")"
expect "save over outputs, every layer disabled" 1 "nothing to save" \
    save --model tiny.onnx --record "$T/ok/t_record.txt" --config "$T/off.json" --save_path keep/k
expect "calibration, every layer disabled" 1 "the config enables no layer, so there is nothing to calibrate" \
    calibration --model tiny.onnx --npy x.npy --config "$T/off.json" --save_path keep/k
expect "calibration, no quantizable layer" 1 "the model has no layer calq quantizes, so there is nothing to calibrate" \
    calibration --model dqw.onnx --npy x.npy --save_path "$T/dqw/t"
[ -e "$T/dqw" ] && fail "calibration, no quantizable layer: wrote $(find "$T/dqw")"
expect "record with a 5 MB key" 1 "find LLLLLLLL" save --model tiny.onnx --record "$T/bigkey.txt" --save_path keep/k
grep -q 'L\.\.\.L' "$T/log" && [ "$(wc -c <"$T/log")" -lt 1000 ] || fail "5 MB key: not cut ($(wc -c <"$T/log") bytes)"
expect "config with a 5 MB key" 1 "bigkey.json: the model has no layer 'KKKKKKKK" \
    calibration --model tiny.onnx --npy x.npy --config "$T/bigkey.json" --save_path keep/k
grep -q 'K\.\.\.K' "$T/log" && [ "$(wc -c <"$T/log")" -lt 1000 ] || fail "5 MB config key: not cut"
DEEP=$($PY -c "print('d/' * 3000)")
expect "huge save path" 1 "cannot create the folder of --save_path d/d/d/" \
    save --model tiny.onnx --record "$T/ok/t_record.txt" --save_path "${DEEP}t"
grep -q 'd/\.\.\.d/' "$T/log" && [ "$(wc -c <"$T/log")" -lt 1000 ] || fail "huge path: not cut"
expect "huge record path" 1 "cannot open d/d/d/" save --model tiny.onnx --record "${DEEP}r.txt" --save_path keep/k
grep -q 'd/\.\.\.d/' "$T/log" && [ "$(wc -c <"$T/log")" -lt 1000 ] || fail "huge record path: not cut"
cmp -s keep/k_record.txt keep/k_record.orig || fail "a failed run changed an existing record"
[ "$(cat keep/k_qdq.onnx)" = "an earlier model" ] || fail "a failed run changed an existing model"
rm -rf keep/k_record.orig ok new cc off.json bigkey.txt bigkey.json
[ "$(snapshot)" = "$BEFORE" ] || { fail "failed runs left files:"; snapshot | sed 's/^/    /'; }

# ---- Caffe: the same rules on the other frontend ---------------------------------------------
usage "caffe batch_num" "--batch_num must be a whole number from 1 to 1000000000, not '2x'" calibration \
    --model pool.prototxt --weights empty.caffemodel --npy p.npy --save_path keep/k --batch_num 2x
expect "caffe threads" 0 "using $LIMIT" calibration --model pool.prototxt --weights empty.caffemodel --npy p.npy \
    --save_path "$T/caffe/p" --threads 2147483647

[ $fails -eq 0 ] && echo "cli_hostile: all passed" || echo "cli_hostile: $fails failure(s)"
[ $fails -eq 0 ]
