#!/usr/bin/env bash
# Regenerates the fuzz seed corpora from the repo's own small models:
#   tests/fuzz/corpus/onnx/    the digits CNN and one single-op model per op
#                              (the first case of each op in tests/ops/gen_op_cases.py)
#   tests/fuzz/corpus/loader/  the same models converted to .kite
# Seeds over 64 KiB are left out so the committed corpora stay small.
#
# usage: tests/fuzz/make_corpus.sh [KITE_CONVERT]   (default build/default/converter/kite-convert)
set -euo pipefail
cd "$(dirname "$0")/../.."
convert=${1:-build/default/converter/kite-convert}
python=${KITE_PYTHON:-python3}
[[ -x $convert ]] || { echo "no kite-convert at $convert (build the default preset first)" >&2; exit 1; }
max_bytes=65536
out=tests/fuzz/corpus
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

rm -f "$out"/onnx/* "$out"/loader/*
mkdir -p "$out/onnx" "$out/loader"

add() {  # add NAME MODEL.onnx [MODEL_TO_CONVERT.onnx]
  local name=$1 model=$2 to_convert=${3:-$2}
  if [[ $(stat -c %s "$model") -gt $max_bytes ]]; then return; fi
  if "$convert" "$to_convert" -o "$tmp/$name.kite" -q >/dev/null 2>&1 &&
     [[ $(stat -c %s "$tmp/$name.kite") -le $max_bytes ]]; then
    cp "$model" "$out/onnx/$name.onnx"
    cp "$tmp/$name.kite" "$out/loader/$name.kite"
  else
    # Models Kite cannot convert yet still make good importer seeds.
    cp "$model" "$out/onnx/$name.onnx"
  fi
}

# The digits CNN has a fixed batch of 450; its .kite seed is made from a
# batch-1 copy so that every run of the loader target stays fast.
"$python" - "$tmp/digits_b1.onnx" <<'PY'
import sys
import onnx
m = onnx.load("models/digits/digits_cnn.onnx")
for v in list(m.graph.input) + list(m.graph.output) + list(m.graph.value_info):
    dims = v.type.tensor_type.shape.dim
    if len(dims) > 0 and dims[0].HasField("dim_value"):
        dims[0].dim_value = 1
onnx.save(m, sys.argv[1])
PY
add digits_cnn models/digits/digits_cnn.onnx "$tmp/digits_b1.onnx"
# The same in half precision (float16 weights and activations, Casts at the
# boundaries: docs/PRECISION.md), a loader seed only.
if "$convert" "$tmp/digits_b1.onnx" -o "$tmp/digits_cnn_fp16.kite" -q --precision fp16 >/dev/null 2>&1; then
  cp "$tmp/digits_cnn_fp16.kite" "$out/loader/digits_cnn_fp16.kite"
fi
"$python" tests/ops/gen_op_cases.py --out "$tmp/cases" >/dev/null
# First case of each op, in the generator's order.
"$python" tests/ops/gen_op_cases.py --list | awk '!seen[$2]++ {print $1}' | while read -r case; do
  if [[ -f $tmp/cases/$case/model.onnx ]]; then add "$case" "$tmp/cases/$case/model.onnx"; fi
done
# Files of every format minor version the loader reads (tests/data): 1.0,
# and 1.1 with packed weight forms for every CPU level.
cp tests/data/format_1_*_digits.kite "$out/loader/"
echo "onnx seeds:   $(ls "$out/onnx" | wc -l) ($(du -sk "$out/onnx" | cut -f1) KiB)"
echo "loader seeds: $(ls "$out/loader" | wc -l) ($(du -sk "$out/loader" | cut -f1) KiB)"
