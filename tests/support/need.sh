# Sourced by the shell tests: what a test needs that is not part of the repository (the shared
# models and photos, onnxruntime-node, Debian's python3 modules, Chromium). When something is
# missing the test stops with ctest's skip code 77 (every test has SKIP_RETURN_CODE 77,
# tests/CMakeLists.txt), naming what is missing: a missing file never lets a test pass.
#   . "$(dirname "$0")/../support/need.sh"
#   need_files "$SHARED/models/ultraface/version-slim-320.onnx" "$SHARED/data/faces/ultraface_1.jpg"
#   need_python numpy onnx           # importable by /usr/bin/python3
#   need_node_module onnxruntime-node  # under $NODE_PATH
need_skip() {
    echo "SKIP: $*"
    exit 77
}
need_files() {
    for need_f in "$@"; do
        [ -r "$need_f" ] || need_skip "$need_f is missing (the shared models: set CALQ_SHARED_DIR in CMake)"
    done
}
need_python() {
    for need_m in "$@"; do
        /usr/bin/python3 -c "import $need_m" 2>/dev/null || need_skip "/usr/bin/python3 cannot import $need_m"
    done
}
need_node_module() {
    command -v node >/dev/null 2>&1 || need_skip "no node on PATH"
    for need_m in "$@"; do
        [ -d "${NODE_PATH:-}/$need_m" ] || need_skip "$need_m is not in NODE_PATH (${NODE_PATH:-unset}; see docs/environment.md)"
    done
}
