#!/usr/bin/env python3
# Python: any python3 (standard library only); it runs Kite's tools.
"""Memory-budget benchmark (issue 20, docs/MEMORY.md): what `kite-convert
--memory-budget` buys and costs on real models.

Per model (ONNX files in --models-dir, e.g. from
`/usr/bin/python3 scripts/export_models.py --out DIR --models unet_small,mobilenet_v2,efficientnet_b0`):
  * the unbudgeted file's lower bound (peak of live bytes) and arena;
  * with `--memory-budget RATIOx`: the arena and the budget, the patched
    chains (nodes x bands) and recomputed tensors, the FLOPs added;
  * CPU latency: kite-run's own p50 (--json) of the unbudgeted and the
    budgeted file, alternating for --rounds rounds on the same seeded random
    inputs; the ratio of the fastest p50 of each, and the range of the
    per-round ratios (a shared machine's noise shows there);
  * the smallest ratio the converter meets: a bisection between 0 and RATIO
    (--bisect-steps conversions), with the arena and FLOPs added there.
Outputs are not compared here: tests/e2e/budget_models.py proves them
byte-identical on the same models.

Usage: benchmarks/budget.py --bin-dir build/default --models-dir DIR
           [--models a,b,c] [--ratio 0.6] [--threads 1] [--rounds 8]
           [--warmup 2] [--iterations 10] [--bisect-steps 6] [--json FILE]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

from bench_common import describe_cpu, find_tool

MiB = 1024.0 * 1024.0


def convert(tool, onnx_path, out, ratio=None):
    """Converts; returns the report's memory dict and its memory_budget dict
    (None without a budget), or (None, reason) when the budget is not met."""
    report = out + ".json"
    cmd = [tool, onnx_path, "-o", out, "-q", "--report", report]
    if ratio is not None:
        cmd += ["--memory-budget", f"{ratio:.6g}x"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return None, (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]
    with open(report) as fh:
        r = json.load(fh)
    return r["memory"], r.get("memory_budget")


def p50(tool, kite_path, threads, warmup, iterations, workdir):
    report = os.path.join(workdir, "run.json")
    subprocess.run([tool, kite_path, "--quiet", "--backend", "cpu", "--strict",
                    "--threads", str(threads), "--warmup", str(warmup),
                    "--iterations", str(iterations), "--json", report],
                   check=True, capture_output=True)
    with open(report) as fh:
        return json.load(fh)["latency_ms"]["p50"]


def smallest_ratio(tool, onnx_path, hi, steps, workdir):
    """Bisection: the smallest ratio in (0, hi] met within `steps` tries,
    its budget report, and the largest ratio seen to fail."""
    lo, best, failed = 0.0, None, None
    for _ in range(steps):
        mid = (lo + hi) / 2
        _, b = convert(tool, onnx_path, os.path.join(workdir, "bisect.kite"), mid)
        if isinstance(b, dict) and b.get("met"):
            hi, best = mid, b
        else:
            lo, failed = mid, mid
    return hi, best, failed


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--models-dir", required=True)
    ap.add_argument("--models", default="unet_small,mobilenet_v2,efficientnet_b0")
    ap.add_argument("--ratio", type=float, default=0.6)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--bisect-steps", type=int, default=6)
    ap.add_argument("--json", help="also write the rows as JSON")
    args = ap.parse_args()
    conv, run = find_tool(args.bin_dir, "kite-convert"), find_tool(args.bin_dir, "kite-run")
    cpu, isa, ncpu = describe_cpu()
    print(f"CPU: {cpu} ({ncpu} logical CPUs; {' '.join(isa)}); kite-run --threads {args.threads}, "
          f"{args.rounds} rounds of {args.warmup} warmup + {args.iterations} timed runs each")
    print("| model | lower bound | arena at %gx (budget) | patches (nodes x bands) | recomputed "
          "| FLOPs added | latency budgeted/unbudgeted (round range) | smallest budget met |"
          % args.ratio)
    print("|---|---|---|---|---|---|---|---|")
    rows, failures = [], 0
    with tempfile.TemporaryDirectory(prefix="kite-budget-") as work:
        for name in [m for m in args.models.split(",") if m]:
            onnx_path = os.path.join(args.models_dir, name + ".onnx")
            if not os.path.isfile(onnx_path):
                sys.exit(f"{onnx_path} not found (scripts/export_models.py exports it)")
            plain, budgeted = (os.path.join(work, name + s + ".kite") for s in ("", "_b"))
            mem, why = convert(conv, onnx_path, plain)
            if mem is None:
                sys.exit(f"{name}: kite-convert failed: {why}")
            _, b = convert(conv, onnx_path, budgeted, args.ratio)
            if not isinstance(b, dict) or not b.get("met"):
                print(f"| {name} | {mem['lower_bound_bytes'] / MiB:.2f} MiB | not met: {b} |")
                failures += 1
                continue
            times = {plain: [], budgeted: []}
            for _ in range(args.rounds):
                for f in (plain, budgeted):
                    times[f].append(p50(run, f, args.threads, args.warmup, args.iterations, work))
            per_round = [bt / pt for pt, bt in zip(times[plain], times[budgeted])]
            latency = min(times[budgeted]) / min(times[plain])
            small, sb, failed = smallest_ratio(conv, onnx_path, args.ratio, args.bisect_steps, work)
            bound = b["lower_bound_bytes"]
            flops_pct = 100.0 * b["flops_added"] / max(1, b["flops_before"])
            patches = ", ".join(f"{p['nodes']}x{p['tiles']}" for p in b["patches"]) or "-"
            recomputed = len(b["recomputed"])
            small_txt = "-"
            if sb:
                small_txt = (f"{small:.3f}x: {sb['arena_after_bytes'] / MiB:.2f} MiB, "
                             f"+{100.0 * sb['flops_added'] / max(1, sb['flops_before']):.1f}% FLOPs")
                if failed is not None:
                    small_txt += f" ({failed:.3f}x fails)"
            print(f"| {name} | {bound / MiB:.2f} MiB | {b['arena_after_bytes'] / MiB:.2f} MiB = "
                  f"{b['arena_after_bytes'] / bound:.3f}x ({b['budget_bytes'] / MiB:.2f} MiB) | "
                  f"{patches} | {recomputed} | +{b['flops_added'] / 1e6:.1f} M (+{flops_pct:.2f}%) | "
                  f"{latency:.2f} ({min(per_round):.2f}-{max(per_round):.2f}) | {small_txt} |",
                  flush=True)
            rows.append({"model": name, "lower_bound_bytes": bound,
                         "arena_bytes": mem["arena_bytes"],
                         "budget": b, "latency_ratio": latency, "round_ratios": per_round,
                         "p50_ms": {"unbudgeted": times[plain], "budgeted": times[budgeted]},
                         "smallest_ratio": small if sb else None, "smallest": sb})
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"cpu": cpu, "threads": args.threads, "rows": rows}, fh, indent=1)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
