#!/bin/sh
# test_python_pip.sh BUILD_DIR SOURCE_DIR MODEL: the roamc Python package
# (planner/python) installed as a user would: libroamc by `cmake --install`
# into a fresh prefix, the package by `pip install --no-index
# --no-build-isolation --target SITE` with Debian's /usr/bin/python3 and its
# setuptools (offline), then imported from SITE outside the checkout with
# neither PKG_CONFIG_PATH nor ROAMC_LIBRARY (issue 39): it loads the library
# pip recorded at install (found then through pkg-config; a second pip
# install, without PKG_CONFIG_PATH, records the one the checkout's
# install_manifest.txt names), its plan equals the installed roamc's byte
# for byte, and roamc.torch finds the export.py bundled at install.  The
# README's own pip line runs as written (its --user install redirected with
# PYTHONUSERBASE) and roamc imports from there with the installed library.  SKIP (77) without /usr/bin/python3, its pip or
# setuptools, or pkg-config.
set -u
. "$(dirname "$0")/lib.sh"
test_usage 3 3 "BUILD_DIR SOURCE_DIR MODEL.onnx" "$@"
build=$1 src=$2 model=$3
case $model in /*) ;; *) model=$(pwd)/$model ;; esac
case $src in /*) ;; *) src=$(pwd)/$src ;; esac
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
# pip_install SITE VAR=VALUE...: pip install --target SITE from the copy, in an environment
# with VAR=VALUE and without the variables the package reads
pip_install() {
    _site=$1
    shift
    rm -rf "$work/src/planner/python/build"
    env -u ROAMC_LIBRARY -u ROAMC_BUILD_DIR -u PKG_CONFIG_PATH "$@" "$py" -m pip install --no-index \
        --no-build-isolation --disable-pip-version-check --target "$_site" "$work/src/planner/python" \
        >"$work/pip.log" 2>&1 || { cat "$work/pip.log"; fail_now "pip install"; }
}
pip_install "$work/site" PKG_CONFIG_PATH="$libdir/pkgconfig"
[ -f "$work/site/roamc/__init__.py" ] && [ -f "$work/site/roamc/_export.py" ] ||
    fail_now "pip installed no roamc/__init__.py or roamc/_export.py in the target"
pass "pip install --no-index --no-build-isolation --target: $(ls "$work/site" | tr '\n' ' ')"

"$prefix/bin/roamc" "$model" -o "$work/cli.json" -q || fail_now "the installed roamc failed on $model"
cd "$work" || fail_now "cd"
out=$(env -u ROAMC_LIBRARY -u ROAMC_BUILD_DIR -u ROAMC_EXPORT_PY -u PKG_CONFIG_PATH -u LD_LIBRARY_PATH \
    PYTHONPATH="$work/site" "$py" -c '
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
pass "imported from the pip target, no PKG_CONFIG_PATH: the libroamc recorded at install; plan = roamc's"

# the README's pip command as written (Debian 12's pip refuses a plain install beside apt's
# packages, PEP 668): run in the copy, its --user install redirected by PYTHONUSERBASE
readme_pip=$(grep -m1 '^/usr/bin/python3 -m pip install' "$src/README.md")
[ -n "$readme_pip" ] || fail_now "no '/usr/bin/python3 -m pip install' line in README.md"
(cd "$work/src" && env -u ROAMC_LIBRARY -u ROAMC_BUILD_DIR PYTHONUSERBASE="$work/userbase" \
    PKG_CONFIG_PATH="$libdir/pkgconfig" sh -c "$readme_pip") >"$work/readme_pip.log" 2>&1 ||
    fail "the README's '$readme_pip': $(grep -i error "$work/readme_pip.log" | head -2)"
# (as a user runs it: with the user site that --user installs into, which ctest and .ci/run
# turn off for every other command with PYTHONNOUSERSITE=1)
got=$(cd "$work" && env -u ROAMC_LIBRARY -u ROAMC_BUILD_DIR -u PKG_CONFIG_PATH -u PYTHONPATH -u PYTHONNOUSERSITE \
    PYTHONUSERBASE="$work/userbase" "$py" -c 'import roamc; print(roamc.__file__, roamc.library_path())' 2>&1)
case $got in "$work/userbase/"*" $libdir/libroamc.so") pass "the README's pip command installs; import roamc: $got" ;;
    *) fail "after the README's pip command, import roamc gives '$got'" ;; esac

# the checkout's last `cmake --install` (CMake's install_manifest.txt in its build tree), when
# pip runs without PKG_CONFIG_PATH: written here for this prefix (the shared build tree's own
# manifest is rewritten by every test that installs from it)
mkdir -p "$work/src/build" && find "$prefix" >"$work/src/build/install_manifest.txt"
pip_install "$work/site2"
got=$(env -u ROAMC_LIBRARY -u ROAMC_BUILD_DIR -u PKG_CONFIG_PATH -u LD_LIBRARY_PATH PYTHONPATH="$work/site2" \
    "$py" -c 'import roamc; print(roamc.library_path())' 2>&1)
case $got in "$libdir"/libroamc.so) ;; *) fail "pip without PKG_CONFIG_PATH, the manifest naming $libdir: loads '$got'" ;; esac
pass "pip without PKG_CONFIG_PATH records the library the checkout installed last: $got"
case $out in *"no torch: roamc.torch not tried"*) skip_part "roamc.torch's exporter from the pip target (no torch)" ;; esac
test_finish test_python_pip
