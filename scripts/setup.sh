#!/usr/bin/env bash
# Installs what Kite needs to build, test and run its demos on Debian 12:
# the toolchain and libraries from Debian, onnx/onnxruntime/numpy from PyPI
# for the default python3, torch/torchvision from Debian for /usr/bin/python3.
# Safe to run again: it only installs what is missing.
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

DEB_PACKAGES=(
  build-essential cmake ninja-build git
  flatbuffers-compiler libflatbuffers-dev
  libonnx-dev libprotobuf-dev protobuf-compiler
  libgtest-dev googletest
  python3 python3-numpy python3-torch python3-torchvision python3-onnx python3-sklearn
)

missing=()
for p in "${DEB_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# The default python3 (may be the same as /usr/bin/python3) gets the PyPI
# packages that give reference outputs.
if ! python3 -c "import onnx, onnxruntime, numpy" >/dev/null 2>&1; then
  echo "setup: installing onnx, onnxruntime, numpy from PyPI for $(command -v python3)"
  python3 -m pip install -q onnx onnxruntime numpy ||
    python3 -m pip install -q --break-system-packages onnx onnxruntime numpy
fi
