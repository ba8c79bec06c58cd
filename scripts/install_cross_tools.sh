#!/usr/bin/env bash
# Installs what the aarch64 preset needs on a Debian/Ubuntu x86-64 machine:
# the arm64 cross compiler (with the arm64 C and C++ libraries it links
# against) and qemu-user for running the tests. Deliberately no
# `dpkg --add-architecture arm64` (it breaks later `apt-get update` runs on
# machines whose mirrors carry no arm64): googletest is built from
# /usr/src/googletest (Debian's googletest, which setup.sh installs with
# libgtest-dev), FlatBuffers and Vulkan need only their headers.
set -euo pipefail
missing=()
for p in g++-aarch64-linux-gnu qemu-user googletest; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  echo "install_cross_tools: installing Debian packages: ${missing[*]}"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
