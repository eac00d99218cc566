#!/bin/bash
# test_svg.sh ROAMC MODEL WORKDIR [FIT_MODEL]
#
# The --svg picture of MODEL's plan must be well-formed XML, smaller than 2 MB,
# load in headless Chromium without an XML error, and render to a screenshot
# that is not blank (enough non-white pixels, at least 3 colours). When
# `ROAMC MODEL --compare --svg FILE` is supported, its picture is checked the
# same way. The SVGs and screenshots stay in WORKDIR for a look.
#
# Fitted steps (issue 27): FIT_MODEL (default: bert-base_b32.onnx beside
# MODEL) planned with --fit at $fit_budget (recompute and offload) and with
# --fit=offload at $offload_budget; each picture is checked as above and must
# have the legend entries "recomputed" and "reloaded from host", at least one
# marked rectangle of the kind the fit made (recomputed with --fit, reloaded
# and no recomputed with --fit=offload) and a host note naming as many
# buffers as the plan's host_buffers.  The unfitted pictures must have none
# of these.  With SVG_BASE_ROAMC set (a build from before the marks), the
# unfitted picture of MODEL must be byte-identical to that build's.
#
# Exit status: 0 pass, 1 fail, 2 bad usage, 77 skip (no Chromium; "SKIP: ..." on stdout).
# Chromium: $CHROMIUM, else chromium, chromium-browser or google-chrome on PATH.
# Ends within $SVG_TEST_BUDGET s (default 240: a guard against hangs, not a speed
# check) and leaves no Chromium process behind.
set -u
. "$(dirname "$0")/lib.sh"
test_usage 3 4 "ROAMC MODEL WORKDIR [FIT_MODEL]" "$@"
roamc=$1 model=$2 work=$3
fit_model=${4:-$(dirname "$model")/bert-base_b32.onnx}
fit_budget=3683341312           # bert-base_b32: forces recompute and offload
offload_budget=4000000000       # bert-base_b32: offload alone reaches it
budget=${SVG_TEST_BUDGET:-240}  # seconds for the whole test: a hang guard, not a speed check
max_svg_bytes=2000000           # "smaller than 2 MB"
min_ink_permille=20             # at least 2% of the screenshot not white
time_limit=${SVG_TEST_TIME_LIMIT:-5}
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3) || fail_now "no python3"

browser=${CHROMIUM:-}
if [ -z "$browser" ]; then
    for b in chromium chromium-browser google-chrome; do
        if command -v "$b" >/dev/null 2>&1; then browser=$(command -v "$b"); break; fi
    done
fi
if [ -z "$browser" ] || [ ! -x "$browser" ]; then
    skip "no headless Chromium (install chromium or set CHROMIUM)"
fi

mkdir -p "$work" || fail_now "cannot create $work"
work=$(cd "$work" && pwd)
tmp=$(mktemp -d) || fail_now "mktemp"
start=$SECONDS
pgids=()

# Ends whatever is left of the Chromium process groups started here, and any
# process whose command line names this run's private profile folder.
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
    local g p
    for g in "${pgids[@]}"; do
        kill -KILL -- "-$g" 2>/dev/null
    done
    for p in /proc/[0-9]*; do
        if tr '\0' ' ' 2>/dev/null < "$p/cmdline" | grep -qF -- "$tmp/profile"; then
            kill -KILL "${p#/proc/}" 2>/dev/null
        fi
    done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

remaining() {
    local r=$((budget - (SECONDS - start)))
    [ "$r" -gt 1 ] && echo "$r" || echo 1
}

