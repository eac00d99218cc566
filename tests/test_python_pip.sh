#!/bin/sh
# test_python_pip.sh BUILD_DIR SOURCE_DIR MODEL: the roamc Python package
# (planner/python) installed as a user would: libroamc by `cmake --install`
# into a fresh prefix, the package by `pip install --no-index
# --no-build-isolation --target SITE` with Debian's /usr/bin/python3 and its
# setuptools (offline), then imported from SITE outside the checkout: it
# finds the installed library through pkg-config, its plan equals the
# installed roamc's byte for byte, and roamc.torch finds the export.py
# bundled at install.  SKIP (77) without /usr/bin/python3, its pip or
# setuptools, or pkg-config.
set -u
. "$(dirname "$0")/lib.sh"
test_usage 3 3 "BUILD_DIR SOURCE_DIR MODEL.onnx" "$@"
build=$1 src=$2 model=$3
case $model in /*) ;; *) model=$(pwd)/$model ;; esac
py=/usr/bin/python3
[ -x "$py" ] || skip "no $py"
"$py" -m pip --version >/dev/null 2>&1 || skip "no pip for $py (Debian: python3-pip)"
"$py" -c "import setuptools" 2>/dev/null || skip "no setuptools for $py (Debian: python3-setuptools)"
command -v pkg-config >/dev/null 2>&1 || skip "no pkg-config"
work=$(mktemp -d) || fail_now "mktemp"
trap 'rm -rf "$work"' EXIT
prefix=$work/inst
cmake --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1 || { cat "$work/install.log"; fail_now "cmake --install"; }
libdir=$(dirname "$(find "$prefix" -name roamc.pc | head -1)")
libdir=${libdir%/pkgconfig}
# pip builds in the tree it is given: a copy, so the checkout stays clean
mkdir -p "$work/src/planner" "$work/src/models"
cp -R "$src/planner/python" "$work/src/planner/python" && cp "$src/models/export.py" "$work/src/models/" ||
    fail_now "copy planner/python"
rm -rf "$work/src/planner/python/build" "$work/src/planner/python/roamc.egg-info"
"$py" -m pip install --no-index --no-build-isolation --disable-pip-version-check --target "$work/site" \
    "$work/src/planner/python" >"$work/pip.log" 2>&1 || { cat "$work/pip.log"; fail_now "pip install"; }
[ -f "$work/site/roamc/__init__.py" ] && [ -f "$work/site/roamc/_export.py" ] ||
    fail_now "pip installed no roamc/__init__.py or roamc/_export.py in the target"
pass "pip install --no-index --no-build-isolation --target: $(ls "$work/site" | tr '\n' ' ')"

"$prefix/bin/roamc" "$model" -o "$work/cli.json" -q || fail_now "the installed roamc failed on $model"
cd "$work" || fail_now "cd"
out=$(env -u ROAMC_LIBRARY -u ROAMC_BUILD_DIR -u ROAMC_EXPORT_PY PYTHONPATH="$work/site" \
    PKG_CONFIG_PATH="$libdir/pkgconfig" "$py" -c '
import os, sys
import roamc
assert roamc.__file__.startswith(sys.argv[1]), roamc.__file__
assert os.path.realpath(roamc.library_path()).startswith(os.path.realpath(sys.argv[2])), roamc.library_path()
p = roamc.plan(sys.argv[3])
p.write("py.json")
print("peak %d bound %d library %s %s" % (p.peak, p.lower_bound, roamc.library_version(), roamc.library_path()))
try:
    import torch  # noqa: F401
except ImportError:
    print("no torch: roamc.torch not tried")
    sys.exit(0)
import roamc.torch
ex = roamc.torch._export_py()
assert ex.__file__.startswith(sys.argv[1]), ex.__file__
print("roamc.torch: exporter %s" % ex.__file__)
' "$work/site" "$prefix" "$model" 2>&1) || fail_now "import from the pip target: $out"
echo "$out"
cmp -s "$work/cli.json" "$work/py.json" || fail "the installed package's plan of $model differs from the installed roamc's"
pass "imported from the pip target with the installed libroamc (pkg-config); plan = roamc's"
case $out in *"no torch: roamc.torch not tried"*) skip_part "roamc.torch's exporter from the pip target (no torch)" ;; esac
test_finish test_python_pip
