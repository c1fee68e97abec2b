#!/bin/sh
# One assertion harness (issue 10, item 7): EXPECT, EXPECT_OK and EXPECT_STATUS and the failure
# count live in tests/support/expect.h only; no test defines its own EXPECT or CHECK, or counts
# failures in a variable of its own.
# Usage: one_harness.sh TESTS_DIR
set -u
DIR=$1
hits=$(grep -rnE '#[[:space:]]*define[[:space:]]+(EXPECT|CHECK|CHECK_OK|EXPECT_OK|EXPECT_STATUS)[[:space:]]*\(|\btest_failures\b|^[[:space:]]*(static[[:space:]]+)?int[[:space:]]+failures\b|\bCHECK(_OK)?\(' \
    "$DIR" --include='*.c' --include='*.h' | grep -v "^$DIR/support/expect.h:")
if [ -n "$hits" ]; then
    echo "FAIL: assertions defined outside tests/support/expect.h (use EXPECT / EXPECT_OK from it):"
    printf '%s\n' "$hits"
    exit 1
fi
echo "one_harness: every test asserts with tests/support/expect.h"
