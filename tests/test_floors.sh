#!/bin/sh
# The floors of the product code (README "How the code is organised"), lowest
# first: frontend/base/ < frontend/ (and its subfolders) < graph/ <
# partition/ < ilp/ < layout/ < planner/ < planner's subfolders, in their
# declared order: planner/fit/ < planner/shard/ < planner/streams/ <
# planner/report/ < planner/api/ < planner/cmd/.  A file includes only
# files of its own floor or of lower ones, and no files form a circle.
# This test fails, printing each violation, on:
#
#   1. an #include that runs upward:
#        FILE:LINE: includes X (floor A above B)
#      Includes are bare names ("graph.h": the build uses include dirs), so
#      each is resolved by name to the file of the tree that has it (the
#      includer's own folder first); a name no file has, or several files
#      have, is a violation too (but onnx.pb-c.h, generated into the build
#      for frontend/).  Floors come from the path, so new subfolders need
#      no change here, but planner's: a C file in a subfolder of planner/
#      that the order below does not name is a violation (declare it).
#   2. the two extra rules: layout/ includes only base.h, ilp/ilp_layout.h
#      and layout/'s own headers (no graph, partition, ONNX, igraph or
#      GLPK); ilp/ilp_layout.* include only base.h and ilp/glpk_backstop.h;
#   3. a circle of #include between files (header loops);
#   4. with BUILD_DIR (the build's objects): a circle of calls between
#      source files (A.c calls a function of B.c and B.c one of A.c, as
#      frontend.c and infer.c, plan_io.c and svg.c did), and a call that
#      runs upward (a function declared by hand, past the headers).  Calls
#      are read from the objects with nm: a function defined in one file
#      and undefined in another; data (a rule table a dispatcher reads) is
#      not a call.  Without nm or the objects this part says SKIP.
#
# usage: test_floors.sh SOURCE_DIR [BUILD_DIR]   (fast: no build needed but nm's)
set -u
. "$(dirname "$0")/lib.sh"
test_usage 1 2 "SOURCE_DIR [BUILD_DIR]" "$@"
src=$1 build=${2:-}
[ -z "$build" ] || build=$(cd "$build" && pwd) || fail_now "no build folder $2"
cd "$src" || fail_now "no source folder $src"
command -v tsort >/dev/null 2>&1 || skip "tsort (coreutils) is not installed"
work=$(mktemp -d) || fail_now "mktemp"
trap 'rm -rf "$work"' EXIT

