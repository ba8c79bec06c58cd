#!/usr/bin/env bash
# cpack's Debian packages: builds them (with the devsim backend's package, to
# check the plugin-package mechanism on a plugin that runs anywhere), checks each package's fields with
# dpkg-deb -f, asks apt whether they install together (apt-get -s: nothing
# is changed on this machine), unpacks them into a scratch root and runs
# the tools from there with an empty environment (env -i): kite-run must
# load the unpacked libkite through its RUNPATH and find the unpacked plugin
# in usr/lib/kite/backends by itself. Then builds the consumers against the
# unpacked usr/ (check_consumers.sh). A cross build's packages:
# package_test_cross.sh; what both check: package_lib.sh.
# usage: package_test.sh BUILD_DIR WORK VERSION ONNX REF_KITE REF_EXAMPLE REF_KITE_RUN
set -euo pipefail
build=$1 work=$2 version=$3 onnx=$4 ref_kite=$5 ref_example=$6 ref_kite_run=$7
here=$(cd "$(dirname "$0")" && pwd)
arch=$(dpkg --print-architecture)
source "$here/package_lib.sh"
make_packages "$build"

gpu_packages=$(made_gpu_packages)
packages="libkite0 libkite-dev libkite-converter0 libkite-converter-dev kite-tools kite-backend-devsim"
packages="$packages $gpu_packages"
check_fields $packages
check_runtime_and_plugins $gpu_packages
# The converter: its own libraries (ONNX, protobuf), found by dpkg-shlibdeps.
has libkite-converter0 Depends "libonnx1"
has libkite-converter0 Depends "libprotobuf"
lacks libkite-converter0 Depends "libkite0"
has libkite-converter-dev Depends "libkite-converter0 (= $version)"
has libkite-converter-dev Depends "libkite-dev (= $version)"
has kite-tools Depends "libonnx1"
for p in libkite-converter0 libkite-converter-dev; do
  [ -z "$(field "$p" Recommends)" ] || fail "$p has Recommends"
done

# Would they install together here? (simulation only)
debs=()
for p in $packages; do debs+=("$(deb "$p")"); done
apt-get install -s --no-install-recommends "${debs[@]}" > "$work/apt.log" 2>&1 ||
  { cat "$work/apt.log"; fail "apt-get -s install of the packages"; }
for p in $packages; do
  grep -q "^Inst $p " "$work/apt.log" || { cat "$work/apt.log"; fail "apt would not install $p"; }
done
echo "apt-get -s: all $(echo $packages | wc -w) packages install together"

# Unpack and run from the scratch root, with nothing in the environment.
root="$work/root"
unpack "$root" $packages
env -i "$root/usr/bin/kite-run" --version
env -i "$root/usr/bin/kite-convert" "$onnx" -o "$work/model.kite" -q
cmp "$work/model.kite" "$ref_kite" || fail "the packaged kite-convert wrote other bytes"
env -i "$root/usr/bin/kite-plan-check" "$work/model.kite"
"$ref_kite_run" "$ref_kite" --quiet > "$work/ref_run.txt"
run_unpacked_model "$root" "$work/model.kite" "$work/ref_run.txt"

"$here/check_consumers.sh" "$root/usr" "$work/consumers" "$version" "$onnx" "$ref_kite" "$ref_example"
echo "packages: OK"
