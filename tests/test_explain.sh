#!/usr/bin/env bash
# Issue 29, deliverable 3: what is live at the peak.  `roamc explain PLAN`
# and the report's "live at peak" lines, checked against the plan file by
# an independent computation (python): the peak step is the first step with
# the most live bytes of the plan's buffers, the storages listed are those
# live then, the bytes per kind and per module add up to the peak, the
# parameter and optimizer-state bytes are those the model's metadata lists,
# the largest come first; the explain of gpt2-xl_b1 takes at most 1 s
# (median of 3; FAIL above 3 s, a note between).  Module paths from ONNX
# scope names on a torch.onnx.export (needs torch: else SKIP for that part).
# usage: test_explain.sh ROAMC MODEL_DIR WORK_DIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
test_usage 3 3 "ROAMC MODEL_DIR WORK_DIR" "$@"
roamc=$(realpath "$1") models=$(realpath "$2") work=$3
rm -rf "$work" && mkdir -p "$work" && cd "$work" || fail_now "cannot make $work"
/usr/bin/python3 -c 'import onnx' 2>/dev/null || skip "no python3-onnx to read the models' metadata"

# explain PLAN's JSON against the plan and the model, independently
verify() { # NAME MODEL PLAN EXPLAIN_JSON
  /usr/bin/python3 - "$@" <<'EOF'
import json, sys, onnx
name, model, plan_path, ex_path = sys.argv[1:]
plan, ex = json.load(open(plan_path)), json.load(open(ex_path))
live = ex["live_at_peak"]
m = onnx.load(model, load_external_data=False)
meta = {p.key: p.value for p in m.metadata_props}
n = len(plan["schedule"])
bufs = plan["buffers"]
delta = [0] * (n + 1)
for b in bufs:
    delta[b["start"]] += b["size"]; delta[b["end"] + 1] -= b["size"]
best, step, cur = -1, -1, 0
for t in range(n):
    cur += delta[t]
    if cur > best: best, step = cur, t
errs = []
if live["step"] != step: errs.append("peak step %d, the buffers' first peak step is %d" % (live["step"], step))
if live["bytes"] != best or best != plan["peak"]["theoretical"]:
    errs.append("peak bytes %d, buffers %d, plan %d" % (live["bytes"], best, plan["peak"]["theoretical"]))
if live["node"] != plan["schedule"][step]: errs.append("peak node %d is not schedule[%d]" % (live["node"], step))
device = {k: v for k, v in live["by_kind"].items() if k != "host copy"}
if sum(device.values()) != best: errs.append("by_kind adds up to %d, not %d" % (sum(device.values()), best))
if sum(g["bytes"] for g in live["by_module"]) != best: errs.append("by_module does not add up to the peak")
nlive = sum(1 for b in bufs if b["start"] <= step <= b["end"]) + \
        sum(1 for b in plan.get("host_buffers", []) if b["start"] <= step <= b["end"])
if live["storages"] != nlive: errs.append("%d storages listed, %d live" % (live["storages"], nlive))
sizes = [e["bytes"] for e in live["largest"]]
if sizes != sorted(sizes, reverse=True): errs.append("largest not sorted")
if sizes and sizes[0] != max(b["size"] for b in bufs if b["start"] <= step <= b["end"]):
    errs.append("the largest listed is not the largest live")
for key, kind in (("roamc.parameters", "parameter"), ("roamc.optimizer_state", "optimizer state")):
    names = set(filter(None, meta.get(key, "").split(",")))
    if not names: continue
    want = sum(b["size"] for b in bufs if names & set(b["tensors"]) and b["start"] <= step <= b["end"])
    if live["by_kind"][kind] != want: errs.append("%s bytes %d, the metadata's %d" % (kind, live["by_kind"][kind], want))
for e in live["largest"]:
    b = next((b for b in bufs + plan.get("host_buffers", []) if e["tensor"] in b["tensors"]), None)
    if not b or (b["start"], b["end"]) != (e["start"], e["end"]) or b["size"] != e["bytes"]:
        errs.append("largest %s does not match its buffer" % e["tensor"])
for x in errs: print("%s: %s" % (name, x))
sys.exit(1 if errs else 0)
EOF
}

# ---- the committed models: explain against the plan file, and the report
for m in alexnet_b1 bert-base_b32 gpt2-xl_b1; do
  "$roamc" "$models/$m.onnx" -q -o "$m.json" --report json >"$m.report.json" || { fail "$m: roamc failed"; continue; }
  "$roamc" explain "$m.json" --report json --top 50 >"$m.explain.json" 2>"$m.err" || { fail "$m: explain: $(cat "$m.err")"; continue; }
  verify "$m" "$models/$m.onnx" "$m.json" "$m.explain.json" || fail "$m: explain does not match the plan"
  /usr/bin/python3 - "$m.report.json" "$m.explain.json" <<'EOF' || fail "$m: the report's live_at_peak is not explain's"
import json, sys
r, e = json.load(open(sys.argv[1]))["live_at_peak"], json.load(open(sys.argv[2]))["live_at_peak"]
sys.exit(0 if {k: r[k] for k in ("step", "bytes", "by_kind", "by_module")} == {k: e[k] for k in ("step", "bytes", "by_kind", "by_module")}
         and r["largest"] == e["largest"][:len(r["largest"])] else 1)
