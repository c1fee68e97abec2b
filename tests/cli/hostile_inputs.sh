#!/bin/sh
# Hostile inputs found in issue 14's rounds that calq did not bound or let pass: each must end within 20 s
# with exit 1 (2 for usage errors), a "calq: error:" line matching the expected text, and nothing written.
# Fixtures are the fuzz corpus's regression seeds (tests/fuzz/corpus/*/regression-*).
# usage: hostile_inputs.sh CALQ SOURCE_DIR
set -u
CALQ=$1
SRC=$2
T=$(mktemp -d "${TMPDIR:-/tmp}"/calq_hostile.XXXXXX)
trap 'rm -rf "$T"' EXIT
/usr/bin/python3 -c "import numpy; numpy.save('$T/x.npy', numpy.ones((1, 3, 8, 8), numpy.float32))
numpy.save('$T/x1.npy', numpy.ones((1, 1, 8, 8), numpy.float32)); numpy.save('$T/x4.npy', numpy.ones((4,), numpy.float32))
numpy.save('$T/x14.npy', numpy.ones((1, 1, 4, 4), numpy.float32)); numpy.save('$T/x3.npy', numpy.ones((1, 1, 3), numpy.float32))
numpy.save('$T/x256.npy', numpy.ones((1, 3, 256, 256), numpy.float32))
b = numpy.ones((1, 3, 8, 8)); b.flat[100] = -1e300; numpy.save('$T/x64big.npy', b)
numpy.save('$T/wide.npy', numpy.array([3e38, -3e38], numpy.float32))" ||
    { echo "SKIP: no numpy"; exit 77; }
