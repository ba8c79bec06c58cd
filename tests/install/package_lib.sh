# shellcheck shell=bash disable=SC2154  # work, version, arch: the sourcing script's
# Sourced by package_test.sh (native packages) and package_test_cross.sh
# (a cross build's): cpack's Debian packages made, their fields read with
# dpkg-deb -f, the checks every architecture shares, the packages unpacked
# into a scratch root and kite-run run from there with an empty environment.
# Set before sourcing: work (the scratch folder), version, arch (the Debian
# architecture the packages are for).
fail() { echo "FAIL: $*" >&2; exit 1; }
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

# make_packages BUILD_DIR: cpack -G DEB into $work/debs, with the devsim
# backend's package (a plugin that runs anywhere, to check the plugin-package
# mechanism).
make_packages() {
  rm -rf "$work"
  mkdir -p "$work/debs"
  (cd "$1" && KITE_CPACK_TEST_BACKENDS=1 cpack -G DEB -B "$work/debs") > "$work/cpack.log" 2>&1 ||
    { cat "$work/cpack.log"; fail "cpack"; }
}

# The GPU plugin packages this build made (CI builds Vulkan and CUDA).
made_gpu_packages() {
  local p
  for p in kite-backend-vulkan kite-backend-cuda; do
    [ ! -f "$(deb "$p")" ] || echo "$p"
  done
}

# check_fields PACKAGE...: each was made, with its name, version and
# architecture; prints its Depends and Recommends.
check_fields() {
  local p r
  for p in "$@"; do
    [ -f "$(deb "$p")" ] || fail "cpack made no $(basename "$(deb "$p")") (made: $(ls "$work/debs"))"
    [ "$(field "$p" Package)" = "$p" ] || fail "$p: Package field"
    [ "$(field "$p" Version)" = "$version" ] || fail "$p: Version is $(field "$p" Version)"
    [ "$(field "$p" Architecture)" = "$arch" ] || fail "$p: Architecture is $(field "$p" Architecture)"
    echo "$p: Depends: $(field "$p" Depends)"
    r=$(field "$p" Recommends); [ -z "$r" ] || echo "$p: Recommends: $r"
  done
}

# check_runtime_and_plugins GPU_PACKAGE...: what libkite0, libkite-dev,
# kite-tools and the plugin packages depend on and hold, on every
# architecture.
check_runtime_and_plugins() {
  local p l so runtime_files
  # The runtime: only the C/C++ runtime, never the converter's libraries.
  has libkite0 Depends "libc6"
  has libkite0 Depends "libstdc++6"
  lacks libkite0 Depends "libonnx"
  lacks libkite0 Depends "libprotobuf"
  lacks libkite0 Depends "libkite"
  has libkite-dev Depends "libkite0 (= $version)"
  has kite-tools Depends "libkite0 (= $version)"
  # A backend plugin: tied to the exact runtime, its driver libraries recommended.
  has kite-backend-devsim Depends "libkite0 (= $version)"
  [ "$(field kite-backend-devsim Recommends)" = "kite-tools" ] || fail "kite-backend-devsim: Recommends"
  # GPU plugins open their driver libraries at run time (ABI v2): recommended,
  # never required, so the package installs on a machine without the GPU.
  for p in "$@"; do
    has "$p" Depends "libkite0 (= $version)"
    case "$p" in
      kite-backend-vulkan) has "$p" Recommends "libvulkan1"; lacks "$p" Depends "libvulkan" ;;
      kite-backend-cuda) has "$p" Recommends "libcuda1"
        for l in libcuda libcudart libcudnn libcublas; do lacks "$p" Depends "$l"; done ;;
    esac
    so="libkite_backend_${p#kite-backend-}.so"
    grep -qx "\./usr/lib/kite/backends/$so" <<< "$(contents "$p")" || fail "$p lacks usr/lib/kite/backends/$so"
  done
  for p in libkite0 libkite-dev kite-tools; do
    [ -z "$(field "$p" Recommends)" ] || fail "$p has Recommends"
  done
  runtime_files=$(contents libkite0)
  grep -qx '\./usr/lib/libkite\.so\.0' <<< "$runtime_files" || fail "libkite0 lacks libkite.so.0"
  grep -qx '\./usr/lib/kite/backends/' <<< "$runtime_files" || fail "libkite0 lacks the plugin folder"
  if grep -q '\.h$' <<< "$runtime_files"; then fail "libkite0 holds headers"; fi
  grep -qx '\./usr/lib/kite/backends/libkite_backend_devsim\.so' <<< "$(contents kite-backend-devsim)" ||
    fail "kite-backend-devsim does not put its plugin into usr/lib/kite/backends"
}

# unpack ROOT PACKAGE...: dpkg-deb -x each package into ROOT.
unpack() {
  local root=$1 p
  shift
  for p in "$@"; do dpkg-deb -x "$(deb "$p")" "$root"; done
}

# run_unpacked_model ROOT MODEL REF_OUTPUT [LAUNCHER...]: the unpacked kite-run,
# started with nothing in the environment (through LAUNCHER, an emulator, if
# given), finds the unpacked libkite through its RUNPATH and the unpacked
# devsim plugin in usr/lib/kite/backends by itself, runs MODEL there and
# prints REF_OUTPUT's output line (devsim computes with the CPU kernels, bit
# for bit). REF_OUTPUT: what kite-run of the build tree printed.
run_unpacked_model() {
  local root=$1 model=$2 want got
  want=$(grep "^output " "$3") || fail "no output line in $3"
  shift 3
  env -i "$@" "$root/usr/bin/kite-run" "$model" --backend devsim,cpu --strict --placement \
    > "$work/run.txt" 2>&1 || { cat "$work/run.txt"; fail "kite-run from the packages"; }
  cat "$work/run.txt"
  grep -q "placement: .* nodes on devsim" "$work/run.txt" || fail "the packaged plugin did not run the nodes"
  got=$(grep "^output " "$work/run.txt")
  [ "$got" = "$want" ] || fail "kite-run from the packages printed '$got', the build tree '$want'"
}
