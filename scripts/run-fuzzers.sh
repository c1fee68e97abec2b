#!/usr/bin/env bash
# Runs every libFuzzer target in BUILD/fuzz for SECONDS each, seeded from tests/fuzz/corpus/<target>
# (and, for the ONNX loader, a sample of the ONNX node-test models). Fails on any crash.
set -euo pipefail
build=$(cd "${1:-build-fuzz}" && pwd)
seconds=${2:-20}
root=$(cd "$(dirname "$0")/.." && pwd)
status=0
for fz in "$build"/fuzz/fuzz_*; do
  [ -x "$fz" ] || continue
  name=$(basename "$fz")
  work=$(mktemp -d)
  corpus="$work/corpus"
  mkdir -p "$corpus"
  seed="$root/tests/fuzz/corpus/${name#fuzz_}"
  [ -d "$seed" ] && cp -r "$seed"/. "$corpus"/ 2>/dev/null || true
  if [ "$name" = fuzz_onnx ] && [ -d /usr/share/libonnx-testdata/data/node ]; then
    i=0
    for m in /usr/share/libonnx-testdata/data/node/test_{conv,relu,add,reshape,slice,concat,gemm,maxpool,resize}*/model.onnx; do
      [ -f "$m" ] && cp "$m" "$corpus/seed_$i.onnx" && i=$((i + 1))
    done
  fi
  echo "fuzz: $name for ${seconds}s"
  if ! (cd "$work" && ASAN_OPTIONS=detect_leaks=1 "$fz" -max_total_time="$seconds" -rss_limit_mb=4096 \
        -max_len=262144 -print_final_stats=0 "$corpus" >"$work/log" 2>&1); then
    echo "fuzz: $name FAILED"; tail -n 60 "$work/log"; status=1
    mkdir -p "$build/fuzz-crashes" && cp "$work"/crash-* "$work"/leak-* "$work"/oom-* "$work"/timeout-* "$build/fuzz-crashes/" 2>/dev/null || true
  else
    grep -E '^#[0-9]+.*(DONE|pulse)' "$work/log" | tail -n 1 || true
  fi
  rm -rf "$work"
done
exit $status