bad=0
# expect NAME EXIT REGEX -- CALQ ARGS...
expect() {
    name=$1 want=$2 re=$3
    shift 4
    timeout 20 "$CALQ" "$@" >"$T/out" 2>"$T/err"
    rc=$?
    if [ "$rc" -ne "$want" ] || ! grep -Eq -e "$re" "$T/err"; then
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
# a Loop of 2^20 iterations stacking a 768 KB scan output (768 GB): grew until the machine ran out of
# memory (24 GB RSS in a minute); now refused at the first iteration against half of the machine's memory
expect loop_scan_output_huge 1 "scan output 0 would stack 1048576 iterations of 786432 bytes, above calq's limit" -- \
    run "$SRC/tests/fuzz/corpus/onnx/regression-loop-scan-output-huge.onnx" --input "x=$T/x256.npy" --output-dir "$T/o"
# an If without else_branch (required by every version of If) ran while its condition was true
expect if_no_else_branch 1 "node 'If_0' \\(If\\): the required attribute 'else_branch' is missing" -- \
    run "$SRC/tests/fuzz/corpus/onnx/regression-if-no-else-branch.onnx" --input "x=$T/x.npy" --output-dir "$T/o"
# attributes of the wrong type were read as absent: a Conv with strides=[2.0, 2.0] ran at stride 1
expect attr_wrong_type 1 "attribute 'strides' is FLOATS, but ONNX defines it as INTS" -- \
    run "$SRC/tests/fuzz/corpus/onnx/regression-attr-wrong-type.onnx" --input "x=$T/x1.npy" --output-dir "$T/o"
# ConvTranspose output_padding of 3 with stride 2: positions no input reaches
expect convtranspose_output_padding 1 "output_padding 3 in spatial dimension 0 must be smaller than the stride \\(2\\)" -- \
    run "$SRC/tests/fuzz/corpus/onnx/regression-convtranspose-output-padding.onnx" --input "x=$T/x14.npy" --output-dir "$T/o"
# Split-18 with num_outputs 0 but one output ran as a copy
expect split_num_outputs 1 "'num_outputs' is 0 but the node has 1 outputs" -- \
    run "$SRC/tests/fuzz/corpus/onnx/regression-split-num-outputs-0.onnx" --input "x=$T/x4.npy" --output-dir "$T/o"
# a Loop without a trip count whose condition stays true, stacking a 768 KB scan output: grew to half of the
# machine's memory (11 GB here) before failing; now refused at 64 MiB (docs/operators.md), in well under a second
expect loop_no_trip_scan 1 "scan output 0 would stack more than 85 iterations of 786432 bytes, above calq's limit of 67108864 bytes for what a Loop without a trip count may accumulate" -- \
    run "$SRC/tests/fuzz/corpus/onnx/regression-loop-no-trip-scan.onnx" --input "x=$T/x256.npy" --output-dir "$T/o"
# the same with a carried value doubling every iteration (Concat onto itself)
expect loop_no_trip_double 1 "after 23 iterations its carried values and scan outputs hold 134217728 bytes, above calq's limit of 67108864 bytes" -- \
    run "$SRC/tests/fuzz/corpus/onnx/regression-loop-no-trip-double.onnx" --input "x=$T/x4.npy" --output-dir "$T/o"
# Pad mode reflect with pads (7, 5) on an axis of 3: onnxruntime refuses more than dim - 1 per side ("pre-pad (7)
# exceeds maximum allowed (2)"); calq reflected again like np.pad, now refuses the same way
expect pad_reflect_wide 1 "reflect pads 7 and 5 on axis 2 exceed the 2 position\\(s\\) its 3 kept element\\(s\\) can mirror" -- \
    run "$SRC/tests/fuzz/corpus/onnx/regression-pad-reflect-wide.onnx" --input "x=$T/x3.npy" --output-dir "$T/o"
# Resize's output length is floor of a float32 product: a tf_crop_and_resize roi of [-3e38, 3e38] (span 6e38,
# scale 1e-38) and a float64 scale of 1e300 on an empty axis (0 x inf) overflowed float32 and the inf / NaN was
# converted to int64 (UBSan; Release failed later, "output is too large")
expect resize_crop_roi_3e38 1 "node 'Resize_0': output dimension 2: input 8 x roi span 6e\\+38 x scale 1e-38 is out of float32's range" -- \
    run "$SRC/tests/fuzz/corpus/onnx/regression-resize-crop-roi-3e38.onnx" --input "x=$T/x.npy" --output-dir "$T/o"
/usr/bin/python3 -c "import numpy; numpy.save('$T/x0.npy', numpy.ones((1, 3, 0, 8), numpy.float32))"
expect resize_empty_axis_scale_1e300 1 "node 'Resize_0': output dimension 2: input 0 x roi span 1 x scale 1e\\+300 is out of float32's range" -- \
    run "$SRC/tests/fuzz/corpus/onnx/regression-resize-empty-axis-scale-1e300.onnx" --input "x=$T/x0.npy" --output-dir "$T/o"
# Split sizes (2^63 - 1, 2^63 - 1, 2) on an empty axis: their sum overflowed (UBSan) and wrapped to 0, the axis's size
/usr/bin/python3 -c "import numpy; numpy.save('$T/x1080.npy', numpy.ones((1, 0, 8, 8), numpy.float32))"
expect split_sizes_wrap 1 "node 'Split_0': the split sizes add up to more than axis 1's size 0 \\(size 0 is 9223372036854775807\\)" -- \
    run "$SRC/tests/fuzz/corpus/onnx/regression-split-sizes-wrap-to-0.onnx" --input "x=$T/x1080.npy" --output-dir "$T/o"
# DepthToSpace with blocksize 2^32: blocksize^2 wrapped to 0 and the channel check divided by it (SIGFPE)
expect depthtospace_blocksize_huge 1 "node 'DepthToSpace_0': blocksize 4294967296 is too large for a 1x3x8x8 input" -- \
    run "$SRC/tests/fuzz/corpus/onnx/regression-depthtospace-blocksize-huge.onnx" --input "x=$T/x.npy" --output-dir "$T/o"
# opset_import versions were truncated to an int: 2^32 + 13 ran as opset 13, 2^62 and 0 as opset 0
expect opset_wraps 1 "the model uses ONNX opset 4294967309; calq supports opsets up to" -- \
    run "$SRC/tests/fuzz/corpus/onnx/regression-opset-wraps-to-13.onnx" --input "x=$T/x.npy" --output-dir "$T/o"
expect opset_0 1 "imports the ONNX operator set at version 0 or below" -- \
    run "$SRC/tests/fuzz/corpus/onnx/regression-opset-0.onnx" --input "x=$T/x.npy" --output-dir "$T/o"
# a Loop of 2^20 iterations around another of 2^20: each within the per-Loop limit, 2^40 runs of the inner
# body together (days); now the bodies nested in one outer run share the limit
expect loop_nested 1 "node 'inner_loop': the Loop and Scan bodies nested in one run of the outermost Loop or Scan have run 1048576 times" -- \
    run "$SRC/tests/fuzz/corpus/onnx/regression-loop-nested-2-40-iterations.onnx" --input "x=$T/x4.npy" --output-dir "$T/o"
# a Loop whose trip count is -5 (body: v + 1) runs no iteration, as in onnxruntime; it was taken for "no trip
# count" and ran 2^20 iterations into an error
rm -rf "$T/neg"
if timeout 20 "$CALQ" run "$SRC/tests/fuzz/corpus/onnx/regression-loop-trip-count-negative.onnx" --input "x=$T/x4.npy" \
    --output-dir "$T/neg" >"$T/out" 2>"$T/err" &&
    /usr/bin/python3 -c "import numpy, sys; sys.exit(0 if (numpy.load('$T/neg/y.npy') == 1).all() else 1)"; then
    echo "ok: loop_trip_count_negative: the output is the initial value"
else
    echo "FAIL: loop_trip_count_negative: exit or output wrong:"; tail -3 "$T/err"; bad=1
fi
# Scan attributes out of range ran: num_scan_inputs 2^32 + 1 was cut to 1, a direction of 7 taken for reverse
expect scan_num_inputs_wraps 1 "node 'Scan_0': num_scan_inputs is 4294967297; the node has 2 inputs" -- \
    run "$SRC/tests/fuzz/corpus/onnx/regression-scan-num-inputs-wraps.onnx" --input "x=$T/x.npy" --output-dir "$T/o"
expect scan_direction 1 "scan_input_directions\\[0\\] is 7; a direction is 0 \\(forward\\) or 1 \\(reverse\\)" -- \
    run "$SRC/tests/fuzz/corpus/onnx/regression-scan-direction-7.onnx" --input "x=$T/x.npy" --output-dir "$T/o"
# float-to-int64 conversions of values no int64 holds (undefined behaviour; UBSan's float-cast-overflow): a RoiAlign
# roi of NaN / inf, a OneHot depth of NaN, OneHot indices of 2^63 - 1 and GridSample reflection of 3e38
expect roialign_roi_nan 1 "roi 0 is \\(nan, 0, inf, 4\\) after spatial_scale 1: its coordinates must be finite" -- \
    run "$SRC/tests/fuzz/corpus/onnx/regression-roialign-roi-nan.onnx" --input "x=$T/x.npy" --output-dir "$T/o"
expect onehot_depth_nan 1 "node 'OneHot_0': depth nan is not a positive size" -- \
    run "$SRC/tests/fuzz/corpus/onnx/regression-onehot-depth-nan.onnx" --input "x=$T/x.npy" --output-dir "$T/o"
for m in onehot-index-int64-max gridsample-reflect-3e38; do
    rm -rf "$T/ub"
    if timeout 20 "$CALQ" run "$SRC/tests/fuzz/corpus/onnx/regression-$m.onnx" --input "x=$T/x.npy" --output-dir "$T/ub" \
        >"$T/out" 2>"$T/err"; then echo "ok: $m runs"; else echo "FAIL: $m:"; tail -3 "$T/err"; bad=1; fi
done
# calq run wrote its outputs one by one: with a folder in the way of z.npy, y.npy of an earlier run was replaced
rm -rf "$T/two" && mkdir -p "$T/two/z.npy" && echo old >"$T/two/y.npy"
expect run_outputs_all_or_nothing 1 "cannot write .*/z.npy: it is a folder \\(no output was replaced\\)" -- \
    run "$SRC/tests/fuzz/corpus/onnx/regression-run-two-outputs-one-blocked.onnx" --input "x=$T/x.npy" --output-dir "$T/two"
[ "$(cat "$T/two/y.npy")" = old ] || { echo "FAIL: run_outputs_all_or_nothing: y.npy was replaced"; bad=1; }
[ "$(ls "$T/two")" = "$(printf 'y.npy\nz.npy')" ] || { echo "FAIL: run_outputs_all_or_nothing: left"; ls "$T/two"; bad=1; }
# Col2Im attributes were only checked for sign: a dilation of 2^62 overflowed int64 computing the block count
expect col2im_dilation 1 "node 'Col2Im_0': image 4x4, block 2x2, strides 1x1, dilations 1099511627776x1 or pads \\(0, 0, 0, 0\\) are invalid" -- \
    run "$SRC/tests/fuzz/corpus/onnx/regression-col2im-dilation-2-40.onnx" --input "x=$T/x.npy" --output-dir "$T/o"
# If with a float condition (ONNX: bool) ran as "not zero"; an else_branch of 2 outputs for a node of 1 passed
# while the condition held, as the branch not taken was never looked at
expect if_float_condition 1 "node 'if_node': the condition is float32, but ONNX defines it as bool" -- \
    run "$SRC/tests/fuzz/corpus/onnx/regression-if-float-condition.onnx" --input "x=$T/x.npy" --output-dir "$T/o"
expect if_else_branch_outputs 1 "node 'if_node': else_branch has 2 outputs, but the node has 1" -- \
    run "$SRC/tests/fuzz/corpus/onnx/regression-if-else-branch-two-outputs.onnx" --input "x=$T/x.npy" --output-dir "$T/o"
# the same for a Scan state
expect scan_state_dtype 1 "node 'scan_node': state 0 \\('s_in'\\) enters step 0 as float32 but the body returns it as float64" -- \
    run "$SRC/tests/fuzz/corpus/onnx/regression-scan-state-dtype-changes.onnx" --input "x=$T/x.npy" --output-dir "$T/o"
# If branches of different output types (then float32, else int64) passed: the output's type depended on the data
expect if_branch_types 1 "node 'if_node': output 0 is float32 in then_branch but int64 in else_branch" -- \
    run "$SRC/tests/fuzz/corpus/onnx/regression-if-branch-types-differ.onnx" --input "x=$T/x.npy" --output-dir "$T/o"
expect if_taken_type 1 "node 'if_node': output 0 is float32 from then_branch but else_branch declares it int64" -- \
    run "$SRC/tests/fuzz/corpus/onnx/regression-if-taken-type-differs.onnx" --input "x=$T/x.npy" --output-dir "$T/o"
# a Loop body returning its float32 carried value as float64 ran on, each iteration with another type
expect loop_carried_dtype 1 "node 'loop_node': loop-carried value 0 \\('v_in'\\) enters iteration 0 as float32 but the body returns it as float64" -- \
    run "$SRC/tests/fuzz/corpus/onnx/regression-loop-carried-dtype-changes.onnx" --input "x=$T/x4.npy" --output-dir "$T/o"
# a float64 value of -1e300 became -inf in the float32 input without a word
expect npy_float64_overflow 1 "x64big.npy: element 100 is -1e\\+300, beyond the largest float32 \\(3.40282e\\+38\\), so it would become -inf" -- \
    run "$SRC/tests/fuzz/corpus/onnx/regression-gridsample-reflect-3e38.onnx" --input "x=$T/x64big.npy" --output-dir "$T/o"
# a 200-byte model whose ConstantOfShape asks for 11 GB: without max_arena_bytes (the CLI never set it) only the
# per-tensor limit of half of the machine's memory applied; the CLI now bounds what one run's tensors take
# (--max-arena-mb, CALQ_MAX_ARENA_MB, default a quarter of the machine's memory). Under a 4 GB address-space limit,
# so that a calq without the bound fails instead of filling the memory.
# (Not under AddressSanitizer: its shadow memory needs far more address space than that.)
calq_real=$CALQ
if ! ldd "$CALQ" 2>/dev/null | grep -q libasan; then
    printf '#!/bin/sh\nulimit -v 4000000\nexec "%s" "$@"\n' "$CALQ" >"$T/calq4g" && chmod +x "$T/calq4g"
    CALQ=$T/calq4g
fi
expect arena_flag 1 "node 'cos': the constants folded while planning would take 11000000000 bytes, above the session's limit of 1073741824 bytes" -- \
    run "$SRC/tests/fuzz/corpus/onnx/regression-constantofshape-11gb.onnx" --input "x=$T/x.npy" --output-dir "$T/o" --max-arena-mb 1024
export CALQ_MAX_ARENA_MB=1024
expect arena_env 1 "node 'cos': the constants folded while planning would take 11000000000 bytes, above the session's limit of 1073741824 bytes" -- \
    run "$SRC/tests/fuzz/corpus/onnx/regression-constantofshape-11gb.onnx" --input "x=$T/x.npy" --output-dir "$T/o"
# inspect plans the model too (its shapes): it says why it could not
if timeout 20 "$CALQ" inspect "$SRC/tests/fuzz/corpus/onnx/regression-constantofshape-11gb.onnx" >"$T/out" 2>"$T/err" &&
    grep -q "shapes: not inferred: .*above the session's limit of 1073741824 bytes" "$T/out"; then
    echo "ok: arena_inspect: $(grep -m1 'not inferred' "$T/out" | cut -c1-160)"
else
    echo "FAIL: arena_inspect:"; tail -n 3 "$T/out" "$T/err"; bad=1
fi
export CALQ_MAX_ARENA_MB=lots
expect arena_env_bad 2 "CALQ_MAX_ARENA_MB is 'lots'; it must be a whole number of MiB" -- \
    run "$SRC/tests/fuzz/corpus/onnx/regression-constantofshape-11gb.onnx" --input "x=$T/x.npy" --output-dir "$T/o"
unset CALQ_MAX_ARENA_MB
# the default: a ConstantOfShape of as many MiB as x's largest value, 40% of this machine's memory
mib=$(awk '/^MemTotal/ { print int($2 / 1024 * 0.4) }' /proc/meminfo)
/usr/bin/python3 -c "import numpy; numpy.save('$T/xmib.npy', numpy.full((1, 3, 8, 8), $mib, numpy.float32))"
expect arena_default_run 1 "node 'cos': output 0 would take [0-9]+ bytes, above the limit of [0-9]+ bytes \\(the session's max_arena_bytes" -- \
    run "$SRC/tests/fuzz/corpus/onnx/regression-constantofshape-data-sized.onnx" --input "x=$T/xmib.npy" --output-dir "$T/o"
expect arena_default_calibration 1 "calibration batch 0 .*node 'cos': output 0 would take [0-9]+ bytes, above the limit" -- \
    calibration --model "$SRC/tests/fuzz/corpus/onnx/regression-constantofshape-data-sized.onnx" --npy "$T/xmib.npy" \
    --save_path "$T/o/c"
expect arena_default_compare 1 "compare: float model, batch 0 .*node 'cos': output 0 would take [0-9]+ bytes, above the limit" -- \
    compare --model "$SRC/tests/fuzz/corpus/onnx/regression-constantofshape-data-sized.onnx" \
    --quantized "$SRC/tests/fuzz/corpus/onnx/regression-constantofshape-data-sized.onnx" --npy "$T/xmib.npy"
CALQ=$calq_real
# a graph input declared with 9 dims (calq holds 8) lost its shape and took any input: a 1x3x8x8 array ran
expect input_rank_9 1 "graph input 'x' has 9 dims; calq supports tensors of up to 8 dims" -- \
    run "$SRC/tests/fuzz/corpus/onnx/regression-input-rank-9.onnx" --input "x=$T/x.npy" --output-dir "$T/o"
# Loop conditions, the node's and the body's, of float32 (ONNX: bool) ran as "not zero"
expect loop_condition_float 1 "node 'loop_node': the condition \\(input 1\\) is float32, but ONNX defines it as bool" -- \
    run "$SRC/tests/fuzz/corpus/onnx/regression-loop-condition-float.onnx" --input "x=$T/x4.npy" --output-dir "$T/o"
expect loop_body_condition_float 1 "node 'loop_node': the body's condition \\(output 0\\) is float32, but ONNX defines it as bool" -- \
    run "$SRC/tests/fuzz/corpus/onnx/regression-loop-body-condition-float.onnx" --input "x=$T/x4.npy" --output-dir "$T/o"
# HFMG on values spanning more than float32 holds: the histogram width overflowed and it printed scale 1, offset
# -128 from a NaN clip range, exit 0
expect hfmg_too_wide 1 "HFMG calibration failed for layer .*: its values span \\[-3.00000001e\\+38, 3.00000001e\\+38\\], wider than float32 holds" -- \
    factors --algo hfmg --input "$T/wide.npy"
# a refused run left the --output-dir folders it had made behind, empty
rm -rf "$T/fresh"
expect run_fresh_output_dir 1 "node 'if_node': the condition is float32" -- \
    run "$SRC/tests/fuzz/corpus/onnx/regression-if-float-condition.onnx" --input "x=$T/x.npy" --output-dir "$T/fresh/a/b"
[ -e "$T/fresh" ] && { echo "FAIL: run_fresh_output_dir: $T/fresh was left behind"; bad=1; }
# a 6 MB prototxt of 100,000 in-place ReLUs (a caffemodel may be empty when no layer has weights): planning the
# activation arena compared every tensor with every other one placed before it and took ~45 s (200,000: minutes)
/usr/bin/python3 -c "
import sys
f = open(sys.argv[1], 'w')
f.write('name: \"many\"\\ninput: \"data\"\\ninput_dim: 1\\ninput_dim: 1\\ninput_dim: 1\\ninput_dim: 4\\n')
f.writelines('layer { name: \"r%d\" type: \"ReLU\" bottom: \"data\" top: \"data\" }\\n' % i for i in range(100000))" "$T/relu100k.prototxt"
: >"$T/empty.caffemodel"
/usr/bin/python3 -c "import numpy; numpy.save('$T/d4.npy', numpy.ones((1, 1, 1, 4), numpy.float32))"
rm -rf "$T/relu"
if timeout 20 "$CALQ" run --model "$T/relu100k.prototxt" --weights "$T/empty.caffemodel" --input "$T/d4.npy" \
    --output-dir "$T/relu" >"$T/out" 2>"$T/err"; then
    echo "ok: relu_100k_layers: $(grep -m1 'ran ' "$T/err" | cut -c1-120)"
else
    echo "FAIL: relu_100k_layers: exit $? (124: more than 20 s)"; tail -3 "$T/err"; bad=1
fi
# an output path naming a FIFO, a device or a link to one was replaced by the output's rename: --config_file
# /dev/null turned the device into a regular file (as root)
mkfifo "$T/fifo" && ln -s fifo "$T/fifo_link" || { echo "FAIL: cannot make a FIFO"; bad=1; }
expect output_fifo 1 "cannot write .*/fifo: it is a FIFO \\(named pipe\\), which writing the output would replace" -- \
    create-config --model "$SRC/tests/fuzz/corpus/onnx/regression-constantofshape-data-sized.onnx" --config_file "$T/fifo"
expect output_fifo_link 1 "cannot write .*/fifo_link: it is a link to a FIFO \\(named pipe\\)" -- \
    create-config --model "$SRC/tests/fuzz/corpus/onnx/regression-constantofshape-data-sized.onnx" --config_file "$T/fifo_link"
rm -rf "$T/pipe" && mkdir -p "$T/pipe" && mkfifo "$T/pipe/z.npy"
expect run_output_fifo 1 "cannot write .*/z.npy: it is not a regular file \\(a FIFO, a device or a socket\\) \\(no output was replaced\\)" -- \
    run "$SRC/tests/fuzz/corpus/onnx/regression-run-two-outputs-one-blocked.onnx" --input "x=$T/x.npy" --output-dir "$T/pipe"
{ [ -p "$T/fifo" ] && [ -L "$T/fifo_link" ] && [ -p "$T/pipe/z.npy" ] && [ ! -e "$T/pipe/y.npy" ]; } ||
    { echo "FAIL: output_fifo: a FIFO was replaced or an output written"; ls -la "$T" "$T/pipe"; bad=1; }
# external data offset and length were read with strtoll: "12abc" was 12, a length of -5 was ignored (the model ran)
mkdir -p "$T/ext" && cp "$SRC/tests/fuzz/corpus/onnx/regression-external-offset-12abc.onnx" \
    "$SRC/tests/fuzz/corpus/onnx/regression-external-length-negative.onnx" "$T/ext/" &&
    /usr/bin/python3 -c "import numpy; numpy.ones(108, numpy.float32).tofile('$T/ext/w.bin')"
expect external_offset 1 "tensor 'w': external data offset '12abc' is not a whole number of bytes" -- \
    run "$T/ext/regression-external-offset-12abc.onnx" --input "x=$T/x.npy" --output-dir "$T/o"
expect external_length 1 "tensor 'w': external data length '-5' is not a whole number of bytes" -- \
    run "$T/ext/regression-external-length-negative.onnx" --input "x=$T/x.npy" --output-dir "$T/o"
# photo preprocessing that overflows float32 (--std 1e-45, --scale 3e38) made every pixel inf and calq run wrote inf /
# NaN outputs with exit 0
/usr/bin/python3 -c "
import struct, sys, zlib
def chunk(t, d): return struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d) & 0xffffffff)
rows = b''.join(b'\\0' + bytes(range(24)) for _ in range(8))
open(sys.argv[1], 'wb').write(b'\\x89PNG\\r\\n\\x1a\\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', 8, 8, 8, 2, 0, 0, 0)) +
                               chunk(b'IDAT', zlib.compress(rows)) + chunk(b'IEND', b''))" "$T/p8.png"
