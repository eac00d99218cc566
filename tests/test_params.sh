#!/bin/sh
# Issue 32's parameter limits: no function of the product code (frontend,
# graph, partition, ilp, layout, planner, subfolders included) takes more
# than 6 parameters, no static one more than 8; a longer list is a named
# struct (a request, a problem or a result type).  Fails listing
# FILE:LINE NAME COUNT for each definition over, as tests/count_params.py
# counts them; first runs the counter on a file whose answer is known, so a
# counter that stopped seeing definitions fails too rather than passing.
#
# usage: test_params.sh SOURCE_DIR
# Exit 77 (SKIP) without python3 (any Python 3: the counter uses only the
# standard library).
set -u
. "$(dirname "$0")/lib.sh"
test_usage 1 1 SOURCE_DIR "$@"
SRC=$1
PY=$(command -v python3 || true)
if [ -z "$PY" ]; then
    echo "SKIP: no python3 on PATH (tests/count_params.py needs one)"
    exit 77
fi
COUNT="$SRC/tests/count_params.py"
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
failures=0

# 1. the counter on known code: what is over, and nothing else
cat >"$tmp/known.c" <<'EOF'
#include <stdio.h>
#define BODY(a, b, c, d, e, f, g) { return a; }
struct pair { int a, b; };
static const int table[] = {1, 2, 3};
int six(int a, int b, int c, int d, int e, int f) { return a + b + c + d + e + f; }
int seven(int a, int b, int c, int d, int e, int f,
          int g) {
    /* a comment with { and (h, i, j) */
    const char *s = "} (k, l, m, n, o, p, q, r)";
    return a + b + c + d + e + f + g + s[0] + '{';
}
static int eight(int a, int b, int c, int d, int e, int f, int g, int h) { return a + h; }
static unsigned
nine(int a, int b, int c, int d, int e, int f, int g, int h, int i) { return a + i; }
int ptrs(int (*cmp)(const void *, const void *), void (*f)(int, int), int a[2][3], int b, int c,
         int d, int e) {
    return cmp(0, 0) + a[0][0] + b + c + d + e + (f != 0);
}
int logf7(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int logf7(int level, const char *fmt, ...) { return level + (fmt != 0); }
int none(void) { return 0; }
EOF
cat >"$tmp/expected" <<EOF
$tmp/known.c:6 seven 7
$tmp/known.c:14 nine 9
$tmp/known.c:15 ptrs 7
EOF
"$PY" "$COUNT" "$tmp/known.c" >"$tmp/got" 2>"$tmp/known.err"
rc=$?
if [ $rc != 1 ] || ! cmp -s "$tmp/expected" "$tmp/got" ||
    ! grep -q "^count_params.py: 7 definitions in 1 files, 3 over" "$tmp/known.err"; then
    echo "FAIL: count_params.py on a known file: exit $rc (want 1), printed:"
    cat "$tmp/got" "$tmp/known.err"
    echo "want:"
    cat "$tmp/expected"
    failures=$((failures + 1))
fi

# 2. the product code
cd "$SRC" || exit 2
"$PY" "$COUNT" frontend graph partition ilp layout planner >"$tmp/over" 2>"$tmp/summary"
rc=$?
cat "$tmp/summary"
defs=$(sed -n 's/^count_params.py: \([0-9][0-9]*\) definitions.*/\1/p' "$tmp/summary")
if [ $rc = 1 ]; then
    echo "FAIL: functions over the limits (6 parameters, 8 for a static function; use a named struct):"
    cat "$tmp/over"
    failures=$((failures + 1))
elif [ $rc != 0 ]; then
    echo "FAIL: count_params.py exited $rc"
    failures=$((failures + 1))
elif [ "${defs:-0}" -lt 500 ]; then
    echo "FAIL: only ${defs:-no} definitions found in the product code: the counter misreads it"
    failures=$((failures + 1))
fi
test_finish test_params $failures 1
