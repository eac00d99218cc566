#!/bin/sh
# test_readme_commands.sh SOURCE_DIR BUILD_DIR WORK_DIR: the README's commands, taken
# from README.md and run as written (issue 39), so that the test fails when the README
# and roamc's behaviour part:
#
# - the setup command puts `roamc` on the PATH before it calls it bare (the README calls
#   it bare everywhere): a step links or installs build/roamc into a directory on the
#   default PATH of root and of users on Debian, and no bare `roamc` comes before it;
#   its plan step then runs in WORK_DIR (with models/ from the checkout), `roamc` being
#   that link (a link in WORK_DIR/bin to BUILD_DIR/roamc, as the step makes it);
# - the export of the --train section (the block that runs /usr/bin/python3 on a
#   torch.onnx.export) runs, and then every README command on the file it writes, or on
#   the step those write (--train, --max-batch, ...), exits 0; the derived step and its
#   plan pass `roamc check`.  README commands on files the README does not make are
#   listed as not run.
#
# SKIP (77) for the export and its commands without torch and torchvision in
# /usr/bin/python3.  Slow: the export alone takes ~30 s (resnet18 with its weights).
. "$(dirname "$0")/lib.sh"
test_usage 3 3 "SOURCE_DIR BUILD_DIR WORK_DIR" "$@"
SRC=$1 BUILD=$2 W=$3
case $SRC in /*) ;; *) SRC=$(pwd)/$SRC ;; esac
case $BUILD in /*) ;; *) BUILD=$(pwd)/$BUILD ;; esac
readme=$SRC/README.md
[ -f "$readme" ] || fail_now "no $readme"
rm -rf "$W" && mkdir -p "$W/bin" || fail_now "cannot make $W"
ln -s "$BUILD/roamc" "$W/bin/roamc" && ln -s "$SRC/models" "$W/models" || fail_now "links in $W"
PATH=$W/bin:$PATH
export PATH

# ---- the setup command: the first ```sh block's first line, split into its && steps
setup=$(awk '/^```sh$/ { on = 1; next } on { print; exit }' "$readme")
case $setup in *"apt-get install"*"cmake --build build"*) ;; *) fail_now "the setup command is not the first sh block: '$setup'" ;; esac
echo "$setup" | sed 's/ && /\n/g' >"$W/setup.steps"
# Debian 12's default PATH: root's (login.defs ENV_SUPATH) and users' (ENV_PATH), both
common="/usr/local/bin /usr/bin /bin"
linked=0 bare=0 plan_step=
while IFS= read -r step; do
    case $step in
    *"ln -s"*"build/roamc"* | *"install"*"build/roamc"* | *"cmake --install build"*)
        dir=$(echo "$step" | awk '{ print $NF }')
        dir=${dir%/roamc}
        case " $common " in *" $dir "*) linked=1 ;; *) fail "setup step '$step': $dir is not on the default PATH of root and users ($common)" ;; esac
        ;;
    roamc\ * | *" roamc "*)
        [ $linked = 1 ] || fail "setup step '$step' calls roamc bare before any step puts it on the PATH"
        bare=1 plan_step=$step
        ;;
    esac
done <"$W/setup.steps"
[ $linked = 1 ] || [ $bare = 1 ] || pass "the setup command calls ./build/roamc, puts nothing on the PATH"
if [ -n "$plan_step" ]; then
    (cd "$W" && sh -c "$plan_step") >"$W/setup.out" 2>&1 || fail "setup's '$plan_step': $(tail -3 "$W/setup.out")"
    pass "setup: roamc is on the PATH before '$plan_step', which runs"
fi
# the README's commands (indented or fenced lines starting with `roamc `), in README order
awk '/^```/ { fenced = !fenced; next }
     fenced && /^roamc [^ ]/ { print; next }
     !fenced && /^    roamc [^ ]/ { sub(/^    /, ""); print }' "$readme" >"$W/commands"
# every other README command calls roamc bare: the setup must have put it on the PATH
n_bare=$(wc -l <"$W/commands")
[ "$n_bare" = 0 ] || [ $linked = 1 ] || fail "the README calls roamc bare $n_bare times, the setup puts it on no PATH"

# ---- the --train section's export, then every command on what it makes
if ! /usr/bin/python3 -c 'import torch, torchvision, onnx' >/dev/null 2>&1; then
    skip_part "/usr/bin/python3 lacks torch, torchvision or onnx: the --train export is not run"
    test_finish test_readme_commands
fi
awk '/^    \/usr\/bin\/python3 - <<.EOF.$/ { on = 1 } on { last = /^    EOF$/; sub(/^    /, ""); print } on && last { exit }' \
    "$readme" >"$W/export.sh"
grep -q 'torch.onnx.export' "$W/export.sh" && [ "$(tail -1 "$W/export.sh")" = EOF ] ||
    fail_now "no '/usr/bin/python3 - <<'EOF'' block with torch.onnx.export in the README"
made=$(sed -n 's/.*torch.onnx.export([^"]*"\([^"]*\.onnx\)".*/\1/p' "$W/export.sh" | head -1)
[ -n "$made" ] || fail_now "the export block writes no file named in quotes"
echo "  exporting $made as the README does (~30 s) ..."
(cd "$W" && sh export.sh) >"$W/export.out" 2>&1 || fail_now "the README's export: $(tail -3 "$W/export.out")"
[ -s "$W/$made" ] || fail_now "the README's export made no $made"
pass "the README's export block wrote $made"

# a README command runs when its model is a file made so far (the export's, or one an
# earlier command wrote with --emit-train)
# the model a command reads: its first argument, or its second after a command word
model_of() {
    echo "$1" | awk '{ print ($2 == "check" || $2 == "explain" || $2 == "shapes") ? $3 : $2 }'
}
made_files=" $made "
ran=0 fails_before=$TEST_FAILS
while IFS= read -r cmd; do
    model=$(model_of "$cmd")
    case $made_files in *" $model "*) ;; *)
        case $cmd in *"$made"*) fail "README command '$cmd' reads $made but not as its model" ;; esac
        continue ;;
    esac
    echo "  $cmd"
    (cd "$W" && sh -c "$cmd") >"$W/cmd.out" 2>&1
    rc=$?
    [ $rc = 0 ] || fail "README command '$cmd' exits $rc: $(grep -v '^ ' "$W/cmd.out" | tail -2)"
    ran=$((ran + 1))
    emitted=$(echo "$cmd" | sed -n 's/.*--emit-train \([^ ]*\).*/\1/p')
    [ -z "$emitted" ] || made_files="$made_files$emitted "
    plan=$(echo "$cmd" | sed -n 's/.* -o \([^ ]*\).*/\1/p')
    if [ $rc = 0 ] && [ -n "$emitted" ] && [ -n "$plan" ]; then
        (cd "$W" && roamc check "$emitted" "$plan") >"$W/check.out" 2>&1 ||
            fail "roamc check $emitted $plan: $(tail -2 "$W/check.out")"
    fi
done <"$W/commands"
[ $ran -ge 2 ] || fail "only $ran README commands read $made"
[ "$TEST_FAILS" != "$fails_before" ] || pass "$ran README commands on $made and what they wrote ran as written (exit 0; roamc check on the steps and plans)"
notrun=$(while IFS= read -r cmd; do
    model=$(model_of "$cmd")
    case $made_files in *" $model "*) ;; *) echo "$model" ;; esac
done <"$W/commands" | sort -u | tr '\n' ' ')
echo "  not run here (models the README does not make, or too slow to run here): $notrun"
test_finish test_readme_commands
