#!/bin/sh
# Hostile inputs found in issue 14's round that calq did not bound: each must end within 20 s
# with exit 1, a "calq: error:" line matching the expected text, and nothing written.
# Fixtures are the fuzz corpus's regression seeds (tests/fuzz/corpus/*/regression-*).
# usage: hostile_inputs.sh CALQ SOURCE_DIR
set -u
CALQ=$1
SRC=$2
T=$(mktemp -d /tmp/calq_hostile.XXXXXX)
trap 'rm -rf "$T"' EXIT
/usr/bin/python3 -c "import numpy; numpy.save('$T/x.npy', numpy.ones((1, 3, 8, 8), numpy.float32))" ||
    { echo "SKIP: no numpy"; exit 77; }
bad=0
# expect NAME EXIT REGEX -- CALQ ARGS...
expect() {
    name=$1 want=$2 re=$3
    shift 4
    timeout 20 "$CALQ" "$@" >"$T/out" 2>"$T/err"
    rc=$?
    if [ "$rc" -ne "$want" ] || ! grep -Eq "$re" "$T/err"; then
        echo "FAIL: $name: exit $rc (want $want), stderr:"
        tail -3 "$T/err"
        bad=1
    else
        echo "ok: $name: $(grep -m1 'error' "$T/err" | cut -c1-160)"
    fi
}
# a Loop whose trip count is 2^50: ran for hours (no limit but 2^31 without a trip count)
expect loop_trip_count 1 "trip count is 1125899906842624, above calq's limit" -- \
    run "$SRC/tests/fuzz/corpus/onnx/regression-loop-trip-count-huge.onnx" --input "x=$T/x.npy" --output-dir "$T/o"
[ -e "$T/o/y0.npy" ] && { echo "FAIL: loop_trip_count wrote an output"; bad=1; }
exit $bad
