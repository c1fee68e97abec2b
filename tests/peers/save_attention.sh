#!/bin/sh
# Attention (issue 12, item 4): a torch model with LayerNorm and two-head self-attention
# (MatMul - Softmax - MatMul: MatMuls with two variable inputs, amct-reference.md §8.1) exported
# with a dynamic sequence axis at opsets 11, 13 and 17 (17's LayerNormalization where calq has it),
# calibrated at T = 20 and saved in every format; then
#   (a) the record holds both inputs of each attention MatMul ("<layer>" and "<layer>:1"),
#       symmetric (offset_d 0), and save works although the shapes depend on T (opset 11: the
#       Softmax axis is checked on the shapes calibration ran with when the opset is raised);
#   (b) onnx.checker passes on the fake-quant, QDQ and QOperator files; onnxruntime-node runs them
#       at T = 20 and T = 33 (the axis stays dynamic), calq runs all five files, with the same
#       outputs as onnxruntime (cosine >= 0.9999);
#   (c) fake-quant vs float: cosine >= 0.99; the deploy file's quantized activations equal the
#       fake-quant file's within one step (ascend_compare.py);
#   (d) QDQ and QOperator: every int8 tensor of calq within one step of onnxruntime's;
#   (e) a config asking an attention MatMul for asymmetric activations is refused (§8.1).
# Usage: save_attention.sh CALQ
set -u
CALQ=$1
HERE=$(cd "$(dirname "$0")" && pwd)
PY=/usr/bin/python3
CMP="$PY $HERE/save_compare.py"
export NODE_PATH=${CALQ_PEERS_DIR:-$HOME/.cache/calq-peers}/node_modules
. "$(dirname "$0")/../support/need.sh"
need_python numpy onnx
$PY -c 'import torch' 2>/dev/null || { echo "SKIP: no python3-torch"; exit 77; }
[ -d "$NODE_PATH/onnxruntime-node" ] || { echo "SKIP: no onnxruntime-node in $NODE_PATH"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}"/calq_attn.XXXXXX)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ORT_OPT=$T/ort_opt.js
sed -n '/^cat >"\$ORT_OPT" <<JSEOF$/,/^JSEOF$/p' "$HERE/save_onnx.sh" | sed '1d;$d' | sed "s|\$HERE|$HERE|g" >"$ORT_OPT"
$PY "$HERE/attention_model.py" "$T" 11 13 17 >"$T/torch.log" 2>&1 || { cat "$T/torch.log"; echo "FAIL: torch export"; exit 1; }
ran=0
for opset in 11 13 17; do
    M=$T/attn$opset.onnx
    P=$T/o$opset/m
    "$CALQ" calibration --model "$M" --npy "$T/data" --batch_num 4 --input_shape x:1,8,20 --save_path "$P" \
        >"$T/calib.log" 2>&1
    if [ $? -ne 0 ]; then
        if grep -q "does not implement" "$T/calib.log"; then
            echo "opset $opset: skipped: $(grep -A1 'does not implement' "$T/calib.log" | tail -1)"
            continue
        fi
        fail "opset $opset: calibration or save"; tail -5 "$T/calib.log"; continue
    fi
    ran=$((ran + 1))
    # (a) both inputs of both attention MatMuls, offset 0
    n2=$(grep -c 'key: ".*:1"' "${P}_record.txt")
    [ "$n2" = 2 ] || fail "opset $opset: $n2 '<layer>:1' keys in the record, expected 2"
    $PY - "${P}_record.txt" <<'PYEOF' || fail "opset $opset: attention MatMul factors not symmetric"
import re, sys
t = open(sys.argv[1]).read()
second = re.findall(r'key: "([^"]+):1"', t)
for k in second:
    for key in (k, k + ":1"):
        b = re.search(r'key: "%s"\s*value \{([^}]*)\}' % re.escape(key), t).group(1)
        assert "offset_d: 0" in b and "scale_w" not in b, (key, b)