# chrome OUTFILE ARGS...: one headless Chromium run in its own process group,
# with a fresh profile, killed when it outlives its share of the budget.
chrome() {
    local out=$1; shift
    local limit; limit=$(remaining)
    [ "$limit" -gt 15 ] && limit=15
    rm -rf "$tmp/profile"; mkdir -p "$tmp/profile" "$tmp/home"
    HOME=$tmp/home XDG_CONFIG_HOME=$tmp/home XDG_CACHE_HOME=$tmp/home \
    setsid timeout -k 2 "$limit" "$browser" --headless --no-sandbox --disable-gpu \
        --disable-quic --no-first-run --disable-background-networking \
        --disable-component-update --disable-sync --disable-extensions \
        --user-data-dir="$tmp/profile" "$@" > "$out" 2> "$tmp/chrome.err" &
    local pid=$!
    pgids+=("$pid")
    wait "$pid"
    local rc=$?
    kill -KILL -- "-$pid" 2>/dev/null   # helpers that outlived the browser
    return $rc
}

# check_svg NAME: WORKDIR/NAME.svg is well-formed, small, loads, and draws.
check_svg() {
    local name=$1
    local svg=$work/$name.svg png=$work/$name.png
    local size
    size=$(stat -c %s "$svg" 2>/dev/null) || { fail "$name.svg was not written"; return; }
    if [ "$size" -ge "$max_svg_bytes" ]; then
        fail "$name.svg is $size bytes (limit $max_svg_bytes)"
    fi
    local info
    if ! info=$("$py" - "$svg" <<'PY'
import sys
import xml.etree.ElementTree as ET
try:
    root = ET.parse(sys.argv[1]).getroot()
except ET.ParseError as e:
    print("not well-formed XML: %s" % e)
    sys.exit(1)
if root.tag != "{http://www.w3.org/2000/svg}svg":
    print("root element is %s, not an SVG <svg>" % root.tag)
    sys.exit(1)
n = sum(1 for _ in root.iter())
print("%d elements, %s x %s" % (n, root.get("width"), root.get("height")))
PY
    ); then
        fail "$name.svg: $info"
        return
    fi
    echo "$name.svg: $size bytes, $info"

    # Load errors: Chromium shows an XML error as a <parsererror> in the DOM.
    local rc=0
    chrome "$tmp/dom.html" --dump-dom "file://$svg" || rc=$?
    if [ "$rc" -ne 0 ]; then
        fail "$name.svg: chromium --dump-dom failed (exit $rc): $(tail -n 3 "$tmp/chrome.err")"
        return
    fi
    if grep -qiE '<parsererror|This page contains the following errors' "$tmp/dom.html"; then
        fail "$name.svg: Chromium reports an XML error: $(grep -oiE 'error on line[^<]*' "$tmp/dom.html" | head -n 1)"
    elif ! grep -qi '<svg' "$tmp/dom.html"; then
        fail "$name.svg: Chromium's DOM has no <svg> element"
    fi

    rm -f "$png"
    chrome "$tmp/shot.log" --hide-scrollbars --window-size=1400,1000 \
        --screenshot="$png" "file://$svg" || rc=$?
    if [ "$rc" -ne 0 ]; then
        fail "$name.svg: chromium --screenshot failed (exit $rc): $(tail -n 3 "$tmp/chrome.err")"
        return
    fi
    [ -s "$png" ] || { fail "$name.svg: no screenshot written"; return; }
    if ! info=$("$py" - "$png" "$min_ink_permille" <<'PY'
# Decodes the PNG with zlib alone; counts non-white pixels and distinct colours.
import struct, sys, zlib
path, min_permille = sys.argv[1], int(sys.argv[2])
data = open(path, "rb").read()
if data[:8] != b"\x89PNG\r\n\x1a\n":
    print("not a PNG"); sys.exit(1)
pos, idat, ihdr = 8, [], None
while pos + 8 <= len(data):
    length, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + length]
    if kind == b"IHDR":
        ihdr = struct.unpack(">IIBBBBB", body)
    elif kind == b"IDAT":
        idat.append(body)
    elif kind == b"IEND":
        break
    pos += 12 + length
if ihdr is None or not idat:
    print("PNG without IHDR or IDAT"); sys.exit(1)
w, h, depth, ctype, _, _, interlace = ihdr
channels = {0: 1, 2: 3, 4: 2, 6: 4}.get(ctype)
if depth != 8 or channels is None or interlace != 0:
    print("unsupported PNG (depth %d, colour type %d, interlace %d)" % (depth, ctype, interlace))
    sys.exit(1)
raw = zlib.decompress(b"".join(idat))
bpp, stride = channels, w * channels
if len(raw) != h * (stride + 1):
    print("PNG data has %d bytes, expected %d" % (len(raw), h * (stride + 1))); sys.exit(1)
prev = bytearray(stride)
ink, colours = 0, set()
for y in range(h):
    f = raw[y * (stride + 1)]
    line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    if f == 1:
        for i in range(bpp, stride):
            line[i] = (line[i] + line[i - bpp]) & 255
    elif f == 2:
        line = bytearray((a + b) & 255 for a, b in zip(line, prev))
    elif f == 3:
        for i in range(stride):
            left = line[i - bpp] if i >= bpp else 0
            line[i] = (line[i] + ((left + prev[i]) >> 1)) & 255
    elif f == 4:
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            pr = a if (pa <= pb and pa <= pc) else (b if pb <= pc else c)
            line[i] = (line[i] + pr) & 255
    elif f != 0:
        print("bad PNG filter %d in row %d" % (f, y)); sys.exit(1)
    row = bytes(line)
    if ctype in (2, 6):
        px = [row[i:i + 3] for i in range(0, stride, bpp)]
        white = b"\xff\xff\xff"
    else:
        px = [row[i:i + 1] for i in range(0, stride, bpp)]
        white = b"\xff"
    colours.update(px)
    ink += len(px) - px.count(white)
    prev = line
permille = 1000 * ink // (w * h)
print("%dx%d, %d non-white pixels (%.1f%%), %d colours" % (w, h, ink, 100.0 * ink / (w * h),
                                                          len(colours)))
if permille < min_permille:
    print("screenshot is (nearly) blank"); sys.exit(1)
if len(colours) < 3:
    print("fewer than 3 colours"); sys.exit(1)
PY
    ); then
        fail "$name.png: $(echo "$info" | tr '\n' ' ')"
        return
    fi
    echo "$name.png: $info"
}

