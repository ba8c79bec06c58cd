#!/usr/bin/env bash
# Installs what the aarch64 preset needs on a Debian/Ubuntu x86-64 machine:
# the arm64 cross compiler (with the arm64 C and C++ libraries it links
# against) and qemu-user for running the tests. Deliberately no
# `dpkg --add-architecture arm64` (it breaks later `apt-get update` runs on
# machines whose mirrors carry no arm64): googletest is built from
# /usr/src/googletest (Debian's googletest, which setup.sh installs with
# libgtest-dev), FlatBuffers and Vulkan need only their headers.
set -euo pipefail
source "$(dirname "$0")/apt_install.sh"
kite_apt_install install_cross_tools g++-aarch64-linux-gnu qemu-user googletest
