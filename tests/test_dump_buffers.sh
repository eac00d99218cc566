#!/bin/sh
# test_dump_buffers.sh ROAMC MODELS_DIR — `roamc MODEL --dump-buffers FILE`
# writes the plan's layout problem as a buffer CSV (one line per storage,
# half-open lifetimes) that `roamc layout` loads back, whose live-size bound
# equals the plan's theoretical peak; with -o the plan is the same as
# without; --max-batch refuses it (exit 2, no file).
set -u
. "$(dirname "$0")/lib.sh"
test_usage 2 2 "ROAMC MODELS_DIR" "$@"
roamc=$1
models=$2
work=$(mktemp -d) || fail_now "mktemp"
trap 'rm -rf "$work"' EXIT
for m in alexnet_b1 vgg16_b1; do
    model="$models/$m.onnx"
    [ -f "$model" ] || skip "$model missing"
    failed_before=$TEST_FAILS
    "$roamc" "$model" --report json -o "$work/$m.plan" --dump-buffers "$work/$m.csv" > "$work/$m.json" ||
        { fail "$m: roamc exit $?"; continue; }
    peak=$(sed -n 's/.*"theoretical_peak": *\([0-9]*\).*/\1/p' "$work/$m.json")
    storages=$(sed -n 's/.*"storages": *\([0-9]*\).*/\1/p' "$work/$m.json" | head -n 1)
    [ -n "$peak" ] || { fail "$m: no theoretical_peak in the report"; continue; }
    head -1 "$work/$m.csv" | grep -qx "id,lower,upper,size" || fail "$m: header $(head -1 "$work/$m.csv")"
    lines=$(($(wc -l < "$work/$m.csv") - 1))
    [ -z "$storages" ] || [ "$lines" = "$storages" ] || fail "$m: $lines buffers, $storages storages"
    if ! "$roamc" layout "$work/$m.csv" --time-limit 5 -o "$work/$m.out.csv" > "$work/$m.log" 2>&1; then
        fail "$m: roamc layout: $(cat "$work/$m.log")"
    else
        grep -q "^lower bound: $peak bytes" "$work/$m.log" ||
            fail "$m: roamc layout's bound is not the plan's theoretical peak $peak: $(cat "$work/$m.log")"
    fi
    if "$roamc" "$model" -q -o "$work/$m.plan2"; then
        cmp -s "$work/$m.plan" "$work/$m.plan2" || fail "$m: --dump-buffers changed the plan"
    else
        fail "$m: plan without --dump-buffers"
    fi
    [ "$TEST_FAILS" != "$failed_before" ] || pass "$m: the buffer CSV loads back at the plan's theoretical peak"
done
"$roamc" "$models/alexnet_b1.onnx" --max-batch --dump-buffers "$work/mb.csv" > "$work/log" 2>&1
rc=$?
[ $rc -eq 2 ] || fail "--max-batch with --dump-buffers: exit $rc, expected 2"
[ ! -e "$work/mb.csv" ] || fail "--max-batch: file written"
"$roamc" "$models/alexnet_b1.onnx" -q --dump-buffers "$work/no/such/dir.csv" > /dev/null 2>&1 && fail "bad folder accepted"
test_finish test_dump_buffers
