#!/bin/sh
# Steps roamc --train derives from an ordinary torch.onnx export, run (issue 39):
# a small custom CNN (Conv with and without bias, BatchNorm in training mode,
# ReLU, MaxPool, a residual Add, adaptive average pool, Flatten, Dropout,
# Linear), exported as the README says (training mode, dynamic batch), its
# step derived with `roamc --train --dim batch=4 --emit-train`, then:
#
# - models/run_plan.py runs the step in an arena of exactly its plan's peak
#   and matches the eager run of the same step bit for bit, its parameters
#   taken from the export's initializers (the step records the file it was
#   derived from); without that file, from seeded random data;
# - a --fit step of it (recompute: --fit at 83% of the peak; offload:
#   --fit=offload at 85%) matches the unchanged step (--reference) bit for bit;
# - a broken plan of it (two live buffers at one offset) is caught: exit 1;
# - torchvision's mobilenet_v2 (ReLU6 as Clip), exported the same way: its
#   derived step matches too; and squeezenet1_1, whose Concats' gradients are
#   slices (refused by the runner before the newcomer pass of 2026-11-28).
# Before run_plan.py knew such steps it refused them ("initializers ... hold no
# data in exporter graphs", exit 2).
#
# usage: test_run_plan_train.sh ROAMC CHECK_PLAN_PY WORKDIR   (77 = skipped)
. "$(dirname "$0")/lib.sh"
test_usage 3 3 "ROAMC CHECK_PLAN_PY WORKDIR" "$@"
ROAMC=$1 CHECK=$2 W=$3
case $ROAMC in /*) ;; *) ROAMC=$(pwd)/$ROAMC ;; esac
case $CHECK in /*) ;; *) CHECK=$(pwd)/$CHECK ;; esac
SRC=$(cd "$(dirname "$0")/.." && pwd)
PY=/usr/bin/python3
RUN=$SRC/models/run_plan.py
test_need_python "torch, onnx" "the export and the runner need torch"
rm -rf "$W" && mkdir -p "$W" && cd "$W" || fail_now "cannot make $W"

"$PY" - <<'EOF' >export.out 2>&1 || fail_now "the export: $(tail -3 export.out)"
import torch, torch.nn as nn
torch.manual_seed(0)
class Block(nn.Module):
    def __init__(s, c):
        super().__init__()
        s.c1, s.b1 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        s.c2, s.b2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
    def forward(s, x):
        return torch.relu(s.b2(s.c2(torch.relu(s.b1(s.c1(x))))) + x)
model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                      Block(8), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.2), nn.Linear(8, 10))
torch.onnx.export(model.train(), torch.randn(4, 3, 16, 16), "small_fwd.onnx",
                  training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                  input_names=["input"], output_names=["logits"],
                  dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})
EOF
"$ROAMC" small_fwd.onnx --train --dim batch=4 --emit-train step.onnx -o step.plan.json -q ||
    fail_now "roamc --train on the export"
if test_check_plan_runs "$CHECK"; then
    test_check_plan_py "$CHECK" step.onnx step.plan.json >check.out 2>&1 || fail "check_plan.py: $(tail -3 check.out)"
else
    skip_part "check_plan.py (needs ../shared/tools/check_plan.py, python3-onnx and python3-jsonschema)"
fi

# expect RC NAME CMD...: CMD exits RC; its output in NAME.out
expect() {
    _want=$1 _name=$2
    shift 2
    "$@" >"$_name.out" 2>&1
    _rc=$?
    [ "$_rc" = "$_want" ] || { fail "$_name: exit $_rc, want $_want: $(tail -3 "$_name.out")"; return 1; }
}

expect 0 step "$PY" "$RUN" step.onnx step.plan.json &&
    grep -q '^parameters: 12 of 12 from small_fwd.onnx' step.out && grep -q '^MATCH step.plan.json' step.out &&
    pass "the derived step runs in its plan's arena, bit for bit the eager step: $(grep '^MATCH' step.out | sed 's/.*; arena/arena/')" ||
    fail "the derived step: $(cat step.out)"

# the --fit steps, against the unchanged step
peak=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["peak"]["actual"])' step.plan.json)
for kind in both offload; do
    pct=$([ $kind = both ] && echo 83 || echo 85)
    budget=$((peak * pct / 100))
    "$ROAMC" step.onnx --budget "$budget" --fit=$kind --emit-train "fit_$kind.onnx" -o "fit_$kind.plan.json" -q ||
        { fail "roamc --fit=$kind at $budget B ($pct% of $peak)"; continue; }
    changed=$("$PY" -c '
import onnx, sys
m = onnx.load(sys.argv[1])
print(sum(1 for n in m.graph.node if n.op_type in ("Offload", "Reload") or
          any(a.name == "roamc_recompute" for a in n.attribute)))' "fit_$kind.onnx")
    [ "$changed" -gt 0 ] || fail "--fit=$kind at $budget B changed nothing"
    expect 0 "fit_$kind" "$PY" "$RUN" "fit_$kind.onnx" "fit_$kind.plan.json" --reference step.onnx &&
        grep -q "^MATCH fit_$kind.plan.json" "fit_$kind.out" &&
        pass "--fit=$kind at $pct% ($changed nodes changed): $(grep '^MATCH' "fit_$kind.out" | sed 's/.*; arena/arena/')" ||
        fail "--fit=$kind: $(cat "fit_$kind.out")"
done

# torchvision_step NAME WHAT: torchvision's NAME (10 classes) exported in training mode at
# 32x32, batch 2, its --train step planned and run bit for bit; its report in NAME.out
torchvision_step() {
    name=$1 what=$2
    "$PY" - "$name" <<'EOF' >"export_$name.out" 2>&1 || fail "the $name export: $(tail -3 "export_$name.out")"
import sys, torch, torchvision
torch.manual_seed(0)
torch.onnx.export(getattr(torchvision.models, sys.argv[1])(num_classes=10).train(), torch.randn(2, 3, 32, 32),
                  sys.argv[1] + "_fwd.onnx", training=torch.onnx.TrainingMode.TRAINING,
                  do_constant_folding=False, input_names=["input"], output_names=["logits"],
                  dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})
EOF
    "$ROAMC" "${name}_fwd.onnx" --train --dim batch=2 --emit-train "${name}_step.onnx" \
        -o "$name.plan.json" -q || fail "roamc --train on $name"
    expect 0 "$name" "$PY" "$RUN" "${name}_step.onnx" "$name.plan.json" && grep -q '^MATCH' "$name.out" &&
        pass "torchvision $name's derived step$what: $(grep '^MATCH' "$name.out" | sed 's/.*; arena/arena/')" ||
        fail "$name: $(tail -3 "$name.out")"
}

# torchvision models: mobilenet_v2 (ReLU6 as Clip, depthwise convolutions), squeezenet1_1
# (Concats, whose gradients are slices)
if "$PY" -c 'import torchvision' 2>/dev/null; then
    torchvision_step mobilenet_v2 ""
    grep -q '^parameters: 158 of 158 from mobilenet_v2_fwd.onnx' mobilenet_v2.out ||
        fail "mobilenet_v2: not every parameter from the export: $(grep '^parameters' mobilenet_v2.out)"
    torchvision_step squeezenet1_1 " (Concat gradients as slices)"
else
    skip_part "no torchvision for /usr/bin/python3: the mobilenet_v2 and squeezenet1_1 cases"
fi

# a broken plan is caught, and a step whose export is gone runs on seeded random weights
expect 0 break "$PY" "$SRC/tests/break_plan.py" overlap step.onnx step.plan.json overlap.json &&
    expect 1 overlap "$PY" "$RUN" step.onnx overlap.json &&
    grep -q '^MISMATCH overlap.json' overlap.out && pass "a plan with two live buffers at one offset: MISMATCH, exit 1"
mkdir -p elsewhere && cp step.onnx step.plan.json elsewhere/ && cd elsewhere &&
    expect 0 random "$PY" "$RUN" step.onnx step.plan.json &&
    grep -q 'which is not here: its parameters are seeded random data' random.out &&
    grep -q '^MATCH' random.out && pass "without small_fwd.onnx: seeded random parameters, MATCH"
test_finish test_run_plan_train
