#!/usr/bin/env python3
# Python: the default python3 (pip onnxruntime + numpy), for the onnxruntime side.
"""Latency benchmark: kite-run against onnxruntime on the same ONNX models,
same thread count, measured in one run of this script (compare ratios, not
absolute times from different runs).

Usage: benchmarks/speed.py --bin-dir build/default --models-dir DIR
                           [--threads 2] [--warmup 3] [--iterations 20]
Prints per model: Kite p50 and mean, onnxruntime p50 and mean (ms), and
Kite p50 / onnxruntime p50.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnxruntime as ort


def find_tool(bin_dir, name):
    for sub in ("", "converter", "apps"):
        p = os.path.join(bin_dir, sub, name)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    sys.exit(f"{name} not found under {bin_dir}")


def ort_latency(path, threads, warmup, iterations):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    feeds = {}
    rng = np.random.default_rng(0)
    for i in s.get_inputs():
        shape = [d if isinstance(d, int) else 1 for d in i.shape]
        if "int" in i.type:
            feeds[i.name] = rng.integers(0, 10, size=shape).astype(np.int64)
        else:
            feeds[i.name] = rng.random(shape, dtype=np.float32)
    for _ in range(warmup):
        s.run(None, feeds)
    times = []
    for _ in range(iterations):
        t0 = time.perf_counter()
        s.run(None, feeds)
        times.append((time.perf_counter() - t0) * 1000.0)
    times.sort()
    return times[len(times) // 2], sum(times) / len(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", default="build/default")
    ap.add_argument("--models-dir", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=20)
    args = ap.parse_args()
    convert = find_tool(args.bin_dir, "kite-convert")
    run = find_tool(args.bin_dir, "kite-run")
    work = tempfile.mkdtemp(prefix="kite-speed-")
    print(f"{'model':22} {'kite p50':>9} {'kite mean':>10} {'ort p50':>9} {'ort mean':>9} {'kite/ort':>9}")
    for f in sorted(x for x in os.listdir(args.models_dir) if x.endswith(".onnx")):
        name = f[:-5]
        onnx_path = os.path.join(args.models_dir, f)
        kite_path = os.path.join(work, name + ".kite")
        report = os.path.join(work, name + ".json")
        p = subprocess.run([convert, onnx_path, "-o", kite_path, "-q"], capture_output=True, text=True)
        if p.returncode != 0:
            print(f"{name:22} conversion failed: {p.stderr.strip()[:160]}")
            continue
        p = subprocess.run([run, kite_path, "--quiet", "--threads", str(args.threads),
                            "--warmup", str(args.warmup), "--iterations", str(args.iterations),
                            "--json", report], capture_output=True, text=True)
        if p.returncode != 0:
            print(f"{name:22} kite-run failed: {p.stderr.strip()[:160]}")
            continue
        with open(report) as fh:
            lat = json.load(fh)["latency_ms"]
        o50, omean = ort_latency(onnx_path, args.threads, args.warmup, args.iterations)
        print(f"{name:22} {lat['p50']:9.2f} {lat['mean']:10.2f} {o50:9.2f} {omean:9.2f} {lat['p50'] / o50:9.2f}")


if __name__ == "__main__":
    main()
