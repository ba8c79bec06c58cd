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
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import kite_driver  # noqa: E402


def main():
    ap = kite_driver.tool_parser(__doc__, tools=("kite-convert", "kite-run", "kite-plan-check"))
    ap.add_argument("--ratio", type=float, default=0.6)
    ap.add_argument("--onnx", action="append", required=True)
    args = kite_driver.parse_args(ap)
    verdicts = kite_driver.Verdicts()
    check = verdicts.record

    env = dict(os.environ, KITE_POISON_ARENA="1")
    for onnx_path in args.onnx:
        name = os.path.splitext(os.path.basename(onnx_path))[0]
        base = os.path.join(args.workdir, name)
        plain, budgeted = base + ".kite", base + "_budget.kite"
        r = kite_driver.run_tool([args.kite_convert, "-q", onnx_path, "-o", plain, "--report", base + ".json"])
        if not check(r.returncode == 0, f"{name}: converts without a budget {r.stderr.strip()}"):
            continue
        r = kite_driver.run_tool([args.kite_convert, "-q", onnx_path, "-o", budgeted,
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
        r = kite_driver.run_tool([args.kite_plan_check, budgeted])
        check(r.returncode == 0 and "plan OK" in r.stdout, f"{name}: kite-plan-check {r.stdout.strip()}{r.stderr.strip()}")
        outs = {}
        for tag, path in (("plain", plain), ("budget", budgeted)):
            out_dir = os.path.join(args.workdir, name + "_out_" + tag)
            kite_driver.empty_dir(out_dir)
            r = kite_driver.run_tool([args.kite_run, path, "--seed", "7", "--output-dir", out_dir,
                                      "--quiet"], env=env)
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
    return verdicts.summary()


if __name__ == "__main__":
    sys.exit(main())
