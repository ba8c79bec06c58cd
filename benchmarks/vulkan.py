#!/usr/bin/env python3
# Python: the default python3 (numpy). ncnn and pnnx run in a virtual
# environment of this benchmark's own (created on first use, see --venv).
"""Vulkan latency benchmark: each model of the model set on Kite Vulkan, on
Kite CPU and on ncnn-Vulkan, on the same device, in one run of this script
(compare ratios within a run, not absolute times across runs), in fp32 and
in half precision (issue 18).

Usage:
  benchmarks/vulkan.py --bin-dir build/default --models-dir DIR
                       [--models resnet18,...] [--precision fp32,mixed]
                       [--warmup 3] [--iterations 10]
                       [--threads 1] [--venv benchmarks/.venv-ncnn]

Models: DIR/<name>.onnx from scripts/export_models.py --models all.

Kite: `kite-convert --precision P --report` (-O2) for each P of --precision
(fp32, fp16, mixed; default fp32,mixed), then `kite-run --backend
vulkan,cpu` and `kite-run --backend cpu` (p50 of --iterations runs after
--warmup). The .kite file's size and its arena (the report's
memory.arena_bytes) are printed for each P; for fp16 and mixed the notes
count the fp16 nodes per backend (a node the Vulkan backend declines runs on
the CPU, and the latency then includes that).

ncnn: PyPI `ncnn`, Vulkan compute on. For fp32: fp16 packed/storage/
arithmetic and bf16 off, so it computes in fp32 like Kite, on a model made
by PyPI `pnnx` with fp32 weights (`pnnx DIR/<name>.onnx
inputshape=[1,3,224,224] fp16=0` writes <name>.ncnn.param / .ncnn.bin). For
fp16 and mixed: ncnn's own half precision, its default (use_fp16_packed,
use_fp16_storage and use_fp16_arithmetic on, where the device has them), on
a model made with fp16=1 (fp16 weights in the .bin). Both live in a venv of
this benchmark's own (`python3 -m venv --system-site-packages`, then `pip
install ncnn pnnx`), created on first use. A model pnnx or ncnn cannot take
is reported as such in its column.

Prints one table, a row per model and precision: .kite file and arena
bytes, Kite Vulkan p50, Kite CPU p50, ncnn Vulkan p50 (ms), Kite Vulkan /
ncnn Vulkan, and ncnn's .bin bytes.
"""
import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile

import onnx

from bench_common import ensure_venv, find_tool

HERE = os.path.dirname(os.path.abspath(__file__))

NCNN_RUNNER = r'''
import json, sys, time
import ncnn
import numpy as np
param, binary, shape, dtype, warmup, iterations, threads, half = sys.argv[1:9]
shape = [int(s) for s in shape.split(",")]
half = half == "1"
net = ncnn.Net()
net.opt.use_vulkan_compute = True
net.opt.use_fp16_packed = half
net.opt.use_fp16_storage = half
net.opt.use_fp16_arithmetic = half
net.opt.use_bf16_storage = False
net.opt.num_threads = int(threads)
if net.load_param(param) != 0 or net.load_model(binary) != 0:
    sys.exit("ncnn cannot load the model")
rng = np.random.default_rng(0)
if dtype == "int64":
    x = rng.integers(0, 10, size=shape[1:]).astype(np.float32)
else:
    x = rng.random(shape[1:], dtype=np.float32)
def once():
    ex = net.create_extractor()
    ex.input("in0", ncnn.Mat(x))
    ret, out = ex.extract("out0")
    if ret != 0:
        sys.exit("ncnn extract failed")
    np.array(out)
for _ in range(int(warmup)):
    once()
times = []
for _ in range(int(iterations)):
    t0 = time.perf_counter()
    once()
    times.append((time.perf_counter() - t0) * 1000.0)
times.sort()
print(json.dumps({"p50": times[len(times) // 2], "device": ncnn.get_gpu_count()}))
'''


def input_spec(onnx_path):
    m = onnx.load(onnx_path, load_external_data=False)
    i = m.graph.input[0]
    shape = [d.dim_value for d in i.type.tensor_type.shape.dim]
    dtype = "int64" if i.type.tensor_type.elem_type == onnx.TensorProto.INT64 else "float32"
    return shape, dtype


def kite_p50(run, kite_path, backend, args, work, name, fp16_nodes=None):
    """(p50 ms, note) of kite-run; with fp16_nodes (the report's names of the
    nodes in fp16), the note counts them per backend."""
    report = os.path.join(work, f"{name}.{backend.replace(',', '_')}.json")
    cmd = [run, kite_path, "--quiet", "--backend", backend, "--threads", str(args.threads),
           "--warmup", str(args.warmup), "--iterations", str(args.iterations), "--json", report]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return None, (p.stderr.strip() or p.stdout.strip())[:120]
    with open(report) as fh:
        r = json.load(fh)
    placement = r.get("placement", [])
    on_cpu = sum(1 for n in placement if n.get("backend") == "cpu")
    notes = [f"{on_cpu} nodes on cpu"] if backend != "cpu" and on_cpu else []
    if backend != "cpu" and fp16_nodes:
        per_backend = collections.Counter(n["backend"] for n in placement if n["node"] in fp16_nodes)
        notes.append("fp16 nodes: " + ", ".join(f"{b} {k}" for b, k in per_backend.most_common()))
    return r["latency_ms"]["p50"], "; ".join(notes)


