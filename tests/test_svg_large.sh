#!/usr/bin/env bash
# The --svg picture stays small and well-formed for 12,000 storages (sub-pixel
# rectangles merged): a generated chain model, since no committed model has
# 10,000+ storages.  Chromium rendering is test_svg's job.
# usage: test_svg_large.sh ROAMC WORK_DIR; exit 77 without python3-onnx.
set -u
. "$(dirname "$0")/lib.sh"
test_usage 2 2 "ROAMC WORK_DIR" "$@"
roamc=$1 work=$2
here=$(cd "$(dirname "$0")" && pwd)
/usr/bin/python3 -c 'import onnx' 2>/dev/null || skip "needs /usr/bin/python3 with python3-onnx"
rm -rf "$work" && mkdir -p "$work" || fail_now "cannot make $work"
/usr/bin/python3 "$here/gen_chain_model.py" 12000 "$work/chain.onnx" || fail_now "generator"
"$roamc" "$work/chain.onnx" -q -o "$work/chain.json" --svg "$work/chain.svg" || fail_now "roamc"
"$roamc" check "$work/chain.onnx" "$work/chain.json" > /dev/null || fail "roamc check"
/usr/bin/python3 - "$work/chain.svg" <<'PY' || fail "the picture of 12,000 storages"
import os, sys
import xml.etree.ElementTree as ET
path = sys.argv[1]
size = os.path.getsize(path)
root = ET.parse(path).getroot()
n = sum(1 for _ in root.iter())
print("chain.svg: %d bytes, %d elements" % (size, n))
if size > 2000000 or n > 20000:
    sys.exit("FAIL: picture too large for 12,000 storages")
if "12001 storages" not in open(path).read():
    sys.exit("FAIL: caption does not count the storages")
PY
test_finish test_svg_large
