#!/bin/bash
# roamc --train end to end: forward-only graphs -> derived training step ->
# plan -> both checkers; --emit-train round trip; bad inputs.
#
# usage: tests/test_train.sh ROAMC_BINARY CHECK_PLAN_PY OUTDIR
#
# The forward graphs come from tests/gen_train_models.py (onnx.helper only).
# Every derived step is written with --emit-train, its plan must pass
# `roamc check` and check_plan.py, and planning the written file again must
# give a byte-identical plan (the plan names the written file in both runs).
# Bad inputs must fail with exit 2, a message naming the problem, and leave
# no plan and no derived file.
# Exit 0 on pass, 1 on failure, 77 (skip) when /usr/bin/python3 lacks onnx.
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
"$PY" "$HERE/gen_train_models.py" "$OUT" || fail_now "gen_train_models.py"
have_check=1
test_check_plan "$CHECK" || have_check=0

# name | model | expected text in the report | roamc options
good() {
    local name=$1 model=$2 expect=$3
    shift 3
    local d="$OUT/$name.derived.onnx" p="$OUT/$name.plan.json"
    if ! "$ROAMC" "$OUT/$model" --train --emit-train "$d" -o "$p" "$@" >"$OUT/$name.out" 2>&1; then
        fail "$name: roamc --train failed: $(cat "$OUT/$name.out")"
        return
    fi
    grep -q -- "$expect" "$OUT/$name.out" || fail "$name: report lacks '$expect': $(cat "$OUT/$name.out")"
    "$ROAMC" check "$d" "$p" >/dev/null 2>&1 || fail "$name: roamc check rejects the plan"
    if [ $have_check = 1 ]; then
        test_check_plan_py "$CHECK" "$d" "$p" >"$OUT/$name.check" 2>&1 || fail "$name: check_plan.py: $(tail -3 "$OUT/$name.check")"
    fi
    # the derived file read back: the same plan, byte for byte (same options less --train's)
    local rest=() skip=0
    for a in "$@"; do
        if [ $skip = 1 ]; then skip=0; continue; fi
        case "$a" in --loss|--optimizer|--frozen|--dim) skip=1 ;; *) rest+=("$a") ;; esac
    done
    "$ROAMC" "$d" -q -o "$p.again" "${rest[@]}" || fail "$name: roamc on the derived file failed"
    cmp -s "$p" "$p.again" || fail "$name: reading the derived file back gives another plan"
    pass "$name ($(grep -m1 '^  train' "$OUT/$name.out" | sed 's/^ *//'))"
}

good cnn cnn.onnx "label input 'target' int64 \[4\]"
good cnn_program cnn.onnx "adam: 21 state inputs" --order program
good cnn_sgd cnn.onnx "sgd: 0 state inputs" --optimizer sgd
good cnn_momentum cnn.onnx "momentum: 7 state inputs" --optimizer momentum --order lescea
good cnn_adamw cnn.onnx "adamw: 21 state inputs" --optimizer adamw
good cnn_none cnn.onnx "none: 0 state inputs" --optimizer none
good cnn_frozen cnn.onnx "5 float initializers trained (.*), 2 frozen" --frozen 'c1.*'
good transformer transformer.onnx "label input 'target' int64 \[2, 8\]"
good mlp_mse mlp_dyn.onnx "loss mse on 'y' float32 \[7, 4\]; label input 'target' float32 \[7, 4\]" --loss mse --dim N=7
good scalar scalar.onnx "the graph's own output 'loss'"

# the rules named in the derived graph (what PyTorch's autograd runs)
if "$PY" - "$OUT" <<'PYEOF'
import sys, onnx
d = sys.argv[1]
ops = {n.op_type for n in onnx.load(d + "/cnn.derived.onnx").graph.node}
need = {"convolution_backward", "native_batch_norm_backward", "threshold_backward", "max_pool2d_with_indices_backward",
        "avg_pool2d_backward", "mm", "sum", "add", "addcdiv_", "nll_loss_backward"}
t = {n.op_type for n in onnx.load(d + "/transformer.derived.onnx").graph.node}
need_t = {"embedding_dense_backward", "native_layer_norm_backward", "bmm", "_softmax_backward_data",
          "native_dropout_backward", "gelu_backward", "cat", "slice_backward", "permute_copy"}
missing = (need - ops) | (need_t - t)
if "Erf" in t and "erf" in t:
    missing.add("(Erf-GELU not fused)")
# parameters' gradients have the parameters' shapes; every value has a static shape
for f in ("cnn", "transformer"):
    m = onnx.load(d + "/%s.derived.onnx" % f)
    meta = {p.key: p.value for p in m.metadata_props}
    shp = {v.name: [x.dim_value for x in v.type.tensor_type.shape.dim]
           for v in list(m.graph.input) + list(m.graph.value_info) + list(m.graph.output)}
    for p, g in zip(meta["roamc.parameters"].split(","), meta["roamc.gradients"].split(",")):
        if shp.get(p) != shp.get(g):
            missing.add("%s: grad %s of %s has shape %s, not %s" % (f, g, p, shp.get(g), shp.get(p)))
