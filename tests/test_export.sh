#!/bin/bash
# End-to-end test of the exporter: models/export.py -> roamc -> roamc check and tools/check_plan.py.
#
# usage: tests/test_export.sh ROAMC_BINARY CHECK_PLAN_PY OUTDIR
#
# Exports mlp3 (batch 2), resnet18 (batch 2, 64x64 images) and the two functions
# of models/example_module.py (--module FILE.py:FUNC) with Debian's
# /usr/bin/python3, checks that every value has a static shape and that
# roamc.parameters lists exactly the model's parameters, then plans each file
# with roamc and validates the plan with check_plan.py.  Then --module's bad
# inputs: one error line, exit 2, no file left behind.
# Exit 0 on pass, 1 on failure, 77 (skip) when /usr/bin/python3 lacks torch.
set -u

. "$(dirname "$0")/lib.sh"
test_usage 3 3 "ROAMC_BINARY CHECK_PLAN_PY OUTDIR" "$@"
ROAMC=$1
CHECK=$2
OUT=$3
PY=/usr/bin/python3
HERE=$(cd "$(dirname "$0")" && pwd)
EXPORT=$HERE/../models/export.py

# Without torch (issue 39): exit 3 and a message that names the interpreter that ran it and
# Debian's /usr/bin/python3 (-S drops dist-packages, so Debian's own python3 lacks torch
# here; a python3 first on PATH that is another interpreter must be told to use Debian's).
if [ -x "$PY" ] && mkdir -p "$OUT"; then
    fails_before=$TEST_FAILS
    "$PY" -S "$EXPORT" --list >/dev/null 2>"$OUT/notorch.err"
    rc=$?
    err=$(cat "$OUT/notorch.err")
    [ $rc = 3 ] && case $err in *"cannot import torch"*" in $PY; install them: apt-get install python3-torch"*) true ;; *) false ;; esac ||
        fail "export.py without torch under $PY -S: exit $rc, '$err'"
    other=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null)
    if [ -n "$other" ] && [ "$(readlink -f "$other")" != "$(readlink -f "$PY")" ] &&
        ! "$other" -c 'import torch' 2>/dev/null; then
        "$other" "$EXPORT" --list >/dev/null 2>"$OUT/notorch.err"
        rc=$?
        err=$(cat "$OUT/notorch.err")
        [ $rc = 3 ] && case $err in *" in $other"*"run it with Debian's $PY"*"$PY $EXPORT"*) true ;; *) false ;; esac ||
            fail "export.py under $other (no torch): exit $rc, '$err'"
    fi
    rm -f "$OUT/notorch.err"
    [ "$TEST_FAILS" != "$fails_before" ] || pass "export.py without torch: exit 3, names the interpreter and $PY"
fi

test_need_python "torch, torchvision, onnx" "python3-torch, python3-torchvision, python3-onnx"

# shared/tools/check_plan.py lives beside the repository, not in it: a clone
# without it still checks every plan with `roamc check`, and says what it skipped.
have_check=1
test_check_plan "$CHECK" || have_check=0

mkdir -p "$OUT" || fail_now "cannot make $OUT"

