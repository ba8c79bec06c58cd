#!/usr/bin/env bash
# README command 1: set up, build, then convert the bundled digits CNN and run
# it on held-out images, next to PyTorch's and onnxruntime's accuracy: first
# with the C tools (kite-convert, kite-run), then from Python (import kite),
# installed with pip into a virtual environment under build/default.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh default
# The Python package, built against this build's install (docs/PYTHON.md).
cmake --install build/default --prefix build/default/prefix > /dev/null
python3 -m venv --system-site-packages build/default/venv
build/default/venv/bin/python -m pip install -q --no-build-isolation --no-deps ./python \
  -C cmake.define.KITE_PREFIX="$PWD/build/default/prefix" -C build-dir=build/default/python-wheel
build/default/venv/bin/python scripts/demo.py --bin-dir build/default --out build/default/demo
