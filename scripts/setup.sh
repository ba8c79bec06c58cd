#!/usr/bin/env bash
# Installs what Kite needs to build, test and run its demos on Debian 12:
# the toolchain and libraries from Debian (with pkg-config, file and dpkg-dev
# for the install and .deb tests), onnx/onnxruntime/numpy and the Python
# package's build and test tools (scikit-build-core, nanobind, pytest) from
# PyPI for the default python3, torch/torchvision from Debian for
# /usr/bin/python3.
# Safe to run again: it only installs what is missing.
set -euo pipefail


DEB_PACKAGES=(
  build-essential cmake ninja-build git pkg-config file dpkg-dev
  flatbuffers-compiler libflatbuffers-dev
  libonnx-dev libprotobuf-dev protobuf-compiler
  libgtest-dev googletest
  python3 python3-dev python3-venv python3-numpy python3-torch python3-torchvision python3-onnx
  python3-sklearn
  # Vulkan backend: headers and glslc to build it; the loader, lavapipe (a
  # Vulkan device on the CPU), the Khronos validation layer and vulkaninfo
  # to test it.
  libvulkan-dev glslc spirv-tools vulkan-validationlayers mesa-vulkan-drivers vulkan-tools
)

source "$(dirname "$0")/apt_install.sh"
kite_apt_install setup "${DEB_PACKAGES[@]}"

# The default python3 (may be the same as /usr/bin/python3) gets the PyPI
# packages that give reference outputs.
if ! python3 -c "import onnx, onnxruntime, numpy" >/dev/null 2>&1; then
  echo "setup: installing onnx, onnxruntime, numpy from PyPI for $(command -v python3)"
  python3 -m pip install -q onnx onnxruntime numpy ||
    python3 -m pip install -q --break-system-packages onnx onnxruntime numpy
fi
# `pip install ./python` (scikit-build-core + nanobind) and its tests (pytest);
# installed here so the tests can build the package without network access
# (pip install --no-build-isolation), and venv for their virtual environment.
PY_BUILD=("scikit-build-core>=0.10" "nanobind>=2.0" pytest)
if ! python3 -c "import scikit_build_core, nanobind, pytest, venv" >/dev/null 2>&1; then
  echo "setup: installing scikit-build-core, nanobind, pytest from PyPI for $(command -v python3)"
  python3 -m pip install -q "${PY_BUILD[@]}" ||
    python3 -m pip install -q --break-system-packages "${PY_BUILD[@]}"
fi

# The CUDA backend's CI check reads the plugin's device code with cuobjdump
# (tests/cuda/check_fatbin.cmake). Toolkits installed from PyPI wheels lack
# it; its own wheel (the toolkit's major version) puts it in site-packages.
NVCC="$(command -v nvcc || true)"
[ -z "$NVCC" ] && [ -x /usr/local/cuda/bin/nvcc ] && NVCC=/usr/local/cuda/bin/nvcc
if [ -n "$NVCC" ] && [ ! -x "$(dirname "$NVCC")/cuobjdump" ] && ! command -v cuobjdump >/dev/null 2>&1; then
  if ! python3 -c "import nvidia, os, sys; sys.exit(0 if any(os.path.exists(os.path.join(p, d, 'bin', 'cuobjdump')) for p in nvidia.__path__ for d in os.listdir(p)) else 1)" >/dev/null 2>&1; then
    major="$("$NVCC" --version | sed -n 's/.*release \([0-9]*\)\..*/\1/p')"
    echo "setup: installing cuobjdump for CUDA ${major} from PyPI (nvidia-cuda-cuobjdump)"
    python3 -m pip install -q "nvidia-cuda-cuobjdump>=${major},<$((major + 1))" ||
      python3 -m pip install -q --break-system-packages "nvidia-cuda-cuobjdump>=${major},<$((major + 1))"
  fi
fi
