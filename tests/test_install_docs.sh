#!/bin/bash
# `cmake --install` (issue 30): the binary, its man page, its bash completion
# and the plan file's JSON Schema land where they belong, and work.
#
# usage: test_install_docs.sh SOURCE_DIR BUILD_DIR WORK_DIR
#
# - cmake --install BUILD_DIR --prefix WORK_DIR/prefix puts bin/roamc,
#   share/man/man1/roamc.1, share/bash-completion/completions/roamc and
#   share/roamc/plan.schema.json there; the installed roamc runs;
# - the man page renders without a warning (groff -man -ww -z), and man -l
#   shows it; every long option of a getopt table in planner/ and every
#   option `roamc --help` lists is in it (an option --help does not document
#   fails here);
# - the completion is valid bash (bash -n), and completing in a scripted
#   bash gives `roamc --sh` -> --shard, `roamc check --d` -> --dim,
#   `roamc --order l` -> lescea, `roamc --fit=` -> recompute offload both, and
#   `roamc layout --method ` its methods; every value it offers for an option
#   is one roamc accepts (roamc does not name it in an error).
. "$(dirname "$0")/lib.sh"
test_usage 3 3 "SOURCE_DIR BUILD_DIR WORK_DIR" "$@"
SRC=$1 BUILD=$2 W=$3
rm -rf "$W" && mkdir -p "$W" || fail_now "cannot make $W"
P=$W/prefix

cmake --install "$BUILD" --prefix "$P" >"$W/install.out" 2>&1 || fail_now "cmake --install: $(tail -5 "$W/install.out")"
man1=$P/share/man/man1/roamc.1 comp=$P/share/bash-completion/completions/roamc
for f in "$P/bin/roamc" "$man1" "$comp" "$P/share/roamc/plan.schema.json"; do
    [ -s "$f" ] || fail "not installed: ${f#"$P"/}"
done
[ -x "$P/bin/roamc" ] || fail_now "bin/roamc is not an executable"
"$P/bin/roamc" --version | grep -q '^roamc [0-9]' || fail "the installed roamc --version"
pass "installed: bin/roamc, share/man/man1/roamc.1, share/bash-completion/completions/roamc, share/roamc/plan.schema.json"

# ---- the man page
if command -v groff >/dev/null; then
    groff -man -ww -z "$man1" >"$W/groff.out" 2>&1 || fail "groff -man -ww -z exits $?"
    [ ! -s "$W/groff.out" ] || fail "groff warns about roamc.1: $(head -5 "$W/groff.out")"
    groff -man -Tascii "$man1" 2>/dev/null | col -b >"$W/man.txt"
    grep -q '^SYNOPSIS' "$W/man.txt" && grep -q '^OPTIONS' "$W/man.txt" && grep -q 'roamc layout' "$W/man.txt" ||
        fail "roamc.1 renders without SYNOPSIS, OPTIONS or the layout command"
    pass "groff -man -ww renders roamc.1 without a warning"
else
    skip_part "groff (Debian: groff-base) is not installed: roamc.1 is not rendered"
fi
if command -v man >/dev/null; then
    MANWIDTH=80 man -P cat -l "$man1" 2>"$W/man.err" | grep -q 'roamc - plan the memory' ||
        fail "man -l does not show roamc.1: $(head -3 "$W/man.err")"
else
    skip_part "man (Debian: man-db) is not installed"
fi
# the options: in the man source, "-" is "\-"
sed 's/\\-/-/g; s/\\f[BIR]//g' "$man1" >"$W/man.src"
n=0
for o in $({ grep -rhoE '"[a-z][a-z0-9-]*", *(no|required|optional)_argument' "$SRC/planner" |
    sed -E 's/^"([^"]*)".*/--\1/'; "$P/bin/roamc" --help | sed -n '/^options:$/,/^$/p' |
    grep -oE -- '--[a-z][a-z0-9-]*[a-z0-9]'; } | sort -u); do
    n=$((n + 1))
    grep -qe "$o\\b" "$W/man.src" || fail "$o: roamc takes it, but roamc.1 does not mention it (add it to its --help)"
done
[ $n -ge 30 ] || fail "only $n options found in planner/'s getopt tables and --help"
pass "each of $n options of the getopt tables and --help is in roamc.1"

# ---- the completion
bash -n "$comp" || fail "bash -n: the completion is not valid bash"
cat >"$W/complete.sh" <<'EOF'
source "$1"
shift
COMP_WORDS=("$@")
COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
COMPREPLY=()
_roamc
echo "${COMPREPLY[*]}"
EOF
# completes WANT WORDS...: completing the last of WORDS offers WANT (all its words)
completes() {
    _want=$1
    shift
    _got=$(cd "$W" && bash "$W/complete.sh" "$comp" "$@" 2>&1)
    for _w in $_want; do
        case " $_got " in *" $_w "*) ;; *) fail "completing '$*' gives '$_got', without $_w"; return ;; esac
    done
}
completes --shard roamc --sh
completes --dim roamc check --d
completes lescea roamc --order l
completes "recompute offload both" roamc --fit = ""
completes "roam llfb greedy bestfit pytorch" roamc layout --method ""
completes check roamc ch
completes "--top --report" roamc explain --
touch "$W/m.onnx" "$W/p.json"
completes m.onnx roamc ""
completes p.json roamc check m.onnx ""
pass "the completion: bash -n, and roamc --sh gives --shard (and 8 more)"
# every value the completion offers is one roamc takes: given it, roamc fails
# on the missing model, not on the value (_roamc_values_OPTION, and
# _roamc_values_layout_OPTION for roamc layout)
n=0
for var in $(bash -c 'source "$1"; compgen -v _roamc_values_' _ "$comp"); do
    opt=${var#_roamc_values_}
    for v in $(bash -c 'source "$1"; echo "${!2}"' _ "$comp" "$var"); do
        n=$((n + 1))
        case $opt in
        layout_*) "$P/bin/roamc" layout "$W/none.csv" "--${opt#layout_}" "$v" ;;
        fit) "$P/bin/roamc" "$W/none.onnx" --budget 1G "--fit=$v" ;;
        # the device profile is looked up after the model loads: a real one, fitting at 1T
        device) "$P/bin/roamc" "$SRC/models/alexnet_b1.onnx" -q --budget 1T --fit --device "$v" ;;
        # what the other values need beside them, so that the value is parsed before the model
        *) "$P/bin/roamc" "$W/none.onnx" --train --budget 1G --fit "--${opt//_/-}" "$v" ;;
        esac >/dev/null 2>"$W/val.err"
        ! grep -qF "'$v'" "$W/val.err" || fail "the completion offers --$opt $v, which roamc refuses: $(head -1 "$W/val.err")"
    done
done
[ $n -ge 30 ] || fail "the completion offers only $n values"
pass "each of the $n values the completion offers is accepted"
test_finish test_install_docs
