# ONNX backend conformance (Debian libonnx-testdata).
add_executable(calq_conformance ${CMAKE_CURRENT_SOURCE_DIR}/conformance/onnx_backend.c)
target_link_libraries(calq_conformance PRIVATE calq_test_support)
target_compile_options(calq_conformance PRIVATE ${CALQ_WARN})
set_target_properties(calq_conformance PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
add_test(NAME conformance.onnx_backend COMMAND calq_conformance)
set_tests_properties(conformance.onnx_backend PROPERTIES TIMEOUT 900)
# The floors catch a lost operator: with every test counted as skipped (as if its operator were
# gone), the run must fail on the floors, not pass.
add_test(NAME conformance.floor COMMAND calq_conformance --pretend-unsupported test_)
set_tests_properties(conformance.floor PROPERTIES TIMEOUT 60 PASS_REGULAR_EXPRESSION
                     "passed, floor [0-9]+: FAIL, fewer tests pass than the floor")

# libFuzzer targets: tests/fuzz/fuzz_*.c (clang only; `make test-fuzz` runs them briefly).
if(CALQ_FUZZ)
  file(GLOB CALQ_FUZZ_SRCS CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_*.c)
  add_custom_target(fuzzers)
  foreach(src ${CALQ_FUZZ_SRCS})
    get_filename_component(name ${src} NAME_WE)
    add_executable(${name} ${src})
    target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_BINARY_DIR}/gen)
    target_link_libraries(${name} PRIVATE calq)
    target_link_options(${name} PRIVATE -fsanitize=fuzzer,address,undefined)
    target_compile_options(${name} PRIVATE -fsanitize=fuzzer,address,undefined)
    set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/fuzz)
    add_dependencies(fuzzers ${name})
  endforeach()
endif()

# The fuzz regression corpus replayed by plain ctest, in the Release and ASan builds alike: each
# target's LLVMFuzzerTestOneInput linked with a small driver (tests/fuzz/replay.c, no libFuzzer)
# and fed every file of tests/fuzz/corpus/<target> (issue 10, item 7).
if(NOT CALQ_FUZZ)
  file(GLOB CALQ_FUZZ_REPLAY_SRCS CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_*.c)
  foreach(src ${CALQ_FUZZ_REPLAY_SRCS})
    get_filename_component(name ${src} NAME_WE)
    string(REGEX REPLACE "^fuzz_" "" target ${name})
    add_executable(replay_${target} ${src} ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/replay.c)
    target_link_libraries(replay_${target} PRIVATE calq_test_support)
    target_compile_options(replay_${target} PRIVATE ${CALQ_WARN})
    add_test(NAME fuzz_replay.${target} COMMAND replay_${target} ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/${target})
    set_tests_properties(fuzz_replay.${target} PROPERTIES LABELS fuzz TIMEOUT 120)
  endforeach()
endif()

# Tools used by the peer tests.
add_executable(calq_npy_compare ${CMAKE_CURRENT_SOURCE_DIR}/tools/npy_compare.c)
target_link_libraries(calq_npy_compare PRIVATE calq_test_support)
set_target_properties(calq_npy_compare PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})

# Independent runtimes: onnxruntime-node (npm). Label "peer".
set(CALQ_SHARED_DIR ${CMAKE_SOURCE_DIR}/../shared CACHE PATH "the shared models and data")
add_test(NAME peer.ultraface_vs_onnxruntime
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/peers/ultraface_vs_ort.sh $<TARGET_FILE:calq_cli>
                 $<TARGET_FILE:calq_npy_compare> ${CALQ_SHARED_DIR})
set_tests_properties(peer.ultraface_vs_onnxruntime PROPERTIES LABELS peer TIMEOUT 300)
add_test(NAME peer.onnx_import_variants
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/peers/onnx_variants.sh $<TARGET_FILE:calq_cli>
                 $<TARGET_FILE:calq_npy_compare> ${CALQ_SHARED_DIR})
