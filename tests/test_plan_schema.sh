#!/bin/sh
# The plan file's JSON Schema (planner/plan.schema.json, issue 30): every plan
# roamc writes conforms, and broken ones do not.
#
# usage: test_plan_schema.sh ROAMC MODELS_DIR WORK_DIR [CHECK_PLAN_PY]
#
# - the schema is a valid draft 2020-12 schema (tests/plan_schema.py checks it
#   against the meta-schema before any plan);
# - plans of every committed model (default options), and of set-ups that add
#   or change fields: other orders and layouts, --align 1, --method pytorch;
#   --train on tests/gen_train_models.py's graphs (a symbolic batch
#   bound by --dim, optimizers, --precision, --grad-accum); --shard ddp, zero1,
#   zero2, zero3, fsdp; --fit at a budget below the peak (recompute and
#   offload: host_buffers) all conform;
# - broken plans (a field missing, one added, a wrong type, a negative offset,
#   an empty tensor list, a repeated step, an align not a power of two, a host
#   buffer with an offset, ...) are each refused, naming where;
# - with CHECK_PLAN_PY, test_check_plan_py (what the tests run instead of
#   check_plan.py) refuses a plan with a stray field that check_plan.py alone
#   accepts.
. "$(dirname "$0")/lib.sh"
test_usage 3 4 "ROAMC MODELS_DIR WORK_DIR [CHECK_PLAN_PY]" "$@"
ROAMC=$1 MODELS=$2 W=$3 CHECK=${4:-}
HERE=$(cd "$(dirname "$0")" && pwd)
PY=/usr/bin/python3
SCHEMA_PY="$HERE/plan_schema.py"
test_need_python "jsonschema, onnx, numpy" "python3-jsonschema; python3-onnx for the --train graphs"
rm -rf "$W" && mkdir -p "$W" || fail_now "cannot make $W"

# plan NAME ROAMC_ARGS...: roamc ROAMC_ARGS -q -o W/NAME.json
plan() {
    _n=$1
    shift
    "$ROAMC" "$@" -q -o "$W/$_n.json" >"$W/$_n.out" 2>&1 || fail "$_n: roamc $*: $(tail -3 "$W/$_n.out")"
}

