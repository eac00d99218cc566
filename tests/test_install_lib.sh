#!/bin/sh
# test_install_lib.sh BUILD_DIR SOURCE_DIR MODEL: the library part of `cmake --install` into a fresh
# prefix, then the examples (planner/api/examples) built against the
# *installed* library three ways and run: pkg-config (shared), pkg-config
# --static (libroamc.a, no libroamc.so needed at run time), and
# find_package(roamc) with CMake.  Also: the files installed, the shared
# library's SONAME, and that it exports roamc_* symbols only.
set -u
. "$(dirname "$0")/lib.sh"
test_usage 3 3 "BUILD_DIR SOURCE_DIR MODEL.onnx" "$@"
build=$1 src=$2 model=$3
command -v pkg-config >/dev/null 2>&1 || skip "no pkg-config"
cc=${CC:-cc}
command -v "$cc" >/dev/null 2>&1 || skip "no C compiler ($cc)"
work=$(mktemp -d) || fail_now "mktemp"
trap 'rm -rf "$work"' EXIT
prefix=$work/inst
cmake --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1 || { cat "$work/install.log"; fail_now "cmake --install"; }
libdir=$(dirname "$(find "$prefix" -name roamc.pc | head -1)")
libdir=${libdir%/pkgconfig}
for f in "$prefix/bin/roamc" "$prefix/include/roamc.h" "$libdir/libroamc.a" "$libdir/pkgconfig/roamc.pc" \
         "$libdir/cmake/roamc/roamcConfig.cmake" "$libdir/cmake/roamc/roamcConfigVersion.cmake"; do
    [ -f "$f" ] || fail "not installed: ${f#"$prefix"/}"
done
so=$(find "$libdir" -name 'libroamc.so.*.*.*' | head -1)
[ -n "$so" ] || fail_now "no libroamc.so.X.Y.Z in $libdir"
soname=$(readelf -d "$so" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
[ -e "$libdir/$soname" ] && [ -e "$libdir/libroamc.so" ] || fail "SONAME $soname or libroamc.so link missing"
others=$(nm -D --defined-only "$so" | awk '{print $3}' | grep -v '^roamc_' | tr '\n' ' ')
[ -z "$others" ] || fail "libroamc.so exports symbols other than roamc_*: $others"
pass "installed: bin/roamc, roamc.h, $(basename "$so") (SONAME $soname, $(nm -D --defined-only "$so" | wc -l) symbols, all roamc_*), libroamc.a, roamc.pc, the CMake package"

export PKG_CONFIG_PATH="$libdir/pkgconfig"
ex=$src/planner/api/examples
# shellcheck disable=SC2046
"$cc" -Wall -Werror -o "$work/buf_shared" "$ex/plan_buffers.c" $(pkg-config --cflags --libs roamc) &&
    "$cc" -Wall -Werror -o "$work/model_shared" "$ex/plan_model.c" $(pkg-config --cflags --libs roamc) ||
    fail_now "build against the shared library (pkg-config --libs roamc)"
static_libs=$(pkg-config --libs --static roamc | sed "s#-lroamc\\b#$libdir/libroamc.a#")
# shellcheck disable=SC2046,SC2086
"$cc" -Wall -Werror -o "$work/buf_static" "$ex/plan_buffers.c" $(pkg-config --cflags roamc) $static_libs &&
    "$cc" -Wall -Werror -o "$work/model_static" "$ex/plan_model.c" $(pkg-config --cflags roamc) $static_libs ||
    fail_now "static link with pkg-config --libs --static roamc"
readelf -d "$work/model_static" | grep -q 'libroamc' && fail "the static build still needs libroamc.so"
cmake -S "$ex" -B "$work/cm" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_COMPILER="$cc" >"$work/cmake.log" 2>&1 &&
    cmake --build "$work/cm" >>"$work/cmake.log" 2>&1 || { cat "$work/cmake.log"; fail_now "find_package(roamc)"; }
pass "examples built: pkg-config shared, pkg-config --static, find_package(roamc)"
runpath=$(readelf -d "$work/model_shared" | sed -n 's/.*R\(UN\)\{0,1\}PATH.*\[\(.*\)\]/\2/p')
[ -n "$runpath" ] || fail "the program linked with pkg-config --libs roamc under $prefix has no rpath"
# under a system library directory roamc.pc adds no rpath (Debian policy; the loader finds it)
DESTDIR=$work/dest cmake --install "$build" --prefix /usr >"$work/install_usr.log" 2>&1 ||
    { cat "$work/install_usr.log"; fail_now "DESTDIR=... cmake --install --prefix /usr"; }
syspc=$(find "$work/dest/usr" -name roamc.pc | head -1)
grep -q '^Libs:.*rpath' "$syspc" && fail "roamc.pc installed under /usr has an rpath: $(grep '^Libs:' "$syspc")"
pass "roamc.pc: rpath $runpath under $prefix; none under /usr ($(grep '^Libs:' "$syspc"))"

# run as a user would: no LD_LIBRARY_PATH (issue 39: a custom prefix exited 127, libroamc.so.0.1
# not found); roamc.pc's rpath, CMake's build rpath and the static link find the library
for kind in shared static cmake; do
    case $kind in
        shared) b=$work/buf_shared m=$work/model_shared ;;
        static) b=$work/buf_static m=$work/model_static ;;
        cmake) b=$work/cm/plan_buffers m=$work/cm/plan_model ;;
    esac
    env -u LD_LIBRARY_PATH "$b" >"$work/buf_$kind.out" 2>&1 || { cat "$work/buf_$kind.out"; fail "plan_buffers ($kind)"; }
    env -u LD_LIBRARY_PATH "$m" "$model" "$work/plan_$kind.json" threads=2 >"$work/model_$kind.out" 2>&1 ||
        { cat "$work/model_$kind.out"; fail "plan_model ($kind)"; }
done
cmp -s "$work/buf_shared.out" "$work/buf_static.out" && cmp -s "$work/buf_shared.out" "$work/buf_cmake.out" ||
    fail "plan_buffers prints different layouts"
grep -q '^input .*offset *0 ' "$work/buf_shared.out" || fail "the pinned input is not at 0"
"$prefix/bin/roamc" "$model" --threads 2 -q -o "$work/plan_cli.json" || fail "installed roamc"
for kind in shared static cmake; do
    cmp -s "$work/plan_cli.json" "$work/plan_$kind.json" || fail "plan_model ($kind): not roamc's plan"
done
pass "examples ran: the buffer layout alike three ways, $(basename "$model")'s plan = the installed roamc's"
sed 's/^/  /' "$work/buf_shared.out"
test_finish test_install_lib
