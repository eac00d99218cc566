#!/bin/bash
# roamc --train set-ups (issue 28): --precision fp32|bf16|fp16|amp-bf16|amp-fp16 and
# --grad-accum K on the forward graphs of tests/gen_train_models.py; both checkers
# accept every plan; the element types of the emitted step are the set-up's (half
# MatMul/Gemm/Conv inputs under amp-*, fp32 parameters, gradients and optimizer
# state; everything half under bf16/fp16); K microbatches with mb<k>. inputs and
# roamc.grad_accum = K; bad values exit 2.  With torch in /usr/bin/python3: an MLP
# and a 2-layer transformer exported forward-only by torch.onnx, derived with
# amp-bf16 and --grad-accum 2/4, against models/export.py --module of the same
# module (--amp bf16 / --grad-accum): roamc's theoretical peak in program order of
# both files, the difference printed (grad-accum and fp32 within 3%; amp-bf16: the
# exporter traces CPU autocast, whose lists keep softmax in bf16 where CUDA's run it
# in fp32, so the transformer may be above by that, at most 8%).
#
# usage: tests/test_train_setups.sh ROAMC_BINARY CHECK_PLAN_PY OUTDIR
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
rm -rf "$OUT" && mkdir -p "$OUT" || exit 1
"$PY" "$HERE/gen_train_models.py" "$OUT" || { echo "FAIL: gen_train_models.py"; exit 1; }
fail=0
failed() { echo "FAIL: $*"; fail=1; }

# name | model | precision | K | extra roamc options
derive() {
    local name=$1 model=$2 prec=$3 k=$4
    shift 4
    local d="$OUT/$name.onnx" p="$OUT/$name.json"
    if ! "$ROAMC" "$OUT/$model" --train --precision "$prec" --grad-accum "$k" --emit-train "$d" -o "$p" "$@" \
        >"$OUT/$name.out" 2>&1; then
        failed "$name: roamc --train failed: $(tail -3 "$OUT/$name.out")"
        return
    fi
    if [ "$prec" != fp32 ] || [ "$k" != 1 ]; then
        sed -n 2p "$OUT/$name.out" | grep -q "^  set-up        precision $prec .*grad-accum $k" ||
            failed "$name: the summary's first line is not the set-up: $(sed -n 2p "$OUT/$name.out")"
    fi
    "$ROAMC" check "$d" "$p" "$@" >"$OUT/$name.rcheck" 2>&1 || failed "$name: roamc check: $(tail -2 "$OUT/$name.rcheck")"
    # check_plan.py and the element types: each run once over every step, below
    test_plan_line "$OUT/plans.list" "$name" "$d" "$p" "$@"
    types_args+=("$d" "$prec" "$k")
}

n=0
types_args=()
rm -f "$OUT/plans.list"
for model in cnn transformer mlp_dyn scalar; do
    step "$model: 5 precisions x K 1, 2, 4 derived and checked"
    extra=()
    [ $model = mlp_dyn ] && extra=(--dim N=5)
    for prec in fp32 bf16 fp16 amp-bf16 amp-fp16; do
        for k in 1 2 4; do
            derive "$model.$prec.k$k" "$model.onnx" "$prec" "$k" "${extra[@]}"
            n=$((n + 1))
        done
    done
done
step "check_plan.py and the element types of the $n steps"
if test_check_plan_runs "$CHECK"; then
    test_check_plans "$CHECK" "$OUT/plans.list" >"$OUT/plans.check" 2>&1 ||
        failed "check_plan.py: $(grep -A3 'FAILED' "$OUT/plans.check" | head -20)"
fi
"$PY" "$HERE/train_setup_types.py" "${types_args[@]}" >"$OUT/types.out" 2>&1 ||
    failed "element types: $(grep -v 'types ok' "$OUT/types.out" | head -20)"
echo "derived $n set-ups of 4 forward graphs, both checkers, element types"

# Bad values: exit 2 with a message naming the option, nothing written.
bad() {
    local what=$1
    shift
    "$ROAMC" "$OUT/cnn.onnx" --train "$@" -o "$OUT/bad.json" >"$OUT/bad.out" 2>&1
    local rc=$?
    [ $rc = 2 ] || failed "$what: exit $rc, not 2"
    grep -q -- "$what" "$OUT/bad.out" || failed "$what: message lacks '$what': $(cat "$OUT/bad.out")"
    [ ! -e "$OUT/bad.json" ] || failed "$what: a plan was written"
    rm -f "$OUT/bad.json"
}
bad "--precision is fp32, bf16, fp16, amp-bf16 or amp-fp16, not 'fp8'" --precision fp8
bad "--grad-accum is a number of microbatches from 1 to 1024" --grad-accum 0
bad "--grad-accum is a number of microbatches from 1 to 1024" --grad-accum 2x
bad "--grad-accum is a number of microbatches from 1 to 1024" --grad-accum 1025
"$ROAMC" "$OUT/cnn.onnx" --precision bf16 -o "$OUT/bad.json" >"$OUT/bad.out" 2>&1
[ $? = 2 ] && grep -q "need --train" "$OUT/bad.out" || failed "--precision without --train: $(cat "$OUT/bad.out")"

# Against models/export.py: the same module, forward-only through torch.onnx.
if ! "$PY" -c "import torch" >/dev/null 2>&1; then
    echo "note: /usr/bin/python3 has no torch: the comparison with models/export.py was not run"
    [ $fail = 0 ] && echo "PASS (without the torch comparison)"
    exit $fail