expect image_std_tiny 1 "p8.png: channel 0: \\(pixel - mean 0\\) / std 1.4013e-45 \\* scale 1 overflows float32 for pixels of 0 to 255" -- \
    run "$SRC/tests/fuzz/corpus/onnx/regression-gridsample-reflect-3e38.onnx" --image "x=$T/p8.png" --std 1e-45 --output-dir "$T/o"
expect image_scale_huge 1 "p8.png: channel 0: .* scale 3e\\+38 overflows float32" -- \
    run "$SRC/tests/fuzz/corpus/onnx/regression-gridsample-reflect-3e38.onnx" --image "x=$T/p8.png" --scale 3e38 --output-dir "$T/o"
if ! timeout 20 "$CALQ" run "$SRC/tests/fuzz/corpus/onnx/regression-gridsample-reflect-3e38.onnx" --image "x=$T/p8.png" \
    --mean 127 --std 128 --output-dir "$T/img_ok" >"$T/out" 2>"$T/err"; then
    echo "FAIL: image_ok: the PNG fixture does not run:"; tail -3 "$T/err"; bad=1
fi
# image headers (probe of 12-06): a top-down BMP (negative height, rows stored top first) was refused as "8x-2
# pixels, more than the 134217728 calq decodes"; a 0x0 BMP got the same "more than"; a truncated PNG (IEND cut
# off) and a GIF with no image failed with an empty reason "()". The top-down BMP must give PIL's pixels, which
# are its bottom-up twin's.
/usr/bin/python3 - "$T" <<'PY' || { echo "FAIL: writing the BMP fixtures (python3-pil)"; bad=1; }
import struct, sys, zlib
import numpy as np
from PIL import Image
t = sys.argv[1]
def bmp(w, h, top_down):
    row = (w * 3 + 3) // 4 * 4
    data = bytearray()
    for i in range(h):
        y = i if top_down else h - 1 - i
        r = b"".join(bytes([40 + x + y, 20 * y + 2, 10 * x + 1]) for x in range(w))  # B, G, R
        data += r + b"\0" * (row - len(r))
    return (struct.pack("<2sIHHI", b"BM", 54 + len(data), 0, 0, 54) +
            struct.pack("<IiiHHIIiiII", 40, w, -h if top_down else h, 1, 24, 0, len(data), 2835, 2835, 0, 0) + data)
