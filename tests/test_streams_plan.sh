#!/bin/bash
# --streams end to end (issue 36): a step with an ai.roamc Offload/Reload
# pair and an AllReduce, planned with --streams all, is a version 2 plan
# that both checkers accept, with the Offload on d2h, the Reload on h2d
# (issued before its reader's step: prefetch), the AllReduce on comm, and
# the report's step time and memory lines (and, on a second step, the
# prefetch stopping where it would raise the peak; sync-offload freeing the
# offloaded value where one stream would); every plan with one wait
# removed gets the same verdict from both checkers, and removing the wait
# into the Reload's reader makes it INVALID for both.  --streams none
# writes the same plan as no option; --dump-buffers writes the lifetimes
# the layout held; bad values are usage errors (exit 2, no file).
#
# usage: test_streams_plan.sh ROAMC CHECK_PLAN_PY WORK_DIR   (77 = skipped)
set -u
. "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/.." && pwd)
test_usage 3 3 "ROAMC CHECK_PLAN_PY WORK_DIR" "$@"
ROAMC=$1 CHECK=$2 W=$3
test_need_python "onnx" "the step is written with onnx.helper"
rm -rf "$W" && mkdir -p "$W" && cd "$W" || fail_now "no work folder $W"
PY=/usr/bin/python3

# x @ w1 -> h1; Offload(h1); relu(h1) -> h2; three matmuls of compute to hide the
# copy; Reload -> h1r; y = h5 * h1r; AllReduce(y) -> g
$PY - <<'EOF' || fail_now "writing the step"
import onnx
from onnx import helper as h, TensorProto as T
S = [256, 1024]
W = [1024, 1024]
def v(n, s=S): return h.make_tensor_value_info(n, T.FLOAT, s)
nodes = [
    h.make_node("MatMul", ["x", "w1"], ["h1"], name="mm1"),
    h.make_node("Offload", ["h1"], ["h1_host"], name="off", domain="ai.roamc"),
    h.make_node("Relu", ["h1"], ["h2"], name="relu"),
    h.make_node("MatMul", ["h2", "w2"], ["h3"], name="mm2"),
    h.make_node("MatMul", ["h3", "w2"], ["h4"], name="mm3"),
    h.make_node("MatMul", ["h4", "w2"], ["h5"], name="mm4"),
    h.make_node("Reload", ["h1_host"], ["h1r"], name="rel", domain="ai.roamc"),
    h.make_node("Mul", ["h5", "h1r"], ["y"], name="mul"),
    h.make_node("AllReduce", ["y"], ["g"], name="ar", domain="ai.roamc"),
]
g = h.make_graph(nodes, "streams", [v("x"), v("w1", W), v("w2", W)], [v("g")],
                 value_info=[v(n) for n in ("h1", "h1_host", "h2", "h3", "h4", "h5", "h1r", "y")])
m = h.make_model(g, opset_imports=[h.make_opsetid("", 17), h.make_opsetid("ai.roamc", 1)])
onnx.save(m, "step.onnx")
EOF

