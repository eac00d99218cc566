#!/usr/bin/env bash
# layout_families.sh ROAMC [BASELINE_ROAMC] [MINIMALLOC]
#
# The layout engine's regression gate (issue 31): runs `roamc layout` of
# ROAMC, of BASELINE_ROAMC (the previous main; optional) and MiniMalloc
# (github.com/google/minimalloc, not part of this project: build it
# yourself, see README.md; optional) on every instance family we have, one
# instance at a time, and prints per family: solved count and median time
# of each, then whether ROAMC lost ground.
#
# Zero-slack families (solved = a layout at the live-size bound, asked with
# --capacity BOUND; MiniMalloc with --capacity=BOUND --validate):
#   perfect     gen_perfect 150/300/450, seeds 1..COUNT (guillotine)
#   strip       gen_strip 100/200 exact cover, seeds 1..COUNT
#   strip_drop  gen_strip DROP = 20 (zero slack at the peak only),
#               100/200/400/800, seeds 1..COUNT
#   brick       gen_brick 100, default and RUN = LIVE, seeds 1..COUNT
#   skyline     gen_skyline 100/200/400, seeds 1..SKY_COUNT (default 5)
#   ak          MiniMalloc's benchmarks/challenging A-K (AK_DIR: the folder
#               of its NAME.CAPACITY.csv; asked at CAPACITY, not at the
#               bound; skipped when unset or empty)
#   models      tests/bench/instances/*.csv (the committed models' lists)
# Lists with slack (family slack; minimising, no capacity): `ROAMC MODEL
# --dump-buffers` of the models in SLACK_MODELS under --order program and
# roam (made here, not committed), 1k-20k buffers; per list the height
# above the live-size bound in percent, the median over the lists, and how
# many lists reach the bound.  MiniMalloc gets one probe per list at
# ROAMC's height (solved: it finds a layout as low; it cannot minimise in
# one run).
#
# Loses ground (exit 1): a zero-slack family where ROAMC solves fewer than
# BASELINE_ROAMC or MiniMalloc, or the slack family where ROAMC's median
# gap is above the baseline's (or it reaches the bound on fewer lists).
# Times are roamc's own `time:` line and MiniMalloc's "Elapsed time"
# (wall seconds; an unsolved run counts as the limit); a median over the
# family's instances.  Counts at the limit are what to compare on a
# loaded machine.
#
# Environment: LIMIT (seconds per zero-slack instance, default 10),
# SLACK_LIMIT (per list, default 10), COUNT (seeds per size, default 3),
# SKY_COUNT (default 5), FAMILIES (a subset, space separated, default all),
# AK_DIR, SLACK_MODELS (default "bert-base_b32 vit_b_16_b32
# efficientnet_b0_b32 gpt2-xl_b1 gpt2-xl_b4"), KEEP (a folder to keep the
# instances and logs in), CC (default cc), OLD_ROAMC (a third roamc, for
# example 169a928's: its solved count and median time get two more columns
# on the zero-slack families, and ROAMC loses ground when it solves fewer).
# Exit: 0 no family lost ground, 1 some did, 2 bad usage.
set -u
[ $# -ge 1 ] && [ $# -le 3 ] || {
    echo "usage: $0 ROAMC [BASELINE_ROAMC] [MINIMALLOC]" >&2
    exit 2
}
roamc=$1 base=${2:-} mm=${3:-} old=${OLD_ROAMC:-}
[ -x "$roamc" ] || { echo "$0: $roamc: not executable" >&2; exit 2; }
[ -z "$base" ] || [ -x "$base" ] || { echo "$0: $base: not executable" >&2; exit 2; }
[ -z "$mm" ] || [ -x "$mm" ] || { echo "$0: $mm: not executable" >&2; exit 2; }
[ -z "$old" ] || [ -x "$old" ] || { echo "$0: $old: not executable" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
limit=${LIMIT:-10} slack_limit=${SLACK_LIMIT:-10} count=${COUNT:-3} sky_count=${SKY_COUNT:-5}
families=${FAMILIES:-"perfect strip strip_drop brick skyline ak models slack"}
slack_models=${SLACK_MODELS:-"bert-base_b32 vit_b_16_b32 efficientnet_b0_b32 gpt2-xl_b1 gpt2-xl_b4"}
work=${KEEP:-$(mktemp -d)}
mkdir -p "$work/inst" "$work/log"
[ -n "${KEEP:-}" ] || trap 'rm -rf "$work"' EXIT
for g in gen_perfect gen_strip gen_brick gen_skyline; do
    ${CC:-cc} -O2 -o "$work/$g" "$here/$g.c" || { echo "$0: cannot build $g" >&2; exit 2; }
done

# The instances of a family, one path a line (made on demand).
instances() {
    local fam=$1 n s f
    case $fam in
    perfect) for n in 150 300 450; do for s in $(seq "$count"); do
        f=$work/inst/perfect_${n}_$s.csv; [ -s "$f" ] || "$work/gen_perfect" "$n" "$s" > "$f"; echo "$f"; done; done ;;
    strip) for n in 100 200; do for s in $(seq "$count"); do
        f=$work/inst/strip_${n}_$s.csv; [ -s "$f" ] || "$work/gen_strip" "$n" "$s" > "$f"; echo "$f"; done; done ;;
    strip_drop) for n in 100 200 400 800; do for s in $(seq "$count"); do
        f=$work/inst/stripdrop_${n}_$s.csv
        [ -s "$f" ] || "$work/gen_strip" "$n" "$s" $((8 + n / 25)) 1048576 50 30 20 > "$f"; echo "$f"; done; done ;;
    brick) for s in $(seq "$count"); do
        f=$work/inst/brick_100_$s.csv; [ -s "$f" ] || "$work/gen_brick" 100 "$s" > "$f"; echo "$f"
        f=$work/inst/brickmild_100_$s.csv; [ -s "$f" ] || "$work/gen_brick" 100 "$s" 12 1048576 12 > "$f"; echo "$f"; done ;;
    skyline) for n in 100 200 400; do for s in $(seq "$sky_count"); do
        f=$work/inst/skyline_${n}_$s.csv; [ -s "$f" ] || "$work/gen_skyline" "$n" "$s" > "$f"; echo "$f"; done; done ;;
    ak) [ -n "${AK_DIR:-}" ] && ls "$AK_DIR"/*.csv 2>/dev/null ;;
    models) ls "$root"/tests/bench/instances/*.csv ;;
    slack) for m in $slack_models; do for o in program roam; do
        f=$work/inst/slack_${m}_$o.csv
        [ -s "$f" ] || [ ! -f "$root/models/$m.onnx" ] ||
            "$roamc" "$root/models/$m.onnx" -q --order "$o" --dump-buffers "$f" -o "$work/plan.json" > /dev/null 2>&1
        [ -s "$f" ] && echo "$f"; done; done ;;
    esac
}

# The live-size bound of a list (roamc's own count).
bound_of() {
    "$roamc" layout "$1" --method llfb 2>/dev/null | sed -n 's/^lower bound: \([0-9]*\).*/\1/p'
}

