#!/bin/bash
# roamc --train on inference (eval-mode) exports: every message of the report's
# "eval export" lines (frontend/train/train_export.c), its --report json member
# train.eval_export, and the training semantics --train uses where the file holds
# them (BatchNormalization / Dropout in inference form): the derived step says
# training_mode, plans like the training-mode twin, and passes both checkers.
#
# usage: tests/test_eval_export.sh ROAMC_BINARY CHECK_PLAN_PY OUTDIR
# The forward graphs come from tests/gen_eval_export_models.py (onnx.helper only).
# Exit 0 pass, 1 failure, 77 (skip) when /usr/bin/python3 lacks onnx.
set -u
. "$(dirname "$0")/lib.sh"
test_usage 3 3 "ROAMC_BINARY CHECK_PLAN_PY OUTDIR" "$@"
ROAMC=$1
CHECK=$2
OUT=$3
PY=/usr/bin/python3
HERE=$(cd "$(dirname "$0")" && pwd)
test_need_python "onnx, numpy" "python3-onnx"
rm -rf "$OUT" && mkdir -p "$OUT" || fail_now "cannot make $OUT"
"$PY" "$HERE/gen_eval_export_models.py" "$OUT" || fail_now "gen_eval_export_models.py"
have_check=1
test_check_plan "$CHECK" || have_check=0

FIX='fix: torch.onnx.export(model.train(), args, "fwd.onnx", training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False), or models/export.py --module FILE.py:FUNC'

# run NAME MODEL [roamc options]: --train with --emit-train, text report in NAME.out,
# JSON report in NAME.json; both plan checkers on the derived step.
run() {
    local name=$1 model=$2
    shift 2
    local d="$OUT/$name.derived.onnx" p="$OUT/$name.plan.json"
    if ! "$ROAMC" "$OUT/$model" --train --emit-train "$d" -o "$p" "$@" >"$OUT/$name.out" 2>&1; then
        fail "$name: roamc --train failed: $(cat "$OUT/$name.out")"
        return 1
    fi
    "$ROAMC" "$OUT/$model" --train -q --report json "$@" >"$OUT/$name.json" 2>"$OUT/$name.json.err" ||
        fail "$name: --report json failed: $(cat "$OUT/$name.json.err")"
    "$ROAMC" check "$d" "$p" >/dev/null 2>&1 || fail "$name: roamc check rejects the plan"
    if [ $have_check = 1 ]; then
        "$PY" "$CHECK" "$d" "$p" >"$OUT/$name.check" 2>&1 || fail "$name: check_plan.py: $(tail -3 "$OUT/$name.check")"
    fi
    return 0
}

# has NAME TEXT...: each TEXT is a line fragment of NAME's report (fixed strings)
has() {
    local name=$1
    shift
    local t
    for t in "$@"; do
        grep -qF -- "$t" "$OUT/$name.out" || fail "$name: report lacks '$t': $(grep 'eval export' "$OUT/$name.out")"
    done
}

# quiet NAME: no "eval export" line and no train.eval_export member
quiet() {
    local name=$1
    if grep -q "eval export" "$OUT/$name.out"; then fail "$name: warned: $(grep 'eval export' "$OUT/$name.out")"; fi
    "$PY" -c 'import json,sys; sys.exit("eval_export" in json.load(open(sys.argv[1]))["train"])' "$OUT/$name.json" ||
        fail "$name: --report json has train.eval_export"
}

# json NAME KEY=VALUE...: train.eval_export's members (integers, or true/false for step_low)
json() {
    local name=$1
    shift
    "$PY" - "$OUT/$name.json" "$@" <<'PYEOF' || fail "$name: --report json train.eval_export"
import json, sys
e = json.load(open(sys.argv[1]))["train"].get("eval_export")
if e is None:
    sys.exit("no train.eval_export")
for kv in sys.argv[2:]:
    k, v = kv.split("=")
    want = {"true": True, "false": False}.get(v, None if v in ("true", "false") else int(v) if v.isdigit() else v)
    if e.get(k) != want:
        sys.exit("%s = %r, want %r" % (k, e.get(k), want))
for k in ("fix", "not_seen", "missed", "planned_in_training_mode"):
    if not e.get(k):
        sys.exit("no %s" % k)
if "TrainingMode.TRAINING" not in e["fix"] or "do_constant_folding=False" not in e["fix"]:
    sys.exit("fix %r does not name the training-mode export" % e["fix"])
PYEOF
}