def ncnn_p50(python, pnnx, onnx_path, args, work, name, half):
    """(p50 ms, .bin bytes, note) of ncnn-Vulkan, in fp32 or (half) with
    ncnn's fp16 storage and arithmetic on fp16 weights."""
    shape, dtype = input_spec(onnx_path)
    model_dir = os.path.join(work, "ncnn_fp16" if half else "ncnn")
    os.makedirs(model_dir, exist_ok=True)
    local = os.path.join(model_dir, name + ".onnx")
    if not os.path.exists(local):
        os.symlink(os.path.abspath(onnx_path), local)
    param = os.path.join(model_dir, name + ".ncnn.param")
    binary = os.path.join(model_dir, name + ".ncnn.bin")
    if not os.path.exists(param):
        p = subprocess.run([pnnx, local, "inputshape=[" + ",".join(map(str, shape)) + "]" +
                            ("i64" if dtype == "int64" else ""), "fp16=1" if half else "fp16=0"],
                           capture_output=True, text=True, cwd=model_dir)
        if p.returncode != 0 or not os.path.exists(param):
            return None, None, "pnnx failed"
    size = os.path.getsize(binary) if os.path.exists(binary) else None
    p = subprocess.run([python, "-c", NCNN_RUNNER, param, binary, ",".join(map(str, shape)), dtype,
                        str(args.warmup), str(args.iterations), str(args.threads), "1" if half else "0"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        return None, size, "ncnn failed: " + (p.stderr.strip().splitlines() or [""])[-1][:80]
    return json.loads(p.stdout.strip().splitlines()[-1])["p50"], size, ""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin-dir", default="build/default")
    ap.add_argument("--models-dir", required=True)
    ap.add_argument("--models", default="", help="comma-separated names (default: every .onnx in the folder)")
    ap.add_argument("--threads", type=int, default=1, help="Kite CPU and ncnn host threads")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--venv", default=os.path.join(HERE, ".venv-ncnn"))
    ap.add_argument("--workdir", default="")
    ap.add_argument("--no-ncnn", action="store_true")
    ap.add_argument("--precision", default="fp32,mixed",
                    help="comma-separated kite-convert --precision values (fp32, fp16, mixed); "
                         "ncnn runs with its fp16 on for fp16 and mixed")
    args = ap.parse_args()
    precisions = [p for p in args.precision.split(",") if p]
    bad = [p for p in precisions if p not in ("fp32", "fp16", "mixed")]
    if bad or not precisions:
        ap.error(f"--precision takes fp32, fp16 and mixed, not {','.join(bad) or 'nothing'}")
    convert = find_tool(args.bin_dir, "kite-convert")
    run = find_tool(args.bin_dir, "kite-run")
    work = args.workdir or tempfile.mkdtemp(prefix="kite-vulkan-bench-")
    os.makedirs(work, exist_ok=True)
    python = pnnx = None
    if not args.no_ncnn:
        python, missing = ensure_venv(args.venv, ["ncnn", "pnnx"])
        if python is None or missing:
            sys.exit(f"no ncnn venv at {args.venv}: {missing} (or run with --no-ncnn)")
        pnnx = os.path.join(os.path.dirname(python), "pnnx")
    names = [n for n in args.models.split(",") if n] or sorted(
        f[:-5] for f in os.listdir(args.models_dir) if f.endswith(".onnx") and ".pnnx" not in f)
    print(f"{'model':20} {'precision':9} {'kite file':>11} {'kite arena':>11} {'kite vulkan':>12} "
          f"{'kite cpu':>10} {'ncnn vulkan':>12} {'kite/ncnn':>10} {'ncnn bin':>11}  notes")
    for name in names:
        onnx_path = os.path.join(args.models_dir, name + ".onnx")
        for precision in precisions:
            kite_path = os.path.join(work, f"{name}.{precision}.kite")
            report_path = os.path.join(work, f"{name}.{precision}.report.json")
            p = subprocess.run([convert, onnx_path, "-o", kite_path, "-q", "--precision", precision,
                                "--report", report_path], capture_output=True, text=True)
            if p.returncode != 0:
                print(f"{name:20} {precision:9} conversion failed: {p.stderr.strip()[:100]}")
                continue
            with open(report_path) as fh:
                report = json.load(fh)
            fp16_nodes = {n["name"] for n in (report.get("precision") or {}).get("nodes", [])
                          if n["precision"] == "fp16"}
            tag = f"{name}.{precision}"
            vk, vk_note = kite_p50(run, kite_path, "vulkan,cpu", args, work, tag, fp16_nodes)
            cpu, cpu_note = kite_p50(run, kite_path, "cpu", args, work, tag)
            half = precision != "fp32"
            nc, nc_size, nc_note = ((None, None, "skipped") if args.no_ncnn else
                                    ncnn_p50(python, pnnx, onnx_path, args, work, name, half))
            fmt = lambda v: f"{v:.2f}" if v is not None else "-"  # noqa: E731
            ratio = f"{vk / nc:.2f}" if vk is not None and nc else "-"
            notes = "; ".join(n for n in (vk_note, cpu_note, nc_note) if n)
            print(f"{name:20} {precision:9} {os.path.getsize(kite_path):11d} "
                  f"{report['memory']['arena_bytes']:11d} {fmt(vk):>12} {fmt(cpu):>10} {fmt(nc):>12} "
                  f"{ratio:>10} {nc_size if nc_size is not None else '-':>11}  {notes}", flush=True)


if __name__ == "__main__":
    main()
