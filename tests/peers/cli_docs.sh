#!/bin/sh
# docs/cli.md and `calq <command> --help` list the same flags: the flags of each command's
# usage block in docs/cli.md (the ``` block under "## calq <command>") are exactly the flags
# its --help lists (generated from the command's flag table, tools/cli_flags.h).
# Usage: cli_docs.sh CALQ DOCS/cli.md
set -u
CALQ=$1
DOC=$2
fails=0
for cmd in run inspect factors create-config calibration save compare; do
    # the first ``` block after the command's heading
    doc=$(awk -v h="## calq $cmd" '$0 == h {s = 1; next} s && /^## / {exit} s && /^```/ {b++; if (b == 2) exit; next}
        s && b == 1' "$DOC" | grep -oE -- '--[a-z][a-z_-]*' | sort -u)
    # every spelling --help lists: "  --name, --alias VALUE"
    help=$("$CALQ" "$cmd" --help | grep -E '^  --' | sed -E 's/^  (--[a-z_-]+)(, (--[a-z_-]+))?.*/\1 \3/' |
        tr ' ' '\n' | grep -- '^--' | sort -u)
    primary=$("$CALQ" "$cmd" --help | grep -oE '^  --[a-z_-]+' | tr -d ' ' | sort -u)
    [ -n "$doc" ] || { echo "FAIL: $cmd: no usage block under '## calq $cmd' in $DOC"; fails=$((fails + 1)); continue; }
    missing=$(printf '%s\n' "$primary" | while read -r f; do
        printf '%s\n' "$doc" | grep -qx -- "$f" || echo "$f"; done)
    extra=$(printf '%s\n' "$doc" | while read -r f; do printf '%s\n' "$help" | grep -qx -- "$f" || echo "$f"; done)
    [ -z "$missing" ] || { echo "FAIL: $cmd: docs/cli.md lacks" $missing; fails=$((fails + 1)); }
    [ -z "$extra" ] || { echo "FAIL: $cmd: docs/cli.md lists" $extra "which --help does not"; fails=$((fails + 1)); }
done
[ $fails -eq 0 ] && echo "cli_docs: docs/cli.md and --help agree"
[ $fails -eq 0 ]