open(t + "/down.bmp", "wb").write(bmp(3, 2, True))
open(t + "/up.bmp", "wb").write(bmp(3, 2, False))
open(t + "/zero.bmp", "wb").write(bmp(0, 0, False))
pil = np.asarray(Image.open(t + "/down.bmp").convert("RGB"))
assert (pil == np.asarray(Image.open(t + "/up.bmp").convert("RGB"))).all()
np.save(t + "/down_pil.npy", pil.transpose(2, 0, 1)[None].astype(np.float32))
def chunk(k, d): return struct.pack(">I", len(d)) + k + d + struct.pack(">I", zlib.crc32(k + d) & 0xffffffff)
rows = b"".join(b"\0" + bytes(range(6)) for _ in range(2))
open(t + "/trunc.png", "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0)) +
                                  chunk(b"IDAT", zlib.compress(rows)))
open(t + "/empty.gif", "wb").write(b"GIF89a\x01\x00\x01\x00\x00\x00\x00;")
# SOI, a JFIF APP0, a frame header (SOF0) of 3 x 0 pixels, EOI: stb_image refuses the header
app0 = b"\xff\xe0" + struct.pack(">H5sBBBHHBB", 16, b"JFIF", 1, 1, 0, 1, 1, 0, 0)
sof0 = b"\xff\xc0" + struct.pack(">HBHHB", 17, 8, 0, 3, 3) + bytes([1, 0x11, 0, 2, 0x11, 1, 3, 0x11, 1])
open(t + "/zero.jpg", "wb").write(b"\xff\xd8" + app0 + sof0 + b"\xff\xd9")
PY
printf 'name: "n"\ninput: "data"\ninput_dim: 1\ninput_dim: 3\ninput_dim: 2\ninput_dim: 3\nlayer { name: "r" type: "ReLU" bottom: "data" top: "r" }\n' >"$T/id.prototxt"
for b in down up; do
    timeout 20 "$CALQ" run --model "$T/id.prototxt" --weights "$T/empty.caffemodel" --image "data=$T/$b.bmp" \
        --output-dir "$T/bmp_$b" >"$T/out" 2>"$T/err" || { echo "FAIL: bmp_$b: calq run:"; tail -3 "$T/err"; bad=1; }