if missing:
    print("missing:", sorted(missing))
    sys.exit(1)
PYEOF
then pass "derived ops and gradient shapes"; else fail "derived graphs lack rules"; fi

# name | expected exit | expected message | roamc arguments
bad() {
    local name=$1 code=$2 expect=$3
    shift 3
    rm -f "$OUT/bad.plan.json" "$OUT/bad.derived.onnx"
    "$ROAMC" "$@" -o "$OUT/bad.plan.json" >"$OUT/$name.out" 2>&1
    local rc=$?
    [ $rc = "$code" ] || fail "$name: exit $rc, want $code: $(cat "$OUT/$name.out")"
    grep -q -- "$expect" "$OUT/$name.out" || fail "$name: message lacks '$expect': $(cat "$OUT/$name.out")"
    [ ! -e "$OUT/bad.plan.json" ] || fail "$name: wrote a plan"
    [ ! -e "$OUT/bad.derived.onnx" ] || fail "$name: wrote the derived graph"
    pass "$name"
}
E="--emit-train $OUT/bad.derived.onnx"
bad no_float_initializer 2 "no float initializer" "$OUT/bad_noinit.onnx" --train $E
bad int_output 2 "no float output to put a loss on (its first output 'cls' is int64)" "$OUT/bad_intout.onnx" --train $E
bad unknown_op 2 "node 'my_custom_op' (#1, custom.domain::Frobnicate) is on the gradient path" "$OUT/bad_unknown.onnx" --train $E
bad no_param 2 "no float initializer reaches the loss" "$OUT/bad_nograd.onnx" --train $E
bad loss_none_not_scalar 2 "--loss none wants the graph's output to be the loss" "$OUT/cnn.onnx" --train --loss none $E
bad ce_on_scalar 2 "cross-entropy wants logits" "$OUT/scalar.onnx" --train --loss cross-entropy $E
bad unbound_dim 2 "N" "$OUT/mlp_dyn.onnx" --train $E
bad label_shape 2 "gives the label input 'target' the shape \[7\], which cannot match the cross-entropy loss on 'logits' float32 \[4, 10\]: it needs \[4\]" "$OUT/cnn.onnx" --train --input-shape target=7 $E
bad label_rank 2 "mse loss on 'logits' float32 \[4, 10\]: it needs \[4, 10\]" "$OUT/cnn.onnx" --train --loss mse --input-shape target=4 $E
bad label_name 2 "names 'labels', which is neither a graph input nor the label input that --train adds ('target' \[4\])" "$OUT/cnn.onnx" --train --input-shape labels=4 $E
# --report json carries the derivation, also for the derived file read back
set -f  # the fnmatch pattern c1.* is roamc's, not the shell's
for src in "$OUT/cnn.onnx --train --frozen c1.*" "$OUT/cnn_frozen.derived.onnx"; do
    # shellcheck disable=SC2086
    "$ROAMC" $src --report json -o "$OUT/json.plan.json" >"$OUT/json.report" 2>&1 &&
        "$PY" -c 'import json, sys; t = json.load(open(sys.argv[1]))["train"]
ok = (t["loss"] == "cross-entropy" and t["label"] == {"name": "target", "dtype": "int64", "shape": [4]}
      and t["parameters"]["count"] == 5 and t["frozen"] == {"count": 2, "bytes": 896}
      and t["optimizer"] == "adam" and t["optimizer_state"]["count"] == 15 and t["derived_from"].endswith("cnn.onnx"))
sys.exit(0 if ok else print(t) or 1)' "$OUT/json.report" && pass "--report json train object ($src)" ||
        fail "--report json lacks the derivation: $src: $(head -c 600 "$OUT/json.report")"
done
set +f
# the label bound to the shape the loss needs: the same schedule, buffers and peaks
"$ROAMC" "$OUT/cnn.onnx" --train --input-shape target=4 -q -o "$OUT/label_ok.plan.json" &&
    "$PY" -c 'import json, sys; a, b = (json.load(open(f)) for f in sys.argv[1:])
sys.exit(any(a[k] != b[k] for k in ("schedule", "buffers", "peak")))' "$OUT/label_ok.plan.json" "$OUT/cnn.plan.json" \
    && pass "label shape bound to what the loss needs" || fail "label_ok: --input-shape target=4 did not plan like the unbound step"
bad loss_without_train 2 "need --train" "$OUT/cnn.onnx" --loss mse
bad unknown_optimizer 2 "--optimizer is adam" "$OUT/cnn.onnx" --train --optimizer lion
cp "$OUT/cnn.onnx" "$OUT/cnn.copy"
bad emit_over_input 2 "is the input file\\|that is the input" "$OUT/cnn.onnx" --train --emit-train "$OUT/cnn.onnx"
cmp -s "$OUT/cnn.onnx" "$OUT/cnn.copy" || fail "emit_over_input: the input file changed"
mkdir -p "$OUT/adir"
bad emit_to_directory 2 "a directory\\|a folder" "$OUT/cnn.onnx" --train --emit-train "$OUT/adir"

test_finish test_train
