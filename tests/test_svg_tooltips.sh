#!/bin/bash
# test_svg_tooltips.sh ROAMC MODEL WORKDIR
#
# The --svg picture's tooltips and kind legend (issue 29): every block of the
# layout (a storage drawn alone, or a run of merged sub-pixel storages) carries
# a <title> naming a tensor, its size in bytes, its kind, its lifetime in steps
# and its maker; a block's colour class is its title's kind (planner/peak.c's
# classes: the same as the report's "live at peak" kinds); the legend shows a
# swatch for each kind drawn.  Then headless Chromium loads the picture inlined
# in a page whose script asks, at the centre of each block, which element the
# pointer would be over (document.elementFromPoint) and reads the <title> the
# browser would show: every block must be hit and give its tooltip.
#
# Exit status: 0 pass, 1 fail, 2 bad usage, 77 skip (no Chromium, or no
# /usr/bin/python3).  Chromium: $CHROMIUM, else chromium, chromium-browser or
# google-chrome on PATH.  Leaves no Chromium process behind.
set -u
. "$(dirname "$0")/lib.sh"
test_usage 3 3 "ROAMC MODEL WORKDIR" "$@"
roamc=$1 model=$2 work=$3
py=/usr/bin/python3
[ -x "$py" ] || skip "no /usr/bin/python3"
browser=${CHROMIUM:-}
if [ -z "$browser" ]; then
    for b in chromium chromium-browser google-chrome; do
        if command -v "$b" >/dev/null 2>&1; then browser=$(command -v "$b"); break; fi
    done
fi
[ -n "$browser" ] && [ -x "$browser" ] || skip "no headless Chromium (install chromium or set CHROMIUM)"
rm -rf "$work" && mkdir -p "$work" || fail_now "cannot create $work"
work=$(cd "$work" && pwd)
tmp=$(mktemp -d) || fail_now "mktemp"
pgid=
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
    [ -n "$pgid" ] && kill -KILL -- "-$pgid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

"$roamc" "$model" --order program -q -o "$work/plan.json" --svg "$work/plan.svg" ||
    fail_now "$roamc $model --svg failed"
size=$(stat -c %s "$work/plan.svg")
[ "$size" -lt 2000000 ] || fail "plan.svg is $size bytes (limit 2 MB)"

# 1. The file: a title per block, its class its kind, the legend's swatches.
"$py" - "$work/plan.svg" "$work/page.html" <<'PY' || fail "tooltips in plan.svg"
import re, sys
import xml.etree.ElementTree as ET
svg, page = sys.argv[1:3]
ns = "{http://www.w3.org/2000/svg}"
root = ET.parse(svg).getroot()
kinds = {"p": "parameter", "g": "gradient", "m": "optimizer state", "s": "saved activation",
         "t": "temporary", "i": "input", "o": "output"}
legend = [g for g in root.iter(ns + "g") if g.get("class") == "axis"][0]
swatches = {r.get("class") for r in legend.iter(ns + "rect")}
texts = [t.text for t in legend.iter(ns + "text")]
blocks = [r for g in root if g.tag == ns + "g" and g.get("class") != "axis"
          for r in g.iter(ns + "rect") if r.get("class") not in ("frame", None)]
shape = re.compile(r"^(storages under 3 px merged; the largest: )?(.+): [0-9.]+ [KMG]iB \(\d+ B\), "
                   r"(parameter|gradient|optimizer state|saved activation|temporary|input|output); "
                   r"steps (\d+)-(\d+) \((\d+) steps\); (made by .+ \(#\d+\)|an initializer|a graph input)$")
bad, drawn, merged = [], 0, 0
for r in blocks:
    t = r.find(ns + "title")
    if t is None or not t.text:
        bad.append("block at x=%s y=%s has no title" % (r.get("x"), r.get("y"))); continue
    m = shape.match(t.text)
    if not m:
        bad.append("title %r is not 'tensor: size (B), kind; steps a-b (n steps); maker'" % t.text); continue
    merged += bool(m.group(1))
    drawn += not m.group(1)
    if int(m.group(5)) - int(m.group(4)) + 1 != int(m.group(6)):
        bad.append("title %r: lifetime does not add up" % t.text)
    c = r.get("class")
    if c in kinds and kinds[c] != m.group(3):
        bad.append("block of class %s (%s) titled %r" % (c, kinds[c], m.group(3)))
    if c not in swatches:
        bad.append("class %s has no legend swatch" % c)
for c in swatches:
    if c in kinds and kinds[c] not in texts:
        bad.append("legend swatch %s lacks its label %r" % (c, kinds[c]))
if not blocks:
    bad.append("no blocks")
for b in bad[:10]:
    print(b)
if bad:
    sys.exit(1)
print("ok   plan.svg: %d blocks with tooltips (%d storages drawn alone, %d merged runs); legend: %s"
      % (len(blocks), drawn, merged, ", ".join(t for t in texts if t in kinds.values())))
# the page Chromium checks: the picture inlined, a script that hovers every block
body = open(svg).read().split("?>", 1)[1]
open(page, "w").write("""<!DOCTYPE html><html><body style="margin:0">%s
<pre id="result"></pre><script>
const svg = document.querySelector("svg");
const blocks = [...svg.querySelectorAll("g > rect")].filter(r => r.querySelector("title"));
let hit = 0, shown = 0, miss = [];
for (const r of blocks) {
  const b = r.getBoundingClientRect();
  const e = document.elementFromPoint(b.left + b.width / 2, b.top + b.height / 2);
  const t = e && e.querySelector ? e.querySelector(":scope > title") : null;
  if (e === r) hit++;
  if (t && t.textContent.length > 0) shown++; else if (miss.length < 5) miss.push(r.outerHTML.slice(0, 120));
}
document.getElementById("result").textContent =
  "RESULT " + JSON.stringify({blocks: blocks.length, hit: hit, shown: shown, miss: miss});
</script></body></html>""" % body)
PY

# 2. Chromium: at each block's centre the pointer is over a block with a tooltip.
rm -rf "$tmp/profile" && mkdir -p "$tmp/profile" "$tmp/home"
HOME=$tmp/home XDG_CONFIG_HOME=$tmp/home XDG_CACHE_HOME=$tmp/home \
setsid timeout -k 2 30 "$browser" --headless --no-sandbox --disable-gpu --disable-quic \
    --no-first-run --disable-background-networking --disable-component-update --disable-sync \
    --disable-extensions --user-data-dir="$tmp/profile" --window-size=1400,2000 \
    --dump-dom "file://$work/page.html" > "$work/dom.html" 2> "$tmp/chrome.err" &
pgid=$!
wait "$pgid"
rc=$?
kill -KILL -- "-$pgid" 2>/dev/null
pgid=
if [ "$rc" -ne 0 ]; then
    fail "chromium --dump-dom failed (exit $rc): $(tail -n 3 "$tmp/chrome.err")"
else
    "$py" - "$work/dom.html" <<'PY' || fail "Chromium's tooltips"
import json, re, sys
m = re.search(r"RESULT (\{.*\})", open(sys.argv[1]).read())
if not m:
    sys.exit("the page's script left no result (did Chromium run it?)")
r = json.loads(m.group(1).replace("&quot;", '"'))
print("     Chromium: %d blocks, %d hit at their centre, %d give a tooltip there" % (r["blocks"], r["hit"], r["shown"]))
if r["blocks"] == 0 or r["shown"] != r["blocks"]:
    sys.exit("blocks without a tooltip under the pointer: %s" % r["miss"])
PY
fi
test_finish "test_svg_tooltips ($(basename "$model"))"
