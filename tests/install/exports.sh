#!/bin/sh
# The shared library's ABI surface (issue 10, item 4): `nm -D --defined-only` must list exactly
# the CALQ_API functions of include/calq.h (no calq__ internals, no protobuf-c, oneDNN, stb or
# toolchain symbols), and the SONAME must be libcalq.so.MAJOR with the full version on the file.
# Usage: exports.sh LIBCALQ_SO CALQ_H
set -u
SO=$1
HDR=$2
T=$(mktemp -d "${TMPDIR:-/tmp}"/calq_exports.XXXXXX)
trap 'rm -rf "$T"' EXIT
fails=0
nm -D --defined-only "$SO" | awk '{print $NF}' | sed 's/@.*//' | sort -u >"$T/exported"
[ -s "$T/exported" ] || { echo "FAIL: nm -D found no symbols in $SO"; exit 1; }
if grep -v '^calq_' "$T/exported" >"$T/foreign" || grep '^calq__' "$T/exported" >>"$T/foreign"; then
    echo "FAIL: $SO exports symbols outside the public API:"
    sed 's/^/  /' "$T/foreign" | head -40
    fails=$((fails + 1))
fi
# a function declared in the header without CALQ_API would be missing from the library
if grep -nE '^[A-Za-z_][A-Za-z0-9_ *]*[ *]calq_[a-z0-9_]+\(' "$HDR" | grep -vE '^[0-9]+:(CALQ_API|typedef)' >"$T/bare"; then
    echo "FAIL: functions declared in $HDR without CALQ_API (not exported):"
    sed 's/^/  /' "$T/bare" | head -40
    fails=$((fails + 1))
fi
# every CALQ_API function of the header, and nothing else
grep -v '^#' "$HDR" | tr '\n' ' ' | grep -o 'CALQ_API [^(;]*(' | sed 's/($//; s/.*[ *]//' | sort -u >"$T/declared"
if ! cmp -s "$T/declared" "$T/exported"; then
    echo "FAIL: exported symbols differ from the CALQ_API declarations of $HDR (< declared, > exported):"
    diff "$T/declared" "$T/exported" | grep '^[<>]' | head -40
    fails=$((fails + 1))
fi
VERSION=$(readlink -f "$SO" | sed 's/.*libcalq\.so\.//')
SONAME=$(readelf -d "$SO" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
case "$VERSION" in
[0-9]*.[0-9]*.[0-9]*) ;;
*) echo "FAIL: $SO is not libcalq.so.MAJOR.MINOR.PATCH ($VERSION)"; fails=$((fails + 1)) ;;
esac
[ "$SONAME" = "libcalq.so.${VERSION%%.*}" ] || { echo "FAIL: SONAME is '$SONAME', not libcalq.so.${VERSION%%.*}"; fails=$((fails + 1)); }
echo "exports: $(wc -l <"$T/exported") symbols, all calq_*, $(wc -l <"$T/declared") CALQ_API declarations; file libcalq.so.$VERSION, SONAME $SONAME"
[ "$fails" = 0 ]
