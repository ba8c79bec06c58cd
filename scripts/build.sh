#!/usr/bin/env bash
# Configures and builds one CMake preset (default: "default"); any further
# arguments go to the configure step (e.g. -DKITE_BACKEND_CUDA=ON).
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-default}"
shift || true
cmake --preset "$preset" "$@" >/dev/null
cmake --build --preset "$preset" -j "$(nproc)"
