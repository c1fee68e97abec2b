#!/bin/sh
# The --evaluator's runs are bounded and leave nothing behind (src/search, tools/cli_evaluator.c):
#   a command that hangs past --time-budget is stopped when the budget runs out: calq exits 1
#   within the budget plus a small margin, with a message naming the command and the budget;
#   --evaluator-timeout stops a command whose child hangs, and one that ignores SIGTERM (SIGKILL
#   after the grace period);
#   a command that exits leaving a child in the background: the run succeeds, the child is ended;
#   SIGTERM to calq while the command runs ends the command too;
#   no sleep of this test is left running in any of these cases;
#   a metric that is not a finite number (nan, inf, 1e999, -inf) is refused, quoting it.
# Every calq runs under `timeout`, so a regression fails instead of hanging.
# The fixtures (tests/cli/fixtures): two_convs.onnx, Conv 3->4 3x3 (pads 1), Relu, Conv 4->2 1x1
# on x [1,3,8,8], and one batch two_convs_x.npy (NumPy default_rng(0) normals).
# Usage: evaluator_limits.sh CALQ FIXTURES_DIR
set -u
CALQ=$1
FIX=$2
T=$(mktemp -d "${TMPDIR:-/tmp}"/calq_evaluator_limits.XXXXXX)
# sleeps of this run only: durations no other test (or another run of this one) uses
S=$((200000 + $$ % 100000 * 10))
leftovers() { pgrep -f "^sleep ${S}[0-9]\$"; }
# by pid, so that a case that leaves one fails alone
kill_leftovers() { for p in $(leftovers); do kill -KILL "$p" 2>/dev/null; done; }
cleanup() {
    kill_leftovers
    rm -rf "$T"
}
trap cleanup EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
cd "$T" || exit 1
now() { date +%s.%N; }
# within START LIMIT: the seconds since START are at most LIMIT
within() { awk -v s="$1" -v e="$(now)" -v l="$2" 'BEGIN { printf "%.1f s", e - s; exit !(e - s <= l) }'; }

# run NAME WANT_RC NEEDLE MAX_SECONDS calq-args...: one calibration of the fixture with an evaluator
run() {
    name=$1 want=$2 needle=$3 max=$4
    shift 4
    t0=$(now)
    timeout -k 5 60 "$CALQ" calibration --model "$FIX/two_convs.onnx" --npy "$FIX/two_convs_x.npy" --save_path "$T/out/q" \
        --save_type None --target 0.5 "$@" >"$T/log" 2>&1
    rc=$?
    took=$(within "$t0" "$max") || fail "$name: took $took, more than $max s"
    echo "$name: exit $rc in $took"
    [ $rc = "$want" ] || { fail "$name: exit $rc, expected $want"; tail -3 "$T/log" | sed 's/^/    /'; }
    grep -qF -- "$needle" "$T/log" || { fail "$name: no '$needle' in:"; tail -3 "$T/log" | sed 's/^/    /'; }
    # the group is ended before calq goes on: nothing may be left, not even for a moment
    left=$(leftovers)
    [ -z "$left" ] || fail "$name: left running: $(ps -o args= -p "$(printf "%s\n" "$left" | paste -sd, -)")"
    kill_leftovers
}

# a hung evaluator and --time-budget 3: stopped when the budget runs out (SIGTERM ends sleep at once)
printf '#!/bin/sh\nsleep %s1\n' "$S" >hang.sh
run "hang, --time-budget 3" 1 "was still running when --time-budget 3 s ran out" 7 \
    --evaluator "sh $T/hang.sh {model}" --time-budget 3
# a child (a shell's child) that hangs, --evaluator-timeout 2
printf '#!/bin/sh\nsh -c "sleep %s2"\necho 0.9\n' "$S" >child.sh
run "hung child, --evaluator-timeout 2" 1 "ran longer than --evaluator-timeout 2 s" 6 \
    --evaluator "sh $T/child.sh {model}" --evaluator-timeout 2
# SIGTERM ignored by the command and its child: SIGKILL after the 2 s grace period
printf '#!/bin/sh\ntrap "" TERM\nsleep %s3\necho 0.9\n' "$S" >stubborn.sh
run "SIGTERM ignored, --evaluator-timeout 1" 1 "ran longer than --evaluator-timeout 1 s" 7 \
    --evaluator "sh $T/stubborn.sh {model}" --evaluator-timeout 1
# a child left in the background, holding stdout, after the metric: the run succeeds, it is ended
printf '#!/bin/sh\nsleep %s4 &\necho 0.9\n' "$S" >bg.sh
run "background child" 0 "target met" 10 --evaluator "sh $T/bg.sh {model}"

# SIGTERM to calq while the evaluator runs: calq ends it, then dies of the signal
printf '#!/bin/sh\nsleep %s5\n' "$S" >term.sh
"$CALQ" calibration --model "$FIX/two_convs.onnx" --npy "$FIX/two_convs_x.npy" --save_path "$T/out/q" \
    --save_type None --target 0.5 --evaluator "sh $T/term.sh {model}" >"$T/log" 2>&1 &
pid=$!
i=0
while [ -z "$(pgrep -f "^sleep ${S}5\$")" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
[ $i -lt 100 ] || fail "SIGTERM to calq: the evaluator did not start"
kill -TERM "$pid"
i=0
while kill -0 "$pid" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
kill -0 "$pid" 2>/dev/null && { fail "SIGTERM to calq: calq still runs after 10 s"; kill -KILL "$pid"; }
wait "$pid"
rc=$?
echo "SIGTERM to calq: exit $rc"
[ $rc = 143 ] || fail "SIGTERM to calq: exit $rc, expected 143 (the signal)"
[ -z "$(leftovers)" ] || fail "SIGTERM to calq: the evaluator is left running"
kill_leftovers

# SIGCHLD ignored by whoever started calq (SIG_IGN survives exec): the kernel would reap the shell
# itself and calq never see it end; it hung for good. A setsid child that leaves the group: the run
# still succeeds (calq, its subreaper, reaps it after the run; not observed here).
printf '#!/bin/sh\nsetsid sleep 0.2 &\necho 0.9\n' >setsid.sh
t0=$(now)
timeout -k 5 30 /usr/bin/python3 -c 'import os, signal, sys
signal.signal(signal.SIGCHLD, signal.SIG_IGN)
os.execv(sys.argv[1], sys.argv[1:])' "$CALQ" calibration --model "$FIX/two_convs.onnx" --npy "$FIX/two_convs_x.npy" \
    --save_path "$T/out/q" --save_type None --target 0.5 --evaluator "echo top1: 0.8 #" --evaluator-timeout 10 \
    >"$T/log" 2>&1
rc=$?
took=$(within "$t0" 8) || fail "SIGCHLD ignored: took $took"
echo "SIGCHLD ignored: exit $rc in $took"
[ $rc = 0 ] && grep -qF "target met" "$T/log" || { fail "SIGCHLD ignored: exit $rc"; tail -3 "$T/log" | sed 's/^/    /'; }
run "setsid child" 0 "target met" 20 --evaluator "sh $T/setsid.sh {model}"

# metrics that are not finite numbers
for m in nan inf 1e999 -inf; do
    run "metric $m" 1 "printed '$m' as its metric" 20 --evaluator "echo top1: $m #"
done
run "metric 0.75" 0 "metric 0.75000 -> 0.75000: target met" 20 --evaluator "echo top1: 0.75 #"

[ $fails -eq 0 ] && echo "evaluator_limits: all checks passed"
[ $fails -eq 0 ]