# name | export options | expected parameter count source
run_case() {
    local name=$1; shift
    local model=$OUT/$name.onnx plan=$OUT/$name.plan.json
    echo "== $name"
    if ! "$PY" "$EXPORT" "$@" -o "$model" -q; then
        fail "$name: export failed"; return
    fi
    if ! "$PY" - "$model" "$EXPORT" "$@" <<'EOF'
import sys, os, importlib.util
import onnx
path, export_py, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
m = onnx.load(path)
g = m.graph
problems = []
typed = {}
for vi in list(g.input) + list(g.output) + list(g.value_info):
    tt = vi.type.tensor_type
    if not tt.elem_type or not tt.HasField("shape") or \
            any(not d.HasField("dim_value") for d in tt.shape.dim):
        problems.append("value %r has no elem_type or no static shape" % vi.name)
    typed[vi.name] = True
for init in g.initializer:
    typed[init.name] = True
for n in g.node:
    if n.domain != "org.pytorch.aten":
        problems.append("node %s has domain %r" % (n.name, n.domain))
    for v in list(n.input) + list(n.output):
        if v and v not in typed:
            problems.append("node %s value %r has no type/shape" % (n.name, v))
seen = set()
for n in g.node:                      # SSA: every value produced once
    for o in n.output:
        if o and o in seen:
            problems.append("value %r produced twice" % o)
        seen.add(o)
meta = {p.key: p.value for p in m.metadata_props}
for k in ("roamc.loss", "roamc.parameters", "roamc.optimizer_state", "roamc.data_inputs",
          "roamc.optimizer", "roamc.model", "roamc.batch"):
    if k not in meta:
        problems.append("metadata %s missing" % k)
inputs = {x.name for x in g.input}
params = [x for x in meta.get("roamc.parameters", "").split(",") if x]
for key in ("roamc.parameters", "roamc.optimizer_state", "roamc.data_inputs"):
    for x in meta.get(key, "").split(","):
        if x and x not in inputs:
            problems.append("%s names %r, which is not a graph input" % (key, x))
if meta.get("roamc.loss") not in {o.name for o in g.output}:
    problems.append("the loss is not a graph output")
# the model's own parameter count
spec = importlib.util.spec_from_file_location("export", export_py)
E = importlib.util.module_from_spec(spec)
spec.loader.exec_module(E)
model = meta["roamc.model"]
if "--module" in argv:  # a user module: count its own parameters (tied ones once)
    built = E.UserModule(argv[argv.index("--module") + 1]).build(None, E.torch.device("meta"))
else:
    built = E.build(model, 1, 64, None)
want = len(list(built[0].parameters()))
if len(params) != want:
    problems.append("roamc.parameters has %d entries, %s has %d parameters"
                    % (len(params), model, want))
# in-place optimizer updates write into every parameter
written = set()
for n in g.node:
    al = {a.name: a for a in n.attribute}
    if "alias" in al and al.get("inplace") is not None and al["inplace"].i:
        for k, j in enumerate(al["alias"].ints):
            if j >= 0:
                written.add(n.input[j])
if not set(params) <= written:
    problems.append("parameters never updated in place: %s" % sorted(set(params) - written)[:5])
for p in problems[:20]:
    print("  problem:", p)
print("  %d nodes, %d parameters, %d problems" % (len(g.node), len(params), len(problems)))
sys.exit(1 if problems else 0)
EOF
    then
        fail "$name: graph checks"; return
    fi
    if [ ! -x "$ROAMC" ]; then
        fail "$name: roamc binary $ROAMC not found or not executable"; return
    fi
    if ! "$ROAMC" "$model" -o "$plan"; then
        fail "$name: roamc failed"; return
    fi
    if ! "$ROAMC" check "$model" "$plan"; then
        fail "$name: roamc check rejected the plan"; return
    fi
    if [ $have_check = 1 ] && ! test_check_plan_py "$CHECK" "$model" "$plan"; then
        fail "$name: check_plan rejected the plan"; return
    fi
}

run_case mlp3_b2 --model mlp3 --batch 2
run_case resnet18_b2 --model resnet18 --batch 2 --image-size 64
# people's own modules (models/example_module.py): dict form with named inputs and an
# nn.Module loss; a model that computes its own loss with a tied embedding
run_case example_cnn_b2 --module "$HERE/../models/example_module.py:make" --batch 2
run_case example_lm_b3 --module "$HERE/../models/example_module.py:make_lm" --batch 3

# --module: bad inputs give one 'export.py: error:' line, exit 2, and leave nothing behind.
# One real process (no traceback on stderr), the rest in one interpreter (torch loads once).
echo "== --module bad inputs"
BAD=$OUT/bad_inputs
rm -rf "$BAD"; mkdir -p "$BAD/outdir" || fail_now "cannot make $BAD/outdir"
"$PY" "$EXPORT" --module "$BAD/missing.py:make" -o "$BAD/m.onnx" >"$BAD/err" 2>&1
rc=$?
if [ $rc -ne 2 ] || grep -q Traceback "$BAD/err" || [ "$(wc -l <"$BAD/err")" -ne 1 ]; then
    fail "--module missing file: exit $rc, stderr: $(cat "$BAD/err")"
