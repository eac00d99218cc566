#!/bin/sh
# One rank of a data-parallel job (issue 28): roamc --shard against the CPU harness.
#   - models/export.py exports mlp3 (batch 32) and gpt2-tiny (batch 4, the 2-layer
#     transformer), the batches models/dist_harness.py runs per rank;
#   - models/dist_harness.py runs DDP and ZeRO-1 (ZeroRedundancyOptimizer) for real at
#     world 2 and 4 (gloo, one process per rank) and reports each rank's peak of live
#     tensor bytes;
#   - roamc --method pytorch --shard ddp|zero1 --world N --rank R plans every rank's
#     step (program order, gradients held as eager .grad holds them: what the harness
#     runs); check_plan.py and roamc check accept every plan and step; the predicted
#     peak of that schedule with the data inputs held for the whole step (the harness's
#     caller holds them; the graph frees them after their last use) is within
#     TOL_PERMILLE (30 = the issue's 3%) of the harness's peak;
#   - the rank's step holds what the set-up says (buckets, AllReduce, Broadcast, the
#     rank's optimizer state only), and ZeRO-2 is planned and checked (no harness:
#     torch 1.13 has no ZeRO-2) with a peak at most ZeRO-1's;
#   - zero3 and fsdp (no harness: torch 1.13's FSDP does not import on this Python) planned
#     and checked on every rank of world 2 and 4, their shards and optimizer state adding up
#     over the ranks to the whole model's, --wrap's units;
#   - with --grad-accum 2 (zero2, zero3, fsdp): each microbatch's gradients reduce-scattered
#     (the default) and --no-sync's one reduction, their peaks and splits compared;
#   - --max-batch and --budget with --shard (per device) against fixed-batch exports;
#   - llama-7b has LLaMA-7B's parameter count; llama-tiny planned under every set-up;
#   - bad combinations exit 2 with a message and write nothing.
# usage: test_shard.sh ROAMC CHECK_PLAN_PY MODELS_DIR WORK_DIR   (77 = skipped)
set -u
. "$(dirname "$0")/lib.sh"
test_usage 4 4 "ROAMC CHECK_PLAN_PY MODELS_DIR WORK_DIR" "$@"
roamc=$1 checker=$2 models=$3 work=$4
py=/usr/bin/python3
test_need_python "torch, onnx" "models/export.py and models/dist_harness.py need them"
test_check_plan_runs "$checker" || { echo "SKIP: cannot run $checker"; exit 77; }
tests=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work" && cd "$work" || exit 1
rm -f ./*.onnx ./*.json ./*.rep ./*.chk plans.list
TOL_PERMILLE=30
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

step "export mlp3 and gpt2-tiny"
$py "$models/export.py" --model mlp3 --batch 32 -o mlp3.onnx -q || fail "export mlp3"
$py "$models/export.py" --model gpt2-tiny --batch 4 -o gpt2-tiny.onnx -q || fail "export gpt2-tiny"
step "dist_harness.py: ddp and zero1 at world 2 and 4, one process per rank"
$py "$models/dist_harness.py" --model mlp3,gpt2-tiny --setup ddp,zero1 --world 2,4 \
    > harness.jsonl 2> harness.err || { fail "dist_harness.py"; tail -3 harness.err; }

# every rank the harness measured, planned, checked and compared
$py - harness.jsonl > ranks.txt <<'PY' || fail "harness output"
import json, sys
for line in open(sys.argv[1]):
    h = json.loads(line)
    assert "error" not in h, h
    print(h["model"], h["setup"], h["world"], h["rank"], h["peak_bytes"], h["split"]["data"])
PY
[ "$(wc -l < ranks.txt)" -eq 24 ] || fail "harness: $(wc -l < ranks.txt) ranks, not 24"
step "24 ranks planned and checked against the harness"
echo "model setup world rank harness roamc roamc+data-held diff"
while read -r model setup world rank peak data; do
    l=${model}_${setup}_w${world}_r$rank
    "$roamc" "$model.onnx" --method pytorch --shard "$setup" --world "$world" --rank "$rank" \
        --emit-train "$l.onnx" -o "$l.json" --report json > "$l.rep" 2> "$l.err" ||
        { fail "$l: roamc --shard"; cat "$l.err"; continue; }
    test_plan_line plans.list "$l" "$l.onnx" "$l.json"
    "$roamc" check "$l.onnx" "$l.json" > "$l.rchk" 2>&1 ||
        { fail "$l: roamc check rejects the plan"; head -3 "$l.rchk"; }
    $py "$tests/setup_compare.py" rank "$l" "$model" "$setup" "$world" "$rank" "$peak" "$TOL_PERMILLE" ||
        fail "$l"
done < ranks.txt

# ZeRO-2: planned and checked on every rank of world 2; never above ZeRO-1's peak
step "zero2 at world 2"
for model in mlp3 gpt2-tiny; do
    for rank in 0 1; do
        l=${model}_zero2_w2_r$rank
        "$roamc" "$model.onnx" --method pytorch --shard zero2 --world 2 --rank $rank \
            --emit-train "$l.onnx" -o "$l.json" --report json > "$l.rep" 2> "$l.err" ||
            { fail "$l: roamc --shard zero2"; cat "$l.err"; continue; }
        test_plan_line plans.list "$l" "$l.onnx" "$l.json"
        "$roamc" check "$l.onnx" "$l.json" > /dev/null 2>&1 || fail "$l: roamc check"
        $py - "$l" "${model}_zero1_w2_r$rank" <<'PY' || fail "$l: ZeRO-2 against ZeRO-1"
import json, sys, onnx
z2, z1 = (json.load(open(a + ".rep"))["shard"] for a in sys.argv[1:3])
m = onnx.load(sys.argv[1] + ".onnx")
meta = {p.key: p.value for p in m.metadata_props}
ops = [n.op_type for n in m.graph.node if n.domain == "ai.roamc"]
assert ops.count("ReduceScatter") == z2["buckets"] and "AllReduce" not in ops, ops
assert len(meta["roamc.gradients"].split(",")) == len(meta["roamc.owned"].split(","))
assert z2["buffer_bytes"] <= z1["buffer_bytes"] and z2["peak"] <= z1["peak"], (z2, z1)
print("%s: zero2 peak %d B (zero1 %d B), buffers %d B (zero1 %d B)"
      % (sys.argv[1], z2["peak"], z1["peak"], z2["buffer_bytes"], z1["buffer_bytes"]))
PY
    done
done

# ZeRO-3 and FSDP (no harness: torch 1.13's FSDP does not import on this Python): every
# rank of world 2 and 4 planned (roam's order, which must keep the prefetch Depends) and
# checked; the rank's step holds one shard, one ReduceScatter and a forward and a backward
# AllGather per unit (FSDP's root: one), the prefetch Depends; over the ranks the shards
# cover every parameter element and the optimizer state adds up to the whole model's exactly;
# ZeRO-3's peak is at most ZeRO-2's at world 2 (not FSDP's: mlp3's one root unit keeps
# the whole model gathered, and a flat gradient as large, beside the shard).
step "zero3 and fsdp at world 2 and 4"
for model in mlp3 gpt2-tiny; do
    for kind in zero3 fsdp; do
        for world in 2 4; do
            rank=0
            while [ $rank -lt $world ]; do
                l=${model}_${kind}_w${world}_r$rank
                "$roamc" "$model.onnx" --shard $kind --world $world --rank $rank \
                    --emit-train "$l.onnx" -o "$l.json" --report json > "$l.rep" 2> "$l.err" ||
                    { fail "$l: roamc --shard $kind"; cat "$l.err"; rank=$((rank + 1)); continue; }
                test_plan_line plans.list "$l" "$l.onnx" "$l.json"
                "$roamc" check "$l.onnx" "$l.json" > /dev/null 2>&1 || fail "$l: roamc check"
                rank=$((rank + 1))
            done
            $py - "$model" "$kind" "$world" <<'PY' || fail "$model $kind world $world"
import json, sys, onnx
model, kind, world = sys.argv[1], sys.argv[2], int(sys.argv[3])
full = onnx.load(model + ".onnx")
fmeta = {p.key: p.value for p in full.metadata_props}
def numel(vi):
    n = 1
    for d in vi.type.tensor_type.shape.dim:
        n *= d.dim_value
    return n
fin = {i.name: numel(i) for i in full.graph.input}
params = fmeta["roamc.parameters"].split(",")
n_params = sum(fin[p] for p in params)
states = [s for s in fmeta["roamc.optimizer_state"].split(",") if not s.endswith(".step")]
n_states = sum(fin[s] for s in states)
got_states = 0
for rank in range(world):
    l = "%s_%s_w%d_r%d" % (model, kind, world, rank)
    rep = json.load(open(l + ".rep"))
    sh = rep["shard"]
    assert sh["peak"] == rep["theoretical_peak"] == sum(sh["split"].values()), sh
    m = onnx.load(l + ".onnx")
    meta = {p.key: p.value for p in m.metadata_props}
    assert meta["roamc.shard"].startswith("%s world=%d rank=%d prefetch=1" % (kind, world, rank))
    ops = [n.op_type for n in m.graph.node if n.domain == "ai.roamc"]
    ins = {i.name: numel(i) for i in m.graph.input}
    shards = meta["roamc.parameters"].split(",")
    units = sh["units"]
    assert len(shards) == units == ops.count("ReduceScatter") == len(meta["roamc.gradients"].split(","))
    assert not any(p in ins for p in params), "a whole parameter is still an input"
    # every element of every unit on some rank: world * S >= N, less than one row of padding
    assert 0 <= world * sum(ins[s] for s in shards) - n_params < world * units, (shards, n_params)
    root = kind == "fsdp" and "(root)" in sh["unit_names"].split(",")
    assert ops.count("AllGather") == 2 * units - root, (ops.count("AllGather"), units, root)
    assert ops.count("Depend") == max(units - root - 1, 0), ops.count("Depend")
    mine = [s for s in meta["roamc.optimizer_state"].split(",") if s and not s.endswith(".step")]
    got_states += sum(ins[s] for s in mine)
    if world == 2 and kind == "zero3":  # fsdp's root alone (mlp3) holds more than zero2
        z2 = json.load(open("%s_zero2_w2_r%d.rep" % (model, rank)))["shard"]
        assert sh["peak"] <= z2["peak"], (sh["peak"], z2["peak"])
    print("%s: %d units, peak %d B, split %s" % (l, units, sh["peak"], sh["split"]))
assert got_states == n_states, (got_states, n_states)
PY
        done
    done
done
# Gradient accumulation (K=2, world 2, every rank) under zero2, zero3 and fsdp, both variants:
#   per_microbatch (default; DeepSpeed's and FSDP's without no_sync): each microbatch's gradients
#     reduce-scattered after its backward pass and added into the rank's shard (zero2: into the
#     owned gradients), the whole gradients' add_ chain gone: K ReduceScatters per unit/bucket;
#   no_sync (--no-sync): the whole gradients accumulated, one ReduceScatter per unit/bucket after
#     the last microbatch; they count as gradients in the split (roamc.accumulated_gradients).
# zero3/fsdp gather each unit for every microbatch's forward and backward pass (FSDP's root: once
# per microbatch) in both.  Every plan checked; the default's peak is at most no_sync's, and below
# it wherever the whole gradients are large (gpt2-tiny, all three; mlp3's zero3 and fsdp).
# Values: run_plan.py cannot replay the collectives.
step "--grad-accum 2 under zero2, zero3 and fsdp"
$py "$models/export.py" --model mlp3 --batch 16 --grad-accum 2 -o mlp3_k2.onnx -q || fail "export mlp3 --grad-accum 2"
$py "$models/export.py" --model gpt2-tiny --batch 2 --grad-accum 2 -o gpt2-tiny_k2.onnx -q ||
    fail "export gpt2-tiny --grad-accum 2"
for model in mlp3_k2 gpt2-tiny_k2; do
    for kind in zero2 zero3 fsdp; do
        for rank in 0 1; do
            for variant in per_microbatch no_sync; do
                l=${model}_${kind}_r${rank}_$variant
                opt=; [ $variant = no_sync ] && opt=--no-sync
                "$roamc" $model.onnx --shard $kind --world 2 --rank $rank $opt --emit-train $l.onnx \
                    -o $l.json --report json > $l.rep 2> $l.err || { fail "$l"; cat $l.err; continue; }
                test_plan_line plans.list "$l" $l.onnx $l.json
                "$roamc" check $l.onnx $l.json > $l.rchk 2>&1 || { fail "$l: roamc check"; head -3 $l.rchk; }
            done
            $py - ${model}_${kind}_r$rank $kind <<'PY' || fail "${model}_${kind}_r$rank: accumulation"
import json, sys, onnx
l, kind = sys.argv[1], sys.argv[2]
rep, meta, ops = {}, {}, {}
for v in ("per_microbatch", "no_sync"):
    rep[v] = json.load(open("%s_%s.rep" % (l, v)))
    m = onnx.load("%s_%s.onnx" % (l, v))
    meta[v] = {p.key: p.value for p in m.metadata_props}
    ops[v] = [n.op_type for n in m.graph.node if n.domain == "ai.roamc"]
    sh = rep[v]["shard"]
    assert meta[v]["roamc.shard"].endswith("grad_accum=2 " + v), meta[v]["roamc.shard"]
    assert sh["peak"] == rep[v]["theoretical_peak"] == sum(sh["split"].values()), sh
    k = 2 if v == "per_microbatch" else 1
    assert ops[v].count("ReduceScatter") == k * sh["buckets"], (v, ops[v].count("ReduceScatter"), sh)
    if kind != "zero2":
        units, root = sh["units"], "(root)" in sh["unit_names"].split(",")
        assert ops[v].count("AllGather") == 2 * (2 * units - root), (ops[v].count("AllGather"), units)
    # the whole gradients' sums: listed as gradients in no_sync only
    assert ("roamc.accumulated_gradients" in meta[v]) == (v == "no_sync"), v
a, b = rep["per_microbatch"]["shard"], rep["no_sync"]["shard"]
assert a["peak"] <= b["peak"], (a["peak"], b["peak"])
strict = l.startswith("gpt2-tiny") or kind != "zero2"
assert not strict or a["peak"] < b["peak"], (a["peak"], b["peak"])
assert b["split"]["gradients"] >= a["split"]["gradients"], (a["split"], b["split"])
print("%s: per_microbatch peak %d B, no_sync %d B (%d B less, %.1f%%); gradients at peak %d B / %d B"
      % (l, a["peak"], b["peak"], b["peak"] - a["peak"], 100.0 * (b["peak"] - a["peak"]) / b["peak"],
         a["split"]["gradients"], b["split"]["gradients"]))
PY
        done
    done
done

# --wrap: the layers named by a pattern are the default units; mlp3's Linear layers as units
"$roamc" gpt2-tiny.onnx --shard fsdp --world 2 --wrap 'h.*' --report json > wrap.rep 2>&1 ||
    fail "--wrap 'h.*'"
"$roamc" mlp3.onnx --shard fsdp --world 2 --wrap 'fc*' --report json > wrap_mlp.rep 2>&1 ||
    fail "--wrap 'fc*'"
$py - <<'PY' || fail "--wrap units"
import json
a, b = json.load(open("wrap.rep"))["shard"], json.load(open("gpt2-tiny_fsdp_w2_r0.rep"))["shard"]
assert a["unit_names"] == b["unit_names"] == "(root),h.0,h.1" and a["peak"] == b["peak"], (a, b)
c = json.load(open("wrap_mlp.rep"))["shard"]
assert c["unit_names"] == "fc1,fc2,fc3", c["unit_names"]
print("--wrap: gpt2-tiny 'h.*' = the default layers (peak %d B); mlp3 'fc*': %s"
      % (a["peak"], c["unit_names"]))
PY
# a pattern that matches no module: an error that says so, nothing written
rm -f bad.json bad.onnx
"$roamc" mlp3.onnx --shard fsdp --world 2 --wrap 'layers.*' --emit-train bad.onnx -o bad.json \
    > bad.txt 2>&1 && fail "--wrap matching nothing: exit 0"
grep -q "matches no module" bad.txt && [ ! -e bad.json ] && [ ! -e bad.onnx ] ||
    { fail "--wrap matching nothing: want 'matches no module' and no file"; cat bad.txt; }

# --budget and --max-batch per device: the largest micro-batch of one rank's step. The search
# (a batch-symbolic export, the rank's step written at each batch) against the rank's step of
# fixed-batch exports: the same theoretical peak at the largest batch and the one above it,
# and --budget's verdict (exit 0: fits, 3: does not) agrees on both.
BUDGET=40MB
step "--max-batch and --budget with --shard"
$py "$models/export.py" --model gpt2-tiny --symbolic-batch -o gpt2-tiny_bsym.onnx -q ||
    fail "export gpt2-tiny --symbolic-batch"
for kind in zero2 zero3 fsdp; do
    "$roamc" gpt2-tiny_bsym.onnx --max-batch --budget $BUDGET --shard $kind --world 2 \
        --report json > mb_$kind.rep 2> mb_$kind.err || { fail "--max-batch --shard $kind"; cat mb_$kind.err; continue; }
    best=$($py -c "import json,sys; r=json.load(open(sys.argv[1])); assert r['shard']['setup']=='$kind'; print(r['max_batch']['plan'])" mb_$kind.rep) ||
        { fail "--max-batch --shard $kind: report"; continue; }
    [ "$best" -ge 1 ] || { fail "--max-batch --shard $kind: batch $best"; continue; }
    for b in $best $((best + 1)); do
        $py "$models/export.py" --model gpt2-tiny --batch $b -o tiny_b$b.onnx -q || fail "export b$b"
        "$roamc" tiny_b$b.onnx --shard $kind --world 2 --budget $BUDGET --report json > mbd_${kind}_$b.rep 2>&1
        rc=$?
        want=0; [ $b -gt $best ] && want=3
        [ $rc -eq $want ] || fail "--shard $kind --budget $BUDGET at batch $b: exit $rc, want $want"
        $py - mb_$kind.rep mbd_${kind}_$b.rep $b <<'PY' || fail "--max-batch --shard $kind: batch $b"
import json, sys
search, direct, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
row = [r for r in search["rows"] if r["batch"] == b]
assert row, "batch %d not tried" % b
assert row[0]["plan"]["theoretical_peak"] == direct["theoretical_peak"], (row[0], direct["theoretical_peak"])
print("--max-batch --shard %s: batch %d, search %d B = rank's step %d B" % (
    direct["shard"]["setup"], b, row[0]["plan"]["theoretical_peak"], direct["theoretical_peak"]))
PY
    done
done

# LLaMA: the 7B configuration has LLaMA-7B's 6,738,415,616 parameters; the 2-layer one
# (bf16 autocast) is planned as one rank of each set-up and checked.
step "llama-7b's parameters, llama-tiny under every set-up"
$py "$models/export.py" --model llama-7b --amp bf16 -o llama-7b.onnx -q || fail "export llama-7b"
$py - <<'PY' || fail "llama-7b parameters"
import math, onnx
m = onnx.load("llama-7b.onnx")
meta = {p.key: p.value for p in m.metadata_props}
ins = {i.name: i for i in m.graph.input}
n = sum(math.prod(d.dim_value for d in ins[p].type.tensor_type.shape.dim)
        for p in meta["roamc.parameters"].split(","))
assert n == 6738415616, n
print("llama-7b: %d parameters, %d nodes" % (n, len(m.graph.node)))
PY
$py "$models/export.py" --model llama-tiny --batch 2 --amp bf16 -o llama-tiny.onnx -q ||
    fail "export llama-tiny"
for kind in ddp zero1 zero2 zero3 fsdp; do
    l=llama-tiny_$kind
    "$roamc" llama-tiny.onnx --shard $kind --world 2 --emit-train $l.onnx -o $l.json > $l.txt 2>&1 ||
        { fail "$l"; cat $l.txt; continue; }
    test_plan_line plans.list "$l" $l.onnx $l.json
    grep "rank peak" $l.txt
done

# every plan above against check_plan.py (and the schema), in one process
step "check_plan.py on the $(wc -l < plans.list) plans"
test_check_plans "$checker" plans.list > plans.chk 2>&1 ||
    { fail "check_plan.py rejects plans"; grep -A3 FAILED plans.chk | head -40; }

# bad combinations: exit 2, one message, nothing written
bad() {
    want=$1
    shift
    rm -f bad.json bad.onnx
    "$roamc" mlp3.onnx "$@" > bad.txt 2>&1
    rc=$?
    [ $rc -eq 2 ] && grep -q -- "$want" bad.txt && [ ! -e bad.json ] && [ ! -e bad.onnx ] ||
        { fail "roamc $* (exit $rc): want exit 2 and '$want'"; cat bad.txt; }
}
bad "needs --world" --shard ddp
bad "not '0'" --shard ddp --world 0
bad "is not a rank of --world 2" --shard zero1 --world 2 --rank 2
bad "need --shard" --world 2
bad "need --shard" --rank 1
bad "not with --fit" --shard ddp --world 2 --budget 1GB --fit
bad "not with --fit or --compare" --shard ddp --world 2 --compare
bad "needs --world" --shard zero3
bad "ddp, zero1, zero2, zero3 or fsdp" --shard zero4 --world 2
bad "is for --shard zero3 or fsdp" --shard ddp --world 2 --prefetch 2
bad "fsdp only" --shard zero3 --world 2 --wrap 'h.*'
bad "need --shard" --wrap 'h.*'
bad "need --shard" --no-sync
bad "is for --shard zero2, zero3 or fsdp" --shard ddp --world 2 --no-sync
bad "prefetch is 0 to 1024" --shard fsdp --world 2 --prefetch 2000
bad "needs --emit-train" --shard ddp --world 2 -o bad.json
bad "bucket-mb" --shard ddp --world 2 --bucket-mb 0
test_finish test_shard "$fails" 1