set_tests_properties(peer.onnx_import_variants PROPERTIES LABELS peer TIMEOUT 300)
# IFMR vs PyTorch's HistogramObserver on real UltraFace activations (Debian python3-torch).
add_test(NAME peer.ifmr_vs_torch
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/peers/ifmr_vs_torch.sh $<TARGET_FILE:calq_cli> 4)
set_tests_properties(peer.ifmr_vs_torch PROPERTIES LABELS peer TIMEOUT 600)
# Caffe frontend: MTCNN det1/det2/det3 and UltraFace slim-320 against OpenCV's DNN module
# (Debian python3-opencv), and UltraFace's Caffe model against its ONNX twin, both in calq.
add_test(NAME peer.caffe_vs_opencv
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/peers/caffe_vs_opencv.sh opencv $<TARGET_FILE:calq_cli>
                 $<TARGET_FILE:calq_npy_compare> ${CALQ_SHARED_DIR})
set_tests_properties(peer.caffe_vs_opencv PROPERTIES LABELS peer TIMEOUT 300)
add_test(NAME peer.caffe_vs_onnx_twin
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/peers/caffe_vs_opencv.sh onnx-twin $<TARGET_FILE:calq_cli>
                 $<TARGET_FILE:calq_npy_compare> ${CALQ_SHARED_DIR})
set_tests_properties(peer.caffe_vs_onnx_twin PROPERTIES LABELS peer TIMEOUT 300)