# peak NAME: the derived step's theoretical peak in bytes
peak() { "$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["peak"]["theoretical"])' "$OUT/$1.plan.json"; }

# 1. BatchNormalization in inference form (opset 17 attribute, opset 13 one output)
for m in bn_inf bn_inf13; do
    run $m $m.onnx || continue
    has $m "looks like an inference export" "planned with the training semantics the file holds" \
        "1 of 1 BatchNormalization in inference form (training_mode 0), e.g. 'bn': planned in training mode (batch statistics saved for the backward, running stats updated in place)" \
        "not seen: a Dropout outside attention" "$FIX"
    json $m batchnorm=1 batchnorm_inference=1 convs_folded=0 step_low=false
done
run bn_train bn_train.onnx && quiet bn_train
[ "$(peak bn_inf)" = "$(peak bn_train)" ] || fail "bn_inf: peak $(peak bn_inf), training-mode twin $(peak bn_train)"
[ "$(peak bn_inf13)" = "$(peak bn_train)" ] || fail "bn_inf13: peak $(peak bn_inf13), training-mode twin $(peak bn_train)"

# 2. Dropout with a ratio but not training (constant false, absent, opset 11)
for m in drop_inf drop_absent drop_op11; do
    run $m $m.onnx || continue
    has $m "planned with the training semantics the file holds" \
        "1 Dropout with ratio > 0 but training_mode false or absent, e.g. 'drop': planned in training mode (a mask saved for the backward)" "$FIX"
    json $m dropout=1 dropout_inference=1 step_low=false
done
run drop_train drop_train.onnx && quiet drop_train
run drop_p0 drop_p0.onnx && quiet drop_p0
# the same step as the training-mode twin, less one bool initializer (512 B aligned)
for m in drop_inf drop_absent; do
    d=$(( $(peak $m) - $(peak drop_train) ))
    [ "$d" -ge 0 ] && [ "$d" -le 512 ] || fail "$m: peak $(peak $m), training-mode twin $(peak drop_train)"
done
[ "$(peak drop_op11)" = "$(peak drop_train)" ] || fail "drop_op11: peak $(peak drop_op11), training-mode twin $(peak drop_train)"

# the derived files say training: BatchNormalization training_mode=1 (or, opset 13, its
# running-stat outputs) updating the stats in place; Dropout reads a true training_mode
# (opset 11: its mask) and its mask is what native_dropout_backward keeps
if "$PY" - "$OUT" <<'PYEOF'; then pass "derived steps in training mode"; else fail "derived steps in training mode"; fi
import sys, onnx
from onnx import numpy_helper as nh
d = sys.argv[1]
bad = []
def nodes(name):
    m = onnx.load("%s/%s.derived.onnx" % (d, name))
    return m, {n.op_type: n for n in m.graph.node}
for name, opset in (("bn_inf", 17), ("bn_inf13", 13)):
    m, by = nodes(name)
    b = by["BatchNormalization"]
    at = {a.name: a for a in b.attribute}
    if len(b.output) != 3: bad.append("%s: BatchNormalization has %d outputs" % (name, len(b.output)))
    if opset >= 14 and at.get("training_mode") is None or opset >= 14 and at["training_mode"].i != 1:
        bad.append("%s: training_mode is not 1" % name)
    if list(at["alias"].ints) != [-1, 3, 4] or at["inplace"].i != 1:
        bad.append("%s: running stats not updated in place" % name)
    if "native_batch_norm_backward" not in by: bad.append("%s: no native_batch_norm_backward" % name)
for name in ("drop_inf", "drop_absent", "drop_op11"):
    m, by = nodes(name)
    dr = by["Dropout"]
    if len(dr.output) != 2: bad.append("%s: Dropout has no mask" % name)
    if name != "drop_op11":
        inits = {i.name: i for i in m.graph.initializer}
        if len(dr.input) < 3 or dr.input[2] not in inits or not bool(nh.to_array(inits[dr.input[2]])):
            bad.append("%s: Dropout's training_mode is not a true initializer: %s" % (name, list(dr.input)))
    nb = by.get("native_dropout_backward")
    if nb is None or dr.output[1] not in nb.input: bad.append("%s: native_dropout_backward does not read the mask" % name)
m, by = nodes("drop_p0")
if "native_dropout_backward" in by: bad.append("drop_p0: a ratio-0 Dropout got a mask")
for b in bad: print(b)
sys.exit(1 if bad else 0)
PYEOF

# 3. BatchNorm folded into Conv: a PyTorch file's exporter-made Conv weight
run folded folded.onnx && {
    has folded "the training step below is LOW: what it misses is not in the file" \
        "1 of 1 Conv weights are exporter-made constants ('onnx::Conv_7'), not module parameters: the mark of torch.onnx's eval-mode Conv+BatchNorm fusion; missed: each folded BatchNorm's output and the tensors its backward keeps" "$FIX"
    json folded convs=1 convs_folded=1 step_low=true
}
run folded_other folded_other.onnx && quiet folded_other
run named_pytorch named_pytorch.onnx && quiet named_pytorch

# 4. Attention with no Dropout in a PyTorch file
run attn_nodrop attn_nodrop.onnx && {
    has attn_nodrop "the training step below is LOW" \
        "no Dropout node, but 1 attention Softmax read by a MatMul (where transformers put a dropout; a training-mode export keeps every nn.Dropout, even p = 0): missed: each dropout's output and mask" "$FIX"
    json attn_nodrop attention_without_dropout=1 dropout=0 step_low=true
}
run attn_other attn_other.onnx && quiet attn_other

# 5. --grad-accum and --precision on converted nodes: valid plans, the running stats of
# microbatch 1 are the ones microbatch 0 left
run bn_inf_k2 bn_inf.onnx --grad-accum 2 && has bn_inf_k2 "1 of 1 BatchNormalization in inference form"
run drop_inf_k2 drop_inf.onnx --grad-accum 2 && has drop_inf_k2 "1 Dropout with ratio > 0"
run bn_inf_amp bn_inf.onnx --precision amp-bf16 && has bn_inf_amp "1 of 1 BatchNormalization in inference form"
[ "$(peak bn_inf_k2)" = "$("$ROAMC" "$OUT/bn_train.onnx" --train --grad-accum 2 -q -o "$OUT/bn_train_k2.json" &&
    "$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["peak"]["theoretical"])' "$OUT/bn_train_k2.json")" ] ||
    fail "bn_inf --grad-accum 2: peak differs from the training-mode twin's"

# 6. the derived file read back reports the same member
"$ROAMC" "$OUT/bn_inf.derived.onnx" -q --report json >"$OUT/readback.json" 2>&1 &&
    "$PY" -c 'import json,sys; sys.exit(json.load(open(sys.argv[1]))["train"]["eval_export"]["batchnorm_inference"] != 1)' "$OUT/readback.json" ||
    fail "the derived file read back lacks train.eval_export"

test_finish test_eval_export