# run_roamc BIN FILE CAP LIMIT LOG -> "height seconds"
run_roamc() {
    local cap_opt=""
    [ "$3" = - ] || cap_opt="--capacity $3"
    # shellcheck disable=SC2086
    "$1" layout "$2" $cap_opt --time-limit "$4" > "$5" 2>&1
    local h t
    h=$(sed -n 's/^height: \([0-9]*\).*/\1/p' "$5")
    t=$(sed -n 's/^time: \([0-9.]*\).*/\1/p' "$5")
    echo "${h:-0} ${t:-$4}"
}

# run_mm FILE CAP LIMIT LOG -> "ok|-- seconds"
run_mm() {
    awk -F, 'NR == 1 || $4 > 0' "$1" > "$work/m_in.csv" # no empty buffers (it mishandles them)
    local st=--
    if "$mm" --input="$work/m_in.csv" --capacity="$2" --timeout="${3}s" --validate \
        --output="$work/m_out.csv" > "$4" 2>&1 && grep -q "Validation PASS" "$4"; then st=ok; fi
    local t
    t=$(sed -n 's/.*Elapsed time \([0-9.]*\)s.*/\1/p' "$4")
    echo "$st ${t:-$3}"
}

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) printf "%.2f", v[(NR + 1) / 2]; else printf "%.2f", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
median4() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) printf "%.4f", v[(NR + 1) / 2]; else printf "%.4f", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

lost=0
printf "# layout_families.sh: LIMIT=%s s, SLACK_LIMIT=%s s, COUNT=%s, load %s\n" "$limit" "$slack_limit" \
    "$count" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf "# roamc: %s\n# baseline: %s\n# minimalloc: %s\n# old: %s\n" "$roamc" "${base:--}" "${mm:--}" "${old:--}"