n_models=0
for m in "$MODELS"/*.onnx; do
    [ -f "$m" ] || continue
    plan "model_$(basename "$m" .onnx)" "$m"
    n_models=$((n_models + 1))
done
[ $n_models -gt 0 ] || fail "no models in $MODELS"
A=$MODELS/alexnet_b1.onnx
plan lescea_llfb "$A" --order lescea --layout llfb
plan program_greedy_align1 "$A" --order program --layout greedy --align 1
plan method_pytorch "$A" --method pytorch

$PY "$HERE/gen_train_models.py" "$W/tm" >"$W/gen.out" 2>&1 || fail_now "gen_train_models.py: $(tail -3 "$W/gen.out")"
T=$W/tm/transformer.onnx
# --train NAME ARGS...: the derived step and its plan
train() {
    _n=$1
    shift
    plan "train_$_n" "$@" --train --emit-train "$W/train_$_n.onnx"
}
train cnn "$W/tm/cnn.onnx"
train cnn_sgd "$W/tm/cnn.onnx" --optimizer sgd --order program
train mlp_dyn "$W/tm/mlp_dyn.onnx" --dim N=8
train scalar "$W/tm/scalar.onnx"
train transformer "$T"
train transformer_amp "$T" --precision amp-fp16 --optimizer adamw
train transformer_accum "$T" --grad-accum 2
for kind in ddp zero1 zero2 zero3 fsdp; do
    plan "shard_$kind" "$T" --train --shard $kind --world 2 --rank 1 --emit-train "$W/shard_$kind.onnx"
done
# --fit below the derived step's arena: 90%, 95% for recompute alone (0.1 s each)
actual=$($PY -c 'import json, sys; print(json.load(open(sys.argv[1]))["peak"]["actual"])' "$W/train_transformer.json") ||
    fail_now "no peak in train_transformer.json"
for how in both:90 recompute:95 offload:90; do
    plan "fit_${how%:*}" "$W/train_transformer.onnx" --budget $((actual * ${how#*:} / 100)) --fit="${how%:*}" \
        --emit-train "$W/fit_${how%:*}.onnx"
done
grep -q '"host_buffers"' "$W/fit_offload.json" ||
    fail "fit_offload.json has no host_buffers: the schema's host_buffers part is not exercised"

n=$(ls "$W"/*.json | wc -l)
if $PY "$SCHEMA_PY" "$W"/*.json >"$W/schema.out" 2>&1; then
    pass "$n plans conform to planner/plan.schema.json ($n_models committed models, train, shard, fit)"
else
    fail "plans that do not conform:"
    grep -v '^SCHEMA OK' "$W/schema.out" | head -20
fi

# broken plans: each must fail the schema (exit 1) with its path in the message
mkdir -p "$W/broken"
$PY - "$W/model_alexnet_b1.json" "$W/fit_offload.json" "$W/broken" >"$W/broken/list" <<'PY' || fail_now "the broken plans"
import copy, json, os, sys
good, fit, out = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
def brk(name, where, f, base=good):
    p = copy.deepcopy(base)
    f(p)
    json.dump(p, open(os.path.join(out, name + ".json"), "w"))
    print(name, where)
brk("no_peak", "/", lambda p: p.pop("peak"))
brk("no_sha", "/", lambda p: p.pop("model_sha256"))
brk("typo_field", "/", lambda p: p.update(bufers=[]))
brk("bad_format", "/format", lambda p: p.update(format="roam_plan"))
brk("version3", "/version", lambda p: p.update(version=3))
brk("version2_no_streams", "/", lambda p: p.update(version=2))
brk("version1_waits", "/", lambda p: p.update(waits=[]))
brk("sha_upper", "/model_sha256", lambda p: p.update(model_sha256=p["model_sha256"].upper()))
brk("align3", "/align", lambda p: p.update(align=3))
brk("order_unknown", "/order", lambda p: p.update(order="fastest"))
brk("graph_kind", "/graph", lambda p: p.update(graph="train"))
brk("sched_repeat", "/schedule", lambda p: p["schedule"].append(p["schedule"][0]))
brk("sched_string", "/schedule/0", lambda p: p["schedule"].__setitem__(0, "0"))
brk("offset_negative", "/buffers/0/offset", lambda p: p["buffers"][0].update(offset=-512))
brk("size_float", "/buffers/0/size", lambda p: p["buffers"][0].update(size=512.5))
brk("tensors_empty", "/buffers/1/tensors", lambda p: p["buffers"][1].update(tensors=[]))
brk("buffer_extra", "/buffers/2", lambda p: p["buffers"][2].update(device=0))
brk("buffer_no_end", "/buffers/2", lambda p: p["buffers"][2].pop("end"))
brk("persistent_false", "/buffers/0/persistent", lambda p: p["buffers"][0].update(persistent=False))
brk("peak_string", "/peak/actual", lambda p: p["peak"].update(actual=str(p["peak"]["actual"])))
brk("peak_extra", "/peak", lambda p: p["peak"].update(reserved=0))
brk("shapes_no_symbols", "/shapes", lambda p: p["shapes"].pop("symbols"))
brk("symbol_kind", "/shapes/symbols/0/kind", lambda p: p["shapes"]["symbols"].append(
    {"name": "batch", "value": 4, "kind": "bound", "node": None}))
brk("symbol_value", "/shapes/symbols/0/value", lambda p: p["shapes"]["symbols"].append(
    {"name": "batch", "value": "4", "kind": "input", "node": None}))
brk("host_offset", "/host_buffers/0/offset", lambda p: p["host_buffers"][0].update(offset=4096), fit)
brk("host_empty", "/host_buffers", lambda p: p.update(host_buffers=[]), fit)
PY
n_broken=0
while read -r name where; do
    n_broken=$((n_broken + 1))
    $PY "$SCHEMA_PY" "$W/broken/$name.json" >"$W/broken/$name.out" 2>&1
    rc=$?
    if [ $rc != 1 ]; then
        fail "broken plan $name: plan_schema.py exits $rc, not 1: $(head -3 "$W/broken/$name.out")"
    elif ! grep -qF "at $where:" "$W/broken/$name.out"; then
        fail "broken plan $name: no problem at $where in: $(head -3 "$W/broken/$name.out")"
    fi
done <"$W/broken/list"
[ $n_broken -ge 20 ] || fail "only $n_broken broken plans were tried"
pass "$n_broken broken plans each refused at the field broken"

# the wiring: check_plan.py ignores a stray field, test_check_plan_py does not
if [ -n "$CHECK" ] && test_check_plan "$CHECK"; then
    $PY "$CHECK" "$A" "$W/broken/typo_field.json" >"$W/stray_py.out" 2>&1 ||
        fail "check_plan.py refuses a plan with a stray field: $(tail -2 "$W/stray_py.out")"
    if test_check_plan_py "$CHECK" "$A" "$W/broken/typo_field.json" >"$W/stray.out" 2>&1; then
        fail "test_check_plan_py accepts a plan with a stray field"
    else
        grep -q "SCHEMA INVALID" "$W/stray.out" || fail "test_check_plan_py: no SCHEMA INVALID in $(head -2 "$W/stray.out")"
    fi
    test_check_plan_py "$CHECK" "$A" "$W/model_alexnet_b1.json" >"$W/good.out" 2>&1 ||
        fail "test_check_plan_py refuses a good plan: $(tail -2 "$W/good.out")"
    grep -q '^VALID' "$W/good.out" || fail "test_check_plan_py: check_plan.py's VALID is not passed on"
    pass "test_check_plan_py: the schema, then check_plan.py"
fi
test_finish test_plan_schema
