#!/bin/sh
# The house style (.clang-format at the top, issue 18): every C source and
# header of the project is formatted as clang-format 14 formats it, so a
# newcomer's `clang-format -i FILE` changes only what they wrote.
#
# usage: test_format.sh SOURCE_DIR
# Exit 77 (skipped) without clang-format 14 (other versions format some
# constructs differently: their verdict would not be this file's).
set -u
SRC=$1
CF=$(command -v clang-format-14 || command -v clang-format || true)
if [ -z "$CF" ]; then
    echo "SKIP: clang-format is not installed (Debian package clang-format)"
    exit 77
fi
ver=$("$CF" --version | sed -n 's/.*version \([0-9][0-9]*\)\..*/\1/p')
if [ "$ver" != 14 ]; then
    echo "SKIP: $CF is version ${ver:-unknown}; the style is checked with clang-format 14"
    exit 77
fi
cd "$SRC" || exit 2
# every C file of the tree but build directories and node_modules
files=$(find frontend graph partition ilp layout planner tests models -name '*.[ch]' \
        -not -path '*/build*' | sort)
[ -n "$files" ] || { echo "FAIL: no C files under $SRC"; exit 1; }
bad=0
for f in $files; do
    if ! "$CF" --style=file --dry-run --Werror "$f" >/dev/null 2>&1; then
        echo "not formatted: $f (run: clang-format -i $f)"
        bad=$((bad + 1))
    fi
done
n=$(echo "$files" | wc -l)
if [ $bad -ne 0 ]; then
    echo "FAIL: $bad of $n files differ from .clang-format's style"
    exit 1
fi
echo "OK: $n C files formatted as .clang-format says"
