#!/usr/bin/env bash
# `pip install ./python` into a fresh virtual environment (with the system's
# site packages, for numpy, onnxruntime, pytest and the build requirements
# scripts/setup.sh installed), then checks that the installed package is
# self-contained: `import kite` loads libkite and libkite_converter from the
# package folder, not from where they were built or installed.
# usage: python_wheel.sh SOURCE_DIR WORK [KITE_PREFIX]
#   KITE_PREFIX given: the binding builds against that installed Kite (fast);
#   not given: pip builds Kite from the source tree, as on a fresh machine.
set -euo pipefail
src=$1 work=$2 prefix=${3:-}
fail() { echo "FAIL: $*" >&2; exit 1; }
rm -rf "$work/venv"
mkdir -p "$work"
python3 -m venv --system-site-packages "$work/venv"
args=(--no-build-isolation --no-deps --quiet "$src/python" -C "build-dir=$work/build")
if [ -n "$prefix" ]; then args+=(-C "cmake.define.KITE_PREFIX=$prefix"); fi
"$work/venv/bin/python" -m pip install "${args[@]}" > "$work/pip.log" 2>&1 ||
  { cat "$work/pip.log"; fail "pip install ./python"; }
cd "$work"
"$work/venv/bin/python" - "$work/venv" <<'PY'
import os, sys
import kite
venv = os.path.realpath(sys.argv[1])
pkg = os.path.dirname(os.path.realpath(kite.__file__))
assert pkg.startswith(venv), f"kite imported from {pkg}, not from the venv {venv}"
maps = open("/proc/self/maps").read().split("\n")
for lib in ("libkite.so", "libkite_converter.so"):
    paths = {line.split()[-1] for line in maps if "/" + lib in line}
    assert paths, f"{lib} is not loaded"
    for p in paths:
        assert os.path.dirname(os.path.realpath(p)) == pkg, f"{lib} loaded from {p}, not from {pkg}"
print(f"kite {kite.__version__} (library {kite.version()}) from {pkg}: self-contained")
PY