fi
rm -f "$BAD/err"
if ! "$PY" - "$EXPORT" "$BAD" <<'EOF'
import io, os, sys, contextlib, importlib.util
export_py, d = sys.argv[1], sys.argv[2]
spec = importlib.util.spec_from_file_location("export", export_py)
E = importlib.util.module_from_spec(spec)
spec.loader.exec_module(E)
with open(os.path.join(d, "user.py"), "w") as f:
    f.write("""import torch, torch.nn as nn
def fails(batch=2):
    raise ValueError('dataset shard missing')
def tiny_image(batch=2, device='cpu'):
    m = nn.Sequential(nn.Conv2d(3, 8, 3, device=device), nn.MaxPool2d(2), nn.Conv2d(8, 8, 3, device=device))
    return m, torch.randn(batch, 3, 4, 4, device=device), lambda out: out.sum()
def not_scalar(batch=2):
    return nn.Linear(4, 3), torch.randn(batch, 4), None
def no_batch():
    return nn.Linear(4, 3), torch.randn(2, 4), lambda out: out.sum()
def not_a_module():
    return 3, torch.zeros(2), None
def ok(batch=2):
    return nn.Linear(4, 3), torch.randn(batch, 4), lambda out: out.square().mean()
""")
with open(os.path.join(d, "syntax.py"), "w") as f:
    f.write("def f(:\n")
u = os.path.join(d, "user.py")
out = os.path.join(d, "x.onnx")
cases = [  # argv, a phrase the one-line message must hold
    (["--module", u], "want FILE.py:FUNC"),
    (["--module", d + ":ok"], "it is a directory"),
    (["--module", u + ":nothere"], "no function 'nothere'"),
    (["--module", os.path.join(d, "syntax.py") + ":f"], "SyntaxError"),
    (["--module", u + ":fails"], "raised ValueError: dataset shard missing (user.py line 3)"),
    (["--module", u + ":tiny_image"], "the training step failed"),
    (["--module", u + ":not_scalar"], "the loss must be a float tensor with one element"),
    (["--module", u + ":no_batch", "--batch", "4"], "takes no 'batch' argument"),
    (["--module", u + ":not_a_module"], "not a torch.nn.Module"),
    (["--module", u + ":ok", "-o", os.path.join(d, "outdir")], "is a directory"),
    (["--module", u + ":ok", "-o", os.path.join(d, "user.py", "x.onnx")], "is not a directory"),
    (["--module", u + ":ok", "--batch", "0"], "--batch must be >= 1"),
    (["--model", "vgg16", "--image-size", "16"], "Output size is too small"),
]
bad = 0
for argv, want in cases:
    err = io.StringIO()
    rc = None
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            E.main(argv + ([] if "-o" in argv else ["-o", out]) + ["-q"])
            rc = 0
        except SystemExit as e:
            rc = e.code
    msg = err.getvalue()
    ok = rc == 2 and msg.startswith("export.py: error: ") and msg.count("\n") == 1 and want in msg
    print("  %s %s -> %s" % ("ok  " if ok else "FAIL", " ".join(a.replace(d, "D") for a in argv), msg.strip()))
    bad += not ok
left = sorted(set(os.listdir(d)) - {"user.py", "syntax.py", "outdir", "__pycache__"})
if left or os.listdir(os.path.join(d, "outdir")):
    print("  FAIL: files left behind: %s" % left)
    bad += 1
E.main(["--module", u + ":ok", "-o", out, "-q"])  # and the good one writes its file
if not os.path.isfile(out):
    print("  FAIL: %s not written" % out)
    bad += 1
sys.exit(1 if bad else 0)
EOF
then
    fail "--module bad inputs"
fi

test_finish test_export