done
if /usr/bin/python3 -c "import sys, numpy as np; a, b, c = (np.load(f) for f in sys.argv[1:]); sys.exit(not ((a == c).all() and (b == c).all()))" \
    "$T/bmp_down/r.npy" "$T/bmp_up/r.npy" "$T/down_pil.npy" 2>"$T/err"; then
    echo "ok: bmp_top_down: the same pixels as its bottom-up twin and PIL"
else
    echo "FAIL: bmp_top_down: calq's pixels differ from the bottom-up twin's or PIL's"; cat "$T/err"; bad=1
fi
expect bmp_zero 1 "zero.bmp: the BMP has no pixels \\(its header says 0x0\\)" -- \
    run --model "$T/id.prototxt" --weights "$T/empty.caffemodel" --image "data=$T/zero.bmp" --output-dir "$T/o"
# a JPEG of height 0 was "not a readable JPEG (stb_image refuses its header ...)" where BMP and PNG have no pixels
expect jpeg_zero 1 "zero.jpg: the JPEG has no pixels \\(its header says 3x0\\)" -- \
    run --model "$T/id.prototxt" --weights "$T/empty.caffemodel" --image "data=$T/zero.jpg" --output-dir "$T/o"
expect png_truncated 1 "trunc.png: cannot decode the PNG \\(truncated or unsupported file\\)" -- \
    run --model "$T/id.prototxt" --weights "$T/empty.caffemodel" --image "data=$T/trunc.png" --output-dir "$T/o"
