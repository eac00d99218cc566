#!/bin/sh
# Inputs that once crashed, hung or leaked in roamc (found by the fuzz
# targets of this folder), run through the roamc binary.  Each line of
# regress/cases names a command, the exit status it must give and an input:
#
#   plan   2 NAME.onnx          roamc NAME.onnx -o OUT
#   layout 2 NAME.csv           roamc layout NAME.csv -o OUT
#   check  1 NAME.json MODEL    roamc check tests/fuzz/models/MODEL.onnx NAME.json
#   train  2 NAME.onnx PREC     roamc NAME.onnx --train --precision PREC -o OUT
#   load   2 NAME.onnx          roamc check NAME.onnx EMPTY.json, in at most 15 s:
#                               the model loads and builds (inputs that once hung
#                               there), then the empty plan is refused
#
# An input NAME.awk is a generator (for inputs too large to commit): the
# input is what `awk -f NAME.awk` prints.  Every case must exit with its
# status; a failure (status 2) must say on stderr what is wrong in which
# file; `plan` and `layout` must leave no output file (not even a temporary
# one) unless they succeed; and nothing may print a sanitizer report.
#
# usage: regress.sh ROAMC REGRESS_DIR WORKDIR
set -u
. "$(dirname "$0")/../lib.sh"
test_usage 3 3 "ROAMC REGRESS_DIR WORKDIR" "$@"
roamc=$1 dir=$2 work=$3
models=$(dirname "$dir")/models
rm -rf "$work" && mkdir -p "$work" || fail_now "cannot make $work"
# The stack size decides where deep recursion crashes: the default one.
ulimit -s 8192 2>/dev/null
n=0

while read -r cmd want input model; do
    case "$cmd" in ''|'#'*) continue ;; esac
    n=$((n + 1))
    case=$input
    src=$dir/$input
    if [ "${input%.awk}" != "$input" ]; then
        ext=$(sed -n 's/^# input: //p' "$src")
        src=$work/${input%.awk}.$ext
        LC_ALL=C awk -f "$dir/$input" > "$src" || { fail "$case: generator failed"; continue; }
    fi
    out=$work/out.${input%.*}
    rm -f "$out" "$out".tmp.*
    case "$cmd" in
    plan) timeout 300 "$roamc" "$src" -o "$out" --time-limit 30 > "$work/stdout" 2> "$work/stderr" ;;
    layout) timeout 300 "$roamc" layout "$src" -o "$out" --time-limit 5 > "$work/stdout" 2> "$work/stderr" ;;
    check) timeout 300 "$roamc" check "$models/$model.onnx" "$src" > "$work/stdout" 2> "$work/stderr" ;;
    train)
        timeout 300 "$roamc" "$src" --train --precision "$model" -o "$out" --time-limit 30 \
            > "$work/stdout" 2> "$work/stderr" ;;
    load)
        : > "$work/empty.json"
        timeout 15 "$roamc" check "$src" "$work/empty.json" > "$work/stdout" 2> "$work/stderr" ;;
    *) fail "$case: unknown command '$cmd' in $dir/cases"; continue ;;
    esac
    got=$?
    [ "$got" -eq "$want" ] || fail "$case: exit status $got, expected $want ($(head -c 300 "$work/stderr"))"
    if grep -q -e 'Sanitizer' -e 'runtime error:' "$work/stderr"; then
        fail "$case: sanitizer report:"; head -n 20 "$work/stderr"
    fi
    if [ "$cmd" = load ]; then
        grep -q -F "$work/empty.json: not a readable JSON plan" "$work/stderr" ||
            fail "$case: the model did not load: $(head -c 300 "$work/stderr")"
    elif [ "$want" -eq 2 ]; then
        grep -q -F "$src" "$work/stderr" || fail "$case: the message does not name the file: $(head -c 300 "$work/stderr")"
    fi
    if [ "$cmd" = check ] && [ "$want" -eq 1 ]; then
        grep -q '^INVALID: ' "$work/stdout" || fail "$case: no INVALID line on stdout"
    fi
    if [ "$cmd" = plan ] || [ "$cmd" = layout ] || [ "$cmd" = train ]; then
        if [ "$want" -eq 0 ]; then
            [ -s "$out" ] || fail "$case: no output file"
        else
            [ -e "$out" ] && fail "$case: output file left behind"
        fi
        for t in "$out".tmp.*; do [ -e "$t" ] && fail "$case: temporary file left behind: $t"; done
    fi
    rm -f "$out"
done < "$dir/cases"

[ "$n" -gt 0 ] || fail "no case in $dir/cases"
echo "$n cases, $TEST_FAILS failed"
test_finish fuzz_regress
