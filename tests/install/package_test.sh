#!/usr/bin/env bash
# cpack's Debian packages: builds them (with the devsim backend's package, to
# check the plugin-package mechanism on a plugin that runs anywhere), checks each package's fields with
# dpkg-deb -f, asks apt whether they install together (apt-get -s: nothing
# is changed on this machine), unpacks them into a scratch root and runs
# the tools from there with an empty environment (env -i): kite-run must
# load the unpacked libkite through its RUNPATH and find the unpacked plugin
# in usr/lib/kite/backends by itself. Then builds the consumers against the
# unpacked usr/ (check_consumers.sh).
# usage: package_test.sh BUILD_DIR WORK VERSION ONNX REF_KITE REF_EXAMPLE REF_KITE_RUN
set -euo pipefail
build=$1 work=$2 version=$3 onnx=$4 ref_kite=$5 ref_example=$6 ref_kite_run=$7
here=$(cd "$(dirname "$0")" && pwd)
fail() { echo "FAIL: $*" >&2; exit 1; }
rm -rf "$work"
mkdir -p "$work/debs"

(cd "$build" && KITE_CPACK_TEST_BACKENDS=1 cpack -G DEB -B "$work/debs") > "$work/cpack.log" 2>&1 ||
  { cat "$work/cpack.log"; fail "cpack"; }
arch=$(dpkg --print-architecture)
deb() { echo "$work/debs/$1_${version}_${arch}.deb"; }
field() { dpkg-deb -f "$(deb "$1")" "$2"; }
has() {  # PACKAGE FIELD TEXT: FIELD of PACKAGE contains TEXT
  case ", $(field "$1" "$2"), " in
    *"$3"*) ;;
    *) fail "$1: $2 is '$(field "$1" "$2")', which lacks '$3'" ;;
  esac
}
contents() { dpkg-deb -c "$(deb "$1")" | awk '{print $6}'; }  # the paths
lacks() {  # PACKAGE FIELD TEXT
  case "$(field "$1" "$2")" in
    *"$3"*) fail "$1: $2 is '$(field "$1" "$2")', which must not contain '$3'" ;;
  esac
}

packages="libkite0 libkite-dev libkite-converter0 libkite-converter-dev kite-tools kite-backend-devsim"
# The GPU plugins this build made (CI builds Vulkan and CUDA).
gpu_packages=""
for p in kite-backend-vulkan kite-backend-cuda; do
  [ ! -f "$(deb "$p")" ] || gpu_packages="$gpu_packages $p"
done
packages="$packages$gpu_packages"
for p in $packages; do
  [ -f "$(deb "$p")" ] || fail "cpack made no $(basename "$(deb "$p")") (made: $(ls "$work/debs"))"
  [ "$(field "$p" Package)" = "$p" ] || fail "$p: Package field"
  [ "$(field "$p" Version)" = "$version" ] || fail "$p: Version is $(field "$p" Version)"
  [ "$(field "$p" Architecture)" = "$arch" ] || fail "$p: Architecture"
  echo "$p: Depends: $(field "$p" Depends)"
  r=$(field "$p" Recommends); [ -z "$r" ] || echo "$p: Recommends: $r"
done
# The runtime: only the C/C++ runtime, never the converter's libraries.
has libkite0 Depends "libc6"
has libkite0 Depends "libstdc++6"
lacks libkite0 Depends "libonnx"
lacks libkite0 Depends "libprotobuf"
lacks libkite0 Depends "libkite"
has libkite-dev Depends "libkite0 (= $version)"
has libkite-converter0 Depends "libonnx1"
has libkite-converter0 Depends "libprotobuf"
lacks libkite-converter0 Depends "libkite0"
has libkite-converter-dev Depends "libkite-converter0 (= $version)"
has libkite-converter-dev Depends "libkite-dev (= $version)"
has kite-tools Depends "libkite0 (= $version)"
has kite-tools Depends "libonnx1"
# A backend plugin: tied to the exact runtime, its driver libraries recommended.
has kite-backend-devsim Depends "libkite0 (= $version)"
[ "$(field kite-backend-devsim Recommends)" = "kite-tools" ] || fail "kite-backend-devsim: Recommends"
# GPU plugins open their driver libraries at run time (ABI v2): recommended,
# never required, so the package installs on a machine without the GPU.
for p in $gpu_packages; do
  has "$p" Depends "libkite0 (= $version)"
  case "$p" in
    kite-backend-vulkan) has "$p" Recommends "libvulkan1"; lacks "$p" Depends "libvulkan" ;;
    kite-backend-cuda) has "$p" Recommends "libcuda1"
      for l in libcuda libcudart libcudnn libcublas; do lacks "$p" Depends "$l"; done ;;
  esac
  so="libkite_backend_${p#kite-backend-}.so"
  grep -qx "\./usr/lib/kite/backends/$so" <<< "$(contents "$p")" || fail "$p lacks usr/lib/kite/backends/$so"
done
for p in libkite0 libkite-dev libkite-converter0 libkite-converter-dev kite-tools; do
  [ -z "$(field "$p" Recommends)" ] || fail "$p has Recommends"
done
runtime_files=$(contents libkite0)
grep -qx '\./usr/lib/libkite\.so\.0' <<< "$runtime_files" || fail "libkite0 lacks libkite.so.0"
grep -qx '\./usr/lib/kite/backends/' <<< "$runtime_files" || fail "libkite0 lacks the plugin folder"
if grep -q '\.h$' <<< "$runtime_files"; then fail "libkite0 holds headers"; fi
grep -qx '\./usr/lib/kite/backends/libkite_backend_devsim\.so' <<< "$(contents kite-backend-devsim)" ||
  fail "kite-backend-devsim does not put its plugin into usr/lib/kite/backends"

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
for d in "${debs[@]}"; do dpkg-deb -x "$d" "$root"; done
env -i "$root/usr/bin/kite-run" --version
env -i "$root/usr/bin/kite-convert" "$onnx" -o "$work/model.kite" -q
cmp "$work/model.kite" "$ref_kite" || fail "the packaged kite-convert wrote other bytes"
env -i "$root/usr/bin/kite-plan-check" "$work/model.kite"
env -i "$root/usr/bin/kite-run" "$work/model.kite" --backend devsim,cpu --strict --placement \
  > "$work/run.txt" 2>&1 || { cat "$work/run.txt"; fail "kite-run from the packages"; }
cat "$work/run.txt"
grep -q "placement: .* nodes on devsim" "$work/run.txt" || fail "the packaged plugin did not run the nodes"
# devsim computes with the CPU kernels, bit for bit: same output line.
want=$("$ref_kite_run" "$ref_kite" --quiet | grep "^output ")
got=$(grep "^output " "$work/run.txt")
[ "$got" = "$want" ] || fail "kite-run from the packages printed '$got', the build tree '$want'"

"$here/check_consumers.sh" "$root/usr" "$work/consumers" "$version" "$onnx" "$ref_kite" "$ref_example"
echo "packages: OK"
