#!/bin/sh
# The house style (.clang-format at the top, issue 18): every C source and
# header of the project is formatted as clang-format 14 formats it, so a
# newcomer's `clang-format -i FILE` changes only what they wrote.
#
# usage: test_format.sh SOURCE_DIR
# Exit 77 (skipped) without clang-format 14 (other versions format some
# constructs differently: their verdict would not be this file's).
set -u
. "$(dirname "$0")/lib.sh"
test_usage 1 1 "SOURCE_DIR" "$@"
SRC=$1
CF=$(command -v clang-format-14 || command -v clang-format || true)
[ -n "$CF" ] || skip "clang-format is not installed (Debian package clang-format)"
ver=$("$CF" --version | sed -n 's/.*version \([0-9][0-9]*\)\..*/\1/p')
[ "$ver" = 14 ] || skip "$CF is version ${ver:-unknown}; the style is checked with clang-format 14"
cd "$SRC" || exit 2
# every C file of the tree but build directories and node_modules
files=$(find frontend graph partition ilp layout planner tests models -name '*.[ch]' \
        -not -path '*/build*' | sort)
[ -n "$files" ] || fail_now "no C files under $SRC"
for f in $files; do
    "$CF" --style=file --dry-run --Werror "$f" >/dev/null 2>&1 ||
        fail "not formatted: $f (run: clang-format -i $f)"
done
n=$(echo "$files" | wc -l)
[ "$TEST_FAILS" != 0 ] || pass "$n C files formatted as .clang-format says"
test_finish test_format
