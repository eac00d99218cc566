#!/usr/bin/env bash
# Issue 17, item by item: a command line that never loses a file and always
# says what it did.  Each numbered block below is the issue's item of that
# number; file modes, device nodes and unwritable folders also run as an
# unprivileged user (setpriv to uid 65534) when the test runs as root.
# usage: test_cli_ux.sh ROAMC CHECK_PLAN_PY MODEL_DIR EXPORT_PY WORK_DIR
# Exit: 0 pass, 1 fail, 77 every check passed but some could not run
# (no torch for the exporter, no python3-onnx, no ../shared, no pty, not
# root): "SKIP: ..." lines say which.
# Never writes to a real device node: device tests use one made with mknod
# in WORK_DIR (an old roamc replaced /dev/null with a plain file as root).
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
test_usage 5 5 "ROAMC CHECK_PLAN_PY MODEL_DIR EXPORT_PY WORK_DIR" "$@"
roamc=$(realpath "$1") check_py=$2 models=$(realpath "$3") export_py=$(realpath "$4") work=$5
rm -rf "$work" && mkdir -p "$work" && cd "$work" || fail_now "cannot make $work"
T0=$(date +%s%N)
# ok WHAT: pass WHAT, when no check has failed so far, with the time so far
ok() { [ "$TEST_FAILS" = 0 ] && pass "$* ($(( ($(date +%s%N) - T0) / 1000000 )) ms so far)"; }
# run NAME CMD...: stdout to NAME.out, stderr to NAME.err, status in $rc
run() { local n=$1; shift; "$@" >"$n.out" 2>"$n.err"; rc=$?; }
A1=$models/alexnet_b1.onnx
cp "$A1" model.onnx
sum0=$(sha256sum model.onnx | cut -d' ' -f1)
model_intact() { [ "$(sha256sum model.onnx | cut -d' ' -f1)" = "$sum0" ] && [ -f model.onnx ] && [ ! -L model.onnx ]; }

# ---- 1. an output is never the input or another output; checked before work
for opt in -o --svg --dump-tree; do
  run i1 "$roamc" model.onnx -q $opt model.onnx
  [ $rc = 2 ] && model_intact && grep -q "is the input" i1.err || fail "1: $opt MODEL: rc $rc, $(cat i1.err)"
done
ln -s model.onnx link.onnx && ln model.onnx hard.onnx
for p in link.onnx hard.onnx ./model.onnx "$work/model.onnx"; do
  run i1 "$roamc" model.onnx -q -o "$p"
  [ $rc = 2 ] && model_intact && [ -L link.onnx ] || fail "1: -o $p (the model by another name): rc $rc"
done
run i1 "$roamc" model.onnx -q -o p.json --svg p.json
[ $rc = 2 ] && [ ! -e p.json ] && grep -q "same file" i1.err || fail "1: -o p.json --svg p.json: rc $rc, $(cat i1.err)"
run i1 "$roamc" model.onnx -q -o p.json --svg ./p.json
[ $rc = 2 ] && [ ! -e p.json ] || fail "1: -o p.json --svg ./p.json: rc $rc"
run i1 "$roamc" model.onnx -q -o p.json --dump-tree t.json --svg s.svg
[ $rc = 0 ] && [ -s p.json ] && [ -s t.json ] && head -c 1 t.json | grep -q '{' && grep -q '<svg' s.svg \
  || fail "1: plan, tree and picture together: rc $rc"
"$roamc" check model.onnx p.json >/dev/null || fail "1: the plan written with the others is not valid"
run i1 "$roamc" model.onnx -q --order lescea --dump-tree t2.json
[ $rc = 2 ] && [ ! -e t2.json ] || fail "1: --dump-tree without order roam: rc $rc"
ls -a | grep -q '\.tmp\.' && fail "1: a temporary file was left: $(ls -a)"
ok "1 outputs checked against the model (also via symlink, hard link, other spellings) and each other"