"$ROAMC" step.onnx --streams all -o s.json >s.out 2>&1 || { cat s.out; fail_now "--streams all"; }
grep -q "^  streams       4 (compute, h2d, d2h, comm)" s.out || fail "report: no streams line"
grep -q "^  step time " s.out || fail "report: no step time"
grep -q "^  stream memory one stream: theoretical" s.out || fail "report: no memory line"
"$ROAMC" step.onnx --streams all --report json >s.report || fail "--report json"
$PY - <<'EOF' || fail "--report json: streams"
import json
r = json.load(open("s.report"))["streams"]
assert r["streams"] == 4 and r["ops_h2d"] == 1 and r["ops_d2h"] == 1 and r["ops_comm"] == 1, r
assert 0 < r["step_seconds"] <= r["serial_seconds"], r
assert r["lower_bound"] <= r["actual"] and r["theoretical"] <= r["interleaved_live"] <= r["actual"], r
assert r["reloads_prefetched"] == 1, r
EOF
# the streams, the prefetch and the times, from the plan
$PY - <<'EOF' || fail "plan fields"
import json, onnx
p = json.load(open("s.json"))
nodes = [n.name for n in onnx.load("step.onnx").graph.node]
assert p["version"] == 2, p["version"]
kinds = {s["id"]: s["kind"] for s in p["streams"]}
on = {nodes[n]: kinds[p["stream"][k]] for k, n in enumerate(p["schedule"])}
assert on["off"] == "d2h" and on["rel"] == "h2d" and on["ar"] == "comm", on
assert all(on[n] == "compute" for n in ("mm1", "relu", "mm2", "mm3", "mm4", "mul")), on
step = {nodes[n]: k for k, n in enumerate(p["schedule"])}
assert step["rel"] < step["mm4"], "the Reload is not issued ahead of its reader's producer"
t = {nodes[n]: p["times"][k] for k, n in enumerate(p["schedule"])}
assert t["rel"][1] <= t["mul"][0] and t["off"][0] >= t["mm1"][1], t
assert len(p["times"]) == len(p["schedule"]) and p["waits"], "times or waits missing"
EOF
"$ROAMC" check step.onnx s.json | grep -q '^VALID' || fail "roamc check rejects the plan"
# --dump-buffers: the problem the layout solved, h1 held until its Offload is waited for
"$ROAMC" step.onnx --streams all -q -o s2.json --dump-buffers s2.csv || fail "--dump-buffers"
cmp -s s.json s2.json || fail "--dump-buffers changes the plan"
$PY - <<'EOF' || fail "--dump-buffers: lifetimes"
import csv, json
p = json.load(open("s.json"))
rows = {int(r["id"]): r for r in csv.DictReader(open("s2.csv"))}
for b in p["buffers"]:
    assert int(rows[b["id"]]["upper"]) >= b["end"] + 1, (b, rows[b["id"]])
h1 = next(b for b in p["buffers"] if b["tensors"] == ["h1"])
assert int(rows[h1["id"]]["upper"]) > h1["end"] + 1, "h1 not held for its Offload"
EOF
check_ran=0
if test_check_plan "$CHECK"; then
    check_ran=1
    test_check_plan_py "$CHECK" step.onnx s.json | grep -q '^VALID' || fail "check_plan.py rejects the plan"
    # one wait removed at a time: both checkers agree, and the wait into the
    # Reload's reader is needed
    n=$($PY -c "import json; print(len(json.load(open('s.json'))['waits']))")
    rejected=0 i=0
    while [ $i -lt "$n" ]; do
        $PY - "$i" <<'EOF'
import json, sys
p = json.load(open("s.json"))
p["waits"].pop(int(sys.argv[1]))
json.dump(p, open("cut.json", "w"))
EOF
        c=$("$ROAMC" check step.onnx cut.json >cut.c.out 2>&1; echo $?)
        py=$(test_check_plan_py "$CHECK" step.onnx cut.json >cut.py.out 2>&1; echo $?)
        [ "$c" = "$py" ] || fail "wait $i removed: roamc check exits $c, check_plan.py $py"
        [ "$c" = 1 ] && rejected=$((rejected + 1))
        i=$((i + 1))
    done
    [ $rejected -ge 1 ] || fail "no single wait is needed"
    $PY - <<'EOF'
import json, onnx
p = json.load(open("s.json"))
nodes = [n.name for n in onnx.load("step.onnx").graph.node]
rel, mul = nodes.index("rel"), nodes.index("mul")
assert [rel, mul] in p["waits"], p["waits"]
p["waits"].remove([rel, mul])
json.dump(p, open("noreload.json", "w"))
EOF
    "$ROAMC" check step.onnx noreload.json >nr.out && fail "roamc check accepts the plan without the Reload's wait"
    grep -q "before its producer runs (streams 1 and 0: no wait orders them)" nr.out ||
        fail "roamc check: $(cat nr.out)"
    test_check_plan_py "$CHECK" step.onnx noreload.json >nr.py.out && fail "check_plan.py accepts it"
    echo "waits: $n, $rejected of them needed (both checkers agree on each)"
fi