expect gif_no_image 1 "empty.gif: cannot decode the GIF \\(truncated or unsupported file\\)" -- \
    run --model "$T/id.prototxt" --weights "$T/empty.caffemodel" --image "data=$T/empty.gif" --output-dir "$T/o"
# a BatchNormalization variance with var + epsilon <= 0 gave NaN outputs (and, folded into a Conv, NaN weights) with
# exit 0
expect bn_negative_variance 1 "node 'bn': variance -2 \\+ epsilon 1e-05 of channel 1 is not a positive finite number" -- \
    run "$SRC/tests/fuzz/corpus/onnx/regression-batchnorm-negative-variance.onnx" --input "x=$T/x.npy" --output-dir "$T/o"
expect conv_bn_negative_variance 1 "node 'bn': variance -2 \\+ epsilon 1e-05 of channel 1 is not a positive finite" -- \
    run "$SRC/tests/fuzz/corpus/onnx/regression-conv-batchnorm-negative-variance.onnx" --input "x=$T/x.npy" \
    --output-dir "$T/o"
rm -rf "$T/bnq"
expect calib_bn_negative_variance 1 "variance -2 \\+ epsilon 1e-05 of channel 1 is not a positive finite number" -- \
    calibration --model "$SRC/tests/fuzz/corpus/onnx/regression-conv-batchnorm-negative-variance.onnx" \
    --npy "$T/x.npy" --batch_num 1 --save_path "$T/bnq/q"
