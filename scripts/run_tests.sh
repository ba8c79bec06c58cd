#!/usr/bin/env bash
# README command 2: set up, build and pass every test: the release build's
# full default suite, then the unit tests again under AddressSanitizer and
# UndefinedBehaviorSanitizer (with leak detection).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh default
ctest --preset default -j "$(nproc)"
bash scripts/build.sh asan
ctest --preset asan -j "$(nproc)"
