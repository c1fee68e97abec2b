#!/bin/sh
# DMQ balancing (issue 12, item 2; amct-reference.md §7.2 dmq_balancer_param, §7.3 dmq_balancer) on
# two torch models with 50x activation outliers on a few input channels (dmq_model.py: a CNN with
# a depthwise Conv and a Gemm head, and a token MLP of MatMuls), each calibrated without and with
# dmq_balancer_param 0.5 on every layer and saved in every ONNX format; then
#   (a) DMQ improves the fake-quant output cosine vs float on both (calq compare);
#   (b) the fake-quant file's balancing Muls are exactly 1/s and its weights exactly
#       round(W·s / scale_w) of the float weights balanced by hand (dmq_check.py fake-quant);
#       the float model balanced by hand is the float model's function in onnxruntime-node;
#   (c) onnxruntime-node runs the fake-quant, QDQ and QOperator files with calq's outputs
#       (cosine >= 0.9999); the deploy file's quantized activations are within one step of the
#       fake-quant file's (ascend_compare.py);
#   (d) `calq save` from the record (tensor_balance_factor) and config reproduces all four files
#       byte for byte, also from the record alone;
#   (e) bad parameter values are refused with the layer named (JSON and .cfg), and a record
#       whose factors do not fit the layer is refused at save.
# Usage: dmq.sh CALQ
set -u
CALQ=$1
HERE=$(cd "$(dirname "$0")" && pwd)
PY=/usr/bin/python3
CMP="$PY $HERE/save_compare.py"
CHK="$PY $HERE/dmq_check.py"
export NODE_PATH=${CALQ_PEERS_DIR:-$HOME/.cache/calq-peers}/node_modules
$PY -c 'import torch' 2>/dev/null || { echo "SKIP: no python3-torch"; exit 77; }
[ -d "$NODE_PATH/onnxruntime-node" ] || { echo "SKIP: no onnxruntime-node in $NODE_PATH"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}"/calq_dmq.XXXXXX)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
$PY "$HERE/dmq_model.py" "$T" >"$T/torch.log" 2>&1 || { cat "$T/torch.log"; echo "FAIL: torch export"; exit 1; }
FMT=ascend,qdq,qoperator
FILES="fake_quant_model deploy_model qdq qoperator"

# a config from calq's own with dmq_balancer_param on every layer with a weight
with_dmq() { # IN.json OUT.json ALPHA
    $PY - "$@" <<'PYEOF'
import collections, json, sys
c = json.load(open(sys.argv[1]), object_pairs_hook=collections.OrderedDict)
for k, v in list(c.items()):
    if isinstance(v, dict) and "weight_quant_params" in v:
        c[k] = collections.OrderedDict([("quant_enable", v["quant_enable"]), ("dmq_balancer_param", json.loads(sys.argv[3]))] +
                                       [(a, b) for a, b in v.items() if a != "quant_enable"])
json.dump(c, open(sys.argv[2], "w"), indent=4)
PYEOF
}
cos_of() { # FLOAT QUANT DATA
    "$CALQ" compare --model "$1" --quantized "$2" --npy "$3" --batch_num 4 2>/dev/null | awk '/^model outputs/{getline; print $2; exit}'
}

for m in cnn mlp; do
    M=$T/$m.onnx
    D=$T/${m}_data
    "$CALQ" calibration --model "$M" --npy "$D" --batch_num 4 --save_path "$T/plain/$m" --format $FMT >"$T/p.log" 2>&1 ||
        { fail "$m: plain calibration"; tail -3 "$T/p.log"; continue; }
    with_dmq "$T/plain/${m}_config.json" "$T/${m}_dmq.json" 0.5
    P=$T/dmq/$m
    "$CALQ" calibration --model "$M" --npy "$D" --config "$T/${m}_dmq.json" --save_path "$P" --format $FMT >"$T/d.log" 2>&1 ||
        { fail "$m: DMQ calibration"; tail -3 "$T/d.log"; continue; }
    grep -q "tensor_balance_factor" "${P}_record.txt" || fail "$m: no tensor_balance_factor in the record"
    grep -q '"dmq_balancer_param": 0.5' "${P}_config.json" || fail "$m: the config written lacks dmq_balancer_param"
    # (a)
    c0=$(cos_of "$M" "$T/plain/${m}_fake_quant_model.onnx" "$D")
    c1=$(cos_of "$M" "${P}_fake_quant_model.onnx" "$D")
    echo "$m: fake-quant output cosine vs float: plain $c0, DMQ 0.5 $c1"
    awk -v a="$c0" -v b="$c1" 'BEGIN { exit !(b > a) }' || fail "$m: DMQ does not improve the cosine ($c0 -> $c1)"
    # (b)
    $CHK fake-quant "$M" "${P}_fake_quant_model.onnx" "${P}_record.txt" || fail "$m: fake-quant file vs the balancing math"
    $CHK balanced "$M" "${P}_record.txt" "$T/${m}_bal.onnx" >/dev/null || fail "$m: balancing by hand"
    in=$D/1.npy
    mkdir -p "$T/r/$m/float" "$T/r/$m/bal"
    node "$HERE/ort_run.js" "$M" "$T/r/$m/float" "x=$in" && node "$HERE/ort_run.js" "$T/${m}_bal.onnx" "$T/r/$m/bal" "x=$in" ||
        fail "$m: onnxruntime runs the float models"
    $CMP cosine "$T/r/$m/float" "$T/r/$m/bal" "$m balanced by hand vs float" 0.999999 || fail "$m: balancing is not an identity"
    # (c)
    for f in $FILES; do
        mkdir -p "$T/r/$m/$f/ort" "$T/r/$m/$f/calq"
        dump=
        [ $f = fake_quant_model ] || [ $f = deploy_model ] && dump="--dump-all --no-fusion"
        "$CALQ" run "${P}_$f.onnx" --input "x=$in" --output-dir "$T/r/$m/$f/calq" $dump >"$T/run.log" 2>&1 ||
            { fail "$m: calq runs $f"; tail -3 "$T/run.log"; }
        [ $f = deploy_model ] && continue
        node "$HERE/ort_run.js" "${P}_$f.onnx" "$T/r/$m/$f/ort" "x=$in" || fail "$m: onnxruntime runs $f"
        $CMP cosine "$T/r/$m/$f/ort" "$T/r/$m/$f/calq" "$m $f calq vs onnxruntime" 0.9999 || fail "$m: $f calq vs onnxruntime"
        $CMP cosine "$T/r/$m/float" "$T/r/$m/$f/ort" "$m $f vs float" 0.99 || fail "$m: $f vs float"
    done
    $PY "$HERE/ascend_compare.py" layers "${P}_deploy_model.onnx" "$T/r/$m/deploy_model/calq" "$T/r/$m/fake_quant_model/calq" \
        "$m" || fail "$m: deploy vs fake-quant beyond one step"
    # (d)
    for how in config record; do
        mkdir -p "$T/re_$how"
        cfg="--config ${P}_config.json"
        [ $how = record ] && cfg=
        # shellcheck disable=SC2086
        "$CALQ" save --model "$M" --record "${P}_record.txt" $cfg --save_path "$T/re_$how/$m" --format $FMT >"$T/s.log" 2>&1 ||
            { fail "$m: calq save ($how)"; tail -3 "$T/s.log"; continue; }
        for f in $FILES; do
            cmp -s "${P}_$f.onnx" "$T/re_$how/${m}_$f.onnx" || fail "$m: calq save from the $how does not reproduce $f"
        done
    done