# roamc's default order may search for minutes; where roamc has --time-limit,
# both runs get a short one (SVG_TEST_TIME_LIMIT, default 5 s).
limit_args=()
if "$roamc" --help 2>&1 | grep -qE '^[[:space:]]*--time-limit'; then
    limit_args=(--time-limit "$time_limit")
fi

# 1. The plan's picture.
rm -f "$work/plan.svg" "$work/compare.svg"
if ! timeout -k 2 "$(remaining)" "$roamc" "$model" "${limit_args[@]}" --svg "$work/plan.svg" -q \
        > "$tmp/roamc.out" 2>&1; then
    fail_now "$roamc $model --svg failed: $(tail -n 3 "$tmp/roamc.out")"
fi
check_svg plan

# check_marks NAME PLAN KIND: the marks of WORKDIR/NAME.svg (KIND: none,
# both or offload; see the header); PLAN is the plan's JSON ("" for none).
check_marks() {
    local name=$1 plan=$2 kind=$3 info
    if ! info=$("$py" - "$work/$name.svg" "$plan" "$kind" <<'PY'
import json, re, sys
import xml.etree.ElementTree as ET
svg, plan, kind = sys.argv[1:4]
ns = "{http://www.w3.org/2000/svg}"
root = ET.parse(svg).getroot()
legend = [g for g in root.iter(ns + "g") if g.get("class") == "axis"]
if len(legend) != 1:
    print("expected one legend group, found %d" % len(legend)); sys.exit(1)
legend_text = [t.text or "" for t in legend[0].iter(ns + "text")]
panels = [g for g in root if g.tag == ns + "g" and g.get("class") != "axis"]
marked = {"r": 0, "l": 0}
notes = []
for g in panels:
    for r in g.iter(ns + "rect"):
        if r.get("class") in marked:
            marked[r.get("class")] += 1
    notes += [t.text or "" for t in g.iter(ns + "text") if "host:" in (t.text or "")]
has_legend = ("recomputed" in legend_text, "reloaded from host" in legend_text)
problems = []
if kind == "none":
    if any(has_legend): problems.append("legend has fit entries")
    if marked["r"] or marked["l"]: problems.append("marked rectangles %s" % marked)
    if notes: problems.append("host note %r" % notes[0])
else:
    if not all(has_legend):
        problems.append("legend lacks 'recomputed' or 'reloaded from host': %s" % legend_text)
    if kind == "both" and not marked["r"]: problems.append("no recomputed rectangle")
    if kind == "offload":
        if not marked["l"]: problems.append("no reloaded rectangle")
        if marked["r"]: problems.append("%d recomputed rectangles, fit was offload" % marked["r"])
    n_host = len(json.load(open(plan)).get("host_buffers", []))
    m = re.search(r"host: .* in (\d+) buffers", notes[0]) if len(notes) == 1 else None
    if not n_host: problems.append("the plan has no host_buffers")
    elif not m or int(m.group(1)) != n_host:
        problems.append("host note %r does not name the plan's %d host buffers" % (notes, n_host))
if problems:
    print("; ".join(problems)); sys.exit(1)
print("%d recomputed and %d reloaded rectangles; %s" % (marked["r"], marked["l"],
      notes[0] if notes else "no host note"))
PY
    ); then
        fail "$name.svg marks: $info"
        return
    fi
    echo "$name.svg marks: $info"
}
check_marks plan "" none