# ---- 2. '-' is stdout, symlinks written through, FIFOs and devices written directly
rm -f p.json
run i2 "$roamc" model.onnx -o -
[ $rc = 0 ] && [ ! -e ./- ] && head -c 30 i2.out | grep -q '"format":"roam-plan"' && grep -q "plan written  standard output" i2.err \
  || fail "2: -o -: rc $rc, file '-' $( [ -e ./- ] && echo exists)"
"$roamc" model.onnx -o /dev/stdout >redirected.json 2>/dev/null
head -c 30 redirected.json | grep -q '"format":"roam-plan"' || fail "2: -o /dev/stdout into a redirected file"
echo old >real.json && ln -s real.json plan_link.json
run i2 "$roamc" model.onnx -q -o plan_link.json
[ $rc = 0 ] && [ -L plan_link.json ] && grep -q roam-plan real.json || fail "2: -o SYMLINK: rc $rc, link $(ls -l plan_link.json)"
mkfifo fifo && { cat fifo >from_fifo & }
run i2 "$roamc" model.onnx -q -o fifo
wait
[ $rc = 0 ] && [ -p fifo ] && grep -q roam-plan from_fifo || fail "2: -o FIFO: rc $rc"
if [ "$(id -u)" = 0 ]; then
  mknod nulldev c 1 3 && mknod fulldev c 1 7
  run i2 "$roamc" model.onnx -q -o nulldev
  [ $rc = 0 ] && [ -c nulldev ] || fail "2: -o a device node as root: rc $rc, $(ls -l nulldev)"
  run i2 "$roamc" model.onnx -q -o fulldev
  [ $rc = 1 ] && [ -c fulldev ] && grep -q "No space left" i2.err || fail "2: -o a full device: rc $rc, $(cat i2.err)"
else
  skip_part "2: device nodes need root (mknod)"
fi
ok "2 '-', /dev/stdout, symlink, FIFO, device node"

# ---- 3. all or nothing: one bad output, no file at all, and the reason
rm -f p1.json
run i3 "$roamc" model.onnx -o p1.json --svg /nonexistent/x.svg
[ $rc = 2 ] && [ ! -e p1.json ] && [ ! -s i3.out ] && grep -q "No such file" i3.err || fail "3: bad --svg: rc $rc, $(cat i3.err)"
if [ -c fulldev ]; then # the picture fails at the commit: the plan is not written either
  run i3 "$roamc" model.onnx -o p1.json --svg fulldev
  [ $rc = 1 ] && [ ! -e p1.json ] && [ -c fulldev ] || fail "3: --svg to a full device: rc $rc, p1.json $( [ -e p1.json ] && echo written)"
fi
ok "3 one failing output: no output written, reason given"

# ---- 4. a bad path costs nothing: checked before loading and planning
G4=$models/gpt2-xl_b4.onnx
for extra in "" "--compare"; do
  t0=$(date +%s%N)
  run i4 "$roamc" "$G4" $extra -o /nonexistent/x.json
  ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  [ $rc = 2 ] && [ $ms -lt 1500 ] || fail "4: -o /nonexistent $extra: rc $rc after $ms ms"
done
ok "4 bad output path refused before the work"

# ---- 5. one meaning of --time-limit, with its range; --align a power of two
t0=$(date +%s%N)
run i5 "$roamc" "$G4" --time-limit 0.001 -o tl.json
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
[ $rc = 0 ] && grep -q "time limit .*too short: this is the fastest valid plan" i5.out && grep -q "order program, layout bestfit" i5.out \
  && [ $ms -lt 8000 ] || fail "5: --time-limit 0.001 on gpt2-xl_b4: rc $rc, $ms ms: $(grep -i time i5.out)"
"$roamc" check "$G4" tl.json >/dev/null || fail "5: the fastest plan is not valid"
rm -f tl.json
for v in 0 -1 1e7 abc; do
  run i5 "$roamc" model.onnx --time-limit "$v"
  [ $rc = 2 ] && grep -q "at most 1000000" i5.err || fail "5: --time-limit $v: rc $rc, $(cat i5.err)"
  run i5 "$roamc" layout x.csv --time-limit "$v"
  [ $rc = 2 ] && grep -q "at most 1000000" i5.err || fail "5: layout --time-limit $v: rc $rc, $(cat i5.err)"
