#!/usr/bin/env bash
# The ONNX import forms issue 2 names, built from UltraFace with Debian's python3-onnx, must give
# the same outputs as the original file: weights as external data, weights in Constant nodes,
# symbolic (dynamic) input dims bound with --input-shape. Also: truncated and garbage files fail
# cleanly with a message, and an unsupported-op model lists every unsupported op and node.
set -euo pipefail
calq=$1; compare=$2; shared=$3
model=$shared/models/ultraface/version-slim-320_simplified.onnx
img=$shared/data/faces/ultraface_2.jpg
. "$(dirname "$0")/../support/need.sh"
need_python numpy onnx
need_files "$model" "$img"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
fail=0

/usr/bin/python3 - "$model" "$work" <<'PY'
import sys, onnx, onnx.helper as h
src, out = sys.argv[1], sys.argv[2]
m = onnx.load(src)
# 1. external data: every initializer in one side file
onnx.save_model(m, out + "/external.onnx", save_as_external_data=True, all_tensors_to_one_file=True,
                location="external.data", size_threshold=0)
# 2. weights in Constant nodes (as some exporters write them)
m2 = onnx.load(src)
consts = [h.make_node("Constant", [], [t.name], value=t) for t in m2.graph.initializer]
names = {t.name for t in m2.graph.initializer}
inputs = [i for i in m2.graph.input if i.name not in names]
del m2.graph.initializer[:]
del m2.graph.input[:]
m2.graph.input.extend(inputs)
nodes = consts + list(m2.graph.node)
del m2.graph.node[:]
m2.graph.node.extend(nodes)
onnx.save(m2, out + "/constants.onnx")
# 3. dynamic dims
m3 = onnx.load(src)
d = m3.graph.input[0].type.tensor_type.shape.dim
d[0].dim_param, d[2].dim_param, d[3].dim_param = "N", "H", "W"
for o in m3.graph.output:
    o.type.tensor_type.shape.dim[0].dim_param = "N"
del m3.graph.value_info[:]
onnx.save(m3, out + "/dynamic.onnx")
# 4. unsupported operators
x = h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 4])
y = h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 4])
g = h.make_graph([h.make_node("Relu", ["x"], ["a"], name="r"),
                  h.make_node("Frobnicate", ["a"], ["b"], name="frob_1"),
                  h.make_node("Frobnicate", ["b"], ["c"], name="frob_2"),
                  h.make_node("Gizmo", ["c"], ["y"], name="gizmo", domain="com.example")], "g", [x], [y])
onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 13), h.make_opsetid("com.example", 1)]),
          out + "/unsupported.onnx")
PY

run() { "$calq" run "$1" --image "input=$img" --resize 320x240 --mean 127 --std 128 --output-dir "$2" "${@:3}" 2>/dev/null; }
run "$model" "$work/ref"
for v in external constants dynamic; do
  extra=()
  [ $v = dynamic ] && extra=(--input-shape input:1,3,240,320)
  if ! run "$work/$v.onnx" "$work/$v" "${extra[@]}"; then echo "FAIL: $v.onnx did not run"; fail=1; continue; fi
  for o in scores boxes; do printf '%s %s: ' $v $o; "$compare" "$work/$v/$o.npy" "$work/ref/$o.npy" --atol 1e-6 --rtol 1e-6 || fail=1; done
done

# A dynamic model without --input-shape still runs (the image fixes the shape)...
run "$work/dynamic.onnx" "$work/dyn2" || { echo "FAIL: dynamic model without --input-shape"; fail=1; }

expect_error() { # name, expected substring, command...
  local name=$1 want=$2; shift 2
  local out rc=0
  out=$("$@" 2>&1) || rc=$?
  if [ $rc -eq 0 ] || ! grep -qF -- "$want" <<<"$out"; then
    echo "FAIL: $name: exit $rc, message: $out"; fail=1
  else
    echo "ok: $name: $(head -c 160 <<<"$out" | tr '\n' ' ')"
  fi
}
# Truncated at several lengths, and garbage.
size=$(stat -c %s "$model")
for cut in 1 17 1000 $((size / 2)) $((size - 3)); do
  head -c $cut "$model" > "$work/trunc.onnx"
  expect_error "truncated at $cut bytes" "trunc.onnx: not a valid ONNX model" "$calq" inspect "$work/trunc.onnx" || true
done
head -c 4096 /dev/urandom > "$work/garbage.onnx"
expect_error "garbage file" "garbage.onnx" "$calq" inspect "$work/garbage.onnx"
expect_error "missing file" "No such file" "$calq" inspect "$work/none.onnx"
expect_error "unsupported ops listed" "Frobnicate (nodes: frob_1 frob_2)" "$calq" inspect "$work/unsupported.onnx"
expect_error "unsupported domain listed" "com.example::Gizmo (nodes: gizmo)" "$calq" inspect "$work/unsupported.onnx"
expect_error "wrong input shape" "dim 2 cannot become 100" "$calq" run "$model" --input-shape input:1,3,100,100 \
    --image "input=$img" --output-dir "$work/x"
exit $fail