fi
cat >"$OUT/setups_module.py" <<'EOF'
"""An MLP and a 2-layer pre-LN transformer for models/export.py --module and torch.onnx."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    def __init__(self, device=None):
        super().__init__()
        self.fc1 = nn.Linear(256, 512, device=device)
        self.fc2 = nn.Linear(512, 512, device=device)
        self.fc3 = nn.Linear(512, 10, device=device)

    def forward(self, x):
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


class Block(nn.Module):
    def __init__(self, d, heads, device=None):
        super().__init__()
        self.h = heads
        self.ln1 = nn.LayerNorm(d, device=device)
        self.qkv = nn.Linear(d, 3 * d, device=device)
        self.proj = nn.Linear(d, d, device=device)
        self.ln2 = nn.LayerNorm(d, device=device)
        self.fc1 = nn.Linear(d, 4 * d, device=device)
        self.fc2 = nn.Linear(4 * d, d, device=device)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (t.reshape(b, s, self.h, d // self.h).transpose(1, 2) for t in (q, k, v))
        a = torch.softmax(q @ k.transpose(-2, -1) / (d // self.h) ** 0.5, dim=-1)
        x = x + self.proj((a @ v).transpose(1, 2).reshape(b, s, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Transformer(nn.Module):
    def __init__(self, vocab=512, d=128, heads=4, layers=2, seq=64, device=None):
        super().__init__()
        self.emb = nn.Embedding(vocab, d, device=device)
        self.pos = nn.Parameter(torch.zeros(seq, d, device=device))
        self.blocks = nn.ModuleList([Block(d, heads, device=device) for _ in range(layers)])
        self.ln = nn.LayerNorm(d, device=device)
        self.head = nn.Linear(d, vocab, device=device)

    def forward(self, ids):
        x = self.emb(ids) + self.pos
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x))


def _lm_loss(logits, target):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))


def mlp(batch=32, device="cpu"):
    return dict(model=MLP(device=device), inputs={"x": torch.randn(batch, 256, device=device)},
                loss_fn=nn.CrossEntropyLoss(),
                targets={"target": torch.randint(0, 10, (batch,), device=device)})


def transformer(batch=4, device="cpu"):
    return dict(model=Transformer(device=device),
                inputs={"ids": torch.randint(0, 512, (batch, 64), device=device)},
                loss_fn=_lm_loss, targets={"target": torch.randint(0, 512, (batch, 64), device=device)})


if __name__ == "__main__":  # FUNC BATCH PATH: the forward only (logits), training mode
    import sys
    spec = globals()[sys.argv[1]](int(sys.argv[2]))
    name, x = next(iter(spec["inputs"].items()))
    torch.onnx.export(spec["model"].train(), (x,), sys.argv[3], input_names=[name],
                      output_names=["logits"], opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
EOF
peak() { grep -m1 '^  theoretical' | sed 's/.*(\([0-9]*\) B).*/\1/'; }
printf "%-12s %-22s %12s %12s %9s\n" module set-up "roamc --train" export.py diff
for spec in mlp:32 transformer:4; do
    f=${spec%:*} b=${spec#*:}
    step "$f: torch.onnx.export, then fp32, amp-bf16, grad-accum 2 and 4 against export.py"
    (cd "$OUT" && "$PY" setups_module.py "$f" "$b" "$f.fwd.onnx" >"$f.fwd.log" 2>&1) ||
        { failed "$f: torch.onnx.export: $(tail -2 "$OUT/$f.fwd.log")"; continue; }
    for s in "fp32:" "amp-bf16:--amp bf16" "ga2:--grad-accum 2" "ga4:--grad-accum 4"; do
        tag=${s%%:*} eopt=${s#*:}
        ropt=()
        case $tag in amp-bf16) ropt=(--precision amp-bf16) ;; ga2) ropt=(--grad-accum 2) ;; ga4) ropt=(--grad-accum 4) ;; esac
        # shellcheck disable=SC2086
        (cd "$OUT" && "$PY" "$HERE/../models/export.py" --module setups_module.py:"$f" --batch "$b" $eopt \
            -o "$f.$tag.exp.onnx" -q >"$f.$tag.exp.log" 2>&1) ||
            { failed "$f $tag: export.py: $(tail -2 "$OUT/$f.$tag.exp.log")"; continue; }
        a=$("$ROAMC" "$OUT/$f.fwd.onnx" --train "${ropt[@]}" --order program --emit-train "$OUT/$f.$tag.der.onnx" \
            -o "$OUT/$f.$tag.der.json" | peak)
        e=$("$ROAMC" "$OUT/$f.$tag.exp.onnx" --order program -o "$OUT/$f.$tag.exp.json" | peak)
        if [ -z "$a" ] || [ -z "$e" ]; then failed "$f $tag: no peak ($a, $e)"; continue; fi
        d=$("$PY" -c "print('%+.3f' % (100.0 * ($a - $e) / $e))")
        printf "%-12s %-22s %12s %12s %8s%%\n" "$f b$b" "$tag" "$a" "$e" "$d"
        lim=3
        [ "$f:$tag" = transformer:amp-bf16 ] && lim=8 # CUDA's fp32 softmax against CPU autocast's bf16
        "$PY" -c "import sys; sys.exit(0 if abs($d) <= $lim else 1)" ||
            failed "$f $tag: roamc --train's peak $a is $d% from export.py's $e (limit $lim%)"
        if test_check_plan_runs "$CHECK"; then
            test_check_plan_py "$CHECK" "$OUT/$f.$tag.der.onnx" "$OUT/$f.$tag.der.json" >"$OUT/$f.$tag.check" 2>&1 ||
                failed "$f $tag: check_plan.py: $(tail -2 "$OUT/$f.$tag.check")"
        fi
    done
done
if [ $fail = 0 ] && ! test_check_plan_runs "$CHECK"; then
    echo "SKIP: passed, but the check_plan.py steps could not run (needs $CHECK and python3-jsonschema)"
    exit 77
fi
[ $fail = 0 ] && echo PASS
exit $fail