# docs/operators.md must list exactly the registry's operators.
set_tests_properties(unit.test_operator_docs PROPERTIES WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
# The include rule of docs/architecture.md's Layers table, over src/ and tools/.
set_tests_properties(unit.test_layers PROPERTIES WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(unit.test_api_null PROPERTIES WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
# Calibration end to end (issue 5): real models, the seed failure scenarios, --threads 1 vs 2.
add_test(NAME peer.calib_cli
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/peers/calib_cli.sh $<TARGET_FILE:calq_cli> ${CALQ_SHARED_DIR})
set_tests_properties(peer.calib_cli PROPERTIES LABELS peer TIMEOUT 1800)
# Peak RSS of calibrating UltraFace with batch_num 8 vs 1 (must be <= 1.25x).
add_test(NAME peer.calib_memory
         COMMAND sh ${CMAKE_SOURCE_DIR}/bench/calib_memory.sh $<TARGET_FILE:calq_cli> ${CALQ_SHARED_DIR})
# A memory benchmark: meaningless under ASan, whose quarantine holds freed memory (label bench).
set_tests_properties(peer.calib_memory PROPERTIES LABELS "peer;bench" TIMEOUT 600)
# calq save (issue 6): UltraFace ONNX calibrated, saved as QDQ and QOperator, checked with
# onnx.checker, run in onnxruntime-node and calq, fake-quant vs float; the seed save failures.
add_test(NAME peer.save_onnx
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/peers/save_onnx.sh $<TARGET_FILE:calq_cli> ${CALQ_SHARED_DIR})
set_tests_properties(peer.save_onnx PROPERTIES LABELS peer TIMEOUT 2400)
# Attention (issue 12, item 4): a torch model with MatMuls of two variable inputs and a dynamic
# sequence axis, calibrated, saved in every format, run in onnxruntime-node and calq.
add_test(NAME peer.save_attention
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/peers/save_attention.sh $<TARGET_FILE:calq_cli>)
set_tests_properties(peer.save_attention PROPERTIES LABELS peer TIMEOUT 1200 SKIP_RETURN_CODE 77)
# DMQ balancing (issue 12, item 2): torch models with activation outliers, calibrated with and
# without dmq_balancer_param, the files checked against the balancing math and onnxruntime-node.
add_test(NAME peer.dmq
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/peers/dmq.sh $<TARGET_FILE:calq_cli>)
set_tests_properties(peer.dmq PROPERTIES LABELS peer TIMEOUT 600 SKIP_RETURN_CODE 77)
# tensor_quantize (issue 12, item 3): inputs of MaxPool / Add / GlobalAveragePool of a torchvision
# ResNet-18 and MTCNN det1's MAX Pooling quantized on their own; every format saved and run.
add_test(NAME peer.save_tensor_quantize
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/peers/save_tensor_quantize.sh $<TARGET_FILE:calq_cli> ${CALQ_SHARED_DIR})
set_tests_properties(peer.save_tensor_quantize PROPERTIES LABELS peer TIMEOUT 1200 SKIP_RETURN_CODE 77)
# int8 QDQ / QOperator files (issue 12, items 5-6): --qdq-scheme int8 on a small FPN-like net and a
# ResNet-18; onnxruntime's optimized graphs run on 8-bit tensors, accuracy vs float, calq vs onnxruntime.
add_test(NAME peer.save_reduce_range
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/peers/save_reduce_range.sh $<TARGET_FILE:calq_cli> ${CALQ_SHARED_DIR})
set_tests_properties(peer.save_reduce_range PROPERTIES LABELS peer TIMEOUT 600 SKIP_RETURN_CODE 77)
add_test(NAME peer.save_int8
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/peers/save_int8.sh $<TARGET_FILE:calq_cli> ${CALQ_SHARED_DIR})
set_tests_properties(peer.save_int8 PROPERTIES LABELS peer TIMEOUT 1200 SKIP_RETURN_CODE 77)
# --qdq-scheme int8 leaves an Add / Mul with a constant operand float in both files (a LayerNorm
# written out at opset 13: no Q/DQ on its variance or before Mul(gamma) / Add(beta)), while a
# residual Add of two tensors stays integer; QDQ cosine vs float as the QOperator file's.
add_test(NAME peer.save_int8_layernorm
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/peers/int8_layernorm.py $<TARGET_FILE:calq_cli>)
set_tests_properties(peer.save_int8_layernorm PROPERTIES LABELS peer TIMEOUT 300 SKIP_RETURN_CODE 77)
add_test(NAME peer.save_int8_softmax_compare
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/peers/int8_softmax_compare.py $<TARGET_FILE:calq_cli>)
set_tests_properties(peer.save_int8_softmax_compare PROPERTIES LABELS peer TIMEOUT 300 SKIP_RETURN_CODE 77)
# --qdq-scheme int8 on attention blocks (torch's MultiheadAttention and GELU written out): no Q/DQ on
# a tensor only float ops read (bias Adds before GELU / q's Div), data movement keeps its input's
# factors, both files quantize the same tensors and agree in onnxruntime.
add_test(NAME peer.save_int8_attention
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/peers/int8_attention.py $<TARGET_FILE:calq_cli>)
set_tests_properties(peer.save_int8_attention PROPERTIES LABELS peer TIMEOUT 300 SKIP_RETURN_CODE 77)
# Accuracy of the int8 scheme (issue 12, item 5) in onnxruntime-node on trained models: calibrated
# on their first photos, the QDQ and QOperator files' outputs vs the float model on the held-out
# ones; the worst cosine must stay above floors just under what it gives (NanoDet-m 0.99084:
# LeakyRelu pre-activations and Concat inputs; FastestDet 0.80058: its output Concat; UltraFace).
add_test(NAME peer.int8_accuracy
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/peers/int8_accuracy.py $<TARGET_FILE:calq_cli>
                 ${CALQ_SHARED_DIR} --only nanodet,fastestdet,ultraface --schemes int8
                 --floor nanodet:int8=0.9895 --floor fastestdet:int8=0.795 --floor ultraface:int8=0.9999)
set_tests_properties(peer.int8_accuracy PROPERTIES LABELS peer TIMEOUT 600 SKIP_RETURN_CODE 77)
# HyperLPR3's plate-colour classifier calibrated on one photo per colour (its first 3 photos, all
# blue, gave 0.09 on the yellow plate), run by calq itself so that the figure is exact on any CPU.
add_test(NAME peer.int8_accuracy_hyperlpr3
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/peers/int8_accuracy.py $<TARGET_FILE:calq_cli>
                 ${CALQ_SHARED_DIR} --only hyperlpr3 --runtime calq
                 --floor hyperlpr3:layers=0.9997 --floor hyperlpr3:int8=0.9997)
set_tests_properties(peer.int8_accuracy_hyperlpr3 PROPERTIES LABELS peer TIMEOUT 300 SKIP_RETURN_CODE 77)
# AMCT's ONNX fake-quant / deploy models (issue 6): deploy vs fake-quant within one step.
add_test(NAME peer.save_ascend_onnx
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/peers/save_ascend.sh $<TARGET_FILE:calq_cli> ${CALQ_SHARED_DIR})
set_tests_properties(peer.save_ascend_onnx PROPERTIES LABELS peer TIMEOUT 2400)
# AMCT's Caffe fake-quant / deploy outputs (issue 6, item 3): MTCNN det1-3 and UltraFace's Caffe
# model calibrated, saved, loaded back and run; fake-quant vs float cosine, deploy vs fake-quant
# in quantization steps; `calq calibration` and `calq save` write the same files.
add_test(NAME peer.save_caffe
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/peers/save_caffe.sh $<TARGET_FILE:calq_cli> ${CALQ_SHARED_DIR})
set_tests_properties(peer.save_caffe PROPERTIES LABELS peer TIMEOUT 2400)
# DMQ balancing of Caffe models (issue 12, item 2): save_caffe.sh with every layer balanced, the
# Scale layers and weights read back by OpenCV's DNN, the ONNX twin's record, an outlier net.
add_test(NAME peer.save_caffe_dmq
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/peers/save_caffe.sh $<TARGET_FILE:calq_cli> ${CALQ_SHARED_DIR} dmq)
set_tests_properties(peer.save_caffe_dmq PROPERTIES LABELS peer TIMEOUT 1200 SKIP_RETURN_CODE 77)
# Ascend deploy models executed by calq (issue 6, "run what you write"): a tiny model with every
# Ascend op against numpy bit for bit, and UltraFace as an integer deploy model (every layer
# recomputed in numpy, cosine vs float, run time, thread-count identity).
add_test(NAME peer.ascend_deploy
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/peers/ascend_deploy.sh $<TARGET_FILE:calq_cli> ${CALQ_SHARED_DIR})
set_tests_properties(peer.ascend_deploy PROPERTIES LABELS peer TIMEOUT 300)
# One table of quantizable kinds (issue 10): their names appear only in the allowed files.
add_test(NAME lint.qkind_literals COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/lint/qkind_literals.sh ${CMAKE_SOURCE_DIR}/src)
set_tests_properties(lint.qkind_literals PROPERTIES TIMEOUT 60)
# No argv handling outside the flag table's parser (issue 10 item 6).
add_test(NAME lint.cli_flag_table COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/lint/cli_flag_table.sh ${CMAKE_SOURCE_DIR}/tools)
set_tests_properties(lint.cli_flag_table PROPERTIES TIMEOUT 60)
# Missing files make skips, not passes (issue 10 item 7): every test has SKIP_RETURN_CODE 77, the
# tests needing shared files ask for them, and a missing shared folder gives 77 in practice.
add_test(NAME lint.skip_rule COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/lint/skip_rule.py ${CMAKE_BINARY_DIR}
                                     ${CMAKE_SOURCE_DIR} $<TARGET_FILE:calq_cli> $<TARGET_FILE:test_calib_ultraface>)
set_tests_properties(lint.skip_rule PROPERTIES TIMEOUT 120)
# One assertion harness (issue 10 item 7): tests/support/expect.h's EXPECT, nothing redefined.
add_test(NAME lint.one_harness COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/lint/one_harness.sh ${CMAKE_CURRENT_SOURCE_DIR})
set_tests_properties(lint.one_harness PROPERTIES TIMEOUT 60)
# Operators beyond what the node tests pin down (recurrent layers with every attribute, Einsum
# patterns, detection ops) and the opset 18-21 signatures: models built with onnx.helper, calq
# (reference and fast kernels) against onnxruntime-node.
add_test(NAME peer.ops_vs_onnxruntime
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/peers/ops_vs_ort.py $<TARGET_FILE:calq_cli>
                 ${CMAKE_CURRENT_SOURCE_DIR}/peers/ort_run.js)
set_tests_properties(peer.ops_vs_onnxruntime PROPERTIES LABELS peer TIMEOUT 300 SKIP_RETURN_CODE 77)
# Every ONNX model of the shared zoo (detectors, segmentation, transformers, the LSTM/If audio
# model) in calq and onnxruntime-node on its own images / audio: all outputs must match.
add_test(NAME peer.zoo_vs_onnxruntime
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/peers/zoo_vs_ort.py $<TARGET_FILE:calq_cli>
                 ${CMAKE_CURRENT_SOURCE_DIR}/peers/ort_run.js ${CALQ_SHARED_DIR})
set_tests_properties(peer.zoo_vs_onnxruntime PROPERTIES LABELS peer TIMEOUT 600 SKIP_RETURN_CODE 77)
# Save on older models (issue 14, item 10): opset 7 / 9 / 11 TF-style segmentation nets
# (Upsample, old Pad / Clip / Softmax, tf_half_pixel_for_nn) calibrated and saved in every format,
# raised to opset 13 where needed and run in onnxruntime-node and calq; a model that cannot be
# raised skips QDQ / QOperator by default and fails an explicit --format as a whole.
add_test(NAME peer.save_upgrade
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/peers/save_upgrade.sh $<TARGET_FILE:calq_cli>
                 ${CMAKE_CURRENT_SOURCE_DIR}/peers/ort_run.js)
set_tests_properties(peer.save_upgrade PROPERTIES LABELS peer TIMEOUT 600 SKIP_RETURN_CODE 77)
# Two `calq save` runs on one --save_path at once, 30 times (issue 14, item 5): the lock keeps
# every set one run's; a killed run's temporary files are removed by the next (item 4).
add_test(NAME cli.concurrent_save
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/cli/concurrent_save.sh $<TARGET_FILE:calq_cli> ${CALQ_SHARED_DIR} 30)
set_tests_properties(cli.concurrent_save PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77)
# calq's range calibrators (issue 11): minmax / percentile / kl / mse against a NumPy
# reimplementation of their documented formulas on real UltraFace and MTCNN activations.
add_test(NAME peer.range_numpy_ref
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/peers/range_numpy_ref.py $<TARGET_FILE:calq_cli>
                 ${CALQ_SHARED_DIR})
set_tests_properties(peer.range_numpy_ref PROPERTIES LABELS peer TIMEOUT 300 SKIP_RETURN_CODE 77
                     ENVIRONMENT "OMP_WAIT_POLICY=passive")
# calq compare (issue 11): UltraFace ONNX vs its AMCT fake-quant / deploy / QDQ files and MTCNN
# det3 vs its Caffe models; JSON schema and figures checked in Python, the HTML rendered by
# headless Chromium. Passive OpenMP waiting: the machine is shared, the figures do not change.
add_test(NAME peer.compare
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/peers/compare.sh $<TARGET_FILE:calq_cli> ${CALQ_SHARED_DIR})
set_tests_properties(peer.compare PROPERTIES LABELS peer TIMEOUT 600 SKIP_RETURN_CODE 77
                     ENVIRONMENT "OMP_WAIT_POLICY=passive")
# Automatic fallback to an accuracy target (issue 11): UltraFace's raw boxes to a cosine of 0.99,
# the config reproducing the record, unreachable targets, --strict, --evaluator.
add_test(NAME peer.fallback
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/peers/fallback.sh $<TARGET_FILE:calq_cli> ${CALQ_SHARED_DIR})
set_tests_properties(peer.fallback PROPERTIES LABELS peer TIMEOUT 900 SKIP_RETURN_CODE 77
                     ENVIRONMENT "OMP_WAIT_POLICY=passive")
# Which layers are to blame (compare --sensitivity) on the zoo's PAN segmenter: its first depthwise
# convolution ranks first at the outputs (not by its isolated error), each figure equals the model
# saved with that layer alone run in onnxruntime, 1 and 2 threads agree, and --target-cosine ranked
# by it meets 0.99.
add_test(NAME peer.sensitivity
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/peers/sensitivity.py $<TARGET_FILE:calq_cli>
                 ${CALQ_SHARED_DIR})
set_tests_properties(peer.sensitivity PROPERTIES LABELS peer TIMEOUT 900 SKIP_RETURN_CODE 77
                     ENVIRONMENT "OMP_WAIT_POLICY=passive")
# Peak RSS of act_algo auto and compare --isolated, batch_num 16 vs 1 (<= 1.25x), auto's record
# for 1 and 2 threads; a memory benchmark, meaningless under ASan (label bench).
add_test(NAME peer.accuracy_memory
         COMMAND sh ${CMAKE_SOURCE_DIR}/bench/accuracy_memory.sh $<TARGET_FILE:calq_cli> ${CALQ_SHARED_DIR})
set_tests_properties(peer.accuracy_memory PROPERTIES LABELS "peer;bench" TIMEOUT 900 SKIP_RETURN_CODE 77
                     ENVIRONMENT "OMP_WAIT_POLICY=passive")
# A batch other than the model file's (issue 14, item 8): MTCNN and UltraFace at batch 4 equal
# their batch-1 runs sample by sample; graphs that tie the batch are refused naming the node.
add_test(NAME cli.batch_reshape
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/cli/batch_reshape.py $<TARGET_FILE:calq_cli> ${CALQ_SHARED_DIR})
set_tests_properties(cli.batch_reshape PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77)
set_tests_properties(unit.test_adaround PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900)
# The library as embedders get it (issue 10, item 4): the shared library exports exactly the
# CALQ_API functions (nm -D) under SONAME libcalq.so.MAJOR; `cmake --install` into a temporary
# prefix, then a C program built with pkg-config (shared and --static) and a find_package(calq)
# project (calq::calq, calq::calq_static) run UltraFace on a face photo.
add_test(NAME lib.exports COMMAND sh ${CMAKE_SOURCE_DIR}/tests/install/exports.sh $<TARGET_FILE:calq_shared>
                                     ${CMAKE_SOURCE_DIR}/include/calq.h)
if(CALQ_SANITIZE)
  set(CALQ_INSTALL_TEST_CFLAGS "-fsanitize=address,undefined")
else()
  set(CALQ_INSTALL_TEST_CFLAGS "")
endif()
add_test(NAME lib.install
         COMMAND sh ${CMAKE_SOURCE_DIR}/tests/install/install.sh ${CMAKE_BINARY_DIR} ${CMAKE_SOURCE_DIR}
                 ${CALQ_SHARED_DIR}/models/ultraface/version-slim-320.onnx ${CALQ_SHARED_DIR}/data/faces/ultraface_1.jpg
                 "${CALQ_INSTALL_TEST_CFLAGS}")
set_tests_properties(lib.install PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77)
# Caffe SSD and the other common Caffe layers (issue 14, item 11): the zoo's WeChat QR detector
# and its super-resolution net, a MobileNet-SSD-like net built here, vs OpenCV's DNN module;
# Interp vs numpy; both detectors calibrated and saved, the saved models run.
add_test(NAME peer.caffe_ssd
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/peers/caffe_ssd.sh $<TARGET_FILE:calq_cli>
                 $<TARGET_FILE:calq_npy_compare> ${CALQ_SHARED_DIR})
set_tests_properties(peer.caffe_ssd PROPERTIES LABELS peer TIMEOUT 600 SKIP_RETURN_CODE 77)
# Caffe PriorBox with 64 aspect ratios (129 and 260 boxes per position; the kernel once wrote 66
# per position with exit 0) vs OpenCV's DNN module and Caffe's forward computed in numpy.
add_test(NAME peer.caffe_priorbox COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/peers/caffe_priorbox.py
                                          $<TARGET_FILE:calq_cli>)
set_tests_properties(peer.caffe_priorbox PROPERTIES LABELS peer TIMEOUT 120 SKIP_RETURN_CODE 77)
# LSTM / GRU quantized per channel as AMCT's CHANNEL_WISE_ONNX_TYPES (issue 14, item 12): the
# record's W / R scale_w against ARQ in numpy, every saved format in onnxruntime-node and calq.
add_test(NAME peer.save_rnn
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/peers/save_rnn.sh $<TARGET_FILE:calq_cli>
                 ${CMAKE_CURRENT_SOURCE_DIR}/peers/ort_run.js)
set_tests_properties(peer.save_rnn PROPERTIES LABELS peer TIMEOUT 600 SKIP_RETURN_CODE 77)
# The Python binding (issue 10, item 5): docs/python.md's example run as written (UltraFace
# calibrated from numpy arrays, saved, the fake-quant model run), its files byte-identical to
# `calq calibration --npy` on the same batches, calq.save = calq save, Model.run = calq run, the
# errors, and peak RSS flat in the number of streamed batches. Under the sanitizers the
# interpreter preloads their runtimes (it is not instrumented itself; leak checks off).
set(CALQ_PY_ENV "CALQ_LIBRARY=$<TARGET_FILE:calq_shared>" "PYTHONPATH=${CMAKE_SOURCE_DIR}/python"
                "OMP_WAIT_POLICY=passive")
if(CALQ_SANITIZE)
  execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=libasan.so OUTPUT_VARIABLE CALQ_ASAN_SO
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=libubsan.so OUTPUT_VARIABLE CALQ_UBSAN_SO
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  list(APPEND CALQ_PY_ENV "LD_PRELOAD=${CALQ_ASAN_SO}:${CALQ_UBSAN_SO}" "ASAN_OPTIONS=detect_leaks=0")
endif()
add_test(NAME peer.python
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/python/binding.py $<TARGET_FILE:calq_cli> ${CALQ_SHARED_DIR})
set_tests_properties(peer.python PROPERTIES LABELS peer TIMEOUT 600 SKIP_RETURN_CODE 77 ENVIRONMENT "${CALQ_PY_ENV}")
# Careless arguments to the binding (probe h2): integers beyond the C field's range or with a
# fraction are refused, not wrapped by ctypes (batch_num=2**32 + 1 ran 1 batch).
add_test(NAME peer.python_args COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/python/args.py)
set_tests_properties(peer.python_args PROPERTIES LABELS peer TIMEOUT 300 SKIP_RETURN_CODE 77 ENVIRONMENT "${CALQ_PY_ENV}")
# Many layers (issue 14, item 3): a 1000- and a 4000-layer ONNX and Caffe chain calibrated and
# saved; the CPU time must grow about linearly (below 12x for 4x the layers). 5 s, 30 s in ASan.
add_test(NAME cli.many_layers COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/cli/many_layers.py
                                      $<TARGET_FILE:calq_cli>)
set_tests_properties(cli.many_layers PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77)
# If / Loop bodies reading outer values and initializers: every saved ONNX file valid, the
# captured initializers kept, onnxruntime-node giving calq's result.
add_test(NAME cli.subgraph_save COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/cli/subgraph_save.py
                                        $<TARGET_FILE:calq_cli> ${CMAKE_CURRENT_SOURCE_DIR}/peers)
set_tests_properties(cli.subgraph_save PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77)
# Records and saves a hostile-input probe found wrong (2026-12-06): a failed save's stale models,
# colon keys, overflowing deq_scale, MatMul with a constant A.
add_test(NAME cli.records_and_saves COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/cli/records_and_saves.sh
                                            $<TARGET_FILE:calq_cli>)
set_tests_properties(cli.records_and_saves PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77)
# Hostile inputs of issue 14's round (fixtures: the fuzz corpora's regression seeds): bounded
# time, exit 1, a clear message, nothing written. About 1 s.
add_test(NAME cli.hostile_inputs COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/cli/hostile_inputs.sh $<TARGET_FILE:calq_cli>
                                         ${CMAKE_SOURCE_DIR})
set_tests_properties(cli.hostile_inputs PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE 77)
# Names of 600-1100 characters (hostile-input probe, 12-2025): Conv + Mul folding and DMQ balancing
# ended (they hung), and every saved ONNX file has unique names, passes onnx.checker and runs. Each
# calq command under a 60 s timeout; about 5 s in all.
add_test(NAME cli.long_names COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/cli/long_names.py
                                     $<TARGET_FILE:calq_cli>)
set_tests_properties(cli.long_names PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77)
# compare against quantized models with hostile factors (an AscendQuant scale of 1e-45 segfaulted in the
# histogram; offsets of NaN / 1e30 were converted to int): reported without factors, or the run's error.
add_test(NAME cli.compare_hostile_factors COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/cli/compare_hostile_factors.py
                                                  $<TARGET_FILE:calq_cli>)
set_tests_properties(cli.compare_hostile_factors PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE 77)
# Node names calq adds ("<tensor>_quantized_QuantizeLinear", "<layer>.dmq", "<layer>.quant", ...) that the
# model's own nodes already have: every saved ONNX file (both schemes, every format) has unique node
# names, passes onnx.checker and runs; a model without such names keeps them short. About 5 s.
add_test(NAME cli.node_name_clash COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/cli/node_name_clash.py
                                          $<TARGET_FILE:calq_cli>)
set_tests_properties(cli.node_name_clash PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77)
# The fast planner on whole models (issue 13): ResNet-18 and MobileNetV2 exported from
# torchvision, UltraFace, YuNet, NanoDet: threads 1 vs 2 bit-identical, fast vs reference and
# literal graph within 1e-4, observed tensors unchanged by fusion.
add_test(NAME peer.exec_models
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/peers/exec_models.sh $<TARGET_FILE:calq_cli>
                 $<TARGET_FILE:calq_npy_compare> ${CALQ_SHARED_DIR})
set_tests_properties(peer.exec_models PROPERTIES LABELS peer TIMEOUT 600 SKIP_RETURN_CODE 77)
set_tests_properties(unit.test_exec_layouts PROPERTIES SKIP_RETURN_CODE 77)
# The command line (issues 10 and 14): hostile values, thread bounds, folders, long names; and
# docs/cli.md listing the flags each --help lists.
add_test(NAME cli.hostile COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/peers/cli_hostile.sh $<TARGET_FILE:calq_cli>)
set_tests_properties(cli.hostile PROPERTIES LABELS cli TIMEOUT 300 SKIP_RETURN_CODE 77)
add_test(NAME cli.docs COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/peers/cli_docs.sh $<TARGET_FILE:calq_cli>
                               ${CMAKE_SOURCE_DIR}/docs/cli.md)
set_tests_properties(cli.docs PROPERTIES LABELS cli TIMEOUT 60)
# --evaluator's runs are bounded (--time-budget, --evaluator-timeout): a hung command, its hung
# child, one ignoring SIGTERM, a background child, SIGTERM to calq; none leaves a process behind.
# Metrics nan / inf / 1e999 are refused. The fixture model is checked in (no Python needed).
add_test(NAME cli.evaluator_limits COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/cli/evaluator_limits.sh $<TARGET_FILE:calq_cli>
                                          ${CMAKE_CURRENT_SOURCE_DIR}/cli/fixtures)
set_tests_properties(cli.evaluator_limits PROPERTIES LABELS cli TIMEOUT 180 SKIP_RETURN_CODE 77)
# Dynamic dims other than the batch (a text line's width): .npy batches bind them without
# --input_shape, the saved QDQ / QOperator files keep them dynamic.
add_test(NAME cli.dynamic_dims
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/cli/dynamic_dims.py $<TARGET_FILE:calq_cli> ${CALQ_SHARED_DIR})
set_tests_properties(cli.dynamic_dims PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE 77)
# Weights behind Identity (torch's deduplicated / tied initializers) or Transpose (an export without
# constant folding) are constant weights: Conv / Gemm / MatMul reading them have scale_w, int8 QDQ
# weights; every saved file valid, without dead nodes or initializers, cosine >= 0.99 in calq and
# onnxruntime-node. About 5 s.
add_test(NAME cli.const_weights COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/cli/const_weights.py
                                        $<TARGET_FILE:calq_cli> ${CMAKE_CURRENT_SOURCE_DIR}/peers)
set_tests_properties(cli.const_weights PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77)
# Float16 weights (and a float64 one) behind Cast(to=float) are constant float32 weights: every
# layer quantized, records equal to the float32 model's with the same (rounded) weights, saved files
# valid without the float16 initializers, cosine >= 0.99 in calq and onnxruntime-node. A model
# computing in float16 is refused by calibration (naming the layer and tensor) and by run. About 5 s.
add_test(NAME cli.fp16_weights COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/cli/fp16_weights.py
                                       $<TARGET_FILE:calq_cli> ${CMAKE_CURRENT_SOURCE_DIR}/peers)
set_tests_properties(cli.fp16_weights PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77)