printf "| family | instances | roamc solved | roamc median s | baseline solved | baseline median s | MiniMalloc solved | MiniMalloc median s | old solved | old median s |\n"
printf "| :--- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n"
for fam in $families; do
    files=$(instances "$fam")
    if [ -z "$files" ]; then
        printf "| %s | SKIP (no instances) | | | | | | |\n" "$fam"
        continue
    fi
    nf=0 r_ok=0 b_ok=0 m_ok=0 o_ok=0 r_at=0 b_at=0
    : > "$work/r_t" ; : > "$work/b_t" ; : > "$work/m_t" ; : > "$work/o_t" ; : > "$work/r_g" ; : > "$work/b_g"
    for f in $files; do
        nf=$((nf + 1))
        name=$(basename "$f" .csv)
        lb=$(bound_of "$f")
        if [ "$fam" = slack ]; then
            read -r h t <<< "$(run_roamc "$roamc" "$f" - "$slack_limit" "$work/log/$name.roamc")"
            echo "$t" >> "$work/r_t"
            gap=$(echo "scale=6; 100 * ($h - $lb) / $lb" | bc -l)
            echo "$gap" >> "$work/r_g"
            [ "$h" -le "$lb" ] && r_at=$((r_at + 1))
            detail="$name: $(($(wc -l < "$f") - 1)) buffers, roamc +$gap%"
            if [ -n "$base" ]; then
                read -r bh bt <<< "$(run_roamc "$base" "$f" - "$slack_limit" "$work/log/$name.base")"
                echo "$bt" >> "$work/b_t"
                bgap=$(echo "scale=6; 100 * ($bh - $lb) / $lb" | bc -l)
                echo "$bgap" >> "$work/b_g"
                [ "$bh" -le "$lb" ] && b_at=$((b_at + 1))
                detail="$detail, baseline +$bgap%"
            fi
            if [ -n "$mm" ]; then
                read -r ms mt <<< "$(run_mm "$f" "$h" "$slack_limit" "$work/log/$name.mm")"
                echo "$mt" >> "$work/m_t"
                [ "$ms" = ok ] && m_ok=$((m_ok + 1))
                detail="$detail, MiniMalloc at roamc's height: $ms"
            fi
            echo "# $detail" >&2
            continue
        fi
        # A-K's files are NAME.CAPACITY.csv: solved = within that capacity
        # (D and J have no layout at their live-size bound)
        case $fam:$name in ak:*.*[0-9]) lb=${name##*.} ;; esac
        read -r h t <<< "$(run_roamc "$roamc" "$f" "$lb" "$limit" "$work/log/$name.roamc")"
        echo "$t" >> "$work/r_t"
        rs=--; [ "$h" -gt 0 ] && [ "$h" -le "$lb" ] && { r_ok=$((r_ok + 1)); rs=ok; }
        detail="$name: roamc $rs $t"
        if [ -n "$base" ]; then
            read -r bh bt <<< "$(run_roamc "$base" "$f" "$lb" "$limit" "$work/log/$name.base")"
            echo "$bt" >> "$work/b_t"
            bs=--; [ "$bh" -gt 0 ] && [ "$bh" -le "$lb" ] && { b_ok=$((b_ok + 1)); bs=ok; }
            detail="$detail, baseline $bs $bt"
        fi
        if [ -n "$mm" ]; then
            read -r ms mt <<< "$(run_mm "$f" "$lb" "$limit" "$work/log/$name.mm")"
            echo "$mt" >> "$work/m_t"
            [ "$ms" = ok ] && m_ok=$((m_ok + 1))
            detail="$detail, MiniMalloc $ms $mt"
        fi
        if [ -n "$old" ]; then
            read -r oh ot <<< "$(run_roamc "$old" "$f" "$lb" "$limit" "$work/log/$name.old")"
            echo "$ot" >> "$work/o_t"
            os=--; [ "$oh" -gt 0 ] && [ "$oh" -le "$lb" ] && { o_ok=$((o_ok + 1)); os=ok; }
            detail="$detail, old $os $ot"
        fi
        echo "# $detail" >&2
    done
    rt=$(median < "$work/r_t") bt=$(median < "$work/b_t") mt=$(median < "$work/m_t") ot=$(median < "$work/o_t")
    if [ "$fam" = slack ]; then
        rg=$(median4 < "$work/r_g") bg=$(median4 < "$work/b_g")
        bcol="-" ; [ -n "$base" ] && bcol="$b_at at bound, median +$bg%"
        mcol="-" ; [ -n "$mm" ] && mcol="$m_ok as low as roamc"
        printf "| %s | %d | %d at bound, median +%s%% | %s | %s | %s | %s | %s | | |\n" "$fam" "$nf" "$r_at" "$rg" \
            "$rt" "$bcol" "${base:+$bt}" "$mcol" "${mm:+$mt}"
        if [ -n "$base" ]; then
            if [ "$r_at" -lt "$b_at" ] || [ "$(echo "$rg > $bg + 0.0001" | bc -l)" = 1 ]; then
                echo "# LOST GROUND: $fam (median gap +$rg% against the baseline's +$bg%, at bound $r_at against $b_at)" >&2
                lost=1
            fi
        fi
        continue
    fi
    printf "| %s | %d | %d | %s | %s | %s | %s | %s | %s | %s |\n" "$fam" "$nf" "$r_ok" "$rt" \
        "${base:+$b_ok}" "${base:+$bt}" "${mm:+$m_ok}" "${mm:+$mt}" "${old:+$o_ok}" "${old:+$ot}"
    if { [ -n "$base" ] && [ "$r_ok" -lt "$b_ok" ]; } || { [ -n "$mm" ] && [ "$r_ok" -lt "$m_ok" ]; } ||
        { [ -n "$old" ] && [ "$r_ok" -lt "$o_ok" ]; }; then
        echo "# LOST GROUND: $fam (roamc $r_ok, baseline ${base:+$b_ok}, MiniMalloc ${mm:+$m_ok}, old ${old:+$o_ok})" >&2
        lost=1
    fi
done
[ "$lost" = 0 ] && echo "# no family lost ground" || echo "# some family lost ground (see LOST GROUND above)"
exit "$lost"
