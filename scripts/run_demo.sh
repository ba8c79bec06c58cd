#!/usr/bin/env bash
# README command 1: set up, build, then convert the bundled digits CNN and run
# it on held-out images, next to PyTorch's and onnxruntime's accuracy.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh default
python3 scripts/demo.py --bin-dir build/default --out build/default/demo
