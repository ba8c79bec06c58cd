#!/usr/bin/env bash
# `cmake --install` of the build into PREFIX (emptied first), then checks the
# layout (docs/INSTALL.md) and that every installed tool reports VERSION with
# an empty environment.
# usage: install_prefix.sh BUILD_DIR PREFIX VERSION
set -euo pipefail
build=$1 prefix=$2 version=$3
fail() { echo "FAIL: $*" >&2; exit 1; }

rm -rf "$prefix"
cmake --install "$build" --prefix "$prefix" > "$prefix.log" || { cat "$prefix.log"; fail "cmake --install"; }

major=${version%%.*}
for f in include/kite/kite.h include/kite/kite.hpp include/kite/backend.h include/kite/version.h \
         include/kite/converter.h \
         "lib/libkite.so.$version" "lib/libkite_converter.so.$version" \
         lib/cmake/Kite/KiteConfig.cmake lib/cmake/Kite/KiteConfigVersion.cmake \
         lib/cmake/Kite/KiteTargets.cmake lib/cmake/Kite/KiteConverterTargets.cmake \
         lib/pkgconfig/kite.pc lib/pkgconfig/kite-converter.pc \
         share/doc/kite/README.md share/doc/kite/INSTALL.md share/doc/kite/PYTHON.md \
         share/doc/kite/examples/classify.c; do
  [ -f "$prefix/$f" ] || fail "$f is not installed"
done
[ -d "$prefix/lib/kite/backends" ] || fail "the plugin folder lib/kite/backends is missing"
# The SONAME and its symlinks: libkite.so -> libkite.so.MAJOR -> libkite.so.VERSION.
for lib in kite kite_converter; do
  [ "$(readlink "$prefix/lib/lib$lib.so")" = "lib$lib.so.$major" ] || fail "lib$lib.so link"
  [ "$(readlink "$prefix/lib/lib$lib.so.$major")" = "lib$lib.so.$version" ] || fail "lib$lib.so.$major link"
  soname=$(readelf -d "$prefix/lib/lib$lib.so.$version" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
  [ "$soname" = "lib$lib.so.$major" ] || fail "lib$lib SONAME is '$soname', expected lib$lib.so.$major"
done
grep -q "#define KITE_VERSION_STRING \"$version\"" "$prefix/include/kite/version.h" ||
  fail "include/kite/version.h does not say $version"
# A test-only plugin is never installed.
[ ! -e "$prefix/lib/kite/backends/libkite_backend_devsim.so" ] || fail "the test-only devsim plugin was installed"
# Every GPU plugin the build made is installed next to libkite's plugin folder.
for b in vulkan cuda; do
  if [ -e "$build/sdk/libkite_backend_$b.so" ]; then
    [ -e "$prefix/lib/kite/backends/libkite_backend_$b.so" ] || fail "the $b plugin was not installed"
  fi
done

for tool in kite-run kite-inspect kite-convert kite-plan-check; do
  out=$(env -i "$prefix/bin/$tool" --version) || fail "$tool --version failed"
  echo "$out"
  case "$out" in
    "$tool $version "*) ;;
    *) fail "$tool --version printed '$out', expected '$tool $version ...'" ;;
  esac
done
echo "installed into $prefix: OK"