if [ -n "${SVG_BASE_ROAMC:-}" ]; then
    if timeout -k 2 "$(remaining)" "$SVG_BASE_ROAMC" "$model" "${limit_args[@]}" \
            --svg "$work/plan_base.svg" -q > "$tmp/base.out" 2>&1; then
        if cmp -s "$work/plan.svg" "$work/plan_base.svg"; then
            echo "plan.svg: byte-identical to $SVG_BASE_ROAMC's"
        else
            fail "plan.svg differs from $SVG_BASE_ROAMC's picture (plan_base.svg)"
        fi
    else
        fail "$SVG_BASE_ROAMC $model --svg failed: $(tail -n 3 "$tmp/base.out")"
    fi
fi

# 2. The --compare picture, where roamc has --compare.
rc=0
timeout -k 2 "$(remaining)" "$roamc" "$model" --compare --time-limit "$time_limit" \
    --svg "$work/compare.svg" -q > "$tmp/compare.out" 2>&1 || rc=$?
if [ "$rc" -eq 0 ]; then
    check_svg compare
    check_marks compare "" none
elif [ "$rc" -eq 2 ] && ! "$roamc" --help 2>&1 | grep -q -- '--compare'; then
    skip_part "$roamc has no --compare; compare picture not checked"
else
    fail "$roamc $model --compare --svg failed (exit $rc): $(tail -n 3 "$tmp/compare.out")"
fi

# 3. Fitted steps: recompute and offload, and offload alone.
if [ ! -f "$fit_model" ]; then
    fail "fit model $fit_model not found"
else
    for fit in both offload; do
        args=(--fit --budget "$fit_budget")
        [ $fit = offload ] && args=(--fit=offload --budget "$offload_budget")
        rm -f "$work/fit_$fit.svg"
        if timeout -k 2 "$(remaining)" "$roamc" "$fit_model" "${limit_args[@]}" "${args[@]}" \
                --emit-train "$work/fit_$fit.onnx" -o "$work/fit_$fit.json" \
                --svg "$work/fit_$fit.svg" -q > "$tmp/fit.out" 2>&1; then
            check_svg "fit_$fit"
            check_marks "fit_$fit" "$work/fit_$fit.json" $fit
        else
            fail "$roamc $fit_model ${args[*]} --svg failed: $(tail -n 3 "$tmp/fit.out")"
        fi
    done
fi

echo "elapsed: $((SECONDS - start)) s"
test_finish "test_svg ($model)"
