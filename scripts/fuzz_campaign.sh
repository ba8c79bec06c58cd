#!/usr/bin/env bash
# Fuzz campaign: builds the `fuzz` preset and runs every libFuzzer target for
# SECONDS, all targets at the same time (one core each, libFuzzer's fork mode
# so that a crash, timeout or OOM is recorded and fuzzing goes on), then
# reports executions and findings per target.
#
# usage: scripts/fuzz_campaign.sh SECONDS [TARGET...]
#   TARGET: loader, onnx (default: both)
# environment:
#   KITE_FUZZ_BUILD_DIR  build folder (default build/fuzz, the preset's)
#   KITE_FUZZ_WORK       campaign folder (default $KITE_FUZZ_BUILD_DIR/campaign):
#                        <target>/corpus (grows across campaigns), <target>/artifacts,
#                        <target>/fuzz.log
#   KITE_FUZZ_JOBS       fork-mode workers per target (default 1)
#   KITE_FUZZ_NO_BUILD=1 use the targets already built
#
# Crash and leak inputs are copied to tests/regressions/<target>/, which the
# normal test run replays (regression_replay_test); fix the bug, keep the
# file, commit both. Timeouts and OOMs are reported and left in artifacts/.
# Exit status: 0 when no target crashed, 1 otherwise, 2 on usage/build errors.
#
# Stopping it (Ctrl-C, or SIGINT/SIGTERM to the fuzzers) ends the campaign
# early; the summary still counts what ran. KITE_FUZZ_RESUME=1 instead starts
# a fuzzer stopped from outside again for the time left (for unattended runs
# on a machine where something else may stop stray processes).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD

seconds=${1:-}
if ! [[ $seconds =~ ^[0-9]+$ ]] || [[ $seconds -lt 1 ]]; then
  echo "usage: $0 SECONDS [loader|onnx ...]" >&2
  exit 2
fi
shift
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(loader onnx)

build=${KITE_FUZZ_BUILD_DIR:-build/fuzz}
work=${KITE_FUZZ_WORK:-$build/campaign}
jobs=${KITE_FUZZ_JOBS:-1}

binary_of() { case $1 in loader) echo fuzz_loader ;; onnx) echo fuzz_onnx_import ;; *) return 1 ;; esac; }
dict_of() { case $1 in loader) echo kite.dict ;; onnx) echo onnx.dict ;; esac; }
for t in "${targets[@]}"; do
  binary_of "$t" >/dev/null || { echo "unknown target '$t' (loader, onnx)" >&2; exit 2; }
done

if [[ ${KITE_FUZZ_NO_BUILD:-0} != 1 ]]; then
  echo "== building the fuzz preset in $build"
  cmake --preset fuzz -B "$build" >"$build.configure.log" 2>&1 ||
    { cat "$build.configure.log"; exit 2; }
  cmake --build "$build" -j "$(nproc)" --target fuzz_loader fuzz_onnx_import ||
    exit 2
fi

# Leak detection stays on (fuzzing's default); -rss_limit_mb/-malloc_limit_mb
# turn a runaway allocation into an OOM report instead of a dead machine.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# One target for SECONDS in total. With KITE_FUZZ_RESUME=1 a fuzzer stopped
# from outside ("run interrupted") is started again for the time left; each
# run is one segment-N.log, all appended to fuzz.log.
run_target() {
  local t=$1 dir=$work/$1 bin=$2 start now left seg=0
  start=$(date +%s)
  : >"$dir/fuzz.log"
  rm -f "$dir"/segment-*.log "$dir/.stop"
  trap 'touch "$dir/.stop"' INT
  while [[ ! -e $dir/.stop ]]; do
    now=$(date +%s)
    left=$(( seconds - (now - start) ))
    [[ $left -ge 5 ]] || break
    seg=$((seg + 1))
    # corpus/ is where new inputs go; the committed seeds are read-only input.
    "$bin" -fork="$jobs" -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
      -max_total_time="$left" -timeout=20 -rss_limit_mb=2560 -malloc_limit_mb=2048 \
      -dict="$root/tests/fuzz/$(dict_of "$t")" -artifact_prefix="$dir/artifacts/" \
      -print_final_stats=1 \
      "$dir/corpus" "$root/tests/fuzz/corpus/$t" >"$dir/segment-$seg.log" 2>&1
    cat "$dir/segment-$seg.log" >>"$dir/fuzz.log"
    grep -aq "run interrupted" "$dir/segment-$seg.log" || break
    if [[ ${KITE_FUZZ_RESUME:-0} != 1 ]]; then
      echo "== $t: stopped from outside after $(( $(date +%s) - now ))s"
      break
    fi
    echo "== $t: stopped from outside after $(( $(date +%s) - now ))s; resuming for the time left"
  done
}

