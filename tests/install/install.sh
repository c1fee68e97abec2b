#!/bin/sh
# The library as an embedder gets it (issue 10, item 4): `cmake --install` into a temporary
# prefix, then tests/install/run_model.c built three ways against that prefix only and run on
# UltraFace with a face photo:
#   (a) cc + `pkg-config --cflags --libs calq` (shared libcalq.so, found with LD_LIBRARY_PATH);
#   (b) cc + `pkg-config --static --cflags --libs calq` against libcalq.a (Libs.private and
#       Requires.private must be complete, or the link fails);
#   (c) a CMake project with find_package(calq) + target_link_libraries(... calq::calq), and
#       the same with calq::calq_static.
# Each must print UltraFace's two output shapes and a face score above 0.5.
# Usage: install.sh BUILD_DIR SOURCE_DIR MODEL PHOTO [EXTRA_CFLAGS]
set -u
BUILD=$1
SRC=$2
MODEL=$3
PHOTO=$4
EXTRA=${5:-}
CC=${CC:-cc}
if [ ! -f "$MODEL" ] || [ ! -f "$PHOTO" ]; then
    echo "SKIP: $MODEL or $PHOTO is missing"
    exit 77
fi
command -v pkg-config >/dev/null || { echo "SKIP: no pkg-config"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}"/calq_install.XXXXXX)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

cmake --install "$BUILD" --prefix "$T/prefix" >"$T/install.log" 2>&1 || { cat "$T/install.log"; exit 1; }
P=$T/prefix
VERSION=$(sed -n 's/^Version: //p' "$P/lib/pkgconfig/calq.pc" 2>/dev/null)
MAJOR=${VERSION%%.*}
for f in include/calq.h lib/libcalq.a "lib/libcalq.so.$VERSION" lib/pkgconfig/calq.pc lib/cmake/calq/calqConfig.cmake \
    lib/cmake/calq/calqConfigVersion.cmake; do
    [ -f "$P/$f" ] || fail "not installed: $f"
done
[ "$(readlink "$P/lib/libcalq.so")" = "libcalq.so.$MAJOR" ] || fail "lib/libcalq.so does not point to libcalq.so.$MAJOR"
[ "$(readlink "$P/lib/libcalq.so.$MAJOR")" = "libcalq.so.$VERSION" ] || fail "libcalq.so.$MAJOR is not libcalq.so.$VERSION"
echo "installed calq $VERSION into a temporary prefix"

check_run() { # label, then [VAR=value...] program args
    label=$1
    shift
    out=$T/$label.out
    if ! env "$@" >"$out" 2>&1; then
        fail "$label: run_model failed"
        cat "$out"
        return
    fi
    grep -qx "output scores: 1x4420x2" "$out" || fail "$label: scores shape"
    grep -qx "output boxes: 1x4420x4" "$out" || fail "$label: boxes shape"
    score=$(sed -n 's/^max scores\[\.\.\., 1\]: //p' "$out")
    awk -v s="$score" 'BEGIN { exit !(s > 0.5) }' || fail "$label: face score $score <= 0.5"
    echo "$label: $(tr '\n' ' ' <"$out")"
}

export PKG_CONFIG_PATH="$P/lib/pkgconfig"
# (a) shared, through pkg-config
# shellcheck disable=SC2046,SC2086
$CC $EXTRA -o "$T/run_shared" "$SRC/tests/install/run_model.c" $(pkg-config --cflags --libs calq) ||
    fail "pkg-config build"
[ -x "$T/run_shared" ] && {
    LD_LIBRARY_PATH="$P/lib" ldd "$T/run_shared" | grep -q "$P/lib/libcalq.so.$MAJOR" || fail "run_shared does not load $P/lib"
    check_run pkg-config LD_LIBRARY_PATH="$P/lib" "$T/run_shared" "$MODEL" "$PHOTO"
}

# (b) static, through pkg-config --static (a folder holding only libcalq.a comes first)
mkdir -p "$T/static"
ln -s "$P/lib/libcalq.a" "$T/static/libcalq.a"
# shellcheck disable=SC2046,SC2086
$CC $EXTRA -o "$T/run_static" "$SRC/tests/install/run_model.c" -L"$T/static" $(pkg-config --static --cflags --libs calq) ||
    fail "pkg-config --static build"
[ -x "$T/run_static" ] && {
    ldd "$T/run_static" | grep -q libcalq && fail "run_static is linked to a shared libcalq"
    check_run pkg-config-static "$T/run_static" "$MODEL" "$PHOTO"
}

# (c) find_package(calq) + calq::calq
if cmake -S "$SRC/tests/install" -B "$T/cmake" -DCMAKE_PREFIX_PATH="$P" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_FLAGS="$EXTRA" >"$T/cmake.log" 2>&1 && cmake --build "$T/cmake" >>"$T/cmake.log" 2>&1; then
    # CMake's build tree RPATH points at the prefix: no LD_LIBRARY_PATH needed
    check_run find_package "$T/cmake/run_model" "$MODEL" "$PHOTO"
    check_run find_package-static "$T/cmake/run_model_static" "$MODEL" "$PHOTO"
else
    fail "find_package(calq) project"
    cat "$T/cmake.log"
fi

[ "$fails" = 0 ] && echo "install: all checks passed" || echo "install: $fails failure(s)"
[ "$fails" = 0 ]