done
for v in 3 0 1025 6; do
  run i5 "$roamc" model.onnx --align "$v"
  [ $rc = 2 ] && grep -q "power of two" i5.err || fail "5: --align $v: rc $rc"
  run i5 "$roamc" layout x.csv --align "$v"
  [ $rc = 2 ] && grep -q "power of two" i5.err || fail "5: layout --align $v: rc $rc"
done
run i5 "$roamc" model.onnx -q --align 256 && [ $rc = 0 ] || fail "5: --align 256 refused"
{ echo "id,lower,upper,size"; for i in $(seq 0 3999); do echo "b$i,$((i % 97)),$((i % 97 + 1 + i % 13)),$((512 * (1 + i % 7)))"; done; } >bufs.csv
run i5 "$roamc" layout bufs.csv --time-limit 0.00001 -o out.csv
[ $rc = 0 ] && grep -q "time limit: .*too short: this is the fastest valid layout (bestfit)" i5.out && [ -s out.csv ] \
  || fail "5: layout --time-limit 0.00001: rc $rc, $(cat i5.out i5.err)"
run i5 "$roamc" --help
grep -q "seconds for the whole command" i5.out && grep -q "share S among their plans" i5.out || fail "5: --help on the time limit"
ok "5 --time-limit whole command (fastest plan when too short), stated ranges, --align power of two"

# ---- 6. the --compare PyTorch row as one plan (the numbers: test_fit)
run i6 "$roamc" model.onnx --method pytorch
[ $rc = 0 ] && grep -q "gradients held to the end of the step" i6.out && grep -q "reserved" i6.out || fail "6: --method pytorch"
"$roamc" --help | grep -q "plan as one row of --compare: pytorch" || fail "6: --help on --method"
ok "6 --method pytorch plans the PyTorch row alone"

# ---- 7. the ILP row falls back to the best heuristic and says why it stopped
A32=$models/alexnet_b32.onnx
run i7 "$roamc" "$A32" --layout ilp --time-limit 1
[ $rc = 0 ] && grep -q "fragmentation 0.000%" i7.out && grep -qE "ILP .*layout ILP: stopped by (its work budget|the time limit)" i7.out \
  && grep -q "kept that" i7.out || fail "7: --layout ilp on alexnet_b32: $(grep -E 'actual|ILP' i7.out)"
run i7 "$roamc" "$A32" --compare --report json --time-limit 3
[ $rc = 0 ] && /usr/bin/python3 - i7.out <<'EOF' || fail "7: --compare ILP row above Heuristics, or no reason given"
import json, sys
rows = {r["name"]: r for r in json.load(open(sys.argv[1]))["rows"]}
assert rows["ilp"]["actual_peak"] <= rows["heuristics"]["actual_peak"], rows
assert "order ILP:" in rows["ilp"]["note"] and "layout ILP:" in rows["ilp"]["note"], rows["ilp"]["note"]
EOF
ok "7 ILP never above the heuristics, every ILP says why it stopped"

# ---- 8. progress: redrawn on a terminal and cleared at the end, plain lines
# elsewhere (issue 39), -q silences it
# A plan that takes over a second, so that the 0.5 s ticker prints a line:
# bert-base_b1 in program order spends ~1 s ordering (the default plans of
# the committed models all take about half a second or less).
V1=$models/bert-base_b1.onnx
P8="--order program"
if command -v script >/dev/null && script -qc true /dev/null >/dev/null 2>&1; then
  script -qc "'$roamc' '$V1' $P8 --time-limit 1.5" /dev/null >tty.out 2>&1
  # any stage's line will do: which stage the 0.5 s ticker catches depends on
  # the machine (under ASan on 2 busy cores the cut layout stage can pass
  # between two ticks)
  grep -q $'\r\033\[Kroamc: [a-z]* ([a-z]*)' tty.out && grep -q $'\r\033\[Kroamc 0.1' tty.out \
    || fail "8: no progress line, or not cleared before the report: $(head -c 300 tty.out | cat -v)"
  script -qc "'$roamc' '$V1' $P8 --time-limit 1.5 -q" /dev/null >tty_q.out 2>&1
  [ ! -s tty_q.out ] || fail "8: -q still printed: $(head -c 200 tty_q.out | cat -v)"