declare -A pids
for t in "${targets[@]}"; do
  dir=$work/$t
  mkdir -p "$dir/corpus" "$dir/artifacts"
  bin=$build/tests/fuzz/$(binary_of "$t")
  [[ -x $bin ]] || { echo "missing $bin" >&2; exit 2; }
  echo "== $t: $(basename "$bin") for ${seconds}s, $jobs worker(s), log $dir/fuzz.log"
  run_target "$t" "$bin" &
  pids[$t]=$!
done
for t in "${targets[@]}"; do wait "${pids[$t]}"; done

status=0
echo
printf '%-8s %14s %10s %8s %7s %8s %8s %6s %8s\n' target executions seconds exec/s crashes timeouts ooms corpus segments
for t in "${targets[@]}"; do
  dir=$work/$t
  # Fork mode prints "#<runs>: cov: .. corp: .. exec/s .. oom/timeout/crash: a/b/c time: Ns ..";
  # without fork it prints "#<runs>\t<EVENT> cov: ..". The last one of each
  # segment counts; segments add up.
  execs=0
  secs=0
  segments=0
  for log in "$dir"/segment-*.log; do
    [[ -f $log ]] || continue
    segments=$((segments + 1))
    line=$(grep -aE '^#[0-9]+' "$log" | tail -n 1)
    e=$(sed -E 's/^#([0-9]+).*/\1/' <<<"$line")
    s=$(sed -nE 's/.* time: ([0-9]+)s.*/\1/p' <<<"$line")
    execs=$(( execs + ${e:-0} ))
    secs=$(( secs + ${s:-0} ))
  done
  [[ $secs -gt 0 ]] || secs=$seconds
  rate=$(( secs > 0 ? execs / secs : 0 ))
  crashes=$(find "$dir/artifacts" -type f \( -name 'crash-*' -o -name 'leak-*' \) | wc -l)
  timeouts=$(find "$dir/artifacts" -type f -name 'timeout-*' | wc -l)
  ooms=$(find "$dir/artifacts" -type f -name 'oom-*' | wc -l)
  corpus=$(find "$dir/corpus" -type f | wc -l)
  printf '%-8s %14s %10s %8s %7s %8s %8s %6s %8s\n' "$t" "$execs" "$secs" "$rate" "$crashes" "$timeouts" "$ooms" "$corpus" "$segments"
  if [[ $crashes -gt 0 ]]; then
    status=1
    mkdir -p "tests/regressions/$t"
    find "$dir/artifacts" -type f \( -name 'crash-*' -o -name 'leak-*' \) | while read -r f; do
      cp -n "$f" "tests/regressions/$t/$(basename "$f")"
      echo "   $t: $(basename "$f") -> tests/regressions/$t/ (reproduce: $build/tests/fuzz/$(binary_of "$t") $f)"
    done
  fi
  for f in $(find "$dir/artifacts" -type f \( -name 'timeout-*' -o -name 'oom-*' \)); do
    echo "   $t: $(basename "$f") left in $dir/artifacts/ (not a crash; triage by hand)"
  done
done
exit $status
