#!/bin/sh
# Training set-ups (issue 28), the Python side end to end:
#   - models/export.py --amp bf16 and --grad-accum 2 on mlp3 and gpt2-tiny (the
#     2-layer transformer): the graph carries bf16 values and _to_copy casts (amp),
#     one data input set per microbatch and in-place accumulation (add_) of .grad;
#   - roamc plans each file (program order, PyTorch's rules: --method pytorch,
#     and --order program --layout llfb) and check_plan.py accepts both plans;
#   - models/dist_harness.py runs the same set-up for real on the CPU (one
#     process, CPU autocast bf16 / 2 microbatches): its peak of live tensor bytes,
#     less the data inputs the caller keeps alive through the whole step (the
#     graph frees them after their last use), is within TOL_PERMILLE (10 = 1.0%)
#     of roamc's program-order theoretical peak with gradients held to the end of
#     the step (--method pytorch: as eager .grad holds them);
#   - bad arguments: --grad-accum 0, --amp fp16 (refused, with the reason).
# usage: test_setups.sh ROAMC CHECK_PLAN_PY MODELS_DIR WORK_DIR   (77 = skipped)
set -u
. "$(dirname "$0")/lib.sh"
test_usage 4 4 "ROAMC CHECK_PLAN_PY MODELS_DIR WORK_DIR" "$@"
roamc=$1 checker=$2 models=$3 work=$4
py=/usr/bin/python3
test_need_python "torch, onnx" "models/export.py and models/dist_harness.py need them"
test_check_plan_runs "$checker" || { echo "SKIP: cannot run $checker"; exit 77; }
tests=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work" && cd "$work" || exit 1
TOL_PERMILLE=10
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
json() { $py -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }

# model batch export-args harness-setup label
while read -r model batch args setup label; do
    f=$label.onnx
    step "$label: export, plan, harness"
    # shellcheck disable=SC2086
    $py "$models/export.py" --model "$model" --batch "$batch" $args -o "$f" -q ||
        { fail "$label: export"; continue; }
    case $args in
    *amp*) $py - "$f" <<'PY' || fail "$label: no bf16 values or _to_copy casts"
import sys, onnx
m = onnx.load(sys.argv[1])
vi = list(m.graph.value_info)
bf = sum(v.type.tensor_type.elem_type == onnx.TensorProto.BFLOAT16 for v in vi)
casts = sum(n.op_type == "_to_copy" for n in m.graph.node)
meta = {p.key: p.value for p in m.metadata_props}
assert meta["roamc.precision"] == "amp-bf16", meta.get("roamc.precision")
params = meta["roamc.parameters"].split(",")
ins = {v.name: v.type.tensor_type.elem_type for v in m.graph.input}
assert all(ins[p] == onnx.TensorProto.FLOAT for p in params), "parameters not fp32"
assert bf > 0 and casts > 0, (bf, casts)
PY
        ;;
    *grad-accum*) $py - "$f" <<'PY' || fail "$label: not two microbatches with accumulated .grad"
import sys, onnx
m = onnx.load(sys.argv[1])
meta = {p.key: p.value for p in m.metadata_props}
assert meta["roamc.grad_accum"] == "2"
assert [n for n in meta["roamc.data_inputs"].split(",") if n.startswith("mb1.")]
prod = {o: n for n in m.graph.node for o in n.output}
grads = meta["roamc.gradients"].split(",")
assert all(g in prod and prod[g].op_type == "add_" for g in grads), "a gradient not accumulated"
PY
        ;;
    esac
    "$roamc" "$f" --order program --layout llfb -o "$label.llfb.json" --report json > "$label.llfb.rep" ||
        fail "$label: roamc --order program --layout llfb"
    "$roamc" "$f" --method pytorch -o "$label.pt.json" --report json > "$label.pt.rep" ||
        fail "$label: roamc --method pytorch"
    for p in llfb pt; do
        test_check_plan_py "$checker" "$f" "$label.$p.json" > "$label.$p.chk" 2>&1 ||
            { fail "$label: check_plan.py rejects the $p plan"; tail -3 "$label.$p.chk"; }
    done
    $py "$models/dist_harness.py" --model "$model" --setup "$setup" --batch "$batch" \
        --grad-accum 2 > "$label.harness" 2> "$label.harness.err" ||
        { fail "$label: dist_harness.py"; tail -3 "$label.harness.err"; continue; }
    $py "$tests/setup_compare.py" one "$label" "$label.harness" "$TOL_PERMILLE" ||
        fail "$label: plan and harness disagree"
done <<'LIST'
mlp3 32 --amp=bf16 amp-bf16 mlp3_amp_bf16
mlp3 32 --grad-accum=2 grad-accum mlp3_ga2
gpt2-tiny 4 --amp=bf16 amp-bf16 tiny_amp_bf16
gpt2-tiny 4 --grad-accum=2 grad-accum tiny_ga2
LIST

# bad arguments: one line, exit 2, nothing written
$py "$models/export.py" --model mlp3 --grad-accum 0 -o bad.onnx > bad.txt 2>&1
[ $? -eq 2 ] && grep -q "grad-accum must be >= 1" bad.txt || fail "--grad-accum 0 not refused"
$py "$models/export.py" --model mlp3 --amp fp16 -o bad.onnx > bad.txt 2>&1
[ $? -eq 2 ] && grep -q "fp16 autocast cannot be traced" bad.txt || fail "--amp fp16 not refused with its reason"
[ ! -e bad.onnx ] || fail "a refused export left bad.onnx"
test_finish test_setups "$fails" 1
