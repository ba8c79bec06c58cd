#!/usr/bin/env python3
# Python: the default python3 (pip onnxruntime + numpy), for the onnxruntime side.
"""Memory benchmark: Kite's static plan against the lower bound, the naive sum
and what onnxruntime actually uses, for every model of the model test set.

For each ONNX model in --models-dir (export them with
`/usr/bin/python3 scripts/export_models.py --out DIR --models all`):
  * kite-convert -O2 --report: naive bytes (sum of all activation tensors),
    arena bytes, lower bound (peak of live bytes), arena / lower bound;
  * peak resident memory (ru_maxrss) of one process that loads and runs the
    model once, for kite-run and for onnxruntime (CPUExecutionProvider,
    default options), and the same minus the process's resident memory right
    before loading the model (interpreter/library baseline). Weights count in
    both (Kite maps them; onnxruntime copies them).

Usage: benchmarks/memory.py --bin-dir build/default --models-dir DIR
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile

from bench_common import find_tool

ORT_CHILD = r'''
import resource, sys, numpy as np, onnxruntime as ort
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
s = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
feeds = {}
for i in s.get_inputs():
    shape = [d if isinstance(d, int) else 1 for d in i.shape]
    if "int" in i.type:
        feeds[i.name] = np.random.randint(0, 10, size=shape).astype(np.int64)
    else:
        feeds[i.name] = np.random.rand(*shape).astype(np.float32)
s.run(None, feeds)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(base, peak)
'''


def mib(b):
    return b / 1048576.0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin-dir", default="build/default")
    ap.add_argument("--models-dir", required=True)
    args = ap.parse_args()
    convert = find_tool(args.bin_dir, "kite-convert")
    run = find_tool(args.bin_dir, "kite-run")
    models = sorted(f for f in os.listdir(args.models_dir) if f.endswith(".onnx"))
    work = tempfile.mkdtemp(prefix="kite-membench-")
    print(f"{'model':22} {'naive MiB':>10} {'arena MiB':>10} {'bound MiB':>10} {'arena/bound':>12} "
          f"{'kite RSS':>9} {'ort RSS':>9} {'ort delta':>10}")
    for f in models:
        name = f[:-5]
        onnx_path = os.path.join(args.models_dir, f)
        kite_path = os.path.join(work, name + ".kite")
        report_path = os.path.join(work, name + ".json")
        proc = subprocess.run([convert, onnx_path, "-o", kite_path, "--report", report_path, "-q"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if proc.returncode != 0:
            print(f"{name:22} conversion failed: {proc.stderr.strip()[:200]}")
            continue
        with open(report_path) as fh:
            mem = json.load(fh)["memory"]
        # Each measurement in its own child so ru_maxrss is that child's peak.
        kite_out = subprocess.run(
            [sys.executable, "-c",
             "import resource,subprocess,sys; subprocess.run(sys.argv[1:], check=True, "
             "stdout=subprocess.DEVNULL); print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)",
             run, kite_path, "--quiet"], stdout=subprocess.PIPE, text=True, check=True).stdout
        kite_rss = int(kite_out.strip().splitlines()[-1])
        ort_out = subprocess.run([sys.executable, "-c", ORT_CHILD, onnx_path],
                                 stdout=subprocess.PIPE, text=True, check=True).stdout
        base, peak = (int(x) for x in ort_out.split())
        print(f"{name:22} {mib(mem['naive_bytes']):10.2f} {mib(mem['arena_bytes']):10.2f} "
              f"{mib(mem['lower_bound_bytes']):10.2f} {mem['arena_bytes'] / max(1, mem['lower_bound_bytes']):12.3f} "
              f"{kite_rss / 1024:8.1f}M {peak / 1024:8.1f}M {(peak - base) / 1024:9.1f}M")


if __name__ == "__main__":
    main()