# The floor of a path, for both awk programs below: floor(p) is 1
# (frontend/base/) .. 7 (planner/'s own files), 8 .. (planner's subfolders,
# lowest first), 0 outside the product code or in a planner subfolder the
# order does not name.
floors_awk='
BEGIN {
    NF_ = split("frontend/base/ frontend/ graph/ partition/ ilp/ layout/ planner/ " \
                "planner/fit/ planner/shard/ planner/streams/ planner/report/ planner/api/ planner/cmd/", NAME, " ")
    for (i = 1; i <= NF_; i++) FLOOR[NAME[i]] = i
}
function floor(p, top, sub2) {
    if (p ~ /^frontend\/base\//) return 1
    if (p ~ /^planner\/[^\/]+\//) {
        sub2 = p
        sub(/^planner\//, "", sub2)
        sub(/\/.*/, "/", sub2)
        return ("planner/" sub2) in FLOOR ? FLOOR["planner/" sub2] : 0
    }
    top = p
    sub(/\/.*/, "/", top)
    return (top in FLOOR && top != "frontend/base/") ? FLOOR[top] : 0
}'

find frontend graph partition ilp layout planner -type f \( -name '*.c' -o -name '*.h' \) | LC_ALL=C sort >"$work/files"
[ -s "$work/files" ] || fail_now "no C files under $src/{frontend,graph,partition,ilp,layout,planner}"
# FILE<TAB>LINE<TAB>q|a<TAB>NAME for each #include "NAME" (q) or <NAME> (a)
xargs grep -n -H -E '^[[:space:]]*#[[:space:]]*include[[:space:]]*["<][^">]+[">]' <"$work/files" |
    sed -E 's/^([^:]+):([0-9]+):[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]+)".*/\1\t\2\tq\t\3/;
            s/^([^:]+):([0-9]+):[[:space:]]*#[[:space:]]*include[[:space:]]*<([^>]+)>.*/\1\t\2\ta\t\3/' \
        >"$work/includes"

# 1-2: each include resolved and checked; "E A B" lines are the include edges
awk -F '\t' "$floors_awk"'
    FILENAME == ARGV[1] { n = $0; base = n; sub(/.*\//, "", base); HAVE[base] = HAVE[base] ? HAVE[base] " " n : n; next }
    function dir(p) { sub(/[^\/]*$/, "", p); return p }
    function bad(msg) { print "V " $1 ":" $2 ": includes " $4 " (" msg ")" }
    {
        file = $1; name = $4; base = name; sub(/.*\//, "", base)
        if (floor(file) == 0 && !(file in UNDECLARED)) {
            UNDECLARED[file] = 1
            print "V " file ":1: is in a subfolder of planner/ that the order of floors does not name (declare it in test_floors.sh and the README)"
        }
        if ($3 == "a") {
            if (file ~ /^layout\// && name ~ /^(igraph|glpk|protobuf-c|onnx)/)
                bad("layout/ is free of graph, partition, ONNX and the GLPK model")
            next
        }
        # the file the name means: one of that name, the includer folder first
        n = split(HAVE[base], cand, " "); to = ""
        if (name ~ /\//) { # a path: the files it ends
            m = 0
            for (i = 1; i <= n; i++) if (cand[i] == name || substr(cand[i], length(cand[i]) - length(name)) == "/" name) keep[++m] = cand[i]
            n = m; for (i = 1; i <= n; i++) cand[i] = keep[i]
        }
        for (i = 1; i <= n; i++) if (dir(cand[i]) == dir(file)) to = cand[i]
        if (to == "" && n == 1) to = cand[1]
        if (to == "" && n > 1) { bad(n " files have that name: " HAVE[base]); next }
        if (to == "" && base == "onnx.pb-c.h") to = "frontend/(generated)/onnx.pb-c.h"
        if (to == "") { bad("no file of the tree has that name"); next }
        ff = floor(file); ft = floor(to)
        if (ft > ff && ff > 0) bad("floor " NAME[ft] " above " NAME[ff])
        if (file ~ /^layout\// && to !~ /^layout\// && to != "frontend/base/base.h" && to != "ilp/ilp_layout.h")
            bad("layout/ may include only base.h, ilp_layout.h and its own headers")
        if (file ~ /^ilp\/ilp_layout\.[ch]$/ && to != "frontend/base/base.h" && to != "ilp/glpk_backstop.h" && to != "ilp/ilp_layout.h")
            bad("ilp_layout.* include only base.h and glpk_backstop.h")
        if (to !~ /generated/) print "E " file " " to
    }' "$work/files" "$work/includes" >"$work/verdicts"
grep '^V ' "$work/verdicts" | cut -c3- >"$work/violations"
while IFS= read -r v; do fail "$v"; done <"$work/violations"
n_inc=$(grep -c '^E ' "$work/verdicts")

# circles: tsort names the files of each loop it has to break
circles() { # circles EDGES KIND: each loop as one failure
    tsort "$1" 2>&1 >/dev/null | awk -v kind="$2" '
        /input contains a loop/ { if (loop != "") print loop " -> " first; loop = ""; next }
        { sub(/^tsort: /, ""); if (loop == "") { loop = kind ": " $0; first = $0 } else loop = loop " -> " $0 }
        END { if (loop != "") print loop " -> " first }' >"$work/loops"
    while IFS= read -r l; do fail "$l"; done <"$work/loops"
}
grep '^E ' "$work/verdicts" | cut -c3- >"$work/edges"
circles "$work/edges" "circle of #include"
pass "$(wc -l <"$work/files") files, $n_inc includes: $(wc -l <"$work/violations") upward or forbidden, $(wc -l <"$work/loops") circles"

# 4: the calls between source files, from the build's objects
if [ -z "$build" ]; then
    skip_part "no BUILD_DIR: circles of calls between files not checked"
elif ! command -v nm >/dev/null 2>&1; then
    skip_part "nm (binutils) is not installed: circles of calls between files not checked"
else
    # every object of a product source: BUILD/DIR/CMakeFiles/T.dir/REL.c.o is DIR/REL.c
    find "$build" -path '*/CMakeFiles/*.dir/*' -name '*.c.o' | while IFS= read -r o; do
        rel=${o#"$build"/}
        case $rel in CMakeFiles/*) d= ;; *) d=${rel%%/CMakeFiles/*}/ ;; esac
        s=$d${rel#*/CMakeFiles/*.dir/}
        s=${s%.o}
        [ -f "$s" ] && grep -qx "$s" "$work/files" || continue
        nm -P -g "$o" 2>/dev/null | awk -v s="$s" '$2 ~ /^[TW]$/ { print "D " s " " $1 } $2 == "U" { print "U " s " " $1 }'
    done >"$work/symbols"
    n_obj=$(cut -d' ' -f2 "$work/symbols" | sort -u | wc -l)
    if [ "$n_obj" -eq 0 ]; then
        skip_part "no objects of the product code under $build: circles of calls not checked"
    else
        awk "$floors_awk"'
            $1 == "D" { def[$3] = $2; next }
            { use[++n] = $2 " " $3 }
            END {
                for (i = 1; i <= n; i++) {
                    split(use[i], u, " ")
                    if (!(u[2] in def) || def[u[2]] == u[1]) continue
                    to = def[u[2]]
                    if (floor(to) > floor(u[1]) && floor(u[1]) > 0)
                        print "V " u[1] ": calls " u[2] " of " to " (floor " NAME[floor(to)] " above " NAME[floor(u[1])] ")"
                    print "E " u[1] " " to
                }
            }' "$work/symbols" | sort -u >"$work/calls"
        grep '^V ' "$work/calls" | cut -c3- >"$work/violations"
        while IFS= read -r v; do fail "$v"; done <"$work/violations"
        grep '^E ' "$work/calls" | cut -c3- >"$work/edges"
        circles "$work/edges" "circle of calls"
        pass "$n_obj objects, $(wc -l <"$work/edges") file-to-file calls: $(wc -l <"$work/violations") upward, $(wc -l <"$work/loops") circles"
    fi
fi
test_finish test_floors
