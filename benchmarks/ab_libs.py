#!/usr/bin/env python3
# Runs with the default python3 (standard library only).
"""A/B two builds of libkite on one .kite file, both at the same time.

On the shared VMs these benchmarks run on, a run's speed drifts by 10-30%
within minutes, so two builds timed one after the other (even alternately)
differ by more than most kernel changes: an A/A comparison of one library
with itself moved 3.5% on squeezenet's total and 8% on single nodes. Here
`kite-run` with library A runs pinned to one CPU while `kite-run` with
library B runs pinned to another, over the same seconds; then the CPUs are
swapped, so a CPU that is slower than the other (a busy neighbour) weighs on
both. Each pair gives B's p50 over A's; the script prints every pair and
the geometric mean of the ratios. Both processes share the last-level cache
and memory bandwidth, so a memory-bound model runs slower than alone, the
same for both.

    python3 benchmarks/ab_libs.py --a /tmp/old --b build/default/sdk \\
        --model squeezenet1_1.kite [--threads 1] [--rounds 3]

--a and --b are folders holding libkite.so.0 (put on LD_LIBRARY_PATH).
Needs two CPUs per thread count asked for (--threads 1 on a 2-CPU machine).

--alternate instead runs A, then B, one at a time on every CPU (so 2
threads on a 2-CPU machine, and no shared cache), --rounds times each, and
compares the best run of each: each run's fastest iteration, then the
fastest of the rounds. The minimum is the run least disturbed by the
machine's other tenants; on the Zen 3 VM of 2026-12-03, where p50s moved
by 10-40% from run to run, the best of 4-8 rounds repeated within 2-5%.

    python3 benchmarks/ab_libs.py --alternate --a /tmp/old --b /tmp/new \
        --model unet_small.kite --threads 2 --rounds 6 --warmup 3 --iterations 40

--alternate prints kite-core-latency's line (built beside kite-run) before
and after: at 2 threads the result holds for the vCPU placement it names
(docs/CPU.md, "Where the threads run").
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

from bench_common import core_latency


def run_pair(args, cpus_a, cpus_b, workdir):
    procs = []
    for tag, lib, cpus in (("a", args.a, cpus_a), ("b", args.b, cpus_b)):
        env = dict(os.environ, LD_LIBRARY_PATH=os.path.abspath(lib))
        out = os.path.join(workdir, f"{tag}.json")
        cmd = ["taskset", "-c", cpus, args.kite_run, args.model, "--threads", str(args.threads),
               "--warmup", str(args.warmup), "--iterations", str(args.iterations), "--quiet",
               "--json", out]
        procs.append((subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL), out))
    p50 = []
    for proc, out in procs:
        if proc.wait() != 0:
            sys.exit(f"kite-run failed (exit {proc.returncode}) on {args.model}")
        with open(out) as f:
            p50.append(json.load(f)["latency_ms"]["p50"])
    return p50


def run_one(args, lib, workdir):
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.abspath(lib))
    out = os.path.join(workdir, "one.json")
    cmd = [args.kite_run, args.model, "--threads", str(args.threads), "--warmup", str(args.warmup),
           "--iterations", str(args.iterations), "--quiet", "--json", out]
    if subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL).returncode != 0:
        sys.exit(f"kite-run failed on {args.model}")
    with open(out) as f:
        return json.load(f)["latency_ms"]["min"]


def alternate(args):
    best = {"A": [], "B": []}
    print(core_latency(os.path.dirname(args.kite_run)) + " (at the start)")
    with tempfile.TemporaryDirectory() as workdir:
        for r in range(args.rounds):
            for tag, lib in (("A", args.a), ("B", args.b)):
                best[tag].append(run_one(args, lib, workdir))
            print(f"round {r + 1}  A best {best['A'][-1]:.4f} ms  B best {best['B'][-1]:.4f} ms")
    a, b = sorted(best["A"]), sorted(best["B"])
    second = f", second best {a[1]:.4f} / {b[1]:.4f}" if args.rounds > 1 else ""
    print(core_latency(os.path.dirname(args.kite_run)) + " (at the end)")
    print(f"{os.path.basename(args.model)} threads {args.threads}: best A {a[0]:.4f} ms, B {b[0]:.4f} ms, "
          f"B/A {b[0] / a[0]:.3f} ({args.rounds} rounds{second})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--a", required=True, help="folder with library A's libkite.so.0")
    ap.add_argument("--b", required=True, help="folder with library B's libkite.so.0")
    ap.add_argument("--model", required=True, help=".kite file")
    ap.add_argument("--kite-run", default="build/default/apps/kite-run")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3, help="pairs of runs (each on both CPU orders)")
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--iterations", type=int, default=300)
    ap.add_argument("--alternate", action="store_true",
                    help="A then B, one at a time on every CPU; compare the best runs")
    args = ap.parse_args()
    if args.alternate:
        alternate(args)
        return
    cpus = sorted(os.sched_getaffinity(0))
    t = args.threads
    if len(cpus) < 2 * t:
        sys.exit(f"needs {2 * t} CPUs for two runs of {t} thread(s); this process may use {len(cpus)}")
    first = ",".join(map(str, cpus[:t]))
    second = ",".join(map(str, cpus[t:2 * t]))
    ratios = []
    with tempfile.TemporaryDirectory() as workdir:
        for r in range(args.rounds):
            for cpus_a, cpus_b in ((first, second), (second, first)):
                a, b = run_pair(args, cpus_a, cpus_b, workdir)
                ratios.append(b / a)
                print(f"round {r + 1}  A on {cpus_a}: {a:.4f} ms  B on {cpus_b}: {b:.4f} ms  B/A {b / a:.3f}")
    gm = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
    print(f"{os.path.basename(args.model)} threads {t}: B/A geometric mean {gm:.3f} "
          f"(min {min(ratios):.3f}, max {max(ratios):.3f}, {len(ratios)} pairs)")


if __name__ == "__main__":
    main()
