#!/usr/bin/env python3
# Python: the default python3 (pip onnxruntime + onnx + numpy), for the onnxruntime side.
"""CPU latency: Kite against onnxruntime on the model set, at several thread
counts, in one run of this script (compare ratios, not absolute times from
different runs or machines).

Usage:
  benchmarks/speed.py --bin-dir build/default --models-dir DIR [--models a,b]
                      [--threads 1,2] [--rounds 3] [--warmup 3] [--iterations 20]
                      [--kite python|kite-run] [--kite-python DIR] [--check-binding]

Both engines are timed the same way: in this process, wall clock around one
call that takes the inputs and returns new output arrays (Kite through its
Python package, `kite.Model(...).session(...).run(feeds)`; onnxruntime through
`InferenceSession.run`). When the package cannot be imported (or with
--kite kite-run), Kite's time is kite-run's own in-process timer (its --json
latency p50), which leaves out the binding's input copy and output allocation
that onnxruntime's figure includes, so it favours Kite slightly; the table
says which was used. --check-binding also runs kite-run and prints its p50
next to the package's, which shows what the binding costs.

Method: per model, sessions are made once per engine and thread count; then
--rounds rounds, each timing every (threads, engine) pair for --iterations
runs after --warmup runs, the engines' order rotated from round to round so
neither always runs first (on a warmer or cooler core); per pair the smallest
p50 over the rounds is kept. Before timing, each engine's outputs on the same
seeded inputs are compared with the reference (onnxruntime, which the model
set is checked against in tests/e2e/compare_with_ort.py) by the same rule:
max|x - ref| <= 1e-4 * max|ref|; an engine that fails it is reported as
WRONG and not timed.

Prints the CPU (model name, the ISA extensions that matter for fp32 kernels,
and the micro-kernel Kite picked), then per model and thread count the p50s
and Kite/onnxruntime, and the geometric mean of that ratio per thread count.
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnxruntime as ort

from bench_common import describe_cpu, find_tool, seeded_feeds, time_calls

MODEL_SET = ["resnet18", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0",
             "squeezenet1_1", "shufflenet_v2_x1_0", "convnext_tiny", "vit_small",
             "text_transformer", "unet_small"]
RTOL_OF_MAX = 1e-4  # the model set's tolerance (tests/e2e/compare_with_ort.py explains it)


def check(outputs, ref):
    """'' when every output is within the tolerance, else what differs."""
    for name, r in ref.items():
        if name not in outputs:
            return f"output '{name}' missing"
        x = np.asarray(outputs[name])
        if x.shape != r.shape:
            return f"output '{name}' shape {x.shape}, expected {r.shape}"
        if not np.issubdtype(r.dtype, np.floating):
            if not np.array_equal(x, r):
                return f"output '{name}' differs"
            continue
        diff = float(np.max(np.abs(x.astype(np.float64) - r))) if r.size else 0.0
        scale = float(np.max(np.abs(r))) if r.size else 0.0
        bound = RTOL_OF_MAX * (scale if scale > 0 else 1.0)
        if not diff <= bound:
            return f"output '{name}' max|diff| {diff:.3g} > {bound:.3g}"
    return ""


class OrtEngine:
    name = "ort"

    def __init__(self, onnx_path, threads):
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        self.s = ort.InferenceSession(onnx_path, so, providers=["CPUExecutionProvider"])
        self.names = [o.name for o in self.s.get_outputs()]

    def run(self, feeds):
        return dict(zip(self.names, self.s.run(None, feeds)))

    def p50(self, feeds, warmup, iterations):
        return time_calls(lambda: self.s.run(None, feeds), warmup, iterations)


class KitePyEngine:
    name = "kite"

    def __init__(self, kite_mod, kite_path, threads):
        self.s = kite_mod.Model(kite_path).session(backends=["cpu"], threads=threads, strict=True)

    def run(self, feeds):
        return self.s.run(feeds)

    def p50(self, feeds, warmup, iterations):
        return time_calls(lambda: self.s.run(feeds), warmup, iterations)


class KiteRunEngine:
    """kite-run in a child process; its own timer (excludes process start and load)."""
    name = "kite"

    def __init__(self, run_tool, kite_path, threads, workdir):
        self.tool, self.path, self.threads, self.workdir = run_tool, kite_path, threads, workdir

    def _inputs(self, feeds):
        args = []
        for name, arr in feeds.items():
            f = os.path.join(self.workdir, re.sub(r"[^A-Za-z0-9._-]", "_", name) + ".in.npy")
            np.save(f, arr)
            args += ["--input", f"{name}={f}"]
        return args

    def run(self, feeds):
        out_dir = os.path.join(self.workdir, "out")
        os.makedirs(out_dir, exist_ok=True)
        p = subprocess.run([self.tool, self.path, "--quiet", "--threads", str(self.threads),
                            "--backend", "cpu", "--strict", "--output-dir", out_dir]
                           + self._inputs(feeds), capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(p.stderr.strip()[-300:])
        return {f[:-4]: np.load(os.path.join(out_dir, f)) for f in os.listdir(out_dir)
                if f.endswith(".npy")}

    def p50(self, feeds, warmup, iterations):
        report = os.path.join(self.workdir, "report.json")
        p = subprocess.run([self.tool, self.path, "--quiet", "--threads", str(self.threads),
                            "--backend", "cpu", "--strict", "--warmup", str(warmup),
                            "--iterations", str(iterations), "--json", report]
                           + self._inputs(feeds), capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(p.stderr.strip()[-300:])
        with open(report) as fh:
            return json.load(fh)["latency_ms"]["p50"]


def import_kite(extra_path):
    if extra_path:
        sys.path.insert(0, os.path.abspath(extra_path))
    try:
        import kite  # noqa: F401
        return kite, ""
    except Exception as e:  # ImportError, or a broken install's error
        return None, f"{type(e).__name__}: {e}"


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin-dir", default="build/default")
    ap.add_argument("--models-dir", required=True, help="folder with <model>.onnx files")
    ap.add_argument("--models", default=",".join(MODEL_SET),
                    help="comma-separated names (default: the model set)")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--kite", choices=["auto", "python", "kite-run"], default="auto",
                    help="how to run Kite: its Python package in this process (python), "
                         "kite-run's own timer (kite-run), or python when it imports (auto)")
    ap.add_argument("--kite-python", default="",
                    help="folder to put first on sys.path to find the kite package")
    ap.add_argument("--check-binding", action="store_true",
                    help="with the package, also time kite-run and print its p50")
    ap.add_argument("--json", default="", help="write the results to this file")
    args = ap.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    models = [m for m in args.models.split(",") if m]

    convert = find_tool(args.bin_dir, "kite-convert")
    run_tool = find_tool(args.bin_dir, "kite-run")
    kite_mod, why = (None, "--kite kite-run") if args.kite == "kite-run" else import_kite(args.kite_python)
    if kite_mod is None and args.kite == "python":
        sys.exit(f"the kite package does not import ({why}); build it (docs/PYTHON.md) or use --kite kite-run")
    mode = "python package, in-process" if kite_mod else f"kite-run's own timer ({why})"

    cpu, isa, ncpu = describe_cpu()
    print(f"CPU: {cpu} ({ncpu} logical CPUs); ISA: {' '.join(isa)}")
    version = subprocess.run([run_tool, "--version"], capture_output=True, text=True).stdout.strip()
    print(f"{version}; onnxruntime {ort.__version__}; Kite timed by: {mode}")
    # The rule of backends/cpu/kernels/sgemm.cpp (builds before it have no avx512 kernel).
    cap = os.environ.get("KITE_CPU_SGEMM", "avx512")
    levels = [("avx512", "avx512f"), ("avx2", "avx2")]
    pick = next((lv for lv, flag in levels[[lv for lv, _ in levels].index(cap):] if flag in isa),
                "portable") if cap in ("avx512", "avx2") else "portable"
    print(f"Kite SGEMM kernel by its dispatch rule: {pick} (KITE_CPU_SGEMM={cap})")
    print(f"method: {args.rounds} rounds, engine order rotated per round, "
          f"{args.warmup} warmup + {args.iterations} timed runs, smallest p50 (ms) kept")

    work = tempfile.mkdtemp(prefix="kite-speed-")
    results = []
    hdr = f"{'model':20} {'thr':>3} {'kite p50':>9} {'ort p50':>9} {'kite/ort':>8}"
    if args.check_binding and kite_mod:
        hdr += f" {'kite-run p50':>12}"
    print(hdr)
    for name in models:
        onnx_path = os.path.join(args.models_dir, name + ".onnx")
        if not os.path.exists(onnx_path):
            print(f"{name:20} missing: {onnx_path}")
            continue
        kite_path = os.path.join(work, name + ".kite")
        p = subprocess.run([convert, onnx_path, "-o", kite_path, "-q"], capture_output=True, text=True)
        if p.returncode != 0:
            print(f"{name:20} conversion failed: {p.stderr.strip()[:200]}")
            continue
        feeds = seeded_feeds(onnx_path)
        engines = {}
        status = {}
        for t in threads:
            o = OrtEngine(onnx_path, t)
            if kite_mod:
                k = KitePyEngine(kite_mod, kite_path, t)
            else:
                k = KiteRunEngine(run_tool, kite_path, t, os.path.join(work, f"{name}-{t}"))
                os.makedirs(k.workdir, exist_ok=True)
            engines[t] = [k, o]
            ref = o.run(feeds) if t == threads[0] else ref
            try:
                status[(t, "kite")] = check(k.run(feeds), ref)
            except Exception as e:  # a run error is reported like a wrong output
                status[(t, "kite")] = f"run failed: {e}"
            status[(t, "ort")] = ""
        best = {}
        for r in range(args.rounds):
            for t in threads:
                order = engines[t][r % 2:] + engines[t][:r % 2]
                for e in order:
                    if status[(t, e.name)]:
                        continue
                    v = e.p50(feeds, args.warmup, args.iterations)
                    best[(t, e.name)] = min(v, best.get((t, e.name), float("inf")))
        for t in threads:
            k, o = best.get((t, "kite")), best.get((t, "ort"))
            row = {"model": name, "threads": t, "kite_p50_ms": k, "ort_p50_ms": o,
                   "kite_status": status[(t, "kite")] or "ok"}
            line = f"{name:20} {t:3d} "
            if k is None:
                line += f"{'WRONG':>9} {o:9.2f} {'-':>8}  kite: {status[(t, 'kite')]}"
            else:
                row["ratio"] = k / o
                line += f"{k:9.2f} {o:9.2f} {k / o:8.2f}"
                if args.check_binding and kite_mod:
                    kr = KiteRunEngine(run_tool, kite_path, t, os.path.join(work, f"{name}-{t}"))
                    os.makedirs(kr.workdir, exist_ok=True)
                    row["kite_run_p50_ms"] = kr.p50(feeds, args.warmup, args.iterations)
                    line += f" {row['kite_run_p50_ms']:12.2f}"
            print(line, flush=True)
            results.append(row)
        del engines
    print("geometric mean of kite/ort:", ", ".join(
        f"{t} thread{'s' if t > 1 else ''} {geomean([r['ratio'] for r in results if r['threads'] == t and 'ratio' in r]):.2f}"
        for t in threads))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"cpu": cpu, "isa": isa, "kite_timing": mode, "results": results}, fh, indent=1)


if __name__ == "__main__":
    main()