print("record: %d attention MatMuls, both inputs symmetric, no scale_w" % len(second))
PYEOF
    for f in fake_quant_model qdq qoperator; do $CMP check "${P}_$f.onnx" || fail "opset $opset: $f fails onnx.checker"; done
    $PY "$HERE/ascend_compare.py" check-deploy "${P}_deploy_model.onnx" || fail "opset $opset: deploy fails onnx.checker"
    for len in 20 33; do
        in=$T/data/1.npy
        [ $len = 33 ] && in=$T/long.npy
        d=$T/o$opset/run$len
        for f in float fake_quant_model deploy_model qdq qoperator; do
            m=${P}_$f.onnx
            [ $f = float ] && m=$M
            mkdir -p "$d/$f/ort" "$d/$f/calq"
            if [ $f != deploy_model ]; then
                node "$HERE/ort_run.js" "$m" "$d/$f/ort" "x=$in" || fail "opset $opset T=$len: onnxruntime runs $f"
            fi
            dump=
            [ $f = fake_quant_model ] || [ $f = deploy_model ] && dump=--dump-all
            "$CALQ" run "$m" --input "x=$in" --output-dir "$d/$f/calq" $dump >"$T/run.log" 2>&1 ||
                { fail "opset $opset T=$len: calq runs $f"; tail -3 "$T/run.log"; }
            [ $f != deploy_model ] && { $CMP cosine "$d/$f/ort" "$d/$f/calq" "opset $opset T=$len $f calq vs onnxruntime" \
                0.9999 || fail "opset $opset T=$len: $f calq vs onnxruntime"; }
        done
        for f in fake_quant_model qdq qoperator; do
            $CMP cosine "$d/float/ort" "$d/$f/ort" "opset $opset T=$len $f vs float" 0.99 ||
                fail "opset $opset T=$len: $f vs float"
        done
        $PY "$HERE/ascend_compare.py" layers "${P}_deploy_model.onnx" "$d/deploy_model/calq" "$d/fake_quant_model/calq" \
            "opset $opset T=$len" || fail "opset $opset T=$len: deploy vs fake-quant beyond one step"
    done
    # (d) int8 tensors, calq vs onnxruntime (as save_onnx.sh probes them)
    d=$T/o$opset/int8
    mkdir -p "$d/ort_qop" "$d/calq_qop" "$d/ort_qdq" "$d/calq_qdq"
    $CMP probe "${P}_qoperator.onnx" "$d/probe_qop.onnx" &&
        node "$HERE/ort_run.js" "$d/probe_qop.onnx" "$d/ort_qop" "x=$T/data/2.npy" &&
        "$CALQ" run "$d/probe_qop.onnx" --input "x=$T/data/2.npy" --output-dir "$d/calq_qop" >/dev/null 2>&1 ||
        fail "opset $opset: running the probed QOperator file"
    printf 'opset %s qoperator: ' "$opset"
    $CMP steps "$d/ort_qop" "$d/calq_qop" 1 || fail "opset $opset: QOperator int8 tensors beyond one step"
    node "$ORT_OPT" save "${P}_qdq.onnx" "$d/ort_opt.onnx" &&
        $CMP ortprobe "${P}_qdq.onnx" "$d/ort_opt.onnx" "$d/probe_qdq.onnx" "$d/probe_qdq.json" &&
        node "$ORT_OPT" run "$d/probe_qdq.onnx" "$d/ort_qdq" "x=$T/data/2.npy" &&
        "$CALQ" run "${P}_qdq.onnx" --input "x=$T/data/2.npy" --output-dir "$d/calq_qdq" \
            --dump "$($CMP qnames "${P}_qdq.onnx")" >/dev/null 2>&1 || fail "opset $opset: running the QDQ file"
    printf 'opset %s qdq (fused as onnxruntime fuses it): ' "$opset"
    $CMP ortsteps "$d/probe_qdq.json" "$d/ort_qdq" "$d/calq_qdq" 1 || fail "opset $opset: QDQ int8 tensors beyond one step"
done
[ $ran -ge 2 ] || fail "only $ran opset(s) ran"

# (e) asymmetric activations asked of an attention MatMul
C=$T/o13/m_config.json
L=$(grep -o 'key: "[^"]*:1"' "$T/o13/m_record.txt" | head -1 | sed 's/^key: "//; s/:1"$//')
$PY - "$C" "$L" "$T/asym.json" <<'PYEOF'
import json, sys
c = json.load(open(sys.argv[1]))
c[sys.argv[2]]["activation_quant_params"]["asymmetric"] = True
json.dump(c, open(sys.argv[3], "w"), indent=1)
PYEOF
"$CALQ" calibration --model "$T/attn13.onnx" --npy "$T/data" --batch_num 4 --input_shape x:1,8,20 --config "$T/asym.json" \
    --save_path "$T/asym/m" >"$T/asym.log" 2>&1 && fail "asymmetric attention MatMul accepted"
grep -q "quantizes as INT8 symmetric only" "$T/asym.log" || { fail "asymmetric: message"; cat "$T/asym.log"; }
echo "asymmetric attention MatMul: $(grep -o "asymmetric is true.*" "$T/asym.log" | head -c 200)"

[ $fails -eq 0 ] && echo "save_attention: all passed" || echo "save_attention: $fails failure(s)"
[ $fails -eq 0 ]
