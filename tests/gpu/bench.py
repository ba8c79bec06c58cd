#!/usr/bin/env python3
"""Latency at batch 1 on the GPU: Kite's CUDA backend against PyTorch eager
and PyTorch with CUDA graphs, on the model set (scripts/export_models.py's
builders: same architectures, random seeded weights; weights do not change
the time).

Kite: kite-run --backend cuda --warmup W --iterations N (p50 of the runs;
each run uploads the input, replays the CUDA graph(s), downloads the
output and waits). PyTorch: the module in eval mode under
torch.inference_mode on the same GPU, the input already on the device and
the output left there (PyTorch's best case); eager: one call per run;
graphs: the call captured once in a torch.cuda.CUDAGraph and replayed; each
run ends with torch.cuda.synchronize(); p50 of N runs after W warm-up runs.

Usage: bench.py --kite-run P --models DIR(.kite files) --names a,b,... --out FILE.md
       [--option K=V ...] [--label NAME] [--torch]
Appends a Markdown table to FILE and prints it.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))


def kite_latency(kite_run, backend, model, options, warmup, iterations):
    report = model + ".bench.json"
    cmd = [kite_run, model, "--backend", backend, "--strict", "--warmup", str(warmup), "--iterations",
           str(iterations), "--json", report, "--quiet"]
    for o in options:
        cmd += ["--backend-option", f"{backend}:{o}"]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        return None, r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "kite-run failed"
    d = json.load(open(report))
    return d["latency_ms"]["p50"], ""


def torch_latencies(name, warmup, iterations):
    import torch
    import export_models as em
    spec = em.MODELS[name]
    torch.manual_seed(0)
    model = spec.build()
    em.randomise_batchnorm(model, torch.Generator().manual_seed(1))
    model = model.eval().cuda()
    args = []
    for inp in spec.inputs:
        if inp.dtype.is_floating_point:
            args.append(torch.randn(inp.shape, dtype=inp.dtype, device="cuda"))
        else:
            args.append(torch.randint(inp.int_range[0], inp.int_range[1], inp.shape, dtype=inp.dtype, device="cuda"))

    def timed(fn):
        for _ in range(warmup):
            fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(iterations):
            t0 = time.perf_counter()
            fn()
            torch.cuda.synchronize()
            times.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(times)

    with torch.inference_mode():
        eager = timed(lambda: model(*args))
        graphed = None
        try:
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    model(*args)
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                model(*args)
            graphed = timed(g.replay)
        except Exception as e:  # a model PyTorch cannot capture: say so
            print(f"{name}: torch CUDA graph capture failed: {e}", file=sys.stderr)
    return eager, graphed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kite-run", required=True)
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--models", required=True, help="folder of converted .kite files")
    ap.add_argument("--names", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--option", dest="options", action="append", default=[], help="KEY=VALUE for the backend (repeatable)")
    ap.add_argument("--label", default="defaults")
    ap.add_argument("--torch", action="store_true", help="also time PyTorch eager and CUDA graphs")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--iterations", type=int, default=100)
    a = ap.parse_args()
    def ms(v):
        return "-" if v is None else f"{v:.3f}"

    def ratio(a_, b_):
        return "-" if a_ is None or b_ is None else f"{a_ / b_:.2f}"

    # Rows are written as they are measured: a run cut short keeps them.
    with open(a.out, "a") as f:
        f.write(f"\n### Latency, batch 1, p50 ms (Kite {a.backend}: {a.label})\n\n")
        if a.torch:
            f.write("| model | Kite | PyTorch eager | PyTorch CUDA graphs | Kite / eager | Kite / graphs | note |\n"
                    "|---|---|---|---|---|---|---|\n")
        else:
            f.write("| model | Kite | note |\n|---|---|---|\n")
    for name in a.names.split(","):
        model = os.path.join(a.models, name + ".kite")
        kite, why = kite_latency(a.kite_run, a.backend, model, a.options, a.warmup, a.iterations) \
            if os.path.exists(model) else (None, "no .kite file")
        eager = graphed = None
        if a.torch:
            try:
                eager, graphed = torch_latencies(name, a.warmup, a.iterations)
            except Exception as e:
                why = (why + "; " if why else "") + f"torch: {e}"
        with open(a.out, "a") as f:
            if a.torch:
                f.write(f"| {name} | {ms(kite)} | {ms(eager)} | {ms(graphed)} | {ratio(kite, eager)} | "
                        f"{ratio(kite, graphed)} | {why} |\n")
            else:
                f.write(f"| {name} | {ms(kite)} | {why} |\n")
        print(f"{name}: kite {ms(kite)} ms, torch eager {ms(eager)} ms, torch graphs {ms(graphed)} ms {why}", flush=True)


if __name__ == "__main__":
    main()
