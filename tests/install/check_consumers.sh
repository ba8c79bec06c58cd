#!/usr/bin/env bash
# Builds programs against the Kite installed in PREFIX, the way users do:
# tests/install/consumer with find_package(Kite), and the same sources with
# pkg-config (kite, kite-converter); then runs them:
#  - convert_c (converter C API) converts ONNX; the file must be byte for
#    byte the one the build tree's kite-convert wrote (REF_KITE);
#  - classify_c (the installed example) and classify_cpp (kite.hpp) on it must
#    print exactly what the build tree's example prints on REF_KITE.
# Also: find_package(Kite 1.0) must refuse a 0.x Kite.
# usage: check_consumers.sh PREFIX WORK VERSION ONNX REF_KITE REF_EXAMPLE
set -euo pipefail
prefix=$1 work=$2 version=$3 onnx=$4 ref_kite=$5 ref_example=$6
here=$(cd "$(dirname "$0")" && pwd)
fail() { echo "FAIL: $*" >&2; exit 1; }
rm -rf "$work"
mkdir -p "$work"

expected=$("$ref_example" "$ref_kite")
echo "build tree's example: $expected"

check_programs() {  # DIR: convert, then classify in C and C++
  local dir=$1 got
  "$dir/convert_c" "$onnx" "$dir/model.kite"
  cmp "$dir/model.kite" "$ref_kite" ||
    fail "$dir/convert_c wrote other bytes than kite-convert"
  for prog in classify_c classify_cpp; do
    got=$("$dir/$prog" "$dir/model.kite") || fail "$dir/$prog failed"
    [ "$got" = "$expected" ] || fail "$dir/$prog printed '$got', expected '$expected'"
    echo "$dir/$prog: $got"
  done
}

# ---- find_package(Kite) --------------------------------------------------
cmake -S "$here/consumer" -B "$work/cmake" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$prefix" > "$work/cmake.log" 2>&1 ||
  { cat "$work/cmake.log"; fail "configuring the consumer with find_package(Kite)"; }
grep "consumer: Kite" "$work/cmake.log"
grep -q "consumer: Kite $version from $prefix/" "$work/cmake.log" ||
  fail "find_package(Kite) did not find Kite $version in $prefix"
cmake --build "$work/cmake" > "$work/cmake-build.log" 2>&1 ||
  { cat "$work/cmake-build.log"; fail "building the consumer"; }
check_programs "$work/cmake"

if cmake -S "$here/consumer" -B "$work/cmake-v1" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
         -DKITE_WANTED_VERSION=1.0 > "$work/cmake-v1.log" 2>&1; then
  fail "find_package(Kite 1.0) accepted Kite $version"
fi
grep -q "version: $version" "$work/cmake-v1.log" ||
  { cat "$work/cmake-v1.log"; fail "find_package(Kite 1.0) failed for another reason"; }
echo "find_package(Kite 1.0) refuses Kite $version: OK"

# ---- pkg-config --------------------------------------------------------------
pcdir=$(dirname "$(find "$prefix" -name kite.pc | head -n 1)")
export PKG_CONFIG_PATH="$pcdir"
[ "$(pkg-config --modversion kite)" = "$version" ] || fail "kite.pc version"
[ "$(pkg-config --modversion kite-converter)" = "$version" ] || fail "kite-converter.pc version"
libdir=$(pkg-config --variable=libdir kite)
mkdir -p "$work/pkgconfig"
# The public headers must be warning-free C99 / C++17.
cc -std=c99 -pedantic -Wall -Wextra -Werror \
   "$prefix/share/doc/kite/examples/classify.c" -o "$work/pkgconfig/classify_c" \
   $(pkg-config --cflags --libs kite) -Wl,-rpath,"$libdir"
c++ -std=c++17 -Wall -Wextra -Werror "$here/consumer/classify.cpp" -o "$work/pkgconfig/classify_cpp" \
    $(pkg-config --cflags --libs kite) -Wl,-rpath,"$libdir"
cc -std=c99 -pedantic -Wall -Wextra -Werror "$here/consumer/convert.c" -o "$work/pkgconfig/convert_c" \
   $(pkg-config --cflags --libs kite-converter) -Wl,-rpath,"$libdir"
echo "pkg-config: $(pkg-config --cflags --libs kite)"
check_programs "$work/pkgconfig"
echo "consumers against $prefix: OK"
