#!/usr/bin/env python3
# Python: the default python3 (pip onnxruntime + numpy), for the onnxruntime side.
"""Memory and load benchmark: what kite-run's process holds at its peak against
what the run needs, and how long a model takes to become a ready session,
beside onnxruntime, for every model in --models-dir (fp32).

For each ONNX model (export the model set with
`/usr/bin/python3 scripts/export_models.py --out DIR --models all`):
  * kite-convert -O2 --report (packed weight forms for this machine's ISA
    level, the default): the arena, its lower bound, the weights, and the
    bytes of the packed forms and of the constants they replace;
  * the bound the issue sets: weights the run reads (constants without a
    form + the forms) + arena + declared workspace (kite-run --json) +
    16 MiB, against kite-run's peak RSS (ru_maxrss of its own process);
    `ok` says whether RSS <= bound;
  * onnxruntime's peak RSS in a process of its own, for comparison;
  * load: time from kite_model_load_file to a ready session (kite-run's
    load_ms: map + verify, then place + prepare), smallest of --load-runs
    fresh processes, beside onnxruntime's InferenceSession creation
    (smallest of --load-runs in one process, CPUExecutionProvider, default
    options), and their ratio.

Usage: benchmarks/memory.py --bin-dir build/default --models-dir DIR [--models a,b]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

from bench_common import describe_cpu, find_tool

ORT_CHILD = r'''
import resource, sys, time, numpy as np, onnxruntime as ort
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
runs = int(sys.argv[2])
best = None
for _ in range(runs):
    t0 = time.perf_counter()
    s = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
    t = (time.perf_counter() - t0) * 1000.0
    best = t if best is None else min(best, t)
    if _ + 1 < runs:
        del s
feeds = {}
for i in s.get_inputs():
    shape = [d if isinstance(d, int) else 1 for d in i.shape]
    if "int" in i.type:
        feeds[i.name] = np.random.randint(0, 10, size=shape).astype(np.int64)
    else:
        feeds[i.name] = np.random.rand(*shape).astype(np.float32)
s.run(None, feeds)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(base, peak, best)
'''

# Runs the command in a child and prints that child's peak RSS (KiB).
RSS_CHILD = ("import resource,subprocess,sys; subprocess.run(sys.argv[1:], check=True, "
             "stdout=subprocess.DEVNULL); print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")

SLACK = 16 * 1048576  # the small constant: code, libraries, stacks, I/O buffers


def mib(b):
    return b / 1048576.0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin-dir", default="build/default")
    ap.add_argument("--models-dir", required=True)
    ap.add_argument("--models", default="", help="comma-separated model names (default: every .onnx)")
    ap.add_argument("--load-runs", type=int, default=5)
    ap.add_argument("--pack-for", default="host", help="kite-convert --pack-for (default host)")
    args = ap.parse_args()
    convert = find_tool(args.bin_dir, "kite-convert")
    run = find_tool(args.bin_dir, "kite-run")
    models = sorted(f[:-5] for f in os.listdir(args.models_dir) if f.endswith(".onnx"))
    if args.models:
        wanted = args.models.split(",")
        models = [m for m in models if m in wanted]
    work = tempfile.mkdtemp(prefix="kite-membench-")
    print(f"CPU: {describe_cpu()}")
    print(f"kite-convert --pack-for {args.pack_for}; kite-run --backend cpu; MiB = 2^20 bytes; "
          f"bound = weights read + arena + workspace + 16 MiB")
    print(f"{'model':20} {'weights':>8} {'read':>8} {'arena':>7} {'work':>6} {'bound':>7} "
          f"{'kite RSS':>8} {'ok':>3} {'ort RSS':>8} | {'kite load':>9} {'ort load':>9} {'ratio':>6}")
    failures = []
    ratios = {}
    for name in models:
        onnx_path = os.path.join(args.models_dir, name + ".onnx")
        kite_path = os.path.join(work, name + ".kite")
        report_path = os.path.join(work, name + ".json")
        proc = subprocess.run([convert, onnx_path, "-o", kite_path, "--report", report_path, "-q",
                               "--pack-for", args.pack_for],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if proc.returncode != 0:
            print(f"{name:20} conversion failed: {proc.stderr.strip()[:200]}")
            failures.append(name)
            continue
        with open(report_path) as fh:
            report = json.load(fh)
        mem = report["memory"]
        packed = report.get("packed", {})
        weights = report["weight_bytes"]
        read = weights - packed.get("source_bytes", 0) + packed.get("bytes", 0)
        # Peak RSS of one load + run, in its own process.
        json_path = os.path.join(work, name + ".run.json")
        out = subprocess.run([sys.executable, "-c", RSS_CHILD, run, kite_path, "--backend", "cpu", "--quiet",
                              "--json", json_path], stdout=subprocess.PIPE, text=True, check=True).stdout
        kite_rss = int(out.strip().splitlines()[-1]) * 1024
        with open(json_path) as fh:
            run_report = json.load(fh)
        workspace = sum(b.get("workspace_bytes", 0) for b in run_report["backends"])
        bound = read + mem["arena_bytes"] + workspace + SLACK
        ok = kite_rss <= bound
        if not ok:
            failures.append(name)
        # Load to ready session: fresh processes, the smallest.
        loads = []
        for _ in range(args.load_runs):
            subprocess.run([run, kite_path, "--backend", "cpu", "--quiet", "--json", json_path],
                           stdout=subprocess.DEVNULL, check=True)
            with open(json_path) as fh:
                lm = json.load(fh)["load_ms"]
            loads.append(lm["model"] + lm["session"])
        kite_load = min(loads)
        ort_out = subprocess.run([sys.executable, "-c", ORT_CHILD, onnx_path, str(args.load_runs)],
                                 stdout=subprocess.PIPE, text=True, check=True).stdout
        base, peak, ort_load = ort_out.split()
        ort_rss = int(peak) * 1024
        ratio = kite_load / float(ort_load)
        ratios[name] = ratio
        print(f"{name:20} {mib(weights):8.2f} {mib(read):8.2f} {mib(mem['arena_bytes']):7.2f} "
              f"{mib(workspace):6.2f} {mib(bound):7.2f} {mib(kite_rss):8.2f} {'yes' if ok else 'NO':>3} "
              f"{mib(ort_rss):8.2f} | {kite_load:7.2f}ms {float(ort_load):7.2f}ms {ratio:6.3f}")
    print()
    print("RSS within bound on every model" if not failures else f"over the bound or failed: {', '.join(failures)}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
