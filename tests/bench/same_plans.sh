#!/usr/bin/env bash
# same_plans.sh OLD_ROAMC NEW_ROAMC [OUT_DIR]
#
# Plans every committed model (models/*.onnx) with both binaries under the six
# option sets below and compares the plan files byte for byte: the check that a
# refactoring changed no behaviour.  Prints one line per difference and a
# summary; exit 0 when every plan is identical, 1 otherwise, 2 on bad usage.
# Each run gets --threads 2 and a deterministic budget (plans never depend on
# the clock), so a loaded machine changes nothing but the wall time.
set -u
[ $# -ge 2 ] || { echo "usage: $0 OLD_ROAMC NEW_ROAMC [OUT_DIR]" >&2; exit 2; }
old=$1 new=$2 out=${3:-$(mktemp -d)}
for b in "$old" "$new"; do [ -x "$b" ] || { echo "$0: $b: not executable" >&2; exit 2; }; done
cd "$(dirname "$0")/../.."
mkdir -p "$out/old" "$out/new"
sets=("" "--order program" "--order lescea" "--layout llfb" "--layout greedy"
      "--order program --layout pytorch")
n=0 differ=0
for m in models/*.onnx; do
    base=$(basename "$m" .onnx)
    i=0
    for s in "${sets[@]}"; do
        for side in old new; do
            bin=$old; [ $side = new ] && bin=$new
            # shellcheck disable=SC2086
            "$bin" "$m" $s -q -o "$out/$side/$base.$i.json" >/dev/null 2>"$out/$side/$base.$i.err" ||
                echo "$side: $m $s: exit $?" >>"$out/$side/$base.$i.err"
        done
        n=$((n + 1))
        if ! cmp -s "$out/old/$base.$i.json" "$out/new/$base.$i.json"; then
            differ=$((differ + 1)); echo "differ: $m $s"
        fi
        i=$((i + 1))
    done
done
echo "compared $n plans, $differ differ ($out)"
[ $differ = 0 ]
