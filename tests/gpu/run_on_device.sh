#!/usr/bin/env bash
# Kite's CUDA backend on a machine with an NVIDIA GPU, in one go (about 5
# minutes at most): what the machine has, a smoke test, every CUDA test,
# the model set against the CPU, device memory per model, and latency
# against PyTorch. Each table goes to $OUT as soon as it is done, so a run
# cut short still leaves what it finished.
#
# Needs: the programs built here by tests/gpu/prepare_carry.sh in
# .gpu-carry/ (or KITE_GPU_CARRY); on the machine: the NVIDIA driver,
# python3 with torch + torchvision + onnx (the models are exported there),
# cuDNN and cuBLAS (from torch's pip wheels are fine: they are found in
# site-packages).
#
#   device tool: carry [".gpu-carry"], command "bash tests/gpu/run_on_device.sh"
#
# A dry run without a GPU (the script's own logic, on the emulated plugin):
#   KITE_GPU_BACKEND=cudaemu KITE_GPU_MODELS=squeezenet1_1,vit_small PYTHON=/usr/bin/python3 \
#     OUT=/tmp/gpu_out bash tests/gpu/run_on_device.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT="$(pwd)"
OUT="${OUT:-/tmp/kite_gpu_out}"
mkdir -p "$OUT"
CARRY="$(cd "${KITE_GPU_CARRY:-.gpu-carry}" && pwd)"
BIN="$CARRY/bin"
WORK="$(mktemp -d /tmp/kite_gpu.XXXXXX)"
START=$(date +%s)
MODELS="${KITE_GPU_MODELS:-resnet18,mobilenet_v2,mobilenet_v3_small,efficientnet_b0,squeezenet1_1,shufflenet_v2_x1_0,convnext_tiny,vit_small,text_transformer,unet_small}"
B="${KITE_GPU_BACKEND:-cuda}"
log() { echo "[$(( $(date +%s) - START ))s] $*"; }
section() { echo; echo "=== $* ==="; }
PY="${PYTHON:-python3}"
export PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH="$CARRY/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export KITE_CUDA_PLUGIN_DIR="$CARRY/lib"
export KITE_BACKEND_PATH="$CARRY/lib"
status=0

section "machine" | tee "$OUT/environment.txt"
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv 2>&1
  echo "libcuda: $(ldconfig -p 2>/dev/null | awk '/libcuda.so.1 /{print $NF; exit}')"
  # cuDNN and cuBLASLt: the plugin dlopens them; point it at torch's wheels.
  $PY - <<'PYEOF'
import glob, os, site
roots = site.getsitepackages() + [site.getusersitepackages()]
def find(pattern):
    for r in roots:
        hits = sorted(glob.glob(os.path.join(r, "nvidia", "**", pattern), recursive=True))
        if hits:
            return hits[0]
    return ""
with open("/tmp/kite_gpu_libs.sh", "w") as f:
    for var, pattern in (("KITE_CUDNN_LIBRARY", "libcudnn.so.9"), ("KITE_CUBLASLT_LIBRARY", "libcublasLt.so.1[0-9]")):
        path = find(pattern)
        print(f"{var}={path or '(not found: the plugin looks on the loader path)'}")
        if path:
            f.write(f"export {var}={path}\nexport LD_LIBRARY_PATH={os.path.dirname(path)}:$LD_LIBRARY_PATH\n")
try:
    import torch
    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}, "
          f"device {torch.cuda.get_device_name(0)}")
except Exception as e:
    print(f"torch: {e}")
PYEOF
} 2>&1 | tee -a "$OUT/environment.txt"
# shellcheck disable=SC1091
[ -f /tmp/kite_gpu_libs.sh ] && . /tmp/kite_gpu_libs.sh
"$BIN/kite-run" --version | tee -a "$OUT/environment.txt"

section "smoke test: the digits CNN on $B (strict)" | tee "$OUT/smoke.txt"
"$BIN/kite-convert" models/digits/digits_cnn.onnx -o "$WORK/digits.kite" >/dev/null
timeout 60 "$BIN/kite-run" "$WORK/digits.kite" --backend "$B" --strict --placement --poison 2>&1 | tee -a "$OUT/smoke.txt"
if [ "${PIPESTATUS[0]}" -ne 0 ]; then
  log "smoke test failed: stopping (see $OUT/smoke.txt)"
  exit 1
fi
timeout 60 $PY tests/cuda/model_set.py --kite-convert "$BIN/kite-convert" --kite-run "$BIN/kite-run" \
  --plugin-dir "$CARRY/lib" --backend "$B" --workdir "$WORK/smoke" models/digits/digits_cnn.onnx 2>&1 | tee -a "$OUT/smoke.txt"
