#!/bin/sh
# Issue 14, item 5: two runs writing one --save_path at the same time. Before the lock, 1 in 24
# such pairs ended with a mixed set (the fake-quant model of one run beside the record of the
# other). Now the second run fails at once with a message naming the lock, or runs after the
# first: every time, the files on disk are exactly one run's. Also item 4 (a killed run's
# temporary files are removed by the next run, which says so) and the lock file being gone.
# usage: concurrent_save.sh CALQ SHARED_DIR [PAIRS]
set -u
CALQ=$1
SHARED=$2
PAIRS=${3:-30}
MODEL=$SHARED/models/ultraface/version-slim-320.onnx
[ -f "$MODEL" ] || { echo "skip: $MODEL missing"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}"/calq_concurrent.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

mkdir -p "$T/img" "$T/a" "$T/b" "$T/run"
cp "$(ls "$SHARED"/data/faces/* | head -1)" "$T/img/" || fail "no photo"
"$CALQ" calibration --model "$MODEL" --images "$T/img" --resize 320x240 --mean 127 --std 128 \
    --save_path "$T/a/u" --save_type None >"$T/calib.log" 2>&1 || { cat "$T/calib.log"; fail "calibration"; }
# record B: the same with another first scale_d, so its models differ
awk 'BEGIN{d=0} /scale_d:/ && !d {sub(/scale_d: .*/, "scale_d: 0.0123"); d=1} {print}' \
    "$T/a/u_record.txt" >"$T/b/u_record.txt"
for r in a b; do
    "$CALQ" save --model "$MODEL" --record "$T/$r/u_record.txt" --save_path "$T/$r/u" >/dev/null 2>&1 ||
        fail "reference save $r"
done
FILES="u_fake_quant_model.onnx u_deploy_model.onnx u_qdq.onnx u_qoperator.onnx"
for f in $FILES; do cmp -s "$T/a/$f" "$T/b/$f" && fail "records a and b give the same $f"; done

same_as() { # the run folder holds exactly set $1
    for f in $FILES; do cmp -s "$T/run/$f" "$T/$1/$f" || return 1; done
    return 0
}
i=0
refused=0
while [ $i -lt "$PAIRS" ]; do
    "$CALQ" save --model "$MODEL" --record "$T/a/u_record.txt" --save_path "$T/run/u" >"$T/la" 2>&1 &
    pa=$!
    "$CALQ" save --model "$MODEL" --record "$T/b/u_record.txt" --save_path "$T/run/u" >"$T/lb" 2>&1 &
    pb=$!
    wait $pa; ra=$?
    wait $pb; rb=$?
    for x in a b; do
        eval rc=\$r$x
        if [ "$rc" != 0 ]; then
            grep -q "is writing the outputs of $T/run/u now (it holds $T/run/u.lock)" "$T/l$x" ||
                { cat "$T/l$x"; fail "pair $i: run $x failed for another reason"; }
            refused=$((refused + 1))
        fi
    done
    [ "$ra" = 0 ] || [ "$rb" = 0 ] || fail "pair $i: both runs failed"
    same_as a || same_as b || fail "pair $i: a mixed set of outputs"
    left=$(ls "$T/run" | grep -v '^u_\(fake_quant_model\|deploy_model\|qdq\|qoperator\)\.onnx$')
    [ -z "$left" ] || fail "pair $i: left behind: $left"
    i=$((i + 1))
done
echo "$PAIRS pairs: always one run's set; $refused runs refused by the lock"

# a run killed during a save leaves temporary files; the next run removes them and says so
sh -c 'exit 0' &
wait $!
dead=$!
for f in $FILES; do echo partial >"$T/run/$f.tmp.$dead"; done
"$CALQ" save --model "$MODEL" --record "$T/a/u_record.txt" --save_path "$T/run/u" >"$T/lc" 2>&1 || fail "save after a kill"
grep -q "calq: removed 4 temporary files that an interrupted run" "$T/lc" || { cat "$T/lc"; fail "no line about the stale files"; }
ls "$T/run" | grep -q 'tmp' && fail "stale files left: $(ls "$T/run")"
same_as a || fail "the save after the kill"
echo "ok"