else
  skip_part "8: no pty (script from util-linux) to test the progress line"
fi
run i8 "$roamc" "$V1" $P8 --time-limit 1.5
# off a terminal (issue 39): plain lines that stay, never redrawn
! grep -q $'[\r\033]' i8.err && ! grep -qv '^roamc: ' i8.err \
  || fail "8: progress off a terminal is not plain 'roamc: ' lines: $(head -c 200 i8.err | cat -v)"
run i8 "$roamc" "$V1" $P8 --time-limit 1.5 -q
[ ! -s i8.err ] || fail "8: -q off a terminal still printed: $(head -c 200 i8.err | cat -v)"
ok "8 progress redrawn on a terminal and cleared, plain lines elsewhere, silenced by -q"

# ---- 9. help and errors in command-line conventions
for cmd in "check --help" "shapes --help" "layout --help" "help" "help check" "help layout" "help plan" "--help"; do
  run i9 "$roamc" $cmd
  [ $rc = 0 ] && head -1 i9.out | grep -q "^usage: roamc" || fail "9: roamc $cmd: rc $rc"
done
run i9 "$roamc" help nosuch
[ $rc = 2 ] && grep -q "choose from plan, check, shapes, layout" i9.err || fail "9: roamc help nosuch"
for bad in "--nosuch" "-x" "--order"; do
  run i9 "$roamc" model.onnx $bad
  [ $rc = 2 ] && [ "$(wc -l <i9.err)" = 2 ] && [ "$(grep -c "^roamc: \|^Try 'roamc --help'" i9.err)" = 2 ] \
    || fail "9: $bad: $(cat i9.err)"
done
run i9 "$roamc" check model.onnx p.json --nosuch
[ $rc = 2 ] && grep -q "Try 'roamc check --help'" i9.err || fail "9: check --nosuch: $(cat i9.err)"
run i9 "$roamc" model.onnx --order foo
grep -q "choose from roam, program, lescea, ilp" i9.err || fail "9: --order foo lists no choices"
run i9 "$roamc" model.onnx --layout foo
grep -q "choose from roam, llfb, greedy, bestfit, pytorch, ilp" i9.err || fail "9: --layout foo lists no choices"
"$roamc" --help | grep -qE "[a-z]+/[A-Z_]+\.md" && fail "9: --help cites a source path"
for t in "off the peak" "floating ops" "MI ops"; do "$roamc" --help | grep -q "$t" || fail "9: --help does not explain '$t'"; done
for o in node-limit delay-radius threads; do "$roamc" --help | grep -A1 -- "--$o" | grep -q "to 1" || fail "9: --$o states no range"; done
ok "9 help for every command, one program name, choices and ranges stated"

# ---- 10. file modes follow the umask (plans and layout CSVs alike)
for m in 022 077; do
  rm -f m.json m.csv m.svg
  (umask $m && "$roamc" model.onnx -q -o m.json --svg m.svg && "$roamc" layout bufs.csv --method llfb -o m.csv >/dev/null)
  want=$(printf '%o' $((0666 & ~0$m)))
  for f in m.json m.svg m.csv; do
    [ "$(stat -c %a $f)" = "$want" ] || fail "10: umask $m: $f has mode $(stat -c %a $f), want $want"
  done
done
ok "10 modes 0666 minus the umask for plan, picture and CSV"

