#!/usr/bin/env python3
# Python: any python3 (standard library only).
"""The memory budget on real models (issue 20's done-when checks).

For each --onnx model:
  1. kite-convert without a budget, and with --memory-budget RATIO (default
     0.6x) --report: the budgeted conversion must succeed (budget met), its
     report must say so (arena_after_bytes <= budget_bytes, budget_bytes =
     ratio x the unbudgeted lower bound), and the unbudgeted file's arena
     must be that lower bound's plan;
  2. kite-plan-check proves the budgeted file's plan;
  3. kite-run both files on the same seeded random inputs with the arena
     poisoned (NaN bytes): every output must be byte-for-byte identical
     (patches and recomputation repeat the same arithmetic, see
     docs/MEMORY.md), so no tolerance.

Prints one line per check, then exactly "N passed, N failed"; exits 1 if
anything failed.

Usage:
  tests/e2e/budget_models.py --kite-convert P --kite-run P --kite-plan-check P \\
      --workdir DIR [--ratio 0.6] --onnx a.onnx [--onnx b.onnx ...]
"""
import argparse
import json
import os
import subprocess
import sys


def run(cmd, env=None):
    return subprocess.run(cmd, capture_output=True, text=True, env=env)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kite-convert", required=True)
    ap.add_argument("--kite-run", required=True)
    ap.add_argument("--kite-plan-check", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--ratio", type=float, default=0.6)
    ap.add_argument("--onnx", action="append", required=True)
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    passed = failed = 0

    def check(ok, what):
        nonlocal passed, failed
        print(("PASS " if ok else "FAIL ") + what, flush=True)
        if ok:
            passed += 1
        else:
            failed += 1
        return ok

    env = dict(os.environ, KITE_POISON_ARENA="1")
    for onnx_path in args.onnx:
        name = os.path.splitext(os.path.basename(onnx_path))[0]
        base = os.path.join(args.workdir, name)
        plain, budgeted = base + ".kite", base + "_budget.kite"
        r = run([args.kite_convert, "-q", onnx_path, "-o", plain, "--report", base + ".json"])
        if not check(r.returncode == 0, f"{name}: converts without a budget {r.stderr.strip()}"):
            continue
        r = run([args.kite_convert, "-q", onnx_path, "-o", budgeted,
                 "--memory-budget", f"{args.ratio}x", "--report", base + "_budget.json"])
        if not check(r.returncode == 0, f"{name}: meets --memory-budget {args.ratio}x {r.stderr.strip()}"):
            continue
        with open(base + ".json") as f:
            plain_mem = json.load(f)["memory"]
        with open(base + "_budget.json") as f:
            b = json.load(f)["memory_budget"]
        check(b["met"] and b["arena_after_bytes"] <= b["budget_bytes"]
              and b["lower_bound_bytes"] == plain_mem["lower_bound_bytes"]
              and b["budget_bytes"] == int(args.ratio * plain_mem["lower_bound_bytes"]),
              f"{name}: report: lower bound {b['lower_bound_bytes']}, budget {b['budget_bytes']}, "
              f"arena {b['arena_before_bytes']} -> {b['arena_after_bytes']}, "
              f"+{b['flops_added']} FLOPs ({len(b['patches'])} patches, "
              f"{len(b['recomputed'])} recomputations)")
        r = run([args.kite_plan_check, budgeted])
        check(r.returncode == 0 and "plan OK" in r.stdout, f"{name}: kite-plan-check {r.stdout.strip()}{r.stderr.strip()}")
        outs = {}
        for tag, path in (("plain", plain), ("budget", budgeted)):
            out_dir = os.path.join(args.workdir, name + "_out_" + tag)
            os.makedirs(out_dir, exist_ok=True)
            for old in os.listdir(out_dir):
                os.remove(os.path.join(out_dir, old))
            r = run([args.kite_run, path, "--seed", "7", "--output-dir", out_dir, "--quiet"], env=env)
            if not check(r.returncode == 0, f"{name}: kite-run {tag} {r.stderr.strip()}"):
                break
            outs[tag] = {}
            for fn in sorted(os.listdir(out_dir)):
                with open(os.path.join(out_dir, fn), "rb") as f:
                    outs[tag][fn] = f.read()
        if len(outs) == 2:
            check(outs["plain"].keys() == outs["budget"].keys() and len(outs["plain"]) > 0
                  and all(outs["plain"][k] == outs["budget"][k] for k in outs["plain"]),
                  f"{name}: outputs bit-identical ({', '.join(outs['plain'])})")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