[ -e "$T/bnq" ] && { echo "FAIL: calib_bn_negative_variance: $T/bnq was written"; bad=1; }
# a Caffe input_dim of -12 was read as a size the data gives
printf 'name: "n"\ninput: "data"\ninput_dim: 1\ninput_dim: -12\ninput_dim: 4\ninput_dim: 4\nlayer { name: "r" type: "ReLU" bottom: "data" top: "r" }\n' >"$T/negdim.prototxt"
expect caffe_input_dim_negative 1 "2: net input 'data' has dim 1 = -12; a dim is a size, or -1 / 0" -- \
    inspect --model "$T/negdim.prototxt" --weights "$T/empty.caffemodel"
# one flag or one input's shape given twice: the last one used to win silently
expect flag_twice 2 "--input-shape is given twice" -- \
    run "$SRC/tests/fuzz/corpus/onnx/regression-attr-wrong-type.onnx" --input "x=$T/x1.npy" --output-dir "$T/o" \
    --input-shape x:1,1,8,8 --input_shape x:1,1,8,8
expect shape_name_twice 2 "each input named once" -- \
    run "$SRC/tests/fuzz/corpus/onnx/regression-attr-wrong-type.onnx" --input "x=$T/x1.npy" --output-dir "$T/o" \
    --input-shape "x:1,1,8,8;x:1,1,4,4"
[ -n "$(ls -A "$T/o" 2>/dev/null)" ] && { echo "FAIL: a refused run wrote into its output folder"; ls "$T/o"; bad=1; }
exit $bad