# ---- the file items as an unprivileged user (mode, FIFO, unwritable folder)
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
  u=$work/user && mkdir -p "$u" && chmod 777 "$u" && cp model.onnx bufs.csv "$u"/ && chmod 644 "$u"/*
  mkdir -p "$work/rootonly" && chmod 755 "$work/rootonly"
  as_user() { setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"; }
  (cd "$u" && umask 022 && as_user "$roamc" model.onnx -q -o p.json && as_user "$roamc" layout bufs.csv --method llfb -o o.csv >/dev/null) \
    || fail "user: plan or layout failed"
  [ "$(stat -c %a "$u/p.json")" = 644 ] && [ "$(stat -c %a "$u/o.csv")" = 644 ] && [ "$(stat -c %u "$u/p.json")" = 65534 ] \
    || fail "user: modes $(stat -c '%a %u' "$u/p.json" "$u/o.csv")"
  (cd "$u" && umask 077 && as_user "$roamc" model.onnx -q -o p6.json) && [ "$(stat -c %a "$u/p6.json")" = 600 ] \
    || fail "user: umask 077 mode $(stat -c %a "$u/p6.json" 2>/dev/null)"
  (cd "$u" && as_user "$roamc" model.onnx -q -o model.onnx >/dev/null 2>&1); [ $? = 2 ] || fail "user: -o MODEL"
  cmp -s "$u/model.onnx" model.onnx || fail "user: the model changed"
  (cd "$u" && as_user "$roamc" model.onnx -o "$work/rootonly/p.json" >out 2>err); r=$?
  [ $r = 2 ] && grep -q "Permission denied" "$u/err" && [ ! -s "$u/out" ] || fail "user: unwritable folder: rc $r, $(cat "$u/err")"
  mkfifo "$u/fifo" && chmod 666 "$u/fifo" && { cat "$u/fifo" >"$u/from_fifo" & }
  (cd "$u" && as_user "$roamc" model.onnx -q -o fifo); r=$?
  wait
  [ $r = 0 ] && [ -p "$u/fifo" ] && grep -q roam-plan "$u/from_fifo" || fail "user: -o FIFO: rc $r"
  ok "1, 2, 3, 10 as uid 65534: modes, -o MODEL, unwritable folder, FIFO"
else
  skip_part "not root or no setpriv: the unprivileged-user cases did not run"
fi

# ---- 11. the exporter: one-line errors, exit 2, no traceback, no temporary
if /usr/bin/python3 -c 'import torch, torchvision, onnx' 2>/dev/null; then
  mkdir -p outdir
  # (tests/test_export.sh covers -o DIR, bad paths and failing modules)
  for args in "--model alexnet --image-size 8 -o small.onnx" "--batch x"; do
    /usr/bin/python3 "$export_py" $args >e.out 2>e.err; r=$?
    [ $r = 2 ] && [ "$(wc -l <e.err)" = 1 ] && grep -q "^export.py: error: " e.err && ! grep -q Traceback e.err \
      || fail "11: export.py $args: rc $r, $(cat e.err)"
  done
  ls -a . outdir | grep -q "\.tmp" && fail "11: the exporter left a temporary file"
  [ -e small.onnx ] && fail "11: a failed export wrote its output"
  ok "11 export.py: bad arguments and failures as one line, exit 2"
else
  skip_part "11: /usr/bin/python3 without torch, torchvision and onnx: the exporter cases did not run"
fi

# ---- 12. a test that cannot run its checker says SKIP, not pass
"$here/test_models.sh" "$roamc" /nonexistent/check_plan.py "$models" models_work "program:bestfit" "alexnet_b1.onnx" >m.out 2>&1
r=$?
[ $r = 77 ] && grep -q SKIP m.out || fail "12: test_models.sh without check_plan.py exits $r, not 77"
ok "12 a missing check_plan.py is a SKIP (77)"

# ---- 13. report and picture wording
G1=$models/gpt2-xl_b1.onnx
run i13 "$roamc" "$G1"
grep -qE "layout +[0-9]+ B \([0-9.]+%\) above the live-size bound" i13.out || fail "13: layout note not in bytes: $(grep layout i13.out)"
run i13 "$roamc" model.onnx --svg plain.svg
grep -q "picture written plain.svg" i13.out || fail "13: a plain --svg run does not say the picture was written"
grep -q "live bytes per step" plain.svg && grep -c 'class="tick"' plain.svg | grep -qv '^0$' || fail "13: picture axes"
/usr/bin/python3 -c 'import sys, xml.etree.ElementTree as E; [E.parse(f) for f in sys.argv[1:]]' plain.svg s.svg \
  || fail "13: the picture is not well-formed XML"
run i13 "$roamc" model.onnx --compare --svg cmp.svg --time-limit 2
grep -qE "reserves [0-9.]+ GiB\)" cmp.svg && ! grep -q "reserves [0-9.]* MiB" cmp.svg || fail "13: --compare picture title mixes units"
"$roamc" --help | grep -q "'off the peak'" || fail "13: jargon unexplained"
if /usr/bin/python3 -c 'import onnx' 2>/dev/null; then
  /usr/bin/python3 - <<'EOF'
import onnx
from onnx import helper, TensorProto as T
g = helper.make_graph([helper.make_node("Identity", ["s"], ["t"])], "g",
                      [helper.make_tensor_value_info("s", T.STRING, [2])], [helper.make_tensor_value_info("t", T.STRING, [2])])
onnx.save(helper.make_model(g), "strings.onnx")
EOF
  run i13 "$roamc" strings.onnx
  [ $rc = 2 ] && grep -q "element type string (8)" i13.err || fail "13: string element type: $(cat i13.err)"
else
  skip_part "13: no python3-onnx to build a model with a string value"
fi
ok "13 wording: bytes above the bound, picture written, one unit, axes, type names"

# ---- 14. issue 29's small items, one check each
# one size syntax (GNU coreutils): 16G = 16GiB, 16GB = 16*10^9, layout --capacity 250MiB
run i14 "$roamc" model.onnx -q --budget 16G --report json
[ $rc = 0 ] && /usr/bin/python3 -c 'import json,sys; sys.exit(json.load(open("i14.out"))["budget"]["budget"] != 16 << 30)' \
  || fail "14: --budget 16G is not 16 GiB: rc $rc, $(cat i14.err)"
run i14 "$roamc" model.onnx -q --budget 16GB --report json
/usr/bin/python3 -c 'import json,sys; sys.exit(json.load(open("i14.out"))["budget"]["budget"] != 16 * 10**9)' || fail "14: --budget 16GB"
printf 'id,lower,upper,size\n0,0,2,100000000\n1,1,3,100000000\n' >b14.csv
run i14 "$roamc" layout b14.csv --capacity 250MiB
[ $rc = 0 ] || fail "14: layout --capacity 250MiB: rc $rc, $(cat i14.err)"
run i14 "$roamc" layout b14.csv --capacity 150M
[ $rc = 3 ] || fail "14: layout --capacity 150M (below the live size): rc $rc, $(cat i14.err)"
run i14 "$roamc" model.onnx -q --align 1K -o al14.json
[ $rc = 0 ] && grep -q '"align":1024' al14.json || fail "14: --align 1K"
# -q keeps the answer of --report json
run i14 "$roamc" model.onnx -q --report json
[ $rc = 0 ] && /usr/bin/python3 -c 'import json; json.load(open("i14.out"))' && [ ! -s i14.err ] || fail "14: -q --report json printed no JSON"
# --compare: rows name what ran, digits tell rows apart
run i14 "$roamc" model.onnx --compare --time-limit 2
grep -q "^  ILP  *ilp  *ilp " i14.out && grep -q "note: ILP: .*kept that" i14.out && fail "14: --compare ILP row says 'ilp ilp' for a fallback"
grep -q "note: ILP: .*kept that" i14.out && ! grep -q "^  ILP  *[a-z]*\*" i14.out && fail "14: --compare ILP fallback not marked"
h=$(awk '$1 == "Heuristics" {print $5, $6}' i14.out) r=$(awk '$1 == "ROAM" {print $5, $6}' i14.out)
[ -n "$h" ] && [ "$h" != "$r" ] || fail "14: --compare Heuristics ($h) and ROAM ($r) actual peaks differ but print alike"
if /usr/bin/python3 -c 'import onnx, numpy' 2>/dev/null; then
  /usr/bin/python3 - <<'PY'
import numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto as T
w = numpy_helper.from_array(np.ones((16, 10), np.float32), "fc.weight")
b = numpy_helper.from_array(np.zeros((10,), np.float32), "fc.bias")
g = helper.make_graph([helper.make_node("MatMul", ["x", "fc.weight"], ["h"], name="/fc/MatMul"),
                       helper.make_node("Add", ["h", "fc.bias"], ["logits"], name="/fc/Add")], "g",
                      [helper.make_tensor_value_info("x", T.FLOAT, ["batch", 16])],
                      [helper.make_tensor_value_info("logits", T.FLOAT, ["batch", "Addlogits_dim_1"])], [w, b])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]), "dyn.onnx")
g2 = helper.make_graph([helper.make_node("Add", ["x", "y"], ["z"])], "g",
                       [helper.make_tensor_value_info("x", T.FLOAT, ["batch", "seq"]),
                        helper.make_tensor_value_info("y", T.FLOAT, ["batch", "seq"])],
                       [helper.make_tensor_value_info("z", T.FLOAT, ["batch", "seq"])])
onnx.save(helper.make_model(g2, opset_imports=[helper.make_opsetid("", 14)]), "two.onnx")
PY
  # symbols from graph inputs only; every unbound one at once
  run i14 "$roamc" dyn.onnx --budget 1MiB --max-batch -q
  [ $rc = 0 ] && grep -q "roamc's plan: largest batch [0-9]" i14.out && [ "$(wc -l <i14.out)" = 3 ] \
    || fail "14: --max-batch -q on an output-only symbol: rc $rc, $(cat i14.out i14.err)"
  run i14 "$roamc" two.onnx -q
  [ $rc = 2 ] && grep -q -- "--dim batch=N --dim seq=N" i14.err || fail "14: unbound symbols one per run: $(cat i14.err)"
  # check takes the bindings recorded in the plan
  "$roamc" dyn.onnx --dim batch=8 -q -o dyn.json || fail "14: plan of dyn.onnx"
  run i14 "$roamc" check dyn.onnx dyn.json
  [ $rc = 0 ] && grep -q "^VALID" i14.out && grep -q "bindings from the plan: --dim batch=8" i14.out \
    || fail "14: check without retyping the bindings: rc $rc, $(cat i14.out i14.err)"
  # a --train plan checks without --emit-train; a wrong option says so without contradiction
  "$roamc" dyn.onnx --train --dim batch=8 -q -o dyntr.json || fail "14: --train plan of dyn.onnx"
  run i14 "$roamc" check dyn.onnx dyntr.json --dim batch=8
  [ $rc = 0 ] && grep -q "^VALID" i14.out && grep -q "training step --train derives" i14.out \
    || fail "14: check of a --train plan: rc $rc, $(cat i14.out i14.err)"
  run i14 "$roamc" check dyn.onnx dyntr.json --dim batch=8 --train --optimizer sgd
  [ $rc = 1 ] && grep -q "another training step" i14.out && ! grep -q "another model" i14.out \
    || fail "14: check of a --train plan with other options: rc $rc, $(cat i14.out i14.err)"
  # the plan records the --dim it was derived under (issue 39): no bindings to retype
  run i14 "$roamc" check dyn.onnx dyntr.json
  [ $rc = 0 ] && grep -q "^VALID" i14.out && grep -q "bindings from the plan: --dim batch=8" i14.out \
    || fail "14: --train plan without bindings given: rc $rc, $(cat i14.out i14.err)"
else
  skip_part "14: no python3-onnx to build models with symbols"
fi
# the exporter keeps its tracer's notes to itself
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  /usr/bin/python3 "$export_py" --model bert-base --layers 1 --seq-len 16 -o bt14.onnx >i14.out 2>&1 || fail "14: export.py: $(cat i14.out)"
  grep -q "unannotated" i14.out && fail "14: export.py prints its tracer's notes: $(cat i14.out)"
  /usr/bin/python3 "$export_py" --model bert-base --layers 1 --seq-len 16 -o bt14.onnx -v 2>&1 | grep -q "unannotated view" \
    || fail "14: export.py -v does not print the tracer's notes"
else
  skip_part "14: no torch for the exporter"
fi
ok "14 sizes as coreutils, -q answers, --compare rows, input symbols, check's bindings and --train plans, exporter notes"

echo "$TEST_FAILS failed, $TEST_SKIPS skipped"
test_finish test_cli_ux
