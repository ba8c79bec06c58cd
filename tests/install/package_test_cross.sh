#!/usr/bin/env bash
# A cross build's Debian packages (the aarch64 preset's, arm64), what
# package_test.sh checks of a native build's where it applies here: cpack
# makes them, dpkg-deb -f shows the target's architecture, the version and
# dependencies listed without dpkg-shlibdeps (cmake/KiteCPack.cmake), the
# packages are exactly those of a build without the converter (no
# libkite-converter*, kite-tools without kite-convert and kite-plan-check).
# Unpacked into a scratch root, the unpacked kite-run runs under the emulator
# with an empty environment (env -i): it must load the unpacked libkite
# through its RUNPATH and find the unpacked devsim plugin in
# usr/lib/kite/backends by itself. Not done here: apt-get -s (apt refuses a
# foreign architecture without dpkg --add-architecture) and the consumers
# (they would need the target's CMake and pkg-config setup).
# usage: package_test_cross.sh BUILD_DIR WORK VERSION ARCH MODEL REF_KITE_RUN EMULATOR...
#   MODEL: a .kite file; REF_KITE_RUN: the build tree's kite-run (the
#   emulated wrapper, tests/cmake/KiteCross.cmake); EMULATOR: the command
#   that runs a target program (CMAKE_CROSSCOMPILING_EMULATOR).
set -euo pipefail
build=$1 work=$2 version=$3 arch=$4 model=$5 ref_kite_run=$6
shift 6
emulator=("$@")
[ ${#emulator[@]} -gt 0 ] || { echo "FAIL: no emulator given" >&2; exit 1; }
# env -i leaves no PATH: the emulator by its full path.
emulator[0]=$(command -v "${emulator[0]}") || { echo "FAIL: no ${emulator[0]}" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
source "$here/package_lib.sh"
make_packages "$build"

gpu_packages=$(made_gpu_packages)
packages="libkite0 libkite-dev kite-tools kite-backend-devsim $gpu_packages"
check_fields $packages
made=$(cd "$work/debs" && ls *.deb | sort)
want=$(for p in $packages; do basename "$(deb "$p")"; done | sort)
[ "$made" = "$want" ] || fail "cpack made $(echo $made), expected $(echo $want)"
check_runtime_and_plugins $gpu_packages
# Without dpkg-shlibdeps the lower bounds come from the binaries' symbol
# versions (cmake/KiteCPackProject.cmake): a libkite0 without them would
# install on an older system and fail to load there.
has libkite0 Depends "libc6 (>= "
has libkite0 Depends "libgcc-s1 (>= "
has libkite0 Depends "libstdc++6 (>= "
# Every other package reaches the C and C++ runtimes through libkite0.
for p in libkite-dev kite-tools kite-backend-devsim $gpu_packages; do
  [ "$(field "$p" Depends)" = "libkite0 (= $version)" ] ||
    fail "$p: Depends is '$(field "$p" Depends)', expected 'libkite0 (= $version)' alone"
done
# The tools a build without the converter installs.
tools=$(contents kite-tools | grep '^\./usr/bin/.' | sort | tr '\n' ' ')
[ "$tools" = "./usr/bin/kite-inspect ./usr/bin/kite-run " ] ||
  fail "kite-tools holds $tools, expected kite-inspect and kite-run"
# Built for the target.
dpkg-deb -x "$(deb libkite0)" "$work/probe"
elf=$(file -L "$work/probe/usr/lib/libkite.so.0")
case "$arch" in
  arm64) grep -q "ARM aarch64" <<< "$elf" || fail "libkite.so.0 is not for arm64: $elf" ;;
  amd64) grep -q "x86-64" <<< "$elf" || fail "libkite.so.0 is not for amd64: $elf" ;;
esac

root="$work/root"
unpack "$root" $packages
env -i "${emulator[@]}" "$root/usr/bin/kite-run" --version
env -i "${emulator[@]}" "$root/usr/bin/kite-inspect" "$model" > "$work/inspect.txt" ||
  { cat "$work/inspect.txt"; fail "kite-inspect from the packages"; }
"$ref_kite_run" "$model" --quiet > "$work/ref_run.txt"
run_unpacked_model "$root" "$model" "$work/ref_run.txt" "${emulator[@]}"
echo "packages ($arch): OK"