done

# (e) refused values, each naming the layer
M=$T/mlp.onnx
D=$T/mlp_data
for v in 0.9 0.1 '"0.5"' true 0 -0.5; do
    with_dmq "$T/plain/mlp_config.json" "$T/bad.json" "$v"
    "$CALQ" calibration --model "$M" --npy "$D" --config "$T/bad.json" --save_path "$T/bad/m" >"$T/bad.log" 2>&1 &&
        fail "dmq_balancer_param $v accepted"
    grep -q "/a/MatMul.*dmq_balancer_param" "$T/bad.log" || { fail "dmq_balancer_param $v: no clear message"; cat "$T/bad.log"; }
    echo "dmq_balancer_param $v: $(grep error "$T/bad.log" | head -1 | sed "s|$T/||")"
done
for v in 1.5 '"x"'; do
    printf 'common_config : { dmq_balancer : { migration_strength : %s } }\n' "$v" >"$T/bad.cfg"
    "$CALQ" calibration --model "$M" --npy "$D" --calibration_config "$T/bad.cfg" --save_path "$T/bad/m" >"$T/bad.log" 2>&1 &&
        fail "migration_strength $v accepted"
    grep -q "bad.cfg:1:.*migration_strength" "$T/bad.log" || { fail "migration_strength $v: no clear message"; cat "$T/bad.log"; }
    echo "migration_strength $v: $(grep error "$T/bad.log" | head -1 | sed "s|$T/||")"
done
# the .cfg form gives the same record as the JSON one
printf 'batch_num : 4\ncommon_config : { dmq_balancer : { migration_strength : 0.5 } }\n' >"$T/ok.cfg"
"$CALQ" calibration --model "$M" --npy "$D" --calibration_config "$T/ok.cfg" --save_path "$T/cfg/m" --save_type None \
    >"$T/cfg.log" 2>&1 || { fail ".cfg dmq_balancer"; tail -3 "$T/cfg.log"; }
cmp -s "$T/cfg/m_record.txt" "$T/dmq/mlp_record.txt" || fail ".cfg dmq_balancer gives another record than the JSON"
# a record whose factors do not fit: one factor short, and a negative one
R=$T/dmq/mlp_record.txt
mkdir -p "$T/bad"
awk '/tensor_balance_factor/ && !done { done = 1; next } { print }' "$R" >"$T/short_record.txt"
"$CALQ" save --model "$M" --record "$T/short_record.txt" --save_path "$T/bad/s" >"$T/bad.log" 2>&1 && fail "a short record saved"
grep -q "input channels" "$T/bad.log" || { fail "short record: no clear message"; cat "$T/bad.log"; }
echo "short record: $(grep error "$T/bad.log" | head -1 | sed "s|$T/||")"
sed '0,/tensor_balance_factor: [0-9]/s/tensor_balance_factor: \([0-9]\)/tensor_balance_factor: -\1/' "$R" >"$T/neg_record.txt"
"$CALQ" save --model "$M" --record "$T/neg_record.txt" --save_path "$T/bad/s" >"$T/bad.log" 2>&1 && fail "a negative factor saved"
grep -q "tensor_balance_factor .*finite and > 0" "$T/bad.log" || { fail "negative factor: no clear message"; cat "$T/bad.log"; }
[ -e "$T/bad/s_qdq.onnx" ] && fail "a refused save wrote a file"

[ $fails -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "ok"