# prefetch as early as memory allows: a Reload whose copy the compute before
# its reader cannot hide stops short of the step where a large temporary
# peaks, so the schedule's theoretical peak stays that of one stream
$PY - <<'EOF' || fail_now "writing the peaky step"
import onnx
from onnx import helper as h, TensorProto as T
def v(n, s): return h.make_tensor_value_info(n, T.FLOAT, s)
A = [2048, 1024]
nodes = [
    h.make_node("Relu", ["x"], ["h1"]),                                        # 0
    h.make_node("Offload", ["h1"], ["h1_host"], domain="ai.roamc"),            # 1
    h.make_node("Sigmoid", ["h1"], ["h2"]),                                    # 2
    h.make_node("Concat", ["h2", "h2", "h2", "h2"], ["big"], axis=0),          # 3
    h.make_node("ReduceMean", ["big"], ["h3"], axes=[0], keepdims=1),          # 4
    h.make_node("Add", ["h3", "h2"], ["h4"]),                                  # 5
    h.make_node("Reload", ["h1_host"], ["h1r"], domain="ai.roamc"),            # 6
    h.make_node("Mul", ["h4", "h1r"], ["y"]),                                  # 7
]
vals = [v("h1", A), v("h1_host", A), v("h2", A), v("big", [8192, 1024]), v("h3", [1, 1024]),
        v("h4", A), v("h1r", A)]
g = h.make_graph(nodes, "peaky", [v("x", A)], [v("y", A)], value_info=vals)
onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17), h.make_opsetid("ai.roamc", 1)]),
          "peaky.onnx")
EOF
"$ROAMC" peaky.onnx -q -o peaky1.json || fail "peaky: one stream"
"$ROAMC" peaky.onnx --streams copy -q -o peaky.json || fail "peaky: --streams copy"
"$ROAMC" peaky.onnx --streams copy,no-prefetch -q -o peaky0.json || fail "peaky: no-prefetch"
$PY - <<'EOF' || fail "peaky: prefetch raised the peak or did not move"
import json
one, s, s0 = (json.load(open(f)) for f in ("peaky1.json", "peaky.json", "peaky0.json"))
assert s["peak"]["theoretical"] == one["peak"]["theoretical"], (s["peak"], one["peak"])
# issued earlier than without prefetch, yet after the large temporary's last reader
at = s["schedule"].index
assert at(6) < s0["schedule"].index(6), (s["schedule"], s0["schedule"])
assert at(6) > at(4), s["schedule"]
EOF
"$ROAMC" check peaky.onnx peaky.json | grep -q '^VALID' || fail "peaky: roamc check"
if test_check_plan "$CHECK"; then
    test_check_plan_py "$CHECK" peaky.onnx peaky.json | grep -q '^VALID' || fail "peaky: check_plan.py"
fi

# sync-offload: the Offload's value leaves memory where one stream frees it
"$ROAMC" step.onnx --streams all,sync-offload --report json -o sync.json >sync.report ||
    fail "--streams all,sync-offload"
"$ROAMC" check step.onnx sync.json | grep -q '^VALID' || fail "sync-offload: roamc check"
if test_check_plan "$CHECK"; then
    test_check_plan_py "$CHECK" step.onnx sync.json | grep -q '^VALID' || fail "sync-offload: check_plan.py"
fi
$PY - <<'EOF' || fail "sync-offload: the wait or the lifetime"
import json, onnx
nodes = [n.name for n in onnx.load("step.onnx").graph.node]
p, r, r0 = json.load(open("sync.json")), json.load(open("sync.report"))["streams"], \
    json.load(open("s.report"))["streams"]
off, mm2 = nodes.index("off"), nodes.index("mm2")
# relu is h1's last compute use: the compute op after it waits for the Offload
assert [off, mm2] in p["waits"], p["waits"]
assert r["interleaved_live"] <= r0["interleaved_live"] and r["step_seconds"] >= r0["step_seconds"], (r, r0)
assert r["interleaved_live"] == r["theoretical"], r
EOF