EOF
  "$roamc" explain "$m.json" >"$m.explain.txt" && grep -q "live at peak  step" "$m.explain.txt" && grep -q "by kind" "$m.explain.txt" \
    && grep -q "by module" "$m.explain.txt" || fail "$m: explain text"
  "$roamc" "$models/$m.onnx" -o /dev/null | grep -q "live at peak  step" || fail "$m: no live-at-peak lines in the report"
done
grep -q "saved activation" bert-base_b32.explain.txt && grep -q "layers.3 " bert-base_b32.explain.txt \
  || fail "bert-base_b32: no saved activations or no layers.3 group: $(grep by bert-base_b32.explain.txt)"
grep -q "module h.0.attn" gpt2-xl_b1.explain.txt || fail "gpt2-xl_b1: no module h.0.attn among the largest"
[ "$TEST_FAILS" = 0 ] && pass "explain and the report on alexnet_b1, bert-base_b32, gpt2-xl_b1 match the plan files"

# ---- gpt2-xl_b1 in <= 1 s
ts=""
for i in 1 2 3; do
  t0=$(date +%s%N); "$roamc" explain gpt2-xl_b1.json >/dev/null; t1=$(date +%s%N)
  ts="$ts $(( (t1 - t0) / 1000000 ))"
done
med=$(echo $ts | tr ' ' '\n' | sort -n | sed -n 2p)
if [ "$med" -gt 3000 ]; then fail "explain gpt2-xl_b1: median ${med} ms (runs:$ts)"
elif [ "$med" -gt 1000 ]; then echo "note: explain gpt2-xl_b1 median ${med} ms, above the 1 s target (a busy machine?)"
else pass "explain gpt2-xl_b1: median ${med} ms (runs:$ts ms)"; fi

# ---- a --fit step: host copies are named and kept out of the peak
"$roamc" "$models/bert-base_b32.onnx" --budget 4000000000 --fit=offload --emit-train fo.onnx -o fo.json -q \
  || fail "--fit=offload on bert-base_b32"
"$roamc" explain fo.json --report json >fo.explain.json && verify fit fo.onnx fo.json fo.explain.json \
  && "$roamc" explain fo.json | grep -q "host copies .* (host memory, not in the peak)" \
  && pass "explain of a --fit step with host copies" || fail "explain of the --fit step"

# ---- errors: no plan, another model's plan, a wrong schedule
"$roamc" explain nope.json 2>e.err; [ $? = 2 ] && grep -q "nope.json" e.err || fail "explain of a missing plan"
"$roamc" explain alexnet_b1.json "$models/alexnet_b32.onnx" 2>e.err; [ $? = 2 ] && grep -q "another model" e.err \
  || fail "explain against another model: $(cat e.err)"
/usr/bin/python3 -c 'import json,sys; d=json.load(open("alexnet_b1.json")); d["schedule"][0:2]=[d["schedule"][1]]*2; json.dump(d, open("bad.json","w"))'
"$roamc" explain bad.json 2>e.err; [ $? = 2 ] && grep -q "roamc check" e.err || fail "explain of a bad schedule: $(cat e.err)"
cp alexnet_b1.json sub_plan.json && mkdir -p sub && mv sub_plan.json sub/ && (cd sub && "$roamc" explain sub_plan.json "$models/alexnet_b1.onnx" >/dev/null) \
  || fail "explain with MODEL given"
"$roamc" explain --help | grep -q "usage: roamc explain" && "$roamc" --help | grep -q "roamc explain" || fail "explain's help"
[ "$TEST_FAILS" = 0 ] && pass "explain's errors: missing plan, another model, a bad schedule"

# ---- module paths from ONNX scope names (torch.onnx.export), bindings from the plan
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  /usr/bin/python3 - <<'EOF' 2>/dev/null
import torch, torch.nn as nn
class M(nn.Module):
    def __init__(s):
        super().__init__()
        s.enc = nn.Sequential(nn.Linear(16, 256), nn.ReLU(), nn.Linear(256, 64))
        s.head = nn.Linear(64, 10)
    def forward(s, x):
        return s.head(s.enc(x))
torch.onnx.export(M(), (torch.randn(4, 16),), "scoped.onnx", input_names=["x"], output_names=["y"],
                  dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
EOF
  "$roamc" scoped.onnx --dim batch=64 -q -o scoped.json || fail "scoped.onnx: plan"
  "$roamc" explain scoped.json >scoped.txt 2>&1 || fail "scoped.onnx: explain (bindings from the plan): $(cat scoped.txt)"
  grep -q "bindings from the plan: --dim batch=64" scoped.txt && grep -q "module enc.0" scoped.txt \
    && grep -q "Gemm '/enc/enc.0/Gemm'" scoped.txt || fail "scoped.onnx: module paths or bindings: $(cat scoped.txt)"
  [ "$TEST_FAILS" = 0 ] && pass "module paths from ONNX scope names; bindings from the plan"
else
  skip_part "no torch for a torch.onnx.export with scope names"
fi

echo "$TEST_FAILS failed, $TEST_SKIPS skipped"
test_finish test_explain
