#!/usr/bin/env bash
# README command 2: set up, build and pass every test: the release build's
# full default suite, then the unit tests again under AddressSanitizer and
# UndefinedBehaviorSanitizer (with leak detection), then the threading tests
# under ThreadSanitizer (clang; the tsan preset builds two test programs,
# about 4-5 minutes on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh default
ctest --preset default -j "$(nproc)"
bash scripts/build.sh asan
ctest --preset asan -j "$(nproc)"

# ThreadSanitizer needs clang and its runtime (libclang_rt.tsan).
missing=()
for p in clang libclang-rt-14-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  echo "run_tests: installing Debian packages: ${missing[*]}"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
bash scripts/build.sh tsan
ctest --preset tsan -j "$(nproc)"