# collectives ahead: an AllReduce of a value made first, read by Relu, with
# three independent matmuls; the order puts the reader right after it, the
# pass moves the reader after the matmuls that cover the all-reduce, so the
# communication runs beside compute (no-comm-ahead: as ordered, none)
$PY - <<'EOF' || fail_now "writing the comm step"
import onnx
from onnx import helper as h, TensorProto as T
S, W = [256, 1024], [1024, 1024]
def v(n, s=S): return h.make_tensor_value_info(n, T.FLOAT, s)
nodes = [
    h.make_node("MatMul", ["x", "w1"], ["g1"], name="mm1"),
    h.make_node("AllReduce", ["g1"], ["r1"], name="ar", domain="ai.roamc"),
    h.make_node("Relu", ["r1"], ["u"], name="upd"),
    h.make_node("MatMul", ["x", "w2"], ["h2"], name="mm2"),
    h.make_node("MatMul", ["h2", "w2"], ["h3"], name="mm3"),
    h.make_node("MatMul", ["h3", "w2"], ["h4"], name="mm4"),
    h.make_node("Add", ["u", "h4"], ["y"], name="add"),
]
g = h.make_graph(nodes, "comm", [v("x"), v("w1", W), v("w2", W)], [v("y")],
                 value_info=[v(n) for n in ("g1", "r1", "u", "h2", "h3", "h4")])
onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17), h.make_opsetid("ai.roamc", 1)]),
          "comm.onnx")
EOF
for v in comm comm,no-comm-ahead; do
    "$ROAMC" comm.onnx --streams $v -q -o "c_$v.json" || fail_now "--streams $v"
    "$ROAMC" comm.onnx --streams $v --report json >"c_$v.report" || fail_now "--streams $v --report json"
    "$ROAMC" check comm.onnx "c_$v.json" | grep -q '^VALID' || fail "$v: roamc check"
    if test_check_plan "$CHECK"; then
        test_check_plan_py "$CHECK" comm.onnx "c_$v.json" | grep -q '^VALID' || fail "$v: check_plan.py"
    fi
done
"$ROAMC" comm.onnx --streams comm 2>&1 | grep -q "ops after them deferred" ||
    fail "report: no collectives ahead"
$PY - <<'EOF' || fail "collectives ahead"
import json, onnx
nodes = [n.name for n in onnx.load("comm.onnx").graph.node]
def load(v):
    p = json.load(open(f"c_{v}.json"))
    return [nodes[i] for i in p["schedule"]], json.load(open(f"c_{v}.report"))["streams"]
(a, ra), (o, ro) = load("comm"), load("comm,no-comm-ahead")
assert o.index("upd") == o.index("ar") + 1, o  # what the order does: the case the pass is for
assert a.index("upd") > a.index("mm4") > a.index("ar"), a
assert ro["beside_compute_seconds"]["comm"] == 0 and ro["ops_deferred"] == 0, ro
assert ra["beside_compute_seconds"]["comm"] > 0 and ra["ops_deferred"] == 2, ra
assert ra["step_seconds"] < ro["step_seconds"], (ra, ro)
EOF

# gathers ahead: mlp3's FSDP rank (units fc*, world 2) with --prefetch 0
# and 1: at 1, gathers move up to where the unit before them starts, the
# communication beside compute grows and the step shortens; both VALID
if $PY -c 'import torch' 2>/dev/null; then
    $PY "$SRC/models/export.py" --model mlp3 --batch 2 -q -o mlp3.onnx ||
        fail_now "export mlp3"
    for d in 0 1; do
        "$ROAMC" mlp3.onnx --shard fsdp --world 2 --wrap 'fc*' --prefetch $d --streams comm \
            --emit-train "f$d.onnx" -q -o "f$d.json" || fail_now "fsdp --prefetch $d --streams comm"
        "$ROAMC" mlp3.onnx --shard fsdp --world 2 --wrap 'fc*' --prefetch $d --streams comm \
            --report json >"f$d.report" || fail_now "fsdp --prefetch $d --report json"
        "$ROAMC" check "f$d.onnx" "f$d.json" | grep -q '^VALID' || fail "fsdp --prefetch $d: roamc check"
        if test_check_plan "$CHECK"; then
            test_check_plan_py "$CHECK" "f$d.onnx" "f$d.json" | grep -q '^VALID' ||
                fail "fsdp --prefetch $d: check_plan.py"
        fi
    done
    $PY - <<'EOF' || fail "gathers ahead"