log "smoke test done"

section "CUDA tests" | tee "$OUT/tests.txt"
for opts in "" "conv=own,gemm=own" "lean=1,unified=1"; do
  for t in cuda_ops_test cuda_session_test; do
    echo "--- $t ${opts:-(defaults: cuDNN, cuBLASLt where faster)}" | tee -a "$OUT/tests.txt"
    KITE_CUDA_TEST_BACKEND="$B" KITE_CUDA_TEST_OPTIONS="$opts" timeout 120 "$BIN/$t" --gtest_brief=1 2>&1 \
      | tail -25 | tee -a "$OUT/tests.txt"
    rc=${PIPESTATUS[0]}
    [ "$rc" -ne 0 ] && status=1 && echo "exit code $rc" | tee -a "$OUT/tests.txt"
  done
done
log "tests done"

section "model set: export with this machine's torch, convert, compare with the CPU" | tee "$OUT/model_set.md"
mkdir -p "$WORK/onnx" "$WORK/kite"
timeout 150 $PY scripts/export_models.py --out "$WORK/onnx" --models "$MODELS" 2>&1 | tail -12 | tee -a "$OUT/model_set.md"
log "export done"
onnx_files=()
for m in ${MODELS//,/ }; do [ -f "$WORK/onnx/$m.onnx" ] && onnx_files+=("$WORK/onnx/$m.onnx"); done
for cfg in "" "--option lean=1 --option unified=1"; do
  # shellcheck disable=SC2086
  timeout 120 $PY tests/cuda/model_set.py --kite-convert "$BIN/kite-convert" --kite-run "$BIN/kite-run" \
    --plugin-dir "$CARRY/lib" --backend "$B" --workdir "$WORK/models" --table "$OUT/model_set.md" \
    $cfg models/digits/digits_cnn.onnx "${onnx_files[@]}" 2>&1 | tee -a "$OUT/model_set.txt"
  [ "${PIPESTATUS[0]}" -ne 0 ] && status=1
done
for m in ${MODELS//,/ }; do
  [ -f "$WORK/models/$m/$m.kite" ] && cp "$WORK/models/$m/$m.kite" "$WORK/kite/"
done
log "model set done"

section "device memory per model" | tee "$OUT/memory.md"
{
  echo "| model | arena | weights | workspace (library scratch) | module | cuDNN handle | cuBLASLt handle |"
  echo "|---|---|---|---|---|---|---|"
  for m in ${MODELS//,/ }; do
    [ -f "$WORK/kite/$m.kite" ] || continue
    timeout 30 "$BIN/kite-run" "$WORK/kite/$m.kite" --backend "$B" --quiet \
      --backend-option "$B:memory_report=$WORK/$m.mem.json" >/dev/null 2>&1
    $PY - "$m" "$WORK/$m.mem.json" <<'PYEOF'
import json, sys
name, path = sys.argv[1], sys.argv[2]
try:
    d = json.load(open(path))
except Exception as e:
    print(f"| {name} | (no report: {e}) |||||| "); sys.exit()
mib = lambda b: f"{b / 1048576:.1f} MiB"
print(f"| {name} | {mib(d['arena_bytes'])} | {mib(d['weights_bytes'])} | {mib(d['workspace_bytes'])} "
      f"({mib(d['library_scratch_bytes'])}) | {mib(d['module_bytes'])} | {mib(d['cudnn_handle_bytes'])} | "
      f"{mib(d['cublaslt_handle_bytes'])} |")
PYEOF
  done
} 2>&1 | tee -a "$OUT/memory.md"
log "memory done"

section "latency against PyTorch" | tee "$OUT/bench.md"
torch_flag=""
$PY -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null && torch_flag="--torch"
timeout 150 $PY tests/gpu/bench.py --kite-run "$BIN/kite-run" --backend "$B" --models "$WORK/kite" --names "$MODELS" \
  --out "$OUT/bench.md" $torch_flag --label "defaults" >/dev/null 2>"$OUT/bench_errors.txt"
timeout 60 $PY tests/gpu/bench.py --kite-run "$BIN/kite-run" --backend "$B" --models "$WORK/kite" --names "$MODELS" \
  --out "$OUT/bench.md" --option lean=1 --label "lean=1 (own kernels only)" --iterations 50 >/dev/null 2>>"$OUT/bench_errors.txt"
cat "$OUT/bench.md"
log "bench done"

section "summary"
grep -h -E "passed|FAILED|failed" "$OUT/tests.txt" "$OUT/model_set.txt" 2>/dev/null | tail -20
log "all done, status $status"
rm -rf "$WORK"
exit $status
