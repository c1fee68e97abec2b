#!/bin/sh
# Every flag of every subcommand goes through the one flag table (tools/cli_flags.h): no file in
# tools/ but the parser itself walks argv or compares an argument with a flag name, so no flag can
# escape the value rules (whole, in range, exit 2) or be missing from --help.
# Usage: cli_flag_table.sh TOOLS_DIR
set -u
DIR=$1
[ -f "$DIR/cli_flags.c" ] || { echo "FAIL: no $DIR/cli_flags.c"; exit 1; }
# argv indexing or a strcmp against "--..." outside the parser and the command dispatcher (calq.c)
hits=$(grep -nE 'argv\[[^]]*\]|strn?cmp\([^,]*, *"--|atoi\(|atof\(|strto(l|ll|f|d|ul)\(argv' "$DIR"/*.c |
    grep -vE "^$DIR/(cli_flags|calq)\.c:")
if [ -n "$hits" ]; then
    echo "FAIL: argv handled outside tools/cli_flags.c (put the flag in the command's table):"
    printf '%s\n' "$hits"
    exit 1
fi
# every subcommand parses with cli_parse
for f in "$DIR"/cmd_*.c; do
    grep -q 'cli_parse(&command' "$f" || { echo "FAIL: $f does not parse its flags with cli_parse"; exit 1; }
done
echo "cli_flag_table: every subcommand's flags go through its table"