import json
r0, r1 = (json.load(open(f"f{d}.report"))["streams"] for d in (0, 1))
assert r0["gathers_prefetched"] == 0 and r1["gathers_prefetched"] > 0, (r0, r1)
c0, c1 = r0["beside_compute_seconds"]["comm"], r1["beside_compute_seconds"]["comm"]
assert c1 > c0 and r1["step_seconds"] < r0["step_seconds"], (r0, r1)
EOF
else
    skip_part "gathers ahead: models/export.py needs torch in $PY"
fi

# libroamc and the Python package: streams, comm-gbps and prefetch by name
# (keywords) give the command's plans byte for byte; bad values raise
if PYTHONPATH="$SRC/planner/python" ROAMC_LIBRARY="$(dirname "$ROAMC")" $PY -c 'import roamc' 2>/dev/null; then
    "$ROAMC" comm.onnx --streams comm --comm-gbps 100 -q -o c100.json || fail_now "--comm-gbps 100"
    PYTHONPATH="$SRC/planner/python" ROAMC_LIBRARY="$(dirname "$ROAMC")" HAVE_FSDP=$([ -e f1.json ] && echo 1) \
        $PY - <<'EOF' || fail "the Python package's --streams plans"
import json, os, roamc
def same(kw, model, cli):
    roamc.plan(model, **kw).write("py.json")
    a, b = json.load(open("py.json")), json.load(open(cli))
    if "emit_train" in kw:
        a["model"] = b["model"]  # the plan names the step each wrote
    assert a == b, (kw, cli)
    if "emit_train" not in kw:
        assert open("py.json").read() == open(cli).read(), (kw, cli)
same(dict(streams="all"), "step.onnx", "s.json")
same(dict(streams="comm"), "comm.onnx", "c_comm.json")
same(dict(streams="comm,no-comm-ahead"), "comm.onnx", "c_comm,no-comm-ahead.json")
same(dict(streams="comm", comm_gbps=100), "comm.onnx", "c100.json")
if os.environ.get("HAVE_FSDP"):
    same(dict(shard="fsdp", world=2, wrap="fc*", prefetch=1, streams="comm", emit_train="py1.onnx"),
         "mlp3.onnx", "f1.json")
assert json.load(open("c100.json"))["times"] != json.load(open("c_comm.json"))["times"]
for kw in (dict(streams="copy,disk"), dict(streams="copy", comm_gbps=10), dict(comm_gbps=10)):
    try:
        roamc.plan("comm.onnx", **kw)
    except roamc.Error:
        continue
    raise AssertionError("accepted: %s" % kw)
EOF
else
    skip_part "the Python package: no libroamc.so beside $ROAMC"
fi

# the schema names both versions it takes (it said "roam-plan v1" alone)
$PY - "$SRC/planner/plan.schema.json" <<'EOF' || fail "plan.schema.json: title or \$id"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["title"] == "roam-plan v1 and v2" and s["$id"] == "urn:roamc:roam-plan", (s["title"], s["$id"])
assert "version 2" in s["description"], s["description"]
EOF

# none: one stream, the same plan as without the option
"$ROAMC" step.onnx -q -o one.json || fail "plan without --streams"
"$ROAMC" step.onnx --streams none -q -o none.json || fail "--streams none"
cmp -s one.json none.json || fail "--streams none changes the plan"
grep -q '"version":1' one.json || fail "plan without --streams is not version 1"
# usage errors write nothing
for bad in "--streams copy,disk" "--streams comm,no-comm-aheadx" "--streams ''" "--streams copy --comm-gbps 10" \
    "--streams comm --comm-gbps 0" "--device h100"; do
    rm -f bad.json
    eval "\"$ROAMC\" step.onnx $bad -q -o bad.json" >bad.out 2>&1
    rc=$?
    [ $rc = 2 ] || fail "$bad: exit $rc, want 2"
    [ ! -e bad.json ] || fail "$bad: a plan was written"
done
test_finish test_streams_plan 0 $check_ran
